#!/usr/bin/env bash
#
# examples/psql/worker.sh - the smallest gen_durable worker: a shell loop
# around psql, to show that a worker library hides nothing.
#
#   examples/psql/worker.sh QUEUE [HANDLER ARGS...]
#
# The loop: pick one job of QUEUE (waiting up to 10 s for one), run its
# step outside any transaction (HANDLER, by default `greet` below), flush
# the outcome.  HANDLER reads the job's state (JSON) on stdin, finds
# JOB_ID, JOB_FSM, JOB_STEP and JOB_ATTEMPT in its environment and prints
# the step's result (JSON): the outcome is `done` with that result, or a
# `retry` in 1 s when it exits non-zero.  SIGTERM or SIGINT ends the loop
# after the current job; on any exit the worker releases what it still
# holds.  It connects with the libpq environment (PGHOST, PGDATABASE, ...).
#
# Every call is a new psql process, so a new connection: the claim must not
# be returned when the connection that made it closes (PGOPTIONS below).
# A real worker keeps its connection, picks and flushes in batches, and
# sends heartbeats during long steps; see "Writing a worker" in README.md.

set -euo pipefail

QUEUE=${1:?usage: worker.sh QUEUE [HANDLER ARGS...]}
shift
WORKER="psql-${HOSTNAME:-host}-$$"
export PGOPTIONS="${PGOPTIONS:-} -c gen_durable.reclaim_on_disconnect=off"

# greet: the default step: a moment of "work", then a greeting as result
greet() {
	local state
	state=$(cat)
	sleep 0.1
	printf '{"greeting": "hello from %s", "state": %s}\n' "$WORKER" "$state"
}
if [ $# -eq 0 ]; then set -- greet; fi

# sql: run SQL from stdin with psql variables worker, queue and any -v given
sql() {
	psql -X -q -At -F $'\t' -v ON_ERROR_STOP=1 -v worker="$WORKER" -v queue="$QUEUE" "$@"
}

# release: hand back whatever this worker still holds (on any exit)
release() {
	sql <<<"SELECT gen_durable.release(:'worker')" >/dev/null
}

STOP=no
trap 'STOP=yes' TERM INT
trap release EXIT
echo "ready $WORKER"

while [ $STOP = no ]; do
	# pick: claim one due job, or wait up to 10 s for one
	job=$(sql <<<"SELECT id, fsm, step, attempt, claim, state
	                FROM gen_durable.pick(:'queue', :'worker', batch => 1, wait => '10 s')") ||
		{ sleep 1; continue; }		# interrupted, or the server is away
	[ -n "$job" ] || continue
	IFS=$'\t' read -r id fsm step attempt claim state <<<"$job"

	# run: the step itself, outside any transaction
	if result=$(JOB_ID=$id JOB_FSM=$fsm JOB_STEP=$step JOB_ATTEMPT=$attempt "$@" <<<"$state"); then
		kind='done'
		outcome="jsonb_build_object('kind', 'done', 'result', :'result'::jsonb)"
	else
		kind=retry
		outcome="jsonb_build_object('kind', 'retry', 'delay', 1,
		                            'error', jsonb_build_object('message', 'handler failed'))"
	fi

	# flush: commit the outcome; 'stale' if the claim was lost meanwhile
	# (the claim number fences it: a later claim of the job is not ours)
	applied=$(sql -v id="$id" -v claim="$claim" -v result="${result:-null}" <<<"SELECT applied FROM gen_durable.flush(
	            jsonb_build_array($outcome || jsonb_build_object('id', :id, 'worker', :'worker',
	                                                             'claim', :claim)))")
	echo "job $id ($fsm/$step, attempt $attempt): $kind -> $applied" >&2
done
echo "stopped $WORKER"
