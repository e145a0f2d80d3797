-- flush.sql: gen_durable.flush, every outcome kind and status transition
-- (design §3 flush; contract §2.1/§2.2 T2-T17, §5, §6, D1-D3, D9, D10, D11, D20,
-- I-4, I-6, I-27)
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

-- the rate limits these tests name, generous enough never to throttle
SELECT count(gen_durable.set_rate_limit(n, 1000000, '1 second'))
  FROM unnest(ARRAY['r0', 'r1', 'rl', 'rr']) AS n;

-- one outcome for one instance; extra holds the kind's fields
CREATE FUNCTION pg_temp.out1(id bigint, worker text, kind text, extra jsonb DEFAULT '{}')
RETURNS TABLE (applied text, detail text, job jsonb)
LANGUAGE sql AS $$
	SELECT f.applied, f.detail, f.job
	  FROM gen_durable.flush(jsonb_build_array(
			jsonb_build_object('id', id, 'worker', worker, 'kind', kind) || extra)) f
$$;

-- the columns an outcome writes (no timestamps)
CREATE FUNCTION pg_temp.st(bigint) RETURNS TABLE (
	step text, state jsonb, attempt int, steps bigint, status gen_durable.status,
	awaits text[], result jsonb, error jsonb, unclaimed bool, rate_limit text,
	weight float8, concurrency_key text, fsm_version int)
LANGUAGE sql AS $$
	SELECT step, state, attempt, steps, status, awaits, result, error,
		   locked_by IS NULL AND lease_expires_at IS NULL, rate_limit, weight,
		   concurrency_key, fsm_version
	  FROM gen_durable.instances WHERE id = $1
$$;

-- the names (and payloads) in an instance's inbox
CREATE FUNCTION pg_temp.inbox(bigint) RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(name || payload::text, ' ' ORDER BY id), '')
	  FROM gen_durable.signals WHERE target_id = $1
$$;

-- a job as flush returns it for a continue, without the lease instant and
-- the signal ids
CREATE FUNCTION pg_temp.job(j jsonb) RETURNS jsonb
LANGUAGE sql AS $$
	SELECT (j - 'lease_expires_at' - 'id')
		   || jsonb_build_object(
				'inbox', (SELECT coalesce(jsonb_agg(e - 'id'), '[]')
							FROM jsonb_array_elements(j -> 'inbox') e),
				'awaited', (SELECT coalesce(jsonb_agg(e - 'id'), '[]')
							  FROM jsonb_array_elements(j -> 'awaited') e))
$$;

------------------------------------------------------------------------
-- T4 next: new step and state, attempt 0, steps + 1, runnable, eligible
-- now, claim cleared; rate_limit/weight belong to the next step; the
-- concurrency key is kept when absent; fsm_version moves when given
------------------------------------------------------------------------
SELECT gen_durable.insert('n', queue => 'nq', state => '{"a": 1}', rate_limit => 'r0',
						  weight => 3, concurrency_key => 'ck', metadata => '{"m": 1}')
	   AS n1 \gset
SELECT fsm FROM gen_durable.pick('nq', 'w1');
SELECT eligible_at AS n1_eligible FROM gen_durable.instances WHERE id = :n1 \gset
SELECT applied, detail, job FROM pg_temp.out1(:n1, 'w1', 'next',
	'{"step": "s2", "state": {"b": 2}, "rate_limit": "r1", "weight": 2, "fsm_version": 2}');
SELECT * FROM pg_temp.st(:n1);
SELECT eligible_at > :'n1_eligible' AS eligible_now, metadata,
	   awaits IS NULL AND await_deadline IS NULL AND presented IS NULL AS no_wait,
	   concurrency_shard IS NULL AS no_shard
  FROM gen_durable.instances WHERE id = :n1;
-- a next without options: state kept, rate_limit cleared, weight 1, key kept
SELECT fsm FROM gen_durable.pick('nq', 'w1');
SELECT applied FROM pg_temp.out1(:n1, 'w1', 'next', '{"step": "s3"}');
SELECT * FROM pg_temp.st(:n1);
-- a next with a new concurrency key sets it; null releases it
SELECT fsm FROM gen_durable.pick('nq', 'w1');
SELECT applied FROM pg_temp.out1(:n1, 'w1', 'next', '{"step": "s4", "concurrency_key": "ck2"}');
SELECT step, steps, concurrency_key FROM pg_temp.st(:n1);
SELECT fsm FROM gen_durable.pick('nq', 'w1');
SELECT applied FROM pg_temp.out1(:n1, 'w1', 'next', '{"step": "s5", "concurrency_key": null}');
SELECT step, steps, concurrency_key FROM pg_temp.st(:n1);
-- the same step name again still counts as a transition
SELECT fsm FROM gen_durable.pick('nq', 'w1');
SELECT applied FROM pg_temp.out1(:n1, 'w1', 'next', '{"step": "s5"}');
SELECT step, steps FROM pg_temp.st(:n1);

