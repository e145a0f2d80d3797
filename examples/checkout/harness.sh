# examples/checkout/harness.sh - shell helpers shared by the demo
# (examples/demo/run.sh) and the end-to-end tests (test/e2e/run.sh): a
# throwaway cluster with a database for the checkout workload, the driver,
# and worker processes that follow the contract's command line
# (examples/checkout/README.md).
#
# Source it from bash running with `set -euo pipefail`, after setting REPO
# to the repository's root.  Works as root (the server then runs as
# postgres, see test/bench/cluster.sh; the workers and the driver run as
# root and reach it through its unix socket) and as any other user.
#
# The worker app's command comes from the language (python or node), or
# from $CHECKOUT_APP when set: any program that follows the contract's
# command line can be run by the demo and the tests that way.

CLUSTER_PORT=5499		# names the socket only: every cluster has a directory of its own
PGBOUNCER_PORT=6499
STOP_GRACE=12			# the contract's 10 s for running steps, plus 2 s to flush, release and exit

# die: print a message on stderr and fail
die() {
	echo "$(basename "$0"): $*" >&2
	exit 1
}

# find_python: set PYTHON to an interpreter that imports psycopg 3: $PYTHON
# when set, else python3 on PATH, else /usr/bin/python3.  (Debian's
# python3-psycopg is installed for the system interpreter, which a python3
# that comes first on PATH, from pyenv say, does not see.)
find_python() {
	local p
	for p in ${PYTHON:-} python3 /usr/bin/python3; do
		if "$p" -c 'import psycopg' 2>/dev/null; then
			PYTHON=$p
			return
		fi
	done
	die "no python3 with psycopg 3 found: apt-get install python3-psycopg"
}

# driver ARGS...: examples/checkout/driver.py, against the cluster's database
driver() {
	"$PYTHON" "$REPO/examples/checkout/driver.py" "$@"
}

# sql [PSQL ARGS...]: run SQL from stdin (or -c) in the cluster's database;
# unaligned output, one row a line, fields separated by |
sql() {
	psql -X -q -At -v ON_ERROR_STOP=1 "$@"
}

# The settings every cluster of the demo, the end-to-end tests and the chaos
# soak runs with: an outcome must name the claim it ran under (flush answers
# one without "claim" `invalid`), so a worker library that drops the claim
# fails their checks instead of running without the claim fence.
CLUSTER_SETTINGS=(gen_durable.require_claim=on)

# check_settings: fail unless the server (the libpq environment's) runs
# with CLUSTER_SETTINGS in effect; an unknown gen_durable.* setting is only
# a warning in the server's log (an older gen_durable installed)
check_settings() {
	local setting got
	for setting in "${CLUSTER_SETTINGS[@]}"; do
		got=$(sql -c "SHOW ${setting%%=*}" 2>&1) || got="unknown ($got)"
		[ "$got" = "${setting#*=}" ] ||
			die "the server runs with ${setting%%=*} = $got, not ${setting#*=}: is an older gen_durable installed? (make install)"
	done
}

# cluster_up DIR: start a throwaway cluster in DIR (test/bench/cluster.sh:
# gen_durable preloaded, unix socket only, CLUSTER_SETTINGS), create the
# database `checkout` and export the libpq environment that reaches it
cluster_up() {
	CLUSTER=$1
	"$REPO/test/bench/cluster.sh" start "$CLUSTER" "$CLUSTER_PORT" "${CLUSTER_SETTINGS[@]}"
	export PGHOST=$CLUSTER PGPORT=$CLUSTER_PORT PGUSER=postgres PGDATABASE=postgres
	check_settings
	sql -c 'CREATE DATABASE checkout'
	export PGDATABASE=checkout
}

# cluster_down: stop the cluster and remove its directory
cluster_down() {
	if [ -n "${CLUSTER:-}" ]; then
		"$REPO/test/bench/cluster.sh" stop "$CLUSTER"
		CLUSTER=
	fi
}

# now_ms: the wall clock in milliseconds
now_ms() {
	local t=${EPOCHREALTIME/./}
	echo $((t / 1000))
}

# steps_done: how many outcomes have been committed since the driver's setup
steps_done() {
	sql -c "SELECT coalesce(sum(value), 0) FROM gen_durable.stats WHERE counter LIKE 'committed_%'"
}

