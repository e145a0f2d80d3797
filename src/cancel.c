/*-------------------------------------------------------------------------
 *
 * cancel.c
 *		cancel(): ending a live instance as cancelled.
 *
 *		The instance's row lock is taken (waiting for a flush or signal in
 *		progress), and if the latest version is live it becomes cancelled:
 *		the claim is cleared, so an in-flight worker's outcome is stale and
 *		its heartbeat no longer returns the id (D14).  The terminal riders
 *		run through settle.c (D1).  A terminal or missing instance is left
 *		alone and 0 is returned.  Cascading to descendants comes with
 *		fan-out.
 *
 * IDENTIFICATION
 *		src/cancel.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "aftercommit.h"
#include "args.h"
#include "gen_durable.h"
#include "settle.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_cancel);

static GdPlan cancel_plan = {
	"UPDATE gen_durable.instances"
	"   SET status = 'cancelled', locked_by = NULL, lease_expires_at = NULL,"
	"       concurrency_shard = NULL, awaits = NULL, await_deadline = NULL,"
	"       presented = NULL, timed_out = false, claim_session = NULL,"
	"       error = pg_catalog.jsonb_build_object('reason', 'cancelled', 'message', $2::text),"
	"       updated_at = $3"
	" WHERE id = $1 AND status NOT IN ('done', 'failed', 'cancelled')"
	" RETURNING id, parent_id, queue, concurrency_key IS NOT NULL",
	3,
	{INT8OID, TEXTOID, TIMESTAMPTZOID}
};

/*
 * gen_durable_cancel implements gen_durable.cancel(id, reason): the number
 * of instances cancelled.
 */
Datum
gen_durable_cancel(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	Settled		settled;
	int			rows;
	int			i;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"id\" must not be NULL"),
				 errhint("Pass the id of the instance to cancel.")));
	values[0] = PG_GETARG_DATUM(0);
	if (PG_ARGISNULL(1))
		nulls[1] = 'n';
	else
		values[1] = PG_GETARG_DATUM(1);
	values[2] = TimestampTzGetDatum(now);

	gd_connect();
	rows = gd_execute(&cancel_plan, values, nulls, SPI_OK_UPDATE_RETURNING);
	gd_settled_init(&settled, rows);
	for (i = 0; i < rows; i++)
	{
		bool		isnull;
		Datum		parent = gd_result_datum(i, 2, &isnull);

		gd_settled_add(&settled, gd_result_int64(i, 1), isnull ? 0 : DatumGetInt64(parent));
		/* a freed concurrency key lets the queue's next row with it run */
		if (DatumGetBool(gd_result_datum(i, 4, &isnull)))
			gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3));
	}
	gd_settle(&settled, now);
	gd_count(GD_STAT_CANCELLED, rows);
	gd_finish();
	PG_RETURN_INT32(rows);
}
