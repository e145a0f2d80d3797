#!/usr/bin/env bash
#
# test/all.sh - every test of gen_durable: the README's test command.
#
#   1. make installcheck: pg_regress, the isolation tests and the TAP tests,
#      each on temporary servers of their own.  PostgreSQL refuses to run as
#      root, so as root it runs as postgres after `chown -R postgres .` (the
#      postgres user must be able to reach the clone);
#   2. the end-to-end suites, test/e2e/run.sh: the checkout workload with
#      the Python and the Node worker apps, directly and through PgBouncer,
#      and the psql examples;
#   3. the chaos soak for 60 s (test/chaos/run.sh: workers, backends, the
#      maintenance worker and the server killed under a mixed workload,
#      then every invariant checked) and the fuzzer at CI size
#      (test/fuzz/run.sh --ci: 3,000 hostile calls, then the invariants).
#
# Run it after make install, from anywhere in the clone, as root or as the
# user who owns the clone.  Every suite runs even when an earlier one
# failed; the last line names the failed ones, and the exit status is 1 if
# any failed.  .ci/run counts the ok / FAILED lines of the output.

set -euo pipefail

cd "$(dirname "$0")/.."

failed=()

# suite NAME COMMAND...: run one suite and remember whether it failed
suite() {
	local name=$1 rc=0
	shift
	printf '\n=== %s\n' "$name"
	"$@" </dev/null || rc=$?
	if [ $rc -ne 0 ]; then
		failed+=("$name")
		echo "suite $name ... FAILED (exit status $rc)"
	else
		echo "suite $name ... ok"
	fi
}

if [ "$(id -u)" -eq 0 ]; then
	chown -R postgres .
	suite "make installcheck (as postgres)" runuser -u postgres -- make installcheck
else
	suite "make installcheck" make installcheck
fi
suite "e2e python" test/e2e/run.sh python
suite "e2e python through PgBouncer" test/e2e/run.sh python --pgbouncer
suite "e2e node" test/e2e/run.sh node
suite "e2e node through PgBouncer" test/e2e/run.sh node --pgbouncer
suite "e2e psql" test/e2e/run.sh psql
suite "chaos soak" test/chaos/run.sh --seconds 60
suite "fuzz" test/fuzz/run.sh --ci

echo
if [ ${#failed[@]} -eq 0 ]; then
	echo "test/all.sh: every suite passed"
else
	printf 'test/all.sh: failed: %s\n' "${failed[@]}"
	exit 1
fi
