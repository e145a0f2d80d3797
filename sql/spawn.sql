-- spawn.sql: fan-out, join, first_error, cascade cancel, fail/retry, budget,
-- find (issue 4; contract D1, D3, D12-D14, D18, D19, §6.5, §6.6)
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

\i test/regress_helpers.sql

-- the fan-out columns of an instance (no ids, no timestamps)
CREATE FUNCTION pg_temp.st(bigint) RETURNS TABLE (
	status gen_durable.status, step text, state jsonb, steps bigint, attempt int,
	pending int, total int, round int, join_policy text, unclaimed bool)
LANGUAGE sql AS $$
	SELECT status, step, state, steps, attempt, children_pending, children_total,
		   spawn_round, join_policy, locked_by IS NULL AND lease_expires_at IS NULL
	  FROM gen_durable.instances WHERE id = $1
$$;

-- the children of a parent (all rounds), in round and child_index order
CREATE FUNCTION pg_temp.kids(bigint) RETURNS TABLE (
	round int, idx int, fsm text, status gen_durable.status, step text,
	result jsonb, error jsonb)
LANGUAGE sql AS $$
	SELECT parent_round, child_index, fsm, status, step, result, error
	  FROM gen_durable.instances WHERE parent_id = $1
	 ORDER BY parent_round, child_index
$$;

-- pick, showing the job without ids/lease; kids = the children list
-- without ids; ids_ok = every entry's id is the child of the parent's
-- current round at that index (and the list has one entry per such child)
CREATE FUNCTION pg_temp.pk(q text, w text, n int DEFAULT 10) RETURNS TABLE (
	fsm text, step text, state jsonb, attempt int, steps bigint, kids jsonb, ids_ok bool)
LANGUAGE sql AS $$
	SELECT j.fsm, j.step, j.state, j.attempt, j.steps,
		   (SELECT coalesce(jsonb_agg(e - 'id' ORDER BY o), '[]')
			  FROM jsonb_array_elements(j.children) WITH ORDINALITY x(e, o)),
		   (SELECT count(*) FROM jsonb_array_elements(j.children) e
			  JOIN gen_durable.instances p ON p.id = j.id
			  JOIN gen_durable.instances c
				ON c.parent_id = p.id AND c.parent_round = p.spawn_round
			   AND c.child_index = (e ->> 'index')::int AND c.id = (e ->> 'id')::bigint)
		   = (SELECT count(*) FROM gen_durable.instances p
				JOIN gen_durable.instances c
				  ON c.parent_id = p.id AND c.parent_round = p.spawn_round
			   WHERE p.id = j.id)
	  FROM gen_durable.pick(q, w, n) j
	 ORDER BY j.fsm, j.step
$$;

-- the id of a parent's child at an index (current round)
CREATE FUNCTION pg_temp.kid(p bigint, i int) RETURNS bigint
LANGUAGE sql AS $$
	SELECT c.id FROM gen_durable.instances c JOIN gen_durable.instances pp ON pp.id = c.parent_id
	 WHERE c.parent_id = p AND c.child_index = i AND c.parent_round = pp.spawn_round
$$;

------------------------------------------------------------------------
-- D12/§6.5/§6.6: three children finishing in order 2, 0, 1 (three flushes);
-- the parent waits for the last, wakes exactly once, and its next pick
-- carries the dense list 0, 1, 2 with the results
------------------------------------------------------------------------
SELECT gen_durable.insert('par', queue => 'q1', state => '{"k": 0}') AS p1 \gset
SELECT fsm, step FROM pg_temp.pk('q1', 'w1');
SELECT * FROM pg_temp.out1(:p1, 'w1', 'spawn',
	'{"step": "joined", "state": {"k": 1}, "children": [
	   {"fsm": "c", "queue": "q1c", "state": {"n": 0}},
	   {"fsm": "c", "queue": "q1c", "state": {"n": 1}},
	   {"fsm": "c", "queue": "q1c", "state": {"n": 2}}]}');