------------------------------------------------------------------------
-- T5 retry: same step, state set when given, attempt + 1, steps kept,
-- eligible now + delay, error recorded, awaits / rate / weight / key kept
------------------------------------------------------------------------
SELECT gen_durable.insert('r', queue => 'rq', state => '{"a": 1}', rate_limit => 'r0',
						  weight => 3, concurrency_key => 'rk', max_attempts => 3) AS r1 \gset
SELECT fsm FROM gen_durable.pick('rq', 'w1');
SELECT applied, detail, job FROM pg_temp.out1(:r1, 'w1', 'retry',
	'{"state": {"tries": 1}, "delay": 3600, "error": {"http": 503}}');
SELECT * FROM pg_temp.st(:r1);
SELECT eligible_at > now() + interval '59 min' AS delayed_1_hour
  FROM gen_durable.instances WHERE id = :r1;
SELECT count(*) AS not_due FROM gen_durable.pick('rq', 'w1');
-- delay as an interval string; state kept when absent; no error given keeps the last
UPDATE gen_durable.instances SET eligible_at = now() - interval '1 s' WHERE id = :r1;
SELECT fsm FROM gen_durable.pick('rq', 'w1');
SELECT applied, detail FROM pg_temp.out1(:r1, 'w1', 'retry', '{"delay": "0 s"}');
SELECT * FROM pg_temp.st(:r1);
-- the third attempt retrying again runs out of max_attempts (3): the
-- instance fails, keeping the state of the last committed step
SELECT attempt FROM gen_durable.pick('rq', 'w1');
SELECT gen_durable.signal(:r1, 'note');
SELECT applied, detail FROM pg_temp.out1(:r1, 'w1', 'retry',
	'{"state": {"tries": 3}, "delay": 1, "error": "timeout"}');
SELECT * FROM pg_temp.st(:r1);
SELECT pg_temp.inbox(:r1) AS inbox_purged;
-- max_attempts 1: the first retry fails at once; no error given gives null
SELECT gen_durable.insert('r', queue => 'rq1', max_attempts => 1) AS r2 \gset
SELECT fsm FROM gen_durable.pick('rq1', 'w1');
SELECT applied, detail FROM pg_temp.out1(:r2, 'w1', 'retry');
SELECT status, attempt, error FROM pg_temp.st(:r2);
-- done after a retry: the instance succeeded, the recorded error is cleared
SELECT gen_durable.insert('r', queue => 'rq2') AS r3 \gset
SELECT fsm FROM gen_durable.pick('rq2', 'w1');
SELECT applied FROM pg_temp.out1(:r3, 'w1', 'retry', '{"error": {"http": 500}}');
SELECT fsm FROM gen_durable.pick('rq2', 'w1');
SELECT applied FROM pg_temp.out1(:r3, 'w1', 'done', '{"result": {"ok": 1}}');
SELECT status, result, error FROM pg_temp.st(:r3);

------------------------------------------------------------------------
-- T6 await: park on names with a step, state and timeout; attempt 0,
-- steps + 1, rate_limit cleared, weight 1, key kept
------------------------------------------------------------------------
SELECT gen_durable.insert('a', queue => 'aq', state => '{"a": 1}', rate_limit => 'r0',
						  weight => 3, concurrency_key => 'ak') AS a1 \gset
SELECT fsm FROM gen_durable.pick('aq', 'w1');
SELECT applied FROM pg_temp.out1(:a1, 'w1', 'retry');
SELECT attempt FROM gen_durable.pick('aq', 'w1');
SELECT applied, detail, job FROM pg_temp.out1(:a1, 'w1', 'await',
	'{"names": ["go", "stop"], "step": "decide", "state": {"w": 1}, "timeout": "1 hour"}');
