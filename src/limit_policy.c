/*-------------------------------------------------------------------------
 *
 * limit_policy.c
 *		The limiter's policy: set_rate_limit(), set_concurrency_limit(),
 *		drop_limit(), and the warning for rate limits nobody configured.
 *
 *		Policy lives only in gen_durable.limits (D8, A-15): one row per
 *		(kind, name), where a key "name:partition" is limited by name's
 *		policy with a bucket of its own.  A change takes effect in the
 *		transaction that makes it:
 *		- a rate limit's new rate and burst apply at the next admission
 *		  (admit.c refills and caps from the policy); a new shard count
 *		  re-mints every key of the limit with the tokens it had, spread
 *		  over the new shards;
 *		- a gate's change spreads the slots that executing rows hold over its
 *		  shards and rebuilds its buckets from those rows (buckets.c);
 *		- dropping a rate limit drops its buckets (its rows then wait, as
 *		  for any unknown name); dropping a gate makes its keys K=1 keys
 *		  again for new claims, while rows already running under it finish
 *		  under it.
 *		A rate limit that is not configured is accepted at insert and in a
 *		next outcome (configuration may come later) with a WARNING, and
 *		counted; its rows wait without taking a place in a pick (D6).
 *
 * IDENTIFICATION
 *		src/limit_policy.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "aftercommit.h"
#include "args.h"
#include "buckets.h"
#include "gen_durable.h"
#include "limit_policy.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_set_rate_limit);
PG_FUNCTION_INFO_V1(gen_durable_set_concurrency_limit);
PG_FUNCTION_INFO_V1(gen_durable_drop_limit);

/* a rate limit's policy before it changes (its keys re-mint by it), locked */
static GdPlan old_policy_plan = {
	"SELECT rate, capacity, shards FROM gen_durable.limits"
	" WHERE kind = $1 AND name = $2 FOR UPDATE",
	2,
	{TEXTOID, TEXTOID}
};

static GdPlan upsert_plan = {
	"INSERT INTO gen_durable.limits (kind, name, rate, capacity, shards)"
	" VALUES ($1, $2, $3, $4, $5)"
	" ON CONFLICT (kind, name) DO UPDATE"
	"   SET rate = EXCLUDED.rate, capacity = EXCLUDED.capacity, shards = EXCLUDED.shards",
	5,
	{TEXTOID, TEXTOID, FLOAT8OID, FLOAT8OID, INT2OID}
};

/*
 * A rate limit's shard count changed: take every key's tokens now (by the
 * old policy: $2 per-shard burst, $3 per-shard rate; refilled by the clock
 * read once each row is locked) and delete its shards.
 */
static GdPlan rate_take_plan = {
	"WITH l AS ("
	"  SELECT key, available, last_refill FROM gen_durable.buckets"
	"   WHERE kind = 'rate' AND pg_catalog.split_part(key, ':', 1) = $1"
	"   ORDER BY key, shard FOR UPDATE"
	"), t AS ("
	"  SELECT key, pg_catalog.sum(LEAST($2, available"
	"             + GREATEST(0, COALESCE(EXTRACT(epoch FROM"
	"                 pg_catalog.clock_timestamp() - last_refill)::float8, 0)) * $3)) AS total"
	"    FROM l GROUP BY key"
	"), d AS ("
	"  DELETE FROM gen_durable.buckets b USING t WHERE b.kind = 'rate' AND b.key = t.key"
	"  RETURNING 1"
	")"
	"SELECT t.key, t.total, (SELECT pg_catalog.count(*) FROM d) FROM t",
	3,
	{TEXTOID, FLOAT8OID, FLOAT8OID}
};

/* ... and mint them again over the new shards ($3 per-shard burst, $4 shards) */
static GdPlan rate_put_plan = {
	"INSERT INTO gen_durable.buckets (kind, key, shard, capacity, available, last_refill)"
	"SELECT 'rate', t.key, s.shard, $3, LEAST($3, t.total / $4), $5"
	"  FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::float8[]))"
	"       AS t(key, total)"
	"  CROSS JOIN pg_catalog.generate_series(0, $4 - 1) AS s(shard)"
	" ORDER BY t.key, s.shard",
	5,
	{TEXTARRAYOID, FLOAT8ARRAYOID, FLOAT8OID, INT4OID, TIMESTAMPTZOID}
};

