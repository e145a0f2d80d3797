/*-------------------------------------------------------------------------
 *
 * insert.c
 *		insert() and insert_many(): creating instances.
 *
 *		Both build InsertSpecs, validate them completely before any
 *		statement runs, and write with one INSERT ... ON CONFLICT on the
 *		correlation arbiter (contract §3, D4, D5).  insert_many inserts its
 *		whole batch with one statement in correlation_key order (I-21), so
 *		concurrent batches meet the arbiter in one global order and cannot
 *		deadlock.  A duplicate writes nothing: insert() returns NULL,
 *		insert_many() returns the occupying id with created = false;
 *		insert(on_conflict => 'replace') instead gives a runnable occupant
 *		the new state and due time (debounce).
 *
 * IDENTIFICATION
 *		src/insert.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "aftercommit.h"
#include "args.h"
#include "gen_durable.h"
#include "insert.h"
#include "limit_policy.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_insert);
PG_FUNCTION_INFO_V1(gen_durable_insert_many);

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
 * every column an insert writes, in the order of the parameters below;
 * history (0.6.0) only when asked for, so that inserts keep working on a
 * schema older than the library until ALTER EXTENSION UPDATE
 */
#define INSERT_COLUMNS \
	"fsm, fsm_version, step, state, queue, priority, eligible_at, " \
	"correlation_key, correlation_scope, concurrency_key, rate_limit, " \
	"weight, max_attempts, max_steps, metadata, inserted_at, updated_at"

#define INSERT_CONFLICT \
	" ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING"

/* insert()'s values of INSERT_COLUMNS, from its first 16 parameters */
#define INSERT_VALUES \
	"$1, $2, $3, $4, $5, $6::int2, $7, $8, " \
	"pg_catalog.string_to_array($9, ',')::gen_durable.status[], " \
	"$10, $11, $12, $13, $14, $15, $16, $16"
#define INSERT_PARAM_TYPES \
	{TEXTOID, INT4OID, TEXTOID, JSONBOID, TEXTOID, INT4OID, TIMESTAMPTZOID, \
	 TEXTOID, TEXTOID, TEXTOID, TEXTOID, FLOAT8OID, INT4OID, INT4OID, JSONBOID, \
	 TIMESTAMPTZOID, BOOLOID}

/* insert() as defined before 0.6.0 (no history argument, no column) */
static GdPlan insert_before_060_plan = {
	"INSERT INTO gen_durable.instances (" INSERT_COLUMNS ") VALUES (" INSERT_VALUES ")"
	INSERT_CONFLICT " RETURNING id",
	16,
	INSERT_PARAM_TYPES
};

/* insert(): $17 is history (NULL: as the queue is set) */
static GdPlan insert_plan = {
	"INSERT INTO gen_durable.instances (" INSERT_COLUMNS ", history)"
	" VALUES (" INSERT_VALUES ", $17)"
	INSERT_CONFLICT " RETURNING id",
	17,
	INSERT_PARAM_TYPES
};

/*
 * insert(on_conflict => 'replace'): debounce.  A runnable occupant of the
 * correlation key takes the new state and due time instead; an occupant in
 * any other status is left alone.  The id is drawn first so that the
 * result tells a created row from a replaced one.  ON CONFLICT DO UPDATE
 * locks the occupant and judges its latest version, so a concurrent claim
 * of it wins: once it is executing it is not replaced.
 */
static GdPlan insert_replace_plan = {
	"WITH n AS (SELECT pg_catalog.nextval('gen_durable.instances_id_seq') AS id) "
	"INSERT INTO gen_durable.instances AS i (id, " INSERT_COLUMNS ", history)"
	" OVERRIDING SYSTEM VALUE SELECT n.id, " INSERT_VALUES ", $17 FROM n"
	" ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL"
	" DO UPDATE SET state = EXCLUDED.state, eligible_at = EXCLUDED.eligible_at,"
	"               updated_at = EXCLUDED.updated_at"
	"         WHERE i.status = 'runnable'"
	" RETURNING i.id, i.id = (SELECT id FROM n) AS created, i.queue, i.eligible_at",
	17,
	INSERT_PARAM_TYPES
};