-- parked: awaiting_children, pending = total = 3, round 1, steps + 1, join all
SELECT * FROM pg_temp.st(:p1);
SELECT * FROM pg_temp.kids(:p1);
SELECT pg_temp.kid(:p1, 0) AS c10, pg_temp.kid(:p1, 1) AS c11, pg_temp.kid(:p1, 2) AS c12 \gset
SELECT fsm, step, state FROM pg_temp.pk('q1c', 'wc') ORDER BY state;
SELECT * FROM pg_temp.out1(:c12, 'wc', 'done', '{"result": {"r": 2}}');
SELECT status, pending, total FROM pg_temp.st(:p1);
SELECT * FROM pg_temp.out1(:c10, 'wc', 'done', '{"result": {"r": 0}}');
SELECT status, pending, total FROM pg_temp.st(:p1);
-- not runnable yet: nothing to pick
SELECT count(*) AS picked FROM pg_temp.pk('q1', 'w1');
SELECT * FROM pg_temp.out1(:c11, 'wc', 'done', '{"result": {"r": 1}}');
SELECT status, pending, total FROM pg_temp.st(:p1);
-- one pick returns the parent at "joined" with the dense ordered list
SELECT * FROM pg_temp.pk('q1', 'w1');
-- and only once
SELECT count(*) AS picked FROM pg_temp.pk('q1', 'w1');
-- a second round: the list carries only the new round's children
SELECT * FROM pg_temp.out1(:p1, 'w1', 'spawn',
	'{"step": "joined2", "children": [{"fsm": "c2", "queue": "q1c"}]}');
SELECT status, step, steps, pending, total, round FROM pg_temp.st(:p1);
SELECT * FROM pg_temp.kids(:p1);
SELECT fsm FROM pg_temp.pk('q1c', 'wc');
SELECT * FROM pg_temp.out1(pg_temp.kid(:p1, 0), 'wc', 'done', '{"result": "second"}');
SELECT * FROM pg_temp.pk('q1', 'w1');
SELECT * FROM pg_temp.out1(:p1, 'w1', 'done');
SELECT count(*) AS picked FROM pg_temp.pk('q1', 'w1');

------------------------------------------------------------------------
-- nested fan-out: a child spawns grandchildren; it completes only after
-- its own join, and the parent only after it
------------------------------------------------------------------------
SELECT gen_durable.insert('top', queue => 'q2') AS p2 \gset
SELECT fsm FROM pg_temp.pk('q2', 'w2');
SELECT * FROM pg_temp.out1(:p2, 'w2', 'spawn',
	'{"step": "top_joined", "children": [
	   {"fsm": "mid", "queue": "q2m"}, {"fsm": "leaf", "queue": "q2l"}]}');
SELECT pg_temp.kid(:p2, 0) AS m2, pg_temp.kid(:p2, 1) AS l2 \gset
SELECT fsm FROM pg_temp.pk('q2m', 'w2');
SELECT * FROM pg_temp.out1(:m2, 'w2', 'spawn',
	'{"step": "mid_joined", "children": [
	   {"fsm": "g", "queue": "q2g", "state": {"g": 0}},
	   {"fsm": "g", "queue": "q2g", "state": {"g": 1}}]}');
SELECT pg_temp.kid(:m2, 0) AS g20, pg_temp.kid(:m2, 1) AS g21 \gset
-- the leaf finishes: the top still waits for mid
SELECT fsm FROM pg_temp.pk('q2l', 'w2');
SELECT * FROM pg_temp.out1(:l2, 'w2', 'done', '{"result": "leaf"}');
SELECT status, pending, total FROM pg_temp.st(:p2);
SELECT status, pending, total FROM pg_temp.st(:m2);
SELECT fsm, state FROM pg_temp.pk('q2g', 'w2') ORDER BY state;
SELECT * FROM pg_temp.out1(:g20, 'w2', 'done', '{"result": "g0"}');
SELECT status, pending FROM pg_temp.st(:m2);
SELECT * FROM pg_temp.out1(:g21, 'w2', 'done', '{"result": "g1"}');
-- mid wakes (its own join), the top does not
SELECT status, pending FROM pg_temp.st(:m2);
SELECT status, pending FROM pg_temp.st(:p2);
SELECT count(*) AS picked FROM pg_temp.pk('q2', 'w2');
SELECT * FROM pg_temp.pk('q2m', 'w2');
SELECT * FROM pg_temp.out1(:m2, 'w2', 'done', '{"result": "mid"}');
SELECT status, pending FROM pg_temp.st(:p2);
SELECT * FROM pg_temp.pk('q2', 'w2');

