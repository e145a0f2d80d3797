/*-------------------------------------------------------------------------
 *
 * admit.c
 *		Admission of claimed candidates against rate limits and
 *		concurrency gates (contract D6-D8, §4.2).
 *
 *		pick locks its candidates, asks gd_admit which of them may run, and
 *		flips only those to executing, all in one transaction: denied rows
 *		are never written.  flush asks the same of the steps it continues
 *		inline, and admit() offers it on its own.  One admission is:
 *		1. lock   - for every key the candidates name, enough of its bucket
 *		            rows to cover what they ask, FOR UPDATE SKIP LOCKED:
 *		            shards another pick holds are simply not available to
 *		            this one (I-19); with each key, its policy from
 *		            gen_durable.limits and whether it has bucket rows at all;
 *		2. decide - in C, candidates in claim order: a gated candidate takes
 *		            a slot of the fullest shard of its key; a rate-limited
 *		            one is granted while the cumulative weight of its key
 *		            fits the key's tokens (refilled by the wall clock, D16),
 *		            and once a key refuses one candidate it refuses the rest
 *		            of the batch (within a batch, a heavy head is not
 *		            overtaken; pick.c does not offer a row heavier than its
 *		            key's tokens at all, so across picks it can be).  A gate
 *		            slot is taken only when the rate limit grants too, so no
 *		            slot is wasted on a rate-denied candidate;
 *		3. debit  - one statement: warm gate shards subtract their slots
 *		            from the row they locked; a cold gate key (no rows:
 *		            full, I-16) mints every shard pre-debited, and a racing
 *		            mint merges by subtracting this debit from the winner's
 *		            row; rate shards are written back with what is left
 *		            (proportionally, clamped at 0, A-8) and a cold rate key
 *		            mints its shards.
 *		The CHECK on buckets is the backstop (I-13): an overdraft after a
 *		merge, or a rate mint that collides with a racing one, aborts the
 *		attempt, which runs in a subtransaction and is retried from the
 *		committed truth; after GD_CLAIM_ATTEMPTS the limited candidates are
 *		denied for this pick (D7: contention never errors out of pick).
 *		Candidates without limits are admitted without any statement.
 *
 * IDENTIFICATION
 *		src/admit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "admit.h"
#include "aftercommit.h"
#include "args.h"
#include "gen_durable.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_admit);

/* what the weights of one batch may be off by, from float sums */
#define GD_TOKEN_EPSILON	1e-9

/*
 * step 1: every key's policy and bucket rows, locked.  A key without a
 * policy (dropped since the candidates were read) locks nothing and
 * admits nothing; shards beyond the policy's count (minted by a pick that
 * raced a change of it) are not used.  Per key ($3: the
 * slots or tokens its candidates ask for) only as many shards as should
 * cover it, plus one: a gate's fullest shards first, a rate key's shards
 * from a per-backend offset ($4), so that concurrent picks of one hot key
 * lock different shards rather than all of them.  Taking fewer shards
 * only ever admits less.  SKIP LOCKED never waits, so no order among
 * pickers can deadlock; credits, which wait, lock in (key, shard) order.
 */
