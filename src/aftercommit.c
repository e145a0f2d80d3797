/*-------------------------------------------------------------------------
 *
 * aftercommit.c
 *		Effects a transaction queues while it runs and that happen only
 *		once it has committed (contract D15, D17).
 *
 *		The engine's functions record here what their statements did:
 *		counters for the stats view, queues whose work became runnable,
 *		instances that settled, and deadlines (due times, await timeouts,
 *		leases) the maintenance worker must wake for.  On commit, the
 *		transaction callback adds the counters to shared memory, sets the
 *		latch of every backend waiting in pick() on one of those queues or
 *		in await() on one of those instances, marks the queues for the
 *		maintenance worker's coalesced NOTIFY, and wakes that worker when a
 *		deadline comes before its planned wake-up.  Nothing happens on
 *		abort, and nothing waits: a woken backend re-reads with a fresh
 *		snapshot, which sees the commit because the callback runs after it
 *		became visible.  A subtransaction that rolls back takes back what it
 *		queued.  No hot path sends NOTIFY itself.
 *
 * IDENTIFICATION
 *		src/aftercommit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "aftercommit.h"
#include "gen_durable.h"
#include "shmem.h"
#include "slots.h"

/* beyond these, every waiter of the kind in this database is woken */
#define MAX_PENDING_QUEUES	32
#define MAX_PENDING_SETTLED 256

/* what the current transaction has queued (in TopTransactionContext) */
static int64 pending_counts[GD_NCOUNTERS];
static bool pending_any_count = false;
static char *pending_queues[MAX_PENDING_QUEUES];
static int	npending_queues = 0;
static bool pending_all_queues = false;
static int64 pending_settled[MAX_PENDING_SETTLED];
static int	npending_settled = 0;
static bool pending_all_settled = false;
static TimestampTz pending_deadline = 0;
#define MAX_PENDING_WANTED	4
static Oid	pending_wanted[MAX_PENDING_WANTED];
static int	npending_wanted = 0;
static bool pending_wake_worker = false;

/*
 * What was queued when each open subtransaction started: rolling one back
 * restores it, so work undone by a savepoint or an exception block counts
 * nothing and wakes nobody.  Kept in TopTransactionContext.
 */
typedef struct PendingMark
{
	SubTransactionId subid;
	int64		counts[GD_NCOUNTERS];
	bool		any_count;
	int			nqueues;
	bool		all_queues;
	int			nsettled;
	bool		all_settled;
	TimestampTz deadline;
	int			nwanted;
	bool		wake_worker;
	struct PendingMark *outer;
} PendingMark;

static PendingMark *marks = NULL;

/*
 * forget_pending drops everything queued by the transaction.
 */
static void
forget_pending(void)
{
	if (pending_any_count)
		memset(pending_counts, 0, sizeof(pending_counts));
	pending_any_count = false;
	npending_queues = 0;
	pending_all_queues = false;
	npending_settled = 0;
	pending_all_settled = false;
	pending_deadline = 0;
	npending_wanted = 0;
	pending_wake_worker = false;
	marks = NULL;
}

/*
 * gd_count adds n to a counter of the stats view, at commit.
 */
void
gd_count(GdCounter counter, int64 n)
{
	pending_counts[counter] += n;
	pending_any_count = true;
}

/*
 * gd_count_now adds n to a counter at once, whatever becomes of the
 * transaction: for what was observed (throttling, contention) rather than
 * what was committed.
 */
void
gd_count_now(GdCounter counter, int64 n)
{
	if (n > 0 && gd_shmem_ready())
		pg_atomic_fetch_add_u64(&gd_shared->counters[counter], (uint64) n);
}

/*
 * gd_queue_runnable records that work in queue became runnable now.
 */
void
gd_queue_runnable(const char *queue)
{
	int			i;

	if (pending_all_queues)
		return;
	for (i = 0; i < npending_queues; i++)
		if (strcmp(pending_queues[i], queue) == 0)
			return;
	if (npending_queues == MAX_PENDING_QUEUES)
	{
		pending_all_queues = true;
		return;
	}
	pending_queues[npending_queues++] = MemoryContextStrdup(TopTransactionContext, queue);
}

/*
 * gd_instance_settled records that an instance reached a state an await()
 * may be waiting for (terminal, or parked).
 */
