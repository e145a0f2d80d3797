/*-------------------------------------------------------------------------
 *
 * settle.c
 *		The one routine every path into a terminal status goes through
 *		(contract D1), and the cascade that ends a whole subtree (D13, D14).
 *
 *		gd_settle runs, in the transaction that wrote the terminal statuses
 *		(which also cleared the claims):
 *		- the purge of the instances' inboxes (I-27), and a wake-up of their
 *		  await() callers after commit;
 *		- the join (§6.6, I-26): one aggregated decrement per parent and
 *		  round, parents locked in id order; only children of the parent's
 *		  current round count.  A parent in awaiting_children wakes when its
 *		  count reaches zero, or at once when a child of a first_error round
 *		  failed; then every live sibling of that round (and its
 *		  descendants) is cancelled in the same transaction, and those go
 *		  through this routine in turn.  A parent wakes once: only the
 *		  transition out of awaiting_children wakes it.
 *
 *		gd_end_trees ends instances and all their live descendants (cancel,
 *		fail, first_error): the roots' parents are locked first, then the
 *		subtrees in id order (top-down: children have larger ids than their
 *		parents), the same order as flush (parents, then entries), so these
 *		paths cannot deadlock with each other.
 *
 * IDENTIFICATION
 *		src/settle.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "aftercommit.h"
#include "settle.h"
#include "spi_util.h"

static GdPlan purge_plan = {
	"DELETE FROM gen_durable.signals WHERE target_id = ANY ($1)",
	1,
	{INT8ARRAYOID}
};

static GdPlan join_plan = {
	"WITH c AS ("
	"  SELECT parent, round, pg_catalog.count(*)::int AS cnt, pg_catalog.bool_or(failed) AS failed"
	"    FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::int4[]),"
	"                    pg_catalog.unnest($3::bool[])) AS x(parent, round, failed)"
	"   GROUP BY parent, round"
	"), l AS ("
	"  SELECT p.id, c.cnt, c.failed, p.status AS was, p.children_pending AS pending,"
	"         p.join_policy FROM ONLY gen_durable.instances p"
	"    JOIN c ON c.parent = p.id AND c.round = p.spawn_round"
	"   ORDER BY p.id FOR NO KEY UPDATE OF p"
	"), w AS ("
	"  SELECT l.*, l.was = 'awaiting_children'"
	"              AND (l.pending - l.cnt <= 0"
	"                   OR (l.failed AND l.join_policy = 'first_error')) AS wake"
	"    FROM l"
	")"
	"UPDATE ONLY gen_durable.instances p"
	"   SET children_pending = GREATEST(p.children_pending - w.cnt, 0),"
	"       status = CASE WHEN w.wake THEN 'runnable' ELSE p.status END,"
	"       eligible_at = CASE WHEN w.wake THEN $4 ELSE p.eligible_at END,"
	"       updated_at = $4"
	"  FROM w"
	" WHERE p.id = w.id AND p.status NOT IN ('done', 'failed', 'cancelled')"
	" RETURNING p.id, p.queue, w.wake, w.wake AND w.failed AND p.join_policy = 'first_error',"
	"           p.spawn_round",
	4,
	{INT8ARRAYOID, INT4ARRAYOID, BOOLARRAYOID, TIMESTAMPTZOID}
};

/* the live children of the rounds whose first child failed */
static GdPlan round_plan = {
	"SELECT i.id FROM ONLY gen_durable.instances i"
	"  JOIN ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::int4[]))"
	"       AS r(parent, round) ON i.parent_id = r.parent AND i.parent_round = r.round"
	" WHERE i.status NOT IN ('done', 'failed', 'cancelled')",
	2,
	{INT8ARRAYOID, INT4ARRAYOID}
};

/* the parents of the roots of a cascade, locked before the subtrees */
static GdPlan lock_parents_plan = {
	"SELECT id FROM ONLY gen_durable.instances"
	" WHERE id = ANY (ARRAY(SELECT parent_id FROM ONLY gen_durable.instances"
	"                        WHERE id = ANY ($1) AND parent_id IS NOT NULL))"
	" ORDER BY id FOR NO KEY UPDATE",
	1,
	{INT8ARRAYOID}
};

/*
 * The roots and their live descendants, locked top-down in id order and
 * ended: roots failed (fail) or cancelled, descendants cancelled.  A row
 * terminal in the snapshot stays terminal, so filtering on status while
 * locking skips nothing that matters.
 */
