/*-------------------------------------------------------------------------
 *
 * flush.c
 *		flush(): committing the outcomes of many steps together.
 *
 *		One call is one transaction with a bounded number of set-based
 *		statements, whatever the batch size (contract §6, D9):
 *		1. lock   - the instances of every valid entry, in id order
 *		            (I-23), FOR NO KEY UPDATE; the locked (latest) versions
 *		            tell which entries still own their claim (I-5);
 *		2. decide - in C: stale (another worker's claim, or, when the entry
 *		            names its claim, a later claim), budget_exhausted (D3),
 *		            attempts running out
 *		            (D2), continue or requeue (D10), the values to write;
 *		3. consume- delete the signals handed to progressing steps (§5.3);
 *		4. update - one UPDATE over all applied entries, guarded again by
 *		            ownership (locked_by, which is set only while
 *		            executing, and the claim an entry names); an inline
 *		            continue starts a new claim and returns its job; a plain
 *		            instance that ends done moves to the archive instead
 *		            (archive.h, MOVES), in the same statement;
 *		5. recheck- parked entries flip straight back to runnable when an
 *		            unpresented awaited signal already exists (a new
 *		            statement, so a fresh snapshot: I-2, I-4);
 *		6. settle - terminal entries purge their inboxes and count into
 *		            their parents' joins (settle.c);
 *		7. credit - the gate slots of the instances that left executing
 *		            (credit.c) and were not credited at 2b.
 *		Between 2 and 3: 2b credits the slots of every entry that certainly
 *		leaves executing; 2c admits the steps continued inline against the
 *		limits of their next step (admit.c), and requeues a denied one.
 *		Stale entries change nothing (I-6); invalid entries leave their
 *		instance claimed; an error rolls the whole call back.
 *
 *		The fast path: when every valid entry is a done or a plain next (a
 *		continue only without a rate limit; no concurrency_key), the guarded
 *		UPDATE runs first, with no lock statement: it locks and writes each
 *		row in id order and applies only to rows that need nothing the lock
 *		statement would tell (no gate slot, no parent, no presented signals,
 *		within max_steps, no step history, a continue not in a paused
 *		queue); what it
 *		computes from the row (attempt, steps) it computes from the row it
 *		locked.  The entries it did not apply take
 *		the steps above as usual.  A drained job then costs one statement
 *		and one row lock fewer.
 *
 * IDENTIFICATION
 *		src/flush.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "admit.h"
#include "aftercommit.h"
#include "archive.h"
#include "args.h"
#include "claims.h"
#include "credit.h"
#include "gen_durable.h"
#include "history.h"
#include "insert.h"
#include "job.h"
#include "limit_policy.h"
#include "outcome.h"
#include "settle.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(gen_durable_flush);

/*
 * Every row the flush may write, locked in one id order before anything
 * is written (I-23), so that flushes never wait for each other in a cycle:
 * - the entries' instances;
 * - their parents (a parent has a lower id than its children, so every
 *   locker that takes a child's parent first is serialized on the parent);
 * - when an entry will end as failed (kind fail, a retry with no attempts
 *   left, a step change beyond max_steps) under a first_error parent still
 *   waiting for that round: the round's live children and their
 *   descendants, which the join will cancel (settle.c).
 * The rows are read without a lock to find them (parent_id never changes;
 * an entry's counters change only through its owner, this flush), then
 * locked; a spawn that commits meanwhile adds children settle.c finds by
 * looking again.
 */
static GdPlan lock_plan = {
	"WITH RECURSIVE ent AS ("
	"  SELECT i.parent_id, i.parent_round, k.kind, i.attempt, i.max_attempts,"
	"         i.steps, i.max_steps"
	"    FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::text[]))"
	"         AS k(id, kind)"
	"    JOIN ONLY gen_durable.instances i ON i.id = k.id"
	"), doomed AS ("
	"  SELECT c.id FROM ent e"
	"    JOIN ONLY gen_durable.instances p ON p.id = e.parent_id"
	"    JOIN ONLY gen_durable.instances c ON c.parent_id = p.id AND c.parent_round = p.spawn_round"
	"   WHERE p.join_policy = 'first_error' AND p.status = 'awaiting_children'"
	"     AND p.spawn_round = e.parent_round"
	"     AND c.status NOT IN ('done', 'failed', 'cancelled')"
	"     AND (e.kind = 'fail'"
	"          OR (e.kind = 'retry' AND e.attempt + 1 >= e.max_attempts)"
	"          OR (e.kind IN ('next', 'await', 'spawn')"
	"              AND e.max_steps IS NOT NULL AND e.steps + 1 > e.max_steps))"
	"  UNION"
	"  SELECT c.id FROM doomed d JOIN ONLY gen_durable.instances c ON c.parent_id = d.id"
	"   WHERE c.status NOT IN ('done', 'failed', 'cancelled')"
	")"
	"SELECT id, status::text, locked_by, attempt, max_attempts, steps, max_steps,"
	"       parent_id, concurrency_key, presented, queue, spawn_round, parent_round,"
	"       concurrency_shard, claim,"
	"       EXISTS (SELECT 1 FROM gen_durable.queue_settings q"
	"                WHERE q.queue = instances.queue AND q.paused_at IS NOT NULL) AS paused,"
	"       step,"
	"       COALESCE(history, EXISTS (SELECT 1 FROM gen_durable.queue_settings q"
	"                                  WHERE q.queue = instances.queue AND q.history)),"
	"       ctid"
	"  FROM ONLY gen_durable.instances"
	" WHERE id = ANY ($1 || ARRAY(SELECT parent_id FROM ent WHERE parent_id IS NOT NULL)"
	"                    || ARRAY(SELECT id FROM doomed))"
	" ORDER BY id FOR NO KEY UPDATE",
	2,
	{INT8ARRAYOID, TEXTARRAYOID}
};

static GdPlan consume_plan = {
	"DELETE FROM gen_durable.signals WHERE id = ANY ($1)",
	1,
	{INT8ARRAYOID}
};

/*
 * The columns of update_plan's input, one array each.  attempt and steps
 * are increments of the row's values (a NULL attempt resets it to 0), so
 * that the fast path, which has not read the row, writes what the locked
 * path would.  The last parameter, fast, adds the fast path's guards.
 */
typedef enum UpdateCol
{
	UC_ID, UC_WORKER, UC_STATUS, UC_STEP, UC_STATE, UC_ATTEMPT, UC_STEPS,
	UC_ELIGIBLE_AT, UC_LEASE, UC_AWAITS, UC_KEEP_WAKE, UC_DEADLINE,
	UC_SET_RATE, UC_RATE_LIMIT, UC_WEIGHT, UC_SET_KEY, UC_KEY,
	UC_FSM_VERSION, UC_RESULT, UC_ERROR, UC_CHILDREN, UC_JOIN, UC_SPAWN_ROUND,
	UC_SHARD, UC_CLAIM, UC_TID, UC_SESSION, UC_NCOLS
} UpdateCol;

static const Oid update_col_types[UC_NCOLS] = {
	INT8OID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, INT4OID, INT8OID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, JSONBOID, BOOLOID, TIMESTAMPTZOID,
	BOOLOID, TEXTOID, FLOAT8OID, BOOLOID, TEXTOID,
	INT4OID, JSONBOID, JSONBOID, INT4OID, TEXTOID, INT4OID, INT2OID, INT8OID,
	TIDOID, INT8OID
};

/*
 * The outcomes as rows (o), and the queue settings the fast guards read
 * (s): the head of both forms of the guarded UPDATE.
 */
