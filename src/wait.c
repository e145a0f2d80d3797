/*-------------------------------------------------------------------------
 *
 * wait.c
 *		Sleeping inside the server until work or a settled instance
 *		appears: long-poll pick() and await() (contract D15).
 *
 *		A waiting call registers what it waits for in its backend's slot of
 *		shared memory, then loops: check (a new statement, so a fresh
 *		snapshot), and if there is nothing yet, sleep on the process latch.
 *		Committing transactions that make work runnable or settle an
 *		instance set the latch after commit (aftercommit.c); the maintenance
 *		worker does the same when scheduled rows fall due.  Registration
 *		happens before the first check, with a memory barrier, so a commit
 *		either is seen by the check or finds the slot and sets the latch: no
 *		wake-up is lost.  A bounded re-check (GD_RECHECK_MS) backs that up,
 *		CHECK_FOR_INTERRUPTS serves statement_timeout and pg_cancel_backend,
 *		and the whole wait is capped by gen_durable.max_wait.
 *
 *		Without shared_preload_libraries there is no shared memory: waits
 *		poll with a backoff up to GD_POLL_MAX_MS instead, and the first one
 *		of a session says so with a NOTICE.
 *
 * IDENTIFICATION
 *		src/wait.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"

#include "aftercommit.h"
#include "args.h"
#include "gen_durable.h"
#include "spi_util.h"
#include "wait.h"

/* longest sleep between two checks of a registered wait */
#define GD_RECHECK_MS		1000

/* polling without shared memory: first and longest sleep */
#define GD_POLL_MIN_MS		10
#define GD_POLL_MAX_MS		200

static bool notice_given = false;
static bool exit_callback_registered = false;

/*
 * clear_waiter_at_exit unregisters a wait of a backend that exits in the
 * middle of it (a FATAL does not unwind PG_FINALLY).
 */
static void
clear_waiter_at_exit(int code, Datum arg)
{
	GdWaiter   *slot = gd_waiter_slot(MyProc->pgprocno);

	if (slot->kind != GD_WAIT_NONE)
	{
		slot->kind = GD_WAIT_NONE;
		pg_atomic_fetch_sub_u32(&gd_shared->nwaiters, 1);
	}
}

/*
 * gd_wait_deadline turns a wait argument into a deadline capped by
 * gen_durable.max_wait.
 */
TimestampTz
gd_wait_deadline(Interval *wait)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz cap = TimestampTzPlusMilliseconds(now, gen_durable_max_wait);
	TimestampTz deadline;

	if (!gd_interval_positive(wait))
		return now;
	deadline = gd_add_interval(now, wait);
	return deadline < cap ? deadline : cap;
}

/*
 * gd_wait_begin registers a wait (pick: a queue; await: an instance).
 * Call it before the first check.
 */
void
gd_wait_begin(GdWait *w, TimestampTz deadline, GdWaitKind kind,
			  const char *queue, int64 instance_id)
{
	w->deadline = deadline;
	w->poll_ms = GD_POLL_MIN_MS;
	w->registered = false;
	w->slept = false;
	w->can_sleep = deadline > GetCurrentTimestamp();
	if (!w->can_sleep)
		return;

	if (!gd_shmem_ready())
	{
		if (!notice_given)
			ereport(NOTICE,
					(errmsg("gen_durable is not in shared_preload_libraries: waits poll, and sweeps run only through run_maintenance()"),
					 errhint("Add gen_durable to shared_preload_libraries and restart to wake waiters at commit and run the background worker.")));
		notice_given = true;
		return;
	}
	if (!exit_callback_registered)
	{
		before_shmem_exit(clear_waiter_at_exit, (Datum) 0);
		exit_callback_registered = true;
	}

	{
		GdWaiter   *slot = gd_waiter_slot(MyProc->pgprocno);

		slot->dboid = MyDatabaseId;
		slot->queue_hash = queue ? gd_queue_hash(queue) : 0;
		slot->instance_id = instance_id;
		pg_write_barrier();
		slot->kind = kind;
		pg_atomic_fetch_add_u32(&gd_shared->nwaiters, 1);
		/* the check that follows must not be ordered before the slot write */
		pg_memory_barrier();
	}
	w->registered = true;
}

/*
 * gd_wait_sleep sleeps until woken, the re-check interval or the
 * deadline; returns false once the deadline has passed (stop waiting).
 */
bool
gd_wait_sleep(GdWait *w)
{
	long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), w->deadline);
	long		sleep_ms;

	if (left <= 0)
		return false;
	if (!w->slept)
		gd_count(GD_STAT_WAITS, 1);
	w->slept = true;
	if (w->registered)
		sleep_ms = Min(left, GD_RECHECK_MS);
	else
	{
		sleep_ms = Min(left, w->poll_ms);
		w->poll_ms = Min(w->poll_ms * 2, GD_POLL_MAX_MS);
	}
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 sleep_ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	return true;
}

/*
 * gd_wait_end unregisters the wait; safe to call more than once and from
 * an error path.
 */
void
gd_wait_end(GdWait *w)
{
	if (w->registered)
	{
		GdWaiter   *slot = gd_waiter_slot(MyProc->pgprocno);

		slot->kind = GD_WAIT_NONE;
		pg_atomic_fetch_sub_u32(&gd_shared->nwaiters, 1);
		w->registered = false;
	}
}
