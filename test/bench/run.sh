#!/usr/bin/env bash
#
# test/bench/run.sh - gen_durable against graphile-worker, pg-boss and a bare
# SKIP LOCKED table, on one throwaway cluster, in one run.
#
#   test/bench/run.sh            the full run; writes BENCHMARKS.md's tables
#                                (test/bench/results.md) and the raw lines
#                                (test/bench/results.jsonl)
#   test/bench/run.sh --smoke    a tiny run that only checks everything still
#                                works (CI); writes nothing in the tree
#
# Run as root (or as a user who can run PostgreSQL) after make install, from
# anywhere.  It installs the peers from npm into test/bench/node_modules
# (pinned in package.json / package-lock.json, with the Node they need),
# starts a cluster with durable settings (cluster.sh), and for every
# workload, system and repetition runs bench.mjs in a fresh database: the
# same Node runtime, the same `pg` driver and the same number of
# connections for every system.  Sizes and repetitions come from the
# environment:
#   N_ENQUEUE (200000)  N_DRAIN (100000)  N_LATENCY (1000)  N_FSM (20000)
#   BACKLOGS ("1000 100000 1000000")  TERMINAL (1000000)
#   REPS (3)  CONCURRENCY (4)  BATCH (50)
#   SYSTEMS ("gen_durable bare graphile_worker pg_boss")  FSM_SYSTEMS (gen_durable)
#   BACKLOG_SYSTEMS ("gen_durable bare")
# A benchmark, not a test: nothing checks the numbers.

set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SMOKE=no
[ "${1:-}" = "--smoke" ] && SMOKE=yes

if [ "$SMOKE" = yes ]; then
	: "${N_ENQUEUE:=500}" "${N_DRAIN:=500}" "${N_LATENCY:=5}" "${N_FSM:=100}" "${REPS:=1}"
	: "${BACKLOGS:=100 1000}" "${TERMINAL:=1000}"
	OUT=$(mktemp -d /tmp/gd_bench_out.XXXXXX)
else
	: "${N_ENQUEUE:=200000}" "${N_DRAIN:=100000}" "${N_LATENCY:=1000}" "${N_FSM:=20000}"
	: "${REPS:=3}" "${BACKLOGS:=1000 100000 1000000}" "${TERMINAL:=1000000}"
	OUT=$HERE
fi
: "${CONCURRENCY:=4}" "${BATCH:=50}"
: "${SYSTEMS:=gen_durable bare graphile_worker pg_boss}"
# the 5-step machine, with and without inline steps: gen_durable's own
# target (continue against requeue); the peers have no such workload yet
: "${FSM_SYSTEMS:=gen_durable}"
# claim latency as the backlog grows, against the bare table
: "${BACKLOG_SYSTEMS:=gen_durable bare}"
PORT=55437
DIR=$(mktemp -d /tmp/gd_bench.XXXXXX)
BIN=/usr/lib/postgresql/15/bin

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cleanup() {
	"$HERE/cluster.sh" stop "$DIR"
	[ "$SMOKE" = yes ] && rm -rf "$OUT"
	true
}
trap cleanup EXIT

# the peers and the Node they need, exactly as locked
if [ ! -x "$HERE/node_modules/.bin/node" ]; then
	(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
fi
NODE=$HERE/node_modules/.bin/node

"$HERE/cluster.sh" start "$DIR" "$PORT"
# the server (postgres) reads the scripts and node_modules of the tree
export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres

results=$OUT/results.jsonl
: > "$results"
db=0
# every (workload, n) to measure: the backlog workloads once per size
runs="enqueue:$N_ENQUEUE drain:$N_DRAIN latency:$N_LATENCY fsm:$N_FSM fsm_inline:$N_FSM"
for size in $BACKLOGS; do runs="$runs pick_backlog:$size"; done
runs="$runs pick_terminal:$TERMINAL"
for run in $runs; do
	workload=${run%%:*}
	n=${run#*:}
	systems=$SYSTEMS
	case $workload in
		fsm | fsm_inline) systems=$FSM_SYSTEMS ;;
		pick_backlog | pick_terminal) systems=$BACKLOG_SYSTEMS ;;
	esac
	for system in $systems; do
		for rep in $(seq "$REPS"); do
			db=$((db + 1))
			as_pg "$BIN/createdb" -h "$DIR" -p "$PORT" -U postgres "bench$db"
			echo "== $workload $system run $rep (n=$n)" >&2
			PGDATABASE="bench$db" "$NODE" "$HERE/bench.mjs" "$system" "$workload" "$n" \
				"$CONCURRENCY" "$BATCH" >> "$results"
			as_pg "$BIN/dropdb" -h "$DIR" -p "$PORT" -U postgres "bench$db"
		done
	done
done

"$NODE" "$HERE/report.mjs" "$results" > "$OUT/results.md"
cat "$OUT/results.md"
