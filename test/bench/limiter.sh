#!/usr/bin/env bash
#
# test/bench/limiter.sh - what admission costs: pick throughput with every
# row rate-limited or gated, as a ratio to unlimited picks in the same run.
#
# Starts a throwaway cluster (fsync and synchronous_commit on, the module
# preloaded, the maintenance worker on), and for each workload inserts ROWS
# no-op one-step jobs and drains them for SECONDS with CLIENTS pgbench
# clients, each looping over pick (a batch of BATCH) and flush (done), each
# its own transaction, as a worker does; jobs/s = rows done / SECONDS.  Every limit is generous enough never to throttle, so what is
# measured is the limiter's own cost (with one shard, the pickers of a hot
# key take turns on its one bucket row, each holding it until its pick
# commits):
#   unlimited        no limits;
#   rate_hot_1       every row on one rate key, 1 shard;
#   rate_hot_8       the same with a rate limit of 8 shards;
#   rate_100         rows spread over 100 partitions of one rate limit;
#   gate_hot_1       every row on one gate key, 1 shard (K = 1,000,000);
#   gate_hot_8       the same gate with 8 shards;
#   gate_100         rows spread over 100 partitions of one gate.
# Prints jobs/s per workload (median and min-max of REPS runs) and the
# ratio of each median to the unlimited median.  A benchmark, not a test:
# nothing checks the numbers.
#
# Run as root from the repository, after make install:
#   test/bench/limiter.sh [SECONDS] [CLIENTS] [BATCH] [REPS] [ROWS]
# (defaults 5 4 10 3 100000; ROWS must outlast SECONDS, or it says so).

set -euo pipefail

SECONDS_PER_RUN=${1:-5}
CLIENTS=${2:-4}
BATCH=${3:-10}
REPS=${4:-3}
ROWS=${5:-100000}
BIN=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
[ -x "$BIN/pgbench" ] || BIN=/usr/lib/postgresql/15/bin
PORT=55439
DIR=$(mktemp -d /tmp/gd_limiter_bench.XXXXXX)
chown postgres "$DIR"

as_pg() { runuser -u postgres -- "$@"; }
psql_q() {
	as_pg env PGOPTIONS="-c client_min_messages=warning" \
		"$BIN/psql" -h "$DIR" -p "$PORT" -d bench -X -q -v ON_ERROR_STOP=1 "$@"
}

cleanup() {
	as_pg "$BIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$DIR"
}
trap cleanup EXIT

as_pg "$BIN/initdb" -D "$DIR/data" -A trust >/dev/null
cat >> "$DIR/data/postgresql.conf" <<EOF
shared_preload_libraries = 'gen_durable'
listen_addresses = ''
unix_socket_directories = '$DIR'
port = $PORT
fsync = on
synchronous_commit = on
shared_buffers = 256MB
max_connections = 50
EOF
as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w start >/dev/null
as_pg "$BIN/createdb" -h "$DIR" -p "$PORT" bench
psql_q -c "CREATE EXTENSION gen_durable" \
	   -c "SELECT gen_durable.set_rate_limit('r', 1e9, '1 second')" \
	   -c "SELECT gen_durable.set_rate_limit('r8', 1e9, '1 second', shards => 8)" \
	   -c "SELECT gen_durable.set_concurrency_limit('g1', 1000000)" \
	   -c "SELECT gen_durable.set_concurrency_limit('g8', 1000000, 8)" \
	   -c "SELECT gen_durable.set_concurrency_limit('gp', 1000000)" >/dev/null

# one pgbench round, as a worker does it: pick a batch (its own
# transaction), then flush it done (another); extended protocol, so the
# outcomes travel as a parameter
cat > "$DIR/drain.sql" <<EOF
SELECT COALESCE(jsonb_agg(jsonb_build_object('id', id, 'worker', 'w' || :client_id,
                                             'kind', 'done')), '[]') AS outcomes
  FROM gen_durable.pick('bench', 'w' || :client_id, $BATCH) \\gset
