/*-------------------------------------------------------------------------
 *
 * admit.h
 *		Admission of claimed candidates against rate limits and
 *		concurrency gates: the seam between the claim and the flip.
 *
 * IDENTIFICATION
 *		src/admit.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_ADMIT_H
#define GD_ADMIT_H

#include "postgres.h"

/* A locked candidate of a pick, in claim order. */
typedef struct AdmitCandidate
{
	int64		id;
	char	   *concurrency_key;	/* NULL = none */
	char	   *rate_limit;		/* NULL = none */
	double		weight;
	bool		admitted;		/* set by gd_admit */
} AdmitCandidate;

extern int	gd_admit(AdmitCandidate *candidates, int n);

#endif							/* GD_ADMIT_H */
