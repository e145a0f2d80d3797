/*-------------------------------------------------------------------------
 *
 * pick_memory.c
 *		The memory path of pick (0.8.0): plain instances are claimed in the
 *		shared claim table, and nothing is written to their rows.
 *
 *		One statement scans the due plain rows of the queue in priority
 *		order (instances_pick_plain) and claims them as it goes: its
 *		filter _take_in_memory(id, ctid, xmin, claim) takes the row's claim
 *		(claims.c: one entry per instance, so of two picks of a row one
 *		wins, and the loser's scan moves on to the next row, as SKIP LOCKED
 *		does), and then looks at the row version on its page: if a
 *		transaction has updated, deleted or locked it since the statement's
 *		snapshot, or is doing so now, the claim is given back and the row
 *		skipped.  That check is what keeps a pick whose snapshot predates a
 *		committed flush from claiming the row again: the flush removes its
 *		claim only after its commit, when the old version already carries
 *		the flush's xmax.  And because the claim is taken before the row's
 *		lock is looked at, while a pick that claims on the row locks the
 *		row before it probes the claim table (pick.c), one of two
 *		concurrent picks of a row always sees the other.
 *
 *		The LIMIT stops the scan once the batch is claimed, and the job
 *		columns are computed for the claimed rows only.  Should the
 *		executor evaluate the filter on a row it then does not return (a
 *		plan other than the index scan), that claim is given back after
 *		the statement: a pick keeps exactly the claims of the rows it
 *		returns.
 *
 * IDENTIFICATION
 *		src/pick_memory.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "claim_log.h"
#include "claims.h"
#include "job.h"
#include "pick_index.h"
#include "pick_memory.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_take_in_memory);

/* the candidate statement's columns after the job's (GD_JOB_NAMES) */
enum
{
	MC_LEASE = GD_JOB_NCOLS - 1,	/* the job's lease_expires_at */
	MC_CLAIM = GD_JOB_NCOLS,	/* the job's claim: the row's recorded number */
	MC_PRIORITY,
	MC_ELIGIBLE_AT
};

static GdPlan take_plan = {
	"SELECT " GD_JOB_COLUMNS("i") ", i.priority, i.eligible_at"
	"  FROM ONLY gen_durable.instances i"
	" WHERE i.queue = $1 AND i.status = 'runnable' AND i.eligible_at <= $2"
	"   AND " GD_PLAIN_ROW("i")
	"   AND NOT EXISTS (SELECT 1 FROM gen_durable.queue_settings q"
	"                    WHERE q.queue = $1 AND q.paused_at IS NOT NULL)"
	"   AND ($4::text[] IS NULL OR i.fsm = ANY ($4))"
	"   AND gen_durable._take_in_memory(i.id, i.ctid, i.xmin, i.claim)"
	" ORDER BY i.priority, i.eligible_at"
	" LIMIT $3",
	4,
	{TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTARRAYOID}
};

/*
 * The pick the take function works for while take_plan runs (the function
 * does nothing outside one): who claims, until when, and the claims it
 * took, by id, with their numbers.
 */
typedef struct TakeContext
{
	bool		active;
	const char *worker;
	int64		session;
	TimestampTz now;
	TimestampTz lease;
	Relation	rel;			/* gen_durable.instances, open */
	bool		full;			/* the claim table had no room */
	int			n;
	int			max;
	int64	   *ids;
	int64	   *claims;
	ItemPointerData *tids;
} TakeContext;

static TakeContext take = {false};

/*
 * instances_relation opens gen_durable.instances (take_plan holds its lock
 * already, or is about to).
 */
static Relation
instances_relation(void)
{
	Oid			nsp = get_namespace_oid("gen_durable", false);
	Oid			relid = get_relname_relid("instances", nsp);

	if (!OidIsValid(relid))
		elog(ERROR, "gen_durable.instances does not exist");
	return table_open(relid, AccessShareLock);
}

/*
 * version_unchanged says whether the row version at tid, with that xmin, is
 * still the latest and nobody is changing or locking it: no update or
 * delete committed since the statement's snapshot, none in progress, no
 * row lock held.
 */