------------------------------------------------------------------------
-- §6.5 zero landed: an empty children array makes the parent runnable at
-- the next step at once (a step change: steps + 1)
------------------------------------------------------------------------
SELECT gen_durable.insert('zero', queue => 'q3') AS p3 \gset
SELECT fsm FROM pg_temp.pk('q3', 'w3');
SELECT * FROM pg_temp.out1(:p3, 'w3', 'spawn',
	'{"step": "after", "state": {"z": 1}, "children": []}');
SELECT status, step, state, steps, pending, total, unclaimed FROM pg_temp.st(:p3);
SELECT * FROM pg_temp.pk('q3', 'w3');
-- all children duplicates (their correlation keys are held by live
-- instances): nothing lands, the parent is runnable at once
SELECT gen_durable.insert('holder', queue => 'q3h', correlation_key => 'dupA') IS NOT NULL AS held;
SELECT gen_durable.insert('holder', queue => 'q3h', correlation_key => 'dupB') IS NOT NULL AS held;
SELECT * FROM pg_temp.out1(:p3, 'w3', 'spawn',
	'{"step": "after2", "children": [
	   {"fsm": "c", "queue": "q3c", "correlation_key": "dupA"},
	   {"fsm": "c", "queue": "q3c", "correlation_key": "dupB"}]}');
SELECT status, step, steps, pending, total FROM pg_temp.st(:p3);
SELECT count(*) AS children FROM gen_durable.instances WHERE parent_id = :p3;
SELECT count(*) AS dup_holders FROM gen_durable.instances WHERE correlation_key IN ('dupA', 'dupB');
SELECT * FROM pg_temp.pk('q3', 'w3');
-- duplicate keys among the children: only one of each key lands;
-- children_total = pending = landed; the list has one entry per landed child
SELECT * FROM pg_temp.out1(:p3, 'w3', 'spawn',
	'{"step": "after3", "children": [
	   {"fsm": "c", "queue": "q3c", "correlation_key": "k1", "state": {"n": 0}},
	   {"fsm": "c", "queue": "q3c", "correlation_key": "k1", "state": {"n": 1}},
	   {"fsm": "c", "queue": "q3c", "correlation_key": "k2", "state": {"n": 2}},
	   {"fsm": "c", "queue": "q3c", "state": {"n": 3}}]}');
SELECT status, step, pending, total FROM pg_temp.st(:p3);
SELECT correlation_key, count(*) FROM gen_durable.instances
 WHERE parent_id = :p3 GROUP BY 1 ORDER BY 1;
-- the k2 and keyless children keep their positions as child_index
SELECT correlation_key, child_index FROM gen_durable.instances
 WHERE parent_id = :p3 AND correlation_key IS DISTINCT FROM 'k1' ORDER BY child_index;
SELECT count(*) AS picked FROM pg_temp.pk('q3c', 'w3');
SELECT count(*) FILTER (WHERE f.applied = 'ok') AS applied
  FROM gen_durable.instances c,
	   LATERAL pg_temp.out1(c.id, 'w3', 'done', jsonb_build_object('result', c.state)) f
 WHERE c.parent_id = :p3;
SELECT status, pending FROM pg_temp.st(:p3);
SELECT step, jsonb_array_length(kids) AS entries, ids_ok,
	   (SELECT jsonb_agg(e -> 'status') FROM jsonb_array_elements(kids) e) AS statuses
  FROM pg_temp.pk('q3', 'w3');

------------------------------------------------------------------------
-- D13 first_error: children 0 done, 1 executing (claimed), 2 runnable
-- (never started), 3 awaiting_children with a grandchild, 4 fails.
-- The failure wakes the parent at once and cancels 1, 2, 3 and the
-- grandchild; 1's later flush is stale and its heartbeat drops it
------------------------------------------------------------------------
SELECT gen_durable.insert('fe', queue => 'q4') AS p4 \gset
SELECT fsm FROM pg_temp.pk('q4', 'w4');
SELECT * FROM pg_temp.out1(:p4, 'w4', 'spawn',
	'{"step": "fe_joined", "join": "first_error", "children": [
	   {"fsm": "ok", "queue": "q4_0"}, {"fsm": "run", "queue": "q4_1"},
	   {"fsm": "idle", "queue": "q4_2"}, {"fsm": "nest", "queue": "q4_3"},
	   {"fsm": "bad", "queue": "q4_4"}]}');
SELECT status, pending, total, join_policy FROM pg_temp.st(:p4);
SELECT pg_temp.kid(:p4, 0) AS f0, pg_temp.kid(:p4, 1) AS f1, pg_temp.kid(:p4, 2) AS f2,
	   pg_temp.kid(:p4, 3) AS f3, pg_temp.kid(:p4, 4) AS f4 \gset
