/*-------------------------------------------------------------------------
 *
 * claims.c
 *		The claim table in shared memory (claims.h has the protocol).
 *
 *		A partitioned shared hash keyed by (database, instance id), sized by
 *		gen_durable.memory_claims, with one LWLock per partition.  Each
 *		backend remembers in a local hash the entries its transaction took
 *		or is changing, and resolves them at the end of the transaction or
 *		subtransaction (the callbacks below): the table never outlives the
 *		transactions that changed it in a state they did not choose.
 *
 *		Claim numbers come from one counter that starts at the server's
 *		start time in microseconds, like claim sessions (shmem.c): a number
 *		handed out before a crash restart or a failover is never handed out
 *		again while claims are made at fewer than one per microsecond on
 *		average, and every number given to an instance is larger than the
 *		number its row recorded last (the claim fence, docs/contract.md
 *		§5.5).
 *
 * IDENTIFICATION
 *		src/claims.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "claims.h"
#include "gen_durable.h"
#include "session.h"

PG_FUNCTION_INFO_V1(gen_durable_claimed_in_memory);
PG_FUNCTION_INFO_V1(gen_durable_memory_claims);

#define CLAIM_PARTITIONS	16

int			gen_durable_memory_claim_slots = 16384;
bool		gen_durable_claim_in_memory = true;
int			gen_durable_memory_claim_max_age = 2000;
bool		gen_durable_memory_claim_durable = false;
static int	gen_durable_debug_claim_pause = 0;

/* the key: zeroed before use, so that the padding hashes the same */
typedef struct ClaimKey
{
	int64		id;
	Oid			dboid;
	uint32		pad;
} ClaimKey;

typedef struct ClaimEntry
{
	ClaimKey	key;
	GdClaim		c;
} ClaimEntry;

typedef struct ClaimShared
{
	pg_atomic_uint64 next_claim;
	pg_atomic_uint32 count;		/* entries in the table */
	LWLockPadded *locks;
} ClaimShared;

static ClaimShared *claim_shared = NULL;
static HTAB *claim_table = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * What this backend's transaction did to an entry.  taken: it took it (the
 * entry is PENDING until commit); changing: it is settling or
 * materializing it; applied: that change was made (the outcome written, the
 * claim written to its row, or the claim found stale), so commit removes
 * the entry; a change not applied leaves it HELD.  The levels are the
 * (sub)transaction nesting levels of those changes.
 */
typedef struct LocalClaim
{
	int64		id;				/* hash key */
	bool		taken;
	int			taken_level;
	bool		changing;
	int			change_level;
	bool		applied;
} LocalClaim;

static HTAB *local_claims = NULL;
static int	nlocal = 0;

/* ---------------------------------------------------------------- memory */

static Size
claim_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(ClaimShared)),
					hash_estimate_size(Max(gen_durable_memory_claim_slots, 1),
									   sizeof(ClaimEntry)));
}

static void
claim_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(claim_shmem_size());
	RequestNamedLWLockTranche("gen_durable claims", CLAIM_PARTITIONS);
}

