/*-------------------------------------------------------------------------
 *
 * insert_spec.c
 *		Insert specs: turning insert()'s arguments, or a JSON object with
 *		the same keys (insert_many, spawn's children, a schedule's ticks),
 *		into a validated, normalised InsertSpec.
 *
 *		Both forms share the defaults, the checks and the normalisation
 *		(the correlation scope as status labels, the due time from run_at
 *		or delay), so that an instance is the same whichever way it was
 *		asked for.  A spec is complete and valid before any statement runs:
 *		a bad field raises an error naming the argument, or the spec's
 *		position and the field.  Writing specs is insert.c's.
 *
 * IDENTIFICATION
 *		src/insert_spec.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "args.h"
#include "insert_spec.h"
#include "spi_util.h"

/* the status labels, in enum order; the first four are the live ones */
static const char *const status_labels[] = {
	"runnable", "executing", "awaiting_signal", "awaiting_children",
	"done", "failed", "cancelled"
};

#define GD_NSTATUS		7
#define GD_LIVE_MASK	0x0F

/* the default scope of a correlation key: occupied while live */
#define GD_LIVE_SCOPE	"runnable,executing,awaiting_signal,awaiting_children"

/*
 * scope_from_mask renders a set of statuses as the comma-separated labels
 * the statements cast to gen_durable.status[].
 */
static char *
scope_from_mask(int mask)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < GD_NSTATUS; i++)
	{
		if (mask & (1 << i))
		{
			if (buf.len > 0)
				appendStringInfoChar(&buf, ',');
			appendStringInfoString(&buf, status_labels[i]);
		}
	}
	return buf.data;
}

/*
 * status_bit returns the bit of a status label, or 0 for an unknown label.
 */
static int
status_bit(const char *label, int len)
{
	int			i;

	for (i = 0; i < GD_NSTATUS; i++)
		if (strlen(status_labels[i]) == (size_t) len &&
			strncmp(status_labels[i], label, len) == 0)
			return 1 << i;
	return 0;
}

/*
 * scope_problem checks a correlation scope (D5): it must be empty (the key
 * is then a label only) or contain every live status.
 */
static char *
scope_problem(int mask)
{
	if (mask != 0 && (mask & GD_LIVE_MASK) != GD_LIVE_MASK)
		return pstrdup("\"correlation_scope\" must be empty or contain all four live statuses"
					   " (runnable, executing, awaiting_signal, awaiting_children)");
	return NULL;
}

/*
 * spec_problem checks what the SQL and JSON forms of a spec have in common,
 * returning a message naming the offending field.
 */
static char *
spec_problem(InsertSpec *spec)
{
	if (spec->priority < PG_INT16_MIN || spec->priority > PG_INT16_MAX)
		return psprintf("\"priority\" must be between %d and %d", PG_INT16_MIN, PG_INT16_MAX);
	if (!(spec->weight > 0) || isinf(spec->weight))
		return pstrdup("\"weight\" must be a number greater than 0");
	if (spec->max_attempts < 1)
		return pstrdup("\"max_attempts\" must be at least 1");
	if (spec->max_steps < 0)
		return pstrdup("\"max_steps\" must be at least 1");
	return NULL;
}

/*
 * spec_defaults fills the defaults of insert()'s arguments.
 */
static void
spec_defaults(InsertSpec *spec, TimestampTz now)
{
	memset(spec, 0, sizeof(InsertSpec));
	spec->fsm_version = 1;
	spec->step = "start";
	spec->state = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
	spec->queue = "default";
	spec->eligible_at = now;
	spec->weight = 1;
	spec->max_attempts = 20;
	spec->history = -1;
}

/*
 * spec_finish applies the scope default (a key is occupied while live) and
 * the due time, once both forms have been read.
 */
static void
spec_finish(InsertSpec *spec, bool scope_given, int scope_mask,
			TimestampTz now, bool has_run_at, TimestampTz run_at, Interval *delay)
{
	if (spec->correlation_key == NULL)
		spec->scope = "";
	else if (!scope_given)
		spec->scope = GD_LIVE_SCOPE;
	else
		spec->scope = scope_from_mask(scope_mask);

	if (has_run_at)
		spec->eligible_at = run_at;
	else if (delay != NULL)
		spec->eligible_at = gd_add_interval(now, delay);
	else
		spec->eligible_at = now;
}