SELECT * FROM pg_temp.st(:a1);
SELECT await_deadline > now() + interval '59 min' AS deadline_1_hour,
	   presented IS NULL AS nothing_presented
  FROM gen_durable.instances WHERE id = :a1;
-- not claimable while parked
SELECT count(*) FROM gen_durable.pick('aq', 'w1');
-- T8: a matching signal wakes it; the deadline is cleared (D11)
SELECT gen_durable.signal(:a1, 'go', '{"n": 1}');
SELECT status, awaits FROM pg_temp.st(:a1);
SELECT await_deadline IS NULL AS deadline_cleared FROM gen_durable.instances WHERE id = :a1;
-- await without timeout and without state keeps the state, no deadline
SELECT step, pg_temp.job(to_jsonb(j)) -> 'awaited' AS awaited FROM gen_durable.pick('aq', 'w1') j;
SELECT applied, detail FROM pg_temp.out1(:a1, 'w1', 'await',
	'{"names": ["other"], "step": "decide2"}');
SELECT step, state, steps, status, awaits FROM pg_temp.st(:a1);
SELECT await_deadline IS NULL AS no_deadline FROM gen_durable.instances WHERE id = :a1;
-- await consumes nothing: the presented "go" signal is still in the inbox
SELECT pg_temp.inbox(:a1);

------------------------------------------------------------------------
-- T7 recheck: a signal that arrived before the park wakes it at once
-- ("woken"), with the deadline cleared
------------------------------------------------------------------------
SELECT gen_durable.insert('a', queue => 'aq2') AS a2 \gset
SELECT fsm FROM gen_durable.pick('aq2', 'w1');
SELECT gen_durable.signal(:a2, 'early', '{"x": 1}');
SELECT applied, detail FROM pg_temp.out1(:a2, 'w1', 'await',
	'{"names": ["early"], "step": "got_it", "timeout": 600}');
SELECT step, steps, status, awaits, unclaimed FROM pg_temp.st(:a2);
SELECT await_deadline IS NULL AS deadline_cleared FROM gen_durable.instances WHERE id = :a2;
-- the signal is presented to the next step as awaited
SELECT step, pg_temp.job(to_jsonb(j)) -> 'awaited' AS awaited FROM gen_durable.pick('aq2', 'w1') j;
-- re-awaiting the same name with only that (already presented) signal
-- parks instead of spinning (I-4, D20)
SELECT applied, detail FROM pg_temp.out1(:a2, 'w1', 'await',
	'{"names": ["early"], "step": "again"}');
SELECT step, status, awaits FROM pg_temp.st(:a2);
-- a new signal of the name wakes it, and both are presented
SELECT gen_durable.signal(:a2, 'early', '{"x": 2}');
SELECT status FROM pg_temp.st(:a2);
SELECT step, pg_temp.job(to_jsonb(j)) -> 'awaited' AS awaited FROM gen_durable.pick('aq2', 'w1') j;
-- awaiting also a name whose signal was never presented wakes at once;
-- once everything awaited was presented, the same await parks
SELECT gen_durable.signal(:a2, 'side', '{}');
SELECT applied, detail FROM pg_temp.out1(:a2, 'w1', 'await',
	'{"names": ["early", "side"], "step": "third"}');
SELECT step, status, awaits FROM pg_temp.st(:a2);
SELECT step, pg_temp.job(to_jsonb(j)) -> 'awaited' AS awaited FROM gen_durable.pick('aq2', 'w1') j;
SELECT applied, detail FROM pg_temp.out1(:a2, 'w1', 'await',
	'{"names": ["side", "early"], "step": "fourth"}');
SELECT step, status FROM pg_temp.st(:a2);

