/*-------------------------------------------------------------------------
 *
 * settle.h
 *		The one routine every path into a terminal status goes through.
 *
 * IDENTIFICATION
 *		src/settle.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_SETTLE_H
#define GD_SETTLE_H

#include "postgres.h"

#include "utils/timestamp.h"

/* Instances that have just become terminal in the current transaction. */
typedef struct Settled
{
	int64	   *ids;
	int64	   *parents;		/* parent_id of each, 0 when none */
	int			n;
	int			cap;
} Settled;

extern void gd_settled_init(Settled *s, int cap);
extern void gd_settled_add(Settled *s, int64 id, int64 parent);
extern void gd_settle(Settled *s, TimestampTz now);

#endif							/* GD_SETTLE_H */
