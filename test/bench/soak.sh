#!/usr/bin/env bash
#
# test/bench/soak.sh - sustained load: gen_durable, graphile-worker and
# pg-boss each drained for a long time at a fixed offered rate, sampled
# every 10 s (throughput, pickup lag, table and index sizes, dead tuples,
# autovacuum, WAL, checkpoints, CPU), each system on a throwaway cluster of
# its own (cluster.sh) so that they do not share bloat.
#
#   test/bench/soak.sh                 30 minutes per system
#   test/bench/soak.sh --minutes 5     the quick form
#   test/bench/soak.sh --smoke         20 s of load per system (~30 s each), in a temporary
#                                      directory (CI: checks that it runs)
#
# Options (durations: 90, 90s, 10m, 10min, 1h):
#   --minutes N | --seconds N  how long each soak runs (30 minutes)
#   --systems "LIST"           of gen_durable graphile_worker pg_boss (all three)
#   --rate N                   offered top-level instances/s for every system;
#                              default: each at --rate-fraction of its own
#                              drain rate, measured just before on its cluster
#                              (a drain of a backlog of --calibrate)
#   --rate-fraction F          (0.7)
#   --peers-rate own|gen_durable|both
#                              the peers at their own calibrated rate (own, the
#                              default), at the rate offered to gen_durable in
#                              this run (gen_durable: it then runs first), or
#                              both (each peer twice; the second run is
#                              labelled <peer>@gd_rate)
#   --calibrate N              backlog of the calibration drain (100000)
#   --mix SPEC                 gen_durable's mix, class=weight,...
#                              (job=80,five=5,park=5,fan=2,limited=4,gated=4;
#                              soak_systems.mjs describes the classes); the
#                              peers run one-step jobs only
#   --hold-xmin DUR            hold a transaction (with an xid) open DUR,
#                              pinning the vacuum horizon (0: none)
#   --hold-at DUR              when it starts (the middle of the run)
#   --retention DUR            gen_durable.retention, and pg-boss's
#                              deleteAfterSeconds (1min)
#   --max-wal-size SIZE        the server's max_wal_size (1GB, the server's
#                              default; cluster.sh's 4GB is for run.sh)
#   --setting NAME=VALUE       one more server setting (repeatable), e.g.
#                              --setting autovacuum_vacuum_cost_delay=0
#   --concurrency N (4)  --batch N (100)  --producers N (2)
#   --insert-batch N (100)  --sample-seconds N (10)  --signal-delay N (5 s)
#   BENCH_OUT                  the output directory (test/bench/soak, or a
#                              temporary one removed at the end with --smoke)
#
# Everything else is the server's default: autovacuum, checkpoint_timeout,
# shared_buffers 256MB and the durable settings of cluster.sh (fsync,
# synchronous_commit, full_page_writes on).  Per system it starts a
# cluster, runs soak.mjs (a calibration drain in a database of its own,
# then the soak in a fresh database) and stops the cluster; then
# soak_report.mjs writes the summary and the charts.  Writes
# OUT/soak.jsonl (the meta, sample and end lines of every system),
# OUT/summary.md and OUT/soak_*.svg.  SOAK.md says what is measured and
# how.  Run as root (the servers run as postgres) or as a user who can run
# PostgreSQL, after make install, from anywhere.  A benchmark, not a test:
# --smoke checks only that work was done and sampled.

set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)

# seconds_of converts a duration (90, 90s, 10m, 10min, 1h) to seconds
seconds_of() {
	local v=$1
	case $v in
		*h) echo $((${v%h} * 3600)) ;;
		*min) echo $((${v%min} * 60)) ;;
		*m) echo $((${v%m} * 60)) ;;
		*s) echo "${v%s}" ;;
		*[!0-9]* | '') echo "soak.sh: bad duration '$v'" >&2; exit 2 ;;
		*) echo "$v" ;;
	esac
}

SMOKE=no
SECONDS_=1800
SYSTEMS="gen_durable graphile_worker pg_boss"
RATE=0
RATE_FRACTION=0.7
PEERS_RATE=own
CALIBRATE=100000
MIX=
HOLD=0
HOLD_AT=
RETENTION=1min
MAX_WAL=1GB
SETTINGS=()
CONCURRENCY=4
BATCH=100
PRODUCERS=2
INSERT_BATCH=100
SAMPLE=10
SIGNAL_DELAY=5
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) SMOKE=yes; shift; continue ;;
		--minutes) SECONDS_=$(($2 * 60)) ;;
		--seconds) SECONDS_=$(seconds_of "$2") ;;
		--systems) SYSTEMS=$2 ;;
		--rate) RATE=$2 ;;
		--rate-fraction) RATE_FRACTION=$2 ;;
		--peers-rate) PEERS_RATE=$2 ;;
		--calibrate) CALIBRATE=$2 ;;
		--mix) MIX=$2 ;;
		--hold-xmin) HOLD=$(seconds_of "$2") ;;
		--hold-at) HOLD_AT=$(seconds_of "$2") ;;
		--retention) RETENTION=$2 ;;
		--max-wal-size) MAX_WAL=$2 ;;
		--setting) SETTINGS+=("$2") ;;
		--concurrency) CONCURRENCY=$2 ;;
		--batch) BATCH=$2 ;;
		--producers) PRODUCERS=$2 ;;
		--insert-batch) INSERT_BATCH=$2 ;;
		--sample-seconds) SAMPLE=$2 ;;
		--signal-delay) SIGNAL_DELAY=$2 ;;
		*) echo "soak.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
	esac
	shift 2