/*
 * gd_spec_from_args builds a spec from insert()'s arguments, raising an
 * error that names the first bad argument.
 */
void
gd_spec_from_args(FunctionCallInfo fcinfo, TimestampTz now, InsertSpec *spec)
{
	char	   *problem;
	int			scope_mask = 0;
	Interval   *delay = NULL;

	spec_defaults(spec, now);
	spec->fsm = gd_arg_name(fcinfo, 0, "fsm", true);
	spec->state = gd_arg_jsonb(fcinfo, 1, "state", "{}");
	if (!JB_ROOT_IS_OBJECT(spec->state) || JB_ROOT_IS_SCALAR(spec->state))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"state\" must be a JSON object"),
				 errhint("Wrap the value in an object, for example '{\"value\": 1}'.")));
	spec->step = gd_arg_name(fcinfo, 2, "step", true);
	spec->queue = gd_arg_name(fcinfo, 3, "queue", true);
	if (PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"priority\" must not be NULL"),
				 errhint("Pass a number; lower runs first, 0 is the default.")));
	spec->priority = PG_GETARG_INT32(4);
	if (!PG_ARGISNULL(5) && !PG_ARGISNULL(6))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("arguments \"run_at\" and \"delay\" cannot both be given"),
				 errhint("Pass either an instant or a delay from now.")));
	if (!PG_ARGISNULL(6))
		delay = gd_arg_interval(fcinfo, 6, "delay", false);
	spec->correlation_key = gd_arg_name(fcinfo, 7, "correlation_key", false);
	if (!PG_ARGISNULL(8))
	{
		ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(8);
		Datum	   *labels;
		bool	   *nulls;
		int			n;
		int			i;
		Oid			elemtype = ARR_ELEMTYPE(arr);
		int16		typlen;
		bool		typbyval;
		char		typalign;

		get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
		deconstruct_array(arr, elemtype, typlen, typbyval, typalign, &labels, &nulls, &n);
		for (i = 0; i < n; i++)
		{
			char	   *label;

			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("argument \"correlation_scope\" must not contain NULL"),
						 errhint("List statuses such as runnable or done.")));
			label = DatumGetCString(DirectFunctionCall1(enum_out, labels[i]));
			scope_mask |= status_bit(label, strlen(label));
		}
		problem = scope_problem(scope_mask);
		if (problem)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument %s", problem),
					 errhint("Omit it for the default (occupied while live), add terminal statuses to reserve the key longer, or pass '{}' for a label that is neither unique nor addressable.")));
	}
	spec->concurrency_key = gd_arg_name(fcinfo, 9, "concurrency_key", false);
	spec->rate_limit = gd_arg_name(fcinfo, 10, "rate_limit", false);
	if (PG_ARGISNULL(11) || PG_ARGISNULL(12) || PG_ARGISNULL(15))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be NULL",
						PG_ARGISNULL(11) ? "weight" : PG_ARGISNULL(12) ? "max_attempts" : "fsm_version"),
				 errhint("Omit the argument to use its default.")));
	spec->weight = PG_GETARG_FLOAT8(11);
	spec->max_attempts = PG_GETARG_INT32(12);
	if (!PG_ARGISNULL(13))
	{
		spec->max_steps = PG_GETARG_INT32(13);
		if (spec->max_steps < 1)
			spec->max_steps = -1;
	}
	if (!PG_ARGISNULL(14))
	{
		spec->metadata = PG_GETARG_JSONB_P(14);
		if (!JB_ROOT_IS_OBJECT(spec->metadata) || JB_ROOT_IS_SCALAR(spec->metadata))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"metadata\" must be a JSON object"),
					 errhint("Pass an object such as '{\"tenant\": 42}', or NULL.")));
	}
	spec->fsm_version = PG_GETARG_INT32(15);
	/* insert() as defined before 0.6.0 has no history argument */
	if (PG_NARGS() > 17 && !PG_ARGISNULL(17))
		spec->history = PG_GETARG_BOOL(17) ? 1 : 0;

	problem = spec_problem(spec);
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument %s", problem),
				 errhint("See gen_durable.insert in docs/reference.md.")));
	spec_finish(spec, !PG_ARGISNULL(8), scope_mask, now,
				!PG_ARGISNULL(5), PG_ARGISNULL(5) ? 0 : PG_GETARG_TIMESTAMPTZ(5), delay);
}

