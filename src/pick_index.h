/*-------------------------------------------------------------------------
 *
 * pick_index.h
 *		The two pick indexes (0.8.0) and the conditions that choose between
 *		them, for every statement that scans runnable rows in claim order:
 *		pick's (pick.c, pick_memory.c) and the maintenance worker's due-time
 *		scan (worker.c).
 *
 *		A plain instance needs nothing a pick must admit, present or
 *		arbitrate: no concurrency key, rate limit, awaited signals or
 *		correlation key; a pick may claim it in memory (claims.h).  Every
 *		other one is guarded.  instances_pick_plain has GD_PLAIN_ROW as its
 *		predicate (with status = 'runnable'), instances_pick_guarded
 *		GD_GUARDED_ROW, written out the same way as here so that the planner
 *		sees each statement's index.
 *
 * IDENTIFICATION
 *		src/pick_index.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_PICK_INDEX_H
#define GD_PICK_INDEX_H

#define GD_PLAIN_ROW(i) \
	"(" i ".concurrency_key IS NULL AND " i ".rate_limit IS NULL AND " \
	i ".awaits IS NULL AND " i ".correlation_key IS NULL)"

#define GD_GUARDED_ROW(i) \
	"(" i ".concurrency_key IS NOT NULL OR " i ".rate_limit IS NOT NULL OR " \
	i ".awaits IS NOT NULL OR " i ".correlation_key IS NOT NULL)"

#endif							/* GD_PICK_INDEX_H */
