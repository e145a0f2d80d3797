/* gen_durable--0.1.0--0.2.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.2.0'" to load this file. \quit

-- The backend session that made a claim (session.c): when that backend
-- exits, the maintenance worker returns the claim without waiting for the
-- lease.  NULL when no session was recorded (lease only).
ALTER TABLE gen_durable.instances ADD COLUMN claim_session bigint;

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

-------------------------------------------------------------------------------
-- Producers
-------------------------------------------------------------------------------

CREATE FUNCTION gen_durable.await(
	id bigint,
	timeout interval DEFAULT '5s',
	until text DEFAULT 'settled')
RETURNS TABLE (status text, result jsonb, error jsonb, step text, attempt int)
AS 'MODULE_PATHNAME', 'gen_durable_await'
LANGUAGE C VOLATILE ROWS 1;

COMMENT ON FUNCTION gen_durable.await IS
	'Wait inside the server until an instance settles: done, failed, cancelled, awaiting, busy or not_found';

-------------------------------------------------------------------------------
-- Observability
-------------------------------------------------------------------------------

CREATE FUNCTION gen_durable._stats()
RETURNS TABLE (counter text, value bigint)
AS 'MODULE_PATHNAME', 'gen_durable_stats'
LANGUAGE C VOLATILE;

-- Cluster-wide counters since server start or reset_stats(); committed
-- work only.
CREATE VIEW gen_durable.stats AS
	SELECT counter, value FROM gen_durable._stats();

COMMENT ON VIEW gen_durable.stats IS
	'gen_durable counters since server start or the last reset_stats()';

CREATE FUNCTION gen_durable.reset_stats()
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'gen_durable_reset_stats'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gen_durable.reset_stats IS
	'Set every counter of gen_durable.stats to zero; returns the reset time';

-- Per queue: instances by status and the age of the oldest due runnable row.
CREATE VIEW gen_durable.queues AS
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
			   AS oldest_due_age
	  FROM gen_durable.instances
	 GROUP BY queue;

COMMENT ON VIEW gen_durable.queues IS
	'gen_durable instances per queue and status, and the age of the oldest due row';

-- this database gets its maintenance worker once the update commits
SELECT gen_durable._start_worker();
