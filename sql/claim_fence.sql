-- claim_fence.sql: an outcome that names its claim (the job's "claim")
-- applies only while that claim is the instance's latest (0.6.0).
-- Without it, flush tells claims apart by (id, worker) alone, and a late
-- outcome of a claim this worker lost would apply to its later claim.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse
\i test/regress_helpers.sql

-- one outcome naming a claim; extra holds the kind's fields
CREATE FUNCTION pg_temp.fenced(id bigint, worker text, claim bigint, kind text,
							   extra jsonb DEFAULT '{}')
RETURNS TABLE (applied text, detail text)
LANGUAGE sql AS $$
	SELECT f.applied, f.detail
	  FROM gen_durable.flush(jsonb_build_array(
			jsonb_build_object('id', id, 'worker', worker, 'kind', kind, 'claim', claim)
			|| extra)) f
$$;

-- the fenced columns of an instance
CREATE FUNCTION pg_temp.row_of(bigint) RETURNS TABLE (
	status gen_durable.status, step text, attempt int, steps bigint, claim bigint,
	locked_by text)
LANGUAGE sql AS $$
	SELECT status, step, attempt, steps, claim, locked_by
	  FROM gen_durable.instances WHERE id = $1
$$;

------------------------------------------------------------------------
-- the race the fence closes: W1 loses its claim to lease expiry, W2 runs
-- the step, W1 claims the instance again; W1's late outcome of the first
-- claim must not apply to its new one
------------------------------------------------------------------------
SELECT gen_durable.insert('f', '{}', 'a', queue => 'fq') AS a \gset
SELECT pg_temp.row_of(:a);
SELECT step, attempt, steps, claim FROM gen_durable.pick('fq', 'W1', 1, '1 millisecond');
SELECT pg_sleep(0.02);
SELECT gen_durable.run_maintenance()->'reaped' AS reaped;
SELECT step, attempt, steps, claim FROM gen_durable.pick('fq', 'W2', 1, '1 minute');
SELECT * FROM pg_temp.fenced(:a, 'W2', 2, 'next', '{"step": "b"}');
SELECT step, attempt, steps, claim FROM gen_durable.pick('fq', 'W1', 1, '1 minute');
-- W1's outcome of step a, under claim 1: stale, the row is untouched
SELECT * FROM pg_temp.fenced(:a, 'W1', 1, 'next', '{"step": "c"}');
SELECT pg_temp.row_of(:a);
-- an outcome without a claim is fenced by the worker alone: it applies
-- (this is what a worker that sends no claim risks)
BEGIN;
SELECT * FROM pg_temp.out1(:a, 'W1', 'next', '{"step": "c"}');
ROLLBACK;
-- the current claim's outcome applies
SELECT * FROM pg_temp.fenced(:a, 'W1', 3, 'next', '{"step": "c"}');
SELECT pg_temp.row_of(:a);

------------------------------------------------------------------------
-- every kind checks the fence, on the fast path (done, next) and the
-- locked path (retry, await, spawn, fail, continue with a key)
------------------------------------------------------------------------
SELECT array_agg(id ORDER BY id) AS ids
  FROM gen_durable.insert_many((SELECT jsonb_agg(jsonb_build_object('fsm', 'f', 'step', 'a',
														   'queue', 'fk'))
							   FROM generate_series(1, 7))) \gset
SELECT count(*) AS picked, min(claim) AS claim_min, max(claim) AS claim_max
  FROM gen_durable.pick('fk', 'W', 20, '1 minute');
SELECT kind, f.applied, f.detail
  FROM unnest(ARRAY['done', 'next', 'retry', 'await', 'spawn', 'fail'],
			  ARRAY['{}', '{"step": "b"}', '{}', '{"names": ["s"], "step": "b"}',
					'{"children": [{"fsm": "c"}], "step": "b"}', '{}']::jsonb[])
	   WITH ORDINALITY AS k(kind, extra, n),
	   LATERAL pg_temp.fenced((:'ids'::bigint[])[n], 'W', 2, kind, extra) f
 ORDER BY n;
-- the same with the held claim, in one batch: all apply
SELECT f.applied, count(*)
  FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'W', 'claim', 1)
										   || o ORDER BY id)
							FROM unnest(:'ids'::bigint[],
										ARRAY['{"kind": "done"}', '{"kind": "next", "step": "b"}',
											  '{"kind": "retry"}',
											  '{"kind": "await", "names": ["s"], "step": "b"}',
											  '{"kind": "spawn", "children": [{"fsm": "c"}], "step": "b"}',
											  '{"kind": "fail"}',
											  '{"kind": "next", "step": "b", "continue": true, "concurrency_key": "k"}']::jsonb[])
								 AS e(id, o))) f
 GROUP BY f.applied;
SELECT status, count(*) FROM gen_durable.instances WHERE id = ANY (:'ids') GROUP BY status
 ORDER BY status;

------------------------------------------------------------------------
-- a mixed fast-path batch: a stale claim, the held claim, no claim
------------------------------------------------------------------------
SELECT array_agg(id ORDER BY id) AS m
  FROM gen_durable.insert_many((SELECT jsonb_agg(jsonb_build_object('fsm', 'f', 'step', 'a',
														   'queue', 'fm'))
							   FROM generate_series(1, 3))) \gset