/* ids for a batch, drawn up front so that each input position keeps its id */
static GdPlan draw_ids_plan = {
	"SELECT pg_catalog.nextval('gen_durable.instances_id_seq')"
	"  FROM pg_catalog.generate_series(1, $1)",
	1,
	{INT4OID},
	NULL, true
};

/*
 * One statement for a whole batch, inserting in correlation_key order
 * (I-21); it returns the ids that were created, the rest were duplicates.
 * The history column is written (from $20) only by the variant for a
 * batch in which some spec asks for it.
 */
#define INSERT_MANY_SQL(history_column) \
	"INSERT INTO gen_durable.instances (id, " INSERT_COLUMNS "," \
	"  parent_id, child_index, parent_round" history_column ") OVERRIDING SYSTEM VALUE" \
	"  SELECT id, fsm, fsm_version, step, state, queue, priority::int2, eligible_at," \
	"         correlation_key, pg_catalog.string_to_array(scope, ',')::gen_durable.status[]," \
	"         concurrency_key, rate_limit, weight, max_attempts, max_steps, metadata, $21, $21," \
	"         parent_id, child_index, parent_round" history_column \
	"    FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::text[])," \
	"                    pg_catalog.unnest($3::int4[]), pg_catalog.unnest($4::text[])," \
	"                    pg_catalog.unnest($5::jsonb[]), pg_catalog.unnest($6::text[])," \
	"                    pg_catalog.unnest($7::int4[]), pg_catalog.unnest($8::timestamptz[])," \
	"                    pg_catalog.unnest($9::text[]), pg_catalog.unnest($10::text[])," \
	"                    pg_catalog.unnest($11::text[]), pg_catalog.unnest($12::text[])," \
	"                    pg_catalog.unnest($13::float8[]), pg_catalog.unnest($14::int4[])," \
	"                    pg_catalog.unnest($15::int4[]), pg_catalog.unnest($16::jsonb[])," \
	"                    pg_catalog.unnest($17::int8[]), pg_catalog.unnest($18::int4[])," \
	"                    pg_catalog.unnest($19::int4[]), pg_catalog.unnest($20::bool[]))" \
	"      AS s(id, fsm, fsm_version, step, state, queue, priority, eligible_at," \
	"           correlation_key, scope, concurrency_key, rate_limit, weight," \
	"           max_attempts, max_steps, metadata, parent_id, child_index, parent_round," \
	"           history)" \
	"   ORDER BY correlation_key, id" \
	INSERT_CONFLICT \
	" RETURNING id"
#define INSERT_MANY_PARAM_TYPES \
	{INT8ARRAYOID, TEXTARRAYOID, INT4ARRAYOID, TEXTARRAYOID, JSONBARRAYOID, \
	 TEXTARRAYOID, INT4ARRAYOID, TIMESTAMPTZARRAYOID, TEXTARRAYOID, \
	 TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, FLOAT8ARRAYOID, INT4ARRAYOID, \
	 INT4ARRAYOID, JSONBARRAYOID, INT8ARRAYOID, INT4ARRAYOID, INT4ARRAYOID, \
	 BOOLARRAYOID, TIMESTAMPTZOID}

static GdPlan insert_many_plan = {
	INSERT_MANY_SQL(""), 21, INSERT_MANY_PARAM_TYPES, NULL, true
};

static GdPlan insert_many_history_plan = {
	INSERT_MANY_SQL(", history"), 21, INSERT_MANY_PARAM_TYPES, NULL, true
};

