-- lifecycle.sql: heartbeat, release, cancel and run_maintenance
-- (reaper, await timeouts, GC)
-- (design §3, §4; contract D1, D2, D11, D14, §2 T9/T14/T16/T18, §9, §10.1, I-29)
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

\i test/regress_helpers.sql

-- the columns these functions write (no timestamps)
CREATE FUNCTION pg_temp.st(bigint) RETURNS TABLE (
	step text, status gen_durable.status, attempt int, locked_by text, has_lease bool,
	awaits text[], has_deadline bool, error jsonb, result jsonb)
LANGUAGE sql AS $$
	SELECT step, status, attempt, locked_by, lease_expires_at IS NOT NULL, awaits,
		   await_deadline IS NOT NULL, error, result
	  FROM gen_durable.instances WHERE id = $1
$$;

------------------------------------------------------------------------
-- heartbeat: extends the leases of the claims the worker still owns and
-- returns their ids, ascending (§9.1)
------------------------------------------------------------------------
SELECT gen_durable.insert('h', queue => 'hq') AS h1 \gset
SELECT gen_durable.insert('h', queue => 'hq') AS h2 \gset
SELECT gen_durable.insert('h', queue => 'hq') AS h3 \gset
SELECT gen_durable.insert('h', queue => 'hq_other') AS h_other \gset
SELECT gen_durable.insert('h', queue => 'hq_idle') AS h_idle \gset
SELECT count(*) FROM gen_durable.pick('hq', 'hw', lease => '2 s');
SELECT count(*) FROM gen_durable.pick('hq_other', 'someone_else', lease => '2 s');
SELECT gen_durable.heartbeat('hw', ARRAY[:h3, 999999999, :h_other, :h1, :h_idle, :h2], '10 min')
	   = ARRAY[:h1, :h2, :h3]::bigint[] AS owned_sorted;
SELECT id IN (:h1, :h2, :h3) AS hw_row,
	   lease_expires_at > now() + interval '9 min' AS extended
  FROM gen_durable.instances WHERE id IN (:h1, :h2, :h3, :h_other) ORDER BY id;
-- the default lease is 30 s; a subset of the ids extends only those
SELECT gen_durable.heartbeat('hw', ARRAY[:h2]) = ARRAY[:h2]::bigint[] AS only_h2;
SELECT id = :h2 AS is_h2, lease_expires_at < now() + interval '35 s' AS lease_30_s
  FROM gen_durable.instances WHERE id IN (:h1, :h2) ORDER BY id;
-- nothing owned: an empty array
SELECT gen_durable.heartbeat('nobody', ARRAY[:h1, :h2]);
SELECT gen_durable.heartbeat('hw', '{}');
-- after an outcome the id is gone from the answer
SELECT applied FROM pg_temp.out1(:h1, 'hw', 'next', '{"step": "s2"}');
SELECT gen_durable.heartbeat('hw', ARRAY[:h1, :h2, :h3]) = ARRAY[:h2, :h3]::bigint[] AS h1_gone;
-- errors
SELECT gen_durable.heartbeat(NULL, ARRAY[1]);
SELECT gen_durable.heartbeat('', ARRAY[1]);
SELECT gen_durable.heartbeat('hw', NULL);
SELECT gen_durable.heartbeat('hw', ARRAY[1, NULL]);
SELECT gen_durable.heartbeat('hw', ARRAY[1], '0 s');
SELECT gen_durable.heartbeat('hw', ARRAY[1], '-1 min');
SELECT gen_durable.heartbeat('hw', ARRAY[1], NULL);
SELECT gen_durable.heartbeat('hw', ARRAY[[1, 2], [3, 4]]);
SELECT gen_durable.heartbeat('hw', (SELECT array_agg(g::bigint) FROM generate_series(1, 10001) g));
-- the hints that lead to a valid call (shown with the default verbosity)
\set VERBOSITY default
SELECT gen_durable.heartbeat('hw', ARRAY[1, NULL]);
SELECT gen_durable.heartbeat('hw', ARRAY[[1, 2], [3, 4]]);
SELECT * FROM gen_durable.flush(NULL);
SELECT * FROM gen_durable.insert_many(NULL);
\set VERBOSITY terse