#define UPDATE_INPUT \
	"WITH o AS (" \
	"  SELECT * FROM ROWS FROM (pg_catalog.unnest($1::int8[]), " \
	"                     pg_catalog.unnest($2::text[]), " \
	"                     pg_catalog.unnest($3::text[]), " \
	"                     pg_catalog.unnest($4::text[]), " \
	"                     pg_catalog.unnest($5::jsonb[]), " \
	"                     pg_catalog.unnest($6::int4[]), " \
	"                     pg_catalog.unnest($7::int8[]), " \
	"                     pg_catalog.unnest($8::timestamptz[]), " \
	"                     pg_catalog.unnest($9::timestamptz[]), " \
	"                     pg_catalog.unnest($10::jsonb[]), " \
	"                     pg_catalog.unnest($11::bool[]), " \
	"                     pg_catalog.unnest($12::timestamptz[]), " \
	"                     pg_catalog.unnest($13::bool[]), " \
	"                     pg_catalog.unnest($14::text[]), " \
	"                     pg_catalog.unnest($15::float8[]), " \
	"                     pg_catalog.unnest($16::bool[]), " \
	"                     pg_catalog.unnest($17::text[]), " \
	"                     pg_catalog.unnest($18::int4[]), " \
	"                     pg_catalog.unnest($19::jsonb[]), " \
	"                     pg_catalog.unnest($20::jsonb[]), " \
	"                     pg_catalog.unnest($21::int4[]), " \
	"                     pg_catalog.unnest($22::text[]), " \
	"                     pg_catalog.unnest($23::int4[]), " \
	"                     pg_catalog.unnest($24::int2[]), " \
	"                     pg_catalog.unnest($25::int8[]), " \
	"                     pg_catalog.unnest($26::tid[]), " \
	"                     pg_catalog.unnest($27::int8[]))" \
	"    AS o(id, worker, status, step, state, attempt, steps, eligible_at, lease," \
	"         awaits, keep_wake, deadline, set_rate, rate_limit, weight, set_key," \
	"         concurrency_key, fsm_version, result, error, children, join_policy," \
	"         spawn_round, shard, claim, tid, session)" \
	"), s AS (" \
	"  SELECT COALESCE(pg_catalog.array_agg(queue) FILTER (WHERE history), '{}') AS history_queues," \
	"         COALESCE(pg_catalog.array_agg(queue) FILTER (WHERE paused_at IS NOT NULL), '{}')" \
	"           AS paused_queues" \
	"    FROM gen_durable.queue_settings" \
	")"

/*
 * What an outcome o makes of the columns of the row r it applies to that
 * are not simply the outcome's: the SET list of the UPDATE, and the row a
 * moved instance becomes in the archive.
 */
#define NEW_STEP(r)			"COALESCE(o.step, " r ".step)"
#define NEW_STATE(r)		"COALESCE(o.state, " r ".state)"
#define NEW_ATTEMPT(r)		"COALESCE(" r ".attempt + o.attempt, 0)"
#define NEW_STEPS(r)		r ".steps + o.steps"
#define NEW_ELIGIBLE_AT(r)	"COALESCE(o.eligible_at, " r ".eligible_at)"
#define NEW_CLAIM(r) \
	"CASE WHEN o.tid IS NOT NULL THEN o.claim ELSE " r ".claim END" \
	"  + CASE WHEN o.status = 'executing' THEN 1 ELSE 0 END"
#define NEW_RATE_LIMIT(r)	"CASE WHEN o.set_rate THEN o.rate_limit ELSE " r ".rate_limit END"
#define NEW_WEIGHT(r)		"COALESCE(o.weight, " r ".weight)"
#define NEW_CONCURRENCY_KEY(r) \
	"CASE WHEN o.set_key THEN o.concurrency_key ELSE " r ".concurrency_key END"
#define NEW_FSM_VERSION(r)	"COALESCE(o.fsm_version, " r ".fsm_version)"
#define NEW_RESULT(r)		"COALESCE(o.result, " r ".result)"
#define NEW_ERROR(r) \
	"CASE WHEN o.status = 'done' THEN NULL ELSE COALESCE(o.error, " r ".error) END"
#define NEW_CHILDREN_PENDING(r) "COALESCE(o.children, " r ".children_pending)"
#define NEW_CHILDREN_TOTAL(r) "COALESCE(o.children, " r ".children_total)"
#define NEW_JOIN_POLICY(r)	"COALESCE(o.join_policy, " r ".join_policy)"
#define NEW_SPAWN_ROUND(r)	"COALESCE(o.spawn_round, " r ".spawn_round)"

/*
 * Whether the entry o still owns the row i: the version its claim in
 * memory names, still runnable; or its claim on the row, when it names
 * one the latest.
 */
#define OWNS_ROW \
	"CASE WHEN o.tid IS NOT NULL THEN i.ctid = o.tid AND i.status = 'runnable'" \
	"     ELSE i.locked_by = o.worker AND (o.claim IS NULL OR i.claim = o.claim) END"

/* the fast path's guards ($29, see the file header) */
#define FAST_GUARDS \
	"(i.concurrency_shard IS NULL AND i.parent_id IS NULL" \
	" AND i.presented IS NULL" \
	" AND NOT COALESCE(i.history, i.queue = ANY (s.history_queues))" \
	" AND (o.status <> 'executing' OR i.queue <> ALL (s.paused_queues))" \
	" AND (o.steps = 0 OR i.max_steps IS NULL OR i.steps < i.max_steps))"

/*
 * Whether an entry's instance leaves the live table for the archive
 * (archive.h): it ends done, nothing addresses it but its id (no metadata
 * for find's index, no correlation key for the unique guard), no parent
 * reads it in a join, and it records no step history (whose rows GC
 * deletes with the instance, row by row).
 */
#define MOVES \
	"(o.status = 'done' AND i.metadata IS NULL AND i.correlation_key IS NULL" \
	" AND i.parent_id IS NULL AND NOT COALESCE(i.history, i.queue = ANY (s.history_queues)))"

/*
 * The guarded UPDATE itself, of the entries in the relation entries (o,
 * or those of o that another part of the statement did not write)
 */
#define UPDATE_CTE(entries) \
	"u AS (" \
	"  UPDATE ONLY gen_durable.instances i" \
	"     SET status = o.status::gen_durable.status," \
	"         step = " NEW_STEP("i") "," \
	"         state = " NEW_STATE("i") "," \
	"         attempt = " NEW_ATTEMPT("i") "," \
	"         steps = " NEW_STEPS("i") "," \
	"         eligible_at = " NEW_ELIGIBLE_AT("i") "," \
	"         locked_by = CASE WHEN o.status = 'executing' THEN o.worker END," \
	"         claim_session = CASE WHEN o.status = 'executing'" \
	"                              THEN COALESCE(o.session, i.claim_session) END," \
	"         claim = " NEW_CLAIM("i") "," \
	"         lease_expires_at = o.lease," \
	"         awaits = CASE WHEN o.keep_wake THEN i.awaits" \
	"                       WHEN o.awaits IS NOT NULL THEN" \
	"                            ARRAY(SELECT pg_catalog.jsonb_array_elements_text(o.awaits))" \
	"                  END," \
	"         timed_out = o.keep_wake AND i.timed_out," \
	"         await_deadline = o.deadline," \
	"         presented = CASE WHEN o.status = 'awaiting_signal' THEN i.presented END," \
	"         rate_limit = " NEW_RATE_LIMIT("i") "," \
	"         weight = " NEW_WEIGHT("i") "," \
	"         concurrency_key = " NEW_CONCURRENCY_KEY("i") "," \
	"         concurrency_shard = o.shard," \
	"         fsm_version = " NEW_FSM_VERSION("i") "," \
	"         result = " NEW_RESULT("i") "," \
	"         error = " NEW_ERROR("i") "," \
	"         children_pending = " NEW_CHILDREN_PENDING("i") "," \
	"         children_total = " NEW_CHILDREN_TOTAL("i") "," \
	"         join_policy = " NEW_JOIN_POLICY("i") "," \
	"         spawn_round = " NEW_SPAWN_ROUND("i") "," \
	"         updated_at = $28" \
	"    FROM " entries " o, s" \
	"   WHERE i.id = o.id AND " OWNS_ROW \
	"     AND (NOT $29 OR " FAST_GUARDS ")" \
	"  RETURNING i.id," \
	"            CASE WHEN o.status = 'executing'" \
	"                 THEN (SELECT pg_catalog.to_jsonb(j)" \
	"                         FROM (SELECT " GD_JOB_COLUMNS("i") ") j) END AS job," \
	"            i.queue, i.concurrency_key" \
	")"

