/*-------------------------------------------------------------------------
 *
 * await.c
 *		await(): waiting inside the server for an instance to settle
 *		(contract §8, D15).
 *
 *		The answer always comes from the row, read with a fresh snapshot
 *		each time: done, failed or cancelled with the result and error;
 *		awaiting when it is parked (until => 'settled' only); not_found for
 *		a missing id; busy when the timeout passes first (the work goes on,
 *		calling await again is the retry).  Between reads the call sleeps on
 *		its latch, set after commit by the transaction that settles or parks
 *		the instance (wait.c).
 *
 * IDENTIFICATION
 *		src/await.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "args.h"
#include "gen_durable.h"
#include "spi_util.h"
#include "wait.h"

PG_FUNCTION_INFO_V1(gen_durable_await);

static GdPlan read_plan = {
	"SELECT status::text, result, error, step, attempt"
	"  FROM gen_durable.instances WHERE id = $1",
	1,
	{INT8OID}
};

/*
 * answered says whether a status ends the wait.
 */
static bool
answered(const char *status, bool terminal_only)
{
	if (strcmp(status, "done") == 0 || strcmp(status, "failed") == 0 ||
		strcmp(status, "cancelled") == 0)
		return true;
	return !terminal_only &&
		(strcmp(status, "awaiting_signal") == 0 ||
		 strcmp(status, "awaiting_children") == 0);
}

/*
 * gen_durable_await implements gen_durable.await(id, timeout, until).
 */
Datum
gen_durable_await(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		id;
	Interval   *timeout;
	char	   *until;
	bool		terminal_only;
	GdWait		wait;
	Datum		out[5];
	bool		outnull[5] = {false, true, true, true, true};

	gd_require_read_committed("await");
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"id\" must not be NULL"),
				 errhint("Pass the id of the instance to wait for.")));
	id = PG_GETARG_DATUM(0);
	timeout = gd_arg_interval(fcinfo, 1, "timeout", false);
	until = gd_arg_name(fcinfo, 2, "until", true);
	if (strcmp(until, "settled") != 0 && strcmp(until, "terminal") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"until\" must be 'settled' or 'terminal', not \"%s\"", until),
				 errhint("'settled' also returns when the instance parks; 'terminal' waits for done, failed or cancelled.")));
	terminal_only = strcmp(until, "terminal") == 0;

	InitMaterializedSRF(fcinfo, 0);
	gd_connect();
	gd_wait_begin(&wait, gd_wait_deadline(timeout), GD_WAIT_AWAIT, NULL,
				  DatumGetInt64(id));
	PG_TRY();
	{
		for (;;)
		{
			const char *status;
			int			c;

			if (gd_execute(&read_plan, &id, NULL, SPI_OK_SELECT) == 0)
			{
				/* gone (even between two reads): nothing of an earlier read */
				out[0] = CStringGetTextDatum("not_found");
				for (c = 1; c < 5; c++)
					outnull[c] = true;
				break;
			}
			status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
			for (c = 1; c < 5; c++)
				out[c] = gd_result_datum(0, c + 1, &outnull[c]);
			if (answered(status, terminal_only))
			{
				if (strncmp(status, "awaiting", 8) == 0)
					status = "awaiting";
				out[0] = CStringGetTextDatum(status);
				break;
			}
			if (!gd_wait_sleep(&wait))
			{
				/* the work goes on: report where it is, without result or error */
				out[0] = CStringGetTextDatum("busy");
				outnull[1] = outnull[2] = true;
				break;
			}
		}
	}
	PG_FINALLY();
	{
		gd_wait_end(&wait);
	}
	PG_END_TRY();

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	gd_finish();
	return (Datum) 0;
}
