-- signal.sql: gen_durable.signal by id and by correlation key
-- (design §3; contract §7, A-1, A-3, I-1, I-28, D5, D11)
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

-- claim one instance for a worker: pick its whole queue, hand the rest back
CREATE FUNCTION pg_temp.claim(target bigint, worker text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	got bigint;
BEGIN
	SELECT p.id INTO got
	  FROM gen_durable.pick((SELECT queue FROM gen_durable.instances WHERE id = target),
							worker, 10000) p
	 WHERE p.id = target;
	PERFORM gen_durable.release(worker,
		ARRAY(SELECT id FROM gen_durable.instances
			   WHERE locked_by = worker AND id <> target));
	RETURN got;
END
$$;

-- park an instance on signal names (claim + flush await)
CREATE FUNCTION pg_temp.park(target bigint, names jsonb, timeout text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	answer text;
BEGIN
	PERFORM pg_temp.claim(target, 'parker');
	SELECT f.applied || coalesce('/' || f.detail, '') INTO answer
	  FROM gen_durable.flush(jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
			'id', target, 'worker', 'parker', 'kind', 'await', 'names', names,
			'step', 'after_wait', 'timeout', timeout)))) f;
	RETURN answer;
END
$$;

-- end an instance with a done/fail outcome
CREATE FUNCTION pg_temp.finish(target bigint, kind text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	answer text;
BEGIN
	PERFORM pg_temp.claim(target, 'finisher');
	SELECT f.applied INTO answer
	  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
			'id', target, 'worker', 'finisher', 'kind', kind))) f;
	RETURN answer;
END
$$;

-- the inbox of an instance
CREATE FUNCTION pg_temp.inbox(target bigint) RETURNS TABLE (name text, payload jsonb, dedup_key text)
LANGUAGE sql AS $$
	SELECT name, payload, dedup_key FROM gen_durable.signals
	 WHERE target_id = target ORDER BY id
$$;

------------------------------------------------------------------------
-- delivery to a runnable instance by id: stored, no status change
------------------------------------------------------------------------
SELECT gen_durable.insert('s', queue => 'q_run') AS run1 \gset
SELECT gen_durable.signal(:run1, 'hello');
SELECT gen_durable.signal(:run1, 'hello', '{"n": 2}');
SELECT gen_durable.signal(:run1, 'other', payload => '{"deep": {"a": [1, 2]}}');
SELECT * FROM pg_temp.inbox(:run1);
SELECT status, awaits FROM gen_durable.instances WHERE id = :run1;

------------------------------------------------------------------------
-- dedup_key: duplicate while the earlier signal exists (UNIQUE target, dedup_key)
------------------------------------------------------------------------
SELECT gen_durable.signal(:run1, 'pay', '{"amount": 1}', dedup_key => 'tx-1');
SELECT gen_durable.signal(:run1, 'pay', '{"amount": 2}', dedup_key => 'tx-1');
-- the dedup key is per target, whatever the name
SELECT gen_durable.signal(:run1, 'refund', '{}', dedup_key => 'tx-1');
SELECT gen_durable.signal(:run1, 'pay', '{"amount": 3}', dedup_key => 'tx-2');
-- the same key on another target is independent
SELECT gen_durable.insert('s', queue => 'q_run') AS run2 \gset
SELECT gen_durable.signal(:run2, 'pay', '{"amount": 4}', dedup_key => 'tx-1');
-- the first payload was kept
SELECT * FROM pg_temp.inbox(:run1) WHERE dedup_key IS NOT NULL;
SELECT * FROM pg_temp.inbox(:run2);

------------------------------------------------------------------------
-- no target: missing id; nothing is stored
------------------------------------------------------------------------
SELECT count(*) AS signals_before FROM gen_durable.signals \gset
SELECT gen_durable.signal(999999999, 'x');
SELECT gen_durable.signal(-1, 'x');
SELECT count(*) = :signals_before AS nothing_stored FROM gen_durable.signals;

------------------------------------------------------------------------
-- terminal targets (done, failed, cancelled) are refused by id and by key,
-- and nothing is stored (I-28)
------------------------------------------------------------------------
SELECT gen_durable.insert('s', queue => 'q_done', correlation_key => 'term-done') AS t_done \gset
SELECT gen_durable.insert('s', queue => 'q_fail', correlation_key => 'term-fail') AS t_fail \gset
SELECT gen_durable.insert('s', queue => 'q_canc', correlation_key => 'term-canc') AS t_canc \gset
SELECT pg_temp.finish(:t_done, 'done'), pg_temp.finish(:t_fail, 'fail'),
	   gen_durable.cancel(:t_canc);