------------------------------------------------------------------------
-- release (T16): back to runnable without counting an attempt, keeping
-- the place in the queue; only the worker's own claims
------------------------------------------------------------------------
SELECT eligible_at AS h2_eligible FROM gen_durable.instances WHERE id = :h2 \gset
SELECT gen_durable.release('hw', ARRAY[:h2, :h_other, :h_idle, 999999999]);
SELECT * FROM pg_temp.st(:h2);
SELECT eligible_at = :'h2_eligible' AS eligible_kept FROM gen_durable.instances WHERE id = :h2;
SELECT status, locked_by FROM gen_durable.instances WHERE id = :h_other;
-- the released row is claimable again with the same attempt
SELECT id = :h2 AS is_h2, attempt FROM gen_durable.pick('hq', 'hw');
-- NULL ids: every claim of the worker
SELECT gen_durable.release('hw', NULL);
SELECT gen_durable.release('hw');
SELECT id, status FROM gen_durable.instances WHERE locked_by = 'hw';
SELECT count(*) AS runnable FROM gen_durable.instances WHERE queue = 'hq' AND status = 'runnable';
-- an empty list releases nothing; the other worker's claim was never touched
SELECT gen_durable.release('someone_else', '{}');
SELECT gen_durable.release('someone_else');
-- errors
SELECT gen_durable.release(NULL);
SELECT gen_durable.release('');
SELECT gen_durable.release('hw', ARRAY[NULL]::bigint[]);
SELECT gen_durable.release('hw', (SELECT array_agg(g::bigint) FROM generate_series(1, 10001) g));

------------------------------------------------------------------------
-- cancel (D14): each live status -> cancelled, returns 1; claim, awaits,
-- deadline cleared; inbox purged; the key freed
------------------------------------------------------------------------
SELECT gen_durable.insert('c', queue => 'cq_run', correlation_key => 'cancel-me') AS c_run \gset
SELECT gen_durable.insert('c', queue => 'cq_exec') AS c_exec \gset
SELECT gen_durable.insert('c', queue => 'cq_wait') AS c_wait \gset
SELECT gen_durable.insert('c', queue => 'cq_kids') AS c_kids \gset
SELECT count(*) FROM gen_durable.pick('cq_exec', 'cw');
SELECT count(*) FROM gen_durable.pick('cq_wait', 'cw');
SELECT applied FROM pg_temp.out1(:c_wait, 'cw', 'await', '{"names": ["x"], "step": "w", "timeout": 600}');
UPDATE gen_durable.instances SET status = 'awaiting_children', children_pending = 1,
	   children_total = 1 WHERE id = :c_kids;
SELECT gen_durable.signal(:c_run, 'a'), gen_durable.signal(:c_exec, 'a'),
	   gen_durable.signal(:c_wait, 'y'), gen_durable.signal(:c_kids, 'a');
SELECT gen_durable.cancel(:c_run), gen_durable.cancel(:c_exec, 'operator said so'),
	   gen_durable.cancel(:c_wait, reason => 'too slow'), gen_durable.cancel(:c_kids);
SELECT s.* FROM unnest(ARRAY[:c_run, :c_exec, :c_wait, :c_kids]) WITH ORDINALITY AS u(id, n),
	   pg_temp.st(u.id) s ORDER BY u.n;
SELECT count(*) AS inboxes FROM gen_durable.signals
 WHERE target_id IN (:c_run, :c_exec, :c_wait, :c_kids);
SELECT gen_durable.insert('c', correlation_key => 'cancel-me') IS NOT NULL AS key_freed;
-- the cancelled worker: its outcome is stale, its heartbeat drops the id
SELECT gen_durable.heartbeat('cw', ARRAY[:c_exec]);
SELECT applied, detail FROM pg_temp.out1(:c_exec, 'cw', 'done');
SELECT status, result FROM gen_durable.instances WHERE id = :c_exec;
-- terminal or missing: 0, nothing changes
SELECT gen_durable.insert('c', queue => 'cq_done') AS c_done \gset
SELECT gen_durable.insert('c', queue => 'cq_fail') AS c_fail \gset
SELECT count(*) FROM gen_durable.pick('cq_done', 'cw');
SELECT count(*) FROM gen_durable.pick('cq_fail', 'cw');
SELECT applied FROM pg_temp.out1(:c_done, 'cw', 'done', '{"result": {"r": 1}}');
SELECT applied FROM pg_temp.out1(:c_fail, 'cw', 'fail', '{"error": {"e": 1}}');
SELECT gen_durable.cancel(:c_done), gen_durable.cancel(:c_fail), gen_durable.cancel(:c_run, 'again'),
	   gen_durable.cancel(999999999);
