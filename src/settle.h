/*-------------------------------------------------------------------------
 *
 * settle.h
 *		The one routine every path into a terminal status goes through,
 *		and the cascade that ends a whole subtree.
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

#include "credit.h"

/* Instances that have just become terminal in the current transaction. */
typedef struct Settled
{
	int64	   *ids;
	int64	   *parents;		/* parent_id of each, 0 when none */
	int32	   *rounds;			/* the parent's round each belongs to */
	bool	   *failed;			/* ended as failed (first_error counts it) */
	HeldSlots  *slots;			/* where the gate slots of ended rows go */
	int			n;
	int			cap;
} Settled;

extern void gd_settled_init(Settled *s, int cap, HeldSlots *slots);
extern void gd_settled_add(Settled *s, int64 id, int64 parent, int32 round,
						   bool failed);
extern int	gd_settle(Settled *s, TimestampTz now);
extern void gd_lock_parents(int64 *ids, int n);
extern int	gd_end_trees(int64 *roots, int nroots, bool fail_roots,
						 const char *reason, TimestampTz now, Settled *out);

#endif							/* GD_SETTLE_H */