static GdPlan end_trees_plan = {
	"WITH RECURSIVE tree AS ("
	"  SELECT i.id, true AS root FROM ONLY gen_durable.instances i"
	"   WHERE i.id = ANY ($1) AND i.status NOT IN ('done', 'failed', 'cancelled')"
	"  UNION ALL"
	"  SELECT c.id, false FROM ONLY gen_durable.instances c JOIN tree t ON c.parent_id = t.id"
	"   WHERE c.status NOT IN ('done', 'failed', 'cancelled')"
	"), l AS ("
	"  SELECT i.id, t.root, i.concurrency_key, i.concurrency_shard"
	"    FROM ONLY gen_durable.instances i JOIN tree t ON t.id = i.id"
	"   ORDER BY i.id FOR NO KEY UPDATE OF i"
	")"
	"UPDATE ONLY gen_durable.instances i"
	"   SET status = CASE WHEN l.root AND $2 THEN 'failed' ELSE 'cancelled' END::gen_durable.status,"
	"       error = pg_catalog.jsonb_build_object("
	"                 'reason', CASE WHEN l.root AND $2 THEN 'failed' ELSE 'cancelled' END,"
	"                 'message', CASE WHEN l.root THEN $3 ELSE 'an ancestor ended' END),"
	"       locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL,"
	"       awaits = NULL, await_deadline = NULL, presented = NULL,"
	"       timed_out = false, claim_session = NULL, updated_at = $4"
	"  FROM l"
	" WHERE i.id = l.id AND i.status NOT IN ('done', 'failed', 'cancelled')"
	" RETURNING i.id, i.parent_id, i.parent_round, i.status = 'failed', i.queue,"
	"           i.concurrency_key IS NOT NULL, l.concurrency_key, l.concurrency_shard",
	4,
	{INT8ARRAYOID, BOOLOID, TEXTOID, TIMESTAMPTZOID}
};

/*
 * The live children of instances just ended.  end_trees_plan finds a
 * subtree on the snapshot it started with, before it waited for locks; a
 * spawn that committed while it waited added children it cannot see.  A
 * new statement sees them (the spawn locked its parent, which is ended and
 * locked by now, so no later spawn can add more).
 */
static GdPlan live_children_plan = {
	"SELECT id FROM ONLY gen_durable.instances"
	" WHERE parent_id = ANY ($1) AND status NOT IN ('done', 'failed', 'cancelled')",
	1,
	{INT8ARRAYOID}
};

/*
 * gd_settled_init prepares an empty set with room for cap instances; the
 * gate slots of the rows its cascades end are added to slots, which the
 * caller credits before it commits.
 */
void
gd_settled_init(Settled *s, int cap, HeldSlots *slots)
{
	s->slots = slots;
	s->cap = Max(cap, 1);
	s->n = 0;
	s->ids = palloc(sizeof(int64) * s->cap);
	s->parents = palloc(sizeof(int64) * s->cap);
	s->rounds = palloc(sizeof(int32) * s->cap);
	s->failed = palloc(sizeof(bool) * s->cap);
}

/*
 * gd_settled_add records one instance that became terminal.
 */
void
gd_settled_add(Settled *s, int64 id, int64 parent, int32 round, bool failed)
{
	if (s->n == s->cap)
	{
		s->cap *= 2;
		s->ids = repalloc(s->ids, sizeof(int64) * s->cap);
		s->parents = repalloc(s->parents, sizeof(int64) * s->cap);
		s->rounds = repalloc(s->rounds, sizeof(int32) * s->cap);
		s->failed = repalloc(s->failed, sizeof(bool) * s->cap);
	}
	s->ids[s->n] = id;
	s->parents[s->n] = parent;
	s->rounds[s->n] = round;
	s->failed[s->n] = failed;
	s->n++;
}

/*
 * gd_lock_parents locks the parents of some instances, in id order, before
 * the caller locks the instances themselves: the order every flush uses.
 */
void
gd_lock_parents(int64 *ids, int n)
{
	Datum		values[1];

	values[0] = PointerGetDatum(gd_int8_array(ids, n));
	gd_execute(&lock_parents_plan, values, NULL, SPI_OK_SELECT);
}

/*
 * gd_end_trees ends the roots and their live descendants in one statement
 * (after locking the roots' parents) and adds them to out; the caller
 * settles out.  Returns how many were ended.  SPI must be connected.
 */
int
gd_end_trees(int64 *roots, int nroots, bool fail_roots, const char *reason,
			 TimestampTz now, Settled *out)
{
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	int			rows;
	int			i;
	int			first = out->n;
	int			late;
	int64	   *orphans;

	if (nroots == 0)
		return 0;
	gd_lock_parents(roots, nroots);
	values[0] = PointerGetDatum(gd_int8_array(roots, nroots));

	values[1] = BoolGetDatum(fail_roots);
	values[2] = reason ? CStringGetTextDatum(reason) : (Datum) 0;
	nulls[2] = reason ? ' ' : 'n';
	values[3] = TimestampTzGetDatum(now);
	rows = gd_execute(&end_trees_plan, values, nulls, SPI_OK_UPDATE_RETURNING);
	for (i = 0; i < rows; i++)
	{
		bool		isnull;
		bool		noparent;
		Datum		parent = gd_result_datum(i, 2, &noparent);
		Datum		round = gd_result_datum(i, 3, &isnull);

		bool		failed = DatumGetBool(gd_result_datum(i, 4, &isnull));

		gd_settled_add(out, gd_result_int64(i, 1),
					   noparent ? 0 : DatumGetInt64(parent),
					   noparent ? 0 : DatumGetInt32(round), failed);
		if (!failed)
			gd_count(GD_STAT_CANCELLED, 1);
		gd_slots_add_result(out->slots, i, 7, 8);
		/* a freed concurrency key lets the queue's next row with it run */
		if (DatumGetBool(gd_result_datum(i, 6, &isnull)))
			gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 5));
	}
	/* children that a spawn committed while this statement waited */
	if (rows == 0)
		return 0;
	values[0] = PointerGetDatum(gd_int8_array(out->ids + first, out->n - first));
	late = gd_execute(&live_children_plan, values, NULL, SPI_OK_SELECT);
	if (late == 0)
		return rows;
	orphans = palloc(sizeof(int64) * late);
	for (i = 0; i < late; i++)
		orphans[i] = gd_result_int64(i, 1);
	return rows + gd_end_trees(orphans, late, false, "an ancestor ended", now, out);
}