SELECT fsm FROM pg_temp.pk('q4_0', 'w4');
SELECT * FROM pg_temp.out1(:f0, 'w4', 'done', '{"result": "zero"}');
SELECT fsm FROM pg_temp.pk('q4_3', 'w4');
SELECT * FROM pg_temp.out1(:f3, 'w4', 'spawn',
	'{"step": "nest_joined", "children": [{"fsm": "gc", "queue": "q4g"}]}');
SELECT pg_temp.kid(:f3, 0) AS f3g \gset
SELECT fsm FROM pg_temp.pk('q4_1', 'wr');
SELECT fsm FROM pg_temp.pk('q4_4', 'w4');
SELECT status, pending FROM pg_temp.st(:p4);
SELECT * FROM pg_temp.out1(:f4, 'w4', 'fail', '{"error": {"why": "boom"}}');
-- the parent is runnable at once; the live siblings and the grandchild
-- are cancelled, claims cleared
SELECT status, step, unclaimed FROM pg_temp.st(:p4);
SELECT idx, fsm, status, error FROM pg_temp.kids(:p4);
SELECT status, locked_by IS NULL AND lease_expires_at IS NULL AS unclaimed, error
  FROM gen_durable.instances WHERE id = :f1;
SELECT status, error FROM gen_durable.instances WHERE id = :f3g;
-- the running sibling's outcome is stale; its heartbeat no longer returns it
SELECT * FROM pg_temp.out1(:f1, 'wr', 'done', '{"result": "late"}');
SELECT status, result FROM gen_durable.instances WHERE id = :f1;
SELECT gen_durable.heartbeat('wr', ARRAY[:f1]::bigint[]) AS still_owned;
-- nothing left to run in the siblings' queues
SELECT count(*) AS picked FROM pg_temp.pk('q4_2', 'w4');
SELECT count(*) AS picked FROM pg_temp.pk('q4g', 'w4');
-- the parent's list: done / cancelled / cancelled / cancelled / failed
SELECT * FROM pg_temp.pk('q4', 'w4');
SELECT count(*) AS picked FROM pg_temp.pk('q4', 'w4');

------------------------------------------------------------------------
-- D13 join 'all' waits for every child whatever its outcome: a failed
-- child does not wake the parent early
------------------------------------------------------------------------
SELECT gen_durable.insert('all', queue => 'q5') AS p5 \gset
SELECT fsm FROM pg_temp.pk('q5', 'w5');
SELECT * FROM pg_temp.out1(:p5, 'w5', 'spawn',
	'{"step": "all_joined", "join": "all", "children": [
	   {"fsm": "x", "queue": "q5a"}, {"fsm": "y", "queue": "q5b"}]}');
SELECT pg_temp.kid(:p5, 0) AS a50, pg_temp.kid(:p5, 1) AS a51 \gset
SELECT fsm FROM pg_temp.pk('q5a', 'w5');
SELECT fsm FROM pg_temp.pk('q5b', 'w5');
SELECT * FROM pg_temp.out1(:a50, 'w5', 'fail', '{"error": "e0"}');
SELECT status, pending, join_policy FROM pg_temp.st(:p5);
SELECT status FROM gen_durable.instances WHERE id = :a51;
SELECT count(*) AS picked FROM pg_temp.pk('q5', 'w5');
SELECT * FROM pg_temp.out1(:a51, 'w5', 'done', '{"result": "r1"}');
SELECT status, pending FROM pg_temp.st(:p5);
SELECT * FROM pg_temp.pk('q5', 'w5');

------------------------------------------------------------------------
-- D14 cancel of a subtree with a node in every live status: root r
-- (awaiting_children) with x runnable, y executing, z awaiting_signal
-- (a signal in its inbox), v awaiting_children (its child v0 runnable).
-- r's parent (awaiting_children, r its last live child) counts r in its
-- join and wakes
------------------------------------------------------------------------
SELECT gen_durable.insert('gp', queue => 'q6') AS p6 \gset
SELECT fsm FROM pg_temp.pk('q6', 'w6');
SELECT * FROM pg_temp.out1(:p6, 'w6', 'spawn',
	'{"step": "gp_joined", "children": [
	   {"fsm": "r", "queue": "q6r"}, {"fsm": "s", "queue": "q6s"}]}');
