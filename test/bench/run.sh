#!/usr/bin/env bash
#
# test/bench/run.sh - gen_durable against graphile-worker, pg-boss and a bare
# SKIP LOCKED table, on one throwaway cluster, in one run.
#
#   test/bench/run.sh            the full run; writes BENCHMARKS.md's tables
#                                (test/bench/results.md), the raw lines
#                                (test/bench/results.jsonl) and the charts
#                                (test/bench/throughput.svg, latency.svg)
#   test/bench/run.sh --smoke    a tiny run that only checks everything still
#                                works (CI); writes nothing in the tree
#
# Run as root (or as a user who can run PostgreSQL) after make install, from
# anywhere.  It installs the peers from npm into test/bench/node_modules
# (pinned in package.json / package-lock.json, with the Node they need),
# starts a cluster with durable settings (cluster.sh), and for every
# workload, system and repetition runs bench.mjs in a fresh database: the
# same Node runtime, the same `pg` driver and the same number of
# connections for every system.  When test/bench/libpq_driver.c exists
# (gen_durable driven from C through libpq), it is compiled once and run
# like bench.mjs for enqueue and drain, as the system gen_durable_libpq.
# Then report.mjs writes the tables (results.md) and charts.mjs the charts
# (throughput.svg, latency.svg; with gnuplot, which run.sh installs as root
# when it is missing, or the charts are skipped).  Sizes, repetitions and
# what to run come from the environment:
#   N_ENQUEUE (200000)  N_DRAIN (100000)  N_MIXED (100000)  N_LATENCY (1000)
#   N_SIGNAL (1000)  N_FSM (20000)  N_FANOUT (1000 parents of 100 children)
#   BACKLOGS ("1000 100000 1000000")  TERMINAL (1000000)
#   N_INFLIGHT (10000: the long steps held by pick_inflight)
#   INFLIGHT_AGE (10: seconds they are held before the claims are timed)
#   REPS (3)  CONCURRENCY (4)  BATCH (50)
#   WORKLOADS ("enqueue drain mixed latency signal fsm fsm_inline fanout
#              pick_backlog pick_terminal pick_inflight": the ones to run,
#              in that order)
#   SYSTEMS ("gen_durable bare graphile_worker pg_boss"; also
#              gen_durable_inplace: finished jobs kept in the live table, as
#              before 0.9.0)
#   FSM_SYSTEMS (SYSTEMS)  BACKLOG_SYSTEMS (gen_durable and bare of SYSTEMS:
#              pick_backlog, pick_terminal and pick_inflight)
#   BENCH_OUT (where results.jsonl, results.md and the charts go: test/bench,
#              or a temporary directory removed at the end with --smoke)
#   GD_HISTORY (1: gen_durable records the step history of every queue, to
#              measure its cost; run it with its own BENCH_OUT)
# fsm_inline, fanout and signal run for gen_durable only (the peers have no
# inline continue, no fan-out/join and no signals).  The server's CPU is
# read from /proc (bench.mjs, BENCH_PGDATA): run it where /proc shows the
# server's processes.
# A benchmark, not a test: nothing checks the numbers.

set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SMOKE=no
[ "${1:-}" = "--smoke" ] && SMOKE=yes

if [ "$SMOKE" = yes ]; then
	: "${N_ENQUEUE:=500}" "${N_DRAIN:=500}" "${N_MIXED:=500}" "${N_LATENCY:=5}" "${N_SIGNAL:=5}"
	: "${N_FSM:=100}" "${N_FANOUT:=3}" "${REPS:=1}" "${BACKLOGS:=100 1000}" "${TERMINAL:=1000}"
	: "${N_INFLIGHT:=100}" "${INFLIGHT_AGE:=1}"
else
	: "${N_ENQUEUE:=200000}" "${N_DRAIN:=100000}" "${N_MIXED:=100000}" "${N_LATENCY:=1000}"
	: "${N_SIGNAL:=1000}" "${N_FSM:=20000}" "${N_FANOUT:=1000}"
	: "${REPS:=3}" "${BACKLOGS:=1000 100000 1000000}" "${TERMINAL:=1000000}"
	: "${N_INFLIGHT:=10000}" "${INFLIGHT_AGE:=10}"
fi
# how long pick_inflight holds its claims before timing, read by bench.mjs
export INFLIGHT_AGE
# among prints the systems of the list $1 that are also in the list $2
among() {
	local s t
	for s in $1; do
		for t in $2; do
			if [ "$s" = "$t" ]; then echo "$s"; fi
		done
	done
}

