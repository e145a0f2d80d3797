/*-------------------------------------------------------------------------
 *
 * maintenance.h
 *		The housekeeping sweeps, callable from SQL (run_maintenance) and
 *		from a background worker.
 *
 * IDENTIFICATION
 *		src/maintenance.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_MAINTENANCE_H
#define GD_MAINTENANCE_H

#include "postgres.h"

#include "utils/timestamp.h"

#include "buckets.h"

/* what the sweeps of one round did, and the earliest deadline they found */
typedef struct SweepRound
{
	int64		claims_written;	/* claims in memory written to their rows */
	int64		reaped;			/* expired claims returned to runnable */
	int64		lease_failed;	/* expired claims that ran out of attempts */
	int64		timeouts;		/* await deadlines fired */
	int64		gc_deleted;		/* terminal instances deleted */
	int64		segments_truncated; /* archive segments emptied */
	BucketCounts buckets;		/* the limiter's buckets repaired */
	int64		schedules_fired;	/* instances created by schedule ticks */
	TimestampTz next;			/* earliest deadline found (0 = none) */
} SweepRound;

/*
 * One sweep.  run requires a connected SPI and READ COMMITTED.
 * run_maintenance() runs them all in the caller's transaction; the
 * maintenance worker runs each in a transaction of its own, and alone
 * heeds the last two fields.
 */
typedef struct GdSweep
{
	void		(*run) (TimestampTz now, SweepRound *round);
	const char *activity;		/* the worker's activity while it runs */
	bool		bound_lock_waits;	/* its riders lock rows it did not select
									 * with SKIP LOCKED */
	int			interval_ms;	/* the worker runs it at most this often (0 =
								 * every round) */
} GdSweep;

/* the sweeps of a round, in the order they run */
extern const GdSweep gd_sweeps[];
extern const int gd_nsweeps;

extern void gd_sweep_next(SweepRound *round, TimestampTz when);

#endif							/* GD_MAINTENANCE_H */
