# test/bench/tools.sh - what the benchmarks need besides the server, for
# run.sh and soak.sh (sourced: `. "$HERE/tools.sh"; bench_tools`).
#
# bench_tools installs gnuplot for the charts when it is missing and it can
# (as root, with apt; without it the charts are skipped), installs the peers
# and the Node they need into $HERE/node_modules exactly as locked
# (package-lock.json) when they are not there, and sets NODE to that Node.

bench_tools() {
	if ! command -v gnuplot >/dev/null && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		echo "== installing gnuplot-nox for the charts" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -q --no-install-recommends gnuplot-nox >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null 2>&1 &&
				apt-get install -y -q --no-install-recommends gnuplot-nox >/dev/null 2>&1; } ||
			echo "== could not install gnuplot: no charts" >&2
	fi
	if [ ! -x "$HERE/node_modules/.bin/node" ]; then
		(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
	fi
	NODE=$HERE/node_modules/.bin/node
}
