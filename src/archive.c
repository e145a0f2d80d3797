/*-------------------------------------------------------------------------
 *
 * archive.c
 *		The archive of finished instances (0.9.0, docs/contract.md §10.5,
 *		D22).
 *
 *		A finished job used to stay in gen_durable.instances: its last
 *		update was a non-HOT rewrite of a wide row, GC deleted it row by row
 *		later, and vacuum cleaned up both versions, scanning a table that
 *		held every job of the retention.  Now the flush that ends a plain
 *		instance moves it (flush.c, MOVES) into the open one of eight
 *		segments, gen_durable.finished_0 .. finished_7, tables that inherit
 *		from gen_durable.instances, so that every query of that table still
 *		sees the finished row.  A segment is never updated or deleted from:
 *		it is emptied whole, by TRUNCATE.
 *
 *		gen_durable.finished_segments says, per segment, when it was opened
 *		and closed; empty segments have neither time.  A flush writes the
 *		newest open segment.  Each maintenance round (gd_archive_sweep):
 *		- closes every open segment but the newest: the newest was opened
 *		  by an earlier, committed round that this one sees, so every flush
 *		  that still read an older one as the newest read it before now,
 *		  and wrote rows whose updated_at (the flush's start) is older;
 *		- truncates every closed segment closed longer ago than the
 *		  retention: each of its rows is older than that;
 *		- opens the next segment once the newest has been open for a
 *		  quarter of the retention, when the next one is empty (else the
 *		  newest stays open, and its rows are kept longer).
 *		So a finished row is kept for at least the retention and at most
 *		about 1.25 times it plus a round, and at most seven segments hold
 *		rows.  The times are read off the clock after the round's snapshot,
 *		so that they follow every commit the round sees.
 *		TRUNCATE needs an exclusive lock on its segment, which readers of
 *		gen_durable.instances share; the sweep takes it only when it is free
 *		at once, and otherwise tries again next round, so that it neither
 *		waits nor queues the readers behind it.  Flushes write the newest
 *		segment only, never one being truncated.
 *
 * IDENTIFICATION
 *		src/archive.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "archive.h"
#include "spi_util.h"

bool		gen_durable_archive_finished = true;

/* the open segment; none on a schema older than 0.9.0 (never prepared) */
static GdPlan open_plan = {
	"SELECT segment FROM gen_durable.finished_segments"
	" WHERE opened_at IS NOT NULL AND closed_at IS NULL"
	" ORDER BY opened_at DESC LIMIT 1",
	0,
	{InvalidOid}
};

/* every segment, locked against a concurrent sweep */
static GdPlan segments_plan = {
	"SELECT segment, opened_at, closed_at FROM gen_durable.finished_segments"
	" ORDER BY segment FOR UPDATE SKIP LOCKED",
	0,
	{InvalidOid}
};

static GdPlan set_plan = {
	"UPDATE gen_durable.finished_segments SET opened_at = $2, closed_at = $3"
	" WHERE segment = $1",
	3,
	{INT2OID, TIMESTAMPTZOID, TIMESTAMPTZOID}
};

/*
 * gd_archive_define_gucs defines gen_durable.archive_finished.
 */