/* the occupants of keys whose duplicates had no winner inside the batch */
static GdPlan resolve_plan = {
	"SELECT correlation_guard, id FROM gen_durable.instances"
	" WHERE correlation_guard = ANY ($1)",
	1,
	{TEXTARRAYOID}
};

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
 * spec_from_args builds a spec from insert()'s arguments, raising an error
 * that names the first bad argument.
 */
static void
spec_from_args(FunctionCallInfo fcinfo, TimestampTz now, InsertSpec *spec)
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
 * spec_error raises the error for a bad field of an insert spec.
 */
static void
spec_error(int ord, const char *problem)
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
		spec_error(ord, psprintf("\"%s\" must be a timestamp string", key));
	if ((problem = gd_catch_bad_input(parse_timestamp, &t)) != NULL)
		spec_error(ord, psprintf("\"%s\": %s", key, problem));
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
		spec_error(ord, problem);
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
		spec_error(ord, problem);
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
		spec_error(ord, problem);

	v = gd_json_field(obj, "fsm");
	if (v == NULL)
		spec_error(ord, "\"fsm\" is required");
	if ((problem = gd_json_name(v, "fsm", &spec->fsm)) != NULL)
		spec_error(ord, problem);
	if ((v = gd_json_field(obj, "state")) != NULL && !gd_json_is_null(v) &&
		(problem = gd_json_object(v, "state", &spec->state)) != NULL)
		spec_error(ord, problem);
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
			spec_error(ord, problem);
		has_delay = true;
	}
	if (has_run_at && has_delay)
		spec_error(ord, "\"run_at\" and \"delay\" cannot both be given");
	spec->correlation_key = spec_json_name(obj, "correlation_key", ord, NULL);
	if ((v = gd_json_field(obj, "correlation_scope")) != NULL && !gd_json_is_null(v))
	{
		uint32		i;

		if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
			spec_error(ord, "\"correlation_scope\" must be an array of statuses");
		for (i = 0; i < JsonContainerSize(v->val.binary.data); i++)
		{
			JsonbValue *e = getIthJsonbValueFromContainer(v->val.binary.data, i);
			int			bit = 0;

			if (e->type == jbvString)
				bit = status_bit(e->val.string.val, e->val.string.len);
			if (bit == 0)
				spec_error(ord, "\"correlation_scope\" must contain only status names");
			scope_mask |= bit;
		}
		if ((problem = scope_problem(scope_mask)) != NULL)
			spec_error(ord, problem);
		scope_given = true;
	}
	spec->concurrency_key = spec_json_name(obj, "concurrency_key", ord, NULL);
	spec->rate_limit = spec_json_name(obj, "rate_limit", ord, NULL);
	if ((v = gd_json_field(obj, "weight")) != NULL && !gd_json_is_null(v) &&
		(problem = gd_json_positive_float(v, "weight", &spec->weight)) != NULL)
		spec_error(ord, problem);
	spec->max_attempts = spec_json_int(obj, "max_attempts", ord, 20, 1, PG_INT32_MAX);
	spec->max_steps = spec_json_int(obj, "max_steps", ord, 0, 1, PG_INT32_MAX);
	if ((v = gd_json_field(obj, "metadata")) != NULL && !gd_json_is_null(v) &&
		(problem = gd_json_object(v, "metadata", &spec->metadata)) != NULL)
		spec_error(ord, problem);
	spec->fsm_version = spec_json_int(obj, "fsm_version", ord, 1, PG_INT32_MIN, PG_INT32_MAX);
	if ((v = gd_json_field(obj, "history")) != NULL && !gd_json_is_null(v))
	{
		bool		on;

		if ((problem = gd_json_bool(v, "history", &on)) != NULL)
			spec_error(ord, problem);
		spec->history = on ? 1 : 0;
	}

	if ((problem = spec_problem(spec)) != NULL)
		spec_error(ord, problem);
	spec_finish(spec, scope_given, scope_mask, now, has_run_at, run_at,
				has_delay ? &delay : NULL);
}

