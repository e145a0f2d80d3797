/*-------------------------------------------------------------------------
 *
 * buckets.c
 *		Keeping the limiter's buckets true: rate-bucket GC and gate
 *		reconcile (contract §10.2, §10.3, D8).
 *
 *		Admission and credits keep the buckets exact in the transactions
 *		that change the executing rows, so these are the safety net and the
 *		tidy-up, never the mechanism:
 *		- rate GC deletes a rate key once every one of its shards has
 *		  refilled to full (a cold key is full, so nothing is lost), or once
 *		  its policy is gone; all shards or none (I-18), and never a key of
 *		  rate 0 (a re-mint would grant a fresh burst);
 *		- gate reconcile recomputes every gate shard from the executing rows
 *		  that hold its slots: available = capacity - held, where capacity
 *		  is the shard's share of the gate, or the holders when there are
 *		  more (a gate lowered under running rows): the rows a shard
 *		  accounts for are always capacity - available, so credits bring it
 *		  back exactly, and admission lets a row in only while the holders
 *		  are fewer than the share (admit.c).  Whole keys with no holder go
 *		  (cold = full); shards beyond the gate's shard count, or of a gate
 *		  that was dropped, go once nothing holds them; missing shards of a
 *		  key in use are minted (backfill).  A row executing under a gate's
 *		  key without a slot (claimed before the gate existed) counts on
 *		  shard 0, so a new gate is never exceeded meanwhile (I-25: repairs
 *		  err towards fewer slots).
 *		The maintenance sweep locks only the keys that need work, with SKIP
 *		LOCKED (I-22); the gate's configuration functions (limit_policy.c) lock
 *		every key of the gate and wait.  The repair itself is a new
 *		statement after the locks are held, so its count of holders sees
 *		every admission that committed on those shards.
 *
 * IDENTIFICATION
 *		src/buckets.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "aftercommit.h"
#include "buckets.h"
#include "spi_util.h"

/* rate keys that are full (or have no policy), every shard locked here */
static GdPlan rate_gc_plan = {
	"WITH cand AS ("
	"  SELECT b.key FROM gen_durable.buckets b"
	"    LEFT JOIN gen_durable.limits c"
	"           ON c.kind = 'rate' AND c.name = pg_catalog.split_part(b.key, ':', 1)"
	"   WHERE b.kind = 'rate'"
	"   GROUP BY b.key, c.name, c.rate, c.capacity"
	"  HAVING c.name IS NULL"
	"      OR (c.rate > 0 AND EXTRACT(epoch FROM $1 - pg_catalog.max(b.last_refill)) * c.rate"
	"                         > c.capacity)"
	"), l AS ("
	"  SELECT b.key, b.last_refill FROM gen_durable.buckets b JOIN cand ON b.key = cand.key"
	"   WHERE b.kind = 'rate'"
	"   ORDER BY b.key, b.shard FOR UPDATE OF b SKIP LOCKED"
	"), k AS ("
	"  SELECT l.key FROM l"
	"    LEFT JOIN gen_durable.limits c"
	"           ON c.kind = 'rate' AND c.name = pg_catalog.split_part(l.key, ':', 1)"
	"   GROUP BY l.key, c.name, c.rate, c.capacity"
	"  HAVING (c.name IS NULL"
	"          OR (c.rate > 0 AND EXTRACT(epoch FROM $1 - pg_catalog.max(l.last_refill)) * c.rate"
	"                             > c.capacity))"
	"     AND pg_catalog.count(*) = (SELECT pg_catalog.count(*) FROM gen_durable.buckets t"
	"                                 WHERE t.kind = 'rate' AND t.key = l.key)"
	")"
	"DELETE FROM gen_durable.buckets b USING k WHERE b.kind = 'rate' AND b.key = k.key",
	1,
	{TIMESTAMPTZOID},
	NULL, true
};

/*
 * The per-shard truth of every gate key with buckets: the shards its gate
 * wants and what executing rows hold.  Shared by the sweep's search for
 * keys that differ from it.  Shard 0 takes the holders without a slot, and
 * a holder of a shard the gate no longer has (stamped by a pick that raced
 * a change of the shard count) counts on the shard it maps to, so that no
 * holder goes uncounted.
 */
