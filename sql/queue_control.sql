-- queue_control.sql: pause_queue / resume_queue (issue 9, queue control):
-- a paused queue hands out no step, neither to pick nor to an inline
-- continue; running steps finish; producers still insert; the queues view
-- shows it; resuming hands its steps out again.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse
\i test/regress_helpers.sql

SELECT gen_durable.insert('job', queue => 'pq') AS a \gset
SELECT gen_durable.insert('job', queue => 'pq') AS b \gset
SELECT gen_durable.insert('job', queue => 'other') AS o \gset
-- a is claimed before the pause: it runs on
SELECT id = :a AS is_a FROM gen_durable.pick('pq', 'w', 1);

SELECT gen_durable.pause_queue('pq') AS paused;
SELECT gen_durable.pause_queue('pq') AS paused_again;
SELECT gen_durable.pause_queue('idle') AS paused_empty_queue;
SELECT queue, due, executing, paused FROM gen_durable.queues ORDER BY queue;
SELECT queue, paused_at IS NOT NULL AS paused FROM gen_durable.queue_settings ORDER BY queue;

-- nothing of pq is picked; other queues are not affected
SELECT count(*) AS picked_pq FROM gen_durable.pick('pq', 'w', 10);
SELECT id = :o AS is_o FROM gen_durable.pick('other', 'w', 10);
-- producers still insert into it
SELECT gen_durable.insert('job', queue => 'pq') IS NOT NULL AS inserted;

-- the step claimed before the pause: its continue is requeued, not run
SELECT f.applied, f.detail, f.job IS NULL AS no_job
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :a, 'worker', 'w', 'kind', 'next', 'step', 'two', 'continue', true))) f;
SELECT status, step, locked_by FROM gen_durable.instances WHERE id = :a;

-- resuming hands its steps out again, in order
SELECT gen_durable.resume_queue('pq') AS resumed;
SELECT gen_durable.resume_queue('pq') AS resumed_again;
SELECT gen_durable.resume_queue('never') AS resumed_unpaused;
SELECT queue, paused FROM gen_durable.queues ORDER BY queue;
-- a resumed queue with no instances and no setting left is not listed
SELECT gen_durable.resume_queue('idle');
SELECT count(*) AS idle_listed FROM gen_durable.queues WHERE queue = 'idle';
SELECT count(*) AS picked_pq FROM gen_durable.pick('pq', 'w', 10);
-- a continue in a running queue runs inline again
SELECT f.applied, f.job->>'step' AS step
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :a, 'worker', 'w', 'kind', 'next', 'step', 'three', 'continue', true))) f;

-- the fast path checks the pause too: a batch of plain continues
SELECT gen_durable.pause_queue('pq');
SELECT f.id = :a AS is_a, f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(
		 jsonb_build_object('id', :a, 'worker', 'w', 'kind', 'next', 'step', 'four', 'continue', true),
		 jsonb_build_object('id', :b, 'worker', 'w', 'kind', 'done'))) f;
SELECT gen_durable.resume_queue('pq');

-- a pause rolled back pauses nothing
BEGIN;
SELECT gen_durable.pause_queue('pq');
ROLLBACK;
SELECT paused_at IS NULL AS not_paused FROM gen_durable.queue_settings WHERE queue = 'pq';

-- bad input
SELECT gen_durable.pause_queue(NULL);
SELECT gen_durable.pause_queue('');
SELECT gen_durable.resume_queue(repeat('q', 1025));

DROP EXTENSION gen_durable;
