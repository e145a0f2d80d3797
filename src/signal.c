/*-------------------------------------------------------------------------
 *
 * signal.c
 *		signal(): delivering a named payload to an instance's durable inbox.
 *
 *		One statement (contract §7, I-1): resolve the live target (by id or
 *		by correlation key) without a lock, store the signal (deduplicated by
 *		(target, dedup_key) while the earlier one exists), and take the
 *		target's row lock unconditionally so that the wake condition
 *		(awaiting_signal and the name awaited) is evaluated on the latest
 *		committed version, never as a locking predicate.  A park that
 *		commits first is therefore always seen here, and a park that commits
 *		later sees this signal in its recheck (I-2): no wake-up is lost.
 *		The wake also clears the claim columns: they are already NULL on the
 *		parked row it writes, but PostgreSQL checks constraints on the row
 *		built from the snapshot's (still executing) version before it
 *		notices the concurrent park and rebuilds the row from the latest
 *		one, and a runnable row with a claim would fail the claim CHECK.
 *
 * IDENTIFICATION
 *		src/signal.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "aftercommit.h"
#include "args.h"
#include "gen_durable.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_signal_id);
PG_FUNCTION_INFO_V1(gen_durable_signal_key);

/*
 * The delivery after the target is resolved (the "target" CTE, defined by
 * each variant): lock, insert, conditional wake.  Returns one row when the
 * target exists and, once locked, is still live: (stored, woken queue).  A
 * target that became terminal while the delivery waited for its lock gets
 * nothing stored (I-28).
 */
#define SIGNAL_DELIVERY \
	"), locked AS (" \
	"  SELECT i.id, i.status, i.awaits FROM ONLY gen_durable.instances i" \
	"    JOIN target t ON t.id = i.id FOR NO KEY UPDATE OF i" \
	"), stored AS (" \
	"  INSERT INTO gen_durable.signals (target_id, name, payload, dedup_key, inserted_at)" \
	"  SELECT id, $2, $3, $4, $5 FROM locked" \
	"   WHERE status NOT IN ('done', 'failed', 'cancelled')" \
	"  ON CONFLICT (target_id, dedup_key) DO NOTHING RETURNING id" \
	"), woken AS (" \
	"  UPDATE ONLY gen_durable.instances i" \
	"     SET status = 'runnable', eligible_at = $5, await_deadline = NULL," \
	"         locked_by = NULL, lease_expires_at = NULL, updated_at = $5" \
	"    FROM locked l" \
	"   WHERE i.id = l.id AND l.status = 'awaiting_signal' AND $2 = ANY (l.awaits)" \
	"  RETURNING i.queue" \
	")" \
	"SELECT (SELECT count(*) FROM stored), (SELECT queue FROM woken)" \
	"  FROM locked WHERE status NOT IN ('done', 'failed', 'cancelled')"

#define SIGNAL_ARGTYPES(target_type) \
	{target_type, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID}

static GdPlan signal_id_plan = {
	"WITH target AS ("
	"  SELECT id FROM ONLY gen_durable.instances"
	"   WHERE id = $1 AND status NOT IN ('done', 'failed', 'cancelled')"
	SIGNAL_DELIVERY,
	5,
	SIGNAL_ARGTYPES(INT8OID)
};

static GdPlan signal_key_plan = {
	"WITH target AS ("
	"  SELECT id FROM ONLY gen_durable.instances"
	"   WHERE correlation_guard = $1 AND status NOT IN ('done', 'failed', 'cancelled')"
	SIGNAL_DELIVERY,
	5,
	SIGNAL_ARGTYPES(TEXTOID)
};

/*
 * deliver validates the common arguments and runs the delivery statement;
 * the target argument has already been checked by the caller.
 */
static Datum
deliver(FunctionCallInfo fcinfo, GdPlan *plan, Datum target)
{
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	const char *answer = "no_target";
	GdCounter	counter = GD_STAT_SIGNALS_NO_TARGET;
	Jsonb	   *payload;

	gd_require_read_committed("signal");
	values[0] = target;
	values[1] = CStringGetTextDatum(gd_arg_name(fcinfo, 1, "name", true));
	payload = gd_arg_jsonb(fcinfo, 2, "payload", "{}");
	values[2] = JsonbPGetDatum(payload);
	if (PG_ARGISNULL(3))
		nulls[3] = 'n';
	else
		values[3] = CStringGetTextDatum(gd_arg_name(fcinfo, 3, "dedup_key", true));
	values[4] = TimestampTzGetDatum(GetCurrentTimestamp());

	gd_connect();
	if (gd_execute(plan, values, nulls, SPI_OK_SELECT) == 1)
	{
		char	   *woken_queue = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		bool		stored = gd_result_int64(0, 1) > 0;

		answer = stored ? "delivered" : "duplicate";
		counter = stored ? GD_STAT_SIGNALS_DELIVERED : GD_STAT_SIGNALS_DUPLICATE;
		if (woken_queue != NULL)
		{
			gd_queue_runnable(woken_queue);
			gd_count(GD_STAT_SIGNAL_WAKES, 1);
		}
	}
	gd_count(counter, 1);
	gd_finish();

	PG_RETURN_TEXT_P(cstring_to_text(answer));
}

/*
 * gen_durable_signal_id implements gen_durable.signal(target bigint, ...).
 */
Datum
gen_durable_signal_id(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"target\" must not be NULL"),
				 errhint("Pass an instance id or a correlation key.")));
	return deliver(fcinfo, &signal_id_plan, PG_GETARG_DATUM(0));
}

/*
 * gen_durable_signal_key implements gen_durable.signal(target text, ...):
 * the target is the live instance holding that correlation key.
 */
Datum
gen_durable_signal_key(PG_FUNCTION_ARGS)
{
	char	   *key = gd_arg_name(fcinfo, 0, "target", true);

	return deliver(fcinfo, &signal_key_plan, CStringGetTextDatum(key));
}
