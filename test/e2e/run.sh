#!/usr/bin/env bash
#
# test/e2e/run.sh - end-to-end tests of the checkout workload with real
# worker processes (examples/checkout/README.md is the contract).
#
#   test/e2e/run.sh python|node              tests (a), (b) and (c)
#   test/e2e/run.sh python|node --pgbouncer  test (d)
#   test/e2e/run.sh psql                     the psql examples
#
#   (a) 1000 checkouts with 3 worker processes all finish with the right
#       results (driver.py verify), and the workers stop cleanly;
#   (b) a worker SIGKILLed after some hundreds of steps loses nothing: its
#       claims come back within seconds (not after the lease), a
#       replacement starts, and the run verifies;
#   (c) SIGTERM in the middle of a run: the worker exits 0 within the grace
#       period, prints `stopped <id>`, and leaves no claim of its own; the
#       others finish the run, which verifies;
#   (d) run (a) with the workers connected through PgBouncer in transaction
#       pooling mode;
#   psql: examples/psql/walkthrough.sh runs through, and
#       examples/psql/worker.sh finishes a batch of jobs (one retried) and
#       releases its claim on SIGTERM.
#
# Each test runs on a throwaway cluster of its own (test/bench/cluster.sh,
# with gen_durable.require_claim on: an outcome sent without its claim is
# `invalid`, which fails the driver) whose ids start past 2^53, beyond what
# a JavaScript number holds exactly, and prints one line
# `e2e <suite>: <test> ... ok` or `... FAILED`, which test/all.sh counts;
# the script exits 1 if any failed.  Run it after make
# install, as root (the servers and PgBouncer then run as postgres) or as
# any other user.  The python suite needs python3-psycopg, --pgbouncer
# needs pgbouncer; the node suite runs `npm ci` in examples/node when its
# node_modules is missing (and, as root, installs nodejs and npm first when
# there is no npm).  CHECKOUT_APP overrides the worker app's command line;
# E2E_ORDERS (1000) and E2E_RATE (orders per second, 200) size the runs.

set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/checkout/harness.sh"

SUITE=${1:?usage: test/e2e/run.sh python|node|psql [--pgbouncer]}
BOUNCER=no
case ${2:-} in
	"") ;;
	--pgbouncer) BOUNCER=yes ;;
	*) die "usage: test/e2e/run.sh python|node|psql [--pgbouncer]" ;;
esac
ORDERS=${E2E_ORDERS:-1000}
RATE=${E2E_RATE:-200}
LABEL=$SUITE
[ $BOUNCER = yes ] && LABEL="$SUITE pgbouncer"

