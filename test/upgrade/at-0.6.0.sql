-- at-0.6.0.sql: at 0.6.0, the first release whose schema the current
-- library serves in full: pick, flush and run_maintenance work.  First the
-- releases before: their claims are flushed (by outcomes that name no
-- claim number: a claim made before 0.6.0 has none), a claim whose session
-- is gone is reaped, the rest is picked and run; then instances that use
-- what 0.6.0 added (queues v6*): claim numbers (a claim kept across the
-- update), step history, queue settings, schedules, debounce, and a
-- fan-out made by a real flush.

-- the sweeps run again: the claim of 0.2.0 whose session is gone goes
-- back (no other lease has expired, no await is due, nothing is old
-- enough for GC)
SELECT gen_durable.run_maintenance() - 'gate_shards_repaired' AS maintenance;

\if :since_010
-- w1's claims of 0.1.0 are flushed.  They have no number (the column
-- says 0, "never claimed since 0.6.0"; numbers start at 1), so their
-- outcomes name none: naming 0 is invalid, and the claim stays held
SELECT i.correlation_key AS key, f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(
		jsonb_build_object('id', pg_temp.id('v1-k1-a'), 'worker', 'w1', 'kind', 'done',
						   'claim', 0))) f
  JOIN gen_durable.instances i ON i.id = f.id ORDER BY 1;
SELECT i.correlation_key AS key, f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(
		jsonb_build_object('id', pg_temp.id('v1-claimed'), 'worker', 'w1', 'kind', 'done',
						   'result', '{"by": "w1"}'::jsonb),
		jsonb_build_object('id', pg_temp.id('v1-k1-a'), 'worker', 'w1', 'kind', 'done'))) f
  JOIN gen_durable.instances i ON i.id = f.id ORDER BY 1;
-- everything due in v1 is picked (v1-k1-b too, now that its key is free;
-- v1-rated has its limit since 0.4.0), each job with what 0.1.0 delivered
SELECT correlation_key AS key, step, attempt, steps, claim, fsm_version,
	   (SELECT string_agg(e->>'name', ', ' ORDER BY (e->>'id')::bigint) FROM jsonb_array_elements(inbox) e) AS inbox,
	   (SELECT string_agg(e->>'name', ', ' ORDER BY (e->>'id')::bigint) FROM jsonb_array_elements(awaited) e) AS awaited
  FROM gen_durable.pick('v1', 'w6', batch => 50) ORDER BY 1;
SELECT i.correlation_key AS key, f.applied, f.detail
  FROM gen_durable.flush((
	SELECT jsonb_agg(CASE i.correlation_key
			WHEN 'v1-signalled' THEN jsonb_build_object('id', i.id, 'worker', 'w6', 'kind', 'next',
														'step', 'ship', 'claim', i.claim)
			WHEN 'v1-budget' THEN jsonb_build_object('id', i.id, 'worker', 'w6', 'kind', 'next',
													 'step', 'two', 'claim', i.claim)
			ELSE jsonb_build_object('id', i.id, 'worker', 'w6', 'kind', 'done', 'claim', i.claim,
									'result', jsonb_build_object('key', i.correlation_key))
			END)
	  FROM gen_durable.instances i WHERE i.queue = 'v1' AND i.locked_by = 'w6')) f
  JOIN gen_durable.instances i ON i.id = f.id ORDER BY 1;
\endif

\if :since_020
-- 0.2.0's: the reaped claim runs again (attempt 1), with the rest of v2
SELECT correlation_key AS key, attempt, claim FROM gen_durable.pick('v2', 'w6') ORDER BY 1;
SELECT count(*) FILTER (WHERE f.applied = 'ok') AS done
  FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w6',
																'kind', 'done', 'claim', claim))
							FROM gen_durable.instances WHERE queue = 'v2' AND locked_by = 'w6')) f;
\endif

\if :since_030
-- 0.3.0's families: w3's old claim of v3-c2 finishes it, so v3-parent's
-- round 2 counts one child to go; v3-fe-c0 fails, which wakes v3-fe at
-- once and cancels v3-fe-c1 (D13), whose late outcome is then stale
SELECT correlation_key AS key, step, claim FROM gen_durable.pick('v3', 'w6', batch => 50)
 ORDER BY 1;