/* the keys an insert spec object may have: insert()'s argument names */
static const char *const spec_keys[] = {
	"fsm", "state", "step", "queue", "priority", "run_at", "delay",
	"correlation_key", "correlation_scope", "concurrency_key", "rate_limit",
	"weight", "max_attempts", "max_steps", "metadata", "fsm_version", "history", NULL
};

/*
 * gd_spec_error raises the error for a bad field of the insert spec at
 * position ord.
 */
void
gd_spec_error(int ord, const char *problem)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("insert spec at position %d: %s", ord, problem),
			 errhint("An insert spec is an object with the same keys as the arguments of gen_durable.insert.")));
}

/* a timestamp field of a spec being parsed */
typedef struct SpecTimestamp
{
	JsonbValue *v;
	TimestampTz ts;
} SpecTimestamp;

/*
 * parse_timestamp parses a SpecTimestamp's string (for gd_catch_bad_input).
 */
static void
parse_timestamp(void *arg)
{
	SpecTimestamp *t = (SpecTimestamp *) arg;

	t->ts = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
													CStringGetDatum(pnstrdup(t->v->val.string.val,
																			 t->v->val.string.len)),
													ObjectIdGetDatum(InvalidOid),
													Int32GetDatum(-1)));
}

/*
 * spec_timestamp reads a timestamp field of a spec.  A malformed or
 * out-of-range timestamp raises the spec's error, which names the spec
 * and the field, rather than timestamptz_in's, which names neither.
 */
static TimestampTz
spec_timestamp(JsonbValue *v, const char *key, int ord)
{
	SpecTimestamp t = {v, 0};
	char	   *problem;

	if (v->type != jbvString)
		gd_spec_error(ord, psprintf("\"%s\" must be a timestamp string", key));
	if ((problem = gd_catch_bad_input(parse_timestamp, &t)) != NULL)
		gd_spec_error(ord, psprintf("\"%s\": %s", key, problem));
	return t.ts;
}

/*
 * spec_json_name reads an optional name field of a spec; NULL = absent or
 * JSON null.
 */
static char *
spec_json_name(JsonbContainer *obj, const char *key, int ord, char *dflt)
{
	JsonbValue *v = gd_json_field(obj, key);
	char	   *out = dflt;
	char	   *problem;

	if (v == NULL || gd_json_is_null(v))
		return dflt;
	problem = gd_json_name(v, key, &out);
	if (problem)
		gd_spec_error(ord, problem);
	return out;
}

/*
 * spec_json_int reads an optional whole-number field of a spec.
 */
static int32
spec_json_int(JsonbContainer *obj, const char *key, int ord, int32 dflt,
			  int64 min, int64 max)
{
	JsonbValue *v = gd_json_field(obj, key);
	int64		out;
	char	   *problem;

	if (v == NULL || gd_json_is_null(v))
		return dflt;
	problem = gd_json_int(v, key, min, max, &out);
	if (problem)
		gd_spec_error(ord, problem);
	return (int32) out;
}

/*
 * gd_spec_from_json builds a spec from a JSON object with insert()'s
 * argument names as keys (insert_many, spawn), raising an error that names
 * the position and the field.  A key that is absent or JSON null takes the
 * argument's default.
 */
