/*-------------------------------------------------------------------------
 *
 * pick.c
 *		pick(): claiming runnable instances of one queue.
 *
 *		A pick is claim -> admit -> flip, in one transaction (contract §4,
 *		D7):
 *		1. the candidate statement locks up to `batch` due runnable rows of
 *		   the queue (none while it is paused: queue_control.c) in priority
 *		   order, FOR NO KEY UPDATE SKIP LOCKED, after
 *		   probing the K=1 arbiter per row (rows whose unconfigured
 *		   concurrency key is already executing are skipped before the LIMIT,
 *		   I-11), skips keys that a concurrent pick is claiming right now (a
 *		   transaction-level advisory lock per key, taken without waiting,
 *		   and only for a row that passed every other test: the CASE on the
 *		   probe's result makes it the last, so skipped rows do not fill the
 *		   lock table),
 *		   and keeps only the most urgent row per key (window dedup);
 *		2. gd_admit decides which candidates may run against rate limits
 *		   and concurrency gates, and debits their buckets (admit.c);
 *		3. the flip statement turns the admitted rows into claims, records
 *		   the awaited signal ids handed to the step (presented, D20) and
 *		   returns the enriched jobs, all from one snapshot.
 *		The UNIQUE arbiter index is what really enforces K=1.  Without the
 *		advisory lock two picks (of any queues) could flip rows of the same
 *		key at once, and the second would wait in the index for the first to
 *		commit, or deadlock with it when each claims several keys; with it
 *		they never insert the same key together.  The flip still runs in a
 *		subtransaction when it touches keyed rows, and a unique violation or
 *		deadlock there is retried (the retry's probe sees the winner), at most
 *		GD_CLAIM_ATTEMPTS times before the keyed rows are left for a later
 *		pick (D7: contention never errors out of pick).  The claim
 *		records the backend's session (session.c) so that the claims of a
 *		worker whose connection dies return within about a second.
 *
 * IDENTIFICATION
 *		src/pick.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/resowner.h"

#include "admit.h"
#include "aftercommit.h"
#include "args.h"
#include "claims.h"
#include "gen_durable.h"
#include "job.h"
#include "pick_index.h"
#include "pick_memory.h"
#include "session.h"
#include "spi_util.h"
#include "wait.h"

PG_FUNCTION_INFO_V1(gen_durable_pick);

/* the columns candidates statements return after GD_CANDIDATE_COLUMNS */
enum
{
	CAND_PRIORITY = CAND_WEIGHT + 1,
	CAND_ELIGIBLE_AT
};

/*
 * step 1: lock the candidates, most urgent first, of one kind of row
 * (pick_index.h): the guarded rows, and the plain rows when this pick
 * cannot claim them in memory.  A row whose concurrency
 * key names a configured gate is gated: the gate's counters limit it, not
 * the K=1 arbiter, so it skips the arbiter probe, the key lock and the
 * one-per-key window.  Rows that admission could not admit now do not
 * take a place in the batch, so they cannot starve the rows behind them
 * (pathology P4): a gated row whose key has bucket rows and no free slot,
 * a rate-limited row whose key has fewer tokens than its weight (read
 * without locks, refilled to now), and a row whose rate limit has no
 * policy (it waits, D6).  These probes read the buckets without locking
 * them: admission, under the locks, decides.  Every lookup is a subquery
 * evaluated per row, never a join: the scan must stay the pick index in
 * order, stopped by the LIMIT, whatever the planner thinks of the rows (a
 * hash join on stale statistics once sorted a whole 100,000-row queue).
 */