# on_exit: stop a cluster a test left running (one killed by a signal)
# and remove the temporary directory; a suite that could not start its
# tests (a missing app or package) still reports a FAILED line
TMP=
CHECKED=no
on_exit() {
	local rc=$? c
	if [ -n "$TMP" ]; then
		for c in "$TMP"/*/data/postmaster.pid; do
			if [ -f "$c" ]; then "$REPO/test/bench/cluster.sh" stop "${c%/data/postmaster.pid}"; fi
		done
		rm -rf "$TMP"
	fi
	if [ $rc -ne 0 ] && [ $CHECKED = no ]; then
		echo "e2e $LABEL: set-up ... FAILED (exit status $rc)"
	fi
}
trap on_exit EXIT

find_python
case $SUITE in
	python) ;;
	node)
		if ! command -v npm >/dev/null; then
			[ "$(id -u)" -eq 0 ] || die "the node suite needs node and npm (apt-get install nodejs npm)"
			apt-get install -y -q --no-install-recommends nodejs npm </dev/null
		fi
		if [ ! -d "$REPO/examples/node/node_modules" ]; then
			(cd "$REPO/examples/node" && npm ci --no-audit --no-fund)
		fi
		;;
	psql) [ $BOUNCER = no ] || die "the psql suite has no --pgbouncer run" ;;
	*) die "unknown suite '$SUITE' (python, node or psql)" ;;
esac
if [ $BOUNCER = yes ]; then
	[ -x /usr/sbin/pgbouncer ] || die "--pgbouncer needs pgbouncer (apt-get install pgbouncer)"
fi
[ "$SUITE" = psql ] || app_command "$SUITE"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gen_durable_e2e.XXXXXX")
chmod 755 "$TMP"				# the server user must reach the clusters inside

# ------------------------------------------------------------------ helpers

# begin DIR: the start of every test: a fresh cluster in DIR with the
# driver's setup done, and a cleanup (workers, PgBouncer, cluster) for
# whatever way the test ends.  Instance and signal ids start at 2^53 + 1
# (9007199254740993), where a double no longer holds every integer: an app
# that rounds an id flushes another instance's outcome (stale, so the run
# never ends) or signals the wrong one.
begin() {
	trap 'rc=$?; if [ $rc -ne 0 ]; then worker_logs; fi; kill_workers; stop_pgbouncer; cluster_down; exit $rc' EXIT
	cluster_up "$1"
	driver setup
	sql -c "SELECT setval(pg_get_serial_sequence('gen_durable.instances', 'id'), 9007199254740992),
	               setval(pg_get_serial_sequence('gen_durable.signals', 'id'), 9007199254740992)" >/dev/null
}

# claims_of WORKER_ID: how many instances the worker holds claimed now
claims_of() {
	sql -c "SELECT count(*) FROM gen_durable.instances WHERE locked_by = '$1'"
}

# counter NAME: the value of a gen_durable.stats counter
counter() {
	sql -c "SELECT value FROM gen_durable.stats WHERE counter = '$1'"
}

# start_drive: run the driver in the background (ORDERS orders, periodic
# progress lines); the caller waits for DRIVER_PID
start_drive() {
	driver run --orders "$ORDERS" --rate "$RATE" --progress --timeout 240 &
	DRIVER_PID=$!
}

# finish_drive: wait for the background driver, verify the run and stop
# every worker cleanly
finish_drive() {
	wait "$DRIVER_PID" || die "driver run failed"
	driver verify --orders "$ORDERS"
	stop_workers
}

# start_pgbouncer: PgBouncer in transaction pooling mode in front of the
# cluster, on a unix socket in the cluster's directory; BOUNCER_ENV is the
# environment that makes a client connect through it
start_pgbouncer() {
	cat >"$CLUSTER/users.txt" <<-EOF
	"postgres" ""
	EOF
	cat >"$CLUSTER/pgbouncer.ini" <<-EOF
	[databases]
	checkout = host=$CLUSTER port=$CLUSTER_PORT dbname=checkout
	[pgbouncer]
	listen_addr =
	listen_port = $PGBOUNCER_PORT
	unix_socket_dir = $CLUSTER
	auth_type = trust
	auth_file = $CLUSTER/users.txt
	admin_users = postgres
	pool_mode = transaction
	default_pool_size = 20
	max_client_conn = 200
	logfile = $CLUSTER/pgbouncer.log
	pidfile = $CLUSTER/pgbouncer.pid
	EOF
	chmod 644 "$CLUSTER/users.txt" "$CLUSTER/pgbouncer.ini"
	# like the server, PgBouncer refuses to run as root
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- /usr/sbin/pgbouncer -d -q "$CLUSTER/pgbouncer.ini"
	else
		/usr/sbin/pgbouncer -d -q "$CLUSTER/pgbouncer.ini"
	fi
	BOUNCER_ENV=("PGPORT=$PGBOUNCER_PORT")
	local end=$((SECONDS + 10))
	until env "${BOUNCER_ENV[@]}" psql -X -q -c 'SELECT 1' >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || die "pgbouncer did not answer in 10 s: $(tail -n 5 "$CLUSTER/pgbouncer.log")"
		sleep 0.1
	done
}

# stop_pgbouncer: stop PgBouncer if it runs
stop_pgbouncer() {
	if [ -n "${CLUSTER:-}" ] && [ -f "$CLUSTER/pgbouncer.pid" ]; then
		kill "$(cat "$CLUSTER/pgbouncer.pid")" 2>/dev/null || true
	fi
}

# check NAME FUNCTION: run one test in a subshell that stops at the first
# failing command, its output indented, and print its ok / FAILED line;
# FUNCTION may set a detail for that line by printing `detail: ...`
FAILED=0
check() {
	local name=$1 rc detail start=$SECONDS
	CHECKED=yes
	echo "--- e2e $LABEL: $name"
	set +e
	(
		set -e
		"$2"
	) 2>&1 | tee "$TMP/out" | sed 's/^/    /'
	rc=${PIPESTATUS[0]}
	set -e
	detail=$(sed -n 's/^detail: //p' "$TMP/out" | tail -n 1)
	detail="$((SECONDS - start)) s${detail:+, $detail}"
	if [ "$rc" -eq 0 ]; then
		echo "e2e $LABEL: $name ... ok ($detail)"
	else
		echo "e2e $LABEL: $name ... FAILED ($detail)"
		FAILED=$((FAILED + 1))
	fi
}

# -------------------------------------------------------------------- tests

# (a), and (d) through PgBouncer: ORDERS checkouts with 3 workers
test_run() {
	begin "$TMP/a"
	local env=()
	if [ $BOUNCER = yes ]; then
		# With transaction pooling a client's transactions run on whichever
		# server connection is free, and the server connection outlives the
		# client's: the backend that made a claim neither ends when the
		# worker dies nor lives as long as the worker does (PgBouncer may
		# close it while the worker still holds the claim).  So claims must
		# not follow the backend; the lease alone bounds them.
		sql -c "ALTER ROLE postgres SET gen_durable.reclaim_on_disconnect = off"
		start_pgbouncer
		env=("${BOUNCER_ENV[@]}")
	fi
	start_worker "$TMP/a/w0" "${env[@]}"
	start_worker "$TMP/a/w1" "${env[@]}"
	start_worker "$TMP/a/w2" "${env[@]}"
	start_drive
	finish_drive
	local via=
	if [ $BOUNCER = yes ]; then
		via=", $(env "${BOUNCER_ENV[@]}" psql -X -At -d pgbouncer -c 'SHOW STATS' |
			awk -F'|' '$1 == "checkout" { print $2 }') transactions through PgBouncer"
	fi
	echo "detail: $ORDERS orders, $(steps_done) steps, 3 workers$via"
}

# (b) SIGKILL a worker after 300 steps, start a replacement
test_kill() {
	begin "$TMP/b"
	start_worker "$TMP/b/w0"
	start_worker "$TMP/b/w1"
	start_worker "$TMP/b/w2"
	start_drive
	wait_for_steps 300 60 "$DRIVER_PID"
	local victim=${WORKER_IDS[0]} reaped at killed back held
	reaped=$(counter reaped_dead_backend)
	at=$(steps_done)
	kill -KILL "${WORKER_PIDS[0]}"
	killed=$(now_ms)
	{ wait "${WORKER_PIDS[0]}"; } 2>/dev/null || true	# (no "Killed" notice)
	WORKER_PIDS[0]=
	echo "killed $victim after $at steps"
	# with the worker's connection gone, its claims come back within about
	# a second (the maintenance worker), not when the lease expires
	while [ "$(claims_of "$victim")" -ne 0 ]; do
		[ $(($(now_ms) - killed)) -lt 10000 ] || die "claims of the killed worker still held after 10 s"
		sleep 0.05
	done
	back=$(($(now_ms) - killed))
	held=$(($(counter reaped_dead_backend) - reaped))
	start_worker "$TMP/b/w3"
	echo "its $held claim(s) were back within $back ms; replacement ${WORKER_IDS[3]} started"
	finish_drive
	echo "detail: killed after $at steps holding $held claim(s), back within $back ms, $(steps_done) steps"
}

# (c) SIGTERM a worker in the middle of a run
test_term() {
	begin "$TMP/c"
	start_worker "$TMP/c/w0"
	start_worker "$TMP/c/w1"
	start_worker "$TMP/c/w2"
	start_drive
	wait_for_steps 300 60 "$DRIVER_PID"
	local id=${WORKER_IDS[0]} held left took
	held=$(claims_of "$id")
	stop_worker 0
	took=$STOP_MS
	left=$(claims_of "$id")
	echo "SIGTERM to $id holding $held claim(s): exit 0 after $took ms, $left claims left"
	[ "$left" -eq 0 ] || die "worker $id left $left claims behind"
	finish_drive
	echo "detail: stopped while holding $held claim(s), exit 0 in $took ms, 0 claims left, $(steps_done) steps"
}

# psql: the walk-through, and worker.sh on 20 jobs, one of them retried
test_psql() {
	"$REPO/examples/psql/walkthrough.sh" >"$TMP/walkthrough.out"
	tail -n 1 "$TMP/walkthrough.out"
	begin "$TMP/psql"
	sql -c "SELECT count(*) FROM gen_durable.insert_many((
	          SELECT jsonb_agg(jsonb_build_object('fsm', 'hello', 'state', jsonb_build_object('n', n)))
	            FROM generate_series(1, 20) n))" >/dev/null
	# a handler that fails the first attempt of job n = 7
	"$REPO/examples/psql/worker.sh" default sh -c \
		'state=$(cat); case $state:$JOB_ATTEMPT in *"\"n\": 7}":0) exit 1;; esac; echo "$state"' \
		>"$TMP/psql/worker.out" 2>&1 &
	local pid=$! end=$((SECONDS + 60)) done_ rc=0
	until [ "$(sql -c "SELECT count(*) FROM gen_durable.instances WHERE status = 'done'")" -eq 20 ]; do
		[ $SECONDS -lt "$end" ] || { cat "$TMP/psql/worker.out"; die "worker.sh did not finish 20 jobs in 60 s"; }
		sleep 0.2
	done
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ] || die "worker.sh exited with status $rc after SIGTERM"
	done_=$(sql -c "SELECT count(*) FROM gen_durable.instances WHERE status = 'done' AND result = state")
	[ "$done_" -eq 20 ] || die "only $done_ of 20 jobs have their state as result"
	[ "$(steps_done)" -eq 21 ] || die "expected 20 done and 1 retry, got $(steps_done) outcomes"
	echo "detail: walk-through ok; worker.sh did 20 jobs and 1 retry"
}

# -------------------------------------------------------------------- main

if [ "$SUITE" = psql ]; then
	check "psql walk-through and worker.sh" test_psql
elif [ $BOUNCER = yes ]; then
	check "(d) $ORDERS checkouts, 3 workers through PgBouncer (transaction pooling)" test_run
else
	check "(a) $ORDERS checkouts, 3 workers" test_run
	check "(b) a worker SIGKILLed mid-run loses nothing" test_kill
	check "(c) SIGTERM stops a busy worker cleanly" test_term
fi
[ "$FAILED" -eq 0 ]