static GdPlan lock_plan = {
	"SELECT k.kind, k.key, l.rate, l.capacity, l.shards,"
	"       EXISTS (SELECT 1 FROM gen_durable.buckets w"
	"                WHERE w.kind = k.kind AND w.key = k.key) AS warm,"
	"       g.shard, g.available, g.last_refill, g.capacity"
	"  FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]),"
	"                  pg_catalog.unnest($3::float8[])) AS k(kind, key, need)"
	"  LEFT JOIN gen_durable.limits l"
	"         ON l.kind = k.kind AND l.name = pg_catalog.split_part(k.key, ':', 1)"
	"  LEFT JOIN LATERAL ("
	"    SELECT b.shard, b.available, b.last_refill, b.capacity FROM gen_durable.buckets b"
	"     WHERE b.kind = k.kind AND b.key = k.key AND b.shard < l.shards"
	"       AND (k.kind = 'rate' OR b.available - b.capacity"
	"              + pg_catalog.floor(l.capacity / l.shards)"
	"              + CASE WHEN b.shard < l.capacity::int % l.shards THEN 1 ELSE 0 END >= 1)"
	"     ORDER BY CASE WHEN k.kind = 'conc' THEN -b.available"
	"                   ELSE ((b.shard + $4) % COALESCE(l.shards, 1))::float8 END,"
	"              b.shard"
	"     LIMIT CASE WHEN l.shards IS NULL THEN 0"
	"                ELSE LEAST(l.shards::float8, pg_catalog.ceil(k.need / GREATEST(1e-9,"
	"                       CASE WHEN k.kind = 'conc' THEN pg_catalog.floor(l.capacity / l.shards)"
	"                            ELSE l.capacity / l.shards END)) + 1)::int END"
	"     FOR UPDATE OF b SKIP LOCKED) g ON true",
	4,
	{TEXTARRAYOID, TEXTARRAYOID, FLOAT8ARRAYOID, INT4OID}
};

/* the columns of lock_plan, in its order */
typedef enum LockColumn
{
	LOCK_KIND = 1,
	LOCK_KEY,
	LOCK_RATE,					/* the key's policy (capacity NULL: none) */
	LOCK_CAPACITY,
	LOCK_SHARDS,
	LOCK_WARM,
	LOCK_SHARD,					/* a locked bucket row (NULL: none) */
	LOCK_AVAILABLE,
	LOCK_LAST_REFILL,
	LOCK_SHARD_CAPACITY
} LockColumn;

/*
 * step 3: the debits.  Per row: value is the slots taken (conc) or the
 * tokens left (rate); capacity is the shard's share of the limit now;
 * mint inserts a cold key's shard.  A warm gate shard is rewritten on the
 * row locked: its holders (capacity - available) stay, and the free slots
 * follow the current policy.
 */
static GdPlan debit_plan = {
	"WITH d AS ("
	"  SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]),"
	"                           pg_catalog.unnest($3::int2[]), pg_catalog.unnest($4::float8[]),"
	"                           pg_catalog.unnest($5::float8[]), pg_catalog.unnest($6::bool[]))"
	"    AS d(kind, key, shard, capacity, value, mint)"
	"), warm AS ("
	"  UPDATE gen_durable.buckets b"
	"     SET available = CASE WHEN d.kind = 'conc'"
	"                          THEN GREATEST(0, d.capacity - (b.capacity - b.available)) - d.value"
	"                          ELSE d.value END,"
	"         capacity = d.capacity,"
	"         last_refill = CASE WHEN d.kind = 'conc' THEN NULL"
	"                            ELSE GREATEST(b.last_refill, $7) END"
	"    FROM d"
	"   WHERE NOT d.mint AND b.kind = d.kind AND b.key = d.key AND b.shard = d.shard"
	"  RETURNING 1"
	"), gate_mint AS ("
	"  INSERT INTO gen_durable.buckets AS b (kind, key, shard, capacity, available, last_refill)"
	"  SELECT kind, key, shard, capacity, capacity - value, NULL FROM d"
	"   WHERE mint AND kind = 'conc' ORDER BY key, shard"
	"  ON CONFLICT (kind, key, shard)"
	"  DO UPDATE SET available = b.available - (EXCLUDED.capacity - EXCLUDED.available)"
	"  RETURNING 1"
	"), rate_mint AS ("
	"  INSERT INTO gen_durable.buckets (kind, key, shard, capacity, available, last_refill)"
	"  SELECT kind, key, shard, capacity, value, $7 FROM d"
	"   WHERE mint AND kind = 'rate' ORDER BY key, shard"
	"  RETURNING 1"
	")"
	"SELECT (SELECT pg_catalog.count(*) FROM warm) + (SELECT pg_catalog.count(*) FROM gate_mint)"
	"       + (SELECT pg_catalog.count(*) FROM rate_mint)",
	7,
	{TEXTARRAYOID, TEXTARRAYOID, INT2ARRAYOID, FLOAT8ARRAYOID, FLOAT8ARRAYOID,
	BOOLARRAYOID, TIMESTAMPTZOID}
};

