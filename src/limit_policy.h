/*-------------------------------------------------------------------------
 *
 * limit_policy.h
 *		The limiter's policy, and the warning for unconfigured rate limits.
 *
 * IDENTIFICATION
 *		src/limit_policy.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_LIMIT_POLICY_H
#define GD_LIMIT_POLICY_H

#include "postgres.h"

extern void gd_warn_unknown_rate_limits(Datum *names, int n);

#endif							/* GD_LIMIT_POLICY_H */