#define UPDATE_ARGTYPES \
	{INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, \
		INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, \
		JSONBARRAYOID, BOOLARRAYOID, TIMESTAMPTZARRAYOID, BOOLARRAYOID, \
		TEXTARRAYOID, FLOAT8ARRAYOID, BOOLARRAYOID, TEXTARRAYOID, INT4ARRAYOID, \
	JSONBARRAYOID, JSONBARRAYOID, INT4ARRAYOID, TEXTARRAYOID, INT4ARRAYOID, \
	INT2ARRAYOID, INT8ARRAYOID, TIDARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID, BOOLOID}

/*
 * The guarded UPDATE (4b): every owned entry's row, in one statement; with
 * $29 the fast path's guards as well.  Returns (id, job, queue,
 * concurrency_key) per row written.
 */
static GdPlan update_plan = {
	UPDATE_INPUT ", " UPDATE_CTE("o")
	"SELECT id, job, queue, concurrency_key FROM u",
	29,
	UPDATE_ARGTYPES
};

/*
 * The guarded UPDATE's form when finished instances are archived (0.9.0),
 * on either path: the entries that move (MOVES) are deleted from the live
 * table and inserted, as the row the UPDATE would have made, into the open
 * archive segment, whose number goes between MOVE_HEAD and MOVE_TAIL (one
 * plan per segment, move_plan); the UPDATE writes the others, and looks
 * at the rows of those alone (a batch of dones that all move reads each
 * row once).  Both write a row in id order.  The result is update_plan's,
 * a moved entry with no job.
 */
#define MOVE_HEAD \
	UPDATE_INPUT ", d AS (" \
	"  DELETE FROM ONLY gen_durable.instances i USING o, s" \
	"   WHERE i.id = o.id AND " MOVES " AND " OWNS_ROW " AND (NOT $29 OR " FAST_GUARDS ")" \
	"  RETURNING i.*" \
	"), a AS (" \
	"  INSERT INTO gen_durable.finished_"
#define MOVE_TAIL \
	" (id, fsm, fsm_version, step, state, attempt, max_attempts, steps, max_steps," \
	"  result, error, status, queue, priority, eligible_at, locked_by, lease_expires_at," \
	"  concurrency_key, concurrency_shard, rate_limit, weight, awaits, await_deadline," \
	"  presented, timed_out, parent_id, child_index, children_pending, children_total," \
	"  join_policy, correlation_key, correlation_scope, metadata, inserted_at, updated_at," \
	"  claim_session, spawn_round, parent_round, claim, history)" \
	"  SELECT d.id, d.fsm, " NEW_FSM_VERSION("d") ", " NEW_STEP("d") ", " NEW_STATE("d") "," \
	"         " NEW_ATTEMPT("d") ", d.max_attempts, " NEW_STEPS("d") ", d.max_steps," \
	"         " NEW_RESULT("d") ", " NEW_ERROR("d") ", 'done', d.queue, d.priority," \
	"         " NEW_ELIGIBLE_AT("d") ", NULL, NULL, " NEW_CONCURRENCY_KEY("d") ", NULL," \
	"         " NEW_RATE_LIMIT("d") ", " NEW_WEIGHT("d") ", NULL, NULL, NULL, false," \
	"         d.parent_id, d.child_index, " NEW_CHILDREN_PENDING("d") "," \
	"         " NEW_CHILDREN_TOTAL("d") ", " NEW_JOIN_POLICY("d") ", d.correlation_key," \
	"         d.correlation_scope, d.metadata, d.inserted_at, $28, NULL," \
	"         " NEW_SPAWN_ROUND("d") ", d.parent_round, " NEW_CLAIM("d") ", d.history" \
	"    FROM d JOIN o ON o.id = d.id" \
	"), " UPDATE_CTE("(SELECT * FROM o WHERE o.id NOT IN (SELECT id FROM d))") \
	"SELECT id, job, queue, concurrency_key FROM u" \
	" UNION ALL SELECT id, NULL, queue, NULL FROM d"

/*
 * move_plan returns the guarded statement that moves into archive segment seg,
 * prepared on first use like every GdPlan.
 */
static GdPlan *
move_plan(int seg)
{
	static GdPlan plans[GD_ARCHIVE_SEGMENTS];
	static const GdPlan proto = {NULL, 29, UPDATE_ARGTYPES};

	Assert(seg >= 0 && seg < GD_ARCHIVE_SEGMENTS);
	if (plans[seg].sql == NULL)
	{
		plans[seg] = proto;
		plans[seg].sql = MemoryContextStrdup(TopMemoryContext,
											 psprintf("%s%d%s", MOVE_HEAD, seg, MOVE_TAIL));
	}
	return &plans[seg];
}

static GdPlan recheck_plan = {
	"UPDATE ONLY gen_durable.instances i"
	"   SET status = 'runnable', eligible_at = $2, await_deadline = NULL, updated_at = $2"
	" WHERE i.id = ANY ($1) AND i.status = 'awaiting_signal'"
	"   AND EXISTS (SELECT 1 FROM gen_durable.signals s"
	"                WHERE s.target_id = i.id AND s.name = ANY (i.awaits)"
	"                  AND NOT (s.id = ANY (COALESCE(i.presented, '{}'))))"
	" RETURNING i.id",
	2,
	{INT8ARRAYOID, TIMESTAMPTZOID}
};

/* the instance row of an entry, as locked */
typedef struct LockedRow
{
	int64		id;
	char	   *status;
	char	   *locked_by;
	int32		attempt;
	int32		max_attempts;
	int64		steps;
	int32		max_steps;		/* 0 = no budget */
	int64		parent;			/* 0 = none */
	char	   *concurrency_key;
	int64	   *presented;
	int			npresented;
	char	   *queue;
	int32		spawn_round;
	int32		parent_round;	/* the parent's round this child belongs to */
	bool		has_shard;		/* it holds a gate slot ... */
	int16		shard;			/* ... of this shard of its key's gate */
	int64		claim;			/* the number of its latest claim, the one held */
	bool		paused;			/* its queue is paused: no inline continue */
	char	   *step;			/* the step that ran */
	bool		history;		/* it records its step history */
	ItemPointerData ctid;		/* the version locked */
} LockedRow;

/* what flush decided to write for an owned entry */
typedef enum Action
{
	ACT_NONE,					/* invalid or stale: nothing */
	ACT_NEXT,
	ACT_CONTINUE,
	ACT_RETRY,
	ACT_AWAIT,
	ACT_SPAWN,
	ACT_DONE,
	ACT_FAIL
} Action;

/* per entry: the decision and what is reported */
typedef struct Entry
{
	Outcome    *o;
	LockedRow  *row;
	Action		act;
	const char *applied;
	char	   *detail;
	Datum		job;
	bool		has_job;
	Jsonb	   *error;			/* the error written, for engine-made failures */
	int			landed;			/* spawn: children actually inserted */
	AdmitGate	gate;			/* continue: a gate slot its new key needs */
	bool		keeps_slot;		/* continue: keeps the gate slot it holds */
	bool		credited;		/* its gate slot was credited already */
	bool		written;		/* its row is updated (by either path) */
	bool		has_shard;		/* continue: the slot admission gave it ... */
	int16		shard;			/* ... of this shard */
	bool		archived;		/* its instance is in the archive (archive.h) */
	bool		mem;			/* its claim is in memory, settling (claims.h): */
	GdClaim		claim;			/* ... this one */
} Entry;

