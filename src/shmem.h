/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		The shared memory of gen_durable: statistics counters, waiters
 *		(long-poll pick and await), claim sessions, the per-database
 *		maintenance worker slots and the queues waiting for a NOTIFY poke.
 *
 * IDENTIFICATION
 *		src/shmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_SHMEM_H
#define GD_SHMEM_H

#include "postgres.h"

#include "port/atomics.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

/* the counters of the stats view; names in stats.c, same order */
typedef enum GdCounter
{
	GD_STAT_INSERTED,
	GD_STAT_DUPLICATES,
	GD_STAT_CLAIMED,
	GD_STAT_CONTENDED,
	GD_STAT_THROTTLED_CONC,
	GD_STAT_THROTTLED_RATE,
	GD_STAT_LIMITER_CONTENDED,
	GD_STAT_UNKNOWN_RATE_LIMIT,
	GD_STAT_RATE_WEIGHT_OVER_BURST,
	GD_STAT_COMMITTED_NEXT,
	GD_STAT_COMMITTED_CONTINUE,
	GD_STAT_COMMITTED_RETRY,
	GD_STAT_COMMITTED_AWAIT,
	GD_STAT_COMMITTED_SPAWN,
	GD_STAT_CHILDREN_SPAWNED,
	GD_STAT_COMMITTED_DONE,
	GD_STAT_COMMITTED_FAIL,
	GD_STAT_STALE,
	GD_STAT_INVALID,
	GD_STAT_REQUEUED,
	GD_STAT_BUDGET_EXHAUSTED,
	GD_STAT_ATTEMPTS_EXHAUSTED,
	GD_STAT_SIGNALS_DELIVERED,
	GD_STAT_SIGNALS_DUPLICATE,
	GD_STAT_SIGNALS_NO_TARGET,
	GD_STAT_SIGNAL_WAKES,
	GD_STAT_HEARTBEATS,
	GD_STAT_RELEASED,
	GD_STAT_CANCELLED,
	GD_STAT_REAPED,
	GD_STAT_REAPED_DEAD_BACKEND,
	GD_STAT_LEASE_FAILED,
	GD_STAT_TIMEOUTS_FIRED,
	GD_STAT_GC_DELETED,
	GD_STAT_BUCKETS_SWEPT,
	GD_STAT_GATE_SHARDS_REPAIRED,
	GD_STAT_WAITS,
	GD_STAT_NOTIFIES_SENT,
	GD_STAT_MAINTENANCE_ROUNDS,
	GD_STAT_MAINTENANCE_ERRORS,
	GD_STAT_CLAIMS_WRITTEN,
	GD_NCOUNTERS
} GdCounter;

/* what a backend is waiting for */
typedef enum GdWaitKind
{
	GD_WAIT_NONE = 0,
	GD_WAIT_PICK,				/* work in a queue */
	GD_WAIT_AWAIT				/* an instance to settle */
} GdWaitKind;

/* one backend's wait, in the slot of its pgprocno */
typedef struct GdWaiter
{
	Oid			dboid;
	uint32		kind;			/* GdWaitKind */
	uint32		queue_hash;		/* GD_WAIT_PICK */
	int64		instance_id;	/* GD_WAIT_AWAIT */
} GdWaiter;

/* the maintenance worker of one database (slots.c) */
typedef struct GdDatabase
{
	Oid			dboid;			/* InvalidOid = free slot */
	bool		wanted;			/* the extension is installed there */
	pid_t		pid;			/* of the running worker, 0 if none */
	int			pgprocno;		/* of the running worker */
	TimestampTz next_wake;		/* when the worker plans to wake */
	TimestampTz start_after;	/* no restart before this (backoff) */
} GdDatabase;

#define GD_MAX_DATABASES	64

/* NOTIFY channels are "gen_durable:<queue>" */
#define GD_CHANNEL_PREFIX	"gen_durable:"
#define GD_MAX_DIRTY		256

/* a queue made runnable, waiting for its NOTIFY */
typedef struct GdDirtyQueue
{
	Oid			dboid;
	char		queue[NAMEDATALEN];
} GdDirtyQueue;

/*
 * The shared state.  Protocol:
 * - counters and next_session are atomics, no lock;
 * - each waiter slot and session slot is written only by its own backend
 *   (with a memory barrier before it sleeps or claims) and read without a
 *   lock by committers and the maintenance worker: wakes are hints, and
 *   every waiter re-checks on a bounded interval;
 * - everything else (launcher, databases, dirty queues, stats_reset) is
 *   under lock.
 */
typedef struct GdShared
{
	LWLock	   *lock;
	pg_atomic_uint64 counters[GD_NCOUNTERS];
	TimestampTz stats_reset;
	pg_atomic_uint32 nwaiters;	/* backends with a registered wait */
	pg_atomic_uint64 next_session;
	pid_t		launcher_pid;
	int			launcher_pgprocno;
	GdDatabase	databases[GD_MAX_DATABASES];
	int			ndirty;
	GdDirtyQueue dirty[GD_MAX_DIRTY];
	/* followed by GdWaiter[MaxBackends] and pg_atomic_uint64[MaxBackends] */
} GdShared;

extern GdShared *gd_shared;

extern void gd_shmem_install_hooks(void);
extern bool gd_shmem_ready(void);
extern void gd_require_shmem(const char *what);

extern GdWaiter *gd_waiter_slot(int pgprocno);
extern uint32 gd_queue_hash(const char *queue);
extern pg_atomic_uint64 *gd_session_slot(int pgprocno);
extern void gd_set_proc_latch(int pgprocno);

#endif							/* GD_SHMEM_H */