static bool
version_unchanged(Relation rel, ItemPointer tid, TransactionId xmin)
{
	Buffer		buf;
	Page		page;
	OffsetNumber off = ItemPointerGetOffsetNumber(tid);
	bool		ok = false;

	buf = ReadBuffer(rel, ItemPointerGetBlockNumber(tid));
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (off >= FirstOffsetNumber && off <= PageGetMaxOffsetNumber(page))
	{
		ItemId		lp = PageGetItemId(page, off);

		if (ItemIdIsNormal(lp))
		{
			HeapTupleData tup;

			tup.t_data = (HeapTupleHeader) PageGetItem(page, lp);
			tup.t_len = ItemIdGetLength(lp);
			tup.t_tableOid = RelationGetRelid(rel);
			tup.t_self = *tid;
			ok = (TransactionIdEquals(HeapTupleHeaderGetRawXmin(tup.t_data), xmin) ||
				  TransactionIdEquals(HeapTupleHeaderGetXmin(tup.t_data), xmin)) &&
				HeapTupleSatisfiesUpdate(&tup, GetCurrentCommandId(false), buf) == TM_Ok;
		}
	}
	UnlockReleaseBuffer(buf);
	return ok;
}

/*
 * gen_durable_take_in_memory implements gen_durable._take_in_memory(id,
 * ctid, xmin, claim), take_plan's filter: claims one candidate row for the
 * running pick; false when another pick has it, the row version changed,
 * the table is full, or no pick is running.
 */
Datum
gen_durable_take_in_memory(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	ItemPointer tid = (ItemPointer) PG_GETARG_POINTER(1);
	TransactionId xmin = DatumGetTransactionId(PG_GETARG_DATUM(2));
	int64		claim;

	gd_claim_debug_pause();
	if (!take.active || take.full)
		PG_RETURN_BOOL(false);
	switch (gd_claim_take(id, tid, PG_GETARG_INT64(3), take.worker, take.session,
						  take.now, take.lease, &claim))
	{
		case GD_TAKE_OK:
			break;
		case GD_TAKE_FULL:
			take.full = true;
			PG_RETURN_BOOL(false);
		case GD_TAKE_HELD:
			PG_RETURN_BOOL(false);
	}
	if (!version_unchanged(take.rel, tid, xmin))
	{
		gd_claim_untake(id);
		PG_RETURN_BOOL(false);
	}
	if (take.n == take.max)
	{
		take.max *= 2;
		take.ids = repalloc(take.ids, sizeof(int64) * take.max);
		take.claims = repalloc(take.claims, sizeof(int64) * take.max);
		take.tids = repalloc(take.tids, sizeof(ItemPointerData) * take.max);
	}
	take.ids[take.n] = id;
	take.tids[take.n] = *tid;
	take.claims[take.n++] = claim;
	PG_RETURN_BOOL(true);
}

/*
 * claim_of finds the claim number the take function recorded for an id,
 * and the row version it claimed (*tid), looking first at position hint
 * (with the index scan, the filter runs on the rows in the order they are
 * returned), and marks it kept (-1); 0 when it took none.
 */
static int64
claim_of(int64 id, int hint, ItemPointer tid)
{
	int64		claim;
	int			i = hint;

	if (hint >= take.n || take.ids[hint] != id)
	{
		for (i = 0; i < take.n && take.ids[i] != id; i++)
			;
		if (i == take.n)
			return 0;
	}
	claim = take.claims[i];
	*tid = take.tids[i];
	take.ids[i] = -1;
	return claim;
}

/*
 * gd_memory_claim claims in memory, for worker with session, up to batch
 * plain rows of the queue due at now, of the machines in fsms (0: any),
 * each with the lease, into mc, most urgent first.  *full tells that the
 * claim table ran out of room.
 */
