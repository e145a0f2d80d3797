/*-------------------------------------------------------------------------
 *
 * session.h
 *		Claim sessions: which backend made a claim, and whether it is
 *		still connected.
 *
 * IDENTIFICATION
 *		src/session.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_SESSION_H
#define GD_SESSION_H

#include "postgres.h"

extern int64 gd_claim_session(void);
extern int	gd_live_sessions(int64 **out);

#endif							/* GD_SESSION_H */
