/*-------------------------------------------------------------------------
 *
 * insert.c
 *		insert() and insert_many(): creating instances.
 *
 *		Both build InsertSpecs (insert_spec.c), complete and valid before
 *		any statement runs, and write with one INSERT ... ON CONFLICT on the
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

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "aftercommit.h"
#include "args.h"
#include "gen_durable.h"
#include "insert.h"
#include "insert_spec.h"
#include "limit_policy.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_insert);
PG_FUNCTION_INFO_V1(gen_durable_insert_many);

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
	"SELECT correlation_guard, id FROM ONLY gen_durable.instances"
	" WHERE correlation_guard = ANY ($1)",
	1,
	{TEXTARRAYOID}
};

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

	gd_spec_from_args(fcinfo, now, &spec);
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
			gd_spec_error(i, "must be a JSON object");
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