SELECT pg_temp.kid(:p6, 0) AS r6, pg_temp.kid(:p6, 1) AS s6 \gset
SELECT fsm FROM pg_temp.pk('q6r', 'w6');
SELECT * FROM pg_temp.out1(:r6, 'w6', 'spawn',
	'{"step": "r_joined", "children": [
	   {"fsm": "x", "queue": "q6x"}, {"fsm": "y", "queue": "q6y"},
	   {"fsm": "z", "queue": "q6z"}, {"fsm": "v", "queue": "q6v"}]}');
SELECT pg_temp.kid(:r6, 0) AS x6, pg_temp.kid(:r6, 1) AS y6,
	   pg_temp.kid(:r6, 2) AS z6, pg_temp.kid(:r6, 3) AS v6 \gset
SELECT fsm FROM pg_temp.pk('q6y', 'wy');
SELECT fsm FROM pg_temp.pk('q6z', 'w6');
SELECT * FROM pg_temp.out1(:z6, 'w6', 'await', '{"names": ["go"], "step": "z2"}');
SELECT gen_durable.signal(:z6, 'other', '{"p": 1}');
SELECT fsm FROM pg_temp.pk('q6v', 'w6');
SELECT * FROM pg_temp.out1(:v6, 'w6', 'spawn',
	'{"step": "v_joined", "children": [{"fsm": "v0", "queue": "q6v0"}]}');
SELECT pg_temp.kid(:v6, 0) AS v60 \gset
-- s finishes: the grand-parent now waits only for r
SELECT fsm FROM pg_temp.pk('q6s', 'w6');
SELECT * FROM pg_temp.out1(:s6, 'w6', 'done', '{"result": "s"}');
SELECT status, pending FROM pg_temp.st(:p6);
-- before: every live status is present in r's subtree
SELECT fsm, status FROM gen_durable.instances
 WHERE id IN (:r6, :x6, :y6, :z6, :v6, :v60) ORDER BY id;
SELECT count(*) AS z_inbox FROM gen_durable.signals WHERE target_id = :z6;
-- cancel returns the number cancelled: r, x, y, z, v, v0
SELECT gen_durable.cancel(:r6, 'stop') AS cancelled;
SELECT fsm, status, error, locked_by IS NULL AS unclaimed, awaits FROM gen_durable.instances
 WHERE id IN (:r6, :x6, :y6, :z6, :v6, :v60) ORDER BY id;
SELECT count(*) AS z_inbox FROM gen_durable.signals WHERE target_id = :z6;
-- y's worker: stale outcome, dropped by heartbeat
SELECT * FROM pg_temp.out1(:y6, 'wy', 'done');
SELECT gen_durable.heartbeat('wy', ARRAY[:y6]::bigint[]) AS still_owned;
-- the grand-parent counted r and woke
SELECT status, pending FROM pg_temp.st(:p6);
SELECT * FROM pg_temp.pk('q6', 'w6');
-- cancelling again changes nothing
SELECT gen_durable.cancel(:r6, 'again') AS cancelled;
SELECT error FROM gen_durable.instances WHERE id = :r6;

------------------------------------------------------------------------
-- D14 return values of cancel / fail / retry
------------------------------------------------------------------------
-- cancel of a terminal instance and of a missing one: 0
SELECT gen_durable.cancel(:c10) AS cancel_done, gen_durable.cancel(:f4) AS cancel_failed,
	   gen_durable.cancel(-1) AS cancel_missing;
SELECT status, result FROM gen_durable.instances WHERE id = :c10;
-- fail of a live instance: true; its live descendants are cancelled and
-- its parent counts it
SELECT gen_durable.insert('fp', queue => 'q7') AS p7 \gset
SELECT fsm FROM pg_temp.pk('q7', 'w7');
SELECT * FROM pg_temp.out1(:p7, 'w7', 'spawn',
	'{"step": "fp_joined", "children": [{"fsm": "fc", "queue": "q7c"}]}');
SELECT pg_temp.kid(:p7, 0) AS fc7 \gset
SELECT fsm FROM pg_temp.pk('q7c', 'w7');
SELECT * FROM pg_temp.out1(:fc7, 'w7', 'spawn',
	'{"step": "fc_joined", "children": [{"fsm": "fcc", "queue": "q7cc"}]}');
