/*-------------------------------------------------------------------------
 *
 * settle.c
 *		The one routine every path into a terminal status goes through
 *		(SEMANTICS D1): flush done/fail, the step budget, attempts running
 *		out, the reaper giving up and cancel().
 *
 *		The caller has already written the terminal status (which also
 *		cleared the claim); gd_settle then, in the same transaction, purges
 *		the instances' inboxes (I-27) and counts them into their parents'
 *		joins (§6.6): one aggregated decrement per parent, parents locked in
 *		id order, a parent waking from awaiting_children when its count
 *		reaches zero (its queue's pickers are woken after commit), and
 *		await() callers of the instances are woken after commit.  Slot
 *		credits join this routine with the limiter.
 *
 * IDENTIFICATION
 *		src/settle.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"

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
	"  SELECT parent, pg_catalog.count(*)::int AS cnt"
	"    FROM pg_catalog.unnest($1::int8[]) AS parent GROUP BY parent"
	"), l AS ("
	"  SELECT p.id, c.cnt, p.status AS was FROM gen_durable.instances p"
	"    JOIN c ON c.parent = p.id"
	"   ORDER BY p.id FOR NO KEY UPDATE OF p"
	")"
	"UPDATE gen_durable.instances p"
	"   SET children_pending = p.children_pending - l.cnt,"
	"       status = CASE WHEN p.status = 'awaiting_children'"
	"                      AND p.children_pending - l.cnt <= 0"
	"                     THEN 'runnable' ELSE p.status END,"
	"       eligible_at = CASE WHEN p.status = 'awaiting_children'"
	"                           AND p.children_pending - l.cnt <= 0"
	"                          THEN $2 ELSE p.eligible_at END,"
	"       updated_at = $2"
	"  FROM l"
	" WHERE p.id = l.id AND p.status NOT IN ('done', 'failed', 'cancelled')"
	" RETURNING p.queue, l.was = 'awaiting_children' AND p.status = 'runnable'",
	2,
	{INT8ARRAYOID, TIMESTAMPTZOID}
};

/*
 * gd_settled_init prepares an empty set with room for cap instances.
 */
void
gd_settled_init(Settled *s, int cap)
{
	s->cap = Max(cap, 1);
	s->n = 0;
	s->ids = palloc(sizeof(int64) * s->cap);
	s->parents = palloc(sizeof(int64) * s->cap);
}

/*
 * gd_settled_add records one instance that became terminal.
 */
void
gd_settled_add(Settled *s, int64 id, int64 parent)
{
	if (s->n == s->cap)
	{
		s->cap *= 2;
		s->ids = repalloc(s->ids, sizeof(int64) * s->cap);
		s->parents = repalloc(s->parents, sizeof(int64) * s->cap);
	}
	s->ids[s->n] = id;
	s->parents[s->n] = parent;
	s->n++;
}

/*
 * gd_settle runs the riders of a terminal transition for every recorded
 * instance: at most two statements whatever their number.  SPI must be
 * connected.
 */
void
gd_settle(Settled *s, TimestampTz now)
{
	Datum		values[2];
	char		nulls[2] = {' ', ' '};
	int64	   *parents;
	int			nparents = 0;
	int			rows;
	int			i;

	if (s->n == 0)
		return;

	values[0] = PointerGetDatum(gd_int8_array(s->ids, s->n));
	gd_execute(&purge_plan, values, nulls, SPI_OK_DELETE);
	for (i = 0; i < s->n; i++)
		gd_instance_settled(s->ids[i]);

	parents = palloc(sizeof(int64) * s->n);
	for (i = 0; i < s->n; i++)
		if (s->parents[i] != 0)
			parents[nparents++] = s->parents[i];
	if (nparents > 0)
	{
		values[0] = PointerGetDatum(gd_int8_array(parents, nparents));
		values[1] = TimestampTzGetDatum(now);
		rows = gd_execute(&join_plan, values, nulls, SPI_OK_UPDATE_RETURNING);
		for (i = 0; i < rows; i++)
		{
			bool		isnull;

			if (DatumGetBool(gd_result_datum(i, 2, &isnull)))
				gd_queue_runnable(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		}
	}
}
