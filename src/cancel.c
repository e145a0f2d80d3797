/*-------------------------------------------------------------------------
 *
 * cancel.c
 *		The operators' verbs on one instance: cancel(), fail() and retry().
 *
 *		cancel and fail end a live instance and every live descendant in
 *		one cascade (settle.c, D14): the instance's parent is locked first,
 *		then the subtree top-down in id order; claims are cleared, so an
 *		in-flight worker's outcome is stale and its heartbeat no longer
 *		returns the id; inboxes are purged; the parent's join counts the
 *		instance (a fail there can trigger first_error).  cancel makes the
 *		instance cancelled, fail makes it failed; descendants are cancelled
 *		either way.  A terminal or missing instance is left alone.
 *
 *		retry runs a failed or cancelled instance again: runnable at once,
 *		attempt 0, at its step or the one given.  A child whose parent
 *		still waits for its round counts in that join again; a parent that
 *		has moved on is not disturbed.  The parent is locked first (the
 *		order of every flush).
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
PG_FUNCTION_INFO_V1(gen_durable_fail);
PG_FUNCTION_INFO_V1(gen_durable_retry);

/*
 * The correlation key of the instance may be held by another live instance
 * by now: the guard then refuses the row (unique violation), reported below.
 */
static GdPlan retry_plan = {
	"WITH r AS ("
	"  UPDATE ONLY gen_durable.instances"
	"     SET status = 'runnable', attempt = 0, step = COALESCE($2, step),"
	"         eligible_at = $3, error = NULL, result = NULL, awaits = NULL,"
	"         timed_out = false, updated_at = $3"
	"   WHERE id = $1 AND status IN ('failed', 'cancelled')"
	"   RETURNING queue, parent_id, parent_round"
	"), reopened AS ("
	"  UPDATE ONLY gen_durable.instances p"
	"     SET children_pending = p.children_pending + 1, updated_at = $3"
	"    FROM r"
	"   WHERE p.id = r.parent_id AND p.spawn_round = r.parent_round"
	"     AND p.status = 'awaiting_children'"
	"  RETURNING p.id"
	")"
	"SELECT queue, (SELECT count(*) FROM reopened) FROM r",
	3,
	{INT8OID, TEXTOID, TIMESTAMPTZOID}
};

/*
 * required_id returns the id argument, which must not be NULL.
 */
static int64
required_id(FunctionCallInfo fcinfo, const char *verb)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"id\" must not be NULL"),
				 errhint("Pass the id of the instance to %s.", verb)));
	return PG_GETARG_INT64(0);
}

/*
 * end_instance ends one instance and its live descendants; returns how
 * many were ended.
 */
static int
end_instance(FunctionCallInfo fcinfo, bool fail, const char *verb)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		id = required_id(fcinfo, verb);
	char	   *reason = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	Settled		settled;
	HeldSlots	slots;
	int			ended;

	gd_connect();
	gd_slots_init(&slots);
	gd_settled_init(&settled, 8, &slots);
	ended = gd_end_trees(&id, 1, fail, reason, now, &settled);
	gd_settle(&settled, now);
	gd_credit_slots(&slots, true);
	gd_finish();
	return ended;
}

/*
 * gen_durable_cancel implements gen_durable.cancel(id, reason): the number
 * of instances cancelled (the instance and its live descendants).
 */
Datum
gen_durable_cancel(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(end_instance(fcinfo, false, "cancel"));
}

/*
 * gen_durable_fail implements gen_durable.fail(id, reason): whether the
 * instance was live and is now failed (its live descendants cancelled).
 */
Datum
gen_durable_fail(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(end_instance(fcinfo, true, "fail") > 0);
}

/*
 * gen_durable_retry implements gen_durable.retry(id, step): whether a
 * failed or cancelled instance was made runnable again.
 */
Datum
gen_durable_retry(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	MemoryContext oldcontext = CurrentMemoryContext;
	int			rows = 0;

	values[0] = Int64GetDatum(required_id(fcinfo, "retry"));
	if (PG_ARGISNULL(1))
		nulls[1] = 'n';
	else
		values[1] = CStringGetTextDatum(gd_arg_name(fcinfo, 1, "step", true));
	values[2] = TimestampTzGetDatum(now);

	gd_connect();
	PG_TRY();
	{
		int64		id = DatumGetInt64(values[0]);

		gd_lock_parents(&id, 1);
		rows = gd_execute(&retry_plan, values, nulls, SPI_OK_SELECT);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();

		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("instance " INT64_FORMAT " cannot run again: another live instance holds its correlation key",
						DatumGetInt64(values[0])),
				 errhint("Finish or cancel the instance that holds the key first.")));
	}
	PG_END_TRY();
	if (rows == 1)
		gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	gd_finish();
	PG_RETURN_BOOL(rows == 1);
}