/*
 * json_from_text parses a JSON document built by flush itself.
 */
static Jsonb *
json_from_text(const char *text)
{
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
}

/*
 * read_locked copies the lock statement's result into LockedRows (sorted
 * by id) that outlive the statement.
 */
static LockedRow *
read_locked(int rows)
{
	LockedRow  *out = palloc0(sizeof(LockedRow) * Max(rows, 1));
	int			r;

	for (r = 0; r < rows; r++)
	{
		LockedRow  *l = &out[r];
		bool		isnull;
		Datum		d;

		l->id = gd_result_int64(r, 1);
		l->status = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2);
		l->locked_by = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 3);
		l->attempt = (int32) gd_result_int64(r, 4);
		l->max_attempts = (int32) gd_result_int64(r, 5);
		l->steps = gd_result_int64(r, 6);
		d = gd_result_datum(r, 7, &isnull);
		l->max_steps = isnull ? 0 : DatumGetInt32(d);
		d = gd_result_datum(r, 8, &isnull);
		l->parent = isnull ? 0 : DatumGetInt64(d);
		l->concurrency_key = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 9);
		d = gd_result_datum(r, 10, &isnull);
		if (!isnull)
			l->npresented = gd_array_int8(DatumGetArrayTypeP(d), "presented", false,
										  &l->presented);
		l->queue = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 11);
		l->spawn_round = (int32) gd_result_int64(r, 12);
		d = gd_result_datum(r, 13, &isnull);
		l->parent_round = isnull ? 0 : DatumGetInt32(d);
		d = gd_result_datum(r, 14, &isnull);
		l->has_shard = !isnull;
		l->shard = isnull ? 0 : DatumGetInt16(d);
		l->claim = gd_result_int64(r, 15);
		l->paused = DatumGetBool(gd_result_datum(r, 16, &isnull));
		l->step = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 17);
		l->history = DatumGetBool(gd_result_datum(r, 18, &isnull));
		l->ctid = *(ItemPointer) DatumGetPointer(gd_result_datum(r, 19, &isnull));
	}
	return out;
}

/*
 * find_row finds an entry's locked row by binary search.
 */
