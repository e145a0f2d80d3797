/*-------------------------------------------------------------------------
 *
 * maintenance.c
 *		The housekeeping sweeps: reaper, await timeouts and GC, and the
 *		list of every sweep of a round (gd_sweeps: these three, the
 *		limiter's buckets and the schedules), which run_maintenance() and
 *		the maintenance worker both run.
 *
 *		Each sweep selects its rows ORDER BY id FOR NO KEY UPDATE SKIP
 *		LOCKED and updates that set (I-22): it never waits, so it cannot
 *		deadlock with outcomes or with another sweep, and a row locked right
 *		now is simply left for the next round.  Each handles at most
 *		gen_durable.gc_batch rows per call.
 *		- memory claims (0.8.0, claims.h): a claim held in memory whose
 *		  lease expired, whose session ended, or that is older than
 *		  gen_durable.memory_claim_max_age is written to its row (executing,
 *		  with the claim's worker, lease, number and session), so that the
 *		  reaper, which runs next, treats it as any claim, and a long step
 *		  leaves the pick index; a claim whose row has changed since (its
 *		  instance was cancelled) is dropped;
 *		- reaper (T14, D2): an expired claim, or the claim of a session that
 *		  is no longer connected (session.c), returns to runnable with
 *		  attempt + 1, keeping its place; when attempts reach max_attempts
 *		  the instance fails with {"reason": "lease_expired", ...} through
 *		  settle.c instead of looping forever;
 *		- await timeouts (T9, D11): a passed deadline wakes the instance,
 *		  clears the deadline and marks the job timed_out;
 *		- GC (T18): terminal rows older than gen_durable.retention, oldest
 *		  first, sparing terminal children of a live parent (I-29),
 *		  deleted by id list (O(batch)), with their inboxes and history;
 *		- the archive (0.9.0, archive.c): finished instances moved out of
 *		  the live table go a whole segment at a time.
 *		Queues made runnable wake their long-poll pickers after commit.
 *
 * IDENTIFICATION
 *		src/maintenance.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "aftercommit.h"
#include "archive.h"
#include "buckets.h"
#include "claims.h"
#include "gen_durable.h"
#include "maintenance.h"
#include "schedule.h"
#include "settle.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_run_maintenance);

/*
 * The reaper locks its candidates and their parents in one id order with
 * SKIP LOCKED (parents first: the order every flush uses), and fails a
 * child that ran out of attempts only when it holds the child's parent,
 * whose join it then updates (settle.c); such a child whose parent is busy
 * waits for a later round.  A child whose parent GC has deleted (a child
 * retried after its parent ended) has no join to update.
 */
static GdPlan reaper_plan = {
	"WITH c AS ("
	"  SELECT id, parent_id, lease_expires_at >= $1 AS disconnected"
	"    FROM ONLY gen_durable.instances"
	"   WHERE status = 'executing'"
	"     AND (lease_expires_at < $1"
	"          OR ($3 AND claim_session IS NOT NULL"
	"              AND NOT gen_durable._session_alive(claim_session)))"
	"   ORDER BY id LIMIT $2"
	"), l AS ("
	"  SELECT i.id, i.concurrency_key, i.concurrency_shard FROM ONLY gen_durable.instances i"
	"   WHERE i.id = ANY (ARRAY(SELECT id FROM c)"
	"                     || ARRAY(SELECT parent_id FROM c WHERE parent_id IS NOT NULL))"
	"   ORDER BY i.id FOR NO KEY UPDATE SKIP LOCKED"
	")"
	"UPDATE ONLY gen_durable.instances i"
	"   SET attempt = i.attempt + 1,"
	"       status = CASE WHEN i.attempt + 1 >= i.max_attempts"
	"                     THEN 'failed' ELSE 'runnable' END::gen_durable.status,"
	"       error = CASE WHEN i.attempt + 1 >= i.max_attempts"
	"                    THEN pg_catalog.jsonb_build_object('reason', 'lease_expired',"
	"                             'attempts', i.attempt + 1, 'worker', i.locked_by)"
	"                    ELSE i.error END,"
	"       awaits = CASE WHEN i.attempt + 1 >= i.max_attempts THEN NULL ELSE i.awaits END,"
	"       timed_out = i.timed_out AND i.attempt + 1 < i.max_attempts,"
	"       locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL,"
	"       presented = NULL, claim_session = NULL, updated_at = $1"
	"  FROM c JOIN l ON l.id = c.id"
	" WHERE i.id = c.id AND i.status = 'executing'"
	"   AND (i.lease_expires_at < $1"
	"        OR ($3 AND i.claim_session IS NOT NULL"
	"            AND NOT gen_durable._session_alive(i.claim_session)))"
	"   AND (i.attempt + 1 < i.max_attempts OR i.parent_id IS NULL"
	"        OR i.parent_id IN (SELECT id FROM l)"
	"        OR NOT EXISTS (SELECT 1 FROM ONLY gen_durable.instances p WHERE p.id = i.parent_id))"
	" RETURNING i.id, i.status = 'failed', i.parent_id, i.queue, c.disconnected,"
	"           i.concurrency_key IS NOT NULL, i.parent_round,"
	"           l.concurrency_key, l.concurrency_shard",
	3,
	{TIMESTAMPTZOID, INT4OID, BOOLOID},
	NULL, true
};

