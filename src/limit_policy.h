/*-------------------------------------------------------------------------
 *
 * limit_policy.h
 *		The limiter's policy, and the warnings for rate limits that can
 *		never grant an instance.
 *
 * IDENTIFICATION
 *		src/limit_policy.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_LIMIT_POLICY_H
#define GD_LIMIT_POLICY_H

#include "postgres.h"

extern void gd_warn_rate_limits(Datum *names, Datum *weights, int n);

#endif							/* GD_LIMIT_POLICY_H */
