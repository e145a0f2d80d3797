/*-------------------------------------------------------------------------
 *
 * claim_log.c
 *		The WAL records of claims kept in memory, and their replay: what
 *		makes a claim that existed only in memory count an attempt after a
 *		crash or a failover, as a claim written to its row does.
 *
 *		A pick that claims in memory logs one record (GD_CLAIMS_TAKEN: the
 *		database, the worker, its session, the time and each claim's
 *		instance id and row version), and a release one record of the
 *		instances it handed back (GD_CLAIMS_RELEASED).  By default the
 *		pick's commit does not wait for its record: a transaction without
 *		a transaction id commits asynchronously, and the record reaches
 *		disk with the next commit of any backend or within
 *		wal_writer_delay.  With gen_durable.memory_claim_durable on, a pick
 *		that logs claims takes a transaction id, so that it commits as a
 *		claim on the row does: its commit flushes the record (unless
 *		synchronous_commit is off) and waits for synchronous standbys
 *		before the worker has its jobs.
 *
 *		Replay (crash recovery, a standby) puts each claim back into the
 *		claim table (claims.c) as held by a session that no longer exists.
 *		Once the server accepts connections, the maintenance sweep of the
 *		claim's database writes it to its row if the row is still the
 *		version claimed (the step's outcome never committed), and the
 *		reaper then requeues the instance with attempt + 1, or fails it
 *		when its attempts have run out; a claim whose row has moved on
 *		(its outcome committed, or the claim was written to the row before)
 *		is dropped.  Replay keeps only the claims of the last
 *		gen_durable.memory_claim_max_age plus a minute: an older one was
 *		either settled or written to its row before the server stopped.
 *
 *		The resource manager must be registered wherever such WAL is
 *		replayed: gen_durable in shared_preload_libraries, on every standby
 *		too, as the engine needs anyway.
 *
 * IDENTIFICATION
 *		src/claim_log.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "miscadmin.h"

#include "claim_log.h"
#include "claims.h"

#define GD_CLAIMS_TAKEN		0x00
#define GD_CLAIMS_RELEASED	0x10

/* the fixed part of a GD_CLAIMS_TAKEN record, then nitems x (id, tid) */
typedef struct xl_gd_claims_taken
{
	Oid			dboid;
	int32		nitems;
	int64		session;
	TimestampTz claimed_at;
	char		worker[GD_CLAIM_WORKER_LEN];
} xl_gd_claims_taken;

/* the fixed part of a GD_CLAIMS_RELEASED record, then nitems ids */
typedef struct xl_gd_claims_released
{
	Oid			dboid;
	int32		nitems;
} xl_gd_claims_released;

#define CLAIM_ITEM_SIZE		(sizeof(int64) + sizeof(ItemPointerData))

/* how far back of the newest claim replayed the claims are kept */
#define REPLAY_KEEP_MS		(gen_durable_memory_claim_max_age + 60 * 1000)

/*
 * gd_claim_log_taken logs the claims one pick took in memory.
 */
void
gd_claim_log_taken(const char *worker, int64 session, TimestampTz claimed_at,
				   const int64 *ids, const ItemPointerData *tids, int n)
{
	xl_gd_claims_taken rec;
	char	   *items;
	int			i;

	if (n == 0)
		return;
	/* the commit then flushes (and replicates) the record */
	if (gen_durable_memory_claim_durable)
		(void) GetTopTransactionId();
	memset(&rec, 0, sizeof(rec));
	rec.dboid = MyDatabaseId;
	rec.nitems = n;
	rec.session = session;
	rec.claimed_at = claimed_at;
	strlcpy(rec.worker, worker, GD_CLAIM_WORKER_LEN);
	items = palloc(CLAIM_ITEM_SIZE * n);
	for (i = 0; i < n; i++)
	{
		memcpy(items + i * CLAIM_ITEM_SIZE, &ids[i], sizeof(int64));
		memcpy(items + i * CLAIM_ITEM_SIZE + sizeof(int64), &tids[i], sizeof(ItemPointerData));
	}
	XLogBeginInsert();
	XLogRegisterData((char *) &rec, sizeof(rec));
	XLogRegisterData(items, CLAIM_ITEM_SIZE * n);
	XLogInsert(GD_RMGR_ID, GD_CLAIMS_TAKEN);
	pfree(items);
}

