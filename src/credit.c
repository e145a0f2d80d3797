/*-------------------------------------------------------------------------
 *
 * credit.c
 *		Returning the gate slots of instances that leave executing.
 *
 *		An instance admitted through a concurrency gate holds one slot of
 *		one bucket shard, recorded in its concurrency_shard.  Every
 *		statement that takes an instance out of executing (flush, the
 *		settle cascades, cancel, the reaper, release) reads the slot from
 *		the row it locked (the latest version) and clears it; the caller
 *		collects the slots here and credits them with one statement at the
 *		end of its transaction, after every instance lock it takes (D8,
 *		§10.4):
 *		- inside the committing transaction, so a reconcile can never count
 *		  a slot free and then see it credited again;
 *		- bucket rows locked in (key, shard) order, so concurrent credits
 *		  cannot deadlock;
 *		- LEAST(capacity, ...), so a slot a reconcile already restored is not
 *		  counted twice, and a bucket row that is gone (a dropped gate)
 *		  simply takes no credit.
 *		A caller that must not wait (the maintenance worker, I-22; a flush
 *		that already holds buckets it admitted against, which would
 *		otherwise wait while holding) credits only the shards it can lock
 *		now: a shard it skips stays short by those slots, which errs
 *		towards admitting fewer, until the gate reconcile (buckets.c), at
 *		most a second later, counts the holders again.
 *
 * IDENTIFICATION
 *		src/credit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "credit.h"
#include "spi_util.h"

/* the credit statement; LOCK_CLAUSE says whether it waits for the shards */
#define CREDIT_SQL(LOCK_CLAUSE) \
	"WITH c AS (" \
	"  SELECT key, shard, pg_catalog.count(*) AS n" \
	"    FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::int2[]))" \
	"         AS c(key, shard)" \
	"   GROUP BY key, shard" \
	"), l AS (" \
	"  SELECT b.key, b.shard, c.n FROM gen_durable.buckets b" \
	"    JOIN c ON b.kind = 'conc' AND b.key = c.key AND b.shard = c.shard" \
	"   ORDER BY b.key, b.shard " LOCK_CLAUSE \
	")" \
	"UPDATE gen_durable.buckets b" \
	"   SET available = LEAST(b.capacity, b.available + l.n)" \
	"  FROM l" \
	" WHERE b.kind = 'conc' AND b.key = l.key AND b.shard = l.shard"

static GdPlan credit_plan = {
	CREDIT_SQL("FOR UPDATE OF b"), 2, {TEXTARRAYOID, INT2ARRAYOID}
};

static GdPlan credit_now_plan = {
	CREDIT_SQL("FOR UPDATE OF b SKIP LOCKED"), 2, {TEXTARRAYOID, INT2ARRAYOID}
};

/*
 * gd_slots_init prepares an empty set of slots.
 */
void
gd_slots_init(HeldSlots *slots)
{
	slots->n = 0;
	slots->cap = 0;
	slots->keys = NULL;
	slots->shards = NULL;
}

/*
 * gd_slots_add records one slot to credit.
 */
void
gd_slots_add(HeldSlots *slots, const char *key, int16 shard)
{
	if (slots->n == slots->cap)
	{
		slots->cap = Max(8, slots->cap * 2);
		if (slots->keys == NULL)
		{
			slots->keys = palloc(sizeof(Datum) * slots->cap);
			slots->shards = palloc(sizeof(Datum) * slots->cap);
		}
		else
		{
			slots->keys = repalloc(slots->keys, sizeof(Datum) * slots->cap);
			slots->shards = repalloc(slots->shards, sizeof(Datum) * slots->cap);
		}
	}
	slots->keys[slots->n] = CStringGetTextDatum(key);
	slots->shards[slots->n] = Int16GetDatum(shard);
	slots->n++;
}

/*
 * gd_slots_add_result records the slot in columns keycol and shardcol of
 * row `row` of the last SPI result, when the instance held one (a
 * non-NULL shard).
 */
void
gd_slots_add_result(HeldSlots *slots, int row, int keycol, int shardcol)
{
	bool		isnull;
	Datum		shard = gd_result_datum(row, shardcol, &isnull);
	char	   *key;

	if (isnull)
		return;
	key = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, keycol);
	if (key == NULL)
		elog(ERROR, "an instance holds gate shard %d without a concurrency key",
			 DatumGetInt16(shard));
	gd_slots_add(slots, key, DatumGetInt16(shard));
}

/*
 * gd_credit_slots credits every recorded slot with one statement and
 * empties the set; with wait false, only the shards it can lock at once.
 * SPI must be connected; call it after the transaction's last instance
 * lock.
 */
void
gd_credit_slots(HeldSlots *slots, bool wait)
{
	Datum		values[2];

	if (slots->n == 0)
		return;
	values[0] = PointerGetDatum(gd_array(slots->keys, NULL, slots->n, TEXTOID));
	values[1] = PointerGetDatum(gd_array(slots->shards, NULL, slots->n, INT2OID));
	gd_execute(wait ? &credit_plan : &credit_now_plan, values, NULL, SPI_OK_UPDATE);
	slots->n = 0;
}
