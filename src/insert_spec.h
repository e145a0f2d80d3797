/*-------------------------------------------------------------------------
 *
 * insert_spec.h
 *		Insert specs: what insert(), insert_many(), spawned children and
 *		schedule ticks are made from, and how one is read.
 *
 * IDENTIFICATION
 *		src/insert_spec.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_INSERT_SPEC_H
#define GD_INSERT_SPEC_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* A validated, normalised request to create one instance. */
typedef struct InsertSpec
{
	char	   *fsm;
	int32		fsm_version;
	char	   *step;
	Jsonb	   *state;			/* a JSON object */
	char	   *queue;
	int32		priority;		/* fits smallint */
	TimestampTz eligible_at;
	char	   *correlation_key;	/* NULL = none */
	char	   *scope;			/* status labels joined by ',', "" = empty */
	char	   *concurrency_key;	/* NULL = none */
	char	   *rate_limit;		/* NULL = none */
	double		weight;			/* > 0 */
	int32		max_attempts;	/* >= 1 */
	int32		max_steps;		/* >= 1, or 0 for no budget */
	Jsonb	   *metadata;		/* a JSON object, or NULL */
	int64		parent_id;		/* spawned children: the parent, else 0 */
	int32		child_index;	/* spawned children: position in the round */
	int32		parent_round;	/* spawned children: the parent's round */
	int			history;		/* record the step history: 1 or 0, or -1 for
								 * the queue's setting */
} InsertSpec;

extern void gd_spec_from_args(FunctionCallInfo fcinfo, TimestampTz now,
							  InsertSpec *spec);
extern void gd_spec_from_json(JsonbContainer *obj, int ord, TimestampTz now,
							  InsertSpec *spec);
extern void gd_spec_error(int ord, const char *problem) pg_attribute_noreturn();

#endif							/* GD_INSERT_SPEC_H */