SELECT count(*) FROM gen_durable.flush(:outcomes::jsonb);
EOF
chown postgres "$DIR/drain.sql"

# the insert spec of row n for each workload
spec_of() {
	case "$1" in
		unlimited)  echo "jsonb_build_object('fsm', 'noop', 'queue', 'bench')" ;;
		rate_hot_1) echo "jsonb_build_object('fsm', 'noop', 'queue', 'bench', 'rate_limit', 'r')" ;;
		rate_hot_8) echo "jsonb_build_object('fsm', 'noop', 'queue', 'bench', 'rate_limit', 'r8')" ;;
		rate_100)   echo "jsonb_build_object('fsm', 'noop', 'queue', 'bench', 'rate_limit', 'r:' || n % 100)" ;;
		gate_hot_1) echo "jsonb_build_object('fsm', 'noop', 'queue', 'bench', 'concurrency_key', 'g1')" ;;
		gate_hot_8) echo "jsonb_build_object('fsm', 'noop', 'queue', 'bench', 'concurrency_key', 'g8')" ;;
		gate_100)   echo "jsonb_build_object('fsm', 'noop', 'queue', 'bench', 'concurrency_key', 'gp:' || n % 100)" ;;
	esac
}

# run_once prints the jobs/s of one drain of ROWS rows
run_once() {
	local spec
	spec=$(spec_of "$1")
	psql_q -c "TRUNCATE gen_durable.instances CASCADE" -c "DELETE FROM gen_durable.buckets" \
		|| exit 1
	# insert_many takes at most 10,000 specs a call
	psql_q -c "SELECT count(*) FROM generate_series(0, ($ROWS - 1) / 10000) AS c,
				 LATERAL gen_durable.insert_many(
				   (SELECT jsonb_agg($spec) FROM generate_series(c * 10000 + 1,
						LEAST(c * 10000 + 10000, $ROWS)) AS n)) AS m" >/dev/null || exit 1
	psql_q -c "VACUUM ANALYZE gen_durable.instances" -c "CHECKPOINT"
	as_pg "$BIN/pgbench" -h "$DIR" -p "$PORT" -n -M extended -c "$CLIENTS" -j "$CLIENTS" \
		-T "$SECONDS_PER_RUN" -f "$DIR/drain.sql" bench >/dev/null
	local done left
	done=$(psql_q -Atc "SELECT count(*) FROM gen_durable.instances WHERE status = 'done'")
	left=$(psql_q -Atc "SELECT count(*) FROM gen_durable.instances WHERE status <> 'done'")
	if [ "$left" -eq 0 ]; then
		echo "  ($1: the $ROWS rows ran out before $SECONDS_PER_RUN s; pass more ROWS)" >&2
	fi
	echo "$done $SECONDS_PER_RUN" | awk '{ printf "%.0f\n", $1 / $2 }'
}

printf 'gen_durable limiter benchmark: %s s per run, %s clients, batch %s, %s runs each\n' \
	"$SECONDS_PER_RUN" "$CLIENTS" "$BATCH" "$REPS"
printf '%s, %s cores, PostgreSQL %s, fsync on, synchronous_commit on\n\n' \
	"$(uname -n)" "$(nproc)" "$(as_pg "$BIN/postgres" --version | awk '{print $3}')"
printf '%-12s %10s %18s %8s\n' workload 'jobs/s' 'min-max' ratio
base=""
for w in unlimited rate_hot_1 rate_hot_8 rate_100 gate_hot_1 gate_hot_8 gate_100; do
	runs=()
	for _ in $(seq "$REPS"); do
		runs+=("$(run_once "$w")") || exit 1
	done
	sorted=$(printf '%s\n' "${runs[@]}" | sort -n)
	med=$(echo "$sorted" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	min=$(echo "$sorted" | head -1)
	max=$(echo "$sorted" | tail -1)
	[ -n "$base" ] || base=$med
	printf '%-12s %10s %18s %8s\n' "$w" "$med" "$min-$max" \
		"$(awk -v m="$med" -v b="$base" 'BEGIN { printf "%.2fx", m / b }')"
done
