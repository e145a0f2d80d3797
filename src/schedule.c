/*-------------------------------------------------------------------------
 *
 * schedule.c
 *		Recurring schedules: schedule(), unschedule(), cron_next() and the
 *		sweep that fires due ticks (run by the maintenance worker and
 *		run_maintenance()).
 *
 *		A schedule is a row of gen_durable.schedules: a cron expression in
 *		a time zone (cron.c), the insert spec of the instance each tick
 *		creates, the policy for missed ticks and next_at, its next tick.
 *		The sweep locks the due schedules FOR UPDATE SKIP LOCKED, creates
 *		one instance per tick to fire and moves next_at past them, in one
 *		transaction, so two concurrent rounds never fire a tick twice: the
 *		second skips the locked schedule, and once the first commits the
 *		tick is no longer due.  Each tick's instance also carries the
 *		correlation key "<name>@<tick in UTC>", occupied in every status,
 *		so a tick fires at most once even across a schedule redefined by
 *		hand.  Missed ticks (the server or the worker was down):
 *		- skip: only the latest missed tick fires, once;
 *		- catch_up: every missed tick fires, oldest first, up to
 *		  GD_SCHEDULE_CATCH_UP per schedule and round (the rest the next
 *		  round).
 *		The statements of a round do not grow with the number of ticks.
 *
 * IDENTIFICATION
 *		src/schedule.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "aftercommit.h"
#include "args.h"
#include "cron.h"
#include "gen_durable.h"
#include "insert.h"
#include "insert_spec.h"
#include "schedule.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_schedule);
PG_FUNCTION_INFO_V1(gen_durable_unschedule);
PG_FUNCTION_INFO_V1(gen_durable_cron_next);

/* the most schedules one round fires, and ticks one schedule catches up */
#define GD_SCHEDULE_BATCH		100
#define GD_SCHEDULE_CATCH_UP	100

/* a tick's instance holds its key in every status: it fires once */
#define GD_EVERY_STATUS \
	"runnable,executing,awaiting_signal,awaiting_children,done,failed,cancelled"

/* the spec of a tick's instance, from schedule()'s arguments */
static GdPlan spec_plan = {
	"SELECT pg_catalog.jsonb_build_object('fsm', $1, 'state', $2, 'queue', $3, 'step', $4) || $5",
	5,
	{TEXTOID, JSONBOID, TEXTOID, TEXTOID, JSONBOID}
};

/*
 * A redefinition that keeps the expression and the zone keeps next_at, so
 * that an application declaring its schedules at every start never drops
 * a tick that is due but not fired yet.
 */
static GdPlan upsert_plan = {
	"INSERT INTO gen_durable.schedules AS s"
	"       (name, cron, time_zone, spec, missed, next_at, created_at, updated_at)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $7)"
	" ON CONFLICT (name) DO UPDATE"
	"   SET spec = EXCLUDED.spec, missed = EXCLUDED.missed, updated_at = EXCLUDED.updated_at,"
	"       next_at = CASE WHEN s.cron = EXCLUDED.cron AND s.time_zone = EXCLUDED.time_zone"
	"                      THEN s.next_at ELSE EXCLUDED.next_at END,"
	"       cron = EXCLUDED.cron, time_zone = EXCLUDED.time_zone"
	" RETURNING next_at",
	7,
	{TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
};

static GdPlan delete_plan = {
	"DELETE FROM gen_durable.schedules WHERE name = $1",
	1,
	{TEXTOID}
};

static GdPlan due_plan = {
	"SELECT name, cron, time_zone, spec, missed = 'catch_up', next_at"
	"  FROM gen_durable.schedules WHERE next_at <= $1"
	" ORDER BY name LIMIT $2 FOR UPDATE SKIP LOCKED",
	2,
	{TIMESTAMPTZOID, INT4OID},
	NULL, true
};

static GdPlan advance_plan = {
	"UPDATE gen_durable.schedules s"
	"   SET next_at = u.next_at, last_tick = u.last_tick, updated_at = $4"
	"  FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::timestamptz[]),"
	"                  pg_catalog.unnest($3::timestamptz[])) AS u(name, next_at, last_tick)"
	" WHERE s.name = u.name",
	4,
	{TEXTARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZOID},
	NULL, true
};

static GdPlan earliest_plan = {
	"SELECT min(next_at) FROM gen_durable.schedules",
	0,
	{InvalidOid},
	NULL, true
};

/* the options a schedule's instance may not take: its arguments set them */
static const char *const reserved_options[] = {
	"fsm", "state", "queue", "step", "correlation_key", "correlation_scope", "run_at",
	"delay", NULL
};

/*
 * arg_cron parses a cron expression argument.
 */
static void
arg_cron(FunctionCallInfo fcinfo, int argno, GdCron *cron, char **text)
{
	char	   *problem;

	*text = gd_arg_name(fcinfo, argno, "cron", true);
	if ((problem = gd_cron_parse(*text, cron)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"cron\" is not a cron expression: %s", problem),
				 errhint("Five fields, minute hour day-of-month month day-of-week, such as '*/5 * * * *' or '0 9 * * mon-fri', or a shortcut such as '@daily'.")));
}

