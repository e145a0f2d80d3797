/*-------------------------------------------------------------------------
 *
 * claims.h
 *		Claims kept in shared memory (0.8.0): the claim table, its
 *		protocol, and what the rest of the engine asks of it.
 *
 *		A pick of a plain instance (no concurrency key, rate limit,
 *		correlation key or awaited signals) writes nothing: it takes an
 *		entry here, keyed by (database, instance id), naming the row
 *		version it claimed (tid).  The row stays runnable on disk.  The
 *		entry goes through these states (docs/contract.md §4.7,
 *		docs/design.md §8.1):
 *
 *		PENDING        taken by a pick whose transaction is in progress;
 *		HELD           that transaction committed: the worker runs the step;
 *		SETTLING       a transaction is ending the claim (flush, release);
 *		MATERIALIZING  the maintenance worker is writing the claim to the
 *		               row (a long step, an expired lease, a dead session),
 *		               after which the row carries it as any claim.
 *
 *		Every change of state is made by one transaction and resolved by
 *		its end (claims.c's transaction callbacks): commit makes PENDING
 *		HELD and removes a settled or materialized entry; abort undoes.  An
 *		entry whose changing transaction ended without its callback (it
 *		cannot: a backend that dies without running it takes the server's
 *		shared memory with it) is read as that transaction's outcome says.
 *
 * IDENTIFICATION
 *		src/claims.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_CLAIMS_H
#define GD_CLAIMS_H

#include "postgres.h"

#include "storage/itemptr.h"
#include "utils/timestamp.h"

/* a memory claim keeps the worker's name: names this long or longer are claimed on the row */
#define GD_CLAIM_WORKER_LEN		64

typedef enum GdClaimState
{
	GD_CLAIM_PENDING = 1,
	GD_CLAIM_HELD,
	GD_CLAIM_SETTLING,
	GD_CLAIM_MATERIALIZING
} GdClaimState;

/* one claim, as the table holds it (copied out) */
typedef struct GdClaim
{
	int64		id;				/* the instance */
	int64		claim;			/* the claim number (the fence) */
	ItemPointerData tid;		/* the row version claimed */
	GdClaimState state;
	TransactionId xid;			/* SETTLING, MATERIALIZING: who changes it */
	int			pgprocno;		/* the backend that took or changes it */
	int64		session;		/* the claim session (session.c), 0 = none */
	TimestampTz claimed_at;
	TimestampTz lease_expires_at;
	char		worker[GD_CLAIM_WORKER_LEN];
} GdClaim;

/* the result of gd_claim_take */
typedef enum GdTake
{
	GD_TAKE_OK,					/* taken: the entry is PENDING */
	GD_TAKE_HELD,				/* the instance is claimed in memory already */
	GD_TAKE_FULL				/* the table is full: claim on the row instead */
} GdTake;

/* GUCs (claims.c) */
extern int	gen_durable_memory_claim_slots;	/* gen_durable.memory_claims (postmaster) */
extern bool gen_durable_claim_in_memory;	/* picks claim plain rows in memory */
extern int	gen_durable_memory_claim_max_age;	/* ms before the row is written */
extern bool gen_durable_memory_claim_durable;	/* a pick waits for its claims' WAL */

extern void gd_claims_define_gucs(void);
extern void gd_claims_install_hooks(void);
extern void gd_claims_init(void);

extern bool gd_claims_schema_ready(void);
extern bool gd_claims_usable(const char *worker, bool schema_ready);
extern GdTake gd_claim_take(int64 id, ItemPointer tid, int64 row_claim,
							const char *worker, int64 session,
							TimestampTz now, TimestampTz lease, int64 *claim);
extern void gd_claim_untake(int64 id);
extern void gd_claim_debug_pause(void);
extern bool gd_claim_exists(int64 id);
extern bool gd_claim_find(int64 id, GdClaim *out);
extern bool gd_claim_settle(int64 id, int64 *claim, const char *worker, GdClaim *out);
extern void gd_claim_settled(int64 id);
extern bool gd_claim_extend(int64 id, const char *worker, TimestampTz lease,
							GdClaim *out);
extern int	gd_claims_of_worker(const char *worker, GdClaim **out);
extern void gd_claims_forget(Oid dboid);
extern void gd_claim_restore(Oid dboid, int64 id, ItemPointer tid, const char *worker,
							 int64 session, TimestampTz claimed_at);
extern void gd_claim_restore_forget(Oid dboid, int64 id);
extern void gd_claims_prune(TimestampTz older_than);
extern int	gd_claims_to_materialize(TimestampTz now, TimestampTz born_before,
									 GdClaim **out, TimestampTz *next);

#endif							/* GD_CLAIMS_H */