------------------------------------------------------------------------
-- consumption (§5.3, I-27, D20): next consumes exactly the awaited ids
-- presented at pick; latecomers and never-awaited signals survive
------------------------------------------------------------------------
SELECT gen_durable.insert('c', queue => 'cq') AS c1 \gset
SELECT fsm FROM gen_durable.pick('cq', 'w1');
SELECT applied FROM pg_temp.out1(:c1, 'w1', 'await', '{"names": ["go"], "step": "s"}');
SELECT gen_durable.signal(:c1, 'note', '{"n": 1}');
SELECT gen_durable.signal(:c1, 'go', '{"n": 2}');
SELECT pg_temp.job(to_jsonb(j)) -> 'awaited' AS awaited FROM gen_durable.pick('cq', 'w1') j;
-- latecomers while the step runs
SELECT gen_durable.signal(:c1, 'go', '{"n": 3}');
SELECT gen_durable.signal(:c1, 'note', '{"n": 4}');
SELECT applied FROM pg_temp.out1(:c1, 'w1', 'next', '{"step": "s2"}');
SELECT pg_temp.inbox(:c1);
-- the next step is not awaiting: nothing presented, nothing consumed
SELECT pg_temp.job(to_jsonb(j)) -> 'awaited' AS awaited FROM gen_durable.pick('cq', 'w1') j;
SELECT applied FROM pg_temp.out1(:c1, 'w1', 'next', '{"step": "s3"}');
SELECT pg_temp.inbox(:c1);
-- retry consumes nothing: the redo is presented the same awaited signals
SELECT count(*) FROM gen_durable.pick('cq', 'w1');
SELECT applied, detail FROM pg_temp.out1(:c1, 'w1', 'await', '{"names": ["note"], "step": "s4"}');
SELECT pg_temp.job(to_jsonb(j)) -> 'awaited' AS awaited, attempt FROM gen_durable.pick('cq', 'w1') j;
SELECT applied FROM pg_temp.out1(:c1, 'w1', 'retry');
SELECT pg_temp.job(to_jsonb(j)) -> 'awaited' AS awaited, attempt FROM gen_durable.pick('cq', 'w1') j;
SELECT pg_temp.inbox(:c1);
-- done purges the whole inbox (T12)
SELECT applied FROM pg_temp.out1(:c1, 'w1', 'done', '{"result": {"total": 7}}');
SELECT * FROM pg_temp.st(:c1);
SELECT pg_temp.inbox(:c1) AS inbox_purged;

------------------------------------------------------------------------
-- T12 done and T13 fail: result / error, everything else kept
------------------------------------------------------------------------
SELECT gen_durable.insert('d', queue => 'dq', state => '{"s": 1}', rate_limit => 'rl',
						  concurrency_key => 'dk', weight => 2) AS d1 \gset
SELECT gen_durable.insert('d', queue => 'dq', state => '{"s": 2}') AS d2 \gset
SELECT gen_durable.insert('d', queue => 'dq', state => '{"s": 3}') AS d3 \gset
SELECT gen_durable.insert('d', queue => 'dq', state => '{"s": 4}') AS d4 \gset
SELECT gen_durable.insert('d', queue => 'dq', state => '{"s": 5}') AS d5 \gset
SELECT count(*) FROM gen_durable.pick('dq', 'w1');
SELECT eligible_at AS d1_eligible FROM gen_durable.instances WHERE id = :d1 \gset
SELECT gen_durable.signal(:d1, 'x'), gen_durable.signal(:d2, 'x'), gen_durable.signal(:d3, 'x');
SELECT f.id = ANY (ARRAY[:d1, :d2, :d3, :d4, :d5]) AS known, f.applied, f.detail, f.job
  FROM gen_durable.flush(format('[
	{"id": %s, "worker": "w1", "kind": "done", "result": {"ok": true}},
	{"id": %s, "worker": "w1", "kind": "done"},
	{"id": %s, "worker": "w1", "kind": "fail", "error": {"code": 42}},
	{"id": %s, "worker": "w1", "kind": "fail"},
	{"id": %s, "worker": "w1", "kind": "fail", "error": "plain text"}]',
	:d1, :d2, :d3, :d4, :d5)::jsonb) f;
SELECT s.* FROM unnest(ARRAY[:d1, :d2, :d3, :d4, :d5]) WITH ORDINALITY AS u(id, n),
	   pg_temp.st(u.id) s ORDER BY u.n;
SELECT eligible_at = :'d1_eligible' AS eligible_kept FROM gen_durable.instances WHERE id = :d1;
SELECT count(*) AS inboxes_purged FROM gen_durable.signals WHERE target_id IN (:d1, :d2, :d3);
-- a terminal instance is not claimable and takes no further outcome
SELECT count(*) FROM gen_durable.pick('dq', 'w1');
SELECT applied, detail FROM pg_temp.out1(:d1, 'w1', 'next', '{"step": "zombie"}');
SELECT status, step FROM pg_temp.st(:d1);

------------------------------------------------------------------------
-- T17 continue: next with continue keeps the claim and returns the
-- refreshed job; the next outcome of the same worker applies
------------------------------------------------------------------------
SELECT gen_durable.insert('i', queue => 'iq', state => '{"v": 0}', concurrency_key => 'ik',
						  correlation_key => 'inline-1', metadata => '{"t": 1}') AS i1 \gset
