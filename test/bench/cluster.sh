#!/usr/bin/env bash
#
# test/bench/cluster.sh - a throwaway PostgreSQL 15 cluster for the
# benchmarks: durable settings (fsync and synchronous_commit on), gen_durable
# preloaded with its maintenance worker, unix socket only.
#
#   test/bench/cluster.sh start DIR PORT [NAME=VALUE...]
#                                          initdb (if needed) and start; as root
#                                          the server runs as postgres; each
#                                          NAME=VALUE is one more setting of
#                                          the new cluster's postgresql.conf
#   test/bench/cluster.sh stop DIR         stop it (immediate) and remove DIR
#
# Clients connect with host=DIR port=PORT user=postgres.  The end-to-end
# suites, the demo and the chaos soak add gen_durable.require_claim=on
# (examples/checkout/harness.sh, test/chaos/run.sh); the benchmarks and the
# fuzzer do not.

set -euo pipefail

BIN=/usr/lib/postgresql/15/bin
USAGE="usage: cluster.sh start DIR PORT [NAME=VALUE...] | stop DIR"
cmd=${1:?$USAGE}
dir=${2:?$USAGE}

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
	start)
		port=${3:?$USAGE}
		shift 3
		for setting in "$@"; do
			case $setting in
				*\'*) echo "cluster.sh: '$setting': no quotes, please" >&2; exit 2 ;;
				[a-z]*=*) ;;
				*) echo "cluster.sh: '$setting' is not NAME=VALUE" >&2; exit 2 ;;
			esac
		done
		mkdir -p "$dir"
		[ "$(id -u)" -eq 0 ] && chown postgres "$dir"
		if [ ! -f "$dir/data/PG_VERSION" ]; then
			as_pg "$BIN/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
			cat >> "$dir/data/postgresql.conf" <<CONF
shared_preload_libraries = 'gen_durable'
listen_addresses = ''
unix_socket_directories = '$dir'
port = $port
fsync = on
synchronous_commit = on
full_page_writes = on
shared_buffers = 256MB
max_connections = 100
max_wal_size = 4GB
CONF
			for setting in "$@"; do
				printf "%s = '%s'\n" "${setting%%=*}" "${setting#*=}" >>"$dir/data/postgresql.conf"
			done
		fi
		as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
		;;
	stop)
		as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
		rm -rf "$dir"
		;;
	*)
		echo "$USAGE" >&2
		exit 2
		;;
esac