SELECT s.* FROM unnest(ARRAY[:c_done, :c_fail, :c_run]) WITH ORDINALITY AS u(id, n),
	   pg_temp.st(u.id) s ORDER BY u.n;
SELECT gen_durable.cancel(NULL);

------------------------------------------------------------------------
-- every terminal path counts into the parent's join (D1, §6.6): the parent
-- wakes when its last child ends (set up directly: no spawn in 0.1.0)
------------------------------------------------------------------------
SELECT gen_durable.insert('parent', queue => 'jq') AS jp \gset
SELECT gen_durable.insert('child', queue => 'jq_kids') AS jc1 \gset
SELECT gen_durable.insert('child', queue => 'jq_kids') AS jc2 \gset
SELECT gen_durable.insert('child', queue => 'jq_kids', max_attempts => 1) AS jc3 \gset
UPDATE gen_durable.instances SET parent_id = :jp, child_index = id - :jc1, parent_round = 1
 WHERE id IN (:jc1, :jc2, :jc3);
UPDATE gen_durable.instances SET status = 'awaiting_children', children_pending = 3,
	   children_total = 3, spawn_round = 1 WHERE id = :jp;
-- a flushed done
SELECT count(*) FROM gen_durable.pick('jq_kids', 'jw');
SELECT applied FROM pg_temp.out1(:jc1, 'jw', 'done', '{"result": {"c": 1}}');
SELECT status, children_pending FROM gen_durable.instances WHERE id = :jp;
-- a cancel
SELECT gen_durable.cancel(:jc2);
SELECT status, children_pending FROM gen_durable.instances WHERE id = :jp;
-- the reaper giving up (max_attempts 1): the last child wakes the parent
UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 s' WHERE id = :jc3;
SELECT gen_durable.run_maintenance();
SELECT status, children_pending FROM gen_durable.instances WHERE id = :jp;
SELECT jsonb_path_query_array(children, '$[*].status') AS children
  FROM gen_durable.pick('jq', 'jw');

------------------------------------------------------------------------
-- reaper (T14, D2): an expired lease returns to runnable with attempt + 1,
-- keeping eligible_at; a live lease is untouched
------------------------------------------------------------------------
SELECT gen_durable.insert('r', queue => 'rq', max_attempts => 3) AS r1 \gset
SELECT gen_durable.insert('r', queue => 'rq') AS r_live \gset
SELECT count(*) FROM gen_durable.pick('rq', 'rw');
SELECT eligible_at AS r1_eligible FROM gen_durable.instances WHERE id = :r1 \gset
UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 min' WHERE id = :r1;
SELECT gen_durable.run_maintenance();
SELECT * FROM pg_temp.st(:r1);
SELECT eligible_at = :'r1_eligible' AS eligible_kept, presented IS NULL AS nothing_presented
  FROM gen_durable.instances WHERE id = :r1;
SELECT status, locked_by, attempt FROM gen_durable.instances WHERE id = :r_live;
-- the old worker lost the claim
SELECT gen_durable.heartbeat('rw', ARRAY[:r1, :r_live]) = ARRAY[:r_live]::bigint[] AS only_live;
SELECT applied, detail FROM pg_temp.out1(:r1, 'rw', 'done');
-- claimed again and expired again: attempt 2
SELECT attempt FROM gen_durable.pick('rq', 'rw2');
UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 min' WHERE id = :r1;
SELECT gen_durable.run_maintenance() ->> 'reaped' AS reaped;
SELECT status, attempt FROM gen_durable.instances WHERE id = :r1;
-- the third expiry reaches max_attempts (3): failed with lease_expired, the
-- claim cleared and the inbox purged through the terminal routine (D1, D2)
SELECT attempt FROM gen_durable.pick('rq', 'rw3');
SELECT gen_durable.signal(:r1, 'late');
UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 min' WHERE id = :r1;
SELECT gen_durable.run_maintenance();
SELECT * FROM pg_temp.st(:r1);
SELECT count(*) AS inbox FROM gen_durable.signals WHERE target_id = :r1;
SELECT count(*) FROM gen_durable.pick('rq', 'rw4');
-- an awaited-then-woken step that keeps crashing fails like any other, and
-- ends with its await bookkeeping cleared like every terminal status
SELECT gen_durable.insert('r', queue => 'rq2', max_attempts => 1) AS r2 \gset
SELECT count(*) FROM gen_durable.pick('rq2', 'rw');
SELECT applied FROM pg_temp.out1(:r2, 'rw', 'await', '{"names": ["go"], "step": "woken"}');
SELECT gen_durable.signal(:r2, 'go');
SELECT count(*) FROM gen_durable.pick('rq2', 'rw');
UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 min' WHERE id = :r2;
SELECT gen_durable.run_maintenance() ->> 'lease_failed' AS lease_failed;
SELECT * FROM pg_temp.st(:r2);