static LockedRow *
find_row(LockedRow *rows, int n, int64 id)
{
	int			lo = 0;
	int			hi = n - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (rows[mid].id == id)
			return &rows[mid];
		if (rows[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/*
 * decide chooses what an entry does, from its outcome and its locked row.
 */
static void
decide(Entry *e, LockedRow *rows, int nrows)
{
	Outcome    *o = e->o;
	LockedRow  *r;
	bool		changes_step = o->kind == OUTCOME_NEXT || o->kind == OUTCOME_AWAIT ||
		o->kind == OUTCOME_SPAWN;

	e->applied = "ok";
	if (o->invalid)
	{
		e->applied = "invalid";
		e->detail = o->invalid;
		return;
	}
	r = find_row(rows, nrows, o->id);
	if (r == NULL || strcmp(r->status, "executing") != 0 ||
		r->locked_by == NULL || strcmp(r->locked_by, o->worker) != 0)
	{
		GdClaim		held;

		e->applied = "stale";
		e->detail = r == NULL && !e->archived ? "no such instance"
			: "the claim is no longer held by this worker";
		/* the worker holds a later claim in memory */
		if (r != NULL && o->has_claim && !e->mem && gd_claim_find(o->id, &held) &&
			strcmp(held.worker, o->worker) == 0)
			e->detail = psprintf("the outcome is for claim %lld, the instance is now in claim %lld",
								 (long long) o->claim, (long long) held.claim);
		return;
	}
	if (o->has_claim && r->claim != o->claim)
	{
		e->applied = "stale";
		e->detail = psprintf("the outcome is for claim %lld, the instance is now in claim %lld",
							 (long long) o->claim, (long long) r->claim);
		return;
	}
	e->row = r;

	if (changes_step && r->max_steps > 0 && r->steps + 1 > r->max_steps)
	{
		e->act = ACT_FAIL;
		e->applied = "budget_exhausted";
		e->error = json_from_text(psprintf("{\"reason\": \"budget_exhausted\", \"max_steps\": %d}",
										   r->max_steps));
		return;
	}
	switch (o->kind)
	{
		case OUTCOME_NEXT:
			e->act = o->cont ? ACT_CONTINUE : ACT_NEXT;
			if (o->cont && r->paused)
			{
				/* a paused queue hands out no step, not even inline */
				e->act = ACT_NEXT;
				e->applied = "requeued";
				e->detail = "its queue is paused";
			}
			else if (o->cont)
			{
				bool		new_key = o->set_key && o->concurrency_key != NULL &&
					(r->concurrency_key == NULL ||
					 strcmp(r->concurrency_key, o->concurrency_key) != 0);

				/* a new key needs a gate slot (admit_continues); null frees one */
				e->gate = new_key ? GATE_IF_CONFIGURED : GATE_NONE;
				e->keeps_slot = !o->set_key || (!new_key && o->concurrency_key != NULL);
			}
			break;
		case OUTCOME_RETRY:
			e->act = ACT_RETRY;
			if (r->attempt + 1 >= r->max_attempts)
			{
				char	   *last = o->error ? JsonbToCString(NULL, &o->error->root, VARSIZE(o->error))
					: "null";

				e->act = ACT_FAIL;
				e->detail = "attempts_exhausted";
				e->error = json_from_text(psprintf("{\"reason\": \"attempts_exhausted\", \"attempts\": %d, \"error\": %s}",
												   r->attempt + 1, last));
			}
			break;
		case OUTCOME_AWAIT:
			e->act = ACT_AWAIT;
			break;
		case OUTCOME_SPAWN:
			e->act = ACT_SPAWN;
			break;
		case OUTCOME_DONE:
			e->act = ACT_DONE;
			break;
		case OUTCOME_FAIL:
			e->act = ACT_FAIL;
			e->error = o->error;
			break;
	}
}

/* the parallel arrays of update_plan, filled one applied entry at a time */
typedef struct UpdateCols
{
	Datum	   *v[UC_NCOLS];
	bool	   *null[UC_NCOLS];
	int			n;
} UpdateCols;

/*
 * set_col stores one value (or NULL when isnull) in row cols->n.
 */
static inline void
set_col(UpdateCols *cols, UpdateCol c, Datum value, bool isnull)
{
	cols->v[c][cols->n] = isnull ? (Datum) 0 : value;
	cols->null[c][cols->n] = isnull;
}

/*
 * add_update appends the row an applied entry writes.
 */
static void
add_update(UpdateCols *cols, Entry *e, TimestampTz now)
{
	Outcome    *o = e->o;
	LockedRow  *r = e->row;
	Action		a = e->act;
	bool		progress = a == ACT_NEXT || a == ACT_CONTINUE || a == ACT_AWAIT ||
		a == ACT_SPAWN;
	bool		engine_fail = a == ACT_FAIL && o->kind != OUTCOME_FAIL;
	static const char *const status_of[] = {
		NULL, "runnable", "executing", "runnable", "awaiting_signal",
		"awaiting_children", "done", "failed"
	};
	int			c;

	for (c = 0; c < UC_NCOLS; c++)
		set_col(cols, c, (Datum) 0, true);

	set_col(cols, UC_ID, Int64GetDatum(o->id), false);
	set_col(cols, UC_WORKER, CStringGetTextDatum(o->worker), false);
	if (e->mem)
	{
		set_col(cols, UC_CLAIM, Int64GetDatum(e->claim.claim), false);
		set_col(cols, UC_TID, PointerGetDatum(&e->claim.tid), false);
		if (e->claim.session != 0)
			set_col(cols, UC_SESSION, Int64GetDatum(e->claim.session), false);
	}
	else if (o->has_claim)
		set_col(cols, UC_CLAIM, Int64GetDatum(o->claim), false);
	/* a spawn whose children all were duplicates runs its next step at once */
	set_col(cols, UC_STATUS, CStringGetTextDatum(a == ACT_SPAWN && e->landed == 0
												 ? "runnable" : status_of[a]), false);
	if (a == ACT_SPAWN)
	{
		set_col(cols, UC_CHILDREN, Int32GetDatum(e->landed), false);
		set_col(cols, UC_JOIN, CStringGetTextDatum(o->first_error ? "first_error" : "all"), false);
		set_col(cols, UC_SPAWN_ROUND, Int32GetDatum(r->spawn_round + 1), false);
	}
	if (progress)
		set_col(cols, UC_STEP, CStringGetTextDatum(o->step), false);
	if (o->state && !engine_fail && a != ACT_DONE && a != ACT_FAIL)
		set_col(cols, UC_STATE, JsonbPGetDatum(o->state), false);
	set_col(cols, UC_ATTEMPT,
			Int32GetDatum(a == ACT_RETRY || (engine_fail && o->kind == OUTCOME_RETRY) ? 1 : 0),
			progress);
	set_col(cols, UC_STEPS, Int64GetDatum(progress ? 1 : 0), false);
	if (progress)
		set_col(cols, UC_ELIGIBLE_AT, TimestampTzGetDatum(now), false);
	else if (a == ACT_RETRY)
		set_col(cols, UC_ELIGIBLE_AT, TimestampTzGetDatum(gd_add_interval(now, &o->delay)), false);
	if (a == ACT_CONTINUE)
	{
		TimestampTz lease = o->has_lease ? gd_add_interval(now, &o->lease)
			: TimestampTzPlusMilliseconds(now, gen_durable_default_lease);

		set_col(cols, UC_LEASE, TimestampTzGetDatum(lease), false);
	}
	if (a == ACT_AWAIT)
	{
		set_col(cols, UC_AWAITS, JsonbPGetDatum(o->names), false);
		if (o->has_timeout)
			set_col(cols, UC_DEADLINE, TimestampTzGetDatum(gd_add_interval(now, &o->timeout)), false);
	}
	set_col(cols, UC_KEEP_WAKE, BoolGetDatum(a == ACT_RETRY), false);
	/* the rate limit and weight belong to the step that runs next (§5.2) */
	set_col(cols, UC_SET_RATE, BoolGetDatum(progress), false);
	if (a == ACT_NEXT || a == ACT_CONTINUE)
	{
		if (o->rate_limit)
			set_col(cols, UC_RATE_LIMIT, CStringGetTextDatum(o->rate_limit), false);
		set_col(cols, UC_WEIGHT, Float8GetDatum(o->weight), false);
		set_col(cols, UC_SET_KEY, BoolGetDatum(o->set_key), false);
		if (o->concurrency_key)
			set_col(cols, UC_KEY, CStringGetTextDatum(o->concurrency_key), false);
		if (o->has_fsm_version)
			set_col(cols, UC_FSM_VERSION, Int32GetDatum(o->fsm_version), false);
	}
	else
	{
		set_col(cols, UC_SET_KEY, BoolGetDatum(false), false);
		if (a == ACT_AWAIT || a == ACT_SPAWN)
			set_col(cols, UC_WEIGHT, Float8GetDatum(1), false);
	}
	if (a == ACT_CONTINUE && e->keeps_slot && r->has_shard)
		set_col(cols, UC_SHARD, Int16GetDatum(r->shard), false);
	else if (a == ACT_CONTINUE && e->has_shard)
		set_col(cols, UC_SHARD, Int16GetDatum(e->shard), false);
	if (a == ACT_DONE)
		set_col(cols, UC_RESULT, JsonbPGetDatum(o->result), false);
	if (e->error)
		set_col(cols, UC_ERROR, JsonbPGetDatum(e->error), false);
	else if (a == ACT_RETRY && o->error)
		set_col(cols, UC_ERROR, JsonbPGetDatum(o->error), false);
	cols->n++;
}

/* the counter of each action that committed */
static const GdCounter committed_counter[] = {
	GD_NCOUNTERS, GD_STAT_COMMITTED_NEXT, GD_STAT_COMMITTED_CONTINUE,
	GD_STAT_COMMITTED_RETRY, GD_STAT_COMMITTED_AWAIT, GD_STAT_COMMITTED_SPAWN,
	GD_STAT_COMMITTED_DONE, GD_STAT_COMMITTED_FAIL
};

/*
 * after_commit records what an applied entry means once committed: its
 * counters, a queue with work now, an instance parked (await() callers
 * wake) or a deadline for the maintenance worker.  Terminal entries are
 * announced by settle.c.
 */
static void
after_commit(Entry *e, TimestampTz now)
{
	Outcome    *o = e->o;

	gd_count(committed_counter[e->act], 1);
	if (strcmp(e->applied, "requeued") == 0)
		gd_count(GD_STAT_REQUEUED, 1);
	else if (strcmp(e->applied, "budget_exhausted") == 0)
		gd_count(GD_STAT_BUDGET_EXHAUSTED, 1);
	else if (e->detail != NULL && strcmp(e->detail, "attempts_exhausted") == 0)
		gd_count(GD_STAT_ATTEMPTS_EXHAUSTED, 1);

	/* a concurrency key the step held is free: its queue's next row may run */
	if (e->row->concurrency_key != NULL && !(e->act == ACT_CONTINUE && e->keeps_slot))
		gd_queue_runnable(e->row->queue);

	switch (e->act)
	{
		case ACT_NEXT:
			gd_queue_runnable(e->row->queue);
			break;
		case ACT_RETRY:
			if (gd_interval_positive(&o->delay))
				gd_deadline(gd_add_interval(now, &o->delay));
			else
				gd_queue_runnable(e->row->queue);
			break;
		case ACT_AWAIT:
			gd_instance_settled(o->id);
			if (o->has_timeout)
				gd_deadline(gd_add_interval(now, &o->timeout));
			break;
		case ACT_SPAWN:
			gd_count(GD_STAT_CHILDREN_SPAWNED, e->landed);
			if (e->landed > 0)
				gd_instance_settled(o->id);
			else
				gd_queue_runnable(e->row->queue);
			break;
		case ACT_CONTINUE:
			gd_deadline(o->has_lease ? gd_add_interval(now, &o->lease)
						: TimestampTzPlusMilliseconds(now, gen_durable_default_lease));
			break;
		default:
			break;
	}
}

/*
 * settle_memory_claims begins to settle, for this transaction, every valid
 * entry's claim that is held in memory (claims.c); such an entry's row is
 * then runnable, the version its claim names, which the guarded UPDATE
 * checks instead of the row's claim columns.
 */
static void
settle_memory_claims(Entry **byid, int nvalid)
{
	int			i;

	for (i = 0; i < nvalid; i++)
	{
		Outcome    *o = byid[i]->o;

		byid[i]->mem = gd_claim_settle(o->id, o->has_claim ? &o->claim : NULL, o->worker,
									   &byid[i]->claim);
	}
}

/*
 * overlay_memory_claims makes the locked row of each entry settling a claim
 * in memory look as a row claimed on disk would, when it still is the
 * version the claim names: executing, by the claim's worker, in its claim.
 * decide() then judges both kinds alike; a row that changed since (a
 * cancel, a retry) stays as it is, and the entry is stale.
 */
static void
overlay_memory_claims(Entry **byid, int nvalid, LockedRow *rows, int nrows)
{
	int			i;

	for (i = 0; i < nvalid; i++)
	{
		Entry	   *e = byid[i];
		LockedRow  *r;

		if (!e->mem || e->written)
			continue;
		r = find_row(rows, nrows, e->o->id);
		if (r == NULL || strcmp(r->status, "runnable") != 0 ||
			!ItemPointerEquals(&r->ctid, &e->claim.tid))
			continue;
		r->status = "executing";
		r->locked_by = e->claim.worker;
		r->claim = e->claim.claim;
	}
}

/*
 * compare_entries orders entries by id, then by input position.
 */
static int
compare_entries(const void *a, const void *b)
{
	const Entry *x = *(Entry *const *) a;
	const Entry *y = *(Entry *const *) b;

	if (x->o->id != y->o->id)
		return (x->o->id > y->o->id) - (x->o->id < y->o->id);
	return (x > y) - (x < y);
}

/*
 * index_entries returns the valid entries sorted by id.  An id that appears
 * again later in the batch makes that later entry invalid: one claim has
 * one outcome.
 */
static Entry **
index_entries(Entry *entries, int n, int *nvalid)
{
	Entry	  **byid = palloc(sizeof(Entry *) * Max(n, 1));
	int			m = 0;
	int			kept = 0;
	int			i;

	for (i = 0; i < n; i++)
		if (entries[i].o->invalid == NULL)
			byid[m++] = &entries[i];
	qsort(byid, m, sizeof(Entry *), compare_entries);
	for (i = 0; i < m; i++)
	{
		if (kept > 0 && byid[kept - 1]->o->id == byid[i]->o->id)
		{
			byid[i]->o->invalid = "this id already has an outcome earlier in the batch";
			continue;
		}
		byid[kept++] = byid[i];
	}
	*nvalid = kept;
	return byid;
}

/*
 * entry_by_id finds the valid entry for an id returned by a statement.
 */
static Entry *
entry_by_id(Entry **byid, int n, int64 id)
{
	int			lo = 0;
	int			hi = n - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (byid[mid]->o->id == id)
			return byid[mid];
		if (byid[mid]->o->id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	elog(ERROR, "flush statement returned id " INT64_FORMAT ", which is not in the batch", id);
	return NULL;				/* keep compiler quiet */
}

/* which of the ids the live table does not have are in the archive */
static GdPlan archived_plan = {
	"SELECT id FROM gen_durable.instances WHERE id = ANY ($1)",
	1,
	{INT8ARRAYOID}
};

/*
 * mark_archived marks the entries whose instance the lock statement did
 * not find (it reads the live table only) but the archive has: their
 * outcome comes after the end of the instance, and is stale as any late
 * outcome is.  A statement only when such entries exist (a resent
 * outcome).
 */
static void
mark_archived(Entry **byid, int nvalid, LockedRow *rows, int nrows)
{
	int64	   *missing = palloc(sizeof(int64) * Max(nvalid, 1));
	Datum		values[1];
	int			nmissing = 0;
	int			found;
	int			i;

	for (i = 0; i < nvalid; i++)
		if (!byid[i]->written && find_row(rows, nrows, byid[i]->o->id) == NULL)
			missing[nmissing++] = byid[i]->o->id;
	if (nmissing == 0)
		return;
	values[0] = PointerGetDatum(gd_int8_array(missing, nmissing));
	found = gd_execute(&archived_plan, values, NULL, SPI_OK_SELECT);
	for (i = 0; i < found; i++)
		entry_by_id(byid, nvalid, gd_result_int64(i, 1))->archived = true;
}

/*
 * spawn_children inserts the children of every spawn entry with one batch
 * (children go to their own queues with their own options; correlation
 * duplicates do not land) and records how many landed per parent: the
 * number its join waits for (D12, I-26).  The parents are locked already
 * (I-7), so a reaper cannot take them back meanwhile.
 */
static void
spawn_children(Entry *entries, int n, TimestampTz now)
{
	InsertSpec *specs;
	InsertResult result;
	int			total = 0;
	int			k = 0;
	int			i;
	int			c;

	for (i = 0; i < n; i++)
		if (entries[i].act == ACT_SPAWN)
			total += entries[i].o->nchildren;
	if (total == 0)
		return;
	if (total > GD_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the spawns of one flush have %d children, more than the limit of %d",
						total, GD_MAX_BATCH),
				 errhint("Flush the spawning outcomes in smaller batches.")));

	specs = palloc(sizeof(InsertSpec) * total);
	for (i = 0; i < n; i++)
	{
		Entry	   *e = &entries[i];

		if (e->act != ACT_SPAWN)
			continue;
		for (c = 0; c < e->o->nchildren; c++)
		{
			specs[k] = e->o->children[c];
			specs[k].parent_id = e->o->id;
			specs[k].child_index = c;
			specs[k].parent_round = e->row->spawn_round + 1;
			k++;
		}
	}
	gd_insert_specs(specs, total, now, &result);

	k = 0;
	for (i = 0; i < n; i++)
	{
		Entry	   *e = &entries[i];

		if (e->act != ACT_SPAWN)
			continue;
		for (c = 0; c < e->o->nchildren; c++, k++)
			if (result.created[k])
				e->landed++;
	}
}

/*
 * admit_continues admits the steps continued inline against the limits of
 * the step that runs next (§11): its rate limit takes its tokens, and a new
 * concurrency key takes a slot of its gate, recorded by the guarded update
 * that continues the row (I-20).  A step that is denied, or whose new key
 * names no gate (D10, I-10: a K=1 key is only ever taken by a claim), is
 * committed as a plain next instead (requeued).
 */
static bool
admit_continues(Entry *entries, int n)
{
	AdmitCandidate *cands = palloc0(sizeof(AdmitCandidate) * Max(n, 1));
	Entry	  **of = palloc(sizeof(Entry *) * Max(n, 1));
	int			m = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		Entry	   *e = &entries[i];

		if (e->act != ACT_CONTINUE || (e->gate == GATE_NONE && e->o->rate_limit == NULL))
			continue;
		cands[m].id = e->o->id;
		cands[m].concurrency_key = e->gate != GATE_NONE ? e->o->concurrency_key : NULL;
		cands[m].gate = e->gate;
		cands[m].rate_limit = e->o->rate_limit;
		cands[m].weight = e->o->weight;
		of[m++] = e;
	}
	if (m == 0)
		return false;
	gd_admit(cands, m);
	for (i = 0; i < m; i++)
	{
		Entry	   *e = of[i];

		if (cands[i].admitted)
		{
			e->has_shard = cands[i].has_shard;
			e->shard = cands[i].shard;
			continue;
		}
		e->act = ACT_NEXT;
		e->keeps_slot = false;
		e->applied = "requeued";
		e->detail = cands[i].denial == DENIED_UNCONFIGURED
			? "a step with a new unconfigured concurrency key is not continued inline"
			: cands[i].denial == DENIED_UNKNOWN_RATE ? "its rate limit is not configured"
			: cands[i].denial == DENIED_CONTENDED ? "admission contended" : "throttled";
	}
	return true;
}

/*
 * credit_leaving credits, before any admission, the gate slots of the
 * entries that certainly leave executing or give up their slot: every
 * applied entry but a continue that keeps its key, whose fate admission
 * decides.  Crediting first, waiting for the shards in order, means that
 * no flush waits for a bucket while holding one it admitted against.
 */
static void
credit_leaving(Entry *entries, int n)
{
	HeldSlots	slots;
	int			i;

	gd_slots_init(&slots);
	for (i = 0; i < n; i++)
	{
		Entry	   *e = &entries[i];

		if (e->act == ACT_NONE || !e->row->has_shard ||
			(e->act == ACT_CONTINUE && e->keeps_slot))
			continue;
		gd_slots_add(&slots, e->row->concurrency_key, e->row->shard);
		e->credited = true;
	}
	gd_credit_slots(&slots, true);
}

/* the continued entries that a first_error cascade of this flush ended */
static GdPlan ended_plan = {
	"SELECT id FROM ONLY gen_durable.instances WHERE id = ANY ($1) AND status <> 'executing'",
	1,
	{INT8ARRAYOID}
};

/*
 * withdraw_cancelled_continues takes back the job of a continued entry that
 * a first_error cascade of the same flush cancelled (a sibling's failure
 * in the batch): the worker must not run its next step.
 */
static void
withdraw_cancelled_continues(Entry *entries, int n)
{
	int64	   *ids = palloc(sizeof(int64) * Max(n, 1));
	Datum		values[1];
	int			nids = 0;
	int			rows;
	int			i;
	int			r;

	for (i = 0; i < n; i++)
		if (entries[i].has_job)
			ids[nids++] = entries[i].o->id;
	if (nids == 0)
		return;
	values[0] = PointerGetDatum(gd_int8_array(ids, nids));
	rows = gd_execute(&ended_plan, values, NULL, SPI_OK_SELECT);
	for (r = 0; r < rows; r++)
	{
		int64		id = gd_result_int64(r, 1);

		for (i = 0; i < n; i++)
			if (entries[i].has_job && entries[i].o->id == id)
			{
				entries[i].has_job = false;
				entries[i].detail = "cancelled by first_error";
			}
	}
}

/*
 * warn_rate_limits warns about the next steps whose rate limit is not
 * configured or cannot grant their weight (limit_policy.c).
 */
static void
warn_rate_limits(Entry *entries, int n)
{
	Datum	   *names = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *weights = palloc(sizeof(Datum) * Max(n, 1));
	int			m = 0;
	int			i;

	for (i = 0; i < n; i++)
		if ((entries[i].act == ACT_NEXT || entries[i].act == ACT_CONTINUE) &&
			entries[i].o->rate_limit != NULL)
		{
			names[m] = CStringGetTextDatum(entries[i].o->rate_limit);
			weights[m++] = Float8GetDatum(entries[i].o->weight);
		}
	gd_warn_rate_limits(names, weights, m);
}

/* what the written entries of both paths leave for the end of the flush */
typedef struct Applied
{
	Settled		settled;		/* the entries that ended */
	HeldSlots	slots;			/* gate slots still to credit */
	int64	   *parked;			/* the entries that now await signals */
	int			nparked;
} Applied;

/*
 * applied_init prepares an Applied for up to n entries.
 */
static void
applied_init(Applied *ap, int n)
{
	gd_slots_init(&ap->slots);
	gd_settled_init(&ap->settled, n, &ap->slots);
	ap->parked = palloc(sizeof(int64) * Max(n, 1));
	ap->nparked = 0;
}

/*
 * pending says whether an entry has an action whose row is not written yet.
 */
static inline bool
pending(Entry *e)
{
	return e->act != ACT_NONE && !e->written;
}

/*
 * update_entries runs the guarded UPDATE (4b) for every pending entry, in
 * id order (byid: the fast path locks the rows as it writes them, in the
 * order every locker uses, I-23), and returns how many rows it wrote; fast
 * adds the fast path's guards.  When an entry ends done and archiving is
 * on (archive.h), the statement is the form that moves such instances to
 * the open archive segment.
 */
static int
update_entries(Entry **byid, int nvalid, TimestampTz now, bool fast)
{
	UpdateCols	cols;
	Datum		values[UC_NCOLS + 2];
	char		nulls[UC_NCOLS + 2];
	GdPlan	   *plan = &update_plan;
	int			dones = 0;
	int			m = 0;
	int			rows;
	int			i;
	int			c;

	for (i = 0; i < nvalid; i++)
		if (pending(byid[i]))
		{
			m++;
			dones += byid[i]->act == ACT_DONE ? 1 : 0;
		}
	if (m == 0)
		return 0;
	if (dones > 0)
	{
		int			seg = gd_archive_open_segment();

		if (seg >= 0)
			plan = move_plan(seg);
	}
	for (c = 0; c < UC_NCOLS; c++)
	{
		cols.v[c] = palloc(sizeof(Datum) * m);
		cols.null[c] = palloc(sizeof(bool) * m);
	}
	cols.n = 0;
	for (i = 0; i < nvalid; i++)
		if (pending(byid[i]))
			add_update(&cols, byid[i], now);
	for (c = 0; c < UC_NCOLS; c++)
		values[c] = PointerGetDatum(gd_array(cols.v[c], cols.null[c], cols.n,
											 update_col_types[c]));
	values[UC_NCOLS] = TimestampTzGetDatum(now);
	values[UC_NCOLS + 1] = BoolGetDatum(fast);
	memset(nulls, ' ', sizeof(nulls));
	rows = gd_execute(plan, values, nulls, SPI_OK_SELECT);
	if (!fast && rows != cols.n)
		elog(ERROR, "flush updated %d of %d owned instances", rows, cols.n);
	return rows;
}

/*
 * record_updated records, for each row the UPDATE wrote (the result in
 * SPI_tuptable), the entry's job, what it means once committed, and what
 * the end of the flush does with it.
 */
static void
record_updated(int rows, Entry **byid, int nvalid, Applied *ap, TimestampTz now)
{
	int			i;

	for (i = 0; i < rows; i++)
	{
		Entry	   *e = entry_by_id(byid, nvalid, gd_result_int64(i, 1));
		bool		isnull;
		Datum		job = gd_result_copy(i, 2, &isnull);

		e->written = true;
		if (!isnull)
		{
			e->job = job;
			e->has_job = true;
		}
		after_commit(e, now);
		if (e->row->has_shard && !e->credited && !(e->act == ACT_CONTINUE && e->keeps_slot))
			gd_slots_add(&ap->slots, e->row->concurrency_key, e->row->shard);
		if (e->act == ACT_AWAIT)
			ap->parked[ap->nparked++] = e->o->id;
		else if (e->act == ACT_DONE || e->act == ACT_FAIL)
			gd_settled_add(&ap->settled, e->o->id, e->row->parent, e->row->parent_round,
						   e->act == ACT_FAIL);
	}
}

/* the kind a history row records for each action */
static const char *const history_kind[] = {
	NULL, "next", "continue", "retry", "await", "spawn", "done", "fail"
};

/*
 * record_history appends to the step history (history.c) the outcome of
 * every written entry whose instance records it.  Such rows take the
 * locked path (the fast path skips them), so each has the row it locked:
 * the steps, step and attempt the step ran at.
 */
static void
record_history(Entry *entries, int n, TimestampTz now)
{
	GdHistory	h;
	int			i;

	for (i = 0; i < n && !(entries[i].written && entries[i].row->history); i++)
		;
	if (i == n)
		return;					/* the usual case: nothing records history */
	gd_history_init(&h, n);
	for (; i < n; i++)
	{
		Entry	   *e = &entries[i];
		Jsonb	   *error = e->error;

		if (!e->written || !e->row->history)
			continue;
		if (error == NULL && e->act == ACT_RETRY)
			error = e->o->error;
		gd_history_add(&h, e->o->id, e->row->steps, e->row->step, history_kind[e->act],
					   e->row->attempt, e->o->worker, error);
	}
	gd_history_write(&h, now);
}

/*
 * fast_kind says whether an outcome can take the fast path: a done, or a
 * next that keeps its concurrency key and needs no admission.
 */
static bool
fast_kind(Outcome *o)
{
	if (o->kind == OUTCOME_DONE)
		return true;
	return o->kind == OUTCOME_NEXT && !o->set_key && (!o->cont || o->rate_limit == NULL);
}

/*
 * flush_fast is the fast path (see the file header), for a batch whose
 * valid entries all are of a fast kind: one guarded UPDATE with the fast
 * guards writes the rows that need nothing more; each written entry gets
 * the row it wrote (no gate slot, no parent, nothing presented).  The
 * others are left as if undecided, for the lock statement.
 */
static void
flush_fast(Entry **byid, int nvalid, Applied *ap, TimestampTz now)
{
	static LockedRow unread = {0};
	int			rows;
	int			i;

	for (i = 0; i < nvalid; i++)
	{
		Entry	   *e = byid[i];

		e->act = e->o->kind == OUTCOME_DONE ? ACT_DONE
			: e->o->cont ? ACT_CONTINUE : ACT_NEXT;
		e->keeps_slot = e->act == ACT_CONTINUE;
		e->row = &unread;
	}
	rows = update_entries(byid, nvalid, now, true);
	for (i = 0; i < rows; i++)
	{
		Entry	   *e = entry_by_id(byid, nvalid, gd_result_int64(i, 1));
		LockedRow  *r = palloc0(sizeof(LockedRow));

		r->id = e->o->id;
		r->status = "executing";
		r->locked_by = e->o->worker;
		r->queue = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);
		r->concurrency_key = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4);
		e->row = r;
		e->applied = "ok";
	}
	record_updated(rows, byid, nvalid, ap, now);
	for (i = 0; i < nvalid; i++)
		if (!byid[i]->written)
		{
			byid[i]->act = ACT_NONE;
			byid[i]->keeps_slot = false;
			byid[i]->row = NULL;
		}
}

