/*-------------------------------------------------------------------------
 *
 * queue_control.c
 *		pause_queue() and resume_queue(): stopping and restarting the
 *		claims of one queue.
 *
 *		A paused queue has a row in gen_durable.paused_queues.  pick finds
 *		no candidates in it (pick.c) and a waiting pick keeps waiting; a
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

static GdPlan pause_plan = {
	"INSERT INTO gen_durable.paused_queues (queue, paused_at) VALUES ($1, $2)"
	" ON CONFLICT (queue) DO NOTHING RETURNING queue",
	2,
	{TEXTOID, TIMESTAMPTZOID}
};

static GdPlan resume_plan = {
	"DELETE FROM gen_durable.paused_queues WHERE queue = $1 RETURNING queue",
	1,
	{TEXTOID}
};

/*
 * gen_durable_pause_queue implements gen_durable.pause_queue(queue): true
 * when it paused the queue, false when it was paused already.
 */
Datum
gen_durable_pause_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = gd_arg_name(fcinfo, 0, "queue", true);
	Datum		values[2];
	int			rows;

	gd_connect();
	values[0] = CStringGetTextDatum(queue);
	values[1] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	rows = gd_execute(&pause_plan, values, NULL, SPI_OK_INSERT_RETURNING);
	gd_finish();
	PG_RETURN_BOOL(rows > 0);
}

/*
 * gen_durable_resume_queue implements gen_durable.resume_queue(queue): true
 * when it resumed a paused queue, false when it was not paused.  The
 * queue's waiting picks look again once the transaction commits.
 */
Datum
gen_durable_resume_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = gd_arg_name(fcinfo, 0, "queue", true);
	Datum		values[1];
	int			rows;

	gd_connect();
	values[0] = CStringGetTextDatum(queue);
	rows = gd_execute(&resume_plan, values, NULL, SPI_OK_DELETE_RETURNING);
	if (rows > 0)
		gd_queue_runnable(queue);
	gd_finish();
	PG_RETURN_BOOL(rows > 0);
}
