/*-------------------------------------------------------------------------
 *
 * history.h
 *		Step history: the committed outcomes of the instances that record
 *		them, appended by the flush that commits them.
 *
 * IDENTIFICATION
 *		src/history.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_HISTORY_H
#define GD_HISTORY_H

#include "postgres.h"

#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* the rows one flush appends, as parallel arrays */
typedef struct GdHistory
{
	int			n;
	Datum	   *instance_ids;
	Datum	   *steps;
	Datum	   *step_names;
	Datum	   *kinds;
	Datum	   *attempts;
	Datum	   *workers;
	Datum	   *errors;
	bool	   *error_nulls;
} GdHistory;

extern void gd_history_init(GdHistory *h, int max);
extern void gd_history_add(GdHistory *h, int64 instance_id, int64 steps, const char *step,
						   const char *kind, int32 attempt, const char *worker, Jsonb *error);
extern void gd_history_write(GdHistory *h, TimestampTz at);

#endif							/* GD_HISTORY_H */
