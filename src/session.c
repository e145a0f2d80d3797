/*-------------------------------------------------------------------------
 *
 * session.c
 *		Claim sessions: which backend made a claim, and whether it is
 *		still connected.
 *
 *		A pick records the claiming backend's session id on the rows it
 *		claims (claim_session).  The id is drawn from a shared counter the
 *		first time a backend claims, kept in the backend's slot of shared
 *		memory, and cleared when the backend exits, which also wakes the
 *		database's maintenance worker.  The worker then returns the claims
 *		of sessions that are no longer live (_session_alive), counting an
 *		attempt, within
 *		about a second of the worker process dying, instead of waiting for
 *		the lease.  Ids never repeat, even across a crash restart (they
 *		start at the shared memory's creation time in microseconds), so a
 *		claim made before a restart, or on another server (rows restored
 *		from a dump, a standby promoted after its primary died), is never
 *		mistaken for a live one; a session counts only for the database it
 *		is connected to.
 *		The lease stays the fallback: with gen_durable.reclaim_on_disconnect
 *		off (clients that pick and flush over different connections), or
 *		without shared_preload_libraries, no session is recorded.
 *
 * IDENTIFICATION
 *		src/session.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "fmgr.h"

#include "gen_durable.h"
#include "session.h"
#include "shmem.h"
#include "slots.h"

PG_FUNCTION_INFO_V1(gen_durable_session_alive);

static int64 my_session = 0;

/*
 * end_session clears this backend's session at exit and wakes the
 * maintenance worker of its database so that its claims return promptly.
 */
static void
end_session(int code, Datum arg)
{
	GdDatabase *db;

	pg_atomic_write_u64(gd_session_slot(MyProc->pgprocno), 0);
	LWLockAcquire(gd_shared->lock, LW_SHARED);
	db = gd_find_database(MyDatabaseId);
	if (db != NULL && db->pid != 0)
		gd_set_proc_latch(db->pgprocno);
	LWLockRelease(gd_shared->lock);
}

/*
 * gd_claim_session returns the session id to record on this backend's
 * claims, or 0 (record none).
 */
int64
gd_claim_session(void)
{
	if (!gd_shmem_ready() || !gen_durable_reclaim_on_disconnect)
		return 0;
	if (my_session == 0)
	{
		my_session = (int64) pg_atomic_fetch_add_u64(&gd_shared->next_session, 1);
		pg_atomic_write_u64(gd_session_slot(MyProc->pgprocno), (uint64) my_session);
		before_shmem_exit(end_session, (Datum) 0);
	}
	return my_session;
}

/*
 * gen_durable_session_alive implements gen_durable._session_alive(session):
 * whether a backend with that claim session is still connected to this
 * database.  The reaper evaluates it per executing row while its statement
 * runs, that is after its snapshot was taken: every claim visible to the
 * statement was made by a session registered before it, so a live
 * claimant is never missed.  A session connected to another database
 * cannot hold a claim here: its rows came from elsewhere (a database
 * restored from a dump taken while the claim was held), and its worker
 * will never flush them here.  Without shared memory every session counts
 * as alive.
 */
Datum
gen_durable_session_alive(PG_FUNCTION_ARGS)
{
	uint64		session = (uint64) PG_GETARG_INT64(0);
	int			i;

	if (!gd_shmem_ready())
		PG_RETURN_BOOL(true);
	for (i = 0; i < MaxBackends; i++)
		if (pg_atomic_read_u64(gd_session_slot(i)) == session)
			PG_RETURN_BOOL(ProcGlobal->allProcs[i].databaseId == MyDatabaseId);
	PG_RETURN_BOOL(false);
}

/*
 * gd_live_sessions returns (palloc'd, in *out) the claim sessions of the
 * backends connected to this database now; the count is the result.  The
 * memory-claim sweep reads it after the claims, for the reason
 * _session_alive gives.
 */
int
gd_live_sessions(int64 **out)
{
	int			n = 0;
	int			i;

	*out = palloc(sizeof(int64) * Max(MaxBackends, 1));
	if (!gd_shmem_ready())
		return 0;
	for (i = 0; i < MaxBackends; i++)
	{
		uint64		session = pg_atomic_read_u64(gd_session_slot(i));

		if (session != 0 && ProcGlobal->allProcs[i].databaseId == MyDatabaseId)
			(*out)[n++] = (int64) session;
	}
	return n;
}