/*
 * A gate's executing rows (also those claimed before it existed, which
 * hold no slot yet) spread their slots round-robin over its shards: with
 * at most K holders, no shard then holds more than its share.
 */
static GdPlan restamp_plan = {
	"WITH l AS ("
	"  SELECT id, concurrency_key FROM ONLY gen_durable.instances"
	"   WHERE status = 'executing' AND concurrency_name = $1"
	"   ORDER BY id FOR NO KEY UPDATE"
	"), r AS ("
	"  SELECT id, pg_catalog.row_number() OVER (PARTITION BY concurrency_key ORDER BY id) - 1 AS n"
	"    FROM l"
	")"
	"UPDATE ONLY gen_durable.instances i"
	"   SET concurrency_shard = (r.n % $2)::int2"
	"  FROM r"
	" WHERE i.id = r.id AND i.status = 'executing'"
	"   AND i.concurrency_shard IS DISTINCT FROM (r.n % $2)::int2",
	2,
	{TEXTOID, INT2OID}
};

static GdPlan delete_policy_plan = {
	"DELETE FROM gen_durable.limits WHERE kind = $1 AND name = $2",
	2,
	{TEXTOID, TEXTOID}
};

static GdPlan delete_rate_buckets_plan = {
	"DELETE FROM gen_durable.buckets"
	" WHERE kind = 'rate' AND pg_catalog.split_part(key, ':', 1) = $1",
	1,
	{TEXTOID}
};

/*
 * The rate limits of some instances ($1, with their weights $2) that are
 * not configured, or whose burst is below the weight: per name and
 * problem, how many instances.
 */
static GdPlan rate_problems_plan = {
	"SELECT pg_catalog.split_part(t.n, ':', 1), pg_catalog.count(*), l.name IS NULL"
	"  FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::float8[]))"
	"       AS t(n, w)"
	"  LEFT JOIN gen_durable.limits l"
	"         ON l.kind = 'rate' AND l.name = pg_catalog.split_part(t.n, ':', 1)"
	" WHERE l.name IS NULL OR t.w > l.capacity"
	" GROUP BY 1, 3 ORDER BY 3 DESC, 1",
	2,
	{TEXTARRAYOID, FLOAT8ARRAYOID}
};

/*
 * limit_name reads and checks the name of a limit.
 */
static char *
limit_name(FunctionCallInfo fcinfo, int argno)
{
	char	   *name = gd_arg_name(fcinfo, argno, "name", true);

	if (strchr(name, ':') != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"name\" must not contain \":\""),
				 errhint("A key \"name:partition\" is limited by the limit called name; "
						 "configure the limit by its name alone.")));
	return name;
}

/*
 * limit_shards reads and checks a shard count of at most max.
 */
static int
limit_shards(FunctionCallInfo fcinfo, int argno, int max)
{
	int32		shards;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"shards\" must not be NULL"),
				 errhint("Pass 1 unless many workers contend for one key.")));
	shards = PG_GETARG_INT32(argno);
	if (shards < 1 || shards > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"shards\" must be between 1 and %d, not %d", max, shards),
				 errhint(max < GD_MAX_SHARDS
						 ? "A gate of max slots has at most max shards."
						 : "Use about as many shards as workers that contend for one key.")));
	return shards;
}

/*
 * positive_float reads a float argument that must be finite and > 0 (or
 * >= 0 when zero_ok).
 */
static double
positive_float(FunctionCallInfo fcinfo, int argno, const char *argname, bool zero_ok,
			   const char *hint)
{
	double		v;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be NULL", argname),
				 errhint("%s", hint)));
	v = PG_GETARG_FLOAT8(argno);
	if (isnan(v) || isinf(v) || v < 0 || (!zero_ok && v == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be a finite number %s 0", argname,
						zero_ok ? ">=" : ">"),
				 errhint("%s", hint)));
	return v;
}

/*
 * interval_seconds is the length of a positive interval in seconds (a
 * month counts 30 days).
 */
static double
interval_seconds(Interval *span)
{
	return (double) span->time / USECS_PER_SEC +
		((double) span->month * DAYS_PER_MONTH + span->day) * SECS_PER_DAY;
}

/*
 * remint_rate_keys spreads every key of a rate limit over a new number of
 * shards, keeping the tokens each key has now.
 */