static GdPlan timeouts_plan = {
	"WITH l AS ("
	"  SELECT id FROM ONLY gen_durable.instances"
	"   WHERE status = 'awaiting_signal' AND await_deadline IS NOT NULL"
	"     AND await_deadline < $1"
	"   ORDER BY id LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED"
	")"
	"UPDATE ONLY gen_durable.instances i"
	"   SET status = 'runnable', eligible_at = $1, await_deadline = NULL,"
	"       timed_out = true, updated_at = $1"
	"  FROM l"
	" WHERE i.id = l.id AND i.status = 'awaiting_signal' AND i.await_deadline < $1"
	" RETURNING i.queue",
	2,
	{TIMESTAMPTZOID, INT4OID},
	NULL, true
};

static GdPlan gc_plan = {
	"WITH c AS ("
	"  SELECT i.id FROM ONLY gen_durable.instances i"
	"   WHERE i.status IN ('done', 'failed', 'cancelled') AND i.updated_at < $1"
	"     AND NOT EXISTS (SELECT 1 FROM ONLY gen_durable.instances p"
	"                      WHERE p.id = i.parent_id"
	"                        AND p.status NOT IN ('done', 'failed', 'cancelled'))"
	"   ORDER BY i.updated_at LIMIT $2 FOR UPDATE OF i SKIP LOCKED"
	"), d AS ("
	"  DELETE FROM ONLY gen_durable.instances WHERE id = ANY (ARRAY(SELECT id FROM c))"
	"  RETURNING id"
	"), inbox AS ("
	"  DELETE FROM gen_durable.signals WHERE target_id = ANY (ARRAY(SELECT id FROM d))"
	"), history AS ("
	"  DELETE FROM gen_durable.step_history WHERE instance_id = ANY (ARRAY(SELECT id FROM d))"
	")"
	"SELECT pg_catalog.count(*) FROM d",
	2,
	{TIMESTAMPTZOID, INT4OID},
	NULL, true
};

/*
 * The claims in memory to write to their rows: each one whose row is still
 * the version it claimed (locked, skipping rows locked now) is written; the
 * result says, per claim, whether it was written (true) or its row has
 * changed or gone (false).  The claims of rows locked right now are in
 * neither, and stay held for the next round.
 */
static GdPlan materialize_plan = {
	"WITH m AS ("
	"  SELECT * FROM ROWS FROM (pg_catalog.unnest($2::int8[]), pg_catalog.unnest($3::tid[]),"
	"                           pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::timestamptz[]),"
	"                           pg_catalog.unnest($6::int8[]), pg_catalog.unnest($7::int8[]))"
	"    AS m(id, tid, worker, lease, claim, session)"
	"), l AS ("
	"  SELECT i.id FROM ONLY gen_durable.instances i JOIN m ON i.id = m.id AND i.ctid = m.tid"
	"   WHERE i.status = 'runnable'"
	"   ORDER BY i.id FOR NO KEY UPDATE OF i SKIP LOCKED"
	"), u AS ("
	"  UPDATE ONLY gen_durable.instances i"
	"     SET status = 'executing', locked_by = m.worker, lease_expires_at = m.lease,"
	"         claim = m.claim, claim_session = m.session, updated_at = $1"
	"    FROM m JOIN l ON l.id = m.id"
	"   WHERE i.id = m.id AND i.ctid = m.tid AND i.status = 'runnable'"
	"  RETURNING i.id"
	")"
	"SELECT id, true FROM u"
	" UNION ALL "
	"SELECT m.id, false FROM m"
	" WHERE NOT EXISTS (SELECT 1 FROM ONLY gen_durable.instances i"
	"                    WHERE i.id = m.id AND i.ctid = m.tid AND i.status = 'runnable')",
	7,
	{TIMESTAMPTZOID, INT8ARRAYOID, TIDARRAYOID, TEXTARRAYOID, TIMESTAMPTZARRAYOID,
	INT8ARRAYOID, INT8ARRAYOID},
	NULL, true
};

/* the least time between two repairs of the limiter's buckets by the
 * worker: they are a safety net, not a hot path */