/*
 * gd_claim_log_released logs the instances whose claims in memory a
 * release handed back.
 */
void
gd_claim_log_released(const int64 *ids, int n)
{
	xl_gd_claims_released rec;

	if (n == 0)
		return;
	rec.dboid = MyDatabaseId;
	rec.nitems = n;
	XLogBeginInsert();
	XLogRegisterData((char *) &rec, sizeof(rec));
	XLogRegisterData((char *) ids, sizeof(int64) * n);
	XLogInsert(GD_RMGR_ID, GD_CLAIMS_RELEASED);
}

/*
 * claim_log_redo puts the claims of a record back into the claim table, or
 * takes them out.
 */
static void
claim_log_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	char	   *data = XLogRecGetData(record);
	int			i;

	if (info == GD_CLAIMS_TAKEN)
	{
		xl_gd_claims_taken rec;

		memcpy(&rec, data, sizeof(rec));
		gd_claims_prune(TimestampTzPlusMilliseconds(rec.claimed_at, -REPLAY_KEEP_MS));
		for (i = 0; i < rec.nitems; i++)
		{
			char	   *item = data + sizeof(rec) + i * CLAIM_ITEM_SIZE;
			int64		id;
			ItemPointerData tid;

			memcpy(&id, item, sizeof(int64));
			memcpy(&tid, item + sizeof(int64), sizeof(ItemPointerData));
			gd_claim_restore(rec.dboid, id, &tid, rec.worker, rec.session, rec.claimed_at);
		}
	}
	else if (info == GD_CLAIMS_RELEASED)
	{
		xl_gd_claims_released rec;

		memcpy(&rec, data, sizeof(rec));
		for (i = 0; i < rec.nitems; i++)
		{
			int64		id;

			memcpy(&id, data + sizeof(rec) + i * sizeof(int64), sizeof(int64));
			gd_claim_restore_forget(rec.dboid, id);
		}
	}
	else
		elog(PANIC, "gen_durable redo: unknown record info %u", info);
}

/* claim_log_desc describes a record for pg_waldump and the like */
static void
claim_log_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	char	   *data = XLogRecGetData(record);

	if (info == GD_CLAIMS_TAKEN)
	{
		xl_gd_claims_taken rec;

		memcpy(&rec, data, sizeof(rec));
		appendStringInfo(buf, "db %u: %d claims by worker %s", rec.dboid, rec.nitems,
						 rec.worker);
	}
	else if (info == GD_CLAIMS_RELEASED)
	{
		xl_gd_claims_released rec;

		memcpy(&rec, data, sizeof(rec));
		appendStringInfo(buf, "db %u: %d claims released", rec.dboid, rec.nitems);
	}
}

static const char *
claim_log_identify(uint8 info)
{
	switch (info & ~XLR_INFO_MASK)
	{
		case GD_CLAIMS_TAKEN:
			return "CLAIMS_TAKEN";
		case GD_CLAIMS_RELEASED:
			return "CLAIMS_RELEASED";
	}
	return NULL;
}

static RmgrData claim_rmgr = {
	.rm_name = "gen_durable",
	.rm_redo = claim_log_redo,
	.rm_desc = claim_log_desc,
	.rm_identify = claim_log_identify,
};

/*
 * gd_claim_log_register registers the resource manager; called from
 * _PG_init while preloading.
 */
void
gd_claim_log_register(void)
{
	RegisterCustomRmgr(GD_RMGR_ID, &claim_rmgr);
}
