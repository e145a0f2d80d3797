#!/usr/bin/env bash
#
# examples/psql/walkthrough.sh - one order workflow, call by call, in psql.
#
# Starts a private PostgreSQL 15 server in a temporary directory (unix socket
# only, no TCP), creates the extension and drives one order workflow through
# it with psql, printing every call and its answer:
#
#   start  --await 'payment'-->  charge  --retry (flaky)-->  charge  --next-->  ship  --done
#
# The "worker" is this script: it picks a job, looks at it, and flushes the
# step's outcome, exactly as a worker process in any language would.
#
# Requires `make install` (the extension must be installed into the server).
# Works as root (the server runs as the postgres user) or as any other user.
# Everything is removed on exit, success or failure.

set -euo pipefail

PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
SHAREDIR=$("$PG_CONFIG" --sharedir)
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)

die() { echo "walkthrough: $*" >&2; exit 1; }

[ -x "$BINDIR/initdb" ] || die "no initdb in $BINDIR (install postgresql-15)"
if [ ! -f "$SHAREDIR/extension/gen_durable.control" ] || [ ! -f "$PKGLIBDIR/gen_durable.so" ]; then
	die "gen_durable is not installed: run 'make && make install' first"
fi

# PostgreSQL refuses to run as root: then run the server and psql as postgres
if [ "$(id -u)" -eq 0 ]; then
	id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' user"
	as_pg() { runuser -u postgres -- "$@"; }
