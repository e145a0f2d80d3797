#!/usr/bin/env bash
#
# test/all.sh - every test of gen_durable: the README's test command.
#
#   test/all.sh               run every suite below
#   test/all.sh --count FILE  count the test lines of FILE, a saved output
#                             of test/all.sh or of one of its suites, and
#                             print `N passed, N failed` (nothing is run)
#
#   1. make installcheck, in three parts: pg_regress, the isolation tests
#      and the TAP tests, each on temporary servers of their own.  PostgreSQL refuses to run as
#      root, so as root it runs as postgres, who must be able to reach the
#      clone and, for the run, owns it (see "Ownership" below);
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
# failed, and ends with a line `suite <name> ... ok` or `... FAILED (exit
# status N)`.  The output ends with the failed suites, if any, and then one
# line `N passed, N failed` over everything that ran:
#   - every pg_regress and isolation test line (`test x ... ok`, or
#     `     x ... ok` in a parallel group; `... FAILED`),
#   - every TAP script (prove's `t/x.pl .. ok`; a failed one's line ends
#     after its dots, followed by `Dubious, ...` or `Failed n/m subtests`;
#     a skipped one, `skipped: ...`, is not counted),
#   - every end-to-end test (`e2e <suite>: <test> ... ok` / `... FAILED`),
#   - the chaos soak and the fuzzer, one test each, by their exit status;
# and one failed test more for a suite that failed with no test line saying
# FAILED (it could not start, say), or that passed without running any.
# (make installcheck runs as three suites, pg_regress, the isolation tests
# and TAP, so that a failure in one does not keep the others from running.)
# The exit status is 1 when anything failed.  .ci/run takes that
# last line as the tests' count.
#
# Ownership: as root, the clone is given to postgres (`chown -R postgres .`)
# for make installcheck, which writes its results there, and given back as
# soon as it ends, and on any exit (an interrupt, a failure): every path
# gets the owner and group it had before, and what the run created gets the
# clone's top directory's.  (Ctrl-C stops the running suite and the script
# at once; a SIGTERM sent to this script alone takes effect when the
# running suite has ended.)  So git keeps working in the clone for root (it
# refuses a repository owned by someone else: "dubious ownership").
# regression.diffs and output_iso/regression.diffs stay where make
# installcheck writes them, in the clone.

set -euo pipefail

# count_tests FILE: set COUNT_PASSED and COUNT_FAILED to the test lines in
# FILE that passed and failed (pg_regress and isolation, TAP, end-to-end)
count_tests() {
	local f=$1 p=0 n
	COUNT_PASSED=0
	COUNT_FAILED=0
	for p in \
		'^(test | {5})\S+ +\.\.\. ok( |$)' \
		'^\S+\.pl \.+ ok( |$)' \
		'^e2e .* \.\.\. ok( |$)'; do
		n=$(grep -cE "$p" "$f" || true)
		COUNT_PASSED=$((COUNT_PASSED + n))
	done
	# (prove ends the line of a failed script after its dots and says why
	# on the next ones: "Dubious, test returned 1", "Failed 1/2 subtests")
	for p in \
		'^(test | {5})\S+ +\.\.\. FAILED( |$)' \
		'^\S+\.pl \.+ *$|^\S+\.pl \.+ (Dubious|Failed|No subtests)' \
		'^e2e .* \.\.\. FAILED( |$)'; do
		n=$(grep -cE "$p" "$f" || true)
		COUNT_FAILED=$((COUNT_FAILED + n))
	done
}

if [ "${1:-}" = --count ]; then
	[ -f "${2:-}" ] || { echo "usage: test/all.sh [--count FILE]" >&2; exit 2; }
	count_tests "$2"
	echo "$COUNT_PASSED passed, $COUNT_FAILED failed"
	exit 0