SELECT fsm FROM gen_durable.pick('iq', 'w1');
SELECT applied FROM pg_temp.out1(:i1, 'w1', 'await', '{"names": ["go"], "step": "s1"}');
SELECT gen_durable.signal(:i1, 'go', '{"g": 1}');
SELECT pg_temp.job(to_jsonb(j)) -> 'awaited' AS awaited FROM gen_durable.pick('iq', 'w1') j;
SELECT gen_durable.signal(:i1, 'late', '{"l": 1}');
SELECT applied, detail, pg_temp.job(job) AS job,
	   (job ->> 'id')::bigint = :i1 AS job_id,
	   (job ->> 'lease_expires_at')::timestamptz > now() + interval '25 s' AS lease_default
  FROM pg_temp.out1(:i1, 'w1', 'next',
	'{"step": "s2", "state": {"v": 1}, "continue": true, "rate_limit": "rr", "weight": 4}');
SELECT * FROM pg_temp.st(:i1);
SELECT locked_by, lease_expires_at > now() + interval '25 s' AS lease_extended,
	   presented IS NULL AS nothing_presented
  FROM gen_durable.instances WHERE id = :i1;
-- the awaited "go" was consumed, the latecomer survives
SELECT pg_temp.inbox(:i1);
-- continue with an explicit lease, keeping the concurrency key explicitly
SELECT applied, (job ->> 'step') AS step,
	   (job ->> 'lease_expires_at')::timestamptz > now() + interval '9 min' AS lease_10_min
  FROM pg_temp.out1(:i1, 'w1', 'next',
	'{"step": "s3", "continue": true, "lease": "10 min", "concurrency_key": "ik"}');
SELECT step, steps, status, concurrency_key FROM pg_temp.st(:i1);
-- continue releasing the key stays inline
SELECT applied, (job ->> 'step') AS step
  FROM pg_temp.out1(:i1, 'w1', 'next', '{"step": "s4", "continue": true, "concurrency_key": null}');
SELECT step, steps, status, concurrency_key FROM pg_temp.st(:i1);
-- continue with a new (unconfigured) concurrency key is committed as a plain
-- next: requeued, runnable, no job (D10, I-10)
SELECT applied, detail, job
  FROM pg_temp.out1(:i1, 'w1', 'next', '{"step": "s5", "continue": true, "concurrency_key": "ik2"}');
SELECT * FROM pg_temp.st(:i1);
-- continue: false is a plain next
SELECT fsm FROM gen_durable.pick('iq', 'w1');
SELECT applied, detail, job
  FROM pg_temp.out1(:i1, 'w1', 'next', '{"step": "s6", "continue": false}');
SELECT step, steps, status FROM pg_temp.st(:i1);
-- a keyless instance continuing to a new key is requeued too
SELECT gen_durable.insert('i', queue => 'iq2') AS i2 \gset
SELECT fsm FROM gen_durable.pick('iq2', 'w1');
SELECT applied, detail FROM pg_temp.out1(:i2, 'w1', 'next',
	'{"step": "s1", "continue": true, "concurrency_key": "fresh"}');
SELECT step, status, concurrency_key FROM pg_temp.st(:i2);

------------------------------------------------------------------------
-- max_steps budget (D3): the outcome that would exceed it is not applied;
-- the instance fails with budget_exhausted keeping the last state
------------------------------------------------------------------------
SELECT gen_durable.insert('b', queue => 'bq', state => '{"v": 0}', max_steps => 2) AS b1 \gset
SELECT fsm FROM gen_durable.pick('bq', 'w1');
SELECT applied FROM pg_temp.out1(:b1, 'w1', 'next', '{"step": "s1", "state": {"v": 1}}');
SELECT fsm FROM gen_durable.pick('bq', 'w1');
SELECT applied FROM pg_temp.out1(:b1, 'w1', 'retry', '{"state": {"v": 11}}');
SELECT fsm FROM gen_durable.pick('bq', 'w1');
SELECT applied, job IS NOT NULL AS has_job
  FROM pg_temp.out1(:b1, 'w1', 'next', '{"step": "s2", "state": {"v": 2}, "continue": true}');