SELECT pg_temp.kid(:fc7, 0) AS fcc7 \gset
SELECT gen_durable.fail(:fc7, 'given up') AS failed;
SELECT fsm, status, error FROM gen_durable.instances WHERE id IN (:fc7, :fcc7) ORDER BY id;
SELECT status, pending FROM pg_temp.st(:p7);
-- fail of a terminal or missing instance: false
SELECT gen_durable.fail(:fc7) AS fail_failed, gen_durable.fail(:c10) AS fail_done,
	   gen_durable.fail(-1) AS fail_missing;
SELECT fsm, status, error FROM gen_durable.instances WHERE id = :fc7;
-- retry of a failed instance (attempt was 1): runnable, attempt 0, new step;
-- steps unchanged (D3)
SELECT gen_durable.insert('rt', queue => 'q7r', state => '{"v": 1}') AS r7 \gset
SELECT fsm FROM pg_temp.pk('q7r', 'w7');
SELECT * FROM pg_temp.out1(:r7, 'w7', 'retry', '{"delay": 0}');
SELECT fsm, attempt FROM pg_temp.pk('q7r', 'w7');
SELECT * FROM pg_temp.out1(:r7, 'w7', 'fail', '{"error": "x"}');
SELECT status, step, steps, attempt FROM pg_temp.st(:r7);
SELECT gen_durable.retry(:r7, 'again') AS retried;
SELECT status, step, state, steps, attempt, unclaimed FROM pg_temp.st(:r7);
SELECT fsm, step, state, attempt FROM pg_temp.pk('q7r', 'w7');
-- retry of a cancelled instance without a step: at its step
SELECT * FROM pg_temp.out1(:r7, 'w7', 'next', '{"step": "s3"}');
SELECT gen_durable.cancel(:r7) AS cancelled;
SELECT gen_durable.retry(:r7) AS retried;
SELECT status, step, attempt FROM pg_temp.st(:r7);
-- retry of a runnable or done instance (or a missing one): false, no change
SELECT gen_durable.retry(:r7, 'nope') AS retry_runnable, gen_durable.retry(:c10) AS retry_done,
	   gen_durable.retry(-1) AS retry_missing;
SELECT status, step FROM pg_temp.st(:r7);
SELECT status, step FROM pg_temp.st(:c10);
-- retry when the correlation key is now held by another live instance: error
SELECT gen_durable.insert('ck', queue => 'q7k', correlation_key => 'ck7') AS k7 \gset
SELECT gen_durable.cancel(:k7) AS cancelled;
SELECT gen_durable.insert('ck', queue => 'q7k', correlation_key => 'ck7') IS NOT NULL AS new_holder;
-- (the message names the instance id: replaced by N)
SELECT set_config('spawn.k7', :'k7', false) IS NOT NULL AS set;
DO $$
BEGIN
	PERFORM gen_durable.retry(current_setting('spawn.k7')::bigint);
	RAISE NOTICE 'no error';
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '% %', SQLSTATE, regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END
$$;
SELECT status FROM gen_durable.instances WHERE id = :k7;
SELECT count(*) AS live_holders FROM gen_durable.instances
 WHERE correlation_key = 'ck7' AND status = 'runnable';

------------------------------------------------------------------------
-- D3 budget: the spawn that would exceed max_steps is not applied; the
-- instance fails with budget_exhausted, no child is inserted, and the
-- state stays at its last committed value
------------------------------------------------------------------------
SELECT gen_durable.insert('bud', queue => 'q8', max_steps => 1, state => '{"v": 0}') AS b8 \gset
SELECT fsm FROM pg_temp.pk('q8', 'w8');
SELECT * FROM pg_temp.out1(:b8, 'w8', 'next', '{"step": "s1", "state": {"v": 1}}');
SELECT fsm FROM pg_temp.pk('q8', 'w8');
SELECT * FROM pg_temp.out1(:b8, 'w8', 'spawn',
	'{"step": "s2", "state": {"v": 2}, "children": [{"fsm": "bc", "queue": "q8c"}]}');
SELECT status, step, state, steps, pending, total, round, unclaimed FROM pg_temp.st(:b8);
SELECT error FROM gen_durable.instances WHERE id = :b8;
SELECT count(*) AS children FROM gen_durable.instances WHERE parent_id = :b8 OR fsm = 'bc';