/*
 * text_or_null turns an optional C string into a Datum and its null flag.
 */
static Datum
text_or_null(const char *s, char *null)
{
	*null = s ? ' ' : 'n';
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

/*
 * note_created records what a new instance means after commit: a queue
 * with work now, or a due time for the maintenance worker.
 */
static void
note_created(InsertSpec *spec, TimestampTz now)
{
	gd_count(GD_STAT_INSERTED, 1);
	if (spec->eligible_at <= now)
		gd_queue_runnable(spec->queue);
	else
		gd_deadline(spec->eligible_at);
}

/*
 * warn_rate_limits warns about the created instances whose rate limit is
 * not configured or cannot grant their weight (limit_policy.c).
 */
static void
warn_rate_limits(InsertSpec *specs, int n, bool *created)
{
	Datum	   *names = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *weights = palloc(sizeof(Datum) * Max(n, 1));
	int			m = 0;
	int			i;

	for (i = 0; i < n; i++)
		if (created[i] && specs[i].rate_limit != NULL)
		{
			names[m] = CStringGetTextDatum(specs[i].rate_limit);
			weights[m++] = Float8GetDatum(specs[i].weight);
		}
	gd_warn_rate_limits(names, weights, m);
}

/*
 * replace_wanted reads insert's on_conflict argument: true for 'replace'
 * (debounce), false for 'nothing' (the default).  Replacing needs a key
 * that conflicts: a correlation key, unique in some statuses.
 */
static bool
replace_wanted(FunctionCallInfo fcinfo, int argno, InsertSpec *spec)
{
	char	   *mode;

	if (PG_NARGS() <= argno)
		return false;			/* insert() as defined before 0.6.0 */
	mode = gd_arg_name(fcinfo, argno, "on_conflict", true);

	if (strcmp(mode, "nothing") == 0)
		return false;
	if (strcmp(mode, "replace") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"on_conflict\" must be 'nothing' or 'replace', not \"%s\"",
						gd_clip(mode, strlen(mode), 64)),
				 errhint("'replace' gives a runnable occupant of the correlation key the new state and due time.")));
	if (spec->correlation_key == NULL || spec->scope[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"on_conflict\" is 'replace' but nothing can conflict"),
				 errhint("Pass a correlation_key (with a scope that is not empty): it names the instance to replace.")));
	return true;
}

/*
 * note_replaced records what the commit of a replaced occupant means: its
 * queue has work now, or a due time for the maintenance worker.
 */
static void
note_replaced(char *queue, TimestampTz eligible_at, TimestampTz now)
{
	if (eligible_at <= now)
		gd_queue_runnable(queue);
	else
		gd_deadline(eligible_at);
}

/*
 * gen_durable_insert implements gen_durable.insert(...): the new id, or
 * NULL when a live instance occupies the correlation key.  With
 * on_conflict => 'replace' a runnable occupant takes the new state and due
 * time and its id is returned; an occupant in another status is left
 * alone (NULL).
 */