# wait_for_steps N TIMEOUT [PID]: wait until N outcomes have been
# committed; fail after TIMEOUT seconds, or as soon as process PID (the
# driver) has ended
wait_for_steps() {
	local n=$1 end=$((SECONDS + $2)) pid=${3:-}
	while [ "$(steps_done)" -lt "$n" ]; do
		[ $SECONDS -lt "$end" ] || die "fewer than $n steps done after $2 s"
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			die "the driver ended before $n steps were done"
		fi
		sleep 0.1
	done
}

# app_command LANG: set APP (an array) to the worker app's command line for
# LANG (python or node), or to $CHECKOUT_APP (split on blanks) when set
app_command() {
	if [ -n "${CHECKOUT_APP:-}" ]; then
		read -ra APP <<<"$CHECKOUT_APP"
		return
	fi
	case $1 in
		python)
			find_python
			APP=("$PYTHON" "$REPO/examples/python/checkout_app.py")
			;;
		node)
			APP=(node "$REPO/examples/node/checkout_app.mjs")
			;;
		*) die "unknown worker language '$1' (python or node)" ;;
	esac
	[ -f "${APP[1]}" ] || die "no worker app at ${APP[1]}"
}

# The workers started so far, by index: process id, worker id (from its
# `ready` line) and the prefix of its logs (PREFIX.out, PREFIX.err).
WORKER_PIDS=()
WORKER_IDS=()
WORKER_LOGS=()

# start_worker LOGPREFIX [ENV=VALUE...]: start one worker process of $APP
# (--queues orders,items --concurrency 8) with stdout and stderr in
# LOGPREFIX.out and .err, and extra environment, then wait (30 s at most)
# for its `ready <id>` line
start_worker() {
	local log=$1 i=${#WORKER_PIDS[@]} end=$((SECONDS + 30)) id
	shift
	: >"$log.out"
	env "$@" "${APP[@]}" --queues orders,items --concurrency 8 >>"$log.out" 2>"$log.err" &
	WORKER_PIDS[i]=$!
	WORKER_LOGS[i]=$log
	until id=$(sed -n 's/^ready //p' "$log.out") && [ -n "$id" ]; do
		if ! kill -0 "${WORKER_PIDS[i]}" 2>/dev/null || [ $SECONDS -ge "$end" ]; then
			tail -n 20 "$log.err" >&2
			die "worker $i did not print 'ready <id>' (see its stderr above)"
		fi
		sleep 0.1
	done
	WORKER_IDS[i]=$id
}

# stop_worker I: SIGTERM worker I and check that it shuts down as the
# contract says: exits 0 within STOP_GRACE seconds after printing
# `stopped <its id>`.  Sets STOP_MS to how long it took.
stop_worker() {
	local i=$1 pid=${WORKER_PIDS[$1]} start rc=0
	start=$(now_ms)
	kill -TERM "$pid"
	while kill -0 "$pid" 2>/dev/null; do
		if [ $(($(now_ms) - start)) -ge $((STOP_GRACE * 1000)) ]; then
			kill -KILL "$pid"
			die "worker ${WORKER_IDS[i]} still running $STOP_GRACE s after SIGTERM"
		fi
		sleep 0.05
	done
	wait "$pid" || rc=$?
	STOP_MS=$(($(now_ms) - start))
	WORKER_PIDS[i]=
	[ "$rc" -eq 0 ] || die "worker ${WORKER_IDS[i]} exited with status $rc after SIGTERM"
	grep -qx "stopped ${WORKER_IDS[i]}" "${WORKER_LOGS[i]}.out" ||
		die "worker ${WORKER_IDS[i]} exited without printing 'stopped ${WORKER_IDS[i]}'"
}

# stop_workers: stop every running worker with stop_worker, one at a time
stop_workers() {
	local i
	for i in "${!WORKER_PIDS[@]}"; do
		if [ -n "${WORKER_PIDS[i]}" ]; then stop_worker "$i"; fi
	done
}

# kill_workers: SIGKILL every worker still running (for cleanup on failure)
kill_workers() {
	local i
	for i in "${!WORKER_PIDS[@]}"; do
		if [ -n "${WORKER_PIDS[i]}" ]; then
			kill -KILL "${WORKER_PIDS[i]}" 2>/dev/null || true
			{ wait "${WORKER_PIDS[i]}"; } 2>/dev/null || true
			WORKER_PIDS[i]=
		fi
	done
}

# worker_logs: print the last lines of every worker's stderr (on failure)
worker_logs() {
	local i
	for i in "${!WORKER_LOGS[@]}"; do
		echo "--- worker $i (${WORKER_IDS[i]:-no id}), last lines of stderr:"
		tail -n 15 "${WORKER_LOGS[i]}.err" 2>/dev/null || true
	done
}
