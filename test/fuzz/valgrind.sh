#!/usr/bin/env bash
#
# test/fuzz/valgrind.sh - the pg_regress suites (and optionally a short fuzz
# run) against a PostgreSQL server running under Valgrind memcheck, then a
# report of what Valgrind found in gen_durable.so.
#
#   test/fuzz/valgrind.sh                       every suite of sql/ (about 10 minutes on 2 cores)
#   test/fuzz/valgrind.sh insert flush spawn    some of them
#   FUZZ_CALLS=6000 test/fuzz/valgrind.sh await    then 6,000 fuzz calls (fuzz.py) too (25 min)
#   VG_KEEP=1 ...                               keep the directory (logs, results)
#
# The server is started directly under valgrind (--trace-children=yes; the
# backends are forks of the postmaster, so every one runs under memcheck),
# preloading gen_durable and pg_stat_statements with test/gen_durable.conf's
# settings, in a temporary directory (unix socket only).  pg_regress runs
# with --use-existing against a database it does not create, from the top
# of the tree (the suites \i test/regress_helpers.sql), writing its results
# to the temporary directory.  Debian's postgres is not built with
# USE_VALGRIND, so memcheck sees malloc-level errors and uses of
# uninitialized values, not overruns inside palloc chunks.  valgrind.supp
# silences PostgreSQL's own known reports.  The summary lists every error
# whose stack has a frame in gen_durable.so (file:line), and the exit status
# is 1 when there is one.  pg_regress's own result (timing-sensitive suites
# may differ under valgrind) is printed but does not decide the exit status.

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=/usr/lib/postgresql/15/bin
PG_REGRESS=$(dirname "$("$BIN/pg_config" --pgxs)")/../test/regress/pg_regress
dir=$(mktemp -d /tmp/gd_vg.XXXXXX)
port=${VG_PORT:-$((20000 + RANDOM % 20000))}

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ $# -gt 0 ]; then
	tests=("$@")
else
	mapfile -t tests < <(cd "$root/sql" && ls ./*.sql | sed -e 's|^\./||' -e 's|\.sql$||' \
		| grep -v '^gen_durable--' | sort)
fi

chmod 755 "$dir"
[ "$(id -u)" -eq 0 ] && chown postgres "$dir"
as_pg mkdir -p "$dir/vg" "$dir/out"
as_pg "$BIN/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
cat "$root/test/gen_durable.conf" >> "$dir/data/postgresql.conf"
cat >> "$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir'
port = $port
max_connections = 20
shared_buffers = 32MB
fsync = off
log_line_prefix = '%m [%p] %e %a: '
log_connections = on
CONF

vgpid=
stop() {
	if [ -n "$vgpid" ]; then
		as_pg "$BIN/pg_ctl" -D "$dir/data" -m fast -t 300 stop >/dev/null 2>&1 || kill "$vgpid" 2>/dev/null || true
		wait "$vgpid" 2>/dev/null || true
		vgpid=
	fi
}
cleanup() {
	stop
	if [ "${VG_KEEP:-0}" = 1 ]; then
		echo "valgrind.sh: kept $dir"
	else
		rm -rf "$dir"
	fi
}
trap cleanup EXIT

echo "valgrind.sh: starting the server under valgrind in $dir (port $port)"
as_pg valgrind --quiet --trace-children=yes --track-origins=yes --read-var-info=no \
	--leak-check=no --error-limit=no --num-callers=40 --child-silent-after-fork=no \
	--fullpath-after= \
	--suppressions="$here/valgrind.supp" --gen-suppressions=all \
	--log-file="$dir/vg/%p.log" \
	"$BIN/postgres" -D "$dir/data" >"$dir/server.log" 2>&1 &
vgpid=$!
for _ in $(seq 600); do
	if "$BIN/pg_isready" -q -h "$dir" -p "$port" -U postgres; then break; fi
	sleep 1
done
"$BIN/pg_isready" -h "$dir" -p "$port" -U postgres >/dev/null || { echo "valgrind.sh: the server did not start" >&2; cat "$dir/server.log" >&2; exit 2; }
"$BIN/psql" -X -q -h "$dir" -p "$port" -U postgres -d postgres -c "CREATE DATABASE contrib_regression"

start=$(date +%s)
regress_rc=0
(cd "$root" && "$PG_REGRESS" --use-existing --host="$dir" --port="$port" --user=postgres \
	--inputdir="$root" --outputdir="$dir/out" --dbname=contrib_regression "${tests[@]}") || regress_rc=$?
echo "valgrind.sh: pg_regress exit status $regress_rc after $(( $(date +%s) - start ))s"
if [ -f "$dir/out/regression.diffs" ]; then
	echo "valgrind.sh: regression.diffs (first 60 lines):"
	head -60 "$dir/out/regression.diffs"
fi

if [ -n "${FUZZ_CALLS:-}" ]; then
	/usr/bin/python3 "$here/fuzz.py" --host "$dir" --port "$port" --user postgres \
		--calls "$FUZZ_CALLS" --statement-timeout 600 --server-log "$dir/server.log" \
		${FUZZ_SEED:+--seed "$FUZZ_SEED"} || echo "valgrind.sh: fuzz.py exit status $?"
fi

stop

# the report: every error block that has a frame in gen_durable.so
/usr/bin/python3 - "$dir/vg" "$root" "$dir/server.log" <<'PY'
import collections, glob, re, sys
root = sys.argv[2].rstrip("/") + "/"
# which client each backend served (pg_regress sets application_name to pg_regress/TEST)
app = {}
for line in open(sys.argv[3], errors="replace"):
    m = re.search(r"\[(\d+)\] \S+ ([^:\s]+):", line)
    if m and m.group(1) not in app:
        app[m.group(1)] = m.group(2)
def ours(line):
    return "gen_durable.so" in line or ("(" + root + "src/") in line
blocks = []
total = 0
files = sorted(glob.glob(sys.argv[1] + "/*.log"))
for path in files:
    text = open(path, errors="replace").read()
    pid = re.search(r"/(\d+)\.log$", path).group(1)
    # an error block starts with "==PID== <kind>" after a blank "==PID== " line
    for b in re.split(r"\n==\d+== \n", text):
        lines = [re.sub(r"^==\d+== ?", "", l) for l in b.splitlines()]
        if not lines or not any(re.search(r"^\s+(at|by) 0x", l) for l in lines):
            continue
        if lines[0].startswith("{") or lines[0].startswith("Memcheck,"):
            continue
        total += 1
        if any(ours(l) for l in lines):
            blocks.append((pid, lines))
print("valgrind.sh: %d valgrind logs, %d error reports in all, %d with a frame in gen_durable.so"
      % (len(files), total, len(blocks)))
seen = collections.Counter()
for pid, lines in blocks:
    frames = [l for l in lines if re.search(r"^\s+(at|by) 0x", l)]
    mine = [l.strip() for l in frames if ours(l)]
    key = (lines[0], tuple(re.sub(r"0x[0-9A-F]+", "", l) for l in mine[:3]))
    seen[key] += 1
    if seen[key] > 1:
        continue
    print("\n--- pid %s (%s): %s" % (pid, app.get(pid, "?"), lines[0]))
    for l in lines[1:]:
        if l.startswith("{"):
            break
        print("   " + l)
if blocks:
    print("\nvalgrind.sh: %d distinct reports in gen_durable.so" % len(seen))
    sys.exit(1)
PY
