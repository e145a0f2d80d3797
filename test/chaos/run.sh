#!/usr/bin/env bash
#
# test/chaos/run.sh - the chaos soak (test/chaos/README.md).
#
#   test/chaos/run.sh [--seconds 60] [--seed N] [--workers 3] [--rate 12]
#                     [--keep] [other chaos.py options]
#
# Starts a throwaway cluster (test/bench/cluster.sh: gen_durable preloaded,
# fsync on, unix socket only, gen_durable.require_claim on: every outcome
# must name its claim) in a temporary directory, runs
# test/chaos/chaos.py against it (a mixed workload run by worker processes
# of test/chaos/chaos_app.py while a seeded chaos loop kills workers, their
# backends, the maintenance worker and the server), then the invariant
# checks.  Prints the seed, figures and every violation; exits 0 only with
# no violation.  The temporary directory (worker logs, report.json,
# acked.log, the server's log and its data directory, stopped) is kept
# when the run fails or with --keep.
# Run it after make install, as root (the server runs as postgres) or as
# any other user.

set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/examples/checkout/harness.sh"

KEEP=no
ARGS=()
while [ $# -gt 0 ]; do
	case $1 in
		--keep) KEEP=yes ;;
		*) ARGS+=("$1") ;;
	esac
	shift
done

find_python
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gen_durable_chaos.XXXXXX")
chmod 755 "$TMP"
CLUSTER=$TMP/cluster
PORT=5497
CHAOS_PID=

cleanup() {
	local rc=$?
	if [ -n "$CHAOS_PID" ] && kill -0 "$CHAOS_PID" 2>/dev/null; then
		kill -TERM "$CHAOS_PID" 2>/dev/null || true
		wait "$CHAOS_PID" 2>/dev/null || true
	fi
	if [ $rc -eq 0 ] && [ $KEEP = no ]; then
		"$REPO/test/bench/cluster.sh" stop "$CLUSTER"
		rm -rf "$TMP"
	else
		# keep the cluster's data (stopped) for a look: pg_ctl -D $CLUSTER/data start
		if [ -f "$CLUSTER/data/postmaster.pid" ]; then
			as_postgres /usr/lib/postgresql/15/bin/pg_ctl -D "$CLUSTER/data" -m fast stop >/dev/null 2>&1 || true
		fi
		echo "chaos: kept $TMP: worker*.err, report.json, acked.log, cluster/log, cluster/data"
	fi
	exit $rc
}
as_postgres() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$REPO/test/bench/cluster.sh" start "$CLUSTER" "$PORT" "${CLUSTER_SETTINGS[@]}"
export PGHOST=$CLUSTER PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
check_settings
sql -c 'CREATE DATABASE chaos'
export PGDATABASE=chaos

"$PYTHON" "$REPO/test/chaos/chaos.py" --datadir "$CLUSTER/data" --serverlog "$CLUSTER/log" \
	--rundir "$TMP" --python "$PYTHON" "${ARGS[@]}" &
CHAOS_PID=$!
rc=0
wait "$CHAOS_PID" || rc=$?
CHAOS_PID=
if [ $rc -eq 0 ]; then
	echo "chaos: ok"
else
	echo "chaos: FAILED (exit status $rc)"
fi
exit $rc