SELECT i.correlation_key AS key, f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(
		jsonb_build_object('id', pg_temp.id('v3-c2'), 'worker', 'w3', 'kind', 'done',
						   'result', '{"i": 2}'::jsonb),
		jsonb_build_object('id', pg_temp.id('v3-fe-c0'), 'worker', 'w6', 'kind', 'fail',
						   'error', '{"message": "c0 failed"}'::jsonb),
		jsonb_build_object('id', pg_temp.id('v3-failme'), 'worker', 'w6', 'kind', 'done'),
		jsonb_build_object('id', pg_temp.id('v3-many'), 'worker', 'w6', 'kind', 'done'))) f
  JOIN gen_durable.instances i ON i.id = f.id ORDER BY 1;
SELECT i.correlation_key AS key, f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(
		jsonb_build_object('id', pg_temp.id('v3-fe-c1'), 'worker', 'w6', 'kind', 'done'))) f
  JOIN gen_durable.instances i ON i.id = f.id;
SELECT p.correlation_key AS parent, p.status, p.spawn_round, p.children_pending,
	   p.children_total,
	   (SELECT string_agg(c.correlation_key || ':' || c.status, ', ' ORDER BY c.id)
		  FROM gen_durable.instances c
		 WHERE c.parent_id = p.id AND c.parent_round = p.spawn_round) AS children
  FROM gen_durable.instances p WHERE p.queue = 'v3' AND p.fsm = 'parent' ORDER BY 1;
\endif

\if :since_040
-- 0.4.0's: w4's gated claim finishes and returns its slot, so the third
-- instance of the key is admitted; the second rated one takes the last
-- two tokens, the third waits (4 per hour)
SELECT i.correlation_key AS key, f.applied
  FROM gen_durable.flush(jsonb_build_array(
		jsonb_build_object('id', pg_temp.id('v4-gated-a'), 'worker', 'w4', 'kind', 'done'),
		jsonb_build_object('id', pg_temp.id('v4-rated-a'), 'worker', 'w4', 'kind', 'done'))) f
  JOIN gen_durable.instances i ON i.id = f.id ORDER BY 1;
SELECT correlation_key AS key, claim FROM gen_durable.pick('v4', 'w6', batch => 50) ORDER BY 1;
SELECT kind, key, shard, capacity, floor(available) AS available FROM gen_durable.buckets
 WHERE key LIKE 'v4%' ORDER BY 1, 2, 3;
\endif

\if :since_050
-- 0.5.0's roles do their part with the API of 0.6.0
SELECT pg_temp.id('v5-claimed') AS v5_claimed \gset
SET ROLE regress_up_producer;
SELECT gen_durable.insert('job', queue => 'v5', correlation_key => 'v5-at-0.6.0', history => true)
	   IS NOT NULL AS inserted;
SELECT gen_durable.cron_next('0 0 1 1 *', '2030-06-01 00:00Z') = '2031-01-01 00:00Z' AS cron_next;
RESET ROLE;
SET ROLE regress_up_worker;
SELECT f.applied, count(*)
  FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'rw',
															   'kind', 'done', 'claim', claim))
							FROM gen_durable.pick('v5', 'rw', batch => 50))) f GROUP BY 1;
SELECT f.applied, count(*)
  FROM gen_durable.flush(format('[{"id": %s, "worker": "w5", "kind": "done"}]',
								:v5_claimed)::jsonb) f GROUP BY 1;
RESET ROLE;
SET ROLE regress_up_admin;
SELECT gen_durable.set_queue_history('v5', true) AS had_history;
RESET ROLE;
\endif

------------------------------------------------------------------------
-- 0.6.0's features
------------------------------------------------------------------------
-- claim numbers: v6-fenced is picked (claim 1) and continued (claim 2),
-- and stays claimed by w6 across the update; an outcome for claim 1 is
-- stale
SELECT gen_durable.insert('fenced', queue => 'v6', correlation_key => 'v6-fenced')
	   IS NOT NULL AS inserted;
SELECT step, claim FROM gen_durable.pick('v6', 'w6', lease => '10 minutes');
SELECT applied, job->>'step' AS step, job->>'claim' AS claim
  FROM gen_durable.flush(format('[{"id": %s, "worker": "w6", "kind": "next", "step": "b", "claim": 1, "continue": true, "lease": 600}]',
								pg_temp.id('v6-fenced'))::jsonb);
SELECT applied, detail
  FROM gen_durable.flush(format('[{"id": %s, "worker": "w6", "kind": "done", "claim": 1}]',
								pg_temp.id('v6-fenced'))::jsonb);

-- step history: queue v6h records it (its setting), v6-own by its own
-- flag too, v6-none not (its flag says no); each retries, then parks
-- across the update
SELECT gen_durable.set_queue_history('v6h', true) AS had_history;
SELECT gen_durable.insert('hist', queue => 'v6h', correlation_key => 'v6-hist') IS NOT NULL AS inserted,
	   gen_durable.insert('hist', queue => 'v6h', correlation_key => 'v6-own', history => true)
	   IS NOT NULL AS inserted_own,
	   gen_durable.insert('hist', queue => 'v6h', correlation_key => 'v6-none', history => false)
	   IS NOT NULL AS inserted_none;
