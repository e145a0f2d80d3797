/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Creation of gen_durable's shared memory (PG15 shmem_request and
 *		shmem_startup hooks) and access to its per-backend slots.
 *
 *		The area exists only when the library is in shared_preload_libraries.
 *		Without it gd_shared stays NULL: the SQL API still works, waits fall
 *		back to bounded polling and the statistics are not kept.  The layout
 *		and the locking protocol are described in shmem.h.
 *
 * IDENTIFICATION
 *		src/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "shmem.h"

GdShared   *gd_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * gd_shmem_size is the size of the whole area: the fixed struct, then one
 * waiter and one session slot per backend.
 */
static Size
gd_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(GdShared));

	size = add_size(size, MAXALIGN(mul_size(MaxBackends, sizeof(GdWaiter))));
	size = add_size(size, mul_size(MaxBackends, sizeof(pg_atomic_uint64)));
	return size;
}

/*
 * gd_shmem_request asks the postmaster for the area and one LWLock.
 */
static void
gd_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();

	RequestAddinShmemSpace(gd_shmem_size());
	RequestNamedLWLockTranche("gen_durable", 1);
}

/*
 * gd_shmem_startup creates the area on first use (postmaster start or
 * crash restart) or attaches to it.
 */
static void
gd_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	/* reset in case this is a restart within the postmaster */
	gd_shared = NULL;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	gd_shared = ShmemInitStruct("gen_durable", gd_shmem_size(), &found);
	if (!found)
	{
		int			i;

		memset(gd_shared, 0, gd_shmem_size());
		gd_shared->lock = &(GetNamedLWLockTranche("gen_durable"))->lock;
		for (i = 0; i < GD_NCOUNTERS; i++)
			pg_atomic_init_u64(&gd_shared->counters[i], 0);
		gd_shared->stats_reset = GetCurrentTimestamp();
		pg_atomic_init_u32(&gd_shared->nwaiters, 0);

		/*
		 * Session ids start at the start time in microseconds, so a session
		 * recorded on a claim before a crash restart never matches a session
		 * of the new server.
		 */
		pg_atomic_init_u64(&gd_shared->next_session, (uint64) GetCurrentTimestamp());
		for (i = 0; i < MaxBackends; i++)
			pg_atomic_init_u64(gd_session_slot(i), 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * gd_shmem_install_hooks installs the hooks; called from _PG_init while
 * preloading.
 */
void
gd_shmem_install_hooks(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = gd_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = gd_shmem_startup;
}

/*
 * gd_shmem_ready says whether the shared area exists (the library was
 * preloaded).
 */
bool
gd_shmem_ready(void)
{
	return gd_shared != NULL;
}

/*
 * gd_require_shmem refuses a feature that needs the shared area.
 */
void
gd_require_shmem(const char *what)
{
	if (!gd_shmem_ready())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s requires gen_durable to be loaded via shared_preload_libraries", what),
				 errhint("Add gen_durable to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * gd_waiter_slot returns the waiter slot of a backend.
 */
GdWaiter *
gd_waiter_slot(int pgprocno)
{
	Assert(pgprocno >= 0 && pgprocno < MaxBackends);
	return (GdWaiter *) ((char *) gd_shared + MAXALIGN(sizeof(GdShared))) + pgprocno;
}

/*
 * gd_session_slot returns the claim-session slot of a backend.
 */
pg_atomic_uint64 *
gd_session_slot(int pgprocno)
{
	char	   *base = (char *) gd_shared + MAXALIGN(sizeof(GdShared)) +
		MAXALIGN(mul_size(MaxBackends, sizeof(GdWaiter)));

	Assert(pgprocno >= 0 && pgprocno < MaxBackends);
	return (pg_atomic_uint64 *) base + pgprocno;
}

/*
 * gd_set_proc_latch wakes the backend with that pgprocno.
 */
void
gd_set_proc_latch(int pgprocno)
{
	SetLatch(&ProcGlobal->allProcs[pgprocno].procLatch);
}

/*
 * gd_queue_hash is how pick waiters and committers name a queue in shared
 * memory (a collision only causes a spurious wake-up).
 */
uint32
gd_queue_hash(const char *queue)
{
	return hash_bytes((const unsigned char *) queue, strlen(queue));
}
