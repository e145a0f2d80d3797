/*-------------------------------------------------------------------------
 *
 * spi_util.c
 *		Plans prepared once per backend, and small helpers for passing
 *		arrays to and reading results from SPI.
 *
 *		Every statement the engine runs is a static GdPlan: prepared on first
 *		use with SPI_prepare_cursor, kept with SPI_keepplan, and executed with
 *		SPI_execute_plan.  The hot statements keep one generic plan (planning
 *		them per call with their parameters cost a fifth of a drain's CPU);
 *		the maintenance sweeps, which run once a round and whose best plan
 *		depends on the values (a deadline, a cut-off time), and the bulk
 *		insert, whose planning is spread over up to 10,000 rows and whose
 *		plan depends on how many, are planned per call.  Statements are set-based over array parameters, so
 *		the number of statements a call runs never depends on its batch size.
 *		Plans survive DROP/CREATE EXTENSION: the plan cache re-analyses the
 *		(schema-qualified) text when the tables it uses are invalidated.
 *
 * IDENTIFICATION
 *		src/spi_util.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "jit/jit.h"
#include "optimizer/cost.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "args.h"
#include "gen_durable.h"
#include "spi_util.h"

/*
 * gd_connect opens SPI for a SQL-callable function.
 */
void
gd_connect(void)
{
	int			ret = SPI_connect();

	if (ret != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed: %s", SPI_result_code_string(ret));
}

/*
 * gd_finish closes SPI; results must have been copied out before.
 */
void
gd_finish(void)
{
	int			ret = SPI_finish();

	if (ret != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed: %s", SPI_result_code_string(ret));
}

/*
 * execute_planned runs a prepared plan with the planner settings the
 * engine's statements are planned under (a plan is made inside this call
 * too, on first use or after an invalidation):
 * - JIT off.  The statements touch a handful of rows through indexes, but
 *   their per-row subqueries make the planner's estimates for a long queue
 *   large enough to cross jit_above_cost, and compiling would then cost
 *   each call some 100 ms for a statement that runs in well under one.
 * - For a generic plan (kept for the backend's life), no sequential scans,
 *   hash joins or merge joins where an index can do.  Such a plan is made
 *   once, perhaps while the table is nearly empty, when reading it whole
 *   looks cheapest; kept while the queue grows, it would read every row
 *   (done ones included) on each call.  Every hot statement finds its rows
 *   by key through an index, whatever the table's size.
 */
static int
execute_planned(GdPlan *plan, Datum *values, const char *nulls)
{
	bool		saved_jit = jit_enabled;
	bool		saved_seqscan = enable_seqscan;
	bool		saved_hashjoin = enable_hashjoin;
	bool		saved_mergejoin = enable_mergejoin;
	int			ret;

	jit_enabled = false;
	if (!plan->replan)
		enable_seqscan = enable_hashjoin = enable_mergejoin = false;
	PG_TRY();
	{
		ret = SPI_execute_plan(plan->plan, values, nulls, false, 0);
	}
	PG_FINALLY();
	{
		jit_enabled = saved_jit;
		enable_seqscan = saved_seqscan;
		enable_hashjoin = saved_hashjoin;
		enable_mergejoin = saved_mergejoin;
	}
	PG_END_TRY();
	return ret;
}

/*
 * prepare_and_execute runs a statement, preparing and keeping its plan on
 * first use.  Both resolve names with pg_catalog alone on the search path
 * (no temporary schema, nothing of the caller's): the statements qualify
 * every table and function, but operators and casts are found on the
 * search path, and a caller who puts a schema of their own before
 * pg_catalog must not change what the engine's statements do.  (The plan
 * cache remembers the path a plan was made under, so a kept plan is never
 * reused under another.)
 */
static int
prepare_and_execute(GdPlan *plan, Datum *values, const char *nulls)
{
	OverrideSearchPath catalog_only = {NIL, true, false, 0};
	volatile int ret = 0;

	PushOverrideSearchPath(&catalog_only);
	PG_TRY();
	{
		if (plan->plan == NULL)
		{
			SPIPlanPtr	p = SPI_prepare_cursor(plan->sql, plan->nargs, plan->argtypes,
											   plan->replan ? 0 : CURSOR_OPT_GENERIC_PLAN);

			if (p == NULL)
				elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
			if (SPI_keepplan(p) != 0)
				elog(ERROR, "SPI_keepplan failed");
			plan->plan = p;
		}
		ret = execute_planned(plan, values, nulls);
	}
	PG_FINALLY();
	{
		PopOverrideSearchPath();
	}
	PG_END_TRY();
	return ret;
}

/*
 * gd_execute runs a statement of the engine and checks that SPI answered
 * with the expected result code.  Each call is a new statement with a
 * fresh snapshot under READ COMMITTED.  Returns the number of rows
 * processed.
 *
 * When the statement fails because an object it names does not exist, the
 * likely cause is a library newer than the installed extension's schema (a
 * server restarted on a new build before ALTER EXTENSION UPDATE): the
 * error then says so in its hint.
 */
int
gd_execute(GdPlan *plan, Datum *values, const char *nulls, int expected)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	int			ret = 0;

	PG_TRY();
	{
		ret = prepare_and_execute(plan, values, nulls);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNDEFINED_COLUMN &&
			edata->sqlerrcode != ERRCODE_UNDEFINED_FUNCTION &&
			edata->sqlerrcode != ERRCODE_UNDEFINED_TABLE)
			PG_RE_THROW();
		FlushErrorState();
		edata->hint = psprintf("The installed gen_durable extension may be older than its library (%s): run ALTER EXTENSION gen_durable UPDATE.",
							   GD_SCHEMA_VERSION);
		ReThrowError(edata);
	}
	PG_END_TRY();
	if (ret != expected)
		elog(ERROR, "gen_durable statement failed: %s", SPI_result_code_string(ret));
	return (int) SPI_processed;
}