#define GD_BUCKET_SWEEP_MS	1000

/*
 * gd_sweep_next keeps the earliest deadline a sweep found (0 = none).
 */
void
gd_sweep_next(SweepRound *round, TimestampTz when)
{
	if (when != 0 && (round->next == 0 || when < round->next))
		round->next = when;
}

/*
 * sweep_memory_claims writes to their rows the claims in memory that must
 * outlive memory now (see the file header), and notes when the next one
 * falls due.
 */
static void
sweep_memory_claims(TimestampTz now, SweepRound *round)
{
	GdClaim    *due;
	TimestampTz next;
	int			n = gd_claims_to_materialize(now,
											 TimestampTzPlusMilliseconds(now, -gen_durable_memory_claim_max_age),
											 &due, &next);
	Datum	   *cols[6];
	bool	   *nonull;
	Datum		values[7];
	int64		written = 0;
	int			rows;
	int			i;
	int			c;

	gd_sweep_next(round, next);
	if (n == 0)
		return;
	for (c = 0; c < 6; c++)
		cols[c] = palloc(sizeof(Datum) * n);
	nonull = palloc0(sizeof(bool) * n);
	for (i = 0; i < n; i++)
	{
		cols[0][i] = Int64GetDatum(due[i].id);
		cols[1][i] = PointerGetDatum(&due[i].tid);
		cols[2][i] = CStringGetTextDatum(due[i].worker);
		cols[3][i] = TimestampTzGetDatum(due[i].lease_expires_at);
		cols[4][i] = Int64GetDatum(due[i].claim);
		cols[5][i] = Int64GetDatum(due[i].session);
	}
	values[0] = TimestampTzGetDatum(now);
	values[1] = PointerGetDatum(gd_array(cols[0], NULL, n, INT8OID));
	values[2] = PointerGetDatum(gd_array(cols[1], NULL, n, TIDOID));
	values[3] = PointerGetDatum(gd_array(cols[2], NULL, n, TEXTOID));
	values[4] = PointerGetDatum(gd_array(cols[3], NULL, n, TIMESTAMPTZOID));
	values[5] = PointerGetDatum(gd_array(cols[4], NULL, n, INT8OID));
	for (i = 0; i < n; i++)
		nonull[i] = due[i].session == 0;
	values[6] = PointerGetDatum(gd_array(cols[5], nonull, n, INT8OID));
	rows = gd_execute(&materialize_plan, values, NULL, SPI_OK_SELECT);
	for (i = 0; i < rows; i++)
	{
		bool		isnull;

		gd_claim_settled(gd_result_int64(i, 1));
		if (DatumGetBool(gd_result_datum(i, 2, &isnull)))
			written++;
	}
	round->claims_written += written;
	gd_count(GD_STAT_CLAIMS_WRITTEN, written);
}

/*
 * sweep_reaper returns expired claims to runnable, or fails them when
 * their attempts have run out; with shared memory, also the claims of
 * sessions that are no longer connected (session.c).
 */
static void
sweep_reaper(TimestampTz now, SweepRound *round)
{
	Datum		values[3];
	Settled		settled;
	HeldSlots	slots;
	int64		reaped = 0;
	int64		lease_failed = 0;
	int			rows;
	int			i;

	values[0] = TimestampTzGetDatum(now);
	values[1] = Int32GetDatum(gen_durable_gc_batch);
	values[2] = BoolGetDatum(gd_shmem_ready());
	rows = gd_execute(&reaper_plan, values, NULL, SPI_OK_UPDATE_RETURNING);
	gd_slots_init(&slots);
	gd_settled_init(&settled, rows, &slots);
	for (i = 0; i < rows; i++)
	{
		bool		isnull;
		Datum		parent;

		if (DatumGetBool(gd_result_datum(i, 5, &isnull)))
			gd_count(GD_STAT_REAPED_DEAD_BACKEND, 1);
		gd_slots_add_result(&slots, i, 8, 9);
		if (!DatumGetBool(gd_result_datum(i, 2, &isnull)))
		{
			reaped++;
			gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4));
			continue;
		}
		lease_failed++;
		/* a freed concurrency key lets the queue's next row with it run */
		if (DatumGetBool(gd_result_datum(i, 6, &isnull)))
			gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4));
		parent = gd_result_datum(i, 3, &isnull);
		if (isnull)
			gd_settled_add(&settled, gd_result_int64(i, 1), 0, 0, true);
		else
			gd_settled_add(&settled, gd_result_int64(i, 1), DatumGetInt64(parent),
						   DatumGetInt32(gd_result_datum(i, 7, &isnull)), true);
	}
	round->reaped += reaped;
	round->lease_failed += lease_failed;
	gd_count(GD_STAT_REAPED, reaped);
	gd_count(GD_STAT_LEASE_FAILED, lease_failed);
	gd_settle(&settled, now);
	/* the worker never waits for a row (I-22): a busy shard is repaired later */
	gd_credit_slots(&slots, false);
}