/* one shard of a key, as this admission sees it */
typedef struct ShardState
{
	int16		shard;
	double		capacity;		/* the shard's share of the limit */
	double		avail;			/* slots (conc) or tokens (rate) before this batch */
	int			taken;			/* conc: slots this batch takes */
} ShardState;

/* one (kind, key) the candidates name */
typedef struct KeyState
{
	bool		rate;			/* a rate key, else a gate key */
	char	   *key;
	bool		configured;		/* gen_durable.limits has its name */
	double		limit_rate;		/* tokens per second, whole key */
	double		limit_capacity; /* burst (rate) or K (conc), whole key */
	int			limit_shards;
	bool		warm;			/* it has bucket rows */
	ShardState *shards;			/* grabbed (warm) or virtual (cold) */
	int			nshards;
	double		tokens;			/* rate: sum of avail */
	double		granted;		/* rate: weight granted to this batch */
	bool		refused;		/* rate: a candidate was refused */
} KeyState;

/* one admission over a batch of candidates */
typedef struct Admission
{
	AdmitCandidate *cands;
	int			n;
	KeyState   *keys;			/* sorted by (rate, key) */
	int			nkeys;
	int		   *gate_key;		/* per candidate: index into keys, or -1 */
	int		   *rate_key;
	TimestampTz clock;
} Admission;

/*
 * compare_keys orders KeyStates by kind, then key (byte order).
 */
static int
compare_keys(const void *a, const void *b)
{
	const KeyState *x = a;
	const KeyState *y = b;

	if (x->rate != y->rate)
		return x->rate ? 1 : -1;
	return strcmp(x->key, y->key);
}

/*
 * find_key returns the index of (rate, key) in the sorted keys, or -1.
 */
static int
find_key(Admission *a, bool rate, const char *key)
{
	KeyState	probe = {.rate = rate,.key = (char *) key};
	KeyState   *k = bsearch(&probe, a->keys, a->nkeys, sizeof(KeyState), compare_keys);

	return k ? (int) (k - a->keys) : -1;
}

/*
 * collect_keys builds the distinct keys the candidates name, and links
 * each candidate to its gate key and rate key.  Returns whether any
 * candidate is limited at all.
 */
static bool
collect_keys(Admission *a)
{
	int			i;
	int			m = 0;

	a->keys = palloc0(sizeof(KeyState) * (2 * a->n));
	for (i = 0; i < a->n; i++)
	{
		AdmitCandidate *c = &a->cands[i];

		if (c->gate != GATE_NONE && c->concurrency_key != NULL)
		{
			a->keys[m].rate = false;
			a->keys[m++].key = c->concurrency_key;
		}
		if (c->rate_limit != NULL)
		{
			a->keys[m].rate = true;
			a->keys[m++].key = c->rate_limit;
		}
	}
	if (m == 0)
		return false;
	qsort(a->keys, m, sizeof(KeyState), compare_keys);
	a->nkeys = 0;
	for (i = 0; i < m; i++)
		if (a->nkeys == 0 || compare_keys(&a->keys[a->nkeys - 1], &a->keys[i]) != 0)
			a->keys[a->nkeys++] = a->keys[i];

	a->gate_key = palloc(sizeof(int) * a->n);
	a->rate_key = palloc(sizeof(int) * a->n);
	for (i = 0; i < a->n; i++)
	{
		AdmitCandidate *c = &a->cands[i];

		a->gate_key[i] = c->gate != GATE_NONE && c->concurrency_key != NULL
			? find_key(a, false, c->concurrency_key) : -1;
		a->rate_key[i] = c->rate_limit != NULL ? find_key(a, true, c->rate_limit) : -1;
	}
	return true;
}

/*
 * gate_shard_capacity is shard s's share of a gate of K slots over S
 * shards: the remainder goes to the lowest shards (§1.5).
 */
static double
gate_shard_capacity(int k, int s, int shard)
{
	return (double) (k / s + (shard < k % s ? 1 : 0));
}