Datum
gen_durable_insert(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	InsertSpec	spec;
	Datum		values[17];
	char		nulls[17];
	Datum		id = (Datum) 0;
	bool		isnull = true;
	bool		replace;
	bool		created = true;
	bool		unused;

	spec_from_args(fcinfo, now, &spec);
	replace = replace_wanted(fcinfo, 16, &spec);

	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(spec.fsm);
	values[1] = Int32GetDatum(spec.fsm_version);
	values[2] = CStringGetTextDatum(spec.step);
	values[3] = JsonbPGetDatum(spec.state);
	values[4] = CStringGetTextDatum(spec.queue);
	values[5] = Int32GetDatum(spec.priority);
	values[6] = TimestampTzGetDatum(spec.eligible_at);
	values[7] = text_or_null(spec.correlation_key, &nulls[7]);
	values[8] = CStringGetTextDatum(spec.scope);
	values[9] = text_or_null(spec.concurrency_key, &nulls[9]);
	values[10] = text_or_null(spec.rate_limit, &nulls[10]);
	values[11] = Float8GetDatum(spec.weight);
	values[12] = Int32GetDatum(spec.max_attempts);
	values[13] = Int32GetDatum(spec.max_steps);
	nulls[13] = spec.max_steps > 0 ? ' ' : 'n';
	values[14] = spec.metadata ? JsonbPGetDatum(spec.metadata) : (Datum) 0;
	nulls[14] = spec.metadata ? ' ' : 'n';
	values[15] = TimestampTzGetDatum(now);
	values[16] = BoolGetDatum(spec.history == 1);
	nulls[16] = spec.history < 0 ? 'n' : ' ';

	gd_connect();
	if (gd_execute(replace ? &insert_replace_plan
				   : PG_NARGS() > 17 ? &insert_plan : &insert_before_060_plan,
				   values, nulls, SPI_OK_INSERT_RETURNING) == 1)
	{
		id = gd_result_datum(0, 1, &isnull);
		if (replace)
			created = DatumGetBool(gd_result_datum(0, 2, &unused));
	}
	if (isnull)
		gd_count(GD_STAT_DUPLICATES, 1);
	else if (created)
		note_created(&spec, now);
	else
		note_replaced(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3),
					  DatumGetTimestampTz(gd_result_datum(0, 4, &unused)), now);
	if (!isnull && created && spec.rate_limit != NULL)
		gd_warn_rate_limits(&values[10], &values[11], 1);
	gd_finish();

	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(id);
}

/*
 * Parallel arrays of a batch of specs, the parameters of insert_many_plan
 * (and of insert_many_history_plan).
 */
#define SPEC_NCOLS	20

typedef struct SpecColumns
{
	Datum	   *col[SPEC_NCOLS];
	bool	   *null[SPEC_NCOLS];
} SpecColumns;

/*
 * spec_columns_set stores one spec as row i of the parallel arrays.
 */
static void
spec_columns_set(SpecColumns *c, int i, int64 id, InsertSpec *s)
{
	int			k;

	for (k = 0; k < SPEC_NCOLS; k++)
		c->null[k][i] = false;
	c->col[0][i] = Int64GetDatum(id);
	c->col[1][i] = CStringGetTextDatum(s->fsm);
	c->col[2][i] = Int32GetDatum(s->fsm_version);
	c->col[3][i] = CStringGetTextDatum(s->step);
	c->col[4][i] = JsonbPGetDatum(s->state);
	c->col[5][i] = CStringGetTextDatum(s->queue);
	c->col[6][i] = Int32GetDatum(s->priority);
	c->col[7][i] = TimestampTzGetDatum(s->eligible_at);
	c->null[8][i] = s->correlation_key == NULL;
	c->col[8][i] = s->correlation_key ? CStringGetTextDatum(s->correlation_key) : (Datum) 0;
	c->col[9][i] = CStringGetTextDatum(s->scope);
	c->null[10][i] = s->concurrency_key == NULL;
	c->col[10][i] = s->concurrency_key ? CStringGetTextDatum(s->concurrency_key) : (Datum) 0;
	c->null[11][i] = s->rate_limit == NULL;
	c->col[11][i] = s->rate_limit ? CStringGetTextDatum(s->rate_limit) : (Datum) 0;
	c->col[12][i] = Float8GetDatum(s->weight);
	c->col[13][i] = Int32GetDatum(s->max_attempts);
	c->null[14][i] = s->max_steps == 0;
	c->col[14][i] = Int32GetDatum(s->max_steps);
	c->null[15][i] = s->metadata == NULL;
	c->col[15][i] = s->metadata ? JsonbPGetDatum(s->metadata) : (Datum) 0;
	c->null[16][i] = c->null[17][i] = c->null[18][i] = s->parent_id == 0;
	c->col[16][i] = Int64GetDatum(s->parent_id);
	c->col[17][i] = Int32GetDatum(s->child_index);
	c->col[18][i] = Int32GetDatum(s->parent_round);
	c->null[19][i] = s->history < 0;
	c->col[19][i] = BoolGetDatum(s->history == 1);
}

