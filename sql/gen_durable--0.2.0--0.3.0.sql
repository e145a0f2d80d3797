/* gen_durable--0.2.0--0.3.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.3.0'" to load this file. \quit

-- Fan-out rounds: a parent counts its spawns (spawn_round); each child
-- records the round it belongs to (parent_round), so that a parent's join
-- and its next job see only the children of its current round.
ALTER TABLE gen_durable.instances
	ADD COLUMN spawn_round int NOT NULL DEFAULT 0,
	ADD COLUMN parent_round int;

-- children of a parent's round, in child_index order; GC parent guard
DROP INDEX gen_durable.instances_parent;
CREATE INDEX instances_parent ON gen_durable.instances (parent_id, parent_round, child_index)
	WHERE parent_id IS NOT NULL;

-- _job: the children list is the current round's only (D12)
CREATE OR REPLACE FUNCTION gen_durable._job(i gen_durable.instances)
RETURNS SETOF gen_durable.job
LANGUAGE sql STABLE ROWS 1
AS $$
	SELECT i.id, i.fsm, i.fsm_version, i.step, i.state, i.attempt, i.steps,
		   COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
						 'id', s.id, 'name', s.name, 'payload', s.payload)
						 ORDER BY s.id)
					   FROM gen_durable.signals s
					  WHERE s.target_id = i.id), '[]'),
		   COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
						 'id', s.id, 'name', s.name, 'payload', s.payload)
						 ORDER BY s.id)
					   FROM gen_durable.signals s
					  WHERE s.target_id = i.id
						AND s.id = ANY (i.presented)), '[]'),
		   CASE WHEN i.children_total > 0 THEN
			   COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
							 'index', c.child_index, 'id', c.id,
							 'status', c.status, 'result', c.result,
							 'error', c.error)
							 ORDER BY c.child_index)
						   FROM gen_durable.instances c
						  WHERE c.parent_id = i.id
							AND c.parent_round = i.spawn_round), '[]')
		   ELSE '[]' END,
		   i.timed_out, i.parent_id, i.correlation_key, i.metadata,
		   i.lease_expires_at
$$;

-------------------------------------------------------------------------------
-- Producers and operators
-------------------------------------------------------------------------------

CREATE FUNCTION gen_durable.find(metadata jsonb)
RETURNS SETOF gen_durable.instances
LANGUAGE sql STABLE
AS $$
	SELECT * FROM gen_durable.instances i WHERE i.metadata @> find.metadata
$$;

COMMENT ON FUNCTION gen_durable.find IS
	'Instances whose metadata contains the given JSON object (GIN index)';

CREATE FUNCTION gen_durable.fail(id bigint, reason text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_fail'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.fail IS
	'Fail a live instance (its live descendants are cancelled); false when it is not live';

CREATE FUNCTION gen_durable.retry(id bigint, step text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_retry'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.retry IS
	'Run a failed or cancelled instance again (attempt 0), at its step or the given one';

COMMENT ON FUNCTION gen_durable.cancel IS
	'Cancel a live instance and its live descendants; returns how many were cancelled';