static void
claim_shmem_startup(void)
{
	bool		found;
	HASHCTL		info;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	claim_shared = NULL;
	claim_table = NULL;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	claim_shared = ShmemInitStruct("gen_durable claims", sizeof(ClaimShared), &found);
	if (!found)
	{
		pg_atomic_init_u64(&claim_shared->next_claim, (uint64) GetCurrentTimestamp());
		pg_atomic_init_u32(&claim_shared->count, 0);
		claim_shared->locks = GetNamedLWLockTranche("gen_durable claims");
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(ClaimKey);
	info.entrysize = sizeof(ClaimEntry);
	info.num_partitions = CLAIM_PARTITIONS;
	claim_table = ShmemInitHash("gen_durable claim table",
								Max(gen_durable_memory_claim_slots, 1),
								Max(gen_durable_memory_claim_slots, 1),
								&info, HASH_ELEM | HASH_BLOBS | HASH_PARTITION);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * gd_claims_install_hooks asks for the table's memory; called from
 * _PG_init while preloading.
 */
void
gd_claims_install_hooks(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = claim_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = claim_shmem_startup;
}

/*
 * gd_claims_define_gucs defines the table's settings (from _PG_init, in
 * every backend that loads the library; the table's size only while
 * preloading, the only time it means anything).
 */
void
gd_claims_define_gucs(void)
{
	/* a PGC_POSTMASTER setting can only be defined while preloading */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("gen_durable.memory_claims",
								"Number of claims the shared claim table holds (0: every claim is written to its row).",
								"Each slot takes about 150 bytes of shared memory.",
								&gen_durable_memory_claim_slots,
								16384, 0, 1 << 24,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);

	DefineCustomBoolVariable("gen_durable.claim_in_memory",
							 "Makes pick claim plain instances in the shared claim table instead of writing the claim to the row.",
							 NULL,
							 &gen_durable_claim_in_memory,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gen_durable.memory_claim_max_age",
							"How long a claim stays in memory only before the maintenance worker writes it to its row.",
							"A written claim leaves the pick index and survives a server crash, which then counts an attempt.",
							&gen_durable_memory_claim_max_age,
							2000, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("gen_durable.memory_claim_durable",
							 "Makes a pick that claims in memory commit as a writing transaction: its claims' WAL record is flushed, and replicated to synchronous standbys, before the worker has its jobs.",
							 "Off, the record reaches disk with the next commit or within wal_writer_delay; a claim whose record is lost in a crash or a failover runs again without an attempt counted.",
							 &gen_durable_memory_claim_durable,
							 false,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gen_durable.debug_claim_pause",
							"For the isolation tests: the key of an advisory lock every probe of the claim table waits for (0: none).",
							"A spec holds the lock to stop a pick between its snapshot and its probes.",
							&gen_durable_debug_claim_pause,
							0, 0, INT_MAX,
							PGC_SUSET, GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							NULL, NULL, NULL);
}

/*
 * gd_claims_schema_ready says whether the installed schema has what claims
 * in memory need (0.8.0: the probe and the split pick index); an older one,
 * between a restart on this library and ALTER EXTENSION UPDATE, is served
 * with claims on the rows.
 */
bool
gd_claims_schema_ready(void)
{
	Oid			nsp = get_namespace_oid("gen_durable", true);
	Oid			int8 = INT8OID;

	return OidIsValid(nsp) &&
		OidIsValid(GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
								   CStringGetDatum("_claimed_in_memory"),
								   PointerGetDatum(buildoidvector(&int8, 1)),
								   ObjectIdGetDatum(nsp)));
}

/*
 * gd_claims_usable says whether a pick by this worker may claim in memory
 * now, on a schema that has what claims in memory need (the caller knows,
 * gd_claims_schema_ready): the table exists and has room, the session
 * wants it, and the name fits.
 */
bool
gd_claims_usable(const char *worker, bool schema_ready)
{
	return schema_ready && claim_table != NULL && gen_durable_memory_claim_slots > 0 &&
		gen_durable_claim_in_memory && strlen(worker) < GD_CLAIM_WORKER_LEN &&
		pg_atomic_read_u32(&claim_shared->count) < (uint32) gen_durable_memory_claim_slots &&
		!RecoveryInProgress();
}

/* an entry's place in the table: its key, hash value and partition lock */
typedef struct ClaimSlot
{
	ClaimKey	key;
	uint32		hashvalue;
	LWLock	   *lock;
} ClaimSlot;

/*
 * lock_slot finds the place of an instance of database dboid, takes its
 * partition's lock in mode, and returns its entry (NULL: none).
 */
static ClaimEntry *
lock_slot(ClaimSlot *slot, Oid dboid, int64 id, LWLockMode mode)
{
	memset(&slot->key, 0, sizeof(slot->key));
	slot->key.id = id;
	slot->key.dboid = dboid;
	slot->hashvalue = get_hash_value(claim_table, &slot->key);
	slot->lock = &claim_shared->locks[slot->hashvalue % CLAIM_PARTITIONS].lock;
	LWLockAcquire(slot->lock, mode);
	return hash_search_with_hash_value(claim_table, &slot->key, slot->hashvalue,
									   HASH_FIND, NULL);
}

/*
 * slot_enter adds the entry of a locked slot (exclusively), zeroed but for
 * its key; NULL when the table is full.
 */
static ClaimEntry *
slot_enter(ClaimSlot *slot)
{
	ClaimEntry *e = NULL;
	bool		found;

	if (pg_atomic_add_fetch_u32(&claim_shared->count, 1) > (uint32) gen_durable_memory_claim_slots ||
		(e = hash_search_with_hash_value(claim_table, &slot->key, slot->hashvalue,
										 HASH_ENTER_NULL, &found)) == NULL)
	{
		pg_atomic_sub_fetch_u32(&claim_shared->count, 1);
		return NULL;
	}
	memset(&e->c, 0, sizeof(e->c));
	return e;
}

/* slot_remove removes the entry of a locked slot (exclusively), if any */
static void
slot_remove(ClaimSlot *slot)
{
	bool		found;

	hash_search_with_hash_value(claim_table, &slot->key, slot->hashvalue, HASH_REMOVE, &found);
	if (found)
		pg_atomic_sub_fetch_u32(&claim_shared->count, 1);
}

/* lock_all takes every partition lock, in order */
static void
lock_all(LWLockMode mode)
{
	int			i;

	for (i = 0; i < CLAIM_PARTITIONS; i++)
		LWLockAcquire(&claim_shared->locks[i].lock, mode);
}

static void
unlock_all(void)
{
	int			i;

	for (i = CLAIM_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&claim_shared->locks[i].lock);
}

/*
 * copy_claims copies to *out (palloc'd) this database's entries, only the
 * held ones when held_only, only worker's when worker is not NULL; the
 * count is the result.
 */
static int
copy_claims(const char *worker, bool held_only, GdClaim **out)
{
	HASH_SEQ_STATUS seq;
	ClaimEntry *e;
	int			n = 0;
	int			max = 16;

	*out = palloc(sizeof(GdClaim) * max);
	if (claim_table == NULL)
		return 0;
	lock_all(LW_SHARED);
	hash_seq_init(&seq, claim_table);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->key.dboid != MyDatabaseId ||
			(held_only && e->c.state != GD_CLAIM_HELD) ||
			(worker != NULL && strcmp(e->c.worker, worker) != 0))
			continue;
		if (n == max)
		{
			max *= 2;
			*out = repalloc(*out, sizeof(GdClaim) * max);
		}
		(*out)[n++] = e->c;
	}
	unlock_all();
	return n;
}