#define CANDIDATES_SQL(kind) \
	"SELECT " GD_CANDIDATE_COLUMNS("c") ", c.priority, c.eligible_at FROM (" \
	"  SELECT l.*, pg_catalog.row_number() OVER" \
	"           (PARTITION BY l.concurrency_key ORDER BY l.priority, l.eligible_at, l.id) AS rn" \
	"    FROM (SELECT i.id, i.concurrency_key, g.gated, i.rate_limit," \
	"                 i.weight, i.priority, i.eligible_at" \
	"            FROM ONLY gen_durable.instances i" \
	"            CROSS JOIN LATERAL (SELECT i.concurrency_key IS NOT NULL" \
	"                                   AND EXISTS (SELECT 1 FROM gen_durable.limits p" \
	"                                                WHERE p.kind = 'conc'" \
	"                                                  AND p.name = i.concurrency_name) AS gated) g" \
	"            LEFT JOIN LATERAL (SELECT true AS busy FROM ONLY gen_durable.instances e" \
	"                                WHERE NOT g.gated" \
	"                                  AND e.concurrency_key = i.concurrency_key" \
	"                                  AND e.status = 'executing'" \
	"                                  AND e.concurrency_key IS NOT NULL" \
	"                                  AND e.concurrency_shard IS NULL" \
	"                                LIMIT 1) k ON true" \
	"           WHERE i.queue = $1 AND i.status = 'runnable' AND i.eligible_at <= $2" \
	"             AND " kind \
	"             AND NOT EXISTS (SELECT 1 FROM gen_durable.queue_settings q" \
	"                              WHERE q.queue = $1 AND q.paused_at IS NOT NULL)" \
	"             AND ($4::text[] IS NULL OR i.fsm = ANY ($4))" \
	"             AND (NOT g.gated" \
	"                  OR NOT EXISTS (SELECT 1 FROM gen_durable.buckets b" \
	"                                  WHERE b.kind = 'conc' AND b.key = i.concurrency_key)" \
	"                  OR EXISTS (SELECT 1 FROM gen_durable.buckets b" \
	"                               JOIN gen_durable.limits p" \
	"                                 ON p.kind = 'conc' AND p.name = i.concurrency_name" \
	"                              WHERE b.kind = 'conc' AND b.key = i.concurrency_key" \
	"                                AND b.available - b.capacity" \
	"                                    + pg_catalog.floor(p.capacity / p.shards)" \
	"                                    + CASE WHEN b.shard < p.capacity::int % p.shards" \
	"                                           THEN 1 ELSE 0 END >= 1))" \
	"             AND (i.rate_limit IS NULL" \
	"                  OR EXISTS (SELECT 1 FROM gen_durable.limits r" \
	"                              WHERE r.kind = 'rate'" \
	"                                AND r.name = pg_catalog.split_part(i.rate_limit, ':', 1)" \
	"                                AND COALESCE((SELECT pg_catalog.sum(LEAST(r.capacity / r.shards," \
	"                                                b.available + GREATEST(0, EXTRACT(epoch FROM" \
	"                                                  $2 - b.last_refill)::float8)" \
	"                                                * r.rate / r.shards))" \
	"                                                FROM gen_durable.buckets b" \
	"                                               WHERE b.kind = 'rate' AND b.key = i.rate_limit" \
	"                                                 AND b.shard < r.shards)," \
	"                                             r.capacity) >= i.weight))" \
	"             AND CASE WHEN k.busy IS NOT NULL THEN false" \
	"                      ELSE i.concurrency_key IS NULL OR g.gated" \
	"                           OR pg_catalog.pg_try_advisory_xact_lock(" GD_KEY_LOCK_CLASS "," \
	"                                pg_catalog.hashtext(i.concurrency_key)) END" \
	"           ORDER BY i.priority, i.eligible_at" \
	"           LIMIT $3" \
	"           FOR NO KEY UPDATE OF i SKIP LOCKED) l" \
	") c" \
	" WHERE c.concurrency_key IS NULL OR c.gated OR c.rn = 1" \
	" ORDER BY c.priority, c.eligible_at, c.id"

/* the guarded rows of the queue (instances_pick_guarded) */
static GdPlan guarded_candidates_plan = {
	CANDIDATES_SQL(GD_GUARDED_ROW("i")),
	4,
	{TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTARRAYOID}
};

/*
 * the plain rows of the queue (instances_pick_plain), locked to be claimed
 * on the row when this pick cannot claim them in memory: those claimed in
 * memory by other picks are left out before the LIMIT (and probed again
 * once locked, read_row_candidates); a schema older than 0.8.0 has no
 * probe, and no claims in memory either
 */
static GdPlan plain_locked_candidates_plan = {
	CANDIDATES_SQL(GD_PLAIN_ROW("i") " AND NOT gen_durable._claimed_in_memory(i.id)"),
	4,
	{TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTARRAYOID}
};

static GdPlan plain_locked_candidates_before_080_plan = {
	CANDIDATES_SQL(GD_PLAIN_ROW("i")),
	4,
	{TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTARRAYOID}
};

