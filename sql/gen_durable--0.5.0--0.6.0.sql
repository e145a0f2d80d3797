/* gen_durable--0.5.0--0.6.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.6.0'" to load this file. \quit

-- The claim fence.  Every claim of an instance (a pick, an inline
-- continue) gets the next number; the job carries it, and an outcome that
-- names it applies only while that claim is the instance's latest.  Before
-- this, flush told claims apart only by (id, worker): when a worker lost a
-- claim (lease expiry, reclaim) and claimed the same instance again, the
-- late outcome of the lost claim was applied to the new one.
ALTER TABLE gen_durable.instances ADD COLUMN claim bigint NOT NULL DEFAULT 0;

COMMENT ON COLUMN gen_durable.instances.claim IS
	'The number of the latest claim: 0 before the first, +1 at every pick and inline continue';

ALTER TYPE gen_durable.job ADD ATTRIBUTE claim bigint;

-- Queue settings: pausing (a paused queue hands out no step: pick claims
-- nothing in it, a continue there is requeued) and step history (for its
-- instances that do not say).  A queue has a row once one of
-- them was set.  The rows are configuration, so pg_dump keeps them.
CREATE TABLE gen_durable.queue_settings (
	queue		text PRIMARY KEY CHECK (octet_length(queue) BETWEEN 1 AND 1024),
	paused_at	timestamptz,
	history		boolean NOT NULL DEFAULT false
);
SELECT pg_catalog.pg_extension_config_dump('gen_durable.queue_settings', '');
GRANT SELECT ON gen_durable.queue_settings TO gen_durable_admin;

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

REVOKE ALL ON FUNCTION gen_durable.pause_queue(text), gen_durable.resume_queue(text),
	gen_durable.set_queue_history(text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gen_durable.pause_queue(text), gen_durable.resume_queue(text),
	gen_durable.set_queue_history(text, boolean) TO gen_durable_admin;

-- queues: every queue with instances or a setting, and its settings
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
			  FROM gen_durable.instances
			 GROUP BY queue) c
	  FULL JOIN gen_durable.queue_settings s ON s.queue = c.queue
	 WHERE c.queue IS NOT NULL OR s.paused_at IS NOT NULL OR s.history;

-- Step history: an instance that records it (its own flag, or when that
-- is NULL its queue's setting at the time) has every committed outcome
-- appended here by the flush that commits it; the rows go with the
-- instance.
ALTER TABLE gen_durable.instances ADD COLUMN history boolean;

CREATE TABLE gen_durable.step_history (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	instance_id	bigint NOT NULL REFERENCES gen_durable.instances (id) ON DELETE CASCADE,
	steps		bigint NOT NULL,
	step		text NOT NULL,
	kind		text NOT NULL,
	attempt		int NOT NULL,
	worker		text NOT NULL,
	at			timestamptz NOT NULL,
	error		jsonb
);
CREATE INDEX step_history_instance ON gen_durable.step_history (instance_id, id);
SELECT pg_catalog.pg_extension_config_dump('gen_durable.step_history', '');
GRANT SELECT ON gen_durable.step_history TO gen_durable_admin;

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

REVOKE ALL ON FUNCTION gen_durable.timeline(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gen_durable.timeline(bigint) TO gen_durable_producer;

-- insert(on_conflict => 'replace'): debounce.  A runnable instance
-- occupying the correlation key takes the new state and due time.
-- insert(history => ...): record the instance's step history (NULL: as
-- its queue is set).  New arguments cannot be added in place, so the
-- function is made again (with the producer's grant of 0.5.0).
DROP FUNCTION gen_durable.insert(text, jsonb, text, text, int, timestamptz, interval, text,
								 gen_durable.status[], text, text, float8, int, int, jsonb, int);

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

REVOKE ALL ON FUNCTION gen_durable.insert(text, jsonb, text, text, int, timestamptz, interval,
										  text, gen_durable.status[], text, text, float8, int,
										  int, jsonb, int, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gen_durable.insert(text, jsonb, text, text, int, timestamptz, interval,
											 text, gen_durable.status[], text, text, float8,
											 int, int, jsonb, int, text, boolean)
	TO gen_durable_producer;

-- Recurring schedules (schedule.c, cron.c): each tick of a cron expression
-- in a time zone creates one instance from spec, an insert spec, with the
-- correlation key '<name>@<tick in UTC>'.  missed: what a round does with
-- ticks missed while nothing ran ('skip': only the latest fires;
-- 'catch_up': all of them).  The rows are configuration, so pg_dump keeps
-- them.
CREATE TABLE gen_durable.schedules (
	name		text PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 1024),
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
SELECT pg_catalog.pg_extension_config_dump('gen_durable.schedules', '');
GRANT SELECT ON gen_durable.schedules TO gen_durable_admin;

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

CREATE FUNCTION gen_durable.cron_next(cron text, after timestamptz DEFAULT pg_catalog.now(),
									  time_zone text DEFAULT 'UTC')
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'gen_durable_cron_next'
LANGUAGE C STABLE;

COMMENT ON FUNCTION gen_durable.cron_next IS
	'The first tick of a cron expression after an instant, in a time zone; NULL when it never fires';

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

REVOKE ALL ON FUNCTION gen_durable.schedule(text, text, text, jsonb, text, text, text, text, jsonb),
	gen_durable.unschedule(text), gen_durable.cron_next(text, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gen_durable.schedule(text, text, text, jsonb, text, text, text, text,
											   jsonb),
	gen_durable.unschedule(text) TO gen_durable_admin;
GRANT EXECUTE ON FUNCTION gen_durable.cron_next(text, timestamptz, text)
	TO gen_durable_producer;
GRANT SELECT ON gen_durable.schedule_status TO gen_durable_admin;