/*
 * add_shard adds a shard to a key; a shard seen twice keeps the smaller
 * availability (the conservative value, I-13 / EPQ lesson d).
 */
static void
add_shard(KeyState *k, int16 shard, double capacity, double avail)
{
	int			i;

	for (i = 0; i < k->nshards; i++)
		if (k->shards[i].shard == shard)
		{
			k->shards[i].avail = Min(k->shards[i].avail, avail);
			return;
		}
	k->shards[k->nshards].shard = shard;
	k->shards[k->nshards].capacity = capacity;
	k->shards[k->nshards].avail = avail;
	k->shards[k->nshards].taken = 0;
	k->nshards++;
}

/*
 * rate_shard_tokens is a warm rate shard's tokens now: what it had plus
 * the refill since, capped at its share of the burst.
 */
static double
rate_shard_tokens(KeyState *k, double available, bool has_refill, TimestampTz last_refill,
				  TimestampTz clock)
{
	double		cap = k->limit_capacity / k->limit_shards;
	double		secs;

	if (!has_refill || clock <= last_refill)
		return Min(cap, available);
	secs = (double) (clock - last_refill) / USECS_PER_SEC;
	return Min(cap, available + secs * k->limit_rate / k->limit_shards);
}

/*
 * read_keys runs the lock statement and fills every key's policy and
 * shards: the locked rows of a warm key, every shard at full capacity for
 * a cold key with a policy, none for a key without one.
 */
static void
read_keys(Admission *a)
{
	Datum	   *kinds = palloc(sizeof(Datum) * a->nkeys);
	Datum	   *names = palloc(sizeof(Datum) * a->nkeys);
	Datum	   *needs = palloc0(sizeof(Datum) * a->nkeys);
	double	   *need = palloc0(sizeof(double) * a->nkeys);
	Datum		values[4];
	int			rows;
	int			i;
	int			r;

	for (i = 0; i < a->nkeys; i++)
	{
		KeyState   *k = &a->keys[i];

		kinds[i] = CStringGetTextDatum(k->rate ? "rate" : "conc");
		names[i] = CStringGetTextDatum(k->key);
		k->configured = false;
		k->warm = false;
		k->shards = NULL;
		k->nshards = 0;
		k->tokens = k->granted = 0;
		k->refused = false;
	}
	for (i = 0; i < a->n; i++)
	{
		if (a->gate_key[i] >= 0)
			need[a->gate_key[i]] += 1;
		if (a->rate_key[i] >= 0)
			need[a->rate_key[i]] += a->cands[i].weight;
	}
	for (i = 0; i < a->nkeys; i++)
		needs[i] = Float8GetDatum(need[i]);
	values[0] = PointerGetDatum(gd_array(kinds, NULL, a->nkeys, TEXTOID));
	values[1] = PointerGetDatum(gd_array(names, NULL, a->nkeys, TEXTOID));
	values[2] = PointerGetDatum(gd_array(needs, NULL, a->nkeys, FLOAT8OID));
	values[3] = Int32GetDatum(MyProcPid);
	rows = gd_execute(&lock_plan, values, NULL, SPI_OK_SELECT);

	/*
	 * Refill up to now, read once the locks are held: a clock read before
	 * could be older than a refill that committed while this one waited.
	 */
	a->clock = GetCurrentTimestamp();

	for (r = 0; r < rows; r++)
	{
		char	   *kind = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, LOCK_KIND);
		char	   *key = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, LOCK_KEY);
		int			idx = find_key(a, strcmp(kind, "rate") == 0, key);
		KeyState   *k;
		bool		isnull;
		Datum		d;

		if (idx < 0)
			elog(ERROR, "admission read a bucket of key \"%s\" it did not ask for", key);
		k = &a->keys[idx];
		if (k->shards == NULL)
		{
			d = gd_result_datum(r, LOCK_CAPACITY, &isnull);
			k->configured = !isnull;
			if (k->configured)
			{
				bool		norate;
				Datum		rate = gd_result_datum(r, LOCK_RATE, &norate);

				k->limit_capacity = DatumGetFloat8(d);
				k->limit_rate = norate ? 0 : DatumGetFloat8(rate);
				k->limit_shards = DatumGetInt16(gd_result_datum(r, LOCK_SHARDS, &isnull));
			}
			k->warm = DatumGetBool(gd_result_datum(r, LOCK_WARM, &isnull));
			k->shards = palloc(sizeof(ShardState) * Max(rows, k->configured ? k->limit_shards : 1));
		}
		d = gd_result_datum(r, LOCK_SHARD, &isnull);
		if (!isnull)
		{
			int16		shard = DatumGetInt16(d);
			double		available = DatumGetFloat8(gd_result_datum(r, LOCK_AVAILABLE, &isnull));
			Datum		refill = gd_result_datum(r, LOCK_LAST_REFILL, &isnull);

			if (!k->rate)
			{
				/*
				 * The shard's holders, against its share of the gate now: a
				 * shard minted under an older policy (a pick that raced
				 * set_concurrency_limit) admits by the current one.
				 */
				double		stored = DatumGetFloat8(gd_result_datum(r, LOCK_SHARD_CAPACITY, &isnull));
				double		cap = shard < k->limit_shards
					? gate_shard_capacity((int) k->limit_capacity, k->limit_shards, shard) : 0;

				add_shard(k, shard, cap,
						  floor(Max(0, cap - (stored - available)) + GD_TOKEN_EPSILON));
			}
			else
				add_shard(k, shard, k->limit_capacity / k->limit_shards,
						  rate_shard_tokens(k, available, !isnull,
											DatumGetTimestampTz(refill), a->clock));
		}
	}

	for (i = 0; i < a->nkeys; i++)
	{
		KeyState   *k = &a->keys[i];
		int			s;

		if (k->shards == NULL)
			elog(ERROR, "admission did not read key \"%s\"", k->key);
		if (!k->warm && k->configured)
		{
			for (s = 0; s < k->limit_shards; s++)
				add_shard(k, (int16) s,
						  k->rate ? k->limit_capacity / k->limit_shards
						  : gate_shard_capacity((int) k->limit_capacity, k->limit_shards, s),
						  k->rate ? k->limit_capacity / k->limit_shards
						  : gate_shard_capacity((int) k->limit_capacity, k->limit_shards, s));
		}
		for (s = 0; s < k->nshards; s++)
			k->tokens += k->shards[s].avail;
	}
}

