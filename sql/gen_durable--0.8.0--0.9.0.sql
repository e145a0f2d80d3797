/* gen_durable--0.8.0--0.9.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.9.0'" to load this file. \quit

-- Finished instances leave the hot table (docs/contract.md §10.5, D22).
-- A plain instance (no parent, correlation key, metadata or step
-- history) whose step ends done is moved by the flush that commits
-- it: deleted from gen_durable.instances and inserted, as the row it would
-- have become, into the current archive segment.  The segments inherit
-- from gen_durable.instances, so every query of that table (find, await,
-- SELECT ... FROM gen_durable.instances) still sees the finished row; the
-- engine's own statements read ONLY the live table.  GC empties a whole
-- segment with TRUNCATE once everything in it is older than the
-- retention, so a finished job costs no delete, no dead row and no vacuum
-- of its own, and the live table holds the live instances alone.

-- The inboxes and the step history lose their foreign keys: each cascade
-- was a trigger per deleted instance (the move deletes one per finished
-- job).  The engine keeps them consistent itself: a terminal instance's
-- inbox is purged by the transaction that ends it (I-27), a signal is
-- stored only for a live instance it has locked (I-28), and GC deletes the
-- inbox and history of every instance it deletes.
ALTER TABLE gen_durable.signals DROP CONSTRAINT signals_target_id_fkey;
ALTER TABLE gen_durable.step_history DROP CONSTRAINT step_history_instance_id_fkey;

-- The archive: eight segments, used in turn.  One is open (opened_at set,
-- closed_at NULL) and receives the moved rows; the maintenance worker
-- closes it once it has been open for a quarter of the retention and opens
-- the next one, which must be empty; a closed segment is truncated, and
-- becomes empty, once it has been closed for longer than the retention.
-- Each segment's checks say what the flush moves (terminal rows without
-- metadata, a correlation key or a parent), so that the planner leaves the
-- segments out of the queries that cannot match them (the pick, find, the
-- correlation lookups, a parent's children).  Inserts only, so no
-- insert-driven vacuum (analyze and anti-wraparound vacuums still run).
CREATE TABLE gen_durable.finished_segments (
	segment		smallint PRIMARY KEY CHECK (segment BETWEEN 0 AND 7),
	opened_at	timestamptz,
	closed_at	timestamptz,
	CHECK (closed_at IS NULL OR opened_at IS NOT NULL)
);
INSERT INTO gen_durable.finished_segments (segment, opened_at)
	SELECT s, CASE WHEN s = 0 THEN pg_catalog.now() END
	  FROM pg_catalog.generate_series(0, 7) s;

CREATE TABLE gen_durable.finished_0 (
	CHECK (status IN ('done', 'failed', 'cancelled')),
	CHECK (metadata IS NULL AND correlation_key IS NULL AND correlation_guard IS NULL
		   AND parent_id IS NULL)
) INHERITS (gen_durable.instances)
WITH (autovacuum_vacuum_insert_threshold = -1);
CREATE INDEX finished_0_id ON gen_durable.finished_0 (id);
CREATE TABLE gen_durable.finished_1 (
	CHECK (status IN ('done', 'failed', 'cancelled')),
	CHECK (metadata IS NULL AND correlation_key IS NULL AND correlation_guard IS NULL
		   AND parent_id IS NULL)
) INHERITS (gen_durable.instances)
WITH (autovacuum_vacuum_insert_threshold = -1);
CREATE INDEX finished_1_id ON gen_durable.finished_1 (id);
CREATE TABLE gen_durable.finished_2 (
	CHECK (status IN ('done', 'failed', 'cancelled')),
	CHECK (metadata IS NULL AND correlation_key IS NULL AND correlation_guard IS NULL
		   AND parent_id IS NULL)
) INHERITS (gen_durable.instances)
WITH (autovacuum_vacuum_insert_threshold = -1);
CREATE INDEX finished_2_id ON gen_durable.finished_2 (id);
CREATE TABLE gen_durable.finished_3 (
	CHECK (status IN ('done', 'failed', 'cancelled')),
	CHECK (metadata IS NULL AND correlation_key IS NULL AND correlation_guard IS NULL
		   AND parent_id IS NULL)
) INHERITS (gen_durable.instances)
WITH (autovacuum_vacuum_insert_threshold = -1);
CREATE INDEX finished_3_id ON gen_durable.finished_3 (id);
CREATE TABLE gen_durable.finished_4 (
	CHECK (status IN ('done', 'failed', 'cancelled')),
	CHECK (metadata IS NULL AND correlation_key IS NULL AND correlation_guard IS NULL
		   AND parent_id IS NULL)
) INHERITS (gen_durable.instances)
WITH (autovacuum_vacuum_insert_threshold = -1);
CREATE INDEX finished_4_id ON gen_durable.finished_4 (id);
CREATE TABLE gen_durable.finished_5 (
	CHECK (status IN ('done', 'failed', 'cancelled')),
	CHECK (metadata IS NULL AND correlation_key IS NULL AND correlation_guard IS NULL
		   AND parent_id IS NULL)
) INHERITS (gen_durable.instances)
WITH (autovacuum_vacuum_insert_threshold = -1);
CREATE INDEX finished_5_id ON gen_durable.finished_5 (id);
CREATE TABLE gen_durable.finished_6 (
	CHECK (status IN ('done', 'failed', 'cancelled')),
	CHECK (metadata IS NULL AND correlation_key IS NULL AND correlation_guard IS NULL
		   AND parent_id IS NULL)
) INHERITS (gen_durable.instances)
WITH (autovacuum_vacuum_insert_threshold = -1);
CREATE INDEX finished_6_id ON gen_durable.finished_6 (id);
CREATE TABLE gen_durable.finished_7 (
	CHECK (status IN ('done', 'failed', 'cancelled')),
	CHECK (metadata IS NULL AND correlation_key IS NULL AND correlation_guard IS NULL
		   AND parent_id IS NULL)
) INHERITS (gen_durable.instances)
WITH (autovacuum_vacuum_insert_threshold = -1);
CREATE INDEX finished_7_id ON gen_durable.finished_7 (id);

-- pg_dump keeps the segments' rows, not their rotation: the script fills
-- finished_segments, so a restore's copy of it would collide with the
-- rows CREATE EXTENSION made.  A restored database starts a new rotation
-- (segment 0 open); a segment's restored rows go when that segment is
-- next emptied, so they are kept at least the retention.
SELECT pg_catalog.pg_extension_config_dump('gen_durable.finished_0', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.finished_1', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.finished_2', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.finished_3', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.finished_4', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.finished_5', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.finished_6', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.finished_7', '');

REVOKE ALL ON gen_durable.finished_segments, gen_durable.finished_0, gen_durable.finished_1,
	gen_durable.finished_2, gen_durable.finished_3, gen_durable.finished_4,
	gen_durable.finished_5, gen_durable.finished_6, gen_durable.finished_7 FROM PUBLIC;
GRANT SELECT ON gen_durable.finished_segments, gen_durable.finished_0, gen_durable.finished_1,
	gen_durable.finished_2, gen_durable.finished_3, gen_durable.finished_4,
	gen_durable.finished_5, gen_durable.finished_6, gen_durable.finished_7 TO gen_durable_admin;

-- The views that join the claim table by row version read the live table
-- alone: a moved row's ctid, in a segment, may equal a claim's.
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
						ON m.id = i.id AND m.tid = i.ctid AND m.state <> 'pending'
					   AND i.tableoid = 'gen_durable.instances'::pg_catalog.regclass) i
			 GROUP BY queue) c
	  FULL JOIN gen_durable.queue_settings s ON s.queue = c.queue
	 WHERE c.queue IS NOT NULL OR s.paused_at IS NOT NULL OR s.history;


CREATE OR REPLACE VIEW gen_durable.claims AS
	SELECT i.id, i.fsm, i.step, i.queue, m.worker, m.claim, m.claimed_at,
		   m.lease_expires_at, true AS in_memory
	  FROM gen_durable._memory_claims() m
	  JOIN ONLY gen_durable.instances i ON i.id = m.id AND i.ctid = m.tid
	 WHERE m.state <> 'pending'
	UNION ALL
	SELECT i.id, i.fsm, i.step, i.queue, i.locked_by, i.claim, i.updated_at,
		   i.lease_expires_at, false
	  FROM ONLY gen_durable.instances i
	 WHERE i.status = 'executing';

