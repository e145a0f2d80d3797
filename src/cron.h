/*-------------------------------------------------------------------------
 *
 * cron.h
 *		Cron expressions: parsing the standard 5 fields (and the @hourly
 *		style shortcuts), and the next tick after an instant in a time zone.
 *
 * IDENTIFICATION
 *		src/cron.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_CRON_H
#define GD_CRON_H

#include "postgres.h"

#include "pgtime.h"
#include "utils/timestamp.h"

/* a parsed expression: one bit per allowed value of each field */
typedef struct GdCron
{
	uint64		minutes;		/* bits 0..59 */
	uint32		hours;			/* bits 0..23 */
	uint32		days;			/* bits 1..31 */
	uint16		months;			/* bits 1..12 */
	uint8		weekdays;		/* bits 0..6, Sunday = 0 */
	bool		days_any;		/* day of month was "*" */
	bool		weekdays_any;	/* day of week was "*" */
} GdCron;

extern char *gd_cron_parse(const char *expr, GdCron *out);
extern bool gd_cron_next(const GdCron *cron, pg_tz *zone, TimestampTz after,
						 TimestampTz *next);

#endif							/* GD_CRON_H */