/*
 * fullest_shard returns the shard of a gate key with the most free slots
 * left for this batch (the lowest on ties), or -1 when all are taken.
 */
static int
fullest_shard(KeyState *k)
{
	int			best = -1;
	double		best_free = 0;
	int			s;

	for (s = 0; s < k->nshards; s++)
	{
		double		free = k->shards[s].avail - k->shards[s].taken;

		if (free >= 1 - GD_TOKEN_EPSILON &&
			(best < 0 || free > best_free ||
			 (free == best_free && k->shards[s].shard < k->shards[best].shard)))
		{
			best = s;
			best_free = free;
		}
	}
	return best;
}

/*
 * decide admits the candidates in claim order against the keys' slots
 * and tokens.
 */
static void
decide(Admission *a)
{
	int			i;

	for (i = 0; i < a->n; i++)
	{
		AdmitCandidate *c = &a->cands[i];
		KeyState   *gate = a->gate_key[i] >= 0 ? &a->keys[a->gate_key[i]] : NULL;
		KeyState   *rate = a->rate_key[i] >= 0 ? &a->keys[a->rate_key[i]] : NULL;
		int			shard = -1;

		c->admitted = false;
		c->has_shard = false;
		c->denial = DENIED_NOT;
		if (gate)
		{
			if (c->gate == GATE_IF_CONFIGURED && !gate->configured)
			{
				c->denial = DENIED_UNCONFIGURED;
				continue;
			}
			shard = fullest_shard(gate);
			if (shard < 0)
			{
				c->denial = DENIED_GATE;
				continue;
			}
		}
		if (rate && !rate->configured)
		{
			c->denial = DENIED_UNKNOWN_RATE;
			continue;
		}
		if (rate)
		{
			if (rate->refused ||
				rate->granted + c->weight > rate->tokens + GD_TOKEN_EPSILON)
			{
				rate->refused = true;
				c->denial = DENIED_RATE;
				continue;
			}
			rate->granted += c->weight;
		}
		if (gate)
		{
			gate->shards[shard].taken++;
			c->shard = gate->shards[shard].shard;
			c->has_shard = true;
		}
		c->admitted = true;
	}
}

