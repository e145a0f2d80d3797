/*-------------------------------------------------------------------------
 *
 * slots.c
 *		The maintenance workers' slots in shared memory: one GdDatabase per
 *		database that wants a worker (at most GD_MAX_DATABASES).
 *
 *		A slot is taken when a database is first wanted: after commit of
 *		CREATE EXTENSION, ALTER EXTENSION UPDATE or CREATE DATABASE
 *		(aftercommit.c), and for every database the launcher probes at
 *		start.  Its worker records its pid there, and the launcher frees the
 *		slot once the database no longer wants one (launcher.c, worker.c).
 *		start_after holds a worker back: a command that needs its database
 *		without other connections pauses it (utility_hook.c), and the
 *		launcher backs off a worker that failed or found no free process.
 *		Every field is under gd_shared->lock (shmem.h).
 *
 *		The file depends on nothing but the shared memory, so that both what
 *		runs at commit and the launcher can use it.
 *
 * IDENTIFICATION
 *		src/slots.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "storage/procarray.h"
#include "utils/timestamp.h"

#include "shmem.h"
#include "slots.h"

/*
 * gd_find_database returns the worker slot of a database, or NULL.  The
 * caller holds gd_shared->lock.
 */
GdDatabase *
gd_find_database(Oid dboid)
{
	int			i;

	for (i = 0; i < GD_MAX_DATABASES; i++)
		if (gd_shared->databases[i].dboid == dboid)
			return &gd_shared->databases[i];
	return NULL;
}

/*
 * gd_want_worker marks a database as having the extension and wakes the
 * launcher (and the worker, if running, so it re-reads its state).  Called
 * after commit of CREATE/ALTER EXTENSION.
 */
void
gd_want_worker(Oid dboid)
{
	GdDatabase *db;
	int			i;

	LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
	db = gd_find_database(dboid);
	for (i = 0; db == NULL && i < GD_MAX_DATABASES; i++)
		if (gd_shared->databases[i].dboid == InvalidOid)
		{
			db = &gd_shared->databases[i];
			memset(db, 0, sizeof(GdDatabase));
			db->dboid = dboid;
		}
	if (db != NULL)
	{
		db->wanted = true;
		db->start_after = 0;
		if (db->pid != 0)
			gd_set_proc_latch(db->pgprocno);
	}
	if (gd_shared->launcher_pid != 0)
		gd_set_proc_latch(gd_shared->launcher_pgprocno);
	LWLockRelease(gd_shared->lock);

	if (db == NULL)
		ereport(WARNING,
				(errmsg("gen_durable cannot run a maintenance worker for more than %d databases",
						GD_MAX_DATABASES),
				 errhint("Call gen_durable.run_maintenance() from a scheduler in that database.")));
}

/*
 * gd_pause_worker stops the worker of a database for a command that needs
 * the database to itself, and holds its restart back for GD_PAUSE_MS.  It
 * waits (up to 5 s) for the worker to be gone.
 */
void
gd_pause_worker(Oid dboid)
{
	GdDatabase *db;
	pid_t		pid = 0;
	int			i;

	LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
	db = gd_find_database(dboid);
	if (db != NULL)
	{
		db->start_after = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), GD_PAUSE_MS);
		pid = db->pid;
	}
	LWLockRelease(gd_shared->lock);
	if (pid == 0)
		return;

	kill(pid, SIGTERM);
	for (i = 0; i < 500 && BackendPidGetProc(pid) != NULL; i++)
	{
		CHECK_FOR_INTERRUPTS();
		pg_usleep(10000L);
	}
}