#define GATE_TRUTH_CTES \
	"held AS (" \
	"  SELECT i.concurrency_key AS key," \
	"         (CASE WHEN COALESCE(i.concurrency_shard, 0) >= p.shards" \
	"               THEN COALESCE(i.concurrency_shard, 0) % p.shards" \
	"               ELSE COALESCE(i.concurrency_shard, 0) END)::int2 AS shard," \
	"         pg_catalog.count(*) AS n" \
	"    FROM ONLY gen_durable.instances i" \
	"    LEFT JOIN gen_durable.limits p" \
	"           ON p.kind = 'conc' AND p.name = i.concurrency_name" \
	"   WHERE i.status = 'executing' AND i.concurrency_key = ANY (ARRAY(SELECT key FROM keys))" \
	"   GROUP BY 1, 2" \
	"), cfg AS (" \
	"  SELECT k.key, c.capacity::int AS k_cap, c.shards::int AS shards FROM keys k" \
	"    JOIN gen_durable.limits c" \
	"      ON c.kind = 'conc' AND c.name = pg_catalog.split_part(k.key, ':', 1)" \
	"), want AS (" \
	"  SELECT cfg.key, s.shard::int2 AS shard," \
	"         (cfg.k_cap / cfg.shards" \
	"          + CASE WHEN s.shard < cfg.k_cap % cfg.shards THEN 1 ELSE 0 END)::float8 AS cap" \
	"    FROM cfg CROSS JOIN LATERAL pg_catalog.generate_series(0, cfg.shards - 1) AS s(shard)" \
	")"

/* the sweep: lock the gate shards of the keys whose buckets need repair */
static GdPlan gate_dirty_plan = {
	"WITH keys AS (SELECT DISTINCT key FROM gen_durable.buckets WHERE kind = 'conc'), "
	GATE_TRUTH_CTES ", "
	"dirty AS ("
	"  SELECT b.key FROM gen_durable.buckets b"
	"    LEFT JOIN want w ON w.key = b.key AND w.shard = b.shard"
	"    LEFT JOIN held h ON h.key = b.key AND h.shard = b.shard"
	"   WHERE b.kind = 'conc'"
	"     AND (w.key IS NULL OR b.capacity <> GREATEST(w.cap, COALESCE(h.n, 0))"
	"          OR b.available <> GREATEST(w.cap, COALESCE(h.n, 0)) - COALESCE(h.n, 0))"
	"  UNION"
	"  SELECT w.key FROM want w"
	"   WHERE NOT EXISTS (SELECT 1 FROM gen_durable.buckets b"
	"                      WHERE b.kind = 'conc' AND b.key = w.key AND b.shard = w.shard)"
	"  UNION"
	"  SELECT k.key FROM keys k WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.key = k.key)"
	")"
	"SELECT b.key, b.shard FROM gen_durable.buckets b"
	" WHERE b.kind = 'conc' AND b.key IN (SELECT key FROM dirty)"
	" ORDER BY b.key, b.shard FOR UPDATE OF b SKIP LOCKED",
	0,
	{InvalidOid},
	NULL, true
};

/* a gate's configuration changed: lock every shard of its keys, waiting */
static GdPlan gate_lock_plan = {
	"SELECT b.key, b.shard FROM gen_durable.buckets b"
	" WHERE b.kind = 'conc' AND pg_catalog.split_part(b.key, ':', 1) = $1"
	" ORDER BY b.key, b.shard FOR UPDATE OF b",
	1,
	{TEXTOID},
	NULL, true
};

/* the keys of a gate that executing rows hold, whether or not they have buckets */
static GdPlan gate_holders_plan = {
	"SELECT DISTINCT concurrency_key FROM ONLY gen_durable.instances"
	" WHERE status = 'executing' AND concurrency_name = $1 AND concurrency_key IS NOT NULL",
	1,
	{TEXTOID},
	NULL, true
};

/*
 * The repair of the locked shards ($1, $2) and of the keys ($3) that
 * holders use without any bucket: a fresh statement, after the locks.
 */