void
gd_instance_settled(int64 id)
{
	if (pending_all_settled)
		return;
	if (npending_settled == MAX_PENDING_SETTLED)
	{
		pending_all_settled = true;
		return;
	}
	pending_settled[npending_settled++] = id;
}

/*
 * gd_deadline records a moment the maintenance worker must act at: a row
 * falling due, an await timeout or a lease expiry.
 */
void
gd_deadline(TimestampTz when)
{
	if (pending_deadline == 0 || when < pending_deadline)
		pending_deadline = when;
}

/*
 * gd_worker_wanted asks for the maintenance worker of a database to be
 * started: this one (CREATE EXTENSION, ALTER EXTENSION UPDATE) or a new
 * one (CREATE DATABASE, whose template may have the extension; the worker
 * exits at once where it has not).
 */
void
gd_worker_wanted(Oid dboid)
{
	int			i;

	for (i = 0; i < npending_wanted; i++)
		if (pending_wanted[i] == dboid)
			return;
	if (npending_wanted < MAX_PENDING_WANTED)
		pending_wanted[npending_wanted++] = dboid;
}

/*
 * gd_wake_worker wakes this database's maintenance worker so that it runs
 * a round at once (DROP EXTENSION: it then finds the extension gone).
 */
void
gd_wake_worker(void)
{
	pending_wake_worker = true;
}

/*
 * waiter_matches says whether a waiter is woken by what was queued.
 */
static bool
waiter_matches(GdWaiter *w, uint32 *hashes)
{
	int			i;

	if (w->dboid != MyDatabaseId)
		return false;
	if (w->kind == GD_WAIT_PICK)
	{
		if (pending_all_queues)
			return true;
		for (i = 0; i < npending_queues; i++)
			if (hashes[i] == w->queue_hash)
				return true;
	}
	else if (w->kind == GD_WAIT_AWAIT)
	{
		if (pending_all_settled)
			return true;
		for (i = 0; i < npending_settled; i++)
			if (pending_settled[i] == w->instance_id)
				return true;
	}
	return false;
}

/*
 * wake_waiters sets the latch of every backend whose wait is answered.
 */
static void
wake_waiters(void)
{
	uint32		hashes[MAX_PENDING_QUEUES];
	int			i;

	if (pg_atomic_read_u32(&gd_shared->nwaiters) == 0)
		return;
	for (i = 0; i < npending_queues; i++)
		hashes[i] = gd_queue_hash(pending_queues[i]);
	for (i = 0; i < MaxBackends; i++)
	{
		GdWaiter   *w = gd_waiter_slot(i);

		if (w->kind == GD_WAIT_NONE)
			continue;
		/* the slot's other fields were written before its kind */
		pg_read_barrier();
		if (waiter_matches(w, hashes))
			gd_set_proc_latch(i);
	}
}

/*
 * notifiable says whether a queue's channel name ("gen_durable:" + queue)
 * fits in an identifier; longer names get no NOTIFY poke.
 */
static bool
notifiable(const char *queue)
{
	return strlen(GD_CHANNEL_PREFIX) + strlen(queue) < NAMEDATALEN;
}

/*
 * is_dirty says whether a queue of this database already awaits its
 * NOTIFY.  The caller holds gd_shared->lock.
 */
static bool
is_dirty(const char *queue)
{
	int			j;

	for (j = 0; j < gd_shared->ndirty; j++)
		if (gd_shared->dirty[j].dboid == MyDatabaseId &&
			strncmp(gd_shared->dirty[j].queue, queue, NAMEDATALEN) == 0)
			return true;
	return false;
}

/*
 * poke_needed says whether the maintenance worker must hear of this
 * commit: a queue not yet marked for its NOTIFY, a deadline before its
 * planned wake-up, or an explicit wake.  The caller holds gd_shared->lock
 * (shared is enough), and db is the worker's slot.
 */
static bool
poke_needed(GdDatabase *db)
{
	int			i;

	if (pending_wake_worker ||
		(pending_deadline != 0 && pending_deadline < db->next_wake))
		return true;
	for (i = 0; gen_durable_notify && i < npending_queues; i++)
		if (notifiable(pending_queues[i]) && !is_dirty(pending_queues[i]) &&
			gd_shared->ndirty < GD_MAX_DIRTY)
			return true;
	return false;
}

/*
 * poke_worker marks the queues for the maintenance worker's NOTIFY and
 * wakes it when it has new pokes to send, a deadline before its next wake
 * or was asked to wake.  The common case, nothing new, takes the lock in
 * shared mode only.
 */