/*
 * step 3: flip the admitted rows and return their jobs.  The rows are
 * still runnable: the candidate statement locked them in this transaction.
 * (The WHERE clause therefore names no status, which also keeps the
 * planner on the primary key rather than a status-partial index.)  A
 * gated row records the shard of the gate slot it took; any other keyed
 * row enters the K=1 arbiter, and the probe repeats the arbiter's
 * predicate so that a retry after a unique violation skips the key the
 * concurrent claim won (a scalar subquery, so it stays a per-row index
 * probe).
 */
static GdPlan flip_plan = {
	"WITH f AS ("
	"  UPDATE ONLY gen_durable.instances i"
	"     SET status = 'executing', locked_by = $2, lease_expires_at = $3,"
	"         updated_at = $4, concurrency_shard = a.shard, claim_session = $5,"
	"         claim = i.claim + 1,"
	"         presented = (SELECT pg_catalog.array_agg(s.id ORDER BY s.id)"
	"                        FROM gen_durable.signals s"
	"                       WHERE s.target_id = i.id AND s.name = ANY (i.awaits))"
	"    FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($6::int2[]))"
	"         AS a(id, shard)"
	"   WHERE i.id = a.id"
	"     AND (i.concurrency_key IS NULL OR a.shard IS NOT NULL"
	"          OR (SELECT true FROM ONLY gen_durable.instances e"
	"               WHERE e.concurrency_key = i.concurrency_key"
	"                 AND e.status = 'executing'"
	"                 AND e.concurrency_key IS NOT NULL"
	"                 AND e.concurrency_shard IS NULL LIMIT 1) IS NULL)"
	"  RETURNING " GD_JOB_COLUMNS("i") ", i.priority, i.eligible_at"
	")"
	"SELECT " GD_JOB_NAMES ", priority, eligible_at FROM f ORDER BY priority, eligible_at, id",
	6,
	{INT8ARRAYOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, INT2ARRAYOID}
};

/* what one pick call works with */
typedef struct PickArgs
{
	char	   *queue;
	char	   *worker;
	int			batch;
	Interval   *lease;
	Datum		fsms;			/* text[], or 0 when NULL */
} PickArgs;

/* the columns of the flip's result after the job's */
enum
{
	FLIP_PRIORITY = GD_JOB_NCOLS + 1,
	FLIP_ELIGIBLE_AT
};

/*
 * emit_flipped appends one row of the flip's result (flipped) to the SRF's
 * tuplestore.
 */
