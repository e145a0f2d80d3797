/*-------------------------------------------------------------------------
 *
 * stats.c
 *		The stats view: shared-memory counters since server start or the
 *		last reset_stats().
 *
 *		Counters are added by committed transactions only (aftercommit.c),
 *		so a rolled-back call counts nothing.  They are cluster-wide, kept
 *		in atomics, and read without a lock.
 *
 * IDENTIFICATION
 *		src/stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"

#include "shmem.h"

PG_FUNCTION_INFO_V1(gen_durable_stats);
PG_FUNCTION_INFO_V1(gen_durable_reset_stats);

/* the name of each GdCounter, in enum order */
static const char *const counter_names[GD_NCOUNTERS] = {
	"inserted",
	"insert_duplicates",
	"claimed",
	"claim_contended",
	"throttled_conc",
	"throttled_rate",
	"limiter_contended",
	"unknown_rate_limit",
	"rate_weight_over_burst",
	"committed_next",
	"committed_continue",
	"committed_retry",
	"committed_await",
	"committed_spawn",
	"children_spawned",
	"committed_done",
	"committed_fail",
	"stale_outcomes",
	"invalid_outcomes",
	"requeued",
	"budget_exhausted",
	"attempts_exhausted",
	"signals_delivered",
	"signals_duplicate",
	"signals_no_target",
	"signal_wakes",
	"heartbeats",
	"released",
	"cancelled",
	"reaped",
	"reaped_dead_backend",
	"lease_failed",
	"timeouts_fired",
	"gc_deleted",
	"buckets_swept",
	"gate_shards_repaired",
	"waits",
	"notifies_sent",
	"maintenance_rounds",
	"maintenance_errors",
	"claims_written"
};

/*
 * gen_durable_stats implements gen_durable._stats(): one row per counter.
 */
Datum
gen_durable_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	gd_require_shmem("gen_durable.stats");
	InitMaterializedSRF(fcinfo, 0);
	for (i = 0; i < GD_NCOUNTERS; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = CStringGetTextDatum(counter_names[i]);
		values[1] = Int64GetDatum((int64) pg_atomic_read_u64(&gd_shared->counters[i]));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * gen_durable_reset_stats implements gen_durable.reset_stats(): sets every
 * counter to zero and returns the reset time.
 */
Datum
gen_durable_reset_stats(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	gd_require_shmem("gen_durable.reset_stats");
	for (i = 0; i < GD_NCOUNTERS; i++)
		pg_atomic_write_u64(&gd_shared->counters[i], 0);
	LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
	gd_shared->stats_reset = now;
	LWLockRelease(gd_shared->lock);
	PG_RETURN_TIMESTAMPTZ(now);
}