SELECT gen_durable.signal(:b1, 'x');
SELECT applied, detail, job FROM pg_temp.out1(:b1, 'w1', 'next', '{"step": "s3", "state": {"v": 3}}');
SELECT * FROM pg_temp.st(:b1);
SELECT pg_temp.inbox(:b1) AS inbox_purged;
-- an await is a step too
SELECT gen_durable.insert('b', queue => 'bq2', max_steps => 1) AS b2 \gset
SELECT fsm FROM gen_durable.pick('bq2', 'w1');
SELECT applied FROM pg_temp.out1(:b2, 'w1', 'await', '{"names": ["x"], "step": "s1"}');
SELECT gen_durable.signal(:b2, 'x');
SELECT fsm FROM gen_durable.pick('bq2', 'w1');
SELECT applied, detail FROM pg_temp.out1(:b2, 'w1', 'await', '{"names": ["x"], "step": "s2"}');
SELECT step, steps, status, error FROM pg_temp.st(:b2);
-- done and fail at the budget are fine
SELECT gen_durable.insert('b', queue => 'bq3', max_steps => 1) AS b3 \gset
SELECT fsm FROM gen_durable.pick('bq3', 'w1');
SELECT applied FROM pg_temp.out1(:b3, 'w1', 'next', '{"step": "s1"}');
SELECT fsm FROM gen_durable.pick('bq3', 'w1');
SELECT applied, detail FROM pg_temp.out1(:b3, 'w1', 'done', '{"result": {"r": 1}}');
SELECT step, steps, status, result FROM pg_temp.st(:b3);

------------------------------------------------------------------------
-- stale (I-6): another worker, an instance that is not executing, a
-- missing instance; nothing changes
------------------------------------------------------------------------
SELECT gen_durable.insert('s', queue => 'sq', state => '{"v": 0}') AS s1 \gset
SELECT gen_durable.insert('s', queue => 'sq2', state => '{"v": 0}') AS s2 \gset
SELECT fsm FROM gen_durable.pick('sq', 'owner');
SELECT gen_durable.signal(:s1, 'x');
SELECT applied, detail, job FROM gen_durable.flush(format('[
	{"id": %s, "worker": "intruder", "kind": "done"},
	{"id": %s, "worker": "owner", "kind": "fail"},
	{"id": 999999999, "worker": "owner", "kind": "done"}]', :s1, :s2)::jsonb);
SELECT applied, detail, job FROM pg_temp.out1(:s1, 'intruder', 'next', '{"step": "bad", "continue": true}');
SELECT applied, detail, job FROM pg_temp.out1(:s1, 'intruder', 'await', '{"names": ["x"], "step": "bad"}');
SELECT * FROM pg_temp.st(:s1);
SELECT locked_by FROM gen_durable.instances WHERE id = :s1;
SELECT * FROM pg_temp.st(:s2);
SELECT pg_temp.inbox(:s1);
-- the owner's outcome still applies
SELECT applied FROM pg_temp.out1(:s1, 'owner', 'next', '{"step": "s2"}');
-- and a second outcome for the same claim is stale
SELECT applied, detail FROM pg_temp.out1(:s1, 'owner', 'done');
SELECT step, status FROM pg_temp.st(:s1);
-- a cancelled claim: the worker's outcome is stale (D14)
SELECT fsm FROM gen_durable.pick('sq', 'owner');
SELECT gen_durable.cancel(:s1, 'operator');
SELECT applied, detail FROM pg_temp.out1(:s1, 'owner', 'next', '{"step": "s3"}');
SELECT step, status, error, unclaimed FROM pg_temp.st(:s1);

------------------------------------------------------------------------
-- invalid entries (D9): reported with the reason, their instance stays
-- claimed, the valid rest of the batch commits
------------------------------------------------------------------------
SELECT gen_durable.insert('v', queue => 'vq') AS v1 \gset
SELECT gen_durable.insert('v', queue => 'vq') AS v2 \gset
SELECT count(*) FROM gen_durable.pick('vq', 'w1');
SELECT n, f.id = :v1 AS is_v1, f.applied, f.detail
  FROM gen_durable.flush(format('[
	{"id": %1$s, "worker": "w1", "kind": "jump"},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "colour": "red"},
	{"id": %1$s, "worker": "w1", "kind": "done", "step": "s"},
	{"id": %1$s, "worker": "w1", "kind": "next"},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": ""},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": 5},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "state": [1]},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "state": "x"},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "weight": 0},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "rate_limit": ""},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "concurrency_key": 1},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "fsm_version": 1.5},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "continue": "yes"},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "lease": 0},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "lease": "10 s"},
	{"id": %1$s, "worker": "w1", "kind": "retry", "delay": -1},
	{"id": %1$s, "worker": "w1", "kind": "retry", "delay": "-5 s"},
	{"id": %1$s, "worker": "w1", "kind": "retry", "delay": "a while"},
	{"id": %1$s, "worker": "w1", "kind": "retry", "delay": "100000000 years"},
	{"id": %1$s, "worker": "w1", "kind": "next", "step": "s", "continue": true, "lease": "2000000000 days"},
	{"id": 9223372036854775808, "worker": "w1", "kind": "done"},
	{"id": 12.5, "worker": "w1", "kind": "done"},
	{"id": %1$s, "worker": "w1", "kind": "retry", "state": null},
	{"id": %1$s, "worker": "w1", "kind": "await", "step": "s"},
	{"id": %1$s, "worker": "w1", "kind": "await", "names": [], "step": "s"},
	{"id": %1$s, "worker": "w1", "kind": "await", "names": "go", "step": "s"},
	{"id": %1$s, "worker": "w1", "kind": "await", "names": ["go", ""], "step": "s"},
	{"id": %1$s, "worker": "w1", "kind": "await", "names": ["go", 1], "step": "s"},
	{"id": %1$s, "worker": "w1", "kind": "await", "names": ["go"]},
	{"id": %1$s, "worker": "w1", "kind": "await", "names": ["go"], "step": "s", "timeout": 0},
	{"id": %1$s, "worker": "w1", "kind": "await", "names": ["go"], "step": "s", "timeout": "x"},
	{"id": %1$s, "worker": "w1", "kind": "fail", "result": {}},
	{"worker": "w1", "kind": "done"},
	{"id": "1x", "worker": "w1", "kind": "done"},
	{"id": 0, "worker": "w1", "kind": "done"},
	{"id": %1$s, "kind": "done"},
	{"id": %1$s, "worker": "", "kind": "done"},
	{"id": %1$s, "worker": "w1"},
	{"id": %1$s, "worker": "w1", "kind": 3},
	[1, 2],
	"done",
	null,
	{"id": %2$s, "worker": "w1", "kind": "next", "step": "valid"},
	{"id": %2$s, "worker": "w1", "kind": "done"}]', :v1, :v2)::jsonb)
	WITH ORDINALITY AS f(id, applied, detail, job, n);
