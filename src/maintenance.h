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

/* what one round of sweeps did */
typedef struct SweepCounts
{
	int64		reaped;			/* expired claims returned to runnable */
	int64		lease_failed;	/* expired claims that ran out of attempts */
	int64		timeouts;		/* await deadlines fired */
	int64		gc_deleted;		/* terminal instances deleted */
} SweepCounts;

/* each requires a connected SPI and READ COMMITTED */
extern void gd_sweep_reaper(TimestampTz now, bool sessions, SweepCounts *counts);
extern void gd_sweep_timeouts(TimestampTz now, SweepCounts *counts);
extern void gd_sweep_gc(TimestampTz now, SweepCounts *counts);

#endif							/* GD_MAINTENANCE_H */