/*
 * arg_zone reads a time zone argument.
 */
static pg_tz *
arg_zone(FunctionCallInfo fcinfo, int argno, char **name)
{
	pg_tz	   *zone;

	*name = gd_arg_name(fcinfo, argno, "time_zone", true);
	if ((zone = pg_tzset(*name)) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"time_zone\" names no time zone: \"%s\"",
						gd_clip(*name, strlen(*name), 64)),
				 errhint("Use a name of pg_timezone_names, such as 'UTC' or 'Europe/Paris'.")));
	return zone;
}

/*
 * first_tick returns the first tick after `after`, or raises when the
 * expression never fires.
 */
static TimestampTz
first_tick(GdCron *cron, pg_tz *zone, TimestampTz after)
{
	TimestampTz next;

	if (!gd_cron_next(cron, zone, after, &next))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"cron\" never fires: no tick within 8 years"),
				 errhint("Check the day of month against the month, such as '0 0 30 2 *'.")));
	return next;
}

/* a spec to validate, for gd_catch_bad_input */
typedef struct SpecCheck
{
	Jsonb	   *spec;
	TimestampTz now;
} SpecCheck;

/*
 * check_spec parses a tick's spec the way the sweep will.
 */
static void
check_spec(void *arg)
{
	SpecCheck  *c = (SpecCheck *) arg;
	InsertSpec	spec;

	gd_spec_from_json(&c->spec->root, 0, c->now, &spec);
}

/*
 * gen_durable_schedule implements gen_durable.schedule(name, cron, fsm,
 * state, queue, step, time_zone, missed, options): creates or redefines a
 * schedule and returns its next tick.
 */
Datum
gen_durable_schedule(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	char	   *name = gd_arg_name(fcinfo, 0, "name", true);
	char	   *cron_text;
	char	   *zone_name;
	char	   *missed;
	char	   *problem;
	GdCron		cron;
	pg_tz	   *zone;
	Jsonb	   *options;
	SpecCheck	check;
	Datum		values[7];
	char		nulls[7];
	const char *const *k;
	bool		isnull;
	TimestampTz next;

	arg_cron(fcinfo, 1, &cron, &cron_text);
	zone = arg_zone(fcinfo, 6, &zone_name);
	missed = gd_arg_name(fcinfo, 7, "missed", true);
	if (strcmp(missed, "skip") != 0 && strcmp(missed, "catch_up") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"missed\" must be 'skip' or 'catch_up'"),
				 errhint("'skip' fires only the latest missed tick, 'catch_up' every one.")));
	options = gd_arg_jsonb(fcinfo, 8, "options", "{}");
	if (!JB_ROOT_IS_OBJECT(options) || JB_ROOT_IS_SCALAR(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"options\" must be a JSON object"),
				 errhint("Pass insert options such as '{\"priority\": 1, \"max_attempts\": 3}'.")));
	for (k = reserved_options; *k != NULL; k++)
		if (gd_json_field(&options->root, *k) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"options\" must not set \"%s\"", *k),
					 errhint("fsm, state, queue and step are arguments of schedule; each tick's instance gets its correlation key and due time from the schedule.")));
	next = first_tick(&cron, zone, now);

	gd_connect();
	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(gd_arg_name(fcinfo, 2, "fsm", true));
	values[1] = PointerGetDatum(gd_arg_jsonb(fcinfo, 3, "state", "{}"));
	values[2] = CStringGetTextDatum(gd_arg_name(fcinfo, 4, "queue", true));
	values[3] = CStringGetTextDatum(gd_arg_name(fcinfo, 5, "step", true));
	values[4] = PointerGetDatum(options);
	gd_execute(&spec_plan, values, nulls, SPI_OK_SELECT);
	check.spec = DatumGetJsonbP(gd_result_copy(0, 1, &isnull));
	check.now = now;
	if ((problem = gd_catch_bad_input(check_spec, &check)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the instance of schedule \"%s\" is not valid: %s",
						gd_clip(name, strlen(name), 64), problem),
				 errhint("fsm, state, queue, step and options make an insert spec; see insert_many.")));

	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(cron_text);
	values[2] = CStringGetTextDatum(zone_name);
	values[3] = PointerGetDatum(check.spec);
	values[4] = CStringGetTextDatum(missed);
	values[5] = TimestampTzGetDatum(next);
	values[6] = TimestampTzGetDatum(now);
	gd_execute(&upsert_plan, values, nulls, SPI_OK_INSERT_RETURNING);
	next = DatumGetTimestampTz(gd_result_datum(0, 1, &isnull));
	gd_deadline(next);
	gd_finish();
	PG_RETURN_TIMESTAMPTZ(next);
}

