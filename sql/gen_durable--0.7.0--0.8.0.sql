/* gen_durable--0.7.0--0.8.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.8.0'" to load this file. \quit

-- Claims in memory (docs/contract.md §4.7).  A pick of a plain
-- instance (no concurrency key, rate limit, correlation key or awaited
-- signals) no longer writes the claim to the row: it takes an entry in the
-- server's shared claim table, and the row stays runnable until the step's
-- outcome is flushed (or the maintenance worker writes the claim to the
-- row: a step running longer than gen_durable.memory_claim_max_age, an
-- expired lease, a dead session).  The pick index splits in two so that
-- each kind of pick scans only its own rows: the plain rows, claimed in
-- memory, and the guarded rows, claimed on the row after admission.  A row
-- is in exactly one of them while runnable; every update that moves it
-- from one to the other changes its status as well, so neither index
-- costs an update its HOT-ness.
DROP INDEX gen_durable.instances_pick;
CREATE INDEX instances_pick_plain ON gen_durable.instances (queue, priority, eligible_at)
	WHERE status = 'runnable' AND concurrency_key IS NULL AND rate_limit IS NULL
	  AND awaits IS NULL AND correlation_key IS NULL;
CREATE INDEX instances_pick_guarded ON gen_durable.instances (queue, priority, eligible_at)
	WHERE status = 'runnable' AND (concurrency_key IS NOT NULL OR rate_limit IS NOT NULL
	  OR awaits IS NOT NULL OR correlation_key IS NOT NULL);

-- _claimed_in_memory: whether an instance is claimed in the claim table;
-- the pick statements' probe.
CREATE FUNCTION gen_durable._claimed_in_memory(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_claimed_in_memory'
LANGUAGE C STRICT VOLATILE;

-- _take_in_memory: the memory pick's filter, which claims a candidate row
-- in the claim table as the scan reaches it (pick_memory.c); it does
-- nothing outside a pick.
CREATE FUNCTION gen_durable._take_in_memory(id bigint, row_ctid tid, row_xmin xid, row_claim bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_take_in_memory'
LANGUAGE C STRICT VOLATILE;

-- _memory_claims: the claims of this database in the claim table, for the
-- claims view.
CREATE FUNCTION gen_durable._memory_claims()
RETURNS TABLE (id bigint, worker text, claim bigint, claimed_at timestamptz,
			   lease_expires_at timestamptz, session bigint, state text, tid tid)
AS 'MODULE_PATHNAME', 'gen_durable_memory_claims'
LANGUAGE C VOLATILE;

-- queues: an instance claimed in memory counts as executing, not as due.
CREATE OR REPLACE VIEW gen_durable.queues AS
	SELECT COALESCE(c.queue, s.queue) AS queue,
		   COALESCE(c.due, 0) AS due,
		   COALESCE(c.scheduled, 0) AS scheduled,
		   COALESCE(c.executing, 0) AS executing,
		   COALESCE(c.awaiting_signal, 0) AS awaiting_signal,
		   COALESCE(c.awaiting_children, 0) AS awaiting_children,
		   COALESCE(c.done, 0) AS done,
		   COALESCE(c.failed, 0) AS failed,
		   COALESCE(c.cancelled, 0) AS cancelled,
		   c.oldest_due_age,
		   COALESCE(c.unknown_rate_limit, 0) AS unknown_rate_limit,
		   s.paused_at IS NOT NULL AS paused,
		   COALESCE(s.history, false) AS history
	  FROM (SELECT queue,
				   count(*) FILTER (WHERE status = 'runnable' AND eligible_at <= pg_catalog.now()) AS due,
				   count(*) FILTER (WHERE status = 'runnable' AND eligible_at > pg_catalog.now()) AS scheduled,
				   count(*) FILTER (WHERE status = 'executing') AS executing,
				   count(*) FILTER (WHERE status = 'awaiting_signal') AS awaiting_signal,
				   count(*) FILTER (WHERE status = 'awaiting_children') AS awaiting_children,
				   count(*) FILTER (WHERE status = 'done') AS done,
				   count(*) FILTER (WHERE status = 'failed') AS failed,
				   count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
				   pg_catalog.now() - min(eligible_at)
					   FILTER (WHERE status = 'runnable' AND eligible_at <= pg_catalog.now())
					   AS oldest_due_age,
				   count(*) FILTER (WHERE status = 'runnable' AND rate_limit IS NOT NULL
									  AND NOT EXISTS (SELECT 1 FROM gen_durable.limits l
													   WHERE l.kind = 'rate'
														 AND l.name = pg_catalog.split_part(rate_limit, ':', 1)))
					   AS unknown_rate_limit
			  FROM (SELECT i.queue, i.eligible_at, i.rate_limit,
						   CASE WHEN m.id IS NOT NULL THEN 'executing'::gen_durable.status
								ELSE i.status END AS status
					  FROM gen_durable.instances i
					  LEFT JOIN gen_durable._memory_claims() m
						ON m.id = i.id AND m.tid = i.ctid AND m.state <> 'pending') i
			 GROUP BY queue) c
	  FULL JOIN gen_durable.queue_settings s ON s.queue = c.queue
	 WHERE c.queue IS NOT NULL OR s.paused_at IS NOT NULL OR s.history;


-- claims: every claim in flight, wherever it is kept.  A claim in memory
-- shows while its row is the version it claimed (a claim whose instance
-- was cancelled meanwhile is already stale, and goes at the next sweep);
-- a claim on the row is an executing instance.  claimed_at is the time
-- of the claim in memory, and for a claim on the row the time the row
-- last changed (the claim, or its latest heartbeat).
CREATE VIEW gen_durable.claims AS
	SELECT i.id, i.fsm, i.step, i.queue, m.worker, m.claim, m.claimed_at,
		   m.lease_expires_at, true AS in_memory
	  FROM gen_durable._memory_claims() m
	  JOIN gen_durable.instances i ON i.id = m.id AND i.ctid = m.tid
	 WHERE m.state <> 'pending'
	UNION ALL
	SELECT i.id, i.fsm, i.step, i.queue, i.locked_by, i.claim, i.updated_at,
		   i.lease_expires_at, false
	  FROM gen_durable.instances i
	 WHERE i.status = 'executing';

COMMENT ON VIEW gen_durable.claims IS
	'gen_durable: every claim in flight, in the claim table (in_memory) or written to its row (executing)';

REVOKE ALL ON FUNCTION gen_durable._claimed_in_memory(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION gen_durable._take_in_memory(bigint, tid, xid, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION gen_durable._memory_claims() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gen_durable._memory_claims() TO gen_durable_admin, gen_durable_producer;
REVOKE ALL ON gen_durable.claims FROM PUBLIC;
GRANT SELECT ON gen_durable.claims TO gen_durable_admin, gen_durable_producer;