------------------------------------------------------------------------
-- children carry their own options: queue, priority, step, state,
-- correlation key, delay, metadata, max_attempts, fsm_version
------------------------------------------------------------------------
SELECT gen_durable.insert('opt', queue => 'q9', priority => 3) AS p9 \gset
SELECT fsm FROM pg_temp.pk('q9', 'w9');
SELECT * FROM pg_temp.out1(:p9, 'w9', 'spawn',
	'{"step": "opt_joined", "children": [
	   {"fsm": "o1", "queue": "q9a", "priority": 7, "step": "first", "state": {"o": 1},
		"correlation_key": "ok9", "metadata": {"tenant": 9}, "max_attempts": 3,
		"fsm_version": 2},
	   {"fsm": "o2", "queue": "q9b", "delay": "1 hour"}]}');
SELECT child_index, fsm, queue, priority, step, state, correlation_key, metadata,
	   max_attempts, fsm_version, status,
	   eligible_at > now() + interval '59 minutes' AS delayed
  FROM gen_durable.instances WHERE parent_id = :p9 ORDER BY child_index;
-- the delayed child is not pickable yet; the other one is, in its own
-- queue (the parent waits for both)
SELECT count(*) AS picked FROM pg_temp.pk('q9b', 'w9');
SELECT count(*) AS picked FROM pg_temp.pk('q9', 'w9');
SELECT fsm, step, state FROM pg_temp.pk('q9a', 'w9');
-- the child's key is live: a second insert with it is a duplicate
SELECT gen_durable.insert('ok', correlation_key => 'ok9') IS NULL AS duplicate;

------------------------------------------------------------------------
-- D9 invalid spawn entries: reported invalid with the reason, the
-- instance stays claimed; the other entries of the flush commit
------------------------------------------------------------------------
CREATE TEMP TABLE lbl (id bigint, name text);
INSERT INTO lbl
SELECT gen_durable.insert('inv', queue => 'q10', state => jsonb_build_object('n', n)), n
  FROM unnest(ARRAY['not_array', 'bad_spec', 'no_fsm', 'bad_join', 'no_step', 'valid']) n;
SELECT count(*) AS picked FROM pg_temp.pk('q10', 'w10');
SELECT l.name, f.applied, f.detail
  FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object('id', l.id, 'worker', 'w10',
			'kind', 'spawn') ||
		CASE l.name
		  WHEN 'not_array' THEN '{"step": "j", "children": {"fsm": "c"}}'
		  WHEN 'bad_spec' THEN '{"step": "j", "children": [{"fsm": "c", "bogus": 1}]}'
		  WHEN 'no_fsm' THEN '{"step": "j", "children": [{"fsm": "c"}, {"queue": "q"}]}'
		  WHEN 'bad_join' THEN '{"step": "j", "join": "any", "children": [{"fsm": "c"}]}'
		  WHEN 'no_step' THEN '{"children": [{"fsm": "c"}]}'
		  ELSE '{"step": "j", "children": [{"fsm": "c", "queue": "q10c"}]}'
		END::jsonb ORDER BY l.id) FROM lbl l)) f
  JOIN lbl l ON l.id = f.id
 ORDER BY l.id;
SELECT l.name, s.status, s.step, s.steps, s.pending, s.total, s.unclaimed
  FROM lbl l, LATERAL pg_temp.st(l.id) s ORDER BY l.id;
SELECT count(*) AS children FROM gen_durable.instances
 WHERE parent_id IN (SELECT id FROM lbl);
-- an invalid entry's instance is still owned: a corrected outcome applies
SELECT * FROM pg_temp.out1((SELECT id FROM lbl WHERE name = 'bad_join'), 'w10', 'spawn',
	'{"step": "j", "join": "first_error", "children": []}');

------------------------------------------------------------------------
-- D18 find(metadata): a containment query on the GIN index
------------------------------------------------------------------------
SELECT gen_durable.insert('t1a', queue => 'q11', metadata => '{"tenant": 1, "region": "eu"}') IS NOT NULL;
SELECT gen_durable.insert('t1b', queue => 'q11', metadata => '{"tenant": 1}') IS NOT NULL;
SELECT gen_durable.insert('t2', queue => 'q11', metadata => '{"tenant": 2, "region": "eu"}') IS NOT NULL;
SELECT fsm, metadata FROM gen_durable.find('{"tenant": 1}') ORDER BY fsm;
SELECT fsm FROM gen_durable.find('{"region": "eu"}') ORDER BY fsm;
SELECT fsm FROM gen_durable.find('{"tenant": 1, "region": "eu"}') ORDER BY fsm;
SELECT count(*) AS none FROM gen_durable.find('{"tenant": 3}');
-- the table is tiny, so the planner would prefer a seq scan: turn it off
-- to show that the (inlined) find is served by the GIN index
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM gen_durable.find('{"tenant": 1}');
RESET enable_seqscan;