/*
 * gen_durable_unschedule implements gen_durable.unschedule(name): true when
 * there was such a schedule.  Instances it created are left alone.
 */
Datum
gen_durable_unschedule(PG_FUNCTION_ARGS)
{
	Datum		values[1];
	int			rows;

	values[0] = CStringGetTextDatum(gd_arg_name(fcinfo, 0, "name", true));
	gd_connect();
	rows = gd_execute(&delete_plan, values, NULL, SPI_OK_DELETE);
	gd_finish();
	PG_RETURN_BOOL(rows > 0);
}

/*
 * gen_durable_cron_next implements gen_durable.cron_next(cron, after,
 * time_zone): the first tick after `after`, NULL when it never fires.
 */
Datum
gen_durable_cron_next(PG_FUNCTION_ARGS)
{
	GdCron		cron;
	char	   *text;
	char	   *zone_name;
	pg_tz	   *zone;
	TimestampTz next;

	arg_cron(fcinfo, 0, &cron, &text);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"after\" must not be NULL"),
				 errhint("Pass an instant, such as now().")));
	zone = arg_zone(fcinfo, 2, &zone_name);
	if (!gd_cron_next(&cron, zone, PG_GETARG_TIMESTAMPTZ(1), &next))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(next);
}

/*
 * latest_tick finds the latest tick at or before now, from `from` (a tick
 * that is due) on.  The search looks back from now through growing
 * windows, so that it takes a few steps however long the downtime was.
 */
static TimestampTz
latest_tick(GdCron *cron, pg_tz *zone, TimestampTz from, TimestampTz now)
{
	static const int64 windows[] = {
		USECS_PER_HOUR, USECS_PER_DAY, 32 * USECS_PER_DAY, 400 * USECS_PER_DAY
	};
	TimestampTz latest = from;
	TimestampTz t;
	int			w;

	for (w = 0; w < lengthof(windows); w++)
	{
		TimestampTz start = Max(from, now - windows[w]);

		if (gd_cron_next(cron, zone, start, &t) && t <= now)
		{
			latest = Max(latest, t);
			break;
		}
	}
	while (gd_cron_next(cron, zone, latest, &t) && t <= now)
		latest = t;
	return latest;
}

/*
 * tick_key is the correlation key of a tick's instance: the schedule's
 * name and the tick in UTC, to the minute.
 */
static char *
tick_key(const char *name, TimestampTz tick, char **tick_text)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (timestamp2tm(tick, NULL, &tm, &fsec, NULL, NULL) != 0)
		elog(ERROR, "schedule \"%s\": tick out of range", name);
	*tick_text = psprintf("%04d-%02d-%02dT%02d:%02dZ", tm.tm_year, tm.tm_mon, tm.tm_mday,
						  tm.tm_hour, tm.tm_min);
	return psprintf("%s@%s", name, *tick_text);
}

/*
 * tick_spec makes the insert spec of one tick's instance: the schedule's
 * spec, the tick's correlation key, and {"schedule", "tick"} added to its
 * metadata.
 */