: "${CONCURRENCY:=4}" "${BATCH:=50}"
: "${WORKLOADS:=enqueue drain mixed latency signal fsm fsm_inline fanout pick_backlog pick_terminal pick_inflight}"
: "${SYSTEMS:=gen_durable bare graphile_worker pg_boss}"
# the 5-step machine: gen_durable's steps against the peers' chained jobs
: "${FSM_SYSTEMS:=$SYSTEMS}"
# claim latency as the backlog grows and with steps in flight, against the
# bare table
: "${BACKLOG_SYSTEMS:=$(among "$SYSTEMS" "gen_durable bare")}"

# every (workload, n) to measure, of WORKLOADS: the backlog workloads once
# per size
runs=
for workload in $WORKLOADS; do
	case $workload in
		enqueue) runs="$runs enqueue:$N_ENQUEUE" ;;
		drain) runs="$runs drain:$N_DRAIN" ;;
		mixed) runs="$runs mixed:$N_MIXED" ;;
		latency) runs="$runs latency:$N_LATENCY" ;;
		signal) runs="$runs signal:$N_SIGNAL" ;;
		fsm | fsm_inline) runs="$runs $workload:$N_FSM" ;;
		fanout) runs="$runs fanout:$N_FANOUT" ;;
		pick_backlog) for size in $BACKLOGS; do runs="$runs pick_backlog:$size"; done ;;
		pick_terminal) runs="$runs pick_terminal:$TERMINAL" ;;
		pick_inflight) runs="$runs pick_inflight:$N_INFLIGHT" ;;
		*) echo "run.sh: unknown workload $workload" >&2; exit 2 ;;
	esac
done

# where the results go
REMOVE_OUT=no
if [ -n "${BENCH_OUT:-}" ]; then
	OUT=$BENCH_OUT
	mkdir -p "$OUT"
elif [ "$SMOKE" = yes ]; then
	OUT=$(mktemp -d /tmp/gd_bench_out.XXXXXX)
	REMOVE_OUT=yes
else
	OUT=$HERE
fi

PORT=55437
DIR=$(mktemp -d /tmp/gd_bench.XXXXXX)
BIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$BIN/pg_config

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cleanup() {
	"$HERE/cluster.sh" stop "$DIR"
	[ "$REMOVE_OUT" = yes ] && rm -rf "$OUT"
	true
}
trap cleanup EXIT

# fresh_db runs "$@" with PGDATABASE set to a database of its own, made
# before and dropped after
db=0
fresh_db() {
	db=$((db + 1))
	as_pg "$BIN/createdb" -h "$DIR" -p "$PORT" -U postgres "bench$db"
	PGDATABASE="bench$db" "$@"
	as_pg "$BIN/dropdb" -h "$DIR" -p "$PORT" -U postgres "bench$db"
}

# gnuplot for the charts, the peers and their Node (tools.sh)
. "$HERE/tools.sh"
bench_tools

"$HERE/cluster.sh" start "$DIR" "$PORT"
# the server (postgres) reads the scripts and node_modules of the tree
export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres
# for bench.mjs's server CPU measurement
export BENCH_PGDATA=$DIR/data

# the C driver, when there is one, built once into the cluster's directory
LIBPQ_DRIVER=
if [ -f "$HERE/libpq_driver.c" ] && [ -n "$(among "$SYSTEMS" gen_durable)" ]; then
	LIBPQ_DRIVER=$DIR/libpq_driver
	cc -O2 -I"$("$PG_CONFIG" --includedir)" -o "$LIBPQ_DRIVER" "$HERE/libpq_driver.c" \
		-L"$("$PG_CONFIG" --libdir)" -lpq
fi

results=$OUT/results.jsonl
: > "$results"
for run in $runs; do
	workload=${run%%:*}
	n=${run#*:}
	systems=$SYSTEMS
	case $workload in
		fsm) systems=$FSM_SYSTEMS ;;
		fsm_inline) systems=$(among "$FSM_SYSTEMS" gen_durable) ;;
		fanout | signal) systems=$(among "$SYSTEMS" gen_durable) ;;
		pick_backlog | pick_terminal | pick_inflight) systems=$BACKLOG_SYSTEMS ;;
	esac
	for system in $systems; do
		for rep in $(seq "$REPS"); do
			echo "== $workload $system run $rep (n=$n)" >&2
			fresh_db "$NODE" "$HERE/bench.mjs" "$system" "$workload" "$n" \
				"$CONCURRENCY" "$BATCH" >> "$results"
		done
	done
	case $workload in
		enqueue | drain)
			if [ -n "$LIBPQ_DRIVER" ]; then
				for rep in $(seq "$REPS"); do
					echo "== $workload gen_durable_libpq run $rep (n=$n)" >&2
					fresh_db "$LIBPQ_DRIVER" "$workload" "$n" "$CONCURRENCY" "$BATCH" >> "$results"
				done
			fi
			;;
	esac
done

"$NODE" "$HERE/report.mjs" "$results" > "$OUT/results.md"
"$NODE" "$HERE/charts.mjs" "$results" "$OUT"
cat "$OUT/results.md"