static void
emit_flipped(ReturnSetInfo *rsinfo, SPITupleTable *flipped, int row)
{
	Datum		values[GD_JOB_NCOLS];
	bool		nulls[GD_JOB_NCOLS];

	gd_job_values(rsinfo, flipped, row, values, nulls);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * is_claim_contention says whether an error is the K=1 arbiter refusing a
 * second executing row for a key, or a deadlock between two picks whose
 * claims of several keys waited on each other in the arbiter index.
 */
static bool
is_claim_contention(ErrorData *edata)
{
	if (edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
		return true;
	return edata->sqlerrcode == ERRCODE_UNIQUE_VIOLATION &&
		edata->constraint_name != NULL &&
		strcmp(edata->constraint_name, "instances_concurrency_active") == 0;
}

/* the arguments of one flip statement */
typedef struct FlipArgs
{
	Datum	   *values;
	char	   *nulls;
} FlipArgs;

/*
 * run_flip is the body of a flip in a subtransaction.
 */
static int
run_flip(void *arg)
{
	FlipArgs   *f = (FlipArgs *) arg;

	return gd_execute(&flip_plan, f->values, f->nulls, SPI_OK_SELECT);
}

/*
 * flip_in_subxact runs the flip in a subtransaction and returns the number
 * of rows flipped, or -1 when the K=1 arbiter refused it or it deadlocked
 * with another pick (the flip is then undone; the candidate locks, taken by
 * the parent, stay).
 */
static int
flip_in_subxact(Datum *values, char *nulls)
{
	FlipArgs	f = {values, nulls};

	return gd_run_in_subxact(run_flip, &f, true, is_claim_contention);
}

/*
 * set_flip_rows puts the ids and gate shards of the admitted candidates
 * that pass keep() into the flip's arguments; returns how many.
 */
static int
set_flip_rows(Datum *flip, char *flipnulls, AdmitCandidate *cands, int n,
			  bool (*keep) (AdmitCandidate *c))
{
	Datum	   *ids = palloc(sizeof(Datum) * n);
	Datum	   *shards = palloc(sizeof(Datum) * n);
	bool	   *noshard = palloc(sizeof(bool) * n);
	int			m = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (!cands[i].admitted || !keep(&cands[i]))
			continue;
		ids[m] = Int64GetDatum(cands[i].id);
		shards[m] = Int16GetDatum(cands[i].shard);
		noshard[m] = !cands[i].has_shard;
		m++;
	}
	flip[0] = PointerGetDatum(gd_array(ids, NULL, m, INT8OID));
	flip[5] = PointerGetDatum(gd_array(shards, noshard, m, INT2OID));
	flipnulls[0] = flipnulls[5] = ' ';
	return m;
}

/* every admitted candidate */
static bool
any_candidate(AdmitCandidate *c)
{
	return true;
}

/* the candidates the K=1 arbiter does not concern */
static bool
outside_arbiter(AdmitCandidate *c)
{
	return c->concurrency_key == NULL || c->has_shard;
}

/* a candidate's place in claim order: priority, due time, id */
typedef struct Urgency
{
	int16		priority;
	TimestampTz eligible_at;
	int64		id;
} Urgency;

static int
compare_urgency(const Urgency *a, const Urgency *b)
{
	if (a->priority != b->priority)
		return (a->priority > b->priority) - (a->priority < b->priority);
	if (a->eligible_at != b->eligible_at)
		return (a->eligible_at > b->eligible_at) - (a->eligible_at < b->eligible_at);
	return (a->id > b->id) - (a->id < b->id);
}

/* the row candidates of one pick: locked, with their urgency */
typedef struct RowCandidates
{
	AdmitCandidate *cands;
	Urgency    *urgency;
	int			n;
} RowCandidates;

/*
 * read_row_candidates runs a candidates statement and appends its rows to
 * rc, keeping rc in claim order.  With probe, it leaves out the rows that
 * are claimed in memory: the statement has locked them, and a memory pick
 * takes its claim before it looks at the row's lock, so of the two one
 * always sees the other (pick_memory.c).
 */
static void
read_row_candidates(RowCandidates *rc, GdPlan *plan, PickArgs *args, TimestampTz now,
					bool probe)
{
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	AdmitCandidate *cands;
	Urgency    *urgency;
	int			n;
	int			i;
	int			a = 0;
	int			b = 0;
	int			m = 0;

	values[0] = CStringGetTextDatum(args->queue);
	values[1] = TimestampTzGetDatum(now);
	values[2] = Int32GetDatum(args->batch);
	values[3] = args->fsms;
	nulls[3] = args->fsms ? ' ' : 'n';
	n = gd_execute(plan, values, nulls, SPI_OK_SELECT);
	if (n == 0)
		return;
	cands = gd_read_candidates(n);
	urgency = palloc(sizeof(Urgency) * n);
	if (probe)
		gd_claim_debug_pause();
	for (i = 0, m = 0; i < n; i++)
	{
		bool		isnull;

		if (probe && gd_claim_exists(cands[i].id))
			continue;
		cands[m] = cands[i];
		urgency[m].id = cands[i].id;
		urgency[m].priority = DatumGetInt16(gd_result_datum(i, CAND_PRIORITY, &isnull));
		urgency[m++].eligible_at = DatumGetTimestampTz(gd_result_datum(i, CAND_ELIGIBLE_AT, &isnull));
	}
	n = m;
	m = 0;
	if (n == 0)
		return;
	if (rc->n == 0)
	{
		rc->cands = cands;
		rc->urgency = urgency;
		rc->n = n;
		return;
	}

	/* merge the two sorted lists */
	{
		AdmitCandidate *mc = palloc(sizeof(AdmitCandidate) * (rc->n + n));
		Urgency    *mu = palloc(sizeof(Urgency) * (rc->n + n));

		while (a < rc->n || b < n)
		{
			bool		take_a = b == n ||
				(a < rc->n && compare_urgency(&rc->urgency[a], &urgency[b]) <= 0);

			mc[m] = take_a ? rc->cands[a] : cands[b];
			mu[m++] = take_a ? rc->urgency[a++] : urgency[b++];
		}
		rc->cands = mc;
		rc->urgency = mu;
		rc->n = m;
	}
}

/*
 * flip_candidates admits the row candidates and flips the admitted ones
 * into claims; returns how many were claimed, their jobs in SPI_tuptable.
 */
static int
flip_candidates(PickArgs *args, AdmitCandidate *cands, int n, TimestampTz now,
				TimestampTz lease_expiry, int64 session)
{
	Datum		flip[6];
	char		flipnulls[6];
	int			i;
	int			rows;
	bool		arbitrated = false;

	if (n == 0 || gd_admit(cands, n) == 0)
		return 0;
	for (i = 0; i < n; i++)
		arbitrated |= cands[i].admitted && !outside_arbiter(&cands[i]);

	flip[1] = CStringGetTextDatum(args->worker);
	flip[2] = TimestampTzGetDatum(lease_expiry);
	flip[3] = TimestampTzGetDatum(now);
	flip[4] = Int64GetDatum(session);
	memset(flipnulls, ' ', sizeof(flipnulls));
	flipnulls[4] = session != 0 ? ' ' : 'n';
	set_flip_rows(flip, flipnulls, cands, n, any_candidate);

	if (!arbitrated)
		return gd_execute(&flip_plan, flip, flipnulls, SPI_OK_SELECT);

	rows = -1;
	for (i = 0; i < GD_CLAIM_ATTEMPTS && rows < 0; i++)
	{
		rows = flip_in_subxact(flip, flipnulls);
		if (rows < 0)
			gd_count(GD_STAT_CONTENDED, 1);
	}
	if (rows < 0)
	{
		/* keep contention out of the caller: claim the rows outside the arbiter */
		if (set_flip_rows(flip, flipnulls, cands, n, outside_arbiter) == 0)
			return 0;
		rows = gd_execute(&flip_plan, flip, flipnulls, SPI_OK_SELECT);
	}
	return rows;
}

/*
 * claim_once runs one claim and emits the jobs, most urgent first; returns
 * how many were claimed.  When this pick may claim in memory, it claims up
 * to a batch of plain rows that way first (pick_memory.c), else (or when
 * the claim table filled up) it locks plain candidates with the guarded
 * ones; the row candidates among the batch's most urgent are admitted and
 * flipped, and the claims in memory that no longer fit in the batch are
 * given back.
 */
static int
claim_once(PickArgs *args, ReturnSetInfo *rsinfo)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz lease_expiry = gd_add_interval(now, args->lease);
	int64		session = gd_claim_session();
	bool		schema_ready = gd_claims_schema_ready();
	bool		in_memory = gd_claims_usable(args->worker, schema_ready);
	GdMemoryCandidates mc;
	RowCandidates rc = {NULL, NULL, 0};
	SPITupleTable *flipped = NULL;
	int			nrows;
	int			flipped_rows = 0;
	int			taken = 0;
	int			m = 0;
	int			r = 0;
	int			f = 0;
	bool		full = false;

	memset(&mc, 0, sizeof(mc));
	if (in_memory)
		gd_memory_claim(&mc, args->queue, now, args->batch, args->fsms, args->worker,
						session, lease_expiry, &full);
	read_row_candidates(&rc, &guarded_candidates_plan, args, now, false);
	if (!in_memory || full)
		read_row_candidates(&rc, schema_ready ? &plain_locked_candidates_plan
							: &plain_locked_candidates_before_080_plan, args, now, true);

	/* the row candidates among the batch's most urgent */
	for (nrows = 0; nrows < rc.n && nrows + m < args->batch;)
	{
		Urgency		mu;

		if (m < mc.n)
		{
			mu.priority = mc.priority[m];
			mu.eligible_at = mc.eligible_at[m];
			mu.id = mc.id[m];
		}
		if (m < mc.n && compare_urgency(&mu, &rc.urgency[nrows]) < 0)
			m++;
		else
			nrows++;
	}
	if (nrows > 0)
	{
		flipped_rows = flip_candidates(args, rc.cands, nrows, now, lease_expiry, session);
		flipped = SPI_tuptable;
	}

	/* the claims in memory that still fit in the batch, in order */
	for (m = 0; m < mc.n; m++)
		if (flipped_rows + taken < args->batch)
			taken++;
		else
			gd_memory_release(&mc, m);
	if (taken > 0)
		gd_memory_log(&mc, args->worker, session, now);

	/* emit both kinds, in claim order */
	for (m = 0; m < mc.n && mc.claim[m] == 0; m++)
		;
	while (f < flipped_rows || r < taken)
	{
		bool		from_flip = r == taken;

		if (!from_flip && f < flipped_rows)
		{
			Urgency		fu;
			Urgency		mu = {mc.priority[m], mc.eligible_at[m], mc.id[m]};
			bool		isnull;

			fu.priority = DatumGetInt16(SPI_getbinval(flipped->vals[f], flipped->tupdesc,
													  FLIP_PRIORITY, &isnull));
			fu.eligible_at = DatumGetTimestampTz(SPI_getbinval(flipped->vals[f], flipped->tupdesc,
															   FLIP_ELIGIBLE_AT, &isnull));
			fu.id = DatumGetInt64(SPI_getbinval(flipped->vals[f], flipped->tupdesc, 1, &isnull));
			from_flip = compare_urgency(&fu, &mu) < 0;
		}
		if (from_flip)
			emit_flipped(rsinfo, flipped, f++);
		else
		{
			gd_memory_emit(&mc, m, rsinfo);
			r++;
			for (m++; m < mc.n && mc.claim[m] == 0; m++)
				;
		}
	}

	if (flipped_rows + taken > 0)
	{
		gd_count(GD_STAT_CLAIMED, flipped_rows + taken);
		gd_deadline(lease_expiry);
	}
	if (taken > 0)
		gd_deadline(TimestampTzPlusMilliseconds(now, gen_durable_memory_claim_max_age));
	return flipped_rows + taken;
}

