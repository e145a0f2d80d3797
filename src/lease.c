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
	"  SELECT id FROM gen_durable.instances"
	"   WHERE id = ANY ($1) AND locked_by = $2"
	"   ORDER BY id FOR NO KEY UPDATE SKIP LOCKED"
	"), u AS ("
	"  UPDATE gen_durable.instances i SET lease_expires_at = $3, updated_at = $4"
	"    FROM l WHERE i.id = l.id AND i.locked_by = $2 AND i.status = 'executing'"
	"  RETURNING i.id"
	")"
	"SELECT id FROM u"
	" UNION ALL "
	"SELECT id FROM gen_durable.instances"
	" WHERE id = ANY ($1) AND locked_by = $2 AND id NOT IN (SELECT id FROM l)",
	4,
	{INT8ARRAYOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
};

static GdPlan release_plan = {
	"WITH l AS ("
	"  SELECT id, concurrency_key, concurrency_shard FROM gen_durable.instances"
	"   WHERE locked_by = $1 AND status = 'executing'"
	"     AND ($2::int8[] IS NULL OR id = ANY ($2))"
	"   ORDER BY id FOR NO KEY UPDATE SKIP LOCKED"
	")"
	"UPDATE gen_durable.instances i"
	"   SET status = 'runnable', locked_by = NULL, lease_expires_at = NULL,"
	"       concurrency_shard = NULL, presented = NULL, claim_session = NULL,"
	"       updated_at = $3"
	"  FROM l WHERE i.id = l.id AND i.locked_by = $1 AND i.status = 'executing'"
	" RETURNING i.queue, l.concurrency_key, l.concurrency_shard",
	3,
	{TEXTOID, INT8ARRAYOID, TIMESTAMPTZOID}
};

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

	values[0] = PointerGetDatum(gd_int8_array(ids, n));
	values[1] = CStringGetTextDatum(worker);
	values[2] = TimestampTzGetDatum(gd_add_interval(now, lease));
	values[3] = TimestampTzGetDatum(now);

	/* room for the answer outside SPI's memory, which SPI_finish frees */
	owned = palloc(sizeof(int64) * Max(n, 1));
	gd_connect();
	rows = n == 0 ? 0 : gd_execute(&heartbeat_plan, values, NULL, SPI_OK_SELECT);
	for (i = 0; i < rows; i++)
		owned[i] = gd_result_int64(i, 1);
	gd_count(GD_STAT_HEARTBEATS, rows);
	gd_finish();

	qsort(owned, rows, sizeof(int64), compare_int64);
	PG_RETURN_ARRAYTYPE_P(gd_int8_array(owned, rows));
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
	int64	   *ids;
	int			n;
	int			rows;
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
	rows = gd_execute(&release_plan, values, nulls, SPI_OK_UPDATE_RETURNING);
	gd_slots_init(&slots);
	for (i = 0; i < rows; i++)
	{
		gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		gd_slots_add_result(&slots, i, 2, 3);
	}
	gd_count(GD_STAT_RELEASED, rows);
	gd_credit_slots(&slots, true);
	gd_finish();
	PG_RETURN_INT32(rows);
}