/*
 * apply runs statements 3 and 4 for the decided entries not written yet;
 * byid indexes the valid ones by id.
 */
static void
apply(Entry *entries, int n, Entry **byid, int nvalid, Applied *ap, TimestampTz now)
{
	Datum		values[1];
	int64	   *consumed;
	int			nconsumed = 0;
	int			ncap = 0;
	int			rows;
	int			i;

	for (i = 0; i < n; i++)
		if (pending(&entries[i]))
			ncap += entries[i].row->npresented;

	/* 3. consume the signals handed to progressing steps */
	consumed = palloc(sizeof(int64) * Max(ncap, 1));
	for (i = 0; i < n; i++)
		if (pending(&entries[i]) &&
			(entries[i].act == ACT_NEXT || entries[i].act == ACT_CONTINUE ||
			 entries[i].act == ACT_SPAWN))
		{
			memcpy(consumed + nconsumed, entries[i].row->presented,
				   sizeof(int64) * entries[i].row->npresented);
			nconsumed += entries[i].row->npresented;
		}
	if (nconsumed > 0)
	{
		values[0] = PointerGetDatum(gd_int8_array(consumed, nconsumed));
		gd_execute(&consume_plan, values, NULL, SPI_OK_DELETE);
	}

	/* 4a. the children of spawns, in one batch (insert.c) */
	spawn_children(entries, n, now);

	/* 4b. one guarded UPDATE for every applied entry */
	rows = update_entries(byid, nvalid, now, false);
	record_updated(rows, byid, nvalid, ap, now);
}