static GdPlan gate_repair_plan = {
	"WITH lk AS ("
	"  SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::int2[]))"
	"    AS lk(key, shard)"
	"), keys AS (SELECT key FROM lk UNION SELECT pg_catalog.unnest($3::text[])), "
	GATE_TRUTH_CTES ", "
	"idle AS ("
	"  SELECT k.key FROM keys k"
	"   WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.key = k.key)"
	"     AND (SELECT pg_catalog.count(*) FROM gen_durable.buckets b"
	"           WHERE b.kind = 'conc' AND b.key = k.key)"
	"         = (SELECT pg_catalog.count(*) FROM lk WHERE lk.key = k.key)"
	"), del AS ("
	"  DELETE FROM gen_durable.buckets b USING lk"
	"   WHERE b.kind = 'conc' AND b.key = lk.key AND b.shard = lk.shard"
	"     AND (b.key IN (SELECT key FROM idle)"
	"          OR (NOT EXISTS (SELECT 1 FROM want w WHERE w.key = b.key AND w.shard = b.shard)"
	"              AND NOT EXISTS (SELECT 1 FROM held h"
	"                               WHERE h.key = b.key AND h.shard = b.shard)))"
	"  RETURNING 1"
	"), heal AS ("
	"  UPDATE gen_durable.buckets b"
	"     SET capacity = GREATEST(w.cap, COALESCE(h.n, 0)),"
	"         available = GREATEST(w.cap, COALESCE(h.n, 0)) - COALESCE(h.n, 0)"
	"    FROM lk JOIN want w ON w.key = lk.key AND w.shard = lk.shard"
	"         LEFT JOIN held h ON h.key = lk.key AND h.shard = lk.shard"
	"   WHERE b.kind = 'conc' AND b.key = lk.key AND b.shard = lk.shard"
	"     AND lk.key NOT IN (SELECT key FROM idle)"
	"     AND (b.capacity <> GREATEST(w.cap, COALESCE(h.n, 0))"
	"          OR b.available <> GREATEST(w.cap, COALESCE(h.n, 0)) - COALESCE(h.n, 0))"
	"  RETURNING 1"
	"), mint AS ("
	"  INSERT INTO gen_durable.buckets (kind, key, shard, capacity, available, last_refill)"
	"  SELECT 'conc', w.key, w.shard, GREATEST(w.cap, COALESCE(h.n, 0)),"
	"         GREATEST(w.cap, COALESCE(h.n, 0)) - COALESCE(h.n, 0), NULL"
	"    FROM want w LEFT JOIN held h ON h.key = w.key AND h.shard = w.shard"
	"   WHERE w.key NOT IN (SELECT key FROM idle)"
	"     AND NOT EXISTS (SELECT 1 FROM gen_durable.buckets b"
	"                      WHERE b.kind = 'conc' AND b.key = w.key AND b.shard = w.shard)"
	"   ORDER BY w.key, w.shard"
	"  ON CONFLICT DO NOTHING"
	"  RETURNING 1"
	")"
	"SELECT (SELECT pg_catalog.count(*) FROM del),"
	"       (SELECT pg_catalog.count(*) FROM heal) + (SELECT pg_catalog.count(*) FROM mint)",
	3,
	{TEXTARRAYOID, INT2ARRAYOID, TEXTARRAYOID},
	NULL, true
};

/*
 * repair_locked repairs the gate shards the last statement locked (columns
 * key, shard) plus the keys in holders, and adds to the counts (when
 * given) and the stats counters.
 */
static void
repair_locked(int rows, Datum *holders, int nholders, BucketCounts *counts)
{
	Datum	   *keys = palloc(sizeof(Datum) * Max(rows, 1));
	Datum	   *shards = palloc(sizeof(Datum) * Max(rows, 1));
	Datum		values[3];
	bool		isnull;
	int64		deleted;
	int64		repaired;
	int			r;

	if (rows == 0 && nholders == 0)
		return;
	for (r = 0; r < rows; r++)
	{
		keys[r] = gd_result_copy(r, 1, &isnull);
		shards[r] = gd_result_datum(r, 2, &isnull);
	}
	values[0] = PointerGetDatum(gd_array(keys, NULL, rows, TEXTOID));
	values[1] = PointerGetDatum(gd_array(shards, NULL, rows, INT2OID));
	values[2] = PointerGetDatum(gd_array(holders, NULL, nholders, TEXTOID));
	gd_execute(&gate_repair_plan, values, NULL, SPI_OK_SELECT);
	deleted = gd_result_int64(0, 1);
	repaired = gd_result_int64(0, 2);
	if (counts != NULL)
	{
		counts->buckets_swept += deleted;
		counts->gate_shards_repaired += repaired;
	}
	gd_count(GD_STAT_BUCKETS_SWEPT, deleted);
	gd_count(GD_STAT_GATE_SHARDS_REPAIRED, repaired);
}

/*
 * gd_sweep_buckets runs rate GC and the gate reconcile, skipping buckets
 * that admissions or credits hold right now.
 */
void
gd_sweep_buckets(TimestampTz now, BucketCounts *counts)
{
	Datum		values[1];
	int			rows;

	values[0] = TimestampTzGetDatum(now);
	rows = gd_execute(&rate_gc_plan, values, NULL, SPI_OK_DELETE);
	counts->buckets_swept += rows;
	gd_count(GD_STAT_BUCKETS_SWEPT, rows);

	rows = gd_execute(&gate_dirty_plan, NULL, NULL, SPI_OK_SELECT);
	repair_locked(rows, NULL, 0, counts);
}

/*
 * gd_reconcile_gate rebuilds the buckets of every key of one gate from
 * the executing rows, after its configuration changed (D8): it waits for
 * the shards that admissions and credits hold.
 */
void
gd_reconcile_gate(const char *name)
{
	Datum		values[1];
	Datum	   *holders;
	int			nholders;
	int			rows;
	int			r;
	bool		isnull;

	values[0] = CStringGetTextDatum(name);
	nholders = gd_execute(&gate_holders_plan, values, NULL, SPI_OK_SELECT);
	holders = palloc(sizeof(Datum) * Max(nholders, 1));
	for (r = 0; r < nholders; r++)
		holders[r] = gd_result_copy(r, 1, &isnull);
	rows = gd_execute(&gate_lock_plan, values, NULL, SPI_OK_SELECT);
	repair_locked(rows, holders, nholders, NULL);
}
