/*-------------------------------------------------------------------------
 *
 * aftercommit.h
 *		Effects a transaction queues while it runs and that happen only
 *		once it has committed: statistics, waking waiters, NOTIFY pokes and
 *		the maintenance worker's next deadline.
 *
 * IDENTIFICATION
 *		src/aftercommit.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_AFTERCOMMIT_H
#define GD_AFTERCOMMIT_H

#include "postgres.h"

#include "utils/timestamp.h"

#include "shmem.h"

extern void gd_aftercommit_init(void);

extern void gd_count(GdCounter counter, int64 n);
extern void gd_count_now(GdCounter counter, int64 n);
extern void gd_queue_runnable(const char *queue);
extern void gd_instance_settled(int64 id);
extern void gd_deadline(TimestampTz when);
extern void gd_worker_wanted(Oid dboid);
extern void gd_wake_worker(void);

#endif							/* GD_AFTERCOMMIT_H */
