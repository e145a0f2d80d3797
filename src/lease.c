/*-------------------------------------------------------------------------
 *
 * lease.c
 *		heartbeat() and release(): a worker's hold on its claims.
 *
 *		A claim is trusted until lease_expires_at; heartbeat extends the
 *		leases of the claims the worker still owns and returns their ids, so
 *		a missing id tells the worker to stop that step (its outcome would
 *		be stale).  release hands claims back to runnable without counting
 *		an attempt (graceful shutdown, contract T16), keeping the rows'
 *		place in the queue.  Both lock in id order and skip rows that are
 *		locked right now (I-22); heartbeat reports such a busy row as still
 *		owned when it was owned before the lock (never as lost).
 *
 *		A claim held in memory (claims.h) is extended or handed back in
 *		the claim table, with nothing written: it counts as owned while
 *		its row is still the version it claimed (a cancelled instance's
 *		claim is not), which one statement reads for all of them.
 *
 * IDENTIFICATION
 *		src/lease.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "aftercommit.h"
#include "credit.h"
#include "args.h"
#include "claim_log.h"
#include "claims.h"
#include "gen_durable.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_heartbeat);
PG_FUNCTION_INFO_V1(gen_durable_release);

/*
 * Rows locked right now (a flush, a cancel or a cascade in progress) are
 * skipped, not waited for: a heartbeat must never take part in a lock
 * cycle.  They are reported as still owned when the snapshot says so; if
 * the transaction holding them ends the claim, the next heartbeat says so.
 */
static GdPlan heartbeat_plan = {
	"WITH l AS ("
	"  SELECT id FROM ONLY gen_durable.instances"
	"   WHERE id = ANY ($1) AND locked_by = $2"
	"   ORDER BY id FOR NO KEY UPDATE SKIP LOCKED"
	"), u AS ("
	"  UPDATE ONLY gen_durable.instances i SET lease_expires_at = $3, updated_at = $4"
	"    FROM l WHERE i.id = l.id AND i.locked_by = $2 AND i.status = 'executing'"
	"  RETURNING i.id"
	")"
	"SELECT id FROM u"
	" UNION ALL "
	"SELECT id FROM ONLY gen_durable.instances"
	" WHERE id = ANY ($1) AND locked_by = $2 AND id NOT IN (SELECT id FROM l)",
	4,
	{INT8ARRAYOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
};

static GdPlan release_plan = {
	"WITH l AS ("
	"  SELECT id, concurrency_key, concurrency_shard FROM ONLY gen_durable.instances"
	"   WHERE locked_by = $1 AND status = 'executing'"
	"     AND ($2::int8[] IS NULL OR id = ANY ($2))"
	"   ORDER BY id FOR NO KEY UPDATE SKIP LOCKED"
	")"
	"UPDATE ONLY gen_durable.instances i"
	"   SET status = 'runnable', locked_by = NULL, lease_expires_at = NULL,"
	"       concurrency_shard = NULL, presented = NULL, claim_session = NULL,"
	"       updated_at = $3"
	"  FROM l WHERE i.id = l.id AND i.locked_by = $1 AND i.status = 'executing'"
	" RETURNING i.queue, l.concurrency_key, l.concurrency_shard",
	3,
	{TEXTOID, INT8ARRAYOID, TIMESTAMPTZOID}
};

/* which claims in memory still have the row version they claimed */
static GdPlan current_plan = {
	"SELECT i.id, i.queue"
	"  FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::tid[])) AS t(id, tid)"
	"  JOIN ONLY gen_durable.instances i ON i.id = t.id AND i.ctid = t.tid"
	" WHERE i.status = 'runnable'",
	2,
	{INT8ARRAYOID, TIDARRAYOID}
};

/*
 * current_claims runs current_plan over n claims in memory; the result is
 * in SPI_tuptable, the count returned.
 */
static int
current_claims(GdClaim *claims, int n)
{
	Datum	   *ids = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *tids = palloc(sizeof(Datum) * Max(n, 1));
	Datum		values[2];
	int			i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
	{
		ids[i] = Int64GetDatum(claims[i].id);
		tids[i] = PointerGetDatum(&claims[i].tid);
	}
	values[0] = PointerGetDatum(gd_array(ids, NULL, n, INT8OID));
	values[1] = PointerGetDatum(gd_array(tids, NULL, n, TIDOID));
	return gd_execute(&current_plan, values, NULL, SPI_OK_SELECT);
}

/*
 * compare_int64 orders ids for the heartbeat's answer.
 */
static int
compare_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * gen_durable_heartbeat implements gen_durable.heartbeat(worker, ids, lease):
 * the ids (ascending) whose claims the worker still owns, now extended.
 */
Datum
gen_durable_heartbeat(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	char	   *worker = gd_arg_name(fcinfo, 0, "worker", true);
	Interval   *lease;
	int64	   *ids;
	int64	   *owned;
	int64	   *rest;
	GdClaim    *mem;
	int			nmem = 0;
	int			nrest = 0;
	int			n;
	int			rows;
	int			i;
	Datum		values[4];

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"ids\" must not be NULL"),
				 errhint("Pass the ids of the worker's claims, for example ARRAY[1, 2].")));
	n = gd_array_int8(PG_GETARG_ARRAYTYPE_P(1), "ids", true, &ids);
	lease = gd_arg_interval(fcinfo, 2, "lease", true);

	/* the claims in memory first, extended in place; the rest are on rows */
	mem = palloc(sizeof(GdClaim) * Max(n, 1));
	rest = palloc(sizeof(int64) * Max(n, 1));
	for (i = 0; i < n; i++)
		if (gd_claim_extend(ids[i], worker, gd_add_interval(now, lease), &mem[nmem]))
			nmem++;
		else
			rest[nrest++] = ids[i];

	values[0] = PointerGetDatum(gd_int8_array(rest, nrest));
	values[1] = CStringGetTextDatum(worker);
	values[2] = TimestampTzGetDatum(gd_add_interval(now, lease));
	values[3] = TimestampTzGetDatum(now);

	/* room for the answer outside SPI's memory, which SPI_finish frees */
	owned = palloc(sizeof(int64) * Max(n, 1));
	gd_connect();
	rows = current_claims(mem, nmem);
	for (i = 0; i < rows; i++)
		owned[i] = gd_result_int64(i, 1);
	if (nrest > 0)
	{
		int			more = gd_execute(&heartbeat_plan, values, NULL, SPI_OK_SELECT);

		for (i = 0; i < more; i++)
			owned[rows + i] = gd_result_int64(i, 1);
		rows += more;
	}
	gd_count(GD_STAT_HEARTBEATS, rows);
	gd_finish();

	qsort(owned, rows, sizeof(int64), compare_int64);
	PG_RETURN_ARRAYTYPE_P(gd_int8_array(owned, rows));
}

