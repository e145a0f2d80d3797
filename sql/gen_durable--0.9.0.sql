/* gen_durable--0.9.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION gen_durable" to load this file. \quit

-- The complete schema of 0.9.0, for a fresh install.  An installed older
-- version reaches the same schema through the update scripts
-- (gen_durable--A--B.sql, each run once, in order); the upgrade test
-- (sql/upgrade.sql) proves that both describe the same objects, column
-- for column, so this script is written to match what the updates leave,
-- in detail:
--   * columns are listed in the order the releases added them (users'
--     SELECT * and the composite type job depend on it), each group saying
--     which release added it;
--   * an object an update dropped and made again is written in its final
--     form, with the same name, privileges and comment;
--   * constraints left unnamed keep the names PostgreSQL gave them in
--     0.1.0;
--   * privileges are granted in the order the updates granted them
--     (an ACL lists its grantees in that order);
--   * the tables and sequences registered for pg_dump are registered in
--     the order the releases registered them.
-- Behavioural labels (D1, I-24, ...) refer to docs/contract.md.

-------------------------------------------------------------------------------
-- Types
-------------------------------------------------------------------------------

-- Lifecycle of an instance.  live = runnable, executing, awaiting_signal,
-- awaiting_children; terminal = done, failed, cancelled (D1).
CREATE TYPE gen_durable.status AS ENUM (
	'runnable', 'executing', 'awaiting_signal', 'awaiting_children',
	'done', 'failed', 'cancelled'
);

-------------------------------------------------------------------------------
-- Tables
-------------------------------------------------------------------------------

-- One row per instance (a running finite-state machine; a job is a one-step
-- machine).  See docs/contract.md for what writes each column.
CREATE TABLE gen_durable.instances (
	id					bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,

	-- what runs (0.1.0); fsm_version is pinned at insert (D19), steps
	-- counts the committed transitions and max_steps is their budget (D3),
	-- max_attempts bounds the reaper's retries (D2)
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

	-- lifecycle (0.1.0)
	status				gen_durable.status NOT NULL DEFAULT 'runnable',

	-- scheduling (0.1.0)
	queue				text NOT NULL DEFAULT 'default' CHECK (queue <> ''),
	priority			smallint NOT NULL DEFAULT 0,
	eligible_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),

	-- claim (0.1.0); claim_session and claim follow below
	locked_by			text,
	lease_expires_at	timestamptz,

	-- admission (0.1.0): a K=1 key or a gated key name[:partition] with the
	-- gate shard whose slot the claim holds, a rate limit key and the
	-- weight it debits (D6, D8, I-15)
	concurrency_key		text,
	concurrency_name	text GENERATED ALWAYS AS
						(pg_catalog.split_part(concurrency_key, ':', 1)) STORED,
	concurrency_shard	smallint,
	rate_limit			text,
	weight				float8 NOT NULL DEFAULT 1 CHECK (weight > 0),

	-- signals (0.1.0): what an await waits for and until when, and the
	-- signal ids handed to the running step (D20, I-4)
	awaits				text[],
	await_deadline		timestamptz,
	presented			bigint[],
	timed_out			boolean NOT NULL DEFAULT false,

	-- fan-out (0.1.0; D12, D13).  parent_id is not a foreign key (0.7.0):
	-- see its comment below.
	parent_id			bigint,
	child_index			int,
	children_pending	int NOT NULL DEFAULT 0,
	children_total		int NOT NULL DEFAULT 0,
	join_policy			text CHECK (join_policy IN ('all', 'first_error')),

	-- identity (0.1.0): the correlation key is unique and addressable while
	-- the status is in its scope (D4, D5); metadata is for find (D18)
	correlation_key		text,
	correlation_scope	gen_durable.status[] NOT NULL DEFAULT '{}',
	correlation_guard	text GENERATED ALWAYS AS
						(CASE WHEN correlation_key IS NOT NULL
							   AND status = ANY (correlation_scope)
							  THEN correlation_key END) STORED,
	metadata			jsonb CHECK (pg_catalog.jsonb_typeof(metadata) = 'object'),

	inserted_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	updated_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),

	-- 0.2.0: the backend session that made the claim (session.c): when
	-- that backend exits, the maintenance worker returns the claim without
	-- waiting for the lease.  NULL when no session was recorded (lease
	-- only).
	claim_session		bigint,

	-- 0.3.0: fan-out rounds.  A parent counts its spawns (spawn_round);
	-- each child records the round it belongs to (parent_round), so that a
	-- parent's join and its next job see only the children of its current
	-- round (D12).
	spawn_round			int NOT NULL DEFAULT 0,
	parent_round		int,

	-- 0.6.0: the claim fence (docs/contract.md §5.5).  Every claim (a
	-- pick, an inline continue) gets the next number; an outcome that names
	-- it applies only while it is the instance's latest claim (I-6).
	claim				bigint NOT NULL DEFAULT 0,

	-- 0.6.0: record the step history (NULL: as the queue is set)
	history				boolean,

	-- I-24: a claim exists exactly while the instance is executing
	CONSTRAINT instances_claim_check
		CHECK ((locked_by IS NOT NULL) = (status = 'executing')
			   AND (lease_expires_at IS NOT NULL) = (status = 'executing')),

	-- 0.4.0: a gate slot is held only while executing: every exit from
	-- executing returns it (D1, D8), so a slot left on any other row would
	-- never be
	CONSTRAINT instances_slot_check
		CHECK (concurrency_shard IS NULL OR status = 'executing')
);

COMMENT ON TABLE gen_durable.instances IS
	'gen_durable: one row per running or settled state machine';
COMMENT ON COLUMN gen_durable.instances.parent_id IS
	'The parent that spawned this instance (NULL for a top-level one); kept after GC deletes the parent';
COMMENT ON COLUMN gen_durable.instances.claim IS
	'The number of the latest claim: 0 before the first, +1 at every pick and inline continue';

-- Each index serves one statement family.

-- pick: claim scans of one queue in priority order (requires queue = $1),
-- one per kind of row (0.8.0): the plain rows, claimed in memory
-- (pick_memory.c), and the guarded rows, claimed on the row after
-- admission (pick.c).  A runnable row is in exactly one of them.
CREATE INDEX instances_pick_plain ON gen_durable.instances (queue, priority, eligible_at)
	WHERE status = 'runnable' AND concurrency_key IS NULL AND rate_limit IS NULL
	  AND awaits IS NULL AND correlation_key IS NULL;
CREATE INDEX instances_pick_guarded ON gen_durable.instances (queue, priority, eligible_at)
	WHERE status = 'runnable' AND (concurrency_key IS NOT NULL OR rate_limit IS NOT NULL
	  OR awaits IS NOT NULL OR correlation_key IS NOT NULL);
-- reaper: expired leases
CREATE INDEX instances_lease ON gen_durable.instances (lease_expires_at)
	WHERE status = 'executing';
-- await-timeout sweep
CREATE INDEX instances_await_deadline ON gen_durable.instances (await_deadline)
	WHERE status = 'awaiting_signal' AND await_deadline IS NOT NULL;
-- the K=1 arbiter: at most one executing row per unconfigured concurrency
-- key (I-9)
CREATE UNIQUE INDEX instances_concurrency_active
	ON gen_durable.instances (concurrency_key)
	WHERE status = 'executing' AND concurrency_key IS NOT NULL
	  AND concurrency_shard IS NULL;
-- the correlation arbiter and signal-by-key lookup
CREATE UNIQUE INDEX instances_correlation ON gen_durable.instances (correlation_guard)
	WHERE correlation_guard IS NOT NULL;
-- children of a parent's round, in child_index order; GC parent guard
-- (the round since 0.3.0)
CREATE INDEX instances_parent ON gen_durable.instances (parent_id, parent_round, child_index)
	WHERE parent_id IS NOT NULL;
-- GC: terminal rows, oldest first
CREATE INDEX instances_gc ON gen_durable.instances (updated_at)
	WHERE status IN ('done', 'failed', 'cancelled');
-- find(metadata): containment.  Only the rows that have metadata (since
-- 0.4.0): a GIN index also stores an entry for a NULL, so every insert and
-- every status change of every instance wrote to it; metadata @> x
-- implies metadata IS NOT NULL, so find() still uses it.
CREATE INDEX instances_metadata ON gen_durable.instances
	USING gin (metadata jsonb_path_ops) WHERE metadata IS NOT NULL;

-- The durable inbox of signals delivered to an instance (0.1.0).  target_id
-- is not a foreign key since 0.9.0: see the archive below.
CREATE TABLE gen_durable.signals (
	id					bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	target_id			bigint NOT NULL,
	name				text NOT NULL CHECK (name <> ''),
	payload				jsonb NOT NULL DEFAULT '{}',
	dedup_key			text,
	inserted_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	UNIQUE (target_id, dedup_key)
);

CREATE INDEX signals_target ON gen_durable.signals (target_id, name);

-- Limiter policy (rate limits and concurrency gates), one row per name
-- (0.1.0; D8).
CREATE TABLE gen_durable.limits (
	kind				text NOT NULL CHECK (kind IN ('rate', 'conc')),
	name				text NOT NULL CHECK (name <> '' AND pg_catalog.strpos(name, ':') = 0),
	rate				float8 CHECK (rate >= 0),
	capacity			float8 NOT NULL CHECK (capacity > 0),
	shards				smallint NOT NULL DEFAULT 1 CHECK (shards >= 1),
	PRIMARY KEY (kind, name)
);

-- Sharded limiter counters: tokens (rate) or free slots (conc) (0.1.0;
-- I-13, I-16).
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

-- Queue settings (0.6.0): pausing (a paused queue hands out no step: pick
-- claims nothing in it, a continue there is requeued) and step history
-- (for its instances that do not say).  A queue has a row once one of
-- them was set.
CREATE TABLE gen_durable.queue_settings (
	queue		text PRIMARY KEY CHECK (pg_catalog.octet_length(queue) BETWEEN 1 AND 1024),
	paused_at	timestamptz,
	history		boolean NOT NULL DEFAULT false
);

-- Step history (0.6.0): an instance that records it (its own flag, or when
-- that is NULL its queue's setting at the time) has every committed
-- outcome appended here by the flush that commits it; GC deletes the rows
-- with the instance (instance_id is not a foreign key since 0.9.0).
CREATE TABLE gen_durable.step_history (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	instance_id	bigint NOT NULL,
	steps		bigint NOT NULL,
	step		text NOT NULL,
	kind		text NOT NULL,
	attempt		int NOT NULL,
	worker		text NOT NULL,
	at			timestamptz NOT NULL,
	error		jsonb
);
CREATE INDEX step_history_instance ON gen_durable.step_history (instance_id, id);

-- Recurring schedules (0.6.0; schedule.c, cron.c): each tick of a cron
-- expression in a time zone creates one instance from spec, an insert
-- spec, with the correlation key '<name>@<tick in UTC>'.  missed: what a
-- round does with ticks missed while nothing ran ('skip': only the latest
-- fires; 'catch_up': all of them).
CREATE TABLE gen_durable.schedules (
	name		text PRIMARY KEY CHECK (pg_catalog.octet_length(name) BETWEEN 1 AND 1024),
	cron		text NOT NULL,
	time_zone	text NOT NULL,
	spec		jsonb NOT NULL CHECK (pg_catalog.jsonb_typeof(spec) = 'object'),
	missed		text NOT NULL CHECK (missed IN ('skip', 'catch_up')),
	next_at		timestamptz NOT NULL,
	last_tick	timestamptz,
	created_at	timestamptz NOT NULL,
	updated_at	timestamptz NOT NULL
);
CREATE INDEX schedules_next ON gen_durable.schedules (next_at);

-- pg_dump keeps the rows of the engine's tables (the queue settings and
-- schedules are configuration, the rest is state) and the positions of the
-- identity sequences (0.7.0).  The sequences are extension members, and
-- pg_dump writes a member's data only when it is marked here: a database
-- restored without them restarted every id at 1, so each new insert,
-- signal or history row failed on a restored primary key.  (Registered in
-- the order the releases registered them.)
SELECT pg_catalog.pg_extension_config_dump('gen_durable.instances', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.signals', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.limits', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.buckets', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.queue_settings', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.step_history', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.schedules', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.instances_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.signals_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.step_history_id_seq', '');

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
	lease_expires_at	timestamptz,
	claim				bigint				-- 0.6.0: the claim fence
);

-------------------------------------------------------------------------------
-- Internal helpers (not part of the API)
-------------------------------------------------------------------------------

-- _session_alive tells the reaper whether a claim's session is connected.
CREATE FUNCTION gen_durable._session_alive(session bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_session_alive'
LANGUAGE C STRICT VOLATILE;

-- _start_worker asks, after commit, for this database's maintenance worker.
CREATE FUNCTION gen_durable._start_worker()
RETURNS void
AS 'MODULE_PATHNAME', 'gen_durable_start_worker'
LANGUAGE C VOLATILE;

-- The claim table (0.8.0; docs/contract.md §4.7).
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

-- _stats reads the counters of the stats view from shared memory.
CREATE FUNCTION gen_durable._stats()
RETURNS TABLE (counter text, value bigint)
AS 'MODULE_PATHNAME', 'gen_durable_stats'
LANGUAGE C VOLATILE SECURITY DEFINER;

-------------------------------------------------------------------------------
-- Producers
-------------------------------------------------------------------------------

-- on_conflict => 'replace' (debounce) and history arrived in 0.6.0, which
-- made the function again with them as its last arguments.
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
	fsm_version int DEFAULT 1,
	on_conflict text DEFAULT 'nothing',
	history boolean DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'gen_durable_insert'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.insert IS
	'Create an instance; returns its id, or NULL when a live instance occupies the correlation key (on_conflict => ''replace'': a runnable occupant takes the new state and due time, and its id is returned)';

CREATE FUNCTION gen_durable.insert_many(specs jsonb)
RETURNS TABLE (ord int, id bigint, created boolean)
AS 'MODULE_PATHNAME', 'gen_durable_insert_many'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.insert_many IS
	'Create many instances from an array of insert specs in one statement';

CREATE FUNCTION gen_durable.signal(
	target bigint,
	name text,
	payload jsonb DEFAULT '{}',
	dedup_key text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'gen_durable_signal_id'
LANGUAGE C VOLATILE SECURITY DEFINER;

CREATE FUNCTION gen_durable.signal(
	target text,
	name text,
	payload jsonb DEFAULT '{}',
	dedup_key text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'gen_durable_signal_key'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.signal(bigint, text, jsonb, text) IS
	'Deliver a signal to an instance by id: delivered, duplicate or no_target';
COMMENT ON FUNCTION gen_durable.signal(text, text, jsonb, text) IS
	'Deliver a signal to the live instance holding a correlation key: delivered, duplicate or no_target';

CREATE FUNCTION gen_durable.await(
	id bigint,
	timeout interval DEFAULT '5s',
	until text DEFAULT 'settled')
RETURNS TABLE (status text, result jsonb, error jsonb, step text, attempt int)
AS 'MODULE_PATHNAME', 'gen_durable_await'
LANGUAGE C VOLATILE SECURITY DEFINER ROWS 1;

COMMENT ON FUNCTION gen_durable.await IS
	'Wait inside the server until an instance settles: done, failed, cancelled, awaiting, busy or not_found';

-- cancel (D14)
CREATE FUNCTION gen_durable.cancel(id bigint, reason text DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'gen_durable_cancel'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.cancel IS
	'Cancel a live instance and its live descendants; returns how many were cancelled';

-- find runs with the caller's rights: a SQL function the planner inlines
-- into the caller's query, so that the caller's filters reach the GIN
-- index (D18).
CREATE FUNCTION gen_durable.find(metadata jsonb)
RETURNS SETOF gen_durable.instances
LANGUAGE sql STABLE
AS $$
	SELECT * FROM gen_durable.instances i WHERE i.metadata @> find.metadata
$$;

COMMENT ON FUNCTION gen_durable.find IS
	'Instances whose metadata contains the given JSON object (GIN index)';

CREATE FUNCTION gen_durable.timeline(id bigint)
RETURNS TABLE (steps bigint, step text, kind text, attempt int, worker text, at timestamptz,
			   error jsonb)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT h.steps, h.step, h.kind, h.attempt, h.worker, h.at, h.error
	  FROM gen_durable.step_history h
	 WHERE h.instance_id = timeline.id
	 ORDER BY h.id
$$;

COMMENT ON FUNCTION gen_durable.timeline IS
	'The committed outcomes of an instance recorded in its step history, oldest first';

CREATE FUNCTION gen_durable.cron_next(cron text, after timestamptz DEFAULT pg_catalog.now(),
									  time_zone text DEFAULT 'UTC')
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'gen_durable_cron_next'
LANGUAGE C STABLE;

COMMENT ON FUNCTION gen_durable.cron_next IS
	'The first tick of a cron expression after an instant, in a time zone; NULL when it never fires';

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
LANGUAGE C VOLATILE SECURITY DEFINER ROWS 10;

COMMENT ON FUNCTION gen_durable.pick IS
	'Claim up to batch runnable instances of a queue in priority order';

CREATE FUNCTION gen_durable.flush(outcomes jsonb)
RETURNS TABLE (id bigint, applied text, detail text, job jsonb)
AS 'MODULE_PATHNAME', 'gen_durable_flush'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.flush IS
	'Commit the outcomes of many steps together (group commit)';

CREATE FUNCTION gen_durable.heartbeat(
	worker text,
	ids bigint[],
	lease interval DEFAULT '30s')
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'gen_durable_heartbeat'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.heartbeat IS
	'Extend the leases of claims; returns the ids the worker still owns';

CREATE FUNCTION gen_durable.release(worker text, ids bigint[] DEFAULT NULL)
RETURNS int
AS 'MODULE_PATHNAME', 'gen_durable_release'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.release IS
	'Return claims to runnable without counting an attempt (NULL ids = all of the worker''s claims)';

CREATE FUNCTION gen_durable.admit(ids bigint[], worker text)
RETURNS TABLE (id bigint, admitted bool)
AS 'MODULE_PATHNAME', 'gen_durable_admit'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.admit IS
	'Admit claimed instances against their rate limits and concurrency gates, as a pick would';

-------------------------------------------------------------------------------
-- Operators
-------------------------------------------------------------------------------

CREATE FUNCTION gen_durable.run_maintenance()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'gen_durable_run_maintenance'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.run_maintenance IS
	'Run one round of every maintenance sweep now; returns what each did';

CREATE FUNCTION gen_durable.reset_stats()
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'gen_durable_reset_stats'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.reset_stats IS
	'Set every counter of gen_durable.stats to zero; returns the reset time';

-- fail and retry (D14)
CREATE FUNCTION gen_durable.fail(id bigint, reason text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_fail'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.fail IS
	'Fail a live instance (its live descendants are cancelled); false when it is not live';

CREATE FUNCTION gen_durable.retry(id bigint, step text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_retry'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.retry IS
	'Run a failed or cancelled instance again (attempt 0), at its step or the given one';

-- limiter policy (D8)
CREATE FUNCTION gen_durable.set_rate_limit(
	name text,
	allowed float8,
	per interval,
	burst float8 DEFAULT NULL,
	shards int DEFAULT 1)
RETURNS void
AS 'MODULE_PATHNAME', 'gen_durable_set_rate_limit'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.set_rate_limit IS
	'Limit each key name[:partition] to allowed weight per period, saving up at most burst (default allowed)';

CREATE FUNCTION gen_durable.set_concurrency_limit(
	name text,
	max int,
	shards int DEFAULT 1)
RETURNS void
AS 'MODULE_PATHNAME', 'gen_durable_set_concurrency_limit'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.set_concurrency_limit IS
	'Let at most max instances of each concurrency key name[:partition] execute at once';

CREATE FUNCTION gen_durable.drop_limit(kind text, name text)
RETURNS bool
AS 'MODULE_PATHNAME', 'gen_durable_drop_limit'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.drop_limit IS
	'Remove a rate limit (kind ''rate'') or a concurrency gate (kind ''conc''); false when there was none';

-- queue control
CREATE FUNCTION gen_durable.pause_queue(queue text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_pause_queue'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.pause_queue IS
	'Stop handing out steps of a queue (running ones finish); false when it was paused already';

CREATE FUNCTION gen_durable.resume_queue(queue text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_resume_queue'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.resume_queue IS
	'Hand out the steps of a paused queue again, waking its waiting picks; false when it was not paused';

CREATE FUNCTION gen_durable.set_queue_history(queue text, enabled boolean)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_set_queue_history'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.set_queue_history IS
	'Record the step history of a queue''s instances that do not say otherwise (or stop); returns the previous setting';

-- recurring schedules
CREATE FUNCTION gen_durable.schedule(
	name text,
	cron text,
	fsm text,
	state jsonb DEFAULT '{}',
	queue text DEFAULT 'default',
	step text DEFAULT 'start',
	time_zone text DEFAULT 'UTC',
	missed text DEFAULT 'skip',
	options jsonb DEFAULT '{}')
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'gen_durable_schedule'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.schedule IS
	'Create or redefine a recurring schedule: each tick of cron (in time_zone) creates one instance; returns the next tick';

CREATE FUNCTION gen_durable.unschedule(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'gen_durable_unschedule'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION gen_durable.unschedule IS
	'Remove a schedule (the instances it created stay); false when there was none';

-------------------------------------------------------------------------------
-- Views
-------------------------------------------------------------------------------

-- Cluster-wide counters since server start or reset_stats(); committed
-- work only.
CREATE VIEW gen_durable.stats AS
	SELECT counter, value FROM gen_durable._stats();

COMMENT ON VIEW gen_durable.stats IS
	'gen_durable counters since server start or the last reset_stats()';

-- Every queue with instances or a setting: its instances by status, the
-- age of its oldest due runnable row, how many runnable rows wait on a
-- rate limit nobody configured (D6), and its settings.
CREATE VIEW gen_durable.queues AS
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

COMMENT ON VIEW gen_durable.queues IS
	'gen_durable instances per queue and status, and the age of the oldest due row';

-- schedule_status: each schedule, its next tick, and the instance of its
-- latest tick (found by that tick's correlation key)
CREATE VIEW gen_durable.schedule_status AS
	SELECT s.name, s.cron, s.time_zone, s.spec ->> 'fsm' AS fsm,
		   COALESCE(s.spec ->> 'queue', 'default') AS queue, s.missed, s.next_at,
		   s.last_tick, i.id AS last_id, i.status AS last_status
	  FROM gen_durable.schedules s
	  LEFT JOIN gen_durable.instances i
		ON i.correlation_guard = s.name || '@'
			|| pg_catalog.to_char(s.last_tick AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"');

COMMENT ON VIEW gen_durable.schedule_status IS
	'gen_durable schedules, their next tick and the instance of their latest tick';

-- health: for each of the engine's tables, its size, its live and dead
-- rows and its vacuuming, and what holds the vacuum horizon back: the
-- oldest transaction or snapshot of the cluster (a backend, a prepared
-- transaction, a replication slot, a standby's feedback), which keeps
-- vacuum from removing any row that died after it began.  The hint says
-- what to do.  The horizon counts as held back when its holder is older
-- than the longest wait the engine itself holds a snapshot for
-- (gen_durable.max_wait) plus 5 seconds, or, for a replication slot or a
-- standby, more than a million transactions behind.  Reads only the
-- statistics views and the catalogs (no scan of the tables), as the
-- extension's owner, so that other roles' backends are shown
-- (pg_stat_activity hides them from unprivileged roles).
CREATE FUNCTION gen_durable._health()
RETURNS TABLE (table_name text, total_bytes bigint, heap_bytes bigint, index_bytes bigint,
			   toast_bytes bigint, live_rows bigint, dead_rows bigint,
			   last_autovacuum timestamptz, autovacuum_count bigint, vacuum_phase text,
			   horizon_held boolean, horizon_kind text, horizon_pid int,
			   horizon_application text, horizon_age interval, hint text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH limits AS (
		SELECT COALESCE(pg_catalog.current_setting('gen_durable.max_wait', true), '30s')::interval
			   + interval '5 seconds' AS held_after
	), holder AS (
		SELECT kind, pid, application, age, xid_age
		  FROM (SELECT 'backend' AS kind, a.pid, a.application_name AS application,
					   pg_catalog.now() - COALESCE(a.xact_start, a.query_start) AS age,
					   GREATEST(pg_catalog.age(a.backend_xid), pg_catalog.age(a.backend_xmin)) AS xid_age
				  FROM pg_catalog.pg_stat_activity a
				 WHERE (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
				   AND a.pid <> pg_catalog.pg_backend_pid()
				UNION ALL
				SELECT 'prepared transaction', NULL, p.gid, pg_catalog.now() - p.prepared,
					   pg_catalog.age(p.transaction)
				  FROM pg_catalog.pg_prepared_xacts p
				UNION ALL
				SELECT 'replication slot', s.active_pid, s.slot_name, NULL,
					   GREATEST(pg_catalog.age(s.xmin), pg_catalog.age(s.catalog_xmin))
				  FROM pg_catalog.pg_replication_slots s
				 WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL
				UNION ALL
				SELECT 'standby', r.pid, r.application_name, NULL, pg_catalog.age(r.backend_xmin)
				  FROM pg_catalog.pg_stat_replication r
				 WHERE r.backend_xmin IS NOT NULL) h
		 ORDER BY xid_age DESC NULLS LAST, age DESC NULLS LAST
		 LIMIT 1
	)
	SELECT c.relname::text,
		   pg_catalog.pg_total_relation_size(c.oid),
		   pg_catalog.pg_relation_size(c.oid),
		   pg_catalog.pg_indexes_size(c.oid),
		   COALESCE(pg_catalog.pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0),
		   s.n_live_tup, s.n_dead_tup, s.last_autovacuum, s.autovacuum_count,
		   v.phase,
		   COALESCE(h.age > l.held_after OR h.kind IN ('replication slot', 'standby')
					AND h.xid_age > 1000000, false),
		   h.kind, h.pid, h.application, h.age,
		   CASE
		   WHEN h.age > l.held_after AND h.kind = 'backend' THEN
			   pg_catalog.format('Backend %s (%s) has had a transaction or snapshot open for %s: vacuum removes no row that died since. End it (pg_terminate_backend(%s)) or keep transactions short.',
								 h.pid, COALESCE(NULLIF(h.application, ''), 'no application name'),
								 pg_catalog.date_trunc('second', h.age), h.pid)
		   WHEN h.age > l.held_after THEN
			   pg_catalog.format('The prepared transaction %L has been open for %s: vacuum removes no row that died since. COMMIT PREPARED or ROLLBACK PREPARED it.',
								 h.application, pg_catalog.date_trunc('second', h.age))
		   WHEN h.kind IN ('replication slot', 'standby') AND h.xid_age > 1000000 THEN
			   pg_catalog.format('The %s %s holds the horizon %s transactions back: vacuum removes no row that died since. Let it catch up, or drop it.',
								 h.kind, h.application, h.xid_age)
		   WHEN s.n_dead_tup > GREATEST(s.n_live_tup, 10000) AND v.phase IS NULL THEN
			   'More dead rows than live ones and no vacuum running: autovacuum is behind on this table (docs/operations.md, "Operating it under load").'
		   END
	  FROM pg_catalog.pg_class c
	  LEFT JOIN pg_catalog.pg_stat_all_tables s ON s.relid = c.oid
	  LEFT JOIN pg_catalog.pg_stat_progress_vacuum v ON v.relid = c.oid
	  CROSS JOIN limits l
	  LEFT JOIN holder h ON true
	 WHERE c.relnamespace = 'gen_durable'::pg_catalog.regnamespace AND c.relkind = 'r'
	 ORDER BY c.relname
$$;

COMMENT ON FUNCTION gen_durable._health IS
	'The rows of the health view, read as the extension''s owner';

CREATE VIEW gen_durable.health AS
	SELECT * FROM gen_durable._health();

COMMENT ON VIEW gen_durable.health IS
	'gen_durable tables: size, live and dead rows, vacuuming, and what holds the vacuum horizon back';

-------------------------------------------------------------------------------
-- Roles and privileges (least privilege, since 0.5.0)
-------------------------------------------------------------------------------

-- Three roles, each able to do exactly its part:
--   gen_durable_producer  insert, insert_many, signal, await, cancel, find,
--                         timeline, cron_next, and reading the instances;
--   gen_durable_worker    pick, flush, heartbeat, release, admit;
--   gen_durable_admin     both of the above, and the limits, queue control,
--                         schedules, retry, fail, run_maintenance,
--                         reset_stats, the views, and reading the tables.
-- Roles belong to the cluster: a database that installed the extension
-- earlier created them already.  Nothing is granted to PUBLIC, and only
-- the extension's owner writes the tables: every function but find and
-- cron_next runs with the owner's rights (SECURITY DEFINER, above) and
-- does only what it documents; the C functions run their statements with
-- pg_catalog alone on the search path, timeline sets it.  find, a SQL
-- function the planner inlines into the caller's query, runs with the
-- caller's rights, and producers may read the instances, which is what
-- find shows them anyway; cron_next reads no table.
DO $roles$
DECLARE
	r text;
BEGIN
	FOREACH r IN ARRAY ARRAY['gen_durable_producer', 'gen_durable_worker', 'gen_durable_admin']
	LOOP
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
			EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
		END IF;
	END LOOP;
END
$roles$;
GRANT gen_durable_producer, gen_durable_worker TO gen_durable_admin;

REVOKE ALL ON SCHEMA gen_durable FROM PUBLIC;
GRANT USAGE ON SCHEMA gen_durable
	TO gen_durable_producer, gen_durable_worker, gen_durable_admin;

-- Tables and views: the admin reads all of them, the producer the
-- instances.  The sequences of 0.1.0 have their privileges set to the
-- owner's alone, as 0.5.0 set them; step_history's (0.6.0) keeps its
-- default privileges, which are the same.
REVOKE ALL ON ALL TABLES IN SCHEMA gen_durable FROM PUBLIC;
REVOKE ALL ON SEQUENCE gen_durable.instances_id_seq, gen_durable.signals_id_seq FROM PUBLIC;
GRANT SELECT ON ALL TABLES IN SCHEMA gen_durable TO gen_durable_admin;
GRANT SELECT ON gen_durable.instances TO gen_durable_producer;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA gen_durable FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
	gen_durable.insert(text, jsonb, text, text, int, timestamptz, interval, text,
					   gen_durable.status[], text, text, float8, int, int, jsonb, int, text,
					   boolean),
	gen_durable.insert_many(jsonb),
	gen_durable.signal(bigint, text, jsonb, text),
	gen_durable.signal(text, text, jsonb, text),
	gen_durable.await(bigint, interval, text),
	gen_durable.cancel(bigint, text),
	gen_durable.find(jsonb),
	gen_durable.timeline(bigint),
	gen_durable.cron_next(text, timestamptz, text)
	TO gen_durable_producer;
GRANT EXECUTE ON FUNCTION
	gen_durable.pick(text, text, int, interval, interval, text[]),
	gen_durable.flush(jsonb),
	gen_durable.heartbeat(text, bigint[], interval),
	gen_durable.release(text, bigint[]),
	gen_durable.admit(bigint[], text)
	TO gen_durable_worker;
GRANT EXECUTE ON FUNCTION
	gen_durable._stats(),
	gen_durable._health(),
	gen_durable.run_maintenance(),
	gen_durable.reset_stats(),
	gen_durable.fail(bigint, text),
	gen_durable.retry(bigint, text),
	gen_durable.set_rate_limit(text, float8, interval, float8, int),
	gen_durable.set_concurrency_limit(text, int, int),
	gen_durable.drop_limit(text, text),
	gen_durable.pause_queue(text),
	gen_durable.resume_queue(text),
	gen_durable.set_queue_history(text, boolean),
	gen_durable.schedule(text, text, text, jsonb, text, text, text, text, jsonb),
	gen_durable.unschedule(text)
	TO gen_durable_admin;
-- (_session_alive and _start_worker: the owner's alone)

-------------------------------------------------------------------------------
-- Claims in memory (0.8.0; docs/contract.md §4.7)
-------------------------------------------------------------------------------

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
	  JOIN ONLY gen_durable.instances i ON i.id = m.id AND i.ctid = m.tid
	 WHERE m.state <> 'pending'
	UNION ALL
	SELECT i.id, i.fsm, i.step, i.queue, i.locked_by, i.claim, i.updated_at,
		   i.lease_expires_at, false
	  FROM ONLY gen_durable.instances i
	 WHERE i.status = 'executing';

COMMENT ON VIEW gen_durable.claims IS
	'gen_durable: every claim in flight, in the claim table (in_memory) or written to its row (executing)';

REVOKE ALL ON FUNCTION gen_durable._claimed_in_memory(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION gen_durable._take_in_memory(bigint, tid, xid, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION gen_durable._memory_claims() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gen_durable._memory_claims() TO gen_durable_admin, gen_durable_producer;
REVOKE ALL ON gen_durable.claims FROM PUBLIC;
GRANT SELECT ON gen_durable.claims TO gen_durable_admin, gen_durable_producer;

-------------------------------------------------------------------------------
-- The archive of finished instances (0.9.0; docs/contract.md §10.5)
-------------------------------------------------------------------------------

-- A plain instance (no parent, correlation key, metadata or step
-- history) whose step ends done is moved by the flush that commits
-- it into the open segment; the segments inherit from
-- gen_durable.instances, so every query of that table still sees it.

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

-- this database gets its maintenance worker once CREATE EXTENSION commits
SELECT gen_durable._start_worker();