done
if [ "$SMOKE" = yes ]; then
	# about 20 s of load per system, GC within it, a short hold
	SECONDS_=20 SAMPLE=5 CALIBRATE=3000 RETENTION=5s HOLD=5 HOLD_AT=10
fi
case $PEERS_RATE in own | gen_durable | both) ;; *)
	echo "soak.sh: --peers-rate own, gen_durable or both" >&2; exit 2 ;;
esac
RETENTION_S=$(seconds_of "$RETENTION")

# where the results go
REMOVE_OUT=no
if [ -n "${BENCH_OUT:-}" ]; then
	OUT=$BENCH_OUT
elif [ "$SMOKE" = yes ]; then
	OUT=$(mktemp -d /tmp/gd_soak_out.XXXXXX)
	REMOVE_OUT=yes
else
	OUT=$HERE/soak
fi
mkdir -p "$OUT"

PORT=55447
DIR=

cleanup() {
	[ -n "$DIR" ] && "$HERE/cluster.sh" stop "$DIR"
	[ "$REMOVE_OUT" = yes ] && rm -rf "$OUT"
	true
}
trap cleanup EXIT

# gnuplot for the charts, the peers and their Node (tools.sh)
. "$HERE/tools.sh"
bench_tools

# the runs: system[:label[:rate]], gen_durable first when a peer needs its rate
runs=
for s in $SYSTEMS; do
	case $s in gen_durable | graphile_worker | pg_boss) ;; *)
		echo "soak.sh: unknown system $s" >&2; exit 2 ;;
	esac
done
if [ "$PEERS_RATE" != own ] && [[ " $SYSTEMS " == *" gen_durable "* ]]; then
	runs=gen_durable
fi
for s in $SYSTEMS; do
	[ "$s" = gen_durable ] && [ -n "$runs" ] && continue
	case "$s:$PEERS_RATE" in
		gen_durable:*) runs="$runs gen_durable" ;;
		*:own) runs="$runs $s" ;;
		*:gen_durable) runs="$runs $s:$s@gd_rate:gd" ;;
		*:both) runs="$runs $s $s:$s@gd_rate:gd" ;;
	esac
done

results=$OUT/soak.jsonl
: > "$results"
export PGUSER=postgres
for run in $runs; do
	system=${run%%:*}
	label=$system
	rate=$RATE
	case $run in
		*:*:gd)
			label=${run#*:}
			label=${label%:gd}
			rate=$(grep '"type":"meta"' "$results" | grep '"system":"gen_durable"' |
				sed 's/.*"offered_per_s":\([0-9.]*\).*/\1/' | head -1)
			if [ -z "$rate" ]; then
				echo "soak.sh: no gen_durable rate for $label (run gen_durable in the same run)" >&2
				exit 2
			fi
			;;
	esac
	echo "== soak $label: $((SECONDS_ / 60)) min $((SECONDS_ % 60)) s" >&2
	DIR=$(mktemp -d /tmp/gd_soak.XXXXXX)
	"$HERE/cluster.sh" start "$DIR" "$PORT" max_wal_size="$MAX_WAL" gen_durable.retention="$RETENTION" \
		${SETTINGS[@]+"${SETTINGS[@]}"}
	args=(--system "$system" --seconds "$SECONDS_" --rate "$rate" --rate-fraction "$RATE_FRACTION"
		--calibrate "$CALIBRATE" --hold-xmin "$HOLD" --retention "$RETENTION_S"
		--concurrency "$CONCURRENCY" --batch "$BATCH" --producers "$PRODUCERS"
		--insert-batch "$INSERT_BATCH" --sample-seconds "$SAMPLE" --signal-delay "$SIGNAL_DELAY")
	[ -n "$MIX" ] && args+=(--mix "$MIX")
	[ -n "$HOLD_AT" ] && args+=(--hold-at "$HOLD_AT")
	[ "$SMOKE" = yes ] && args+=(--smoke)
	[ "$label" != "$system" ] && args+=(--label "$label")
	PGHOST=$DIR PGPORT=$PORT BENCH_PGDATA=$DIR/data "$NODE" "$HERE/soak.mjs" "${args[@]}" >> "$results"
	"$HERE/cluster.sh" stop "$DIR"
	DIR=
done

"$NODE" "$HERE/soak_report.mjs" "$results" "$OUT"
echo "== soak: $OUT" >&2