static void
remint_rate_keys(const char *name, double old_rate, double old_burst, int old_shards,
				 double burst, int shards)
{
	Datum		values[5];
	Datum	   *keys;
	Datum	   *totals;
	bool		isnull;
	int			rows;
	int			r;

	values[0] = CStringGetTextDatum(name);
	values[1] = Float8GetDatum(old_burst / old_shards);
	values[2] = Float8GetDatum(old_rate / old_shards);
	rows = gd_execute(&rate_take_plan, values, NULL, SPI_OK_SELECT);
	if (rows == 0)
		return;
	keys = palloc(sizeof(Datum) * rows);
	totals = palloc(sizeof(Datum) * rows);
	for (r = 0; r < rows; r++)
	{
		keys[r] = gd_result_copy(r, 1, &isnull);
		totals[r] = gd_result_datum(r, 2, &isnull);
	}
	values[0] = PointerGetDatum(gd_array(keys, NULL, rows, TEXTOID));
	values[1] = PointerGetDatum(gd_array(totals, NULL, rows, FLOAT8OID));
	values[2] = Float8GetDatum(burst / shards);
	values[3] = Int32GetDatum(shards);
	values[4] = TimestampTzGetDatum(GetCurrentTimestamp());
	gd_execute(&rate_put_plan, values, NULL, SPI_OK_INSERT);
}

/*
 * gen_durable_set_rate_limit implements gen_durable.set_rate_limit(name,
 * allowed, per, burst, shards): a token bucket of `allowed` tokens per
 * `per`, holding at most `burst` (default: allowed), per key.
 */
Datum
gen_durable_set_rate_limit(PG_FUNCTION_ARGS)
{
	char	   *name = limit_name(fcinfo, 0);
	double		allowed = positive_float(fcinfo, 1, "allowed", true,
										 "Pass how many tokens (weight) the limit grants per period.");
	Interval   *per = gd_arg_interval(fcinfo, 2, "per", true);
	double		burst;
	int			shards = limit_shards(fcinfo, 4, GD_MAX_SHARDS);
	double		rate;
	Datum		values[5];
	int			old_shards = 0;
	double		old_rate = 0;
	double		old_burst = 0;

	if (!gd_interval_positive(per))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"per\" must be a positive interval"),
				 errhint("Pass the period of the limit, such as '1 second' or '1 minute'.")));
	rate = allowed / interval_seconds(per);
	burst = PG_ARGISNULL(3) ? allowed
		: positive_float(fcinfo, 3, "burst", false,
						 "Pass the most tokens a key may save up, or NULL for allowed.");
	if (burst <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"burst\" must be given when \"allowed\" is 0"),
				 errhint("A limit of 0 per period grants only its burst, once.")));

	gd_connect();
	values[0] = CStringGetTextDatum("rate");
	values[1] = CStringGetTextDatum(name);
	if (gd_execute(&old_policy_plan, values, NULL, SPI_OK_SELECT) == 1)
	{
		bool		isnull;

		old_rate = DatumGetFloat8(gd_result_datum(0, 1, &isnull));
		old_burst = DatumGetFloat8(gd_result_datum(0, 2, &isnull));
		old_shards = DatumGetInt16(gd_result_datum(0, 3, &isnull));
	}
	values[2] = Float8GetDatum(rate);
	values[3] = Float8GetDatum(burst);
	values[4] = Int16GetDatum((int16) shards);
	gd_execute(&upsert_plan, values, NULL, SPI_OK_INSERT);
	if (old_shards != 0 && old_shards != shards)
		remint_rate_keys(name, old_rate, old_burst, old_shards, burst, shards);
	gd_finish();
	PG_RETURN_VOID();
}

/*
 * gen_durable_set_concurrency_limit implements
 * gen_durable.set_concurrency_limit(name, max, shards): at most max
 * instances execute at once per key of the gate.
 */