------------------------------------------------------------------------
-- await timeouts (T9, D11): a passed deadline wakes the instance,
-- clears the deadline, keeps awaits and attempt; the next pick says timed_out
------------------------------------------------------------------------
SELECT gen_durable.insert('t', queue => 'tq') AS t1 \gset
SELECT gen_durable.insert('t', queue => 'tq') AS t2 \gset
SELECT count(*) FROM gen_durable.pick('tq', 'tw');
SELECT applied FROM pg_temp.out1(:t1, 'tw', 'await', '{"names": ["x"], "step": "after", "timeout": 5}');
SELECT applied FROM pg_temp.out1(:t2, 'tw', 'await', '{"names": ["x"], "step": "after", "timeout": 3600}');
UPDATE gen_durable.instances SET await_deadline = now() - interval '1 s' WHERE id = :t1;
SELECT gen_durable.run_maintenance();
SELECT * FROM pg_temp.st(:t1);
SELECT * FROM pg_temp.st(:t2);
SELECT step, timed_out, awaited FROM gen_durable.pick('tq', 'tw');
-- a progressing outcome clears timed_out
SELECT applied FROM pg_temp.out1(:t1, 'tw', 'next', '{"step": "s3"}');
SELECT step, timed_out FROM gen_durable.pick('tq', 'tw');
-- a signal before the deadline wins: no timeout fires later
SELECT gen_durable.signal(:t2, 'x');
SELECT gen_durable.run_maintenance() ->> 'timeouts' AS timeouts;
SELECT step, timed_out FROM gen_durable.pick('tq', 'tw');

------------------------------------------------------------------------
-- GC (T18, §10.1): terminal rows older than gen_durable.retention (1 day
-- by default), oldest first, sparing terminal children of live parents;
-- signals go with their instance
------------------------------------------------------------------------
-- the terminal rows of the tests above are young: kept
UPDATE gen_durable.instances SET updated_at = now() WHERE status IN ('done', 'failed', 'cancelled');
SELECT count(*) AS terminal FROM gen_durable.instances WHERE status IN ('done', 'failed', 'cancelled') \gset
SELECT gen_durable.run_maintenance() ->> 'gc_deleted' AS young_rows_kept;

SELECT gen_durable.insert('g', queue => 'gq', state => '{"age": 5}') AS g5 \gset
SELECT gen_durable.insert('g', queue => 'gq', state => '{"age": 3}') AS g3 \gset
SELECT gen_durable.insert('g', queue => 'gq', state => '{"age": 4}') AS g4 \gset
SELECT gen_durable.insert('g', queue => 'gq', state => '{"age": 2}') AS g_live \gset
SELECT gen_durable.insert('g', queue => 'gq_p', state => '{"parent": "live"}') AS gp_live \gset
SELECT gen_durable.insert('g', queue => 'gq_p', state => '{"parent": "done"}') AS gp_done \gset
SELECT gen_durable.insert('g', queue => 'gq_k', state => '{"child_of": "live"}') AS gk_live \gset
SELECT gen_durable.insert('g', queue => 'gq_k', state => '{"child_of": "done"}') AS gk_done \gset
SELECT gen_durable.insert('g', queue => 'gq_k2', state => '{"child_of": "done", "live": true}') AS gk_orphan \gset
SELECT count(*) FROM gen_durable.pick('gq', 'gw');
SELECT count(*) FROM gen_durable.pick('gq_k', 'gw');
SELECT count(*) FROM gen_durable.flush(jsonb_build_array(
	jsonb_build_object('id', :g5, 'worker', 'gw', 'kind', 'done'),
	jsonb_build_object('id', :g3, 'worker', 'gw', 'kind', 'fail'),
	jsonb_build_object('id', :g4, 'worker', 'gw', 'kind', 'done'),
	jsonb_build_object('id', :gk_live, 'worker', 'gw', 'kind', 'done'),
	jsonb_build_object('id', :gk_done, 'worker', 'gw', 'kind', 'done')));