void
gd_archive_define_gucs(void)
{
	DefineCustomBoolVariable("gen_durable.archive_finished",
							 "Moves a plain instance that ends done out of the live table, into the archive.",
							 "Off keeps it in gen_durable.instances, where GC deletes it row by row, as before 0.9.0.",
							 &gen_durable_archive_finished,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
}

/*
 * schema_has_archive says whether the installed schema has the archive
 * (0.9.0); an older one, between a restart on this library and ALTER
 * EXTENSION UPDATE, is served without it.
 */
static bool
schema_has_archive(void)
{
	Oid			nsp = get_namespace_oid("gen_durable", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("finished_segments", nsp));
}

/*
 * gd_archive_open_segment returns the number of the open segment, or -1
 * when finished instances stay in the live table (archiving is off, or
 * the schema predates it).  SPI must be connected.
 */
int
gd_archive_open_segment(void)
{
	bool		isnull;
	Datum		seg;

	if (!gen_durable_archive_finished || !schema_has_archive())
		return -1;
	if (gd_execute(&open_plan, NULL, NULL, SPI_OK_SELECT) == 0)
		return -1;
	seg = gd_result_datum(0, 1, &isnull);
	return DatumGetInt16(seg);
}

/*
 * set_segment writes one segment's times (0: NULL).
 */
static void
set_segment(int seg, TimestampTz opened, TimestampTz closed)
{
	Datum		values[3];
	char		nulls[3] = {' ', opened == 0 ? 'n' : ' ', closed == 0 ? 'n' : ' '};

	values[0] = Int16GetDatum((int16) seg);
	values[1] = TimestampTzGetDatum(opened);
	values[2] = TimestampTzGetDatum(closed);
	gd_execute(&set_plan, values, nulls, SPI_OK_UPDATE);
}

/*
 * truncate_segment empties one segment when its lock is free at once;
 * returns whether it did.  The inbox and step history of its instances go
 * first (no foreign keys): an inbox is purged when its instance ends, but
 * an instance whose queue recorded history for its earlier steps and no
 * longer does moves with those rows.  *rows gets how many instances went,
 * as the table statistics count them (a segment is only ever inserted
 * into, and every insert committed long before it closed).
 */
static bool
truncate_segment(Oid nsp, int seg, int64 *rows)
{
	char		name[NAMEDATALEN];
	Oid			relid;

	snprintf(name, sizeof(name), "finished_%d", seg);
	relid = get_relname_relid(name, nsp);
	if (!OidIsValid(relid))
		elog(ERROR, "gen_durable.%s does not exist", name);
	if (!ConditionalLockRelationOid(relid, AccessExclusiveLock))
		return false;
	*rows = DatumGetInt64(DirectFunctionCall1(pg_stat_get_live_tuples, ObjectIdGetDatum(relid)));
	if (SPI_execute(psprintf("WITH h AS (DELETE FROM gen_durable.step_history h"
							 "             USING gen_durable.%s f WHERE h.instance_id = f.id)"
							 "DELETE FROM gen_durable.signals s"
							 " USING gen_durable.%s f WHERE s.target_id = f.id",
							 name, name), false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete what gen_durable.%s's instances left", name);
	if (SPI_execute(psprintf("TRUNCATE ONLY gen_durable.%s", name), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not truncate gen_durable.%s", name);
	set_segment(seg, 0, 0);
	return true;
}

/*
 * gd_archive_sweep runs one round of the archive's rotation (see the file
 * header) with the given retention, and returns how many segments it
 * emptied; *rows gets how many instances went with them.  Nothing when the
 * schema predates the archive, or another sweep holds the segments right
 * now.  SPI must be connected.
 */
int
gd_archive_sweep(int retention_seconds, int64 *rows)
{
	TimestampTz opened[GD_ARCHIVE_SEGMENTS];
	TimestampTz closed[GD_ARCHIVE_SEGMENTS];
	TimestampTz width = (TimestampTz) retention_seconds * USECS_PER_SEC / 4;
	TimestampTz clock;
	Oid			nsp;
	int			newest = -1;
	int			truncated = 0;
	int64		gone = 0;
	int			next;
	int			i;

	if (!schema_has_archive())
		return 0;
	nsp = get_namespace_oid("gen_durable", false);
	if (gd_execute(&segments_plan, NULL, NULL, SPI_OK_SELECT) != GD_ARCHIVE_SEGMENTS)
		return 0;
	clock = GetCurrentTimestamp();
	for (i = 0; i < GD_ARCHIVE_SEGMENTS; i++)
	{
		bool		isnull;
		Datum		d;

		if (DatumGetInt16(gd_result_datum(i, 1, &isnull)) != i)
			elog(ERROR, "gen_durable.finished_segments is not segments 0 to %d",
				 GD_ARCHIVE_SEGMENTS - 1);
		d = gd_result_datum(i, 2, &isnull);
		opened[i] = isnull ? 0 : DatumGetTimestampTz(d);
		d = gd_result_datum(i, 3, &isnull);
		closed[i] = isnull ? 0 : DatumGetTimestampTz(d);
		if (opened[i] != 0 && closed[i] == 0 && (newest < 0 || opened[i] > opened[newest]))
			newest = i;
	}

	for (i = 0; i < GD_ARCHIVE_SEGMENTS; i++)
	{
		if (opened[i] != 0 && closed[i] == 0 && i != newest)
		{
			closed[i] = clock;
			set_segment(i, opened[i], clock);
		}
		else if (closed[i] != 0 &&
				 closed[i] < clock - (TimestampTz) retention_seconds * USECS_PER_SEC &&
				 truncate_segment(nsp, i, &gone))
		{
			*rows += gone;
			opened[i] = closed[i] = 0;
			truncated++;
		}
	}

	if (newest < 0)
	{
		/* none open (the table was edited by hand): open the first empty one */
		for (i = 0; i < GD_ARCHIVE_SEGMENTS && opened[i] != 0; i++)
			;
		if (i < GD_ARCHIVE_SEGMENTS)
			set_segment(i, clock, 0);
		return truncated;
	}
	next = (newest + 1) % GD_ARCHIVE_SEGMENTS;
	if (opened[newest] <= clock - width && opened[next] == 0)
		set_segment(next, clock, 0);
	return truncated;
}
