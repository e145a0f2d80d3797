/*-------------------------------------------------------------------------
 *
 * schedule.h
 *		Recurring schedules: the sweep that fires due ticks.
 *
 * IDENTIFICATION
 *		src/schedule.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_SCHEDULE_H
#define GD_SCHEDULE_H

#include "postgres.h"

#include "utils/timestamp.h"

/* requires a connected SPI and READ COMMITTED */
extern int64 gd_sweep_schedules(TimestampTz now, TimestampTz *earliest);

#endif							/* GD_SCHEDULE_H */
