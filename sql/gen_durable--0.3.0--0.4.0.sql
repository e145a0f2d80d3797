/* gen_durable--0.3.0--0.4.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.4.0'" to load this file. \quit

-- A gate slot is held only while executing: every exit from executing
-- returns it (D1, D8), so a slot left on any other row would never be.
-- (Checked without blocking writers: added NOT VALID, then validated.)
ALTER TABLE gen_durable.instances
	ADD CONSTRAINT instances_slot_check
		CHECK (concurrency_shard IS NULL OR status = 'executing') NOT VALID;
ALTER TABLE gen_durable.instances VALIDATE CONSTRAINT instances_slot_check;

-- find(): the metadata index holds only the rows that have metadata.  A GIN
-- index also stores an entry for a NULL, so every insert and every status
-- change of every instance wrote to it (a quarter of a drained job's WAL);
-- metadata @> x implies metadata IS NOT NULL, so find() still uses it.
DROP INDEX gen_durable.instances_metadata;
CREATE INDEX instances_metadata ON gen_durable.instances
	USING gin (metadata jsonb_path_ops) WHERE metadata IS NOT NULL;

-------------------------------------------------------------------------------
-- Operators: limiter policy (D8)
-------------------------------------------------------------------------------

CREATE FUNCTION gen_durable.set_rate_limit(
	name text,
	allowed float8,
	per interval,
	burst float8 DEFAULT NULL,
	shards int DEFAULT 1)
RETURNS void
AS 'MODULE_PATHNAME', 'gen_durable_set_rate_limit'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.set_rate_limit IS
	'Limit each key name[:partition] to allowed weight per period, saving up at most burst (default allowed)';

CREATE FUNCTION gen_durable.set_concurrency_limit(
	name text,
	max int,
	shards int DEFAULT 1)
RETURNS void
AS 'MODULE_PATHNAME', 'gen_durable_set_concurrency_limit'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.set_concurrency_limit IS
	'Let at most max instances of each concurrency key name[:partition] execute at once';

CREATE FUNCTION gen_durable.drop_limit(kind text, name text)
RETURNS bool
AS 'MODULE_PATHNAME', 'gen_durable_drop_limit'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.drop_limit IS
	'Remove a rate limit (kind ''rate'') or a concurrency gate (kind ''conc''); false when there was none';

-------------------------------------------------------------------------------
-- Workers: admission on its own
-------------------------------------------------------------------------------

CREATE FUNCTION gen_durable.admit(ids bigint[], worker text)
RETURNS TABLE (id bigint, admitted bool)
AS 'MODULE_PATHNAME', 'gen_durable_admit'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.admit IS
	'Admit claimed instances against their rate limits and concurrency gates, as a pick would';

-------------------------------------------------------------------------------
-- Views
-------------------------------------------------------------------------------

-- queues: how many runnable rows wait on a rate limit nobody configured (D6)
CREATE OR REPLACE VIEW gen_durable.queues AS
	SELECT queue,
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
	  FROM gen_durable.instances
	 GROUP BY queue;