SELECT gen_durable.release('gw');
SELECT gen_durable.cancel(:gp_done);
UPDATE gen_durable.instances SET parent_id = :gp_live, child_index = 0 WHERE id = :gk_live;
UPDATE gen_durable.instances SET parent_id = :gp_done, child_index = 0 WHERE id IN (:gk_done, :gk_orphan);
UPDATE gen_durable.instances SET updated_at = now() - interval '5 days' WHERE id = :g5;
UPDATE gen_durable.instances SET updated_at = now() - interval '3 days' WHERE id = :g3;
UPDATE gen_durable.instances SET updated_at = now() - interval '4 days' WHERE id = :g4;
UPDATE gen_durable.instances SET updated_at = now() - interval '2 days'
 WHERE id IN (:g_live, :gp_live, :gp_done, :gk_live, :gk_done, :gk_orphan);
-- signals of terminal rows (an orphan inbox row can exist, §7)
INSERT INTO gen_durable.signals (target_id, name) VALUES (:g5, 'orphan'), (:g4, 'orphan');

-- one sweep at a time via gc_batch = 2 (PGC_SIGHUP): the two oldest go first
ALTER SYSTEM SET gen_durable.gc_batch = 2;
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT current_setting('gen_durable.gc_batch') AS gc_batch;
SELECT gen_durable.run_maintenance() ->> 'gc_deleted' AS deleted;
SELECT state FROM gen_durable.instances WHERE queue = 'gq' ORDER BY id;
SELECT count(*) AS orphan_signals FROM gen_durable.signals WHERE name = 'orphan';
SELECT gen_durable.run_maintenance() ->> 'gc_deleted' AS deleted;
SELECT gen_durable.run_maintenance() ->> 'gc_deleted' AS deleted;
SELECT gen_durable.run_maintenance() ->> 'gc_deleted' AS deleted;
-- what is left: live rows, the spared child of the live parent, and the
-- live child of the deleted parent (it keeps its parent_id: since 0.7.0
-- parent_id is not a foreign key that GC's delete would set to NULL)
SELECT state, status, parent_id IS NOT NULL AS has_parent
  FROM gen_durable.instances WHERE queue LIKE 'g%' ORDER BY id;
SELECT count(*) AS orphan_signals FROM gen_durable.signals WHERE name = 'orphan';
-- rows younger than the retention are all still there
SELECT count(*) = :terminal AS young_rows_kept
  FROM gen_durable.instances WHERE status IN ('done', 'failed', 'cancelled') AND queue NOT LIKE 'g%';

-- retention = 0: every terminal row goes at once, except terminal children
-- of live parents (the children of the executing join parent above and the
-- child of the live parent here); they go once their parent is terminal
ALTER SYSTEM SET gen_durable.retention = 0;
ALTER SYSTEM SET gen_durable.gc_batch = 10000;
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT current_setting('gen_durable.retention') AS retention,
	   current_setting('gen_durable.gc_batch') AS gc_batch;
SELECT (gen_durable.run_maintenance() ->> 'gc_deleted')::int = :terminal - 3 AS all_but_spared;
SELECT i.fsm, i.status, p.fsm AS parent, p.status AS parent_status
  FROM gen_durable.instances i JOIN gen_durable.instances p ON p.id = i.parent_id
 WHERE i.status IN ('done', 'failed', 'cancelled') ORDER BY i.id;
SELECT count(*) AS live_left FROM gen_durable.instances
 WHERE status NOT IN ('done', 'failed', 'cancelled') \gset
SELECT gen_durable.cancel(:gp_live), gen_durable.cancel(:jp);
SELECT gen_durable.run_maintenance() ->> 'gc_deleted' AS deleted;
SELECT count(*) AS terminal_left FROM gen_durable.instances
 WHERE status IN ('done', 'failed', 'cancelled');
SELECT count(*) = :live_left - 2 AS live_rows_untouched FROM gen_durable.instances;

------------------------------------------------------------------------
-- run_maintenance refuses REPEATABLE READ (its sweeps need fresh snapshots)
------------------------------------------------------------------------
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT gen_durable.run_maintenance();
ROLLBACK;

-- back to the defaults
ALTER SYSTEM RESET gen_durable.retention;
ALTER SYSTEM RESET gen_durable.gc_batch;
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT current_setting('gen_durable.retention') AS retention,
	   current_setting('gen_durable.gc_batch') AS gc_batch;

DROP FUNCTION pg_temp.st(bigint);
DROP EXTENSION gen_durable;