SELECT count(*) AS picked FROM gen_durable.pick('v6h', 'w6');
SELECT f.applied, count(*) FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w6', 'kind', 'retry', 'delay', 0,
										'error', jsonb_build_object('message', 'flaky'),
										'claim', claim))
	  FROM gen_durable.instances WHERE queue = 'v6h' AND locked_by = 'w6')) f GROUP BY 1;
SELECT count(*) AS picked FROM gen_durable.pick('v6h', 'w6');
SELECT f.applied, count(*) FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w6', 'kind', 'await',
										'names', jsonb_build_array('go'), 'step', 'after',
										'claim', claim))
	  FROM gen_durable.instances WHERE queue = 'v6h' AND locked_by = 'w6')) f GROUP BY 1;
SELECT i.correlation_key AS key, t.steps, t.step, t.kind, t.attempt, t.worker, t.error
  FROM gen_durable.instances i, gen_durable.timeline(i.id) WITH ORDINALITY t
 WHERE i.queue = 'v6h' ORDER BY 1, t.ordinality;

-- queue settings: v6p is paused, so its instance is not handed out
SELECT gen_durable.pause_queue('v6p') AS paused;
SELECT gen_durable.insert('job', queue => 'v6p', correlation_key => 'v6-paused') IS NOT NULL AS inserted;
SELECT count(*) AS picked FROM gen_durable.pick('v6p', 'w6');
SELECT queue, due, paused, history FROM gen_durable.queues WHERE queue LIKE 'v6%' ORDER BY 1;
SELECT queue, paused_at IS NOT NULL AS paused, history FROM gen_durable.queue_settings ORDER BY 1;

-- schedules: one far off, one whose tick fell due (its next tick is set
-- back as if the server had been down) and fired
SELECT gen_durable.schedule('v6-yearly', '0 3 1 1 *', 'report', queue => 'v6s',
							time_zone => 'Europe/Paris')
	   = gen_durable.cron_next('0 3 1 1 *', now(), 'Europe/Paris') AS next_tick;
SELECT gen_durable.schedule('v6-due', '0 0 1 1 *', 'tick', '{"from": "schedule"}',
							queue => 'v6s', missed => 'catch_up') > now() AS next_tick;
UPDATE gen_durable.schedules SET next_at = next_at - interval '1 year' WHERE name = 'v6-due';
SELECT gen_durable.run_maintenance()->'schedules_fired' AS fired;
SELECT name, cron, time_zone, fsm, queue, missed, next_at > now() AS next_later,
	   last_id IS NOT NULL AS has_last, last_status
  FROM gen_durable.schedule_status ORDER BY 1;

-- debounce: a runnable occupant of the key takes the new state
SELECT gen_durable.insert('job', '{"n": 1}', queue => 'v6d', correlation_key => 'v6-debounced',
						  delay => '1 hour') AS debounced \gset
SELECT gen_durable.insert('job', '{"n": 2}', queue => 'v6d', correlation_key => 'v6-debounced',
						  on_conflict => 'replace') = :debounced AS same_instance;
SELECT state, eligible_at <= now() AS due FROM gen_durable.instances WHERE id = :debounced;

-- a fan-out made by flush: v6-parent's two children, one done, one to go
SELECT gen_durable.insert('parent', queue => 'v6f', correlation_key => 'v6-parent')
	   IS NOT NULL AS inserted;
SELECT applied FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w6', 'kind', 'spawn', 'claim', claim,
										'step', 'joined', 'children', '[
		{"fsm": "child", "queue": "v6f", "correlation_key": "v6-c0"},
		{"fsm": "child", "queue": "v6f", "correlation_key": "v6-c1"}]'::jsonb))
	  FROM gen_durable.pick('v6f', 'w6')));
SELECT correlation_key AS key, parent_id = pg_temp.id('v6-parent') AS has_parent
  FROM gen_durable.pick('v6f', 'w6') ORDER BY 1;
SELECT applied FROM gen_durable.flush(format('[{"id": %s, "worker": "w6", "kind": "done", "result": {"c": 0}}]',
											 pg_temp.id('v6-c0'))::jsonb);
SELECT gen_durable.release('w6', pg_temp.ids('{v6-c1}')) AS released;

SELECT * FROM pg_temp.show('v6');
SELECT * FROM pg_temp.show('v6f');