static void
tick_spec(Jsonb *spec, const char *name, TimestampTz tick, TimestampTz now,
		  InsertSpec *out)
{
	StringInfoData meta;
	char	   *tick_text;
	Jsonb	   *added;

	gd_spec_from_json(&spec->root, 0, now, out);
	out->correlation_key = tick_key(name, tick, &tick_text);
	out->scope = GD_EVERY_STATUS;
	initStringInfo(&meta);
	appendStringInfoString(&meta, "{\"schedule\": ");
	escape_json(&meta, name);
	appendStringInfo(&meta, ", \"tick\": \"%s\"}", tick_text);
	added = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(meta.data)));
	out->metadata = out->metadata == NULL ? added
		: DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(out->metadata),
											 JsonbPGetDatum(added)));
}

/*
 * gd_sweep_schedules fires the due ticks of due schedules (see the file
 * header) and returns how many instances it created; *earliest gets the
 * earliest next tick of any schedule (0 = none), for the worker's sleep.
 */
int64
gd_sweep_schedules(TimestampTz now, TimestampTz *earliest)
{
	Datum		values[4];
	InsertSpec *specs;
	InsertResult result;
	Datum	   *names;
	Datum	   *nexts;
	Datum	   *lasts;
	int			nspecs = 0;
	int			rows;
	int			r;
	int			i;
	int64		created = 0;
	bool		isnull;
	Datum		d;

	values[0] = TimestampTzGetDatum(now);
	values[1] = Int32GetDatum(GD_SCHEDULE_BATCH);
	rows = gd_execute(&due_plan, values, NULL, SPI_OK_SELECT);
	specs = palloc(sizeof(InsertSpec) * Max(rows * GD_SCHEDULE_CATCH_UP, 1));
	names = palloc(sizeof(Datum) * Max(rows, 1));
	nexts = palloc(sizeof(Datum) * Max(rows, 1));
	lasts = palloc(sizeof(Datum) * Max(rows, 1));
	for (r = 0; r < rows; r++)
	{
		char	   *name = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);
		char	   *cron_text = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2);
		char	   *zone_name = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 3);
		Jsonb	   *spec = DatumGetJsonbP(gd_result_datum(r, 4, &isnull));
		bool		catch_up = DatumGetBool(gd_result_datum(r, 5, &isnull));
		TimestampTz tick = DatumGetTimestampTz(gd_result_datum(r, 6, &isnull));
		TimestampTz last = tick;
		GdCron		cron;
		pg_tz	   *zone = pg_tzset(zone_name);
		char	   *problem = gd_cron_parse(cron_text, &cron);

		if (problem != NULL || zone == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("schedule \"%s\" cannot be read: %s", name,
							problem ? problem : "its time zone is unknown"),
					 errhint("Define it again with gen_durable.schedule.")));
		if (!catch_up)
			tick = latest_tick(&cron, zone, tick, now);
		for (i = 0; i < GD_SCHEDULE_CATCH_UP && tick <= now; i++)
		{
			tick_spec(spec, name, tick, now, &specs[nspecs++]);
			last = tick;
			if (!gd_cron_next(&cron, zone, tick, &tick))
				tick = DT_NOEND;	/* it never fires again */
		}
		names[r] = CStringGetTextDatum(name);
		nexts[r] = TimestampTzGetDatum(tick);
		lasts[r] = TimestampTzGetDatum(last);
	}
	if (nspecs > 0)
	{
		gd_insert_specs(specs, nspecs, now, &result);
		for (i = 0; i < nspecs; i++)
			created += result.created[i] ? 1 : 0;
	}
	if (rows > 0)
	{
		values[0] = PointerGetDatum(gd_array(names, NULL, rows, TEXTOID));
		values[1] = PointerGetDatum(gd_array(nexts, NULL, rows, TIMESTAMPTZOID));
		values[2] = PointerGetDatum(gd_array(lasts, NULL, rows, TIMESTAMPTZOID));
		values[3] = TimestampTzGetDatum(now);
		gd_execute(&advance_plan, values, NULL, SPI_OK_UPDATE);
	}
	gd_execute(&earliest_plan, NULL, NULL, SPI_OK_SELECT);
	d = gd_result_datum(0, 1, &isnull);
	*earliest = isnull ? 0 : DatumGetTimestampTz(d);
	return created;
}