SELECT count(*) AS signals_before FROM gen_durable.signals \gset
SELECT gen_durable.signal(:t_done, 'x'), gen_durable.signal(:t_fail, 'x'),
	   gen_durable.signal(:t_canc, 'x');
SELECT gen_durable.signal('term-done', 'x'), gen_durable.signal('term-fail', 'x'),
	   gen_durable.signal('term-canc', 'x');
SELECT count(*) = :signals_before AS nothing_stored FROM gen_durable.signals;

------------------------------------------------------------------------
-- by correlation key
------------------------------------------------------------------------
SELECT gen_durable.insert('s', queue => 'q_key', correlation_key => 'order-7') AS keyed \gset
SELECT gen_durable.signal('order-7', 'shipped', '{"carrier": "x"}');
SELECT gen_durable.signal('order-7', 'shipped', '{"carrier": "y"}', 'ship-1');
SELECT gen_durable.signal('order-7', 'shipped', '{"carrier": "z"}', 'ship-1');
SELECT * FROM pg_temp.inbox(:keyed);
-- an unknown key
SELECT gen_durable.signal('no-such-key', 'shipped');
-- a label-only key (scope '{}') is not addressable (A-1, D5)
SELECT gen_durable.insert('s', queue => 'q_key', correlation_key => 'just-a-label',
						  correlation_scope => '{}') AS label \gset
SELECT gen_durable.signal('just-a-label', 'x');
SELECT count(*) AS label_inbox FROM gen_durable.signals WHERE target_id = :label;
-- a key reserved after done (scope with done) names a terminal row: no target
SELECT gen_durable.insert('s', queue => 'q_res', correlation_key => 'reserved',
	correlation_scope => '{runnable,executing,awaiting_signal,awaiting_children,done}') AS res \gset
SELECT pg_temp.finish(:res, 'done');
SELECT correlation_guard FROM gen_durable.instances WHERE id = :res;
SELECT gen_durable.signal('reserved', 'x');
SELECT count(*) AS reserved_inbox FROM gen_durable.signals WHERE target_id = :res;
-- a key freed by its terminal occupant and taken again reaches the new live row
SELECT gen_durable.insert('s', queue => 'q_key', correlation_key => 'term-done') AS reuse \gset
SELECT gen_durable.signal('term-done', 'again');
SELECT target_id = :reuse AS reached_new_row FROM gen_durable.signals WHERE name = 'again';

------------------------------------------------------------------------
-- executing and awaiting_children targets: stored, no status change
------------------------------------------------------------------------
SELECT gen_durable.insert('s', queue => 'q_exec') AS exec1 \gset
SELECT pg_temp.claim(:exec1, 'w1') = :exec1 AS claimed;
SELECT gen_durable.signal(:exec1, 'ping');
SELECT status, locked_by FROM gen_durable.instances WHERE id = :exec1;
SELECT gen_durable.insert('s', queue => 'q_kids') AS kids \gset
UPDATE gen_durable.instances SET status = 'awaiting_children', children_pending = 1,
	   children_total = 1 WHERE id = :kids;
SELECT gen_durable.signal(:kids, 'ping');
SELECT status FROM gen_durable.instances WHERE id = :kids;
SELECT count(*) AS stored FROM gen_durable.signals WHERE target_id IN (:exec1, :kids);

------------------------------------------------------------------------
-- wake (T8): only an awaiting_signal row, only for a name in awaits
------------------------------------------------------------------------
SELECT gen_durable.insert('s', queue => 'q_wait') AS w1 \gset
SELECT pg_temp.park(:w1, '["approved", "rejected"]', '1 hour');
SELECT status, step, awaits, await_deadline > now() AS has_deadline
  FROM gen_durable.instances WHERE id = :w1;
SELECT eligible_at AS parked_at FROM gen_durable.instances WHERE id = :w1 \gset
-- a name not awaited is stored without a wake
SELECT gen_durable.signal(:w1, 'comment', '{"text": "hi"}');
SELECT status, awaits, await_deadline IS NOT NULL AS has_deadline
  FROM gen_durable.instances WHERE id = :w1;
