/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		The launcher background worker: one maintenance worker per database
 *		that has the extension.
 *
 *		The launcher is registered at server start (shared_preload_libraries)
 *		and connects to no database.  It knows the databases from slots in
 *		shared memory (GdDatabase):
 *		- at start it probes every database that accepts connections: each
 *		  probe starts a maintenance worker, which exits at once (clearing
 *		  "wanted") where the extension is not installed, so a database
 *		  without it costs one short-lived process at server start;
 *		- CREATE EXTENSION and ALTER EXTENSION UPDATE call _start_worker(),
 *		  which after commit marks the database wanted and sets the
 *		  launcher's latch, so the worker starts without a restart; so does
 *		  CREATE DATABASE, for a copy of a template that has the extension;
 *		- a worker that exits with an error (or is terminated) is restarted
 *		  after GD_RESTART_DELAY_MS; one that finds the extension gone exits
 *		  cleanly and is not restarted;
 *		- a database that no longer exists loses its slot.
 *		Workers are dynamic and BGW_NEVER_RESTART: the launcher alone decides
 *		when they run (after a crash restart the launcher probes again).
 *		The slots themselves are slots.c's; the commands that stop or wake
 *		a worker, utility_hook.c's.
 *
 * IDENTIFICATION
 *		src/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "aftercommit.h"
#include "launcher.h"
#include "shmem.h"
#include "slots.h"

PG_FUNCTION_INFO_V1(gen_durable_start_worker);

/* how long a failed worker waits before the launcher starts it again */
#define GD_RESTART_DELAY_MS		1000

/* the launcher's longest sleep */
#define GD_LAUNCHER_NAP_MS		5000

/* the launcher's handles of the workers it started, by slot */
static BackgroundWorkerHandle *handles[GD_MAX_DATABASES];

/*
 * gen_durable_start_worker implements gen_durable._start_worker(), called
 * by the install and upgrade scripts: after commit, the database gets its
 * maintenance worker.  Without preloading there is none (and nothing to do).
 */
Datum
gen_durable_start_worker(PG_FUNCTION_ARGS)
{
	if (gd_shmem_ready())
		gd_worker_wanted(MyDatabaseId);
	PG_RETURN_VOID();
}

/*
 * gd_launcher_install registers the launcher; called from _PG_init while
 * preloading.
 */
void
gd_launcher_install(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "gen_durable");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "gd_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "gen_durable launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "gen_durable launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * database_exists_map fills exists[i] for every slot, reading pg_database;
 * with probe, every database that accepts connections also gets a slot
 * marked wanted (its worker exits where the extension is absent).
 */
static void
read_databases(bool probe, bool *exists)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	memset(exists, 0, sizeof(bool) * GD_MAX_DATABASES);
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database dbform = (Form_pg_database) GETSTRUCT(tup);
		GdDatabase *db;

		if (!dbform->datallowconn || dbform->datistemplate)
			continue;
		if (probe)
			gd_want_worker(dbform->oid);
		LWLockAcquire(gd_shared->lock, LW_SHARED);
		db = gd_find_database(dbform->oid);
		if (db != NULL)
			exists[db - gd_shared->databases] = true;
		LWLockRelease(gd_shared->lock);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * start_worker starts the maintenance worker of one slot.
 */
static void
start_worker(int slot, Oid dboid)
{
	BackgroundWorker worker;
	pid_t		pid;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "gen_durable");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "gd_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "gen_durable worker for database %u", dboid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "gen_durable worker");
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handles[slot]))
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("out of background worker slots for the gen_durable worker of database %u", dboid),
				 errhint("You might need to increase \"max_worker_processes\".")));
		handles[slot] = NULL;
		LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
		gd_shared->databases[slot].start_after =
			TimestampTzPlusMilliseconds(GetCurrentTimestamp(), GD_PAUSE_MS);
		LWLockRelease(gd_shared->lock);
		return;
	}
	/* the worker records its own pid in the slot (worker.c) */
	(void) WaitForBackgroundWorkerStartup(handles[slot], &pid);
}

/*
 * manage_workers notices workers that stopped and starts the ones that
 * are wanted and due.
 */
static void
manage_workers(bool probe)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		exists[GD_MAX_DATABASES];
	bool		read = false;
	int			i;

	for (i = 0; i < GD_MAX_DATABASES; i++)
	{
		pid_t		pid;

		if (handles[i] == NULL ||
			GetBackgroundWorkerPid(handles[i], &pid) != BGWH_STOPPED)
			continue;
		pfree(handles[i]);
		handles[i] = NULL;
		LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
		gd_shared->databases[i].pid = 0;
		if (gd_shared->databases[i].wanted &&
			gd_shared->databases[i].start_after < now)
			gd_shared->databases[i].start_after =
				TimestampTzPlusMilliseconds(now, GD_RESTART_DELAY_MS);
		LWLockRelease(gd_shared->lock);
	}

	if (probe)
	{
		read_databases(true, exists);
		read = true;
	}
	for (i = 0; i < GD_MAX_DATABASES; i++)
	{
		GdDatabase *db = &gd_shared->databases[i];
		Oid			dboid;
		bool		due;

		LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
		dboid = db->dboid;
		if (dboid != InvalidOid && !db->wanted && db->pid == 0 && handles[i] == NULL)
		{
			/* no extension there (any more): forget the database */
			db->dboid = InvalidOid;
			dboid = InvalidOid;
		}
		due = dboid != InvalidOid && db->wanted && db->pid == 0 &&
			handles[i] == NULL && db->start_after <= now;
		LWLockRelease(gd_shared->lock);
		if (!due)
			continue;
		if (!read)
		{
			read_databases(false, exists);
			read = true;
		}
		if (!exists[i])
		{
			/* dropped, or no longer accepting connections */
			LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
			if (db->dboid == dboid && db->pid == 0)
				db->dboid = InvalidOid;
			LWLockRelease(gd_shared->lock);
			continue;
		}
		start_worker(i, dboid);
	}
}

/*
 * gd_launcher_main is the launcher's main loop.
 */
void
gd_launcher_main(Datum main_arg)
{
	bool		probe = true;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("gen_durable launcher");

	LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
	gd_shared->launcher_pid = MyProcPid;
	gd_shared->launcher_pgprocno = MyProc->pgprocno;
	LWLockRelease(gd_shared->lock);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		manage_workers(probe);
		probe = false;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 GD_LAUNCHER_NAP_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
