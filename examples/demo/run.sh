#!/usr/bin/env bash
#
# examples/demo/run.sh - gen_durable running a shop's checkouts, end to end,
# in a throwaway cluster.
#
#   examples/demo/run.sh [python|node]         (default: python)
#
#   1. starts a private PostgreSQL 15 server with gen_durable preloaded
#      (test/bench/cluster.sh: in a temporary directory, unix socket only);
#   2. starts 3 worker processes of the checkout app
#      (examples/python/checkout_app.py, 8 steps at a time each);
#   3. runs the driver (examples/checkout/driver.py): it sets the limits,
#      then 300 orders arrive at 20 a second, each fanning out into 1 to 5
#      line items (a flaky reservation retried, a rate-limited and gated
#      shipping call), a payment webhook signals each order, every 20th
#      order is cancelled; live progress meanwhile;
#   4. prints the summary (gen_durable.stats, gen_durable.queues, statuses)
#      and the driver's verification of the contract
#      (examples/checkout/README.md);
#   5. stops the workers with SIGTERM (each finishes its steps, releases
#      its claims and says `stopped`), stops the server and removes it all.
#
# Takes some 20 s.  Needs `make install` and python3-psycopg (the node app:
# `npm ci` in examples/node).  Works as root (the server then runs as
# postgres) and as any other user.  DEMO_ORDERS (300) and DEMO_RATE (20
# orders a second) change the run; CHECKOUT_APP runs another worker app.

set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/checkout/harness.sh"

LANGUAGE=${1:-python}
ORDERS=${DEMO_ORDERS:-300}
RATE=${DEMO_RATE:-20}

PG_CONFIG=${PG_CONFIG:-pg_config}
if [ ! -f "$("$PG_CONFIG" --sharedir)/extension/gen_durable.control" ] ||
	[ ! -f "$("$PG_CONFIG" --pkglibdir)/gen_durable.so" ]; then
	die "gen_durable is not installed: run 'make && make install' first"
fi
find_python
app_command "$LANGUAGE"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gen_durable_demo.XXXXXX")
chmod 755 "$TMP"				# the server user must reach the cluster inside
# cleanup: on any exit, kill what is left, show the logs of a failure, and
# remove the cluster and the temporary directory
cleanup() {
	local rc=$?
	kill_workers
	if [ $rc -ne 0 ]; then
		echo "demo: FAILED" >&2
		worker_logs >&2
		if [ -f "$TMP/pg/log" ]; then
			echo "--- last lines of the server log:" >&2
			tail -n 15 "$TMP/pg/log" >&2
		fi
	fi
	cluster_down
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== 1. a throwaway PostgreSQL with gen_durable preloaded, in $TMP/pg"
cluster_up "$TMP/pg"
driver setup

echo
echo "== 2. three worker processes: ${APP[*]} --queues orders,items --concurrency 8"
for i in 0 1 2; do
	start_worker "$TMP/worker$i"
	echo "   ready ${WORKER_IDS[i]}"
done

echo
echo "== 3. the shop: $ORDERS orders at $RATE a second, their payments (signals), every 20th cancelled"
driver run --orders "$ORDERS" --rate "$RATE" --progress

echo
echo "== 4. the summary"
driver summary
echo
driver verify --orders "$ORDERS"

echo
echo "== 5. SIGTERM to the workers"
stop_workers
for i in "${!WORKER_IDS[@]}"; do
	echo "   stopped ${WORKER_IDS[i]} (exit 0)"
done
echo
echo "== demo finished: $ORDERS orders, $(steps_done) steps, all checks passed"