/*
 * finish runs statements 5 to 7 for every written entry of both paths.
 * held_buckets says that admission holds bucket locks: the last credits
 * then take only the shards free now (credit.c).
 */
static void
finish(Entry *entries, int n, Entry **byid, int nvalid, Applied *ap,
	   TimestampTz now, bool held_buckets)
{
	Datum		values[2];
	int			rows;
	int			i;

	/* 5. a parked instance whose signal already arrived wakes at once */
	if (ap->nparked > 0)
	{
		values[0] = PointerGetDatum(gd_int8_array(ap->parked, ap->nparked));
		values[1] = TimestampTzGetDatum(now);
		rows = gd_execute(&recheck_plan, values, NULL, SPI_OK_UPDATE_RETURNING);
		for (i = 0; i < rows; i++)
		{
			Entry	   *e = entry_by_id(byid, nvalid, gd_result_int64(i, 1));

			e->detail = "woken";
			gd_queue_runnable(e->row->queue);
		}
	}

	/* 6. terminal riders */
	if (gd_settle(&ap->settled, now) > 0)
		withdraw_cancelled_continues(entries, n);

	/*
	 * 7. the gate slots of the rows that left executing and were not
	 * credited before admission (requeued continues, cascades), after all
	 * row locks
	 */
	gd_credit_slots(&ap->slots, !held_buckets);
	warn_rate_limits(entries, n);
}