-- an awaited name wakes it: runnable, eligible now, deadline cleared (D11),
-- awaits kept (the next pick presents the awaited signals)
SELECT gen_durable.signal(:w1, 'rejected', '{"why": "no"}');
SELECT status, step, awaits, await_deadline IS NULL AS deadline_cleared,
	   eligible_at > :'parked_at' AS eligible_moved, locked_by IS NULL AS unclaimed
  FROM gen_durable.instances WHERE id = :w1;
-- a second awaited signal after the wake: stored, still runnable
SELECT gen_durable.signal(:w1, 'approved');
SELECT status FROM gen_durable.instances WHERE id = :w1;
SELECT * FROM pg_temp.inbox(:w1);

-- by key, the same wake
SELECT gen_durable.insert('s', queue => 'q_wait', correlation_key => 'wait-key') AS w2 \gset
SELECT pg_temp.park(:w2, '["go"]');
SELECT gen_durable.signal('wait-key', 'stop');
SELECT status FROM gen_durable.instances WHERE id = :w2;
SELECT gen_durable.signal('wait-key', 'go');
SELECT status, awaits FROM gen_durable.instances WHERE id = :w2;

------------------------------------------------------------------------
-- dedup lasts only while the earlier signal exists (A-3): once a progressing
-- outcome consumed it, the same dedup key is accepted again
------------------------------------------------------------------------
SELECT gen_durable.insert('s', queue => 'q_dedup') AS d1 \gset
SELECT pg_temp.park(:d1, '["evt"]');
SELECT gen_durable.signal(:d1, 'evt', '{"v": 1}', 'once');
SELECT gen_durable.signal(:d1, 'evt', '{"v": 2}', 'once');
SELECT pg_temp.claim(:d1, 'w2') = :d1 AS claimed;
SELECT applied FROM gen_durable.flush(
	format('[{"id": %s, "worker": "w2", "kind": "next", "step": "consumed"}]', :d1)::jsonb);
SELECT count(*) AS inbox_after_consume FROM gen_durable.signals WHERE target_id = :d1;
SELECT gen_durable.signal(:d1, 'evt', '{"v": 3}', 'once');
SELECT * FROM pg_temp.inbox(:d1);

------------------------------------------------------------------------
-- a dropped duplicate still performs the wake (§7 step 2, A-3): a row that
-- re-awaits after seeing the signal is woken by its redelivery
------------------------------------------------------------------------
SELECT gen_durable.insert('s', queue => 'q_redeliver') AS rd \gset
SELECT pg_temp.park(:rd, '["evt"]');
SELECT gen_durable.signal(:rd, 'evt', '{}', 'k1');
SELECT pg_temp.claim(:rd, 'w3') = :rd AS claimed;
-- the step sees the signal, then awaits the same name again: it stays parked
-- because that signal was presented to it (D20)
SELECT applied, detail FROM gen_durable.flush(format(
	'[{"id": %s, "worker": "w3", "kind": "await", "names": ["evt"], "step": "again"}]', :rd)::jsonb);
SELECT status FROM gen_durable.instances WHERE id = :rd;
SELECT gen_durable.signal(:rd, 'evt', '{}', 'k1');
SELECT status FROM gen_durable.instances WHERE id = :rd;
SELECT count(*) AS inbox FROM gen_durable.signals WHERE target_id = :rd;

------------------------------------------------------------------------
-- argument errors; nothing is stored
------------------------------------------------------------------------
SELECT count(*) AS signals_before FROM gen_durable.signals \gset
SELECT gen_durable.signal(NULL::bigint, 'x');
SELECT gen_durable.signal(NULL::text, 'x');
SELECT gen_durable.signal(''::text, 'x');
SELECT gen_durable.signal(:run1, '');
SELECT gen_durable.signal(:run1, NULL);
SELECT gen_durable.signal('order-7', '');
SELECT gen_durable.signal(:run1, 'x', NULL);
SELECT gen_durable.signal('order-7', 'x', NULL);
SELECT gen_durable.signal(:run1, 'x', '{}', '');
SELECT gen_durable.signal(:run1, repeat('n', 1025));
SELECT count(*) = :signals_before AS nothing_stored FROM gen_durable.signals;

DROP EXTENSION gen_durable;
