/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The maintenance worker of one database (started by launcher.c).
 *
 *		Each round runs every sweep in its own short transaction: those
 *		of maintenance.c's gd_sweeps (the reaper of expired leases and
 *		claims of disconnected sessions, await timeouts, GC, the limiter's
 *		buckets at most once a second, the schedules), then the worker's
 *		own pokes: due-time pokes (queues whose scheduled rows fell due
 *		since the last round wake their long-poll pickers) and the NOTIFY
 *		pokes of queues made runnable by commits (at most one per queue per
 *		GD_POKE_WINDOW_MS, contract D17).  An error in one sweep is logged
 *		and counted, its transaction rolled back, and the round goes on.
 *		After each round the worker reports its table statistics, so that
 *		autovacuum sees the rows the sweeps deleted and updated.
 *		Between rounds the worker sleeps on its latch until the next thing
 *		falls due (a scheduled row, an await deadline, a lease expiry, a
 *		schedule's tick), at
 *		most gen_durable.maintenance_interval; committing transactions set
 *		its latch when they create an earlier deadline or a poke, and
 *		exiting claimants set it so their claims return at once.
 *		With gen_durable.maintenance_worker off the worker only idles (the
 *		sweeps are then run_maintenance()'s, as the regression tests want).
 *		SIGHUP reloads the configuration, SIGTERM exits; the worker exits
 *		cleanly (and is not restarted) when the extension is dropped or its
 *		installed version is not the one this library serves.
 *
 * IDENTIFICATION
 *		src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "aftercommit.h"
#include "gen_durable.h"
#include "launcher.h"
#include "maintenance.h"
#include "pick_index.h"
#include "shmem.h"
#include "slots.h"
#include "spi_util.h"

/* at most one NOTIFY per queue per window */
#define GD_POKE_WINDOW_MS	100

/* the shortest sleep between rounds, so a deadline that cannot be acted
 * on yet (its row is locked by a flush in progress) does not spin */
#define GD_MIN_SLEEP_MS		10

/* the longest wait of a sweep's riders for a row lock (limit_lock_waits) */
#define GD_SWEEP_LOCK_TIMEOUT	"100ms"

/* how far each due-time scan reaches back into the previous one's window */
#define GD_DUE_OVERLAP_MS	1000

/* the longest back-off for a deadline that cannot be acted on yet */
#define GD_MAX_PAST_DUE_SLEEP_MS	1000

/* the shortest sleep after a round that had an error */
#define GD_ERROR_BACKOFF_MS 1000


/* what one round learnt */
typedef struct Round
{
	SweepRound	sweeps;			/* what the sweeps did, the earliest deadline */
	bool		failed;
} Round;

static GdPlan version_plan = {
	"SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'gen_durable'",
	0,
	{InvalidOid},
	NULL, true
};

/*
 * Per (queue, priority) of the runnable rows, found by a skip scan of each
 * pick index (pick_index.h): whether a row fell due in ($1, $2] and the
 * next due time after $2.  A (queue, priority) with rows of both kinds
 * comes twice.
 */
#define DUE_SCAN(cte, kind) \
	cte " AS (" \
	"  (SELECT i.queue, i.priority FROM ONLY gen_durable.instances i" \
	"    WHERE i.status = 'runnable' AND " kind " ORDER BY i.queue, i.priority LIMIT 1)" \
	"  UNION ALL" \
	"  SELECT n.queue, n.priority FROM " cte " CROSS JOIN LATERAL" \
	"    (SELECT i.queue, i.priority FROM ONLY gen_durable.instances i" \
	"      WHERE i.status = 'runnable' AND " kind \
	"        AND (i.queue, i.priority) > (" cte ".queue, " cte ".priority)" \
	"      ORDER BY i.queue, i.priority LIMIT 1) n" \
	")"
#define DUE_ROWS(cte, kind) \
	"SELECT " cte ".queue," \
	"       EXISTS (SELECT 1 FROM ONLY gen_durable.instances i" \
	"                WHERE i.status = 'runnable' AND " kind " AND i.queue = " cte ".queue" \
	"                  AND i.priority = " cte ".priority" \
	"                  AND i.eligible_at > $1 AND i.eligible_at <= $2)," \
	"       (SELECT i.eligible_at FROM ONLY gen_durable.instances i" \
	"         WHERE i.status = 'runnable' AND " kind " AND i.queue = " cte ".queue" \
	"           AND i.priority = " cte ".priority AND i.eligible_at > $2" \
	"         ORDER BY i.eligible_at LIMIT 1)" \
	"  FROM " cte

static GdPlan due_plan = {
	"WITH RECURSIVE " DUE_SCAN("qp", GD_PLAIN_ROW("i")) ", "
	DUE_SCAN("qg", GD_GUARDED_ROW("i"))
	DUE_ROWS("qp", GD_PLAIN_ROW("i"))
	" UNION ALL "
	DUE_ROWS("qg", GD_GUARDED_ROW("i")),
	2,
	{TIMESTAMPTZOID, TIMESTAMPTZOID},
	NULL, true
};

static GdPlan deadlines_plan = {
	"SELECT (SELECT min(await_deadline) FROM ONLY gen_durable.instances"
	"         WHERE status = 'awaiting_signal' AND await_deadline IS NOT NULL),"
	"       (SELECT min(lease_expires_at) FROM ONLY gen_durable.instances"
	"         WHERE status = 'executing')",
	0,
	{InvalidOid},
	NULL, true
};

static GdPlan notify_plan = {
	"SELECT pg_catalog.pg_notify('" GD_CHANNEL_PREFIX "' || q, '')"
	"  FROM pg_catalog.unnest($1::text[]) AS q",
	1,
	{TEXTARRAYOID},
	NULL, true
};

static Oid	my_dboid = InvalidOid;
static TimestampTz last_due_check = 0;
static TimestampTz last_notify = 0;

/*
 * limit_lock_waits bounds, for the rest of the current transaction, how
 * long a sweep waits for a row lock.  The sweeps select their rows with
 * SKIP LOCKED (I-22), but their riders do not: a child the reaper fails
 * may end a first_error round, whose cascade locks the siblings, and GC's
 * delete cascades to the signals and step history of the rows it deletes
 * (on a 0.6.0 schema its foreign key action also updates the children of
 * a deleted parent).  The worker
 * must not stall behind, or deadlock with, a transaction holding one of
 * those rows: the sweep gives up (logged, counted) and a later round
 * retries it.
 */
static void
limit_lock_waits(void)
{
	(void) set_config_option("lock_timeout", GD_SWEEP_LOCK_TIMEOUT, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
}

/*
 * sweep_due wakes the pickers of queues whose scheduled rows fell due
 * since the last round and finds the next due time and deadlines.
 */
static void
sweep_due(TimestampTz now, SweepRound *round)
{
	Datum		values[2];
	int			rows;
	int			i;
	bool		isnull;
	Datum		d;

	/*
	 * The windows overlap by GD_DUE_OVERLAP_MS: a row committed after the
	 * previous scan's snapshot with a due time before that scan is still
	 * seen (an extra poke is harmless).
	 */
	values[0] = TimestampTzGetDatum(last_due_check - GD_DUE_OVERLAP_MS * 1000);
	values[1] = TimestampTzGetDatum(now);
	rows = gd_execute(&due_plan, values, NULL, SPI_OK_SELECT);
	for (i = 0; i < rows; i++)
	{
		if (DatumGetBool(gd_result_datum(i, 2, &isnull)))
			gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		d = gd_result_datum(i, 3, &isnull);
		if (!isnull)
			gd_sweep_next(round, DatumGetTimestampTz(d));
	}
	last_due_check = now;

	gd_execute(&deadlines_plan, NULL, NULL, SPI_OK_SELECT);
	for (i = 1; i <= 2; i++)
	{
		d = gd_result_datum(0, i, &isnull);
		if (!isnull)
			gd_sweep_next(round, DatumGetTimestampTz(d));
	}
}

/*
 * sweep_notify sends the NOTIFY pokes queued for this database.
 */
static void
sweep_notify(TimestampTz now, SweepRound *round)
{
	Datum	   *queues;
	int			n = 0;
	int			i;
	int			kept = 0;

	if (!gen_durable_notify)
		return;
	if (last_notify != 0 &&
		now < TimestampTzPlusMilliseconds(last_notify, GD_POKE_WINDOW_MS))
	{
		/* within the window: come back when it ends */
		gd_sweep_next(round, TimestampTzPlusMilliseconds(last_notify, GD_POKE_WINDOW_MS));
		return;
	}

	queues = palloc(sizeof(Datum) * GD_MAX_DIRTY);
	LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < gd_shared->ndirty; i++)
	{
		GdDirtyQueue *q = &gd_shared->dirty[i];

		if (q->dboid != my_dboid)
		{
			gd_shared->dirty[kept++] = *q;
			continue;
		}
		queues[n++] = CStringGetTextDatum(q->queue);
	}
	gd_shared->ndirty = kept;
	LWLockRelease(gd_shared->lock);

	if (n == 0)
		return;
	{
		Datum		values[1];

		values[0] = PointerGetDatum(gd_array(queues, NULL, n, TEXTOID));
		gd_execute(&notify_plan, values, NULL, SPI_OK_SELECT);
	}
	gd_count(GD_STAT_NOTIFIES_SENT, n);
	last_notify = now;
}

/* the worker's own sweeps, run after gd_sweeps: its pokes */
static const GdSweep pokes[] = {
	{sweep_due, "gen_durable: due-time pokes", false, 0},
	{sweep_notify, "gen_durable: notify", false, 0},
};

/*
 * paced_out says whether a sweep with an interval ran too recently to run
 * again now; otherwise it records that the sweep runs now.
 */
static bool
paced_out(const GdSweep *sweep, TimestampTz *last_run, TimestampTz now)
{
	if (sweep->interval_ms > 0 && *last_run != 0 &&
		!TimestampDifferenceExceeds(*last_run, now, sweep->interval_ms))
		return true;
	*last_run = now;
	return false;
}

/*
 * run_step runs one sweep in its own transaction; an error is logged,
 * counted and rolled back, and the round goes on.  *last_run is when the
 * sweep last ran, for its interval.
 */
static void
run_step(const GdSweep *sweep, TimestampTz *last_run, Round *r)
{
	MemoryContext oldcontext = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, sweep->activity);
	PG_TRY();
	{
		TimestampTz now = GetCurrentTimestamp();

		gd_connect();
		if (!paced_out(sweep, last_run, now))
		{
			if (sweep->bound_lock_waits)
				limit_lock_waits();
			sweep->run(now, &r->sweeps);
		}
		gd_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcontext);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		pg_atomic_fetch_add_u64(&gd_shared->counters[GD_STAT_MAINTENANCE_ERRORS], 1);
		r->failed = true;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcontext);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * run_sweeps runs each of n sweeps with run_step; last_run has one entry
 * per sweep.
 */
static void
run_sweeps(const GdSweep *sweeps, int n, TimestampTz *last_run, Round *r)
{
	int			i;

	for (i = 0; i < n; i++)
		run_step(&sweeps[i], &last_run[i], r);
}

/*
 * check_version reads the installed version of the extension: NULL when
 * it is not installed.
 */
static char *
installed_version(void)
{
	char	   *version = NULL;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	gd_connect();
	if (gd_execute(&version_plan, NULL, NULL, SPI_OK_SELECT) == 1)
		version = MemoryContextStrdup(TopMemoryContext,
									  SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	gd_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return version;
}

/*
 * schema_served says whether this library's statements work with an
 * installed schema version (GD_SCHEMA_VERSIONS_SERVED).
 */
static bool
schema_served(const char *version)
{
	static const char *const served[] = GD_SCHEMA_VERSIONS_SERVED;
	int			i;

	for (i = 0; i < lengthof(served); i++)
		if (strcmp(version, served[i]) == 0)
			return true;
	return false;
}

/*
 * leave exits cleanly (not restarted): the extension is gone or of
 * a version this library does not serve.
 */
static void
leave(void)
{
	GdDatabase *db;

	LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
	db = gd_find_database(my_dboid);
	if (db != NULL)
		db->wanted = false;
	LWLockRelease(gd_shared->lock);
	proc_exit(0);
}

/*
 * detach clears the worker's pid from its slot on any exit.
 */
static void
detach(int code, Datum arg)
{
	GdDatabase *db;

	LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
	db = gd_find_database(my_dboid);
	if (db != NULL && db->pid == MyProcPid)
		db->pid = 0;
	LWLockRelease(gd_shared->lock);
}

/*
 * pin_settings overrides the database's and roles' settings that could
 * change what the worker's statements do.  It runs as a superuser: a
 * search_path with a schema an unprivileged owner controls would let that
 * owner's operators run with superuser rights, and a default of
 * REPEATABLE READ, read-only transactions or timeouts would break the
 * sweeps.
 */
static void
pin_settings(void)
{
	static const char *const pinned[][2] = {
		{"search_path", "pg_catalog, pg_temp"},
		{"default_transaction_isolation", "read committed"},
		{"default_transaction_read_only", "off"},
		{"statement_timeout", "0"},
		{"lock_timeout", "0"},
		{"idle_in_transaction_session_timeout", "0"},
	};
	int			i;

	for (i = 0; i < lengthof(pinned); i++)
		SetConfigOption(pinned[i][0], pinned[i][1], PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * gd_worker_main is the maintenance worker's main loop.
 */
void
gd_worker_main(Datum main_arg)
{
	GdDatabase *db;
	long		past_due_sleep = GD_MIN_SLEEP_MS;
	TimestampTz *sweeps_run;
	TimestampTz pokes_run[lengthof(pokes)] = {0};

	my_dboid = DatumGetObjectId(main_arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(my_dboid, InvalidOid, 0);
	pgstat_report_appname("gen_durable worker");
	pin_settings();

	LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
	db = gd_find_database(my_dboid);
	if (db != NULL)
	{
		db->pid = MyProcPid;
		db->pgprocno = MyProc->pgprocno;
	}
	LWLockRelease(gd_shared->lock);
	if (db == NULL)
		proc_exit(0);
	before_shmem_exit(detach, (Datum) 0);
	sweeps_run = MemoryContextAllocZero(TopMemoryContext, sizeof(TimestampTz) * gd_nsweeps);

	for (;;)
	{
		Round		round = {0};
		char	   *version;
		long		sleep_ms;
		long		stats_ms;
		TimestampTz now;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		version = installed_version();
		if (version == NULL)
			leave();
		if (!schema_served(version))
		{
			ereport(LOG,
					(errmsg("gen_durable worker: the extension's version is %s, this library serves %s",
							version, GD_SCHEMA_VERSION),
					 errhint("Run ALTER EXTENSION gen_durable UPDATE in database %u.", my_dboid)));
			leave();
		}
		pfree(version);

		/*
		 * Until this round has found the next deadline, any earlier one a
		 * commit creates must wake the worker (aftercommit.c compares with
		 * next_wake), so the planned wake-up is pushed out first.
		 */
		LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
		db->next_wake = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													gen_durable_maintenance_interval);
		LWLockRelease(gd_shared->lock);

		if (gen_durable_maintenance_worker)
		{
			run_sweeps(gd_sweeps, gd_nsweeps, sweeps_run, &round);
			run_sweeps(pokes, lengthof(pokes), pokes_run, &round);
			pg_atomic_fetch_add_u64(&gd_shared->counters[GD_STAT_MAINTENANCE_ROUNDS], 1);
		}

		/*
		 * Report the table statistics of the round's writes (the rows GC
		 * deleted, the claims the reaper returned): a background worker
		 * reports nothing by itself until it exits, so autovacuum would not
		 * see the dead rows the sweeps leave.  Statistics are flushed at
		 * most once a second; what is held back bounds the sleep.
		 */
		stats_ms = pgstat_report_stat(false);

		now = GetCurrentTimestamp();
		sleep_ms = gen_durable_maintenance_interval;
		if (stats_ms > 0)
			sleep_ms = Min(sleep_ms, stats_ms);
		if (round.sweeps.next != 0 && round.sweeps.next > now)
			sleep_ms = Min(sleep_ms, TimestampDifferenceMilliseconds(now, round.sweeps.next) + 1);
		else if (round.sweeps.next != 0)
		{
			/*
			 * A deadline that has passed but was not acted on (its row is
			 * locked by a flush in progress): retry soon, backing off so a
			 * long-held lock does not make the worker spin.
			 */
			sleep_ms = Min(sleep_ms, past_due_sleep);
			past_due_sleep = Min(past_due_sleep * 2, GD_MAX_PAST_DUE_SLEEP_MS);
		}
		if (round.sweeps.next == 0 || round.sweeps.next > now)
			past_due_sleep = GD_MIN_SLEEP_MS;
		sleep_ms = Max(sleep_ms, round.failed ? GD_ERROR_BACKOFF_MS : GD_MIN_SLEEP_MS);

		LWLockAcquire(gd_shared->lock, LW_EXCLUSIVE);
		db->next_wake = TimestampTzPlusMilliseconds(now, sleep_ms);
		LWLockRelease(gd_shared->lock);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