/*
 * gen_durable_flush implements gen_durable.flush(outcomes): one row
 * (id, applied, detail, job) per entry, in input order.
 */
Datum
gen_durable_flush(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = GetCurrentTimestamp();
	Jsonb	   *arg;
	Outcome    *outcomes;
	Entry	   *entries;
	LockedRow  *rows = NULL;
	bool		held_buckets;
	Applied		applied;
	Entry	  **byid;
	int64	   *ids;
	int			nvalid;
	int			nlocked = 0;
	int			nrows = 0;
	int			n;
	int			i;

	gd_require_read_committed("flush");
	arg = gd_arg_jsonb(fcinfo, 0, "outcomes",
					   "[{\"id\": 1, \"worker\": \"w1\", \"kind\": \"done\", \"claim\": 1}]");
	outcomes = gd_parse_outcomes(arg, now, &n);
	InitMaterializedSRF(fcinfo, 0);

	entries = palloc0(sizeof(Entry) * Max(n, 1));
	for (i = 0; i < n; i++)
		entries[i].o = &outcomes[i];
	byid = index_entries(entries, n, &nvalid);
	ids = palloc(sizeof(int64) * Max(nvalid, 1));

	gd_connect();
	applied_init(&applied, n);
	settle_memory_claims(byid, nvalid);
	for (i = 0; i < nvalid && fast_kind(byid[i]->o); i++)
		;
	if (nvalid > 0 && i == nvalid)
		flush_fast(byid, nvalid, &applied, now);
	for (i = 0; i < nvalid; i++)
		if (!byid[i]->written)
			ids[nlocked++] = byid[i]->o->id;
	if (nlocked > 0)
	{
		Datum		values[2];
		Datum	   *kinds = palloc(sizeof(Datum) * nlocked);
		int			k = 0;

		for (i = 0; i < nvalid; i++)
			if (!byid[i]->written)
				kinds[k++] = CStringGetTextDatum(gd_outcome_kind_name(byid[i]->o->kind));
		values[0] = PointerGetDatum(gd_int8_array(ids, nlocked));
		values[1] = PointerGetDatum(gd_array(kinds, NULL, nlocked, TEXTOID));
		nrows = gd_execute(&lock_plan, values, NULL, SPI_OK_SELECT);
		rows = read_locked(nrows);
		overlay_memory_claims(byid, nvalid, rows, nrows);
		mark_archived(byid, nvalid, rows, nrows);
	}
	for (i = 0; i < n; i++)
	{
		if (entries[i].written)
			continue;
		decide(&entries[i], rows, nrows);
		if (entries[i].act == ACT_NONE)
			gd_count(entries[i].o->invalid ? GD_STAT_INVALID : GD_STAT_STALE, 1);
	}
	credit_leaving(entries, n);
	held_buckets = admit_continues(entries, n);
	apply(entries, n, byid, nvalid, &applied, now);
	record_history(entries, n, now);
	finish(entries, n, byid, nvalid, &applied, now, held_buckets);
	for (i = 0; i < nvalid; i++)
		if (byid[i]->mem && byid[i]->written)
			gd_claim_settled(byid[i]->o->id);

	for (i = 0; i < n; i++)
	{
		Entry	   *e = &entries[i];
		Datum		out[4];
		bool		outnull[4] = {!e->o->has_id, false, e->detail == NULL, !e->has_job};

		out[0] = Int64GetDatum(e->o->id);
		out[1] = CStringGetTextDatum(e->applied);
		out[2] = e->detail ? CStringGetTextDatum(e->detail) : (Datum) 0;
		out[3] = e->job;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	}
	gd_finish();
	return (Datum) 0;
}