/*
 * gd_result_datum returns one value of the last result, valid until
 * SPI_finish or the next statement.
 */
Datum
gd_result_datum(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 col, isnull);
}

/*
 * gd_result_copy returns one value of the last result copied into the
 * memory context of the function that called SPI_connect, so that it
 * outlives SPI_finish.
 */
Datum
gd_result_copy(int row, int col, bool *isnull)
{
	Datum		value = gd_result_datum(row, col, isnull);
	Oid			type;
	int16		typlen;
	bool		typbyval;

	if (*isnull)
		return (Datum) 0;
	type = SPI_gettypeid(SPI_tuptable->tupdesc, col);
	get_typlenbyval(type, &typlen, &typbyval);
	return SPI_datumTransfer(value, typbyval, typlen);
}

/*
 * gd_result_int64 returns a non-NULL bigint (or int) column of the last result.
 */
int64
gd_result_int64(int row, int col)
{
	bool		isnull;
	Datum		value = gd_result_datum(row, col, &isnull);

	if (isnull)
		elog(ERROR, "unexpected NULL in column %d of a gen_durable result", col);
	switch (SPI_gettypeid(SPI_tuptable->tupdesc, col))
	{
		case INT4OID:
			return DatumGetInt32(value);
		case INT2OID:
			return DatumGetInt16(value);
		default:
			return DatumGetInt64(value);
	}
}

/*
 * gd_array builds a one-dimensional array (possibly with NULLs) of a
 * built-in element type.
 */
ArrayType *
gd_array(Datum *values, bool *nulls, int n, Oid elemtype)
{
	int			dims[1];
	int			lbs[1];
	int16		typlen;
	bool		typbyval;
	char		typalign;

	dims[0] = n;
	lbs[0] = 1;
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return construct_md_array(values, nulls, n > 0 ? 1 : 0, dims, lbs,
							  elemtype, typlen, typbyval, typalign);
}

/*
 * gd_int8_array builds a bigint[] from C values.
 */
ArrayType *
gd_int8_array(const int64 *values, int n)
{
	Datum	   *datums = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		datums[i] = Int64GetDatum(values[i]);
	return gd_array(datums, NULL, n, INT8OID);
}

/*
 * gd_array_int8 unpacks a bigint[] argument into C values; NULL elements,
 * more than one dimension or (when capped) more than GD_MAX_BATCH elements
 * are refused with an error that names the argument.  Returns the element
 * count.
 */
int
gd_array_int8(ArrayType *array, const char *argname, bool capped, int64 **out)
{
	Datum	   *datums;
	bool	   *nulls;
	int			n;
	int			i;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("argument \"%s\" must be a one-dimensional array", argname),
				 errhint("Pass a flat array of ids, for example ARRAY[1, 2]::bigint[].")));
	deconstruct_array(array, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &datums, &nulls, &n);
	if (capped)
		gd_check_batch_size(n, argname);
	*out = palloc(sizeof(int64) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument \"%s\" must not contain NULL elements", argname),
					 errhint("Leave the NULLs out, for example with array_remove(%s, NULL).",
							 argname)));
		(*out)[i] = DatumGetInt64(datums[i]);
	}
	return n;
}

/*
 * gd_add_interval returns ts + span with timestamptz arithmetic (months and
 * days in the session time zone, like the SQL operator).
 */
TimestampTz
gd_add_interval(TimestampTz ts, Interval *span)
{
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   TimestampTzGetDatum(ts),
												   IntervalPGetDatum(span)));
}

/*
 * gd_require_read_committed refuses to run under REPEATABLE READ or
 * SERIALIZABLE (contract D15, I-3): the wake-up and ownership guarantees
 * rely on every statement seeing the latest committed rows.
 */
void
gd_require_read_committed(const char *function)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("gen_durable.%s cannot run in a REPEATABLE READ or SERIALIZABLE transaction",
						function),
				 errhint("Call it in a READ COMMITTED transaction (the default).")));
}

/*
 * gd_run_in_subxact runs body(arg) in a subtransaction and returns what it
 * returns (a row count).  The subtransaction is kept when the count is
 * positive or keep_when_empty, rolled back otherwise.  An error rolls it
 * back and is raised again, unless tolerate (when given) accepts it: then
 * -1 is returned (a race the caller retries).
 */
int
gd_run_in_subxact(int (*body) (void *arg), void *arg, bool keep_when_empty,
				  bool (*tolerate) (ErrorData *edata))
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	int			rows = 0;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		rows = body(arg);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		if (tolerate == NULL || !tolerate(edata))
			ReThrowError(edata);
		FreeErrorData(edata);
		return -1;
	}
	PG_END_TRY();
	if (rows > 0 || keep_when_empty)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(oldcontext);
	CurrentResourceOwner = oldowner;
	return rows;
}
