/*-------------------------------------------------------------------------
 *
 * queue_control.c
 *		The settings of a queue, rows of gen_durable.queue_settings:
 *		pause_queue() and resume_queue() stop and restart the claims of
 *		one queue; set_queue_history() sets whether its instances that do
 *		not say otherwise record their step history (flush.c, history.c).
 *
 *		A paused queue has its paused_at set.  pick finds no candidates in
 *		it (pick.c) and a waiting pick keeps waiting; a
 *		continue of one of its instances is committed as a plain next
 *		(flush.c, 'requeued'), so a paused queue hands out no step at all.
 *		Steps already claimed run on and commit their outcomes, and
 *		producers still insert into the queue.  The pause takes effect for
 *		the picks that start after it commits.  Resuming wakes the queue's
 *		waiting picks at commit.
 *
 * IDENTIFICATION
 *		src/queue_control.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "aftercommit.h"
#include "args.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_pause_queue);
PG_FUNCTION_INFO_V1(gen_durable_resume_queue);
PG_FUNCTION_INFO_V1(gen_durable_set_queue_history);

static GdPlan pause_plan = {
	"INSERT INTO gen_durable.queue_settings AS s (queue, paused_at) VALUES ($1, $2)"
	" ON CONFLICT (queue) DO UPDATE SET paused_at = EXCLUDED.paused_at"
	"   WHERE s.paused_at IS NULL"
	" RETURNING queue",
	2,
	{TEXTOID, TIMESTAMPTZOID}
};

static GdPlan resume_plan = {
	"UPDATE gen_durable.queue_settings SET paused_at = NULL"
	" WHERE queue = $1 AND paused_at IS NOT NULL RETURNING queue",
	1,
	{TEXTOID}
};

/* the previous setting comes from the row locked before the write */
static GdPlan history_plan = {
	"WITH old AS (SELECT history FROM gen_durable.queue_settings WHERE queue = $1 FOR UPDATE),"
	" w AS (INSERT INTO gen_durable.queue_settings (queue, history) VALUES ($1, $2)"
	"        ON CONFLICT (queue) DO UPDATE SET history = EXCLUDED.history)"
	" SELECT COALESCE((SELECT history FROM old), false)",
	2,
	{TEXTOID, BOOLOID}
};

/*
 * change_pause runs the pause or the resume statement for fcinfo's queue
 * ($1; the pause's $2 is the time) and says whether it changed anything;
 * a resume wakes the queue's waiting picks at commit.
 */
static bool
change_pause(FunctionCallInfo fcinfo, GdPlan *plan, bool resuming)
{
	char	   *queue = gd_arg_name(fcinfo, 0, "queue", true);
	Datum		values[2];
	int			rows;

	gd_connect();
	values[0] = CStringGetTextDatum(queue);
	values[1] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	rows = gd_execute(plan, values, NULL,
					  resuming ? SPI_OK_UPDATE_RETURNING : SPI_OK_INSERT_RETURNING);
	if (rows > 0 && resuming)
		gd_queue_runnable(queue);
	gd_finish();
	return rows > 0;
}

/*
 * gen_durable_pause_queue implements gen_durable.pause_queue(queue): true
 * when it paused the queue, false when it was paused already.
 */
Datum
gen_durable_pause_queue(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(change_pause(fcinfo, &pause_plan, false));
}

/*
 * gen_durable_resume_queue implements gen_durable.resume_queue(queue): true
 * when it resumed a paused queue, false when it was not paused.
 */
Datum
gen_durable_resume_queue(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(change_pause(fcinfo, &resume_plan, true));
}

/*
 * gen_durable_set_queue_history implements
 * gen_durable.set_queue_history(queue, enabled): whether the queue's
 * instances record their step history from their next commit on (an
 * instance's own history flag overrides it).  Returns the previous setting.
 */
Datum
gen_durable_set_queue_history(PG_FUNCTION_ARGS)
{
	char	   *queue = gd_arg_name(fcinfo, 0, "queue", true);
	Datum		values[2];
	bool		isnull;
	bool		previous;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"enabled\" must not be NULL"),
				 errhint("Pass true to record the history of the queue's new instances, false to stop.")));
	gd_connect();
	values[0] = CStringGetTextDatum(queue);
	values[1] = BoolGetDatum(PG_GETARG_BOOL(1));
	gd_execute(&history_plan, values, NULL, SPI_OK_SELECT);
	previous = DatumGetBool(gd_result_datum(0, 1, &isnull));
	gd_finish();
	PG_RETURN_BOOL(previous);
}