/*
 * remove_claims removes every entry of database dboid (any database when
 * InvalidOid) for which gone(entry, arg) says so.
 */
static void
remove_claims(Oid dboid, bool (*gone) (ClaimEntry *e, const void *arg), const void *arg)
{
	HASH_SEQ_STATUS seq;
	ClaimEntry *e;

	lock_all(LW_EXCLUSIVE);
	hash_seq_init(&seq, claim_table);
	while ((e = hash_seq_search(&seq)) != NULL)
		if ((!OidIsValid(dboid) || e->key.dboid == dboid) && gone(e, arg))
		{
			hash_search(claim_table, &e->key, HASH_REMOVE, NULL);
			pg_atomic_sub_fetch_u32(&claim_shared->count, 1);
		}
	unlock_all();
}

/* ------------------------------------------------------ the local records */

/* local_find returns this transaction's record of an instance, or NULL */
static LocalClaim *
local_find(int64 id, bool create)
{
	bool		found;
	LocalClaim *l;

	if (local_claims == NULL)
	{
		HASHCTL		info;

		if (!create)
			return NULL;
		memset(&info, 0, sizeof(info));
		info.keysize = sizeof(int64);
		info.entrysize = sizeof(LocalClaim);
		info.hcxt = TopMemoryContext;
		local_claims = hash_create("gen_durable local claims", 64, &info,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	l = hash_search(local_claims, &id, create ? HASH_ENTER : HASH_FIND, &found);
	if (create && !found)
	{
		memset(l, 0, sizeof(*l));
		l->id = id;
		nlocal++;
	}
	return l;
}

/* local_forget removes this transaction's record of an instance */
static void
local_forget(LocalClaim *l)
{
	int64		id = l->id;

	hash_search(local_claims, &id, HASH_REMOVE, NULL);
	nlocal--;
}

/* local_unused forgets a record that names no change of this transaction */
static void
local_unused(LocalClaim *l)
{
	if (!l->taken && !l->changing)
		local_forget(l);
}

/* ------------------------------------------------------- the claim number */

/*
 * next_claim_number returns a claim number larger than row_claim, the
 * number the instance's row recorded last.
 */
static int64
next_claim_number(int64 row_claim)
{
	uint64		n = pg_atomic_fetch_add_u64(&claim_shared->next_claim, 1);

	if ((int64) n <= row_claim)
	{
		uint64		want = (uint64) row_claim + 1;
		uint64		cur = pg_atomic_read_u64(&claim_shared->next_claim);

		while (cur <= want &&
			   !pg_atomic_compare_exchange_u64(&claim_shared->next_claim, &cur, want + 1))
			;
		n = want;
	}
	return (int64) n;
}

/* ------------------------------------------------------------ the protocol */

/*
 * resolved returns the state an entry is in for this backend: a SETTLING or
 * MATERIALIZING entry whose transaction ended without its callback having
 * run yet is what that transaction's outcome made it.  Sets *gone when it
 * committed (the entry is as good as removed).
 */
static GdClaimState
resolved(GdClaim *c, bool *gone)
{
	*gone = false;
	if (c->state != GD_CLAIM_SETTLING && c->state != GD_CLAIM_MATERIALIZING)
		return c->state;
	if (TransactionIdIsInProgress(c->xid))
		return c->state;
	if (TransactionIdDidCommit(c->xid))
	{
		*gone = true;
		return c->state;
	}
	return GD_CLAIM_HELD;
}

/*
 * gd_claim_take takes a PENDING entry for an instance whose row version tid
 * a pick is about to hand out; *claim gets its number.
 */
GdTake
gd_claim_take(int64 id, ItemPointer tid, int64 row_claim, const char *worker,
			  int64 session, TimestampTz now, TimestampTz lease, int64 *claim)
{
	ClaimSlot	slot;
	ClaimEntry *e;
	LocalClaim *l;

	/* the local record first: it may allocate, and then nothing can fail */
	l = local_find(id, true);
	e = lock_slot(&slot, MyDatabaseId, id, LW_EXCLUSIVE);
	if (e != NULL)
	{
		LWLockRelease(slot.lock);
		local_unused(l);
		return GD_TAKE_HELD;
	}
	if ((e = slot_enter(&slot)) == NULL)
	{
		LWLockRelease(slot.lock);
		local_forget(l);
		return GD_TAKE_FULL;
	}
	e->c.id = id;
	e->c.claim = next_claim_number(row_claim);
	e->c.tid = *tid;
	e->c.state = GD_CLAIM_PENDING;
	e->c.xid = InvalidTransactionId;
	e->c.pgprocno = MyProc->pgprocno;
	e->c.session = session;
	e->c.claimed_at = now;
	e->c.lease_expires_at = lease;
	strlcpy(e->c.worker, worker, GD_CLAIM_WORKER_LEN);
	*claim = e->c.claim;
	LWLockRelease(slot.lock);

	l->taken = true;
	l->taken_level = GetCurrentTransactionNestLevel();
	return GD_TAKE_OK;
}

/* remove_entry deletes an instance's entry, if any */
static void
remove_entry(int64 id)
{
	ClaimSlot	slot;

	(void) lock_slot(&slot, MyDatabaseId, id, LW_EXCLUSIVE);
	slot_remove(&slot);
	LWLockRelease(slot.lock);
}

/* set_state puts an instance's entry in a state (PENDING, HELD) */
static void
set_state(int64 id, GdClaimState state)
{
	ClaimSlot	slot;
	ClaimEntry *e;

	e = lock_slot(&slot, MyDatabaseId, id, LW_EXCLUSIVE);
	if (e != NULL)
	{
		e->c.state = state;
		e->c.xid = InvalidTransactionId;
	}
	LWLockRelease(slot.lock);
}

/*
 * gd_claim_untake gives back an entry this transaction just took (the
 * pick found the row changed under it).
 */
void
gd_claim_untake(int64 id)
{
	LocalClaim *l = local_find(id, false);

	Assert(l != NULL && l->taken && !l->changing);
	remove_entry(id);
	local_forget(l);
}

/*
 * gd_claim_debug_pause waits, when gen_durable.debug_claim_pause names an
 * advisory lock, until nobody holds that lock exclusively: the isolation
 * specs stop a pick with it where it first looks at the claim table for a
 * row it read (pick_memory.c: before the claim; pick.c: after the lock).
 */
void
gd_claim_debug_pause(void)
{
	if (gen_durable_debug_claim_pause != 0)
		DirectFunctionCall1(pg_advisory_xact_lock_shared_int8,
							Int64GetDatum(gen_durable_debug_claim_pause));
}

/*
 * gd_claim_exists says whether an instance is claimed in memory, in any
 * state.  The flip of a row claim asks it after locking the row, and a
 * memory pick takes its entry before it looks at the row's lock, so one
 * of two concurrent picks of a row always sees the other (pick_memory.c).
 */
bool
gd_claim_exists(int64 id)
{
	ClaimSlot	slot;
	bool		found;

	if (claim_table == NULL)
		return false;
	found = lock_slot(&slot, MyDatabaseId, id, LW_SHARED) != NULL;
	LWLockRelease(slot.lock);
	return found;
}

/*
 * gd_claim_find copies an instance's entry; false when there is none (or
 * only one a committed transaction has ended).
 */
bool
gd_claim_find(int64 id, GdClaim *out)
{
	ClaimSlot	slot;
	ClaimEntry *e;
	bool		gone = false;

	if (claim_table == NULL)
		return false;
	e = lock_slot(&slot, MyDatabaseId, id, LW_SHARED);
	if (e != NULL)
		*out = e->c;
	LWLockRelease(slot.lock);
	if (e == NULL)
		return false;
	out->state = resolved(out, &gone);
	return !gone;
}

/*
 * gd_claim_settle makes an instance's entry SETTLING by this transaction
 * when it is the claim an outcome names: held (or taken by this very
 * transaction) by worker, with number *claim when claim is not NULL.
 * Another transaction settling or materializing it is waited for.  Copies
 * the entry to out; false when the outcome does not own the claim.
 */
bool
gd_claim_settle(int64 id, int64 *claim, const char *worker, GdClaim *out)
{
	TransactionId xid;
	LocalClaim *l;

	/* a standby replays claims, it settles none (its writes fail anyway) */
	if (claim_table == NULL || RecoveryInProgress())
		return false;
	xid = GetTopTransactionId();
	for (;;)
	{
		ClaimSlot	slot;
		ClaimEntry *e;
		GdClaimState state;
		bool		gone;
		TransactionId wait_for = InvalidTransactionId;

		l = local_find(id, true);
		e = lock_slot(&slot, MyDatabaseId, id, LW_EXCLUSIVE);
		if (e == NULL)
			state = 0;
		else if (e->c.state == GD_CLAIM_PENDING)
			state = l->taken ? GD_CLAIM_HELD : 0;
		else if ((e->c.state == GD_CLAIM_SETTLING ||
				  e->c.state == GD_CLAIM_MATERIALIZING) &&
				 TransactionIdEquals(e->c.xid, xid))
			state = 0;			/* this transaction has it already */
		else
		{
			state = resolved(&e->c, &gone);
			if (gone)
				state = 0;
			else if (state != GD_CLAIM_HELD)
				wait_for = e->c.xid;
		}
		if (state == GD_CLAIM_HELD &&
			(strcmp(e->c.worker, worker) != 0 || (claim != NULL && *claim != e->c.claim)))
			state = 0;
		if (state == GD_CLAIM_HELD)
		{
			e->c.state = GD_CLAIM_SETTLING;
			e->c.xid = xid;
			e->c.pgprocno = MyProc->pgprocno;
			*out = e->c;
		}
		LWLockRelease(slot.lock);

		if (TransactionIdIsValid(wait_for))
		{
			local_unused(l);
			XactLockTableWait(wait_for, NULL, NULL, XLTW_None);
			continue;
		}
		if (state != GD_CLAIM_HELD)
		{
			local_unused(l);
			return false;
		}
		l->changing = true;
		l->applied = false;
		l->change_level = GetCurrentTransactionNestLevel();
		return true;
	}
}

/*
 * gd_claim_settled records that the change this transaction began on a
 * claim (gd_claim_settle, gd_claims_to_materialize) is made: the entry goes
 * at commit.
 */
void
gd_claim_settled(int64 id)
{
	LocalClaim *l = local_find(id, false);

	Assert(l != NULL && l->changing);
	l->applied = true;
}

/*
 * gd_claim_extend moves the lease of a claim worker holds in memory to
 * lease and copies the entry; a claim another transaction is settling or
 * materializing right now counts as held, unchanged.  False when worker
 * holds no memory claim of the instance.
 */
bool
gd_claim_extend(int64 id, const char *worker, TimestampTz lease, GdClaim *out)
{
	ClaimSlot	slot;
	ClaimEntry *e;
	bool		held = false;

	if (claim_table == NULL)
		return false;
	e = lock_slot(&slot, MyDatabaseId, id, LW_EXCLUSIVE);
	if (e != NULL && strcmp(e->c.worker, worker) == 0)
	{
		bool		gone;
		GdClaimState state = resolved(&e->c, &gone);

		held = !gone && (state != GD_CLAIM_PENDING || e->c.pgprocno == MyProc->pgprocno);
		if (held && (state == GD_CLAIM_HELD || state == GD_CLAIM_PENDING))
			e->c.lease_expires_at = lease;
		if (held)
			*out = e->c;
	}
	LWLockRelease(slot.lock);
	return held;
}

/*
 * gd_claims_of_worker returns (palloc'd, in *out) the claims of this
 * database that worker holds in memory; the count is the result.
 */
int
gd_claims_of_worker(const char *worker, GdClaim **out)
{
	return copy_claims(worker, true, out);
}

/*
 * gd_claims_forget removes every entry of a database: its instances table
 * is being dropped with the extension, or the database itself, and the
 * ids of a new one would start again at 1.  The outcomes of those claims
 * are stale from then on.
 */
/* any entry */
static bool
any_entry(ClaimEntry *e, const void *arg)
{
	return true;
}

void
gd_claims_forget(Oid dboid)
{
	if (claim_table != NULL && OidIsValid(dboid))
		remove_claims(dboid, any_entry, NULL);
}

/* ------------------------------------------------------------ replay */

/*
 * gd_claim_restore puts back, during WAL replay (claim_log.c), a claim a
 * pick took: held by a session that no longer exists, its lease over, so
 * that the maintenance sweep writes it to its row and the reaper counts
 * the attempt.  A newer claim of the instance replaces an older one.
 */
void
gd_claim_restore(Oid dboid, int64 id, ItemPointer tid, const char *worker,
				 int64 session, TimestampTz claimed_at)
{
	ClaimSlot	slot;
	ClaimEntry *e;

	if (claim_table == NULL || gen_durable_memory_claim_slots == 0)
		return;
	e = lock_slot(&slot, dboid, id, LW_EXCLUSIVE);
	if (e != NULL)
		memset(&e->c, 0, sizeof(e->c));
	else if ((e = slot_enter(&slot)) == NULL)
	{
		LWLockRelease(slot.lock);
		return;
	}
	e->c.id = id;
	e->c.claim = next_claim_number(0);
	e->c.tid = *tid;
	e->c.state = GD_CLAIM_HELD;
	e->c.pgprocno = -1;
	e->c.session = session;
	e->c.claimed_at = claimed_at;
	e->c.lease_expires_at = claimed_at;
	strlcpy(e->c.worker, worker, GD_CLAIM_WORKER_LEN);
	LWLockRelease(slot.lock);
}

/*
 * gd_claim_restore_forget takes out, during WAL replay, a claim its worker
 * released.
 */
void
gd_claim_restore_forget(Oid dboid, int64 id)
{
	ClaimSlot	slot;

	if (claim_table == NULL)
		return;
	(void) lock_slot(&slot, dboid, id, LW_EXCLUSIVE);
	slot_remove(&slot);
	LWLockRelease(slot.lock);
}

/*
 * gd_claims_prune removes, once the table is half full, the held claims
 * taken before older_than: during replay, those were settled or written to
 * their rows before the server stopped.
 */
/* a held entry taken before *(TimestampTz *) arg */
static bool
held_before(ClaimEntry *e, const void *arg)
{
	return e->c.state == GD_CLAIM_HELD && e->c.claimed_at < *(const TimestampTz *) arg;
}

void
gd_claims_prune(TimestampTz older_than)
{
	if (claim_table != NULL &&
		pg_atomic_read_u32(&claim_shared->count) >= (uint32) gen_durable_memory_claim_slots / 2)
		remove_claims(InvalidOid, held_before, &older_than);
}

/* compare_session orders session ids for bsearch */
static int
compare_session(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * gd_claims_to_materialize makes MATERIALIZING by this transaction, and
 * copies to *out (palloc'd), the claims of this database the maintenance
 * worker must write to their rows now: those whose lease has expired,
 * those whose session has ended, and those taken before born_before; the
 * earliest time another one falls due goes to *next (0 = none).  The count
 * is the result.
 *
 * The entries are read first and the live sessions after: every session
 * recorded on an entry registered before its claim was taken, so a live
 * one is in the list (session.c).
 */
int
gd_claims_to_materialize(TimestampTz now, TimestampTz born_before, GdClaim **out,
						 TimestampTz *next)
{
	ClaimEntry *e;
	GdClaim    *due;
	int64	   *live;
	int			nlive;
	int			n;
	int			kept = 0;
	int			i;
	TransactionId xid;

	*out = NULL;
	*next = 0;
	if (claim_table == NULL || RecoveryInProgress())
		return 0;
	n = copy_claims(NULL, true, &due);
	if (n == 0)
		return 0;

	nlive = gd_live_sessions(&live);
	qsort(live, nlive, sizeof(int64), compare_session);
	xid = GetTopTransactionId();
	for (i = 0; i < n; i++)
	{
		GdClaim    *c = &due[i];
		bool		dead = c->session != 0 &&
			bsearch(&c->session, live, nlive, sizeof(int64), compare_session) == NULL;
		ClaimSlot	slot;
		bool		marked = false;
		LocalClaim *l;

		if (!dead && c->lease_expires_at >= now && c->claimed_at >= born_before)
		{
			TimestampTz when = Min(c->lease_expires_at,
								   c->claimed_at + (now - born_before));

			if (*next == 0 || when < *next)
				*next = when;
			continue;
		}
		l = local_find(c->id, true);
		e = lock_slot(&slot, MyDatabaseId, c->id, LW_EXCLUSIVE);
		if (e != NULL && e->c.state == GD_CLAIM_HELD && e->c.claim == c->claim)
		{
			e->c.state = GD_CLAIM_MATERIALIZING;
			e->c.xid = xid;
			e->c.pgprocno = MyProc->pgprocno;
			due[kept++] = e->c;
			marked = true;
		}
		LWLockRelease(slot.lock);
		if (!marked)
		{
			local_unused(l);
			continue;
		}
		l->changing = true;
		l->change_level = GetCurrentTransactionNestLevel();
	}
	*out = due;
	return kept;
}

/* ---------------------------------------------------- transaction ends */

/* end_of_xact resolves every local record at the end of the transaction */
static void
end_of_xact(bool commit)
{
	HASH_SEQ_STATUS seq;
	LocalClaim *l;

	if (nlocal == 0)
		return;
	hash_seq_init(&seq, local_claims);
	while ((l = hash_seq_search(&seq)) != NULL)
	{
		if (commit)
		{
			if (l->changing && l->applied)
				remove_entry(l->id);
			else
				set_state(l->id, GD_CLAIM_HELD);
		}
		else if (l->taken)
			remove_entry(l->id);
		else if (l->changing)
			set_state(l->id, GD_CLAIM_HELD);
		hash_search(local_claims, &l->id, HASH_REMOVE, NULL);
	}
	nlocal = 0;
}

/*
 * end_of_subxact: an aborted subtransaction undoes what it did (an entry it
 * took goes, one it began to settle is held again, or pending when an
 * outer level took it); a committed one hands its records to its parent.
 */
static void
end_of_subxact(bool commit, int level)
{
	HASH_SEQ_STATUS seq;
	LocalClaim *l;

	if (nlocal == 0)
		return;
	hash_seq_init(&seq, local_claims);
	while ((l = hash_seq_search(&seq)) != NULL)
	{
		if (commit)
		{
			if (l->taken && l->taken_level >= level)
				l->taken_level = level - 1;
			if (l->changing && l->change_level >= level)
				l->change_level = level - 1;
			continue;
		}
		if (l->taken && l->taken_level >= level)
		{
			remove_entry(l->id);
			hash_search(local_claims, &l->id, HASH_REMOVE, NULL);
			nlocal--;
			continue;
		}
		if (l->changing && l->change_level >= level)
		{
			set_state(l->id, l->taken ? GD_CLAIM_PENDING : GD_CLAIM_HELD);
			l->changing = l->applied = false;
			if (!l->taken)
			{
				hash_search(local_claims, &l->id, HASH_REMOVE, NULL);
				nlocal--;
			}
		}
	}
}

static void
claims_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			end_of_xact(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			end_of_xact(false);
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (nlocal > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that took or ended claims in memory"),
						 errhint("Call pick and flush outside two-phase transactions, or SET gen_durable.claim_in_memory = off.")));
			break;
		default:
			break;
	}
}

static void
claims_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		end_of_subxact(false, GetCurrentTransactionNestLevel());
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		end_of_subxact(true, GetCurrentTransactionNestLevel());
}

/*
 * gd_claims_init registers the transaction callbacks (from _PG_init).
 */
void
gd_claims_init(void)
{
	RegisterXactCallback(claims_xact_callback, NULL);
	RegisterSubXactCallback(claims_subxact_callback, NULL);
}

/* ------------------------------------------------------ the SQL functions */

/*
 * gen_durable_claimed_in_memory implements
 * gen_durable._claimed_in_memory(id): the pick statements' probe.
 */
Datum
gen_durable_claimed_in_memory(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(gd_claim_exists(PG_GETARG_INT64(0)));
}

static const char *const state_names[] = {
	[GD_CLAIM_PENDING] = "pending",
	[GD_CLAIM_HELD] = "held",
	[GD_CLAIM_SETTLING] = "settling",
	[GD_CLAIM_MATERIALIZING] = "materializing",
};

/*
 * gen_durable_memory_claims implements gen_durable._memory_claims(): the
 * claims of this database held in memory, for the view gen_durable.claims.
 */
Datum
gen_durable_memory_claims(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GdClaim    *all;
	int			n;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	n = copy_claims(NULL, false, &all);

	for (i = 0; i < n; i++)
	{
		Datum		values[8];
		bool		nulls[8] = {false, false, false, false, false, false, false, false};
		ItemPointer tid = palloc(sizeof(ItemPointerData));
		bool		gone;
		GdClaimState state = resolved(&all[i], &gone);

		if (gone)
			continue;
		values[0] = Int64GetDatum(all[i].id);
		values[1] = CStringGetTextDatum(all[i].worker);
		values[2] = Int64GetDatum(all[i].claim);
		values[3] = TimestampTzGetDatum(all[i].claimed_at);
		values[4] = TimestampTzGetDatum(all[i].lease_expires_at);
		values[5] = Int64GetDatum(all[i].session);
		nulls[5] = all[i].session == 0;
		values[6] = CStringGetTextDatum(state_names[state]);
		*tid = all[i].tid;
		values[7] = PointerGetDatum(tid);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