/* the arguments of one claim attempt */
typedef struct ClaimArgs
{
	PickArgs   *args;
	ReturnSetInfo *rsinfo;
} ClaimArgs;

/*
 * run_claim is the body of a claim attempt in a subtransaction.
 */
static int
run_claim(void *arg)
{
	ClaimArgs  *c = (ClaimArgs *) arg;

	return claim_once(c->args, c->rsinfo);
}

/*
 * claim_in_subxact runs one claim attempt of a waiting pick in a
 * subtransaction that is rolled back when it claims nothing, so that the
 * candidates it locked but did not claim are not held while the pick
 * sleeps.  Returns how many were claimed.
 */
static int
claim_in_subxact(PickArgs *args, ReturnSetInfo *rsinfo)
{
	ClaimArgs	c = {args, rsinfo};

	return gd_run_in_subxact(run_claim, &c, false, NULL);
}

/*
 * gen_durable_pick implements gen_durable.pick(queue, worker, batch, lease,
 * wait, fsms): claims up to batch jobs; with wait > 0 and nothing to claim
 * it sleeps in the server until work for the queue is committed or falls
 * due, or the wait (capped by gen_durable.max_wait) ends (wait.c).
 */
Datum
gen_durable_pick(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PickArgs	args;
	Interval   *wait_arg;
	GdWait		wait;

	gd_require_read_committed("pick");
	args.queue = gd_arg_name(fcinfo, 0, "queue", true);
	args.worker = gd_arg_name(fcinfo, 1, "worker", true);
	args.batch = gd_arg_batch(fcinfo, 2, "batch");
	args.lease = gd_arg_interval(fcinfo, 3, "lease", true);
	wait_arg = gd_arg_interval(fcinfo, 4, "wait", false);
	args.fsms = PG_ARGISNULL(5) ? (Datum) 0 : PG_GETARG_DATUM(5);
	if (args.fsms && array_contains_nulls(PG_GETARG_ARRAYTYPE_P(5)))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"fsms\" must not contain NULL"),
				 errhint("List machine names, or pass NULL for every machine.")));

	InitMaterializedSRF(fcinfo, 0);
	gd_connect();
	gd_wait_begin(&wait, gd_wait_deadline(wait_arg), GD_WAIT_PICK, args.queue, 0);
	PG_TRY();
	{
		if (!wait.can_sleep)
			claim_once(&args, rsinfo);
		else
			while (claim_in_subxact(&args, rsinfo) == 0 && gd_wait_sleep(&wait))
				;
	}
	PG_FINALLY();
	{
		gd_wait_end(&wait);
	}
	PG_END_TRY();
	gd_finish();
	return (Datum) 0;
}
