#!/usr/bin/env bash
#
# test/fuzz/run.sh - run the fuzzer (fuzz.py) on a throwaway cluster.
#
#   test/fuzz/run.sh --ci                 CI size: 3,000 calls (about 20 s)
#   test/fuzz/run.sh                      50,000 calls (about 6 minutes on 2 cores)
#   test/fuzz/run.sh --calls 200000 --seed 42
#   test/fuzz/run.sh --seed 42 --calls 1234 --trace    replay a run, call by call
#
# Every argument goes to fuzz.py (see fuzz.py --help).  The cluster comes
# from test/bench/cluster.sh (gen_durable preloaded; as root the server runs
# as postgres) in a temporary directory, and is removed afterwards unless
# FUZZ_KEEP=1.  Needs `make install` done and Debian's python3-psycopg.
# Exit status: fuzz.py's (0 = no violation).

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$(mktemp -d /tmp/gd_fuzz.XXXXXX)
# unix socket only, in a directory of its own: any port number will do
port=${FUZZ_PORT:-$((20000 + RANDOM % 20000))}

cleanup() {
	if [ "${FUZZ_KEEP:-0}" = 1 ]; then
		echo "run.sh: cluster kept in $dir (port $port); stop it with: $root/test/bench/cluster.sh stop $dir"
	else
		"$root/test/bench/cluster.sh" stop "$dir"
	fi
}
trap cleanup EXIT

chmod 755 "$dir"
"$root/test/bench/cluster.sh" start "$dir" "$port"
echo "run.sh: cluster in $dir, port $port"

rc=0
/usr/bin/python3 "$here/fuzz.py" --host "$dir" --port "$port" --user postgres \
	--server-log "$dir/log" "$@" || rc=$?
exit $rc
