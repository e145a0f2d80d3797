-- at-0.7.0.sql: at 0.7.0.  Everything the releases before left is run to
-- its end with the API of 0.7.0: the claims still held are flushed, what
-- waits is woken, picked and finished; then what 0.7.0 changed: a child
-- keeps its parent's id after GC deleted the parent (no foreign key any
-- more).  Nothing may be left stuck but the claim it leaves in flight for
-- 0.8.0 (at the end).

-- the sweeps: nothing expired, nothing due
SELECT gen_durable.run_maintenance() - 'gate_shards_repaired' AS maintenance;

\if :since_010
-- 0.1.0's last two: v1-signalled (its signals of 0.1.0 and 0.5.0 still in
-- the inbox) finishes, v1-budget's next step is beyond its budget of 1
SELECT correlation_key AS key, step, steps, claim,
	   (SELECT string_agg(e->>'name', ', ' ORDER BY (e->>'id')::bigint)
		  FROM jsonb_array_elements(inbox) e) AS inbox
  FROM gen_durable.pick('v1', 'w7', batch => 50) ORDER BY 1;
SELECT i.correlation_key AS key, f.applied, f.detail
  FROM gen_durable.flush((
	SELECT jsonb_agg(CASE i.correlation_key
			WHEN 'v1-budget' THEN jsonb_build_object('id', i.id, 'worker', 'w7', 'kind', 'next',
													 'step', 'three', 'claim', i.claim)
			ELSE jsonb_build_object('id', i.id, 'worker', 'w7', 'kind', 'done', 'claim', i.claim)
			END)
	  FROM gen_durable.instances i WHERE i.queue = 'v1' AND i.locked_by = 'w7')) f
  JOIN gen_durable.instances i ON i.id = f.id ORDER BY 1;
-- a settled instance's key is free again, unless its scope keeps it
SELECT gen_durable.insert('job', queue => 'v1x', correlation_key => 'v1-done') IS NULL AS done_kept;
SELECT gen_durable.insert('job', queue => 'v1x', correlation_key => 'v1-plain') AS v1_plain_again \gset
SELECT gen_durable.cancel(:v1_plain_again) AS plain_free;
SELECT * FROM pg_temp.show('v1');
\endif

\if :since_020
SELECT * FROM pg_temp.show('v2');
\endif

\if :since_030
-- 0.3.0's families end: v3-c1 (claimed by w6 at 0.6.0) finishes, so
-- v3-parent wakes and its job lists the children of round 2 only (D12);
-- v3-fe's job lists its failed and cancelled children
SELECT i.correlation_key AS key, f.applied
  FROM gen_durable.flush(format('[{"id": %s, "worker": "w6", "kind": "done", "claim": 1, "result": {"i": 1}}]',
								pg_temp.id('v3-c1'))::jsonb) f
  JOIN gen_durable.instances i ON i.id = f.id;
SELECT correlation_key AS key, step, steps,
	   (SELECT string_agg(format('%s %s %s', e->>'index', e->>'status', e->'result'), ', '
						  ORDER BY (e->>'index')::int)
		  FROM jsonb_array_elements(children) e) AS children
  FROM gen_durable.pick('v3', 'w7', batch => 50) ORDER BY 1;
SELECT count(*) FILTER (WHERE f.applied = 'ok') AS done
  FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w7',
																'kind', 'done', 'claim', claim))
							FROM gen_durable.instances WHERE queue = 'v3' AND locked_by = 'w7')) f;
SELECT * FROM pg_temp.show('v3');
\endif

\if :since_040
-- 0.4.0's: the claims of w4 (0.4.0) and w6 (0.6.0) finish and return
-- their slots; v4-rated-c still waits for its tokens
SELECT i.correlation_key AS key, f.applied
  FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', locked_by, 'kind', 'done'))
	  FROM gen_durable.instances WHERE queue = 'v4' AND status = 'executing')) f
  JOIN gen_durable.instances i ON i.id = f.id ORDER BY 1;
SELECT count(*) AS picked FROM gen_durable.pick('v4', 'w7', batch => 50);
SELECT queue, due, executing, done, unknown_rate_limit FROM gen_durable.queues WHERE queue = 'v4';
SELECT kind, key, shard, capacity, floor(available) AS available FROM gen_durable.buckets
 WHERE key LIKE 'v4%' ORDER BY 1, 2, 3;
\endif

\if :since_050
-- 0.5.0's roles still do their part
SET ROLE regress_up_producer;
SELECT gen_durable.insert('job', queue => 'v5', correlation_key => 'v5-at-0.7.0')
	   IS NOT NULL AS inserted;
RESET ROLE;
SET ROLE regress_up_worker;
SELECT f.applied, count(*)
  FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'rw',
															   'kind', 'done', 'claim', claim))
							FROM gen_durable.pick('v5', 'rw', batch => 50))) f GROUP BY 1;