/* element types of the parallel arrays */
static const Oid spec_column_types[SPEC_NCOLS] = {
	INT8OID, TEXTOID, INT4OID, TEXTOID, JSONBOID, TEXTOID, INT4OID,
	TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, FLOAT8OID, INT4OID,
	INT4OID, JSONBOID, INT8OID, INT4OID, INT4OID, BOOLOID
};

/* a keyed spec of a batch, for matching duplicates with their occupants */
typedef struct KeyedOrd
{
	const char *key;
	int			ord;
} KeyedOrd;

/*
 * compare_keyed orders keyed specs by key.
 */
static int
compare_keyed(const void *a, const void *b)
{
	return strcmp(((const KeyedOrd *) a)->key, ((const KeyedOrd *) b)->key);
}

/*
 * compare_int64 orders ids.
 */
static int
compare_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * resolve_duplicates fills the occupying id of every spec that was not
 * created: the spec of the same key that was created in this batch, else
 * the live occupant found by resolve_plan (one statement for all of them).
 * A duplicate whose occupant is already gone keeps a NULL id.
 */
static void
resolve_duplicates(InsertSpec *specs, int n, int64 *ids, bool *created, bool *idnull)
{
	KeyedOrd   *keyed = palloc(sizeof(KeyedOrd) * n);
	Datum	   *orphans = palloc(sizeof(Datum) * n);
	int			nkeyed = 0;
	int			norphans = 0;
	int			i;
	int			j;

	for (i = 0; i < n; i++)
		if (specs[i].correlation_key != NULL && specs[i].scope[0] != '\0')
		{
			keyed[nkeyed].key = specs[i].correlation_key;
			keyed[nkeyed++].ord = i;
		}
	qsort(keyed, nkeyed, sizeof(KeyedOrd), compare_keyed);
	for (i = 0; i < nkeyed; i = j)
	{
		int64		winner = 0;
		int			k;

		for (j = i; j < nkeyed && strcmp(keyed[j].key, keyed[i].key) == 0; j++)
			if (created[keyed[j].ord])
				winner = ids[keyed[j].ord];
		for (k = i; k < j; k++)
			if (!created[keyed[k].ord])
			{
				idnull[keyed[k].ord] = winner == 0;
				ids[keyed[k].ord] = winner;
			}
		if (winner == 0)
			orphans[norphans++] = CStringGetTextDatum(keyed[i].key);
	}
	if (norphans > 0)
	{
		Datum		values[1];
		int			found;
		int			r;

		values[0] = PointerGetDatum(gd_array(orphans, NULL, norphans, TEXTOID));
		found = gd_execute(&resolve_plan, values, NULL, SPI_OK_SELECT);
		for (r = 0; r < found; r++)
		{
			KeyedOrd	probe;
			KeyedOrd   *hit;
			int64		id = gd_result_int64(r, 2);

			/* the group of specs with this key in the sorted array */
			probe.key = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);
			hit = bsearch(&probe, keyed, nkeyed, sizeof(KeyedOrd), compare_keyed);
			if (hit == NULL)
				continue;
			while (hit > keyed && strcmp((hit - 1)->key, probe.key) == 0)
				hit--;
			for (; hit < keyed + nkeyed && strcmp(hit->key, probe.key) == 0; hit++)
				if (!created[hit->ord])
				{
					ids[hit->ord] = id;
					idnull[hit->ord] = false;
				}
		}
	}
}

/*
 * gd_insert_specs inserts a batch of validated specs with at most three
 * statements (draw ids, insert, look up occupants of duplicates) and
 * records what each commit means (note_created).  SPI must be connected;
 * the result arrays live in the current memory context.
 */