fi
[ $# -eq 0 ] || { echo "usage: test/all.sh [--count FILE]" >&2; exit 2; }

cd "$(dirname "$0")/.."

PASSED=0
FAILED=0
SUITES=0
failed=()
OUTPUTS=$(mktemp -d "${TMPDIR:-/tmp}/gen_durable_all.XXXXXX")

# ------------------------------------------------------------- ownership

# CLONE_OWNER (uid:gid of the clone's top directory) is set while the
# clone is given to postgres; OWNERS lists, NUL-separated, `uid:gid path`
# for each path whose owner or group differs from the top directory's
CLONE_OWNER=
OWNERS=$OUTPUTS/owners

# give_to_postgres: record who owns what in the clone, then give it all to
# postgres
give_to_postgres() {
	local uid gid
	uid=$(stat -c %u .)
	gid=$(stat -c %g .)
	# (a path that vanishes meanwhile needs no owner back)
	find . \( ! -uid "$uid" -o ! -gid "$gid" \) -printf '%U:%G %p\0' >"$OWNERS" 2>/dev/null || true
	CLONE_OWNER=$uid:$gid
	chown -R postgres . || echo "test/all.sh: could not give every path of $(pwd) to postgres" >&2
}

# give_back: give every path of the clone its recorded owner and group
# back (what the run created gets the top directory's); does nothing when
# the clone was not given away
give_back() {
	local entry
	[ -n "$CLONE_OWNER" ] || return 0
	chown -R -h "$CLONE_OWNER" . ||
		echo "test/all.sh: could not give every path of $(pwd) back to $CLONE_OWNER" >&2
	while IFS= read -r -d '' entry; do
		chown -h "${entry%% *}" "${entry#* }" 2>/dev/null || true
	done <"$OWNERS"
	CLONE_OWNER=
}

on_exit() {
	local rc=$?
	give_back
	rm -rf "$OUTPUTS"
	exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- suites

# suite NAME KIND COMMAND...: run one suite, its output (stdout) shown and
# kept for counting, and remember whether it failed.  KIND says what it
# counts as: `tests`, the test lines of its output (count_tests); `one`,
# one test, passed when the command exits 0.
suite() {
	local name=$1 kind=$2 rc=0 out
	shift 2
	SUITES=$((SUITES + 1))
	out=$OUTPUTS/suite.$SUITES
	printf '\n=== %s\n' "$name"
	"$@" </dev/null | tee "$out" || rc=${PIPESTATUS[0]}
	if [ $rc -ne 0 ]; then
		failed+=("$name")
		echo "suite $name ... FAILED (exit status $rc)"
	else
		echo "suite $name ... ok"
	fi
	if [ "$kind" = one ]; then
		COUNT_PASSED=0
		COUNT_FAILED=0
	else
		count_tests "$out"
	fi
	if [ $rc -ne 0 ] && [ "$COUNT_FAILED" -eq 0 ]; then
		[ "$kind" = one ] || echo "suite $name failed with no test line saying FAILED: counted as one failed test"
		COUNT_FAILED=1
	elif [ $rc -eq 0 ] && [ $((COUNT_PASSED + COUNT_FAILED)) -eq 0 ]; then
		if [ "$kind" = one ]; then
			COUNT_PASSED=1
		else
			echo "suite $name ran no tests: counted as one failed test"
			COUNT_FAILED=1
		fi
	fi
	PASSED=$((PASSED + COUNT_PASSED))
	FAILED=$((FAILED + COUNT_FAILED))
}

# make installcheck in three parts, so that a failure in one does not
# keep the others from running: pg_regress, the isolation tests, TAP
installcheck_parts() {
	local as=("$@")
	suite "pg_regress" tests "${as[@]}" make installcheck ISOLATION= TAP_TESTS=
	suite "isolation tests" tests "${as[@]}" make installcheck REGRESS= TAP_TESTS=
	suite "TAP tests" tests "${as[@]}" make installcheck REGRESS= ISOLATION=
}
if [ "$(id -u)" -eq 0 ]; then
	give_to_postgres
	installcheck_parts runuser -u postgres --
	give_back
else
	installcheck_parts
fi
suite "e2e python" tests test/e2e/run.sh python
suite "e2e python through PgBouncer" tests test/e2e/run.sh python --pgbouncer
suite "e2e node" tests test/e2e/run.sh node
suite "e2e node through PgBouncer" tests test/e2e/run.sh node --pgbouncer
suite "e2e psql" tests test/e2e/run.sh psql
suite "chaos soak" one test/chaos/run.sh --seconds 60
suite "fuzz" one test/fuzz/run.sh --ci

echo
if [ ${#failed[@]} -eq 0 ]; then
	echo "test/all.sh: every suite passed"
else
	printf 'test/all.sh: failed: %s\n' "${failed[@]}"
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ] && [ ${#failed[@]} -eq 0 ]