void
gd_memory_claim(GdMemoryCandidates *mc, const char *queue, TimestampTz now,
				int batch, Datum fsms, const char *worker, int64 session,
				TimestampTz lease, bool *full)
{
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	int			r;

	values[0] = CStringGetTextDatum(queue);
	values[1] = TimestampTzGetDatum(now);
	values[2] = Int32GetDatum(batch);
	values[3] = fsms;
	nulls[3] = fsms ? ' ' : 'n';
	memset(mc, 0, sizeof(*mc));
	mc->lease = lease;

	take.worker = worker;
	take.session = session;
	take.now = now;
	take.lease = lease;
	take.full = false;
	take.n = 0;
	take.max = Max(batch, 16);
	take.ids = palloc(sizeof(int64) * take.max);
	take.claims = palloc(sizeof(int64) * take.max);
	take.tids = palloc(sizeof(ItemPointerData) * take.max);
	take.rel = instances_relation();
	take.active = true;
	PG_TRY();
	{
		mc->n = gd_execute(&take_plan, values, nulls, SPI_OK_SELECT);
	}
	PG_FINALLY();
	{
		take.active = false;
	}
	PG_END_TRY();
	table_close(take.rel, AccessShareLock);
	*full = take.full;

	mc->rows = SPI_tuptable;
	mc->priority = palloc(sizeof(int16) * Max(mc->n, 1));
	mc->eligible_at = palloc(sizeof(TimestampTz) * Max(mc->n, 1));
	mc->id = palloc(sizeof(int64) * Max(mc->n, 1));
	mc->claim = palloc(sizeof(int64) * Max(mc->n, 1));
	mc->tid = palloc(sizeof(ItemPointerData) * Max(mc->n, 1));
	for (r = 0; r < mc->n; r++)
	{
		bool		isnull;
		HeapTuple	tup = mc->rows->vals[r];
		TupleDesc	desc = mc->rows->tupdesc;

		mc->id[r] = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		mc->priority[r] = DatumGetInt16(SPI_getbinval(tup, desc, MC_PRIORITY, &isnull));
		mc->eligible_at[r] = DatumGetTimestampTz(SPI_getbinval(tup, desc, MC_ELIGIBLE_AT, &isnull));
		mc->claim[r] = claim_of(mc->id[r], r, &mc->tid[r]);
		if (mc->claim[r] == 0)
			elog(ERROR, "pick returned instance " INT64_FORMAT " without claiming it",
				 mc->id[r]);
	}
	/* claims taken on rows the statement did not return */
	for (r = 0; r < take.n; r++)
		if (take.ids[r] != -1)
			gd_claim_untake(take.ids[r]);
}

/*
 * gd_memory_release gives back the claim of a row of mc the pick does not
 * hand out after all (the batch filled up with more urgent rows claimed
 * on their rows).
 */
void
gd_memory_release(GdMemoryCandidates *mc, int row)
{
	gd_claim_untake(mc->id[row]);
	mc->claim[row] = 0;
}

/*
 * gd_memory_log writes the WAL record of the claims of mc the pick hands
 * out (claim_log.c), with the worker and session that hold them.
 */
void
gd_memory_log(GdMemoryCandidates *mc, const char *worker, int64 session, TimestampTz now)
{
	int64	   *ids = palloc(sizeof(int64) * Max(mc->n, 1));
	ItemPointerData *tids = palloc(sizeof(ItemPointerData) * Max(mc->n, 1));
	int			n = 0;
	int			r;

	for (r = 0; r < mc->n; r++)
		if (mc->claim[r] != 0)
		{
			ids[n] = mc->id[r];
			tids[n++] = mc->tid[r];
		}
	gd_claim_log_taken(worker, session, now, ids, tids, n);
}

/*
 * gd_memory_emit appends the job of a claimed row to the SRF's result,
 * with its claim's number and lease.
 */
void
gd_memory_emit(GdMemoryCandidates *mc, int row, ReturnSetInfo *rsinfo)
{
	Datum		values[GD_JOB_NCOLS];
	bool		nulls[GD_JOB_NCOLS];

	gd_job_values(rsinfo, mc->rows, row, values, nulls);
	values[MC_LEASE - 1] = TimestampTzGetDatum(mc->lease);
	nulls[MC_LEASE - 1] = false;
	values[MC_CLAIM - 1] = Int64GetDatum(mc->claim[row]);
	nulls[MC_CLAIM - 1] = false;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}