void
gd_insert_specs(InsertSpec *specs, int n, TimestampTz now, InsertResult *result)
{
	SpecColumns cols;
	Datum		values[SPEC_NCOLS + 1];
	int64	   *made;
	int			nmade;
	int			i;
	int			k;

	result->ids = palloc(sizeof(int64) * Max(n, 1));
	result->created = palloc(sizeof(bool) * Max(n, 1));
	result->idnull = palloc0(sizeof(bool) * Max(n, 1));
	if (n == 0)
		return;

	values[0] = Int32GetDatum(n);
	if (gd_execute(&draw_ids_plan, values, NULL, SPI_OK_SELECT) != n)
		elog(ERROR, "could not draw %d instance ids", n);
	for (i = 0; i < n; i++)
		result->ids[i] = gd_result_int64(i, 1);

	for (k = 0; k < SPEC_NCOLS; k++)
	{
		cols.col[k] = palloc(sizeof(Datum) * n);
		cols.null[k] = palloc(sizeof(bool) * n);
	}
	for (i = 0; i < n; i++)
		spec_columns_set(&cols, i, result->ids[i], &specs[i]);
	for (k = 0; k < SPEC_NCOLS; k++)
		values[k] = PointerGetDatum(gd_array(cols.col[k], cols.null[k], n,
											 spec_column_types[k]));
	values[SPEC_NCOLS] = TimestampTzGetDatum(now);
	for (i = 0; i < n && specs[i].history < 0; i++)
		;
	nmade = gd_execute(i < n ? &insert_many_history_plan : &insert_many_plan, values, NULL,
					   SPI_OK_INSERT_RETURNING);

	made = palloc(sizeof(int64) * Max(nmade, 1));
	for (i = 0; i < nmade; i++)
		made[i] = gd_result_int64(i, 1);
	qsort(made, nmade, sizeof(int64), compare_int64);
	for (i = 0; i < n; i++)
	{
		result->created[i] = bsearch(&result->ids[i], made, nmade, sizeof(int64),
									 compare_int64) != NULL;
		if (result->created[i])
			note_created(&specs[i], now);
	}
	gd_count(GD_STAT_DUPLICATES, n - nmade);
	warn_rate_limits(specs, n, result->created);
	if (nmade < n)
		resolve_duplicates(specs, n, result->ids, result->created, result->idnull);
}

/*
 * gen_durable_insert_many implements gen_durable.insert_many(specs): one
 * row (ord, id, created) per input spec, in input order.
 */
Datum
gen_durable_insert_many(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = GetCurrentTimestamp();
	Jsonb	   *specs_arg = gd_arg_jsonb(fcinfo, 0, "specs",
									 "[{\"fsm\": \"send_mail\"}]");
	InsertSpec *specs;
	InsertResult result;
	int			n;
	int			i;

	n = gd_json_batch_array(specs_arg, "specs", "insert specs",
							"[{\"fsm\": \"mail\", \"state\": {\"to\": \"a@b\"}}]");
	InitMaterializedSRF(fcinfo, 0);
	if (n == 0)
		return (Datum) 0;

	specs = palloc(sizeof(InsertSpec) * n);
	for (i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(&specs_arg->root, i);

		if (e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
			spec_error(i, "must be a JSON object");
		gd_spec_from_json(e->val.binary.data, i, now, &specs[i]);
	}

	gd_connect();
	gd_insert_specs(specs, n, now, &result);

	/* emit before SPI_finish, which frees what was allocated since gd_connect */
	for (i = 0; i < n; i++)
	{
		Datum		out[3];
		bool		outnull[3] = {false, result.idnull[i], false};

		out[0] = Int32GetDatum(i);
		out[1] = Int64GetDatum(result.ids[i]);
		out[2] = BoolGetDatum(result.created[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	}
	gd_finish();
	return (Datum) 0;
}