Datum
gen_durable_set_concurrency_limit(PG_FUNCTION_ARGS)
{
	char	   *name = limit_name(fcinfo, 0);
	int32		max;
	int			shards;
	Datum		values[5];

	if (PG_ARGISNULL(1) || PG_GETARG_INT32(1) < 1)
		ereport(ERROR,
				(errcode(PG_ARGISNULL(1) ? ERRCODE_NULL_VALUE_NOT_ALLOWED
						 : ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(PG_ARGISNULL(1) ? "argument \"max\" must not be NULL"
						: "argument \"max\" must be at least 1"),
				 errhint("Pass how many instances of one key may execute at once; "
						 "drop_limit('conc', name) removes the gate.")));
	max = PG_GETARG_INT32(1);
	shards = limit_shards(fcinfo, 2, Min(max, GD_MAX_SHARDS));

	gd_connect();
	values[0] = CStringGetTextDatum("conc");
	values[1] = CStringGetTextDatum(name);
	values[2] = (Datum) 0;
	values[3] = Float8GetDatum((double) max);
	values[4] = Int16GetDatum((int16) shards);
	gd_execute(&upsert_plan, values, "  n  ", SPI_OK_INSERT);

	values[0] = CStringGetTextDatum(name);
	values[1] = Int16GetDatum((int16) shards);
	gd_execute(&restamp_plan, values, NULL, SPI_OK_UPDATE);
	gd_reconcile_gate(name);
	gd_finish();
	PG_RETURN_VOID();
}

/*
 * gen_durable_drop_limit implements gen_durable.drop_limit(kind, name):
 * whether there was such a limit.
 */
Datum
gen_durable_drop_limit(PG_FUNCTION_ARGS)
{
	char	   *kind = gd_arg_name(fcinfo, 0, "kind", true);
	char	   *name = limit_name(fcinfo, 1);
	Datum		values[2];
	int			found;

	if (strcmp(kind, "rate") != 0 && strcmp(kind, "conc") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"kind\" must be 'rate' or 'conc', not \"%s\"", kind),
				 errhint("'rate' drops a rate limit, 'conc' a concurrency gate.")));

	gd_connect();
	values[0] = CStringGetTextDatum(kind);
	values[1] = CStringGetTextDatum(name);
	found = gd_execute(&delete_policy_plan, values, NULL, SPI_OK_DELETE);
	values[0] = CStringGetTextDatum(name);
	if (strcmp(kind, "rate") == 0)
		gd_execute(&delete_rate_buckets_plan, values, NULL, SPI_OK_DELETE);
	else
		gd_reconcile_gate(name);
	gd_finish();
	PG_RETURN_BOOL(found > 0);
}

/*
 * warn_rate_problem raises one WARNING for rows [first, first + n) of the
 * last result (one problem: unknown limits, or weights over the burst) and
 * counts their instances.
 */
static void
warn_rate_problem(int first, int n, bool unknown)
{
	int64		instances = 0;
	int			r;
	char	   *name;

	if (n == 0)
		return;
	for (r = first; r < first + n; r++)
		instances += gd_result_int64(r, 2);
	name = SPI_getvalue(SPI_tuptable->vals[first], SPI_tuptable->tupdesc, 1);
	if (unknown)
	{
		gd_count(GD_STAT_UNKNOWN_RATE_LIMIT, instances);
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("rate limit \"%s\" is not configured", name),
				 errdetail("Instances that name a rate limit nobody configured wait until it is "
						   "configured: %lld in this call, naming %d such limits.",
						   (long long) instances, n),
				 errhint("Configure it with gen_durable.set_rate_limit(name, allowed, per).")));
	}
	else
	{
		gd_count(GD_STAT_RATE_WEIGHT_OVER_BURST, instances);
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("a weight exceeds the burst of rate limit \"%s\"", name),
				 errdetail("Instances heavier than their rate limit's burst never run until the "
						   "burst is raised: %lld in this call, on %d such limits.",
						   (long long) instances, n),
				 errhint("Raise the burst with gen_durable.set_rate_limit(..., burst => ...), "
						 "or give these instances a smaller weight.")));
	}
}

/*
 * gd_warn_rate_limits warns about the instances (one text Datum per
 * instance given a rate limit in names, with its weight in weights) whose
 * rate limit is not configured, or whose weight its burst can never grant,
 * and counts them.  SPI must be connected.
 */
void
gd_warn_rate_limits(Datum *names, Datum *weights, int n)
{
	Datum		values[2];
	int			rows;
	int			nunknown = 0;
	bool		isnull;

	if (n == 0)
		return;
	values[0] = PointerGetDatum(gd_array(names, NULL, n, TEXTOID));
	values[1] = PointerGetDatum(gd_array(weights, NULL, n, FLOAT8OID));
	rows = gd_execute(&rate_problems_plan, values, NULL, SPI_OK_SELECT);
	while (nunknown < rows && DatumGetBool(gd_result_datum(nunknown, 3, &isnull)))
		nunknown++;
	warn_rate_problem(0, nunknown, true);
	warn_rate_problem(nunknown, rows - nunknown, false);
}