static void
poke_worker(void)
{
	GdDatabase *db;
	int			i;

	LWLockAcquire(gd_shared->lock, LW_SHARED);
	db = gd_find_database(MyDatabaseId);
	if (db == NULL || db->pid == 0 || !poke_needed(db))
	{
		LWLockRelease(gd_shared->lock);
		return;
	}
	LWLockRelease(gd_shared->lock);

	LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
	db = gd_find_database(MyDatabaseId);
	if (db != NULL && db->pid != 0)
	{
		for (i = 0; gen_durable_notify && i < npending_queues; i++)
		{
			GdDirtyQueue *q = &gd_shared->dirty[gd_shared->ndirty];

			if (!notifiable(pending_queues[i]) || is_dirty(pending_queues[i]) ||
				gd_shared->ndirty == GD_MAX_DIRTY)
				continue;
			q->dboid = MyDatabaseId;
			strlcpy(q->queue, pending_queues[i], NAMEDATALEN);
			gd_shared->ndirty++;
		}
		if (pending_deadline != 0 && pending_deadline < db->next_wake)
			db->next_wake = pending_deadline;
		gd_set_proc_latch(db->pgprocno);
	}
	LWLockRelease(gd_shared->lock);
}

/*
 * publish runs the queued effects of a committed transaction.
 */
static void
publish(void)
{
	int			i;

	if (!gd_shmem_ready())
		return;
	if (pending_any_count)
		for (i = 0; i < GD_NCOUNTERS; i++)
			if (pending_counts[i] != 0)
				pg_atomic_fetch_add_u64(&gd_shared->counters[i], pending_counts[i]);
	if (npending_queues > 0 || pending_all_queues || npending_settled > 0 ||
		pending_all_settled)
	{
		pg_memory_barrier();
		wake_waiters();
	}
	if (npending_queues > 0 || pending_deadline != 0 || pending_wake_worker)
		poke_worker();
	for (i = 0; i < npending_wanted; i++)
		gd_want_worker(pending_wanted[i]);
}

/*
 * gd_xact_callback publishes at commit and forgets at the end of any
 * transaction.  Effects queued by a transaction that is prepared are
 * dropped: the waiters' bounded re-check covers them.
 */
static void
gd_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			publish();
			forget_pending();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			forget_pending();
			break;
		default:
			break;
	}
}

/*
 * gd_subxact_callback marks what was queued when a subtransaction starts,
 * restores it when the subtransaction rolls back and drops the mark when
 * it commits into its parent.
 */
static void
gd_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	PendingMark *m;

	switch (event)
	{
		case SUBXACT_EVENT_START_SUB:
			m = MemoryContextAlloc(TopTransactionContext, sizeof(PendingMark));
			m->subid = mySubid;
			memcpy(m->counts, pending_counts, sizeof(pending_counts));
			m->any_count = pending_any_count;
			m->nqueues = npending_queues;
			m->all_queues = pending_all_queues;
			m->nsettled = npending_settled;
			m->all_settled = pending_all_settled;
			m->deadline = pending_deadline;
			m->nwanted = npending_wanted;
			m->wake_worker = pending_wake_worker;
			m->outer = marks;
			marks = m;
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			if (marks != NULL && marks->subid == mySubid)
			{
				m = marks;
				marks = m->outer;
				pfree(m);
			}
			break;
		case SUBXACT_EVENT_ABORT_SUB:
			if (marks != NULL && marks->subid == mySubid)
			{
				m = marks;
				memcpy(pending_counts, m->counts, sizeof(pending_counts));
				pending_any_count = m->any_count;
				npending_queues = m->nqueues;
				pending_all_queues = m->all_queues;
				npending_settled = m->nsettled;
				pending_all_settled = m->all_settled;
				pending_deadline = m->deadline;
				npending_wanted = m->nwanted;
				pending_wake_worker = m->wake_worker;
				marks = m->outer;
				pfree(m);
			}
			break;
		default:
			break;
	}
}

/*
 * gd_aftercommit_init registers the transaction callbacks (once per
 * process; _PG_init runs once per process that loads the library).
 */
void
gd_aftercommit_init(void)
{
	RegisterXactCallback(gd_xact_callback, NULL);
	RegisterSubXactCallback(gd_subxact_callback, NULL);
}
