#!/usr/bin/env bash
#
# test/bench/cluster.sh - a throwaway PostgreSQL 15 cluster for the
# benchmarks: durable settings (fsync and synchronous_commit on), gen_durable
# preloaded with its maintenance worker, unix socket only.
#
#   test/bench/cluster.sh start DIR PORT   initdb (if needed) and start; as root
#                                          the server runs as postgres
#   test/bench/cluster.sh stop DIR         stop it (immediate) and remove DIR
#
# Clients connect with host=DIR port=PORT user=postgres.

set -euo pipefail

BIN=/usr/lib/postgresql/15/bin
cmd=${1:?usage: cluster.sh start DIR PORT | stop DIR}
dir=${2:?usage: cluster.sh start DIR PORT | stop DIR}

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
	start)
		port=${3:?usage: cluster.sh start DIR PORT}
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
		fi
		as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
		;;
	stop)
		as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
		rm -rf "$dir"
		;;
	*)
		echo "usage: cluster.sh start DIR PORT | stop DIR" >&2
		exit 2
		;;
esac
