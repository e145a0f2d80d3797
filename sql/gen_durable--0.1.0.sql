/* gen_durable--0.1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION gen_durable" to load this file. \quit

-------------------------------------------------------------------------------
-- Types
-------------------------------------------------------------------------------

-- Lifecycle of an instance.  live = runnable, executing, awaiting_signal,
-- awaiting_children; terminal = done, failed, cancelled.
CREATE TYPE gen_durable.status AS ENUM (
	'runnable', 'executing', 'awaiting_signal', 'awaiting_children',
	'done', 'failed', 'cancelled'
);

-------------------------------------------------------------------------------
-- Tables
-------------------------------------------------------------------------------

-- One row per instance (a running finite-state machine; a job is a one-step
-- machine).  See SEMANTICS.md for what writes each column.
CREATE TABLE gen_durable.instances (
	id					bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,

	-- what runs
	fsm					text NOT NULL CHECK (fsm <> ''),
	fsm_version			int NOT NULL DEFAULT 1,
	step				text NOT NULL CHECK (step <> ''),
	state				jsonb NOT NULL DEFAULT '{}'
						CHECK (pg_catalog.jsonb_typeof(state) = 'object'),
	attempt				int NOT NULL DEFAULT 0,
	max_attempts		int NOT NULL DEFAULT 20 CHECK (max_attempts >= 1),
	steps				bigint NOT NULL DEFAULT 0,
	max_steps			int CHECK (max_steps >= 1),
	result				jsonb,
	error				jsonb,

	-- lifecycle
	status				gen_durable.status NOT NULL DEFAULT 'runnable',

	-- scheduling
	queue				text NOT NULL DEFAULT 'default' CHECK (queue <> ''),
	priority			smallint NOT NULL DEFAULT 0,
	eligible_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),

	-- claim
	locked_by			text,
	lease_expires_at	timestamptz,

	-- admission
	concurrency_key		text,
	concurrency_name	text GENERATED ALWAYS AS
						(pg_catalog.split_part(concurrency_key, ':', 1)) STORED,
	concurrency_shard	smallint,
	rate_limit			text,
	weight				float8 NOT NULL DEFAULT 1 CHECK (weight > 0),

	-- signals
	awaits				text[],
	await_deadline		timestamptz,
	presented			bigint[],
	timed_out			boolean NOT NULL DEFAULT false,

	-- fan-out
	parent_id			bigint REFERENCES gen_durable.instances (id) ON DELETE SET NULL,
	child_index			int,
	children_pending	int NOT NULL DEFAULT 0,
	children_total		int NOT NULL DEFAULT 0,
	join_policy			text CHECK (join_policy IN ('all', 'first_error')),

	-- identity
	correlation_key		text,
	correlation_scope	gen_durable.status[] NOT NULL DEFAULT '{}',
	correlation_guard	text GENERATED ALWAYS AS
						(CASE WHEN correlation_key IS NOT NULL
							   AND status = ANY (correlation_scope)
							  THEN correlation_key END) STORED,
	metadata			jsonb CHECK (pg_catalog.jsonb_typeof(metadata) = 'object'),

	inserted_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	updated_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),

	-- I-24: a claim exists exactly while the instance is executing
	CONSTRAINT instances_claim_check
		CHECK ((locked_by IS NOT NULL) = (status = 'executing')
			   AND (lease_expires_at IS NOT NULL) = (status = 'executing'))
);

COMMENT ON TABLE gen_durable.instances IS
	'gen_durable: one row per running or settled state machine';

-- pick: claim scan of one queue in priority order (requires queue = $1)
CREATE INDEX instances_pick ON gen_durable.instances (queue, priority, eligible_at)
	WHERE status = 'runnable';
-- reaper: expired leases
CREATE INDEX instances_lease ON gen_durable.instances (lease_expires_at)
	WHERE status = 'executing';
-- await-timeout sweep
CREATE INDEX instances_await_deadline ON gen_durable.instances (await_deadline)
	WHERE status = 'awaiting_signal' AND await_deadline IS NOT NULL;
-- the K=1 arbiter: at most one executing row per unconfigured concurrency key
CREATE UNIQUE INDEX instances_concurrency_active
	ON gen_durable.instances (concurrency_key)
	WHERE status = 'executing' AND concurrency_key IS NOT NULL
	  AND concurrency_shard IS NULL;
-- the correlation arbiter and signal-by-key lookup
CREATE UNIQUE INDEX instances_correlation ON gen_durable.instances (correlation_guard)
	WHERE correlation_guard IS NOT NULL;
-- children of a parent, in child_index order; GC parent guard
CREATE INDEX instances_parent ON gen_durable.instances (parent_id, child_index)
	WHERE parent_id IS NOT NULL;
-- GC: terminal rows, oldest first
CREATE INDEX instances_gc ON gen_durable.instances (updated_at)
	WHERE status IN ('done', 'failed', 'cancelled');
-- find(metadata): containment
CREATE INDEX instances_metadata ON gen_durable.instances
	USING gin (metadata jsonb_path_ops);

-- The durable inbox of signals delivered to an instance.
CREATE TABLE gen_durable.signals (
	id					bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	target_id			bigint NOT NULL
						REFERENCES gen_durable.instances (id) ON DELETE CASCADE,
	name				text NOT NULL CHECK (name <> ''),
	payload				jsonb NOT NULL DEFAULT '{}',
	dedup_key			text,
	inserted_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	UNIQUE (target_id, dedup_key)
);

CREATE INDEX signals_target ON gen_durable.signals (target_id, name);

-- Limiter policy (rate limits and concurrency gates), one row per name.
CREATE TABLE gen_durable.limits (
	kind				text NOT NULL CHECK (kind IN ('rate', 'conc')),
	name				text NOT NULL CHECK (name <> '' AND pg_catalog.strpos(name, ':') = 0),
	rate				float8 CHECK (rate >= 0),
	capacity			float8 NOT NULL CHECK (capacity > 0),
	shards				smallint NOT NULL DEFAULT 1 CHECK (shards >= 1),
	PRIMARY KEY (kind, name)
);

-- Sharded limiter counters: tokens (rate) or free slots (conc).
CREATE TABLE gen_durable.buckets (
	kind				text NOT NULL CHECK (kind IN ('rate', 'conc')),
	key					text NOT NULL,
	shard				smallint NOT NULL,
	capacity			float8 NOT NULL,
	available			float8 NOT NULL,
	last_refill			timestamptz,
	PRIMARY KEY (kind, key, shard),
	CHECK (0 <= available AND available <= capacity)
);

-- pg_dump keeps the rows of the engine's tables
SELECT pg_catalog.pg_extension_config_dump('gen_durable.instances', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.signals', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.limits', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.buckets', '');

-- What a worker receives for each claimed instance.
CREATE TYPE gen_durable.job AS (
	id					bigint,
	fsm					text,
	fsm_version			int,
	step				text,
	state				jsonb,
	attempt				int,
	steps				bigint,
	inbox				jsonb,
	awaited				jsonb,
	children			jsonb,
	timed_out			boolean,
	parent_id			bigint,
	correlation_key		text,
	metadata			jsonb,
	lease_expires_at	timestamptz
);

-------------------------------------------------------------------------------
-- Internal helpers (not part of the API)
-------------------------------------------------------------------------------

-- _job builds the job a worker receives from a claimed instance row: the
-- inbox, the awaited subset (exactly the signal ids recorded in presented)
-- and the children of the current fan-out round.  Used by pick and by an
-- inline continue in flush, so both hand out identical jobs.  Declared
-- SETOF (one row) so that the planner inlines it into those statements
-- instead of running it as a separate plan per job.
CREATE FUNCTION gen_durable._job(i gen_durable.instances)
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
						  WHERE c.parent_id = i.id), '[]')
		   ELSE '[]' END,
		   i.timed_out, i.parent_id, i.correlation_key, i.metadata,
		   i.lease_expires_at
$$;

-------------------------------------------------------------------------------
-- Producers
-------------------------------------------------------------------------------

CREATE FUNCTION gen_durable.insert(
	fsm text,
	state jsonb DEFAULT '{}',
	step text DEFAULT 'start',
	queue text DEFAULT 'default',
	priority int DEFAULT 0,
	run_at timestamptz DEFAULT NULL,
	delay interval DEFAULT NULL,
	correlation_key text DEFAULT NULL,
	correlation_scope gen_durable.status[] DEFAULT NULL,
	concurrency_key text DEFAULT NULL,
	rate_limit text DEFAULT NULL,
	weight float8 DEFAULT 1,
	max_attempts int DEFAULT 20,
	max_steps int DEFAULT NULL,
	metadata jsonb DEFAULT NULL,
	fsm_version int DEFAULT 1)
RETURNS bigint
AS 'MODULE_PATHNAME', 'gen_durable_insert'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.insert IS
	'Create an instance; returns its id, or NULL when a live instance occupies the correlation key';

CREATE FUNCTION gen_durable.insert_many(specs jsonb)
RETURNS TABLE (ord int, id bigint, created boolean)
AS 'MODULE_PATHNAME', 'gen_durable_insert_many'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.insert_many IS
	'Create many instances from an array of insert specs in one statement';

CREATE FUNCTION gen_durable.signal(
	target bigint,
	name text,
	payload jsonb DEFAULT '{}',
	dedup_key text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'gen_durable_signal_id'
LANGUAGE C VOLATILE;

CREATE FUNCTION gen_durable.signal(
	target text,
	name text,
	payload jsonb DEFAULT '{}',
	dedup_key text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'gen_durable_signal_key'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.signal(bigint, text, jsonb, text) IS
	'Deliver a signal to an instance by id: delivered, duplicate or no_target';
COMMENT ON FUNCTION gen_durable.signal(text, text, jsonb, text) IS
	'Deliver a signal to the live instance holding a correlation key: delivered, duplicate or no_target';

CREATE FUNCTION gen_durable.cancel(id bigint, reason text DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'gen_durable_cancel'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.cancel IS
	'Cancel a live instance; returns how many instances were cancelled';

-------------------------------------------------------------------------------
-- Workers
-------------------------------------------------------------------------------

CREATE FUNCTION gen_durable.pick(
	queue text,
	worker text,
	batch int DEFAULT 10,
	lease interval DEFAULT '30s',
	wait interval DEFAULT '0',
	fsms text[] DEFAULT NULL)
RETURNS SETOF gen_durable.job
AS 'MODULE_PATHNAME', 'gen_durable_pick'
LANGUAGE C VOLATILE ROWS 10;

COMMENT ON FUNCTION gen_durable.pick IS
	'Claim up to batch runnable instances of a queue in priority order';

CREATE FUNCTION gen_durable.flush(outcomes jsonb)
RETURNS TABLE (id bigint, applied text, detail text, job jsonb)
AS 'MODULE_PATHNAME', 'gen_durable_flush'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.flush IS
	'Commit the outcomes of many steps together (group commit)';

CREATE FUNCTION gen_durable.heartbeat(
	worker text,
	ids bigint[],
	lease interval DEFAULT '30s')
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'gen_durable_heartbeat'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.heartbeat IS
	'Extend the leases of claims; returns the ids the worker still owns';

CREATE FUNCTION gen_durable.release(worker text, ids bigint[] DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'gen_durable_release'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.release IS
	'Return claims to runnable without counting an attempt (NULL ids = all of the worker''s claims)';

-------------------------------------------------------------------------------
-- Operators
-------------------------------------------------------------------------------

CREATE FUNCTION gen_durable.run_maintenance()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'gen_durable_run_maintenance'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.run_maintenance IS
	'Run one round of every maintenance sweep now; returns what each did';