/*
 * sweep_timeouts wakes parked instances whose await deadline passed.
 */
static void
sweep_timeouts(TimestampTz now, SweepRound *round)
{
	Datum		values[2];
	int			rows;
	int			i;

	values[0] = TimestampTzGetDatum(now);
	values[1] = Int32GetDatum(gen_durable_gc_batch);
	rows = gd_execute(&timeouts_plan, values, NULL, SPI_OK_UPDATE_RETURNING);
	for (i = 0; i < rows; i++)
		gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	round->timeouts += rows;
	gd_count(GD_STAT_TIMEOUTS_FIRED, rows);
}

/*
 * sweep_gc deletes terminal instances of the live table older than the
 * retention, with their inboxes and step history (which have no foreign
 * keys since 0.9.0).  The archive's segments go whole (sweep_archive).
 */
static void
sweep_gc(TimestampTz now, SweepRound *round)
{
	Datum		values[2];
	int			rows;

	values[0] = TimestampTzGetDatum(now - (TimestampTz) gen_durable_retention * USECS_PER_SEC);
	values[1] = Int32GetDatum(gen_durable_gc_batch);
	gd_execute(&gc_plan, values, NULL, SPI_OK_SELECT);
	rows = gd_result_int64(0, 1);
	round->gc_deleted += rows;
	gd_count(GD_STAT_GC_DELETED, rows);
}

/*
 * sweep_archive rotates the archive's segments and empties those older
 * than the retention (archive.c); their instances count as deleted by GC.
 */
static void
sweep_archive(TimestampTz now, SweepRound *round)
{
	int64		rows = 0;

	round->segments_truncated += gd_archive_sweep(gen_durable_retention, &rows);
	round->gc_deleted += rows;
	gd_count(GD_STAT_GC_DELETED, rows);
}

/*
 * sweep_buckets runs rate-bucket GC and the gate reconcile (buckets.c).
 */
static void
sweep_buckets(TimestampTz now, SweepRound *round)
{
	gd_sweep_buckets(now, &round->buckets);
}

/*
 * sweep_schedules fires the due ticks of recurring schedules (schedule.c)
 * and notes the next tick.
 */
static void
sweep_schedules(TimestampTz now, SweepRound *round)
{
	TimestampTz next;

	round->schedules_fired += gd_sweep_schedules(now, &next);
	gd_sweep_next(round, next);
}

/*
 * Every sweep of a round, in order.  The worker bounds the row-lock waits
 * of all but the await timeouts, which update only the rows they locked
 * (worker.c, limit_lock_waits).
 */
const GdSweep gd_sweeps[] = {
	{sweep_memory_claims, "gen_durable: memory claims", false, 0},
	{sweep_reaper, "gen_durable: reaper", true, 0},
	{sweep_timeouts, "gen_durable: await timeouts", false, 0},
	{sweep_gc, "gen_durable: gc", true, 0},
	{sweep_archive, "gen_durable: archive", false, 0},
	{sweep_buckets, "gen_durable: limiter buckets", true, GD_BUCKET_SWEEP_MS},
	{sweep_schedules, "gen_durable: schedules", true, 0},
};

const int	gd_nsweeps = lengthof(gd_sweeps);

/*
 * gen_durable_run_maintenance implements gen_durable.run_maintenance():
 * one round of every sweep, returning what each did as a JSON object.
 */
Datum
gen_durable_run_maintenance(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	SweepRound	round = {0};
	char	   *json;
	int			i;

	gd_require_read_committed("run_maintenance");
	gd_connect();
	for (i = 0; i < gd_nsweeps; i++)
		gd_sweeps[i].run(now, &round);
	if (round.next != 0)
		gd_deadline(round.next);
	gd_finish();

	json = psprintf("{\"claims_written\": " INT64_FORMAT ", \"reaped\": " INT64_FORMAT
					", \"lease_failed\": " INT64_FORMAT
					", \"timeouts\": " INT64_FORMAT ", \"gc_deleted\": " INT64_FORMAT
					", \"segments_truncated\": " INT64_FORMAT
					", \"buckets_swept\": " INT64_FORMAT
					", \"gate_shards_repaired\": " INT64_FORMAT
					", \"schedules_fired\": " INT64_FORMAT "}",
					round.claims_written, round.reaped, round.lease_failed, round.timeouts,
					round.gc_deleted, round.segments_truncated,
					round.buckets.buckets_swept, round.buckets.gate_shards_repaired,
					round.schedules_fired);
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
}