/* the parallel arrays of debit_plan */
typedef struct Debits
{
	Datum	   *kind;
	Datum	   *key;
	Datum	   *shard;
	Datum	   *capacity;
	Datum	   *value;
	Datum	   *mint;
	int			n;
} Debits;

/*
 * add_debit appends one bucket row to write.
 */
static void
add_debit(Debits *d, KeyState *k, ShardState *s, double value, bool mint)
{
	d->kind[d->n] = CStringGetTextDatum(k->rate ? "rate" : "conc");
	d->key[d->n] = CStringGetTextDatum(k->key);
	d->shard[d->n] = Int16GetDatum(s->shard);
	d->capacity[d->n] = Float8GetDatum(s->capacity);
	d->value[d->n] = Float8GetDatum(value);
	d->mint[d->n] = BoolGetDatum(mint);
	d->n++;
}

/*
 * debit writes what the admitted candidates took, with one statement.
 */
static void
debit(Admission *a)
{
	Debits		d;
	Datum		values[7];
	int			cap = 0;
	int			i;
	int			s;
	int64		written;

	for (i = 0; i < a->nkeys; i++)
		cap += a->keys[i].nshards;
	d.kind = palloc(sizeof(Datum) * Max(cap, 1));
	d.key = palloc(sizeof(Datum) * Max(cap, 1));
	d.shard = palloc(sizeof(Datum) * Max(cap, 1));
	d.capacity = palloc(sizeof(Datum) * Max(cap, 1));
	d.value = palloc(sizeof(Datum) * Max(cap, 1));
	d.mint = palloc(sizeof(Datum) * Max(cap, 1));
	d.n = 0;

	for (i = 0; i < a->nkeys; i++)
	{
		KeyState   *k = &a->keys[i];
		int			taken = 0;

		if (!k->rate)
		{
			for (s = 0; s < k->nshards; s++)
				taken += k->shards[s].taken;
			if (taken == 0)
				continue;
			/* a cold key mints every shard, a warm one writes what it took */
			for (s = 0; s < k->nshards; s++)
				if (!k->warm || k->shards[s].taken > 0)
					add_debit(&d, k, &k->shards[s], k->shards[s].taken, !k->warm);
		}
		else if (k->granted > 0)
		{
			/* every shard gives up its share of what was granted */
			for (s = 0; s < k->nshards; s++)
			{
				ShardState *sh = &k->shards[s];
				double		left = k->tokens > 0
					? sh->avail - sh->avail * k->granted / k->tokens : 0;

				add_debit(&d, k, sh, Max(0, Min(sh->capacity, left)), !k->warm);
			}
		}
	}
	if (d.n == 0)
		return;

	values[0] = PointerGetDatum(gd_array(d.kind, NULL, d.n, TEXTOID));
	values[1] = PointerGetDatum(gd_array(d.key, NULL, d.n, TEXTOID));
	values[2] = PointerGetDatum(gd_array(d.shard, NULL, d.n, INT2OID));
	values[3] = PointerGetDatum(gd_array(d.capacity, NULL, d.n, FLOAT8OID));
	values[4] = PointerGetDatum(gd_array(d.value, NULL, d.n, FLOAT8OID));
	values[5] = PointerGetDatum(gd_array(d.mint, NULL, d.n, BOOLOID));
	values[6] = TimestampTzGetDatum(a->clock);
	gd_execute(&debit_plan, values, NULL, SPI_OK_SELECT);
	written = gd_result_int64(0, 1);
	if (written != d.n)
		elog(ERROR, "admission wrote " INT64_FORMAT " of %d bucket rows", written, d.n);
}

/*
 * run_admission is one attempt (lock, decide, debit) in a subtransaction.
 */