RESET ROLE;
SET ROLE regress_up_admin;
SELECT queue, done, history FROM gen_durable.queues WHERE queue = 'v5';
RESET ROLE;
SELECT * FROM pg_temp.show('v5');
\endif

\if :since_060
-- 0.6.0's: w6 still holds claim 2 of v6-fenced and finishes it
SELECT gen_durable.heartbeat('w6', pg_temp.ids('{v6-fenced}')) = pg_temp.ids('{v6-fenced}') AS held;
SELECT applied, detail
  FROM gen_durable.flush(format('[{"id": %s, "worker": "w6", "kind": "done", "claim": 2}]',
								pg_temp.id('v6-fenced'))::jsonb);
-- the parked ones of v6h are woken and finish: the history goes on where
-- it is recorded
SELECT gen_durable.signal(key, 'go') AS woken FROM unnest('{v6-hist,v6-own,v6-none}'::text[]) key;
SELECT f.applied, count(*) FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w7', 'kind', 'done', 'claim', claim))
	  FROM gen_durable.pick('v6h', 'w7', batch => 50))) f GROUP BY 1;
SELECT i.correlation_key AS key, t.steps, t.step, t.kind, t.attempt, t.worker, t.error
  FROM gen_durable.instances i, gen_durable.timeline(i.id) WITH ORDINALITY t
 WHERE i.queue = 'v6h' ORDER BY 1, t.ordinality;
-- the paused queue resumes; the schedule's instance, the debounced one
SELECT gen_durable.resume_queue('v6p') AS resumed;
SELECT split_part(correlation_key, '@', 1) AS key, fsm, state FROM gen_durable.pick('v6p', 'w7')
UNION ALL
SELECT split_part(correlation_key, '@', 1), fsm, state FROM gen_durable.pick('v6s', 'w7')
UNION ALL
SELECT split_part(correlation_key, '@', 1), fsm, state FROM gen_durable.pick('v6d', 'w7')
 ORDER BY 1;
SELECT f.applied, count(*) FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w7', 'kind', 'done', 'claim', claim))
	  FROM gen_durable.instances WHERE locked_by = 'w7')) f GROUP BY 1;
SELECT name, last_status FROM gen_durable.schedule_status ORDER BY 1;
-- the fan-out of 0.6.0 joins: v6-c1 finishes, v6-parent's job lists both
SELECT f.applied FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w7', 'kind', 'done', 'claim', claim))
	  FROM gen_durable.pick('v6f', 'w7'))) f;
SELECT correlation_key AS key, step,
	   (SELECT string_agg(format('%s %s', e->>'index', e->>'status'), ', '
						  ORDER BY (e->>'index')::int)
		  FROM jsonb_array_elements(children) e) AS children
  FROM gen_durable.pick('v6f', 'w7');
SELECT f.applied FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w7', 'kind', 'done', 'claim', claim))
	  FROM gen_durable.instances WHERE locked_by = 'w7')) f;

-- 0.7.0: GC deletes v6-parent and v6-c0 (made old here), and v6-c1 keeps
-- the id of its deleted parent (before 0.7.0 the foreign key set it to
-- NULL)
SELECT pg_temp.id('v6-parent') AS v6_parent \gset
UPDATE gen_durable.instances SET updated_at = now() - interval '2 days'
 WHERE correlation_key IN ('v6-parent', 'v6-c0');
SELECT gen_durable.run_maintenance()->'gc_deleted' AS gc_deleted;
SELECT correlation_key AS key, parent_id = :v6_parent AS keeps_parent_id,
	   EXISTS (SELECT 1 FROM gen_durable.instances p WHERE p.id = c.parent_id) AS parent_exists
  FROM gen_durable.instances c WHERE queue = 'v6f' ORDER BY 1;

\endif

-- nothing is stuck: every instance has ended but the one waiting for
-- its rate limit's tokens
SELECT queue, correlation_key AS key, status, step, attempt, steps, error
  FROM gen_durable.instances
 WHERE status NOT IN ('done', 'failed', 'cancelled') OR locked_by IS NOT NULL
 ORDER BY 1, 2;
SELECT queue, due, scheduled, executing, awaiting_signal, awaiting_children, done, failed,
	   cancelled, paused, history
  FROM gen_durable.queues ORDER BY 1;

-- 0.7.0 leaves to 0.8.0 a claim in flight across the update: v7-inflight,
-- claimed on its row by w7 (every claim was, before 0.8.0)
SELECT gen_durable.insert('job', queue => 'v7', correlation_key => 'v7-inflight') IS NOT NULL AS inserted;
SELECT correlation_key AS key, claim FROM gen_durable.pick('v7', 'w7');
