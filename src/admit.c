/*-------------------------------------------------------------------------
 *
 * admit.c
 *		Admission of claimed candidates against rate limits and
 *		concurrency gates.
 *
 *		pick locks its candidates, asks gd_admit which of them may run, and
 *		flips only those to executing, all in one transaction: denied rows
 *		are never written (SEMANTICS D7).  The limiter (rate buckets and
 *		configured gates, §4.2) is a later release; until then every
 *		candidate is admitted, and unconfigured concurrency keys are held to
 *		one executing row each by the K=1 arbiter in pick.c.
 *
 * IDENTIFICATION
 *		src/admit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "admit.h"

/*
 * gd_admit marks the candidates (in claim order) that may run now and
 * returns how many were admitted.
 */
int
gd_admit(AdmitCandidate *candidates, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		candidates[i].admitted = true;
	return n;
}