/*
 * settle_once runs the riders of one set: purge, awaiter wake-ups and the
 * join; the siblings a first_error join cancels are added to next.
 */
static void
settle_once(Settled *s, TimestampTz now, Settled *next)
{
	Datum		values[4];
	int64	   *parents;
	int32	   *rounds;
	bool	   *failed;
	int			nparents = 0;
	int			rows;
	int			i;

	values[0] = PointerGetDatum(gd_int8_array(s->ids, s->n));
	gd_execute(&purge_plan, values, NULL, SPI_OK_DELETE);
	for (i = 0; i < s->n; i++)
		gd_instance_settled(s->ids[i]);

	parents = palloc(sizeof(int64) * s->n);
	rounds = palloc(sizeof(int32) * s->n);
	failed = palloc(sizeof(bool) * s->n);
	for (i = 0; i < s->n; i++)
		if (s->parents[i] != 0)
		{
			parents[nparents] = s->parents[i];
			rounds[nparents] = s->rounds[i];
			failed[nparents] = s->failed[i];
			nparents++;
		}
	if (nparents == 0)
		return;

	{
		Datum	   *r = palloc(sizeof(Datum) * nparents);
		Datum	   *f = palloc(sizeof(Datum) * nparents);
		int64	   *cascade_parent;
		Datum	   *cascade_round;
		int			ncascade = 0;

		for (i = 0; i < nparents; i++)
		{
			r[i] = Int32GetDatum(rounds[i]);
			f[i] = BoolGetDatum(failed[i]);
		}
		values[0] = PointerGetDatum(gd_int8_array(parents, nparents));
		values[1] = PointerGetDatum(gd_array(r, NULL, nparents, INT4OID));
		values[2] = PointerGetDatum(gd_array(f, NULL, nparents, BOOLOID));
		values[3] = TimestampTzGetDatum(now);
		rows = gd_execute(&join_plan, values, NULL, SPI_OK_UPDATE_RETURNING);
		cascade_parent = palloc(sizeof(int64) * Max(rows, 1));
		cascade_round = palloc(sizeof(Datum) * Max(rows, 1));
		for (i = 0; i < rows; i++)
		{
			bool		isnull;

			if (DatumGetBool(gd_result_datum(i, 3, &isnull)))
				gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
			if (DatumGetBool(gd_result_datum(i, 4, &isnull)))
			{
				cascade_parent[ncascade] = gd_result_int64(i, 1);
				cascade_round[ncascade] = Int32GetDatum((int32) gd_result_int64(i, 5));
				ncascade++;
			}
		}

		/* first_error: the live siblings of the failed children's rounds */
		if (ncascade > 0)
		{
			Datum		rv[2];
			int64	   *siblings;
			int			nsiblings;
			int			k;

			rv[0] = PointerGetDatum(gd_int8_array(cascade_parent, ncascade));
			rv[1] = PointerGetDatum(gd_array(cascade_round, NULL, ncascade, INT4OID));
			nsiblings = gd_execute(&round_plan, rv, NULL, SPI_OK_SELECT);
			siblings = palloc(sizeof(int64) * Max(nsiblings, 1));
			for (k = 0; k < nsiblings; k++)
				siblings[k] = gd_result_int64(k, 1);
			gd_end_trees(siblings, nsiblings, false, "a sibling failed (first_error)",
						 now, next);
		}
	}
}

/*
 * gd_settle runs the riders of a terminal transition for every recorded
 * instance, and for the siblings a first_error join cancels, until nothing
 * is left.  A fixed number of statements per level of cascade, whatever
 * the number of instances.  Returns how many instances the cascades
 * cancelled.  SPI must be connected.
 */
int
gd_settle(Settled *s, TimestampTz now)
{
	Settled		current = *s;
	int			cascaded = 0;

	while (current.n > 0)
	{
		Settled		next;

		gd_settled_init(&next, 8, current.slots);
		settle_once(&current, now, &next);
		cascaded += next.n;
		current = next;
	}
	return cascaded;
}
