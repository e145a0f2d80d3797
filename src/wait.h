/*-------------------------------------------------------------------------
 *
 * wait.h
 *		Sleeping inside the server until work or a settled instance
 *		appears: long-poll pick() and await().
 *
 * IDENTIFICATION
 *		src/wait.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_WAIT_H
#define GD_WAIT_H

#include "postgres.h"

#include "utils/timestamp.h"

#include "shmem.h"

/* the state of one waiting call */
typedef struct GdWait
{
	TimestampTz deadline;
	long		poll_ms;		/* next sleep when polling without shmem */
	bool		registered;
	bool		slept;			/* counted in the waits counter */
	bool		can_sleep;		/* the deadline is in the future */
} GdWait;

extern TimestampTz gd_wait_deadline(Interval *wait);
extern void gd_wait_begin(GdWait *w, TimestampTz deadline, GdWaitKind kind,
						  const char *queue, int64 instance_id);
extern bool gd_wait_sleep(GdWait *w);
extern void gd_wait_end(GdWait *w);

#endif							/* GD_WAIT_H */