-- v1 stays claimed and unchanged; v2 took its (first) valid outcome
SELECT step, status, unclaimed, steps FROM pg_temp.st(:v1);
SELECT locked_by FROM gen_durable.instances WHERE id = :v1;
SELECT step, status, unclaimed, steps FROM pg_temp.st(:v2);
-- v1's owner can still commit
SELECT applied FROM pg_temp.out1(:v1, 'w1', 'done');

------------------------------------------------------------------------
-- T9 timeout, T14 reaper and T16 release, with their columns
------------------------------------------------------------------------
SELECT gen_durable.insert('t', queue => 'tq', state => '{"t": 1}', concurrency_key => 'tk')
	   AS t1 \gset
SELECT fsm FROM gen_durable.pick('tq', 'w1');
SELECT applied FROM pg_temp.out1(:t1, 'w1', 'await', '{"names": ["x"], "step": "s1", "timeout": 30}');
UPDATE gen_durable.instances SET await_deadline = now() - interval '1 s' WHERE id = :t1;
SELECT gen_durable.run_maintenance() ->> 'timeouts' AS timeouts;
SELECT * FROM pg_temp.st(:t1);
SELECT await_deadline IS NULL AS deadline_cleared, timed_out FROM gen_durable.instances WHERE id = :t1;
-- T14: an expired lease returns the claim with attempt + 1, eligible_at kept
SELECT step, timed_out FROM gen_durable.pick('tq', 'w1');
SELECT eligible_at AS t1_eligible FROM gen_durable.instances WHERE id = :t1 \gset
UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 s' WHERE id = :t1;
SELECT gen_durable.run_maintenance() ->> 'reaped' AS reaped;
SELECT * FROM pg_temp.st(:t1);
SELECT eligible_at = :'t1_eligible' AS eligible_kept, timed_out
  FROM gen_durable.instances WHERE id = :t1;