/*
 * release_memory_claims hands back the claims worker holds in memory (those
 * of ids, or all when ids is NULL): they go when this transaction commits,
 * and their queues are poked.  Returns how many of them still had the row
 * version they claimed.
 */
static int
release_memory_claims(const char *worker, int64 *ids, int n)
{
	GdClaim    *held;
	GdClaim    *mine;
	int64	   *released;
	int			nheld;
	int			nmine = 0;
	int			rows;
	int			i;

	if (ids == NULL)
		nheld = gd_claims_of_worker(worker, &held);
	else
	{
		held = palloc(sizeof(GdClaim) * Max(n, 1));
		for (i = 0, nheld = 0; i < n; i++)
			if (gd_claim_find(ids[i], &held[nheld]))
				nheld++;
	}
	mine = palloc(sizeof(GdClaim) * Max(nheld, 1));
	released = palloc(sizeof(int64) * Max(nheld, 1));
	for (i = 0; i < nheld; i++)
		if (gd_claim_settle(held[i].id, &held[i].claim, worker, &mine[nmine]))
		{
			gd_claim_settled(held[i].id);
			released[nmine++] = held[i].id;
		}
	gd_claim_log_released(released, nmine);
	rows = current_claims(mine, nmine);
	for (i = 0; i < rows; i++)
		gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
	return rows;
}

/*
 * gen_durable_release implements gen_durable.release(worker, ids): returns
 * the number of claims handed back.
 */
Datum
gen_durable_release(PG_FUNCTION_ARGS)
{
	char	   *worker = gd_arg_name(fcinfo, 0, "worker", true);
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	int64	   *ids = NULL;
	int			n = 0;
	int			rows;
	int			released;
	int			i;
	HeldSlots	slots;

	values[0] = CStringGetTextDatum(worker);
	if (PG_ARGISNULL(1))
		nulls[1] = 'n';
	else
	{
		n = gd_array_int8(PG_GETARG_ARRAYTYPE_P(1), "ids", true, &ids);
		values[1] = PointerGetDatum(gd_int8_array(ids, n));
	}
	values[2] = TimestampTzGetDatum(GetCurrentTimestamp());

	gd_connect();
	released = release_memory_claims(worker, PG_ARGISNULL(1) ? NULL : ids, n);
	rows = gd_execute(&release_plan, values, nulls, SPI_OK_UPDATE_RETURNING);
	gd_slots_init(&slots);
	for (i = 0; i < rows; i++)
	{
		gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		gd_slots_add_result(&slots, i, 2, 3);
	}
	gd_count(GD_STAT_RELEASED, rows + released);
	gd_credit_slots(&slots, true);
	gd_finish();
	PG_RETURN_INT32(rows + released);
}