SELECT count(*) FROM gen_durable.pick('fm', 'W', 3, '1 minute');
SELECT f.id = (:'m'::bigint[])[1] AS first, f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(
		 jsonb_build_object('id', (:'m'::bigint[])[1], 'worker', 'W', 'kind', 'done', 'claim', 7),
		 jsonb_build_object('id', (:'m'::bigint[])[2], 'worker', 'W', 'kind', 'done', 'claim', 1),
		 jsonb_build_object('id', (:'m'::bigint[])[3], 'worker', 'W', 'kind', 'done'))) f;
SELECT (pg_temp.row_of(id)).status FROM unnest(:'m'::bigint[]) AS id;

------------------------------------------------------------------------
-- an inline continue starts a new claim: its job carries it, and the
-- claim it continued from is stale
------------------------------------------------------------------------
SELECT gen_durable.insert('f', '{}', 'a', queue => 'fc') AS c \gset
SELECT claim FROM gen_durable.pick('fc', 'W', 1, '1 minute');
SELECT f.applied, f.job->>'step' AS step, f.job->'claim' AS claim
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :c, 'worker', 'W', 'kind', 'next', 'step', 'b', 'continue', true, 'claim', 1))) f;
SELECT * FROM pg_temp.fenced(:c, 'W', 1, 'done');
SELECT * FROM pg_temp.fenced(:c, 'W', 2, 'done');
SELECT pg_temp.row_of(:c);

------------------------------------------------------------------------
-- release and a reclaim keep (steps, attempt) but still start new claims
------------------------------------------------------------------------
SELECT gen_durable.insert('f', '{}', 'a', queue => 'fr') AS r \gset
SELECT attempt, steps, claim FROM gen_durable.pick('fr', 'W', 1, '1 minute');
SELECT gen_durable.release('W');
SELECT attempt, steps, claim FROM gen_durable.pick('fr', 'W', 1, '1 minute');
SELECT * FROM pg_temp.fenced(:r, 'W', 1, 'done');
SELECT * FROM pg_temp.fenced(:r, 'W', 2, 'done');

------------------------------------------------------------------------
-- a malformed claim makes the entry invalid; null is no fence
------------------------------------------------------------------------
SELECT gen_durable.insert('f', '{}', 'a', queue => 'fv') AS v \gset
SELECT claim FROM gen_durable.pick('fv', 'W', 1, '1 minute');
SELECT c AS claim, f.applied, f.detail
  FROM unnest(ARRAY['0', '-1', '1.5', '"1x"', '""', '"-1"', '"0"', '" 1"',
					'"99999999999999999999"', 'true', '1e30']::jsonb[]) AS c,
	   LATERAL gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :v, 'worker', 'W', 'kind', 'done', 'claim', c))) f;
SELECT f.applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :v, 'worker', 'W', 'kind', 'done', 'claim', null))) f;

------------------------------------------------------------------------
-- 0.7.0: the id and the claim may be strings of decimal digits, as a
-- JavaScript client receives bigints (node-postgres returns int8 as a
-- string; a JS number rounds past 2^53); the fence holds the same way
------------------------------------------------------------------------
SELECT gen_durable.insert('f', '{}', 'a', queue => 'fs') AS s \gset
SELECT claim FROM gen_durable.pick('fs', 'W', 1, '1 minute');
SELECT gen_durable.release('W');
SELECT claim FROM gen_durable.pick('fs', 'W', 1, '1 minute');
-- the lost claim 1, as strings: stale
SELECT f.applied, f.detail FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :s::text, 'worker', 'W', 'kind', 'next', 'step', 'b', 'claim', '1'))) f;
-- the current claim 2, as strings: applied, to the instance the string names
SELECT f.id = :s AS same_id, f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :s::text, 'worker', 'W', 'kind', 'next', 'step', 'b', 'claim', '2'))) f;
SELECT pg_temp.row_of(:s);
-- an id past 2^53 survives as a string (no such instance: stale, with its
-- exact id in the answer)
SELECT f.id, f.applied, f.detail FROM gen_durable.flush(
	'[{"id": "9007199254740993", "worker": "W", "kind": "done", "claim": "1"}]') f;

------------------------------------------------------------------------
-- gen_durable.require_claim (0.7.0): an outcome without its claim is
-- invalid, so a worker that forgets to send it is found at once
------------------------------------------------------------------------
SELECT gen_durable.insert('f', '{}', 'a', queue => 'fn') AS n \gset
SELECT claim FROM gen_durable.pick('fn', 'W', 1, '1 minute');
SET gen_durable.require_claim = on;
SELECT f.applied, f.detail FROM gen_durable.flush(jsonb_build_array(
	jsonb_build_object('id', :n, 'worker', 'W', 'kind', 'done'),
	jsonb_build_object('id', :n + 1000, 'worker', 'W', 'kind', 'done', 'claim', null))) f;
SELECT pg_temp.row_of(:n);
SELECT * FROM pg_temp.fenced(:n, 'W', 1, 'done');
RESET gen_durable.require_claim;
SELECT pg_temp.row_of(:n);

DROP FUNCTION pg_temp.fenced(bigint, text, bigint, text, jsonb), pg_temp.row_of(bigint);
DROP EXTENSION gen_durable;