-- T16: release returns the claim without counting an attempt
SELECT attempt FROM gen_durable.pick('tq', 'w1');
SELECT gen_durable.release('w1', ARRAY[:t1]::bigint[]);
SELECT * FROM pg_temp.st(:t1);
SELECT eligible_at = :'t1_eligible' AS eligible_kept FROM gen_durable.instances WHERE id = :t1;
-- a stale worker's outcome after the reaper and a re-claim is stale
SELECT attempt FROM gen_durable.pick('tq', 'w2');
SELECT applied, detail FROM pg_temp.out1(:t1, 'w1', 'done');
SELECT applied, detail FROM pg_temp.out1(:t1, 'w2', 'done');
SELECT status, attempt, result FROM pg_temp.st(:t1);

------------------------------------------------------------------------
-- the fast path (done and plain next, written without the lock
-- statement) and the locked path in one batch: each entry gets exactly
-- what it would get alone
------------------------------------------------------------------------
SELECT gen_durable.insert('m', queue => 'mq') AS m_done,
	   gen_durable.insert('m', queue => 'mq') AS m_next,
	   gen_durable.insert('m', queue => 'mq', max_steps => 1) AS m_budget,
	   gen_durable.insert('m', queue => 'mq') AS m_cont,
	   gen_durable.insert('m', queue => 'mq') AS m_stale,
	   gen_durable.insert('m', queue => 'mq') AS m_signalled,
	   gen_durable.insert('m', queue => 'mparent') AS m_parent \gset
SELECT count(*) FROM gen_durable.pick('mparent', 'wm');
SELECT applied FROM pg_temp.out1(:m_parent, 'wm', 'spawn',
	'{"step": "joined", "children": [{"fsm": "c", "queue": "mq"}]}');
SELECT id AS m_child FROM gen_durable.instances WHERE parent_id = :m_parent \gset
SELECT count(*) FROM gen_durable.pick('mq', 'wm', 10);
-- a step already taken by max_steps; a signal in an inbox (done purges it)
UPDATE gen_durable.instances SET steps = 1 WHERE id = :m_budget;
SELECT gen_durable.signal(:m_signalled, 'note');
SELECT f.id = :m_done AS is_done, f.id = :m_child AS is_child, f.applied, f.detail,
	   f.job ->> 'step' AS job_step
  FROM gen_durable.flush(jsonb_build_array(
		jsonb_build_object('id', :m_child, 'worker', 'wm', 'kind', 'done'),
		jsonb_build_object('id', :m_done, 'worker', 'wm', 'kind', 'done', 'result', '{"r": 1}'::jsonb),
		jsonb_build_object('id', :m_next, 'worker', 'wm', 'kind', 'next', 'step', 's2'),
		jsonb_build_object('id', :m_budget, 'worker', 'wm', 'kind', 'next', 'step', 's2'),
		jsonb_build_object('id', :m_cont, 'worker', 'wm', 'kind', 'next', 'step', 's2',
						   'continue', true),
		jsonb_build_object('id', :m_stale, 'worker', 'other', 'kind', 'done'),
		jsonb_build_object('id', :m_done, 'worker', 'wm', 'kind', 'done'),
		jsonb_build_object('id', :m_signalled, 'worker', 'wm', 'kind', 'done'))) f;
SELECT id = :m_child AS child, id = :m_parent AS parent, step, status, steps, attempt,
	   result, error ->> 'reason' AS reason, locked_by, children_pending
  FROM gen_durable.instances WHERE queue IN ('mq', 'mparent') ORDER BY id;
SELECT count(*) AS inbox_left FROM gen_durable.signals WHERE target_id = :m_signalled;

------------------------------------------------------------------------
-- the argument itself: not an array, NULL, empty
------------------------------------------------------------------------
SELECT * FROM gen_durable.flush(NULL);
SELECT * FROM gen_durable.flush('{"id": 1, "worker": "w", "kind": "done"}');
SELECT * FROM gen_durable.flush('"done"');
SELECT * FROM gen_durable.flush('3');
SELECT * FROM gen_durable.flush(
	(SELECT jsonb_agg(jsonb_build_object('id', g, 'worker', 'w', 'kind', 'done'))
	   FROM generate_series(1, 10001) g));
SELECT count(*) FROM gen_durable.flush('[]');

DROP FUNCTION pg_temp.st(bigint);
DROP EXTENSION gen_durable;