static int
run_admission(void *arg)
{
	Admission  *a = (Admission *) arg;

	read_keys(a);
	decide(a);
	debit(a);
	return 1;
}

/*
 * is_bucket_race says whether an admission attempt failed because it
 * raced another: an overdraft after merging into a racing mint, a rate
 * mint colliding with a racing one, or a deadlock among minting pickers.
 */
static bool
is_bucket_race(ErrorData *edata)
{
	if (edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
		return true;
	if (edata->sqlerrcode != ERRCODE_CHECK_VIOLATION &&
		edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
		return false;
	return edata->table_name != NULL && strcmp(edata->table_name, "buckets") == 0 &&
		edata->schema_name != NULL && strcmp(edata->schema_name, "gen_durable") == 0;
}

/*
 * count_denials adds the batch's refusals to the throttled counters (at
 * once: they are observations, whatever becomes of the transaction).
 */
static void
count_denials(Admission *a)
{
	int64		conc = 0;
	int64		rate = 0;
	int			i;

	for (i = 0; i < a->n; i++)
		if (a->cands[i].denial == DENIED_GATE)
			conc++;
		else if (a->cands[i].denial == DENIED_RATE)
			rate++;
	gd_count_now(GD_STAT_THROTTLED_CONC, conc);
	gd_count_now(GD_STAT_THROTTLED_RATE, rate);
}

/*
 * gd_admit marks the candidates (in claim order) that may run now, debits
 * the buckets for them, and returns how many were admitted.  A gated
 * admitted candidate gets its slot's shard, which the caller records on
 * the row in the same transaction.  SPI must be connected.
 */
int
gd_admit(AdmitCandidate *candidates, int n)
{
	Admission	a = {candidates, n};
	int			admitted = 0;
	int			attempt;
	int			i;

	for (i = 0; i < n; i++)
	{
		candidates[i].admitted = true;
		candidates[i].has_shard = false;
		candidates[i].denial = DENIED_NOT;
	}
	if (n == 0 || !collect_keys(&a))
		return n;

	for (attempt = 0; attempt < GD_CLAIM_ATTEMPTS; attempt++)
	{
		if (gd_run_in_subxact(run_admission, &a, true, is_bucket_race) > 0)
			break;
		gd_count_now(GD_STAT_LIMITER_CONTENDED, 1);
	}
	if (attempt == GD_CLAIM_ATTEMPTS)
		for (i = 0; i < n; i++)
		{
			bool		limited = a.gate_key[i] >= 0 || a.rate_key[i] >= 0;

			candidates[i].admitted = !limited;
			candidates[i].has_shard = false;
			candidates[i].denial = limited ? DENIED_CONTENDED : DENIED_NOT;
		}
	count_denials(&a);
	for (i = 0; i < n; i++)
		admitted += candidates[i].admitted;
	return admitted;
}

/* admit(): the worker's executing rows, locked, in claim order */
static GdPlan owned_plan = {
	"SELECT " GD_CANDIDATE_COLUMNS("l") " FROM ("
	"  SELECT i.id, i.concurrency_key,"
	"         i.concurrency_key IS NOT NULL AND i.concurrency_shard IS NULL"
	"           AND EXISTS (SELECT 1 FROM gen_durable.limits g"
	"                        WHERE g.kind = 'conc' AND g.name = i.concurrency_name) AS gated,"
	"         i.rate_limit, i.weight, i.priority, i.eligible_at"
	"    FROM ONLY gen_durable.instances i"
	"   WHERE i.id = ANY ($1) AND i.locked_by = $2 AND i.status = 'executing'"
	"   ORDER BY i.id FOR NO KEY UPDATE OF i"
	") l ORDER BY l.priority, l.eligible_at, l.id",
	2,
	{INT8ARRAYOID, TEXTOID}
};

/* admit(): record the gate slots taken on the rows */
static GdPlan stamp_plan = {
	"UPDATE ONLY gen_durable.instances i SET concurrency_shard = s.shard"
	"  FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::int2[]))"
	"       AS s(id, shard)"
	" WHERE i.id = s.id AND i.locked_by = $3 AND i.status = 'executing'",
	3,
	{INT8ARRAYOID, INT2ARRAYOID, TEXTOID}
};

/*
 * gd_read_candidates copies the rows of the last SPI result, whose first
 * columns are GD_CANDIDATE_COLUMNS, into candidates.
 */
AdmitCandidate *
gd_read_candidates(int rows)
{
	AdmitCandidate *cands = palloc0(sizeof(AdmitCandidate) * Max(rows, 1));
	int			i;

	for (i = 0; i < rows; i++)
	{
		bool		isnull;

		cands[i].id = gd_result_int64(i, CAND_ID);
		cands[i].concurrency_key = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
												CAND_CONCURRENCY_KEY);
		cands[i].gate = DatumGetBool(gd_result_datum(i, CAND_GATED, &isnull))
			? GATE_CONFIGURED : GATE_NONE;
		cands[i].rate_limit = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
										   CAND_RATE_LIMIT);
		cands[i].weight = DatumGetFloat8(gd_result_datum(i, CAND_WEIGHT, &isnull));
	}
	return cands;
}