void
gd_spec_from_json(JsonbContainer *obj, int ord, TimestampTz now, InsertSpec *spec)
{
	JsonbValue *v;
	char	   *problem;
	int			scope_mask = 0;
	bool		scope_given = false;
	bool		has_run_at = false;
	TimestampTz run_at = 0;
	Interval	delay;
	bool		has_delay = false;

	spec_defaults(spec, now);
	problem = gd_json_unknown_key(obj, spec_keys);
	if (problem)
		gd_spec_error(ord, problem);

	v = gd_json_field(obj, "fsm");
	if (v == NULL)
		gd_spec_error(ord, "\"fsm\" is required");
	if ((problem = gd_json_name(v, "fsm", &spec->fsm)) != NULL)
		gd_spec_error(ord, problem);
	if ((v = gd_json_field(obj, "state")) != NULL && !gd_json_is_null(v) &&
		(problem = gd_json_object(v, "state", &spec->state)) != NULL)
		gd_spec_error(ord, problem);
	spec->step = spec_json_name(obj, "step", ord, spec->step);
	spec->queue = spec_json_name(obj, "queue", ord, spec->queue);
	spec->priority = spec_json_int(obj, "priority", ord, 0, PG_INT16_MIN, PG_INT16_MAX);
	if ((v = gd_json_field(obj, "run_at")) != NULL && !gd_json_is_null(v))
	{
		run_at = spec_timestamp(v, "run_at", ord);
		has_run_at = true;
	}
	if ((v = gd_json_field(obj, "delay")) != NULL && !gd_json_is_null(v))
	{
		if ((problem = gd_json_duration(v, "delay", &delay)) != NULL)
			gd_spec_error(ord, problem);
		has_delay = true;
	}
	if (has_run_at && has_delay)
		gd_spec_error(ord, "\"run_at\" and \"delay\" cannot both be given");
	spec->correlation_key = spec_json_name(obj, "correlation_key", ord, NULL);
	if ((v = gd_json_field(obj, "correlation_scope")) != NULL && !gd_json_is_null(v))
	{
		uint32		i;

		if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
			gd_spec_error(ord, "\"correlation_scope\" must be an array of statuses");
		for (i = 0; i < JsonContainerSize(v->val.binary.data); i++)
		{
			JsonbValue *e = getIthJsonbValueFromContainer(v->val.binary.data, i);
			int			bit = 0;

			if (e->type == jbvString)
				bit = status_bit(e->val.string.val, e->val.string.len);
			if (bit == 0)
				gd_spec_error(ord, "\"correlation_scope\" must contain only status names");
			scope_mask |= bit;
		}
		if ((problem = scope_problem(scope_mask)) != NULL)
			gd_spec_error(ord, problem);
		scope_given = true;
	}
	spec->concurrency_key = spec_json_name(obj, "concurrency_key", ord, NULL);
	spec->rate_limit = spec_json_name(obj, "rate_limit", ord, NULL);
	if ((v = gd_json_field(obj, "weight")) != NULL && !gd_json_is_null(v) &&
		(problem = gd_json_positive_float(v, "weight", &spec->weight)) != NULL)
		gd_spec_error(ord, problem);
	spec->max_attempts = spec_json_int(obj, "max_attempts", ord, 20, 1, PG_INT32_MAX);
	spec->max_steps = spec_json_int(obj, "max_steps", ord, 0, 1, PG_INT32_MAX);
	if ((v = gd_json_field(obj, "metadata")) != NULL && !gd_json_is_null(v) &&
		(problem = gd_json_object(v, "metadata", &spec->metadata)) != NULL)
		gd_spec_error(ord, problem);
	spec->fsm_version = spec_json_int(obj, "fsm_version", ord, 1, PG_INT32_MIN, PG_INT32_MAX);
	if ((v = gd_json_field(obj, "history")) != NULL && !gd_json_is_null(v))
	{
		bool		on;

		if ((problem = gd_json_bool(v, "history", &on)) != NULL)
			gd_spec_error(ord, problem);
		spec->history = on ? 1 : 0;
	}

	if ((problem = spec_problem(spec)) != NULL)
		gd_spec_error(ord, problem);
	spec_finish(spec, scope_given, scope_mask, now, has_run_at, run_at,
				has_delay ? &delay : NULL);
}
