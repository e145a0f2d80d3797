/*-------------------------------------------------------------------------
 *
 * outcome.h
 *		Outcome objects handed to flush(): parsed and validated.
 *
 * IDENTIFICATION
 *		src/outcome.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_OUTCOME_H
#define GD_OUTCOME_H

#include "postgres.h"

#include "utils/jsonb.h"
#include "utils/timestamp.h"

typedef enum OutcomeKind
{
	OUTCOME_NEXT,
	OUTCOME_RETRY,
	OUTCOME_AWAIT,
	OUTCOME_SPAWN,
	OUTCOME_DONE,
	OUTCOME_FAIL
} OutcomeKind;

/* One entry of a flush, as the worker sent it. */
typedef struct Outcome
{
	bool		has_id;			/* false when "id" is missing or malformed */
	int64		id;
	char	   *worker;
	bool		has_claim;		/* "claim" given: the job's claim it ran under */
	int64		claim;
	OutcomeKind kind;
	char	   *invalid;		/* NULL when valid, else why not */

	char	   *step;			/* next, await: the step to run next */
	Jsonb	   *state;			/* NULL = keep the current state */

	/* next */
	bool		cont;			/* "continue": keep the claim, run inline */
	char	   *rate_limit;		/* NULL = none for the next step */
	double		weight;
	bool		set_key;		/* "concurrency_key" present */
	char	   *concurrency_key;	/* NULL with set_key = release */
	bool		has_fsm_version;
	int32		fsm_version;
	bool		has_lease;		/* continue: "lease" given */
	Interval	lease;

	/* retry */
	Interval	delay;

	/* await */
	Jsonb	   *names;			/* JSON array of signal names */
	bool		has_timeout;
	Interval	timeout;

	/* spawn */
	struct InsertSpec *children;	/* parsed specs, parent fields unset */
	int			nchildren;
	bool		first_error;	/* join policy first_error (else all) */

	/* done, fail, retry */
	Jsonb	   *result;
	Jsonb	   *error;			/* NULL = none given */
} Outcome;

extern const char *gd_outcome_kind_name(OutcomeKind kind);
extern Outcome *gd_parse_outcomes(Jsonb *outcomes, TimestampTz now, int *n);

#endif							/* GD_OUTCOME_H */