else
	as_pg() { "$@"; }
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gen_durable_walkthrough.XXXXXX")
STARTED=no
cleanup() {
	local rc=$?
	if [ "$STARTED" = yes ]; then
		as_pg "$BINDIR/pg_ctl" -D "$TMP/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	if [ $rc -ne 0 ] && [ -f "$TMP/server.log" ]; then
		echo "walkthrough: FAILED; last lines of the server log:" >&2
		tail -n 20 "$TMP/server.log" >&2 || true
	fi
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$(id -u)" -eq 0 ]; then chown postgres "$TMP"; fi
cd "$TMP"						# a directory the server user can read

# a port nobody listens on (the server itself listens only on a socket in $TMP)
PORT=
for p in $(seq $((54320 + RANDOM % 1000)) 55999); do
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null &&
		! "$BINDIR/pg_isready" -q -h /tmp -p "$p" 2>/dev/null; then
		PORT=$p
		break
	fi
done
[ -n "$PORT" ] || die "no free port found"

echo "== starting a throwaway PostgreSQL in $TMP (port $PORT, unix socket only)"
as_pg "$BINDIR/initdb" -D "$TMP/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
	>"$TMP/initdb.log" 2>&1 || { cat "$TMP/initdb.log" >&2; die "initdb failed"; }
# This walk-through's "worker" opens a new connection for every call, so a claim
# must not be returned when the connection that made it closes.  Every outcome
# names the claim it ran under, and the server insists on it
# (gen_durable.require_claim: an outcome without "claim" is invalid).
cat >>"$TMP/data/postgresql.conf" <<EOF
shared_preload_libraries = 'gen_durable'
gen_durable.reclaim_on_disconnect = off
gen_durable.require_claim = on
listen_addresses = ''
unix_socket_directories = '$TMP'
port = $PORT
fsync = off
EOF
as_pg "$BINDIR/pg_ctl" -D "$TMP/data" -l "$TMP/server.log" -w -t 30 start >/dev/null
STARTED=yes

# run SQL (from stdin) in database $DB; fields separated by |, one row a line
DB=postgres
sql() {
	as_pg "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$TMP" -p "$PORT" -U postgres -d "$DB"
}

sql <<<"CREATE DATABASE demo"
DB=demo
sql <<<"CREATE EXTENSION gen_durable"
echo "   CREATE EXTENSION gen_durable -> version $(sql <<<"SELECT extversion FROM pg_extension WHERE extname = 'gen_durable'")"
[ "$(sql <<<"SHOW gen_durable.require_claim")" = on ] || die "gen_durable.require_claim is not on"

# show: print a call, run it, print its answer (indented); the answer is
# also left in $OUT for the checks
show() {
	local label=$1 query
	query=$(cat)
	echo
	echo "-- $label"
	sed 's/^/   sql> /' <<<"$query"
	OUT=$(sql <<<"$query")
	sed 's/^/   ==> /' <<<"${OUT:-(no rows)}"
}
expect() {						# expect WHAT GOT WANT
	[ "$2" = "$3" ] || die "$1: expected '$3', got '$2'"
}

# the worker's pick: one job, as id|step|attempt|steps|claim|state|awaited
pick() {
	show "worker-1 picks from queue 'default'" <<'SQL'
SELECT id, step, attempt, steps, claim, state, awaited
  FROM gen_durable.pick('default', 'worker-1', batch => 1);
SQL
	IFS='|' read -r JOB_ID JOB_STEP JOB_ATTEMPT JOB_STEPS JOB_CLAIM _ <<<"$OUT"
	[ -n "$OUT" ] || die "pick returned no job"
}
# the worker's flush of one outcome object: applied|detail
flush() {
	show "worker-1 flushes: $1" <<SQL
SELECT applied, detail FROM gen_durable.flush('[$2]');
SQL
}

echo
echo "== 1. a producer starts an order"
show "insert an instance of fsm 'order', addressable as 'order-42'" <<'SQL'
SELECT gen_durable.insert('order', '{"order_id": 42, "items": ["book"]}',
                          correlation_key => 'order-42');
SQL
ORDER_ID=$OUT

echo
echo "== 2. step 'start': the worker parks the order until the payment arrives"
pick
expect "first step" "$JOB_ID|$JOB_STEP|$JOB_ATTEMPT" "$ORDER_ID|start|0"
flush "await signal 'payment', then run step 'charge'" \
	"{\"id\": $JOB_ID, \"worker\": \"worker-1\", \"claim\": $JOB_CLAIM, \"kind\": \"await\", \"names\": [\"payment\"], \"step\": \"charge\"}"
expect "await" "$OUT" "ok|"
show "nothing is runnable while it waits" <<'SQL'
SELECT count(*) FROM gen_durable.pick('default', 'worker-1');
SQL
expect "idle pick" "$OUT" "0"

echo
echo "== 3. a producer sends the payment signal to the correlation key"
show "signal 'order-42'" <<'SQL'
SELECT gen_durable.signal('order-42', 'payment', '{"amount": 42}');
SQL
expect "signal" "$OUT" "delivered"

echo
echo "== 4. step 'charge' sees the payment, but the card processor times out"
pick
expect "charge" "$JOB_STEP|$JOB_ATTEMPT" "charge|0"
grep -q '"amount": 42' <<<"$OUT" || die "the awaited payload was not handed to the step"
flush "retry now (delay 0), recording the error" \
	"{\"id\": $JOB_ID, \"worker\": \"worker-1\", \"claim\": $JOB_CLAIM, \"kind\": \"retry\", \"delay\": 0, \"error\": {\"message\": \"card processor timeout\"}}"
expect "retry" "$OUT" "ok|"

echo
echo "== 5. second attempt of 'charge': the payment is handed again, the charge succeeds"
pick
expect "charge again" "$JOB_STEP|$JOB_ATTEMPT" "charge|1"
grep -q '"amount": 42' <<<"$OUT" || die "the retried step lost the awaited payload"
flush "next step 'ship', with the new state" \
	"{\"id\": $JOB_ID, \"worker\": \"worker-1\", \"claim\": $JOB_CLAIM, \"kind\": \"next\", \"step\": \"ship\", \"state\": {\"order_id\": 42, \"charged\": 42}}"
expect "next" "$OUT" "ok|"

echo
echo "== 6. step 'ship' finishes the order"
pick
expect "ship" "$JOB_STEP|$JOB_ATTEMPT|$JOB_STEPS" "ship|0|2"
flush "done, with a result" \
	"{\"id\": $JOB_ID, \"worker\": \"worker-1\", \"claim\": $JOB_CLAIM, \"kind\": \"done\", \"result\": {\"tracking\": \"TRACK-42\"}}"
expect "done" "$OUT" "ok|"

echo
echo "== 7. the committed row"
show "the instance" <<SQL
SELECT status, step, attempt, steps, result
  FROM gen_durable.instances WHERE id = $ORDER_ID;
SQL
expect "final row" "$OUT" "done|ship|0|2|{\"tracking\": \"TRACK-42\"}"
show "its inbox (the consumed payment is gone)" <<SQL
SELECT count(*) FROM gen_durable.signals WHERE target_id = $ORDER_ID;
SQL
expect "inbox" "$OUT" "0"

echo
echo "== walk-through finished: order $ORDER_ID is done"
