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

-- Queue control: a paused queue hands out no step (pick claims nothing in
-- it, a continue there is requeued) until it is resumed.  Its rows are
-- configuration, so pg_dump keeps them.
CREATE TABLE gen_durable.paused_queues (
	queue		text PRIMARY KEY CHECK (octet_length(queue) BETWEEN 1 AND 1024),
	paused_at	timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('gen_durable.paused_queues', '');
GRANT SELECT ON gen_durable.paused_queues TO gen_durable_admin;

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

REVOKE ALL ON FUNCTION gen_durable.pause_queue(text), gen_durable.resume_queue(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gen_durable.pause_queue(text), gen_durable.resume_queue(text)
	TO gen_durable_admin;

-- queues: every queue with instances or a pause, and whether it is paused
CREATE OR REPLACE VIEW gen_durable.queues AS
	SELECT COALESCE(c.queue, p.queue) AS queue,
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
		   p.queue IS NOT NULL AS paused
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
	  FULL JOIN gen_durable.paused_queues p ON p.queue = c.queue;
