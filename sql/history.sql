-- history.sql: step history (issue 9): an instance created with history
-- (insert's history argument, an insert spec's "history", or its queue's
-- set_queue_history) gets a row in gen_durable.step_history for every
-- outcome a flush commits, in the flush's transaction; timeline(id) reads
-- them back; the rows go with the instance.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse
\i test/regress_helpers.sql

-- an instance's timeline without the time column
CREATE FUNCTION pg_temp.tl(bigint) RETURNS TABLE (
	steps bigint, step text, kind text, attempt int, worker text, error jsonb)
LANGUAGE sql AS $$
	SELECT steps, step, kind, attempt, worker, error FROM gen_durable.timeline($1)
$$;

-- pick the one runnable instance of a queue as w, then flush one outcome
CREATE FUNCTION pg_temp.run(q text, kind text, extra jsonb DEFAULT '{}') RETURNS text
LANGUAGE sql AS $$
	SELECT f.applied || COALESCE(' ' || f.detail, '')
	  FROM gen_durable.pick(q, 'w', 1) p,
		   LATERAL gen_durable.flush(jsonb_build_array(
			 jsonb_build_object('id', p.id, 'worker', 'w', 'kind', kind) || extra)) f
$$;

------------------------------------------------------------------------
-- per instance: every kind, retries and an engine-made failure
------------------------------------------------------------------------
SELECT gen_durable.insert('m', '{}', 'a', queue => 'h1', history => true, max_attempts => 2)
	   AS h \gset
SELECT gen_durable.insert('m', '{}', 'a', queue => 'h1x') AS plain \gset
SELECT pg_temp.run('h1', 'retry', '{"error": {"message": "flaky"}}');
SELECT pg_temp.run('h1', 'next', '{"step": "b"}');
SELECT pg_temp.run('h1', 'await', '{"names": ["go"], "step": "c", "timeout": 0.01}');
SELECT pg_sleep(0.02);
SELECT gen_durable.run_maintenance()->'timeouts' AS timeouts;
SELECT pg_temp.run('h1', 'spawn', '{"children": [{"fsm": "kid", "queue": "h1kids"}], "step": "d"}');
SELECT pg_temp.run('h1kids', 'done');
-- a continue: two rows (the continue, then what its inline step commits)
SELECT f.applied, f.job->>'step' AS step
  FROM gen_durable.pick('h1', 'w', 1) p,
	   LATERAL gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', p.id, 'worker', 'w', 'kind', 'next', 'step', 'e', 'continue', true))) f;
SELECT f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :h, 'worker', 'w', 'kind', 'retry', 'error', 'once'))) f;
-- attempts run out: the engine fails it, with its error
SELECT pg_temp.run('h1', 'retry', '{"error": "twice"}');
SELECT * FROM pg_temp.tl(:h);
SELECT status FROM gen_durable.instances WHERE id = :h;
-- the child and the plain instance record nothing
SELECT count(*) AS other_rows FROM gen_durable.step_history WHERE instance_id <> :h;
SELECT count(*) AS plain_rows FROM gen_durable.timeline(:plain);
-- the times are the flushes' commit times, in order
SELECT bool_and(at <= now()) AND count(DISTINCT at) > 1 AS stamped FROM gen_durable.timeline(:h);

------------------------------------------------------------------------
-- stale, invalid and rolled-back outcomes record nothing
------------------------------------------------------------------------
SELECT gen_durable.insert('m', '{}', 'a', queue => 'h2', history => true) AS s \gset
SELECT count(*) FROM gen_durable.pick('h2', 'w', 1);
SELECT f.applied FROM gen_durable.flush(jsonb_build_array(
		 jsonb_build_object('id', :s, 'worker', 'other', 'kind', 'done'),
		 jsonb_build_object('id', :s, 'worker', 'w', 'kind', 'next'))) f;
BEGIN;
SELECT * FROM pg_temp.out1(:s, 'w', 'done');
ROLLBACK;
SELECT count(*) AS rows_after_stale_invalid_rollback FROM gen_durable.timeline(:s);

------------------------------------------------------------------------
-- a mixed batch: a history row next to fast-path rows in one flush
------------------------------------------------------------------------
SELECT array_agg(id ORDER BY id) AS mixed
  FROM gen_durable.insert_many('[{"fsm": "m", "queue": "h3", "history": true},
								 {"fsm": "m", "queue": "h3"}, {"fsm": "m", "queue": "h3"}]') \gset
SELECT count(*) FROM gen_durable.pick('h3', 'w', 10);
SELECT f.applied, count(*)
  FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
							FROM unnest(:'mixed'::bigint[]) AS id)) f
 GROUP BY f.applied;
SELECT instance_id = (:'mixed'::bigint[])[1] AS first_only, kind FROM gen_durable.step_history
 WHERE instance_id = ANY (:'mixed');

------------------------------------------------------------------------
-- per queue: for its instances that do not say, from the next commit on
------------------------------------------------------------------------
SELECT array_agg(id ORDER BY ord) AS q
  FROM gen_durable.insert_many('[{"fsm": "m", "queue": "hq"},
								 {"fsm": "m", "queue": "hq", "history": false},
								 {"fsm": "m", "queue": "hq", "history": true}]') \gset
SELECT count(*) FROM gen_durable.pick('hq', 'w', 10);
-- the queue records nothing yet: only the instance that asked
SELECT f.applied, count(*)
  FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'next',
												 'step', 'b', 'continue', true))
							FROM unnest(:'q'::bigint[]) AS id)) f
 GROUP BY f.applied;
SELECT gen_durable.set_queue_history('hq', true) AS previous;
SELECT gen_durable.set_queue_history('hq', true) AS previous;
SELECT queue, paused, history FROM gen_durable.queues WHERE queue = 'hq';
SELECT f.applied, count(*)
  FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
							FROM unnest(:'q'::bigint[]) AS id)) f
 GROUP BY f.applied;
-- the instance that says nothing records from the setting on; the one that
-- said false never; the one that said true all along
SELECT k.n, (SELECT string_agg(kind, ',' ORDER BY steps) FROM gen_durable.timeline(k.id)) AS kinds
  FROM unnest(:'q'::bigint[]) WITH ORDINALITY AS k(id, n) ORDER BY k.n;
SELECT gen_durable.set_queue_history('hq', false) AS previous;
SELECT count(*) AS hq_listed FROM gen_durable.queues WHERE queue = 'hq' AND history;

------------------------------------------------------------------------
-- GC prunes the rows with their instance
------------------------------------------------------------------------
SELECT count(*) > 0 AS has_rows FROM gen_durable.step_history WHERE instance_id = :h;
-- older than the retention (1 day)
UPDATE gen_durable.instances SET updated_at = now() - interval '2 days' WHERE id = :h;
SELECT (gen_durable.run_maintenance()->>'gc_deleted')::int > 0 AS gc_ran;
SELECT count(*) AS rows_after_gc FROM gen_durable.step_history WHERE instance_id = :h;

-- bad input
SELECT gen_durable.set_queue_history('hq', NULL);
SELECT gen_durable.set_queue_history(NULL, true);
SELECT * FROM gen_durable.insert_many('[{"fsm": "m", "history": "yes"}]');

DROP FUNCTION pg_temp.tl(bigint), pg_temp.run(text, text, jsonb);
DROP EXTENSION gen_durable;