------------------------------------------------------------------------
-- D1/D2: the reaper failing a child (max_attempts 1, lease aged) counts in
-- its parent's join
------------------------------------------------------------------------
SELECT gen_durable.insert('rp', queue => 'q12') AS p12 \gset
SELECT fsm FROM pg_temp.pk('q12', 'w12');
SELECT * FROM pg_temp.out1(:p12, 'w12', 'spawn',
	'{"step": "rp_joined", "children": [
	   {"fsm": "fine", "queue": "q12a"},
	   {"fsm": "lost", "queue": "q12b", "max_attempts": 1}]}');
SELECT pg_temp.kid(:p12, 0) AS k120, pg_temp.kid(:p12, 1) AS k121 \gset
SELECT fsm FROM pg_temp.pk('q12a', 'w12');
SELECT * FROM pg_temp.out1(:k120, 'w12', 'done', '{"result": "fine"}');
SELECT fsm FROM pg_temp.pk('q12b', 'wlost');
SELECT status, pending FROM pg_temp.st(:p12);
-- age the lease (the only direct UPDATE of this test)
UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 minute'
 WHERE id = :k121;
SELECT gen_durable.run_maintenance() ->> 'lease_failed' AS lease_failed;
SELECT status, error FROM gen_durable.instances WHERE id = :k121;
SELECT status, pending FROM pg_temp.st(:p12);
SELECT * FROM pg_temp.pk('q12', 'w12');

-- 13. retry of a child whose parent still waits for its round: the child
-- counts in the join again, so the parent does not wake before it ends
SELECT gen_durable.insert('p13', queue => 'q13') AS p13 \gset
SELECT fsm FROM pg_temp.pk('q13', 'w13');
SELECT * FROM pg_temp.out1(:p13, 'w13', 'spawn',
	'{"step": "joined", "children": [{"fsm": "c", "queue": "q13k"}, {"fsm": "c", "queue": "q13k"}]}');
SELECT pg_temp.kid(:p13, 0) AS k130, pg_temp.kid(:p13, 1) AS k131 \gset
SELECT gen_durable.cancel(:k130);
SELECT status, pending FROM pg_temp.st(:p13);
SELECT gen_durable.retry(:k130);
SELECT status, pending FROM pg_temp.st(:p13);
SELECT count(*) AS claimed FROM pg_temp.pk('q13k', 'w13k');
SELECT * FROM pg_temp.out1(:k131, 'w13k', 'done');
SELECT status, pending FROM pg_temp.st(:p13);
SELECT * FROM pg_temp.out1(:k130, 'w13k', 'done');
SELECT status, pending FROM pg_temp.st(:p13);

-- 14. first_error inside one flush: a child fails while its sibling, in
-- the same batch, continues inline; the sibling is cancelled by the
-- cascade, so its entry gives back no job
SELECT gen_durable.insert('p14', queue => 'q14') AS p14 \gset
SELECT fsm FROM pg_temp.pk('q14', 'w14');
SELECT * FROM pg_temp.out1(:p14, 'w14', 'spawn',
	'{"step": "joined", "join": "first_error", "children": [{"fsm": "c", "queue": "q14k"}, {"fsm": "c", "queue": "q14k"}]}');
SELECT pg_temp.kid(:p14, 0) AS k140, pg_temp.kid(:p14, 1) AS k141 \gset
SELECT count(*) AS claimed FROM pg_temp.pk('q14k', 'w14k');
SELECT f.id = :k141 AS is_sibling, f.applied, f.detail, f.job IS NULL AS no_job
  FROM gen_durable.flush(jsonb_build_array(
		jsonb_build_object('id', :k140, 'worker', 'w14k', 'kind', 'fail'),
		jsonb_build_object('id', :k141, 'worker', 'w14k', 'kind', 'next', 'step', 's2',
						   'continue', true))) f;
SELECT status, pending FROM pg_temp.st(:p14);
SELECT status FROM gen_durable.instances WHERE id = :k141;

DROP FUNCTION pg_temp.st(bigint), pg_temp.kids(bigint);
DROP EXTENSION gen_durable;