/*
 * compare_ids orders bigint ids.
 */
static int
compare_ids(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * gen_durable_admit implements gen_durable.admit(ids, worker): admission
 * on its own for rows the worker owns (executing, claimed by it), as a
 * pick would admit them now.  A row whose key names a gate and that holds
 * no slot takes one; a row with a rate limit takes its weight in tokens.
 * Returns (id, admitted) per input id; ids the worker does not own are not
 * admitted and not touched.  Denied rows stay claimed: the worker flushes
 * them as a plain next, or releases them.
 */
Datum
gen_durable_admit(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64	   *ids;
	int			nids;
	char	   *worker;
	AdmitCandidate *cands;
	Datum		values[3];
	int64	   *admitted;
	int			nadmitted = 0;
	int			rows;
	int			i;

	gd_require_read_committed("admit");
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"ids\" must not be NULL"),
				 errhint("Pass the ids of instances this worker has claimed.")));
	nids = gd_array_int8(PG_GETARG_ARRAYTYPE_P(0), "ids", true, &ids);
	worker = gd_arg_name(fcinfo, 1, "worker", true);
	InitMaterializedSRF(fcinfo, 0);

	gd_connect();
	values[0] = PointerGetDatum(gd_int8_array(ids, nids));
	values[1] = CStringGetTextDatum(worker);
	rows = gd_execute(&owned_plan, values, NULL, SPI_OK_SELECT);
	cands = gd_read_candidates(rows);
	gd_admit(cands, rows);
	{
		Datum	   *sids = palloc(sizeof(Datum) * Max(rows, 1));
		Datum	   *shards = palloc(sizeof(Datum) * Max(rows, 1));
		int			n = 0;

		for (i = 0; i < rows; i++)
			if (cands[i].has_shard)
			{
				sids[n] = Int64GetDatum(cands[i].id);
				shards[n++] = Int16GetDatum(cands[i].shard);
			}
		if (n > 0)
		{
			values[0] = PointerGetDatum(gd_array(sids, NULL, n, INT8OID));
			values[1] = PointerGetDatum(gd_array(shards, NULL, n, INT2OID));
			values[2] = CStringGetTextDatum(worker);
			gd_execute(&stamp_plan, values, NULL, SPI_OK_UPDATE);
		}
	}

	admitted = palloc(sizeof(int64) * Max(rows, 1));
	for (i = 0; i < rows; i++)
		if (cands[i].admitted)
			admitted[nadmitted++] = cands[i].id;
	qsort(admitted, nadmitted, sizeof(int64), compare_ids);
	for (i = 0; i < nids; i++)
	{
		Datum		out[2];
		bool		outnull[2] = {false, false};

		out[0] = Int64GetDatum(ids[i]);
		out[1] = BoolGetDatum(bsearch(&ids[i], admitted, nadmitted, sizeof(int64),
									  compare_ids) != NULL);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	}
	gd_finish();
	return (Datum) 0;
}
