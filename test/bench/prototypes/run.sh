#!/usr/bin/env bash
#
# test/bench/prototypes/run.sh - the storage designs candidate for the hot
# path (issue 17), reduced to their statements and measured side by side
# against the bare SKIP LOCKED table and today's engine, on one throwaway
# cluster with durable settings (../cluster.sh).
#
# Each variant is one file here (<name>.sql) with three sections: @schema
# (run once in a fresh database), @fill (psql, with :n jobs spread over
# :queues queues) and @round (a pgbench script: claim a batch of :batch,
# complete it; two statements, two commits, like a worker's pick and flush).
# A variant whose claim "writes nothing" stands for claims kept in shared
# memory; without that table a plain SELECT can only claim without a race
# when each worker has a queue of its own, so every variant runs that way
# ("own": 4 workers, 4 queues), and those with a real claim also run on one
# shared queue ("shared").  Per run: jobs/s (n over the wall time of the
# drain), WAL bytes per job (pg_current_wal_lsn around it, after a
# CHECKPOINT so that every variant pays the same full-page writes) and the
# server's CPU µs per job (every process of the cluster, from /proc).
#
#   test/bench/prototypes/run.sh [variant ...]      (default: all)
#   env: N (100000), REPS (3), BATCH (50), CLIENTS (4), OUT (results here)
#
# Prints one line per run and a table of medians (also in $OUT/results.md).
# Root runs the server as postgres (../cluster.sh).

set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-100000}
REPS=${REPS:-3}
BATCH=${BATCH:-50}
CLIENTS=${CLIENTS:-4}
OUT=${OUT:-$HERE/results}
BIN=/usr/lib/postgresql/15/bin
DIR=$(mktemp -d /tmp/gd-proto.XXXXXX)
PORT=${PORT:-55490}
mkdir -p "$OUT"
: >"$OUT/runs.tsv"

cleanup() { "$HERE/../cluster.sh" stop "$DIR"; }
trap cleanup EXIT
"$HERE/../cluster.sh" start "$DIR" "$PORT" max_wal_size=16GB checkpoint_timeout=1h \
	autovacuum=off
export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
psql_q() { psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }

# section FILE NAME: the lines of FILE between "-- @NAME" and the next "-- @"
section() { awk -v s="-- @$2" '$0 == s {on = 1; next} /^-- @/ {on = 0} on' "$1"; }

# server_cpu_ticks: the cluster's CPU so far (the postmaster, its reaped
# children, its live children), in clock ticks
server_cpu_ticks() {
	local pm total=0 f ppid fields
	pm=$(head -1 "$DIR/data/postmaster.pid")
	read -r -a fields <<<"$(sed 's/^.*) //' "/proc/$pm/stat")"
	total=$((fields[11] + fields[12] + fields[13] + fields[14]))
	for f in /proc/[0-9]*/stat; do
		read -r -a fields <<<"$(sed 's/^.*) //' "$f" 2>/dev/null)" || continue
		ppid=${fields[1]:-0}
		[ "$ppid" = "$pm" ] && total=$((total + fields[11] + fields[12]))
	done
	echo "$total"
}
TICKS=$(getconf CLK_TCK)

# one VARIANT MODE REP: a fresh database, the backlog, the timed drain
one() {
	local variant=$1 mode=$2 rep=$3 queues fill rounds db=p_$1_$2_$3
	local file=$HERE/$variant.sql t0 t1 l0 l1 c0 c1 left
	queues=$CLIENTS; [ "$mode" = shared ] && queues=1
	rounds=$((N / CLIENTS / BATCH))
	fill=$N; [ "$mode" = shared ] && fill=$((N + CLIENTS * BATCH * 4))
	psql_q -c "CREATE DATABASE $db"
	section "$file" schema | psql_q -d "$db"
	section "$file" fill | psql_q -d "$db" -v n="$fill" -v queues="$queues" >/dev/null
	psql_q -d "$db" -c 'VACUUM ANALYZE' -c CHECKPOINT
	{ echo "\\set qn :client_id % $queues"; section "$file" round; } >"$DIR/round.sql"
	chmod a+r "$DIR/round.sql"
	l0=$(psql_q -d "$db" -c 'SELECT pg_current_wal_lsn()')
	c0=$(server_cpu_ticks)
	t0=$(date +%s.%N)
	"$BIN/pgbench" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -t "$rounds" \
		-D batch="$BATCH" -f "$DIR/round.sql" "$db" >"$DIR/pgbench.out" 2>&1 ||
		{ cat "$DIR/pgbench.out" >&2; exit 1; }
	t1=$(date +%s.%N)
	sleep 0.2
	c1=$(server_cpu_ticks)
	l1=$(psql_q -d "$db" -c 'SELECT pg_current_wal_lsn()')
	grep -q "number of failed transactions: 0" "$DIR/pgbench.out" ||
		{ cat "$DIR/pgbench.out" >&2; exit 1; }
	local done_n=$((rounds * CLIENTS * BATCH))
	awk -v v="$variant" -v m="$mode" -v r="$rep" -v n="$done_n" -v t0="$t0" -v t1="$t1" \
		-v w="$(psql_q -d "$db" -c "SELECT '$l1'::pg_lsn - '$l0'::pg_lsn")" \
		-v c="$((c1 - c0))" -v hz="$TICKS" 'BEGIN {
			printf "%s\t%s\t%d\t%.0f\t%.0f\t%.1f\n", v, m, r, n / (t1 - t0), w / n, c / hz * 1e6 / n
		}' | tee -a "$OUT/runs.tsv"
	psql_q -c "DROP DATABASE $db"
}

variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(bare today mem_update mem_delete mem_delete_log
	mem_delete_logpk hot_claim_log hot_claim_update)
printf 'variant\tmode\trep\tjobs/s\tWAL B/job\tCPU us/job\n'
for rep in $(seq "$REPS"); do
	for v in "${variants[@]}"; do
		one "$v" own "$rep"
		case $v in mem_*) ;; *) one "$v" shared "$rep" ;; esac
	done
done

# the medians of each variant and mode, with the ratios to the bare table on
# one shared queue (what the engine and the bare table really run)
python3 - "$OUT/runs.tsv" >"$OUT/results.md" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    v, m, _, jobs, wal, cpu = line.split('\t')
    runs.setdefault((v, m), []).append((float(jobs), float(wal), float(cpu)))
med = {k: [statistics.median(x[i] for x in r) for i in range(3)] for k, r in runs.items()}
bare = med.get(('bare', 'shared'))
print('| variant | queues | jobs/s | WAL bytes per job | server CPU µs per job | runs | jobs/s, WAL, CPU / bare shared |')
print('|---|---|---|---|---|---|---|')
for (v, m), (jobs, wal, cpu) in med.items():
    ratio = '%.2f×, %.2f×, %.2f×' % (jobs / bare[0], wal / bare[1], cpu / bare[2]) if bare else ''
    print('| %s | %s | %s | %.0f | %.1f | %d | %s |' % (
        v, m, format(round(jobs), ','), wal, cpu, len(runs[(v, m)]), ratio))
PY
cat "$OUT/results.md"
