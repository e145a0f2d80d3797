-- limiter.sql: rate limits and concurrency gates (0.4.0)
-- (contract D6-D8, §4.2, §5.4, §10.2-10.4, §11; src/admit.c, src/credit.c,
-- src/limit_policy.c, src/buckets.c, src/pick.c)
--
-- Every group of rows below has a queue (and keys) of its own, so what one
-- group does never changes what another picks.  Rate limits are per day,
-- so the wall-clock refill during the test stays far below the rounding
-- of pg_temp.bk(); time passes by moving buckets.last_refill back.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

\i test/regress_helpers.sql
\i test/stats_helpers.sql

-- the bucket rows of the keys matching a LIKE pattern (tokens rounded)
CREATE FUNCTION pg_temp.bk(pat text)
RETURNS TABLE (kind text, key text, shard smallint, capacity float8, available numeric)
LANGUAGE sql AS $$
	SELECT b.kind, b.key, b.shard, b.capacity, round(b.available::numeric, 2)
	  FROM gen_durable.buckets b WHERE b.key LIKE pat
	 ORDER BY b.kind, b.key, b.shard
$$;

-- free slots of a gate key (NULL: no bucket rows, i.e. cold = full)
CREATE FUNCTION pg_temp.avail(k text) RETURNS float8
LANGUAGE sql AS $$
	SELECT sum(available) FROM gen_durable.buckets WHERE kind = 'conc' AND key = k
$$;

-- how many rows of a concurrency key execute now
CREATE FUNCTION pg_temp.ex(k text) RETURNS bigint
LANGUAGE sql AS $$
	SELECT count(*) FROM gen_durable.instances WHERE status = 'executing' AND concurrency_key = k
$$;

-- one pick; how many it claimed
CREATE FUNCTION pg_temp.pk(q text, w text, b int DEFAULT 10) RETURNS bigint
LANGUAGE sql AS $$
	SELECT count(*) FROM gen_durable.pick(q, w, batch => b, lease => '1 hour')
$$;

-- one pick; the labels (state->>'n') of the rows it claimed, in claim order
CREATE FUNCTION pg_temp.pkn(q text, w text, b int DEFAULT 10) RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(p.state ->> 'n', ',' ORDER BY p.ordinality), '-')
	  FROM gen_durable.pick(q, w, batch => b, lease => '1 hour') WITH ORDINALITY AS p
$$;

-- insert n labelled rows (state {"n": first..first+n-1}) in id order
CREATE FUNCTION pg_temp.ins(q text, n int, first int DEFAULT 1, ck text DEFAULT NULL,
							rl text DEFAULT NULL, wt float8 DEFAULT 1)
RETURNS bigint LANGUAGE sql AS $$
	SELECT count(gen_durable.insert('lim', jsonb_build_object('n', g), queue => q,
									concurrency_key => ck, rate_limit => rl, weight => wt))
	  FROM generate_series(first, first + n - 1) AS g
$$;

-- the status of each labelled row of a queue
CREATE FUNCTION pg_temp.rows(q text)
RETURNS TABLE (n text, status text, shard smallint, runnable_untouched bool)
LANGUAGE sql AS $$
	SELECT state ->> 'n', status::text, concurrency_shard,
		   status = 'runnable' AND locked_by IS NULL AND updated_at = inserted_at
	  FROM gen_durable.instances WHERE queue = q ORDER BY id
$$;

-- the limiter's counters, for moved()
\set limiter_counters '{throttled_conc, throttled_rate, limiter_contended, unknown_rate_limit, rate_weight_over_burst, buckets_swept, gate_shards_repaired}'
SELECT count(*) >= 0 AS baseline FROM pg_temp.moved(:'limiter_counters');

------------------------------------------------------------------------
-- 1. A gate of K = 3: picks of batch 2, 2, 2 over 10 runnable rows of
-- key g:a admit 2, 1, 0 of them; partition g:b, whose 5 rows come after,
-- has its own K.  Rows a full gate cannot admit do not take a place in
-- the batch (P4): once g:a is full the picks reach g:b.  Denied rows stay
-- runnable and untouched
------------------------------------------------------------------------
SELECT gen_durable.set_concurrency_limit('g', 3);
SELECT kind, name, rate, capacity, shards FROM gen_durable.limits;
SELECT pg_temp.ins('q1', 10, 1, 'g:a') AS g_a;
SELECT pg_temp.ins('q1', 5, 11, 'g:b') AS g_b;
-- cold key: minted with the slots taken
SELECT pg_temp.pkn('q1', 'w1', 2) AS pick1, pg_temp.ex('g:a') AS exec_a, pg_temp.avail('g:a') AS avail_a;
-- one slot left for two candidates: the first gets it (throttled_conc 1)
SELECT pg_temp.pkn('q1', 'w1', 2) AS pick2, pg_temp.ex('g:a') AS exec_a, pg_temp.avail('g:a') AS avail_a;
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- g:a full: its rows are passed over, g:b's first two run
SELECT pg_temp.pkn('q1', 'w1', 2) AS pick3, pg_temp.ex('g:a') AS exec_a, pg_temp.ex('g:b') AS exec_b;
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- g:b's third slot: one of the two candidates (throttled_conc 1)
SELECT pg_temp.pkn('q1', 'w1', 2) AS pick4, pg_temp.ex('g:a') AS exec_a, pg_temp.ex('g:b') AS exec_b;
SELECT * FROM pg_temp.moved(:'limiter_counters');
SELECT pg_temp.pkn('q1', 'w1', 2) AS pick5, pg_temp.pkn('q1', 'w1', 20) AS pick6;
SELECT pg_temp.ex('g:a') AS exec_a, pg_temp.ex('g:b') AS exec_b;
SELECT * FROM pg_temp.bk('g:%');
-- admitted rows hold shard 0; denied rows were never written
SELECT * FROM pg_temp.rows('q1');
-- nothing counted: full gates' rows were not candidates
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- a key whose name has no gate is the K=1 regime: one at a time, no buckets
SELECT pg_temp.ins('q1k', 3, 1, 'k1:a') AS k1;
SELECT pg_temp.pkn('q1k', 'w1') AS k1_pick, pg_temp.pkn('q1k', 'w1') AS k1_again, pg_temp.ex('k1:a') AS exec;
SELECT count(*) AS k1_buckets FROM gen_durable.buckets WHERE key LIKE 'k1%';
SELECT concurrency_shard IS NULL AS arbiter_regime
  FROM gen_durable.instances WHERE concurrency_key = 'k1:a' AND status = 'executing';

------------------------------------------------------------------------
-- 2. Every exit from executing returns the slot in its transaction.
-- Gate x has K = 2; each exit kind has a key x:<kind> with two holders
-- (workers w_<kind>) and a third row denied; after the exit the bucket
-- has 1 free slot again and a new pick admits one row, filling it
------------------------------------------------------------------------
SELECT gen_durable.set_concurrency_limit('x', 2);

-- three rows of key x:k in queue q_k; worker w_k claims two; returns the first
CREATE FUNCTION pg_temp.hold(k text, max_steps int DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	first bigint;
BEGIN
	SELECT gen_durable.insert('lim', jsonb_build_object('n', 1), queue => 'q_' || k,
							  concurrency_key => 'x:' || k, max_steps => max_steps)
	  INTO first;
	PERFORM pg_temp.ins('q_' || k, 2, 2, 'x:' || k);
	IF pg_temp.pk('q_' || k, 'w_' || k) <> 2 THEN
		RAISE EXCEPTION 'the gate did not admit exactly 2 of x:%', k;
	END IF;
	RETURN first;
END
$$;

-- the slot check after an exit: free slots now, a pick, free slots after
CREATE FUNCTION pg_temp.freed(k text)
RETURNS TABLE (avail_after_exit float8, executing_after_exit bigint, picked bigint,
			   avail_after_pick float8, executing bigint)
LANGUAGE plpgsql AS $$
BEGIN
	avail_after_exit := pg_temp.avail('x:' || k);
	executing_after_exit := pg_temp.ex('x:' || k);
	picked := pg_temp.pk('q_' || k, 'w2_' || k);
	avail_after_pick := pg_temp.avail('x:' || k);
	executing := pg_temp.ex('x:' || k);
	RETURN NEXT;
END
$$;

SELECT pg_temp.hold('done') AS h_done, pg_temp.hold('fail') AS h_fail,
	   pg_temp.hold('next') AS h_next, pg_temp.hold('retry') AS h_retry,
	   pg_temp.hold('await') AS h_await, pg_temp.hold('spawn') AS h_spawn,
	   pg_temp.hold('budget', max_steps => 2) AS h_budget,
	   pg_temp.hold('cancel') AS h_cancel, pg_temp.hold('failfn') AS h_failfn,
	   pg_temp.hold('release') AS h_release, pg_temp.hold('reap') AS h_reap \gset
-- every key: 2 held, 0 free, the third row denied (throttled_conc 11)
SELECT key, shard, capacity, available, pg_temp.ex(key) AS executing
  FROM gen_durable.buckets WHERE key LIKE 'x:%' ORDER BY key;
SELECT * FROM pg_temp.moved(:'limiter_counters');

-- flush done
SELECT * FROM pg_temp.out1(:h_done, 'w_done', 'done');
SELECT * FROM pg_temp.freed('done');
-- flush fail
SELECT * FROM pg_temp.out1(:h_fail, 'w_fail', 'fail', '{"error": {"why": "x"}}');
SELECT * FROM pg_temp.freed('fail');
-- flush next (not continued): the row is runnable again, behind row 2
SELECT * FROM pg_temp.out1(:h_next, 'w_next', 'next', '{"step": "two"}');
SELECT * FROM pg_temp.freed('next');
-- flush retry with attempts left (delayed, so the third row runs)
SELECT * FROM pg_temp.out1(:h_retry, 'w_retry', 'retry', '{"delay": "1 hour"}');
SELECT status, attempt FROM gen_durable.instances WHERE id = :h_retry;
SELECT * FROM pg_temp.freed('retry');
-- flush await: a parked row holds no slot
SELECT * FROM pg_temp.out1(:h_await, 'w_await', 'await', '{"names": ["go"], "step": "two"}');
SELECT * FROM pg_temp.freed('await');
-- flush spawn with a child: the parent waiting for children holds no slot
SELECT * FROM pg_temp.out1(:h_spawn, 'w_spawn', 'spawn',
	'{"step": "joined", "children": [{"fsm": "kid", "queue": "q_spawn_kids"}]}');
SELECT status, children_pending FROM gen_durable.instances WHERE id = :h_spawn;
SELECT * FROM pg_temp.freed('spawn');
-- a next with "continue": true that keeps its key keeps its slot: nothing
-- freed, the third row stays denied (max_steps = 2)
SELECT applied, detail, job ->> 'step' AS step, job ->> 'steps' AS steps
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :h_budget, 'worker', 'w_budget', 'kind', 'next', 'step', 'two', 'continue', true)));
SELECT status, step, concurrency_shard, pg_temp.avail('x:budget') AS avail
  FROM gen_durable.instances WHERE id = :h_budget;
SELECT pg_temp.pk('q_budget', 'w2_budget') AS denied_still, pg_temp.avail('x:budget') AS avail;
-- the same with its key named again
SELECT applied, detail, job ->> 'step' AS step, job ->> 'steps' AS steps
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :h_budget, 'worker', 'w_budget', 'kind', 'next', 'step', 'three', 'continue', true,
	'concurrency_key', 'x:budget')));
SELECT status, step, concurrency_shard, pg_temp.avail('x:budget') AS avail
  FROM gen_durable.instances WHERE id = :h_budget;
-- the outcome that would exceed max_steps fails the row (budget_exhausted)
-- and frees the slot
SELECT * FROM pg_temp.out1(:h_budget, 'w_budget', 'next', '{"step": "four", "continue": true}');
SELECT status, step, error ->> 'reason' AS reason, concurrency_shard
  FROM gen_durable.instances WHERE id = :h_budget;
SELECT * FROM pg_temp.freed('budget');
-- cancel()
SELECT gen_durable.cancel(:h_cancel) AS cancelled;
SELECT * FROM pg_temp.freed('cancel');
-- fail()
SELECT gen_durable.fail(:h_failfn, 'operator') AS failed;
SELECT * FROM pg_temp.freed('failfn');
-- release() of one claim
SELECT gen_durable.release('w_release', ARRAY[:h_release]::bigint[]) AS released;
SELECT * FROM pg_temp.freed('release');
-- the reaper: an expired lease.  The sweep heals nothing and deletes no
-- gate bucket: every credit so far was exact and every key is in use
UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 minute'
 WHERE id = :h_reap;
SELECT gen_durable.run_maintenance();
SELECT status, attempt FROM gen_durable.instances WHERE id = :h_reap;
SELECT * FROM pg_temp.freed('reap');
-- a first_error sibling cascade: child 0 executes under x:fe, child 1
-- fails; child 0 is cancelled and its slot returned
SELECT gen_durable.insert('fe', queue => 'q_fe_parent') AS fe \gset
SELECT pg_temp.pk('q_fe_parent', 'w_fe') AS picked;
SELECT * FROM pg_temp.out1(:fe, 'w_fe', 'spawn',
	'{"step": "joined", "join": "first_error", "children": [
	   {"fsm": "kid", "queue": "q_fe", "concurrency_key": "x:fe", "state": {"n": 1}},
	   {"fsm": "kid", "queue": "q_fe_bad"}]}');
SELECT pg_temp.ins('q_fe', 2, 2, 'x:fe') AS more;
SELECT pg_temp.pkn('q_fe', 'w_fe') AS fe_pick, pg_temp.avail('x:fe') AS avail;
SELECT id AS fe_bad FROM gen_durable.pick('q_fe_bad', 'w_fe', lease => '1 hour') \gset
SELECT * FROM pg_temp.out1(:fe_bad, 'w_fe', 'fail', '{"error": {"why": "bad"}}');
SELECT state ->> 'n' AS n, status, concurrency_shard FROM gen_durable.instances
 WHERE parent_id = :fe ORDER BY child_index;
SELECT * FROM pg_temp.freed('fe');
-- cancel() of a parent: its executing child (of key x:kid) is cancelled
-- with it and the child's slot returned
SELECT gen_durable.insert('kp', queue => 'q_kid_parent') AS kp \gset
SELECT pg_temp.pk('q_kid_parent', 'w_kid') AS picked;
SELECT * FROM pg_temp.out1(:kp, 'w_kid', 'spawn',
	'{"step": "joined", "children": [
	   {"fsm": "kid", "queue": "q_kid", "concurrency_key": "x:kid", "state": {"n": 1}}]}');
SELECT pg_temp.ins('q_kid', 2, 2, 'x:kid') AS more;
SELECT pg_temp.pkn('q_kid', 'w_kid') AS kid_pick, pg_temp.avail('x:kid') AS avail;
SELECT gen_durable.cancel(:kp) AS cancelled;
SELECT state ->> 'n' AS n, status, concurrency_shard FROM gen_durable.instances WHERE parent_id = :kp;
SELECT * FROM pg_temp.freed('kid');
-- every x key: 2 held, 0 free, as before.  throttled_conc 5: where the
-- exited row was runnable again (next, release, reap) or a cold key met
-- three candidates (fe, kid), one of two candidates got the free slot;
-- a full key's rows are not candidates (denied_still)
SELECT key, capacity, available, pg_temp.ex(key) AS executing
  FROM gen_durable.buckets WHERE key LIKE 'x:%' ORDER BY key;
SELECT * FROM pg_temp.moved(:'limiter_counters');

------------------------------------------------------------------------
-- 3. Rate limits: N per period, refill, weights, partitions, burst
------------------------------------------------------------------------
SELECT gen_durable.set_rate_limit('r', 3, '1 day');
SELECT kind, name, rate * 86400 AS per_day, capacity, shards FROM gen_durable.limits WHERE kind = 'rate';
SELECT pg_temp.ins('q3', 6, 1, rl => 'r') AS r_rows;
-- 3 granted (cold key minted with 0 left), then none: with no token left
-- its rows are not even candidates
SELECT pg_temp.pkn('q3', 'w3') AS granted, pg_temp.pkn('q3', 'w3') AS none;
SELECT * FROM pg_temp.bk('r');
-- throttled_rate 3: rows 4 to 6 in the first pick
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- 8 hours later one token has come back: one more
UPDATE gen_durable.buckets SET last_refill = last_refill - interval '8 hours' WHERE key = 'r';
SELECT pg_temp.pkn('q3', 'w3') AS after_8h, pg_temp.pkn('q3', 'w3') AS again;
SELECT * FROM pg_temp.bk('r');
-- 100 days later the bucket holds its burst (3), not more: the 2 rows
-- left run, 1 token remains, and of 2 more rows 1 runs
UPDATE gen_durable.buckets SET last_refill = last_refill - interval '100 days' WHERE key = 'r';
SELECT pg_temp.pkn('q3', 'w3') AS after_100d;
SELECT * FROM pg_temp.bk('r');
SELECT pg_temp.ins('q3', 2, 7, rl => 'r') AS more;
SELECT pg_temp.pkn('q3', 'w3') AS one_more;
SELECT * FROM pg_temp.bk('r');
-- throttled_rate 3: 2 rows after 8 hours, 1 at the end
SELECT * FROM pg_temp.moved(:'limiter_counters');

-- weights: 4 per day; rows of weights 1, 2, 2, 1.  In one pick the first
-- two take 3 tokens; the third (2) does not fit in the 1 left, and the
-- fourth (1), which would, is not let past it in that pick
SELECT gen_durable.set_rate_limit('rw', 4, '1 day');
SELECT pg_temp.ins('q3w', 1, 1, rl => 'rw', wt => 1) + pg_temp.ins('q3w', 1, 2, rl => 'rw', wt => 2)
	 + pg_temp.ins('q3w', 1, 3, rl => 'rw', wt => 2) + pg_temp.ins('q3w', 1, 4, rl => 'rw', wt => 1) AS rows;
SELECT pg_temp.pkn('q3w', 'w3') AS granted;
SELECT * FROM pg_temp.bk('rw');
-- throttled_rate 2 (rows 3 and 4)
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- the next pick: row 3 needs more tokens than the key has, so it takes
-- no place in the batch (P4) and row 4 runs
SELECT pg_temp.pkn('q3w', 'w3') AS next_pick;
SELECT * FROM pg_temp.bk('rw');
-- 12 hours later: 2 tokens, row 3 runs
UPDATE gen_durable.buckets SET last_refill = last_refill - interval '12 hours' WHERE key = 'rw';
SELECT pg_temp.pkn('q3w', 'w3') AS after_12h;
SELECT * FROM pg_temp.bk('rw');
SELECT * FROM pg_temp.rows('q3w');
SELECT * FROM pg_temp.moved(:'limiter_counters');

-- partitions: r:p1 and r:p2 each have a bucket of their own
SELECT pg_temp.ins('q3p', 4, 1, rl => 'r:p1') + pg_temp.ins('q3p', 4, 5, rl => 'r:p2') AS rows;
SELECT pg_temp.pkn('q3p', 'w3') AS granted;
SELECT * FROM pg_temp.bk('r:%');
SELECT * FROM pg_temp.moved(:'limiter_counters');

-- burst above allowed: 1 per day, saving up to 5
SELECT gen_durable.set_rate_limit('rb', 1, '1 day', burst => 5);
SELECT capacity, rate * 86400 AS per_day FROM gen_durable.limits WHERE kind = 'rate' AND name = 'rb';
SELECT pg_temp.ins('q3b', 7, 1, rl => 'rb') AS rows;
SELECT pg_temp.pkn('q3b', 'w3') AS burst;
SELECT * FROM pg_temp.bk('rb');
-- a day later one more
UPDATE gen_durable.buckets SET last_refill = last_refill - interval '1 day' WHERE key = 'rb';
SELECT pg_temp.pkn('q3b', 'w3') AS after_1d;
SELECT * FROM pg_temp.moved(:'limiter_counters');

-- a gated row with a rate limit needs both; a rate-denied row takes no slot
SELECT gen_durable.set_concurrency_limit('gr', 5);
SELECT gen_durable.set_rate_limit('rr', 2, '1 day');
SELECT pg_temp.ins('q3g', 4, 1, 'gr', 'rr') AS rows;
SELECT pg_temp.pkn('q3g', 'w3') AS both, pg_temp.avail('gr') AS slots_left;
SELECT * FROM pg_temp.bk('rr');
SELECT * FROM pg_temp.moved(:'limiter_counters');

------------------------------------------------------------------------
-- 4. Rate limits nobody configured: a WARNING, the rows wait without
-- using up a batch, counted in stats and in queues.unknown_rate_limit
------------------------------------------------------------------------
SELECT pg_temp.ins('q4', 2, 1, rl => 'nope:a') AS rows;
SELECT gen_durable.insert('lim', '{"n": 3}', queue => 'q4') IS NOT NULL AS keyless;
\set VERBOSITY default
SELECT ord, created FROM gen_durable.insert_many(
	'[{"fsm": "lim", "queue": "q4", "rate_limit": "nope", "state": {"n": 4}},
	  {"fsm": "lim", "queue": "q4", "rate_limit": "nada", "state": {"n": 5}},
	  {"fsm": "lim", "queue": "q4", "rate_limit": "r", "state": {"n": 6}, "delay": "1 day"}]');
\set VERBOSITY terse
-- batch 1: the keyless row behind the two waiting rows is picked
SELECT pg_temp.pkn('q4', 'w4', 1) AS picked, pg_temp.pkn('q4', 'w4', 1) AS nothing;
SELECT queue, due, scheduled, executing, unknown_rate_limit FROM gen_durable.queues WHERE queue = 'q4';
-- unknown_rate_limit: 2 + 2 instances
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- a flush 'next' to a step with an unconfigured rate limit warns too
SELECT id AS k4 FROM gen_durable.instances WHERE queue = 'q4' AND state ->> 'n' = '3' \gset
SELECT * FROM pg_temp.out1(:k4, 'w4', 'next', '{"step": "two", "rate_limit": "nope:b"}');
SELECT queue, due, unknown_rate_limit FROM gen_durable.queues WHERE queue = 'q4';
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- a continue to a step with an unconfigured rate limit: a warning, and
-- it is not continued (requeued, saying why; not counted as throttled)
SELECT gen_durable.insert('lim', '{"n": 7}', queue => 'q4c') AS k7 \gset
SELECT pg_temp.pk('q4c', 'w4') AS picked;
SELECT applied, detail, job IS NULL AS no_job
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :k7, 'worker', 'w4', 'kind', 'next', 'step', 'two', 'rate_limit', 'nope:c',
	'continue', true)));
SELECT status, step, rate_limit FROM gen_durable.instances WHERE id = :k7;
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- configured: they become pickable (nada still waits)
SELECT gen_durable.set_rate_limit('nope', 10, '1 day');
SELECT queue, due, unknown_rate_limit FROM gen_durable.queues WHERE queue = 'q4';
SELECT pg_temp.pkn('q4', 'w4') AS picked;
SELECT * FROM pg_temp.bk('nope%');
SELECT state ->> 'n' AS n, status, rate_limit FROM gen_durable.instances WHERE queue = 'q4' ORDER BY id;
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- a known rate limit at insert: no warning
SELECT gen_durable.insert('lim', queue => 'q4', rate_limit => 'nope:c') IS NOT NULL AS quiet;
SELECT * FROM pg_temp.moved(:'limiter_counters');

------------------------------------------------------------------------
-- 5. Configuration changes while rows execute
------------------------------------------------------------------------
-- raising a gate's max: the bucket is rebuilt from the executing rows
SELECT gen_durable.set_concurrency_limit('c5', 2);
SELECT pg_temp.ins('q5', 8, 1, 'c5') AS rows;
SELECT pg_temp.pk('q5', 'w5') AS picked, pg_temp.ex('c5') AS executing;
SELECT * FROM pg_temp.bk('c5');
SELECT gen_durable.set_concurrency_limit('c5', 4);
SELECT * FROM pg_temp.bk('c5');
SELECT pg_temp.pk('q5', 'w5') AS picked, pg_temp.ex('c5') AS executing;
-- lowering it to 1 while 4 execute: the bucket keeps accounting for its 4
-- holders (capacity 4, available 0), and admits only while fewer holders
-- than the new max hold a slot ...
SELECT gen_durable.set_concurrency_limit('c5', 1);
SELECT * FROM pg_temp.bk('c5');
SELECT pg_temp.pk('q5', 'w5') AS picked, pg_temp.ex('c5') AS executing;
-- ... so while 1 or more of the 4 still execute nothing is admitted:
-- finishing 1, 2, then 3 of them returns their slots (available climbs)
-- but frees none under max 1; finishing the 4th frees the one slot
CREATE FUNCTION pg_temp.finish_one(k text, w text) RETURNS text
LANGUAGE sql AS $$
	SELECT f.applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		'id', (SELECT min(id) FROM gen_durable.instances
				WHERE concurrency_key = k AND status = 'executing'),
		'worker', w, 'kind', 'done'))) f
$$;
SELECT pg_temp.finish_one('c5', 'w5') AS finished, pg_temp.avail('c5') AS avail,
	   pg_temp.pk('q5', 'w5') AS picked, pg_temp.ex('c5') AS executing;
SELECT pg_temp.finish_one('c5', 'w5') AS finished, pg_temp.avail('c5') AS avail,
	   pg_temp.pk('q5', 'w5') AS picked, pg_temp.ex('c5') AS executing;
SELECT pg_temp.finish_one('c5', 'w5') AS finished, pg_temp.avail('c5') AS avail,
	   pg_temp.pk('q5', 'w5') AS picked, pg_temp.ex('c5') AS executing;
SELECT pg_temp.finish_one('c5', 'w5') AS finished, pg_temp.avail('c5') AS avail,
	   pg_temp.pk('q5', 'w5') AS picked, pg_temp.ex('c5') AS executing;
-- gate_shards_repaired 1 (raising to 4; lowering to 1 found the bucket
-- already accounting for its 4 holders); throttled_conc 13: 6 and 4
-- rows denied by the first two picks, 3 by the last
SELECT * FROM pg_temp.moved(:'limiter_counters');

-- a gate's shards: K = 4 over 2 shards (2 + 2) fills the fullest shard first
SELECT gen_durable.set_concurrency_limit('c6', 4, 2);
SELECT pg_temp.ins('q6', 8, 1, 'c6') AS rows;
SELECT pg_temp.pk('q6', 'w6') AS picked;
SELECT * FROM pg_temp.bk('c6');
SELECT concurrency_shard AS shard, count(*) FROM gen_durable.instances
 WHERE concurrency_key = 'c6' AND status = 'executing' GROUP BY 1 ORDER BY 1;
-- down to 1 shard: the slots move to shard 0, shard 1 goes
SELECT gen_durable.set_concurrency_limit('c6', 4, 1);
SELECT * FROM pg_temp.bk('c6');
SELECT concurrency_shard AS shard, count(*) FROM gen_durable.instances
 WHERE concurrency_key = 'c6' AND status = 'executing' GROUP BY 1 ORDER BY 1;
SELECT pg_temp.pk('q6', 'w6') AS picked;
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- up to 4 shards (1 each) while 4 execute: still no free slot in all
SELECT gen_durable.set_concurrency_limit('c6', 4, 4);
SELECT count(*) AS shards, sum(capacity) AS capacity, sum(available) AS available
  FROM gen_durable.buckets WHERE kind = 'conc' AND key = 'c6';
SELECT pg_temp.pk('q6', 'w6') AS picked, pg_temp.ex('c6') AS executing;
SELECT coalesce(sum(delta), 0) AS throttled_conc FROM pg_temp.moved(:'limiter_counters') WHERE counter = 'throttled_conc';

-- a rate limit's shards: its keys are re-minted, keeping their tokens
SELECT gen_durable.set_rate_limit('rs', 4, '1 day');
SELECT pg_temp.ins('q5r', 6, 1, rl => 'rs') AS rows;
SELECT pg_temp.pk('q5r', 'w5', 1) AS picked;
SELECT * FROM pg_temp.bk('rs');
SELECT gen_durable.set_rate_limit('rs', 4, '1 day', shards => 2);
SELECT * FROM pg_temp.bk('rs');
SELECT pg_temp.pk('q5r', 'w5') AS picked;
SELECT * FROM pg_temp.bk('rs');
SELECT gen_durable.set_rate_limit('rs', 4, '1 day', shards => 1);
SELECT * FROM pg_temp.bk('rs');
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- a cold key of a 2-shard limit mints 2 shards of burst/2
SELECT gen_durable.set_rate_limit('rs', 4, '1 day', shards => 2);
SELECT pg_temp.ins('q5r', 1, 7, rl => 'rs:new') AS rows;
SELECT pg_temp.pk('q5r', 'w5') AS picked;
SELECT * FROM pg_temp.bk('rs:%');

-- drop_limit('rate'): its buckets go; its rows wait as unknown
SELECT gen_durable.drop_limit('rate', 'rs') AS dropped;
SELECT count(*) AS rs_buckets FROM gen_durable.buckets WHERE key LIKE 'rs%';
SELECT count(*) AS rs_limits FROM gen_durable.limits WHERE name = 'rs';
SELECT pg_temp.ins('q5r', 1, 8, rl => 'rs') AS rows;
SELECT queue, due, unknown_rate_limit FROM gen_durable.queues WHERE queue = 'q5r';
SELECT pg_temp.pk('q5r', 'w5') AS picked;
SELECT * FROM pg_temp.moved(:'limiter_counters');

-- drop_limit('conc'): the rows it admitted finish under it; new claims of
-- its keys are K=1
SELECT gen_durable.set_concurrency_limit('d', 2);
SELECT pg_temp.ins('q5d', 6, 1, 'd:1') AS rows;
SELECT pg_temp.pk('q5d', 'w5') AS picked;
SELECT gen_durable.drop_limit('conc', 'd') AS dropped;
SELECT count(*) AS d_limits FROM gen_durable.limits WHERE name = 'd';
SELECT pg_temp.pkn('q5d', 'w5') AS k1_pick, pg_temp.pkn('q5d', 'w5') AS k1_busy, pg_temp.ex('d:1') AS executing;
SELECT state ->> 'n' AS n, status, concurrency_shard FROM gen_durable.instances
 WHERE queue = 'q5d' AND status = 'executing' ORDER BY id;
-- the K=1 row finishes: the next runs, one at a time
SELECT id AS d3 FROM gen_durable.instances WHERE queue = 'q5d' AND state ->> 'n' = '3' \gset
SELECT * FROM pg_temp.out1(:d3, 'w5', 'done');
SELECT pg_temp.pkn('q5d', 'w5') AS k1_next, pg_temp.ex('d:1') AS executing;
-- a limit that does not exist
SELECT gen_durable.drop_limit('conc', 'd') AS again, gen_durable.drop_limit('rate', 'never') AS never,
	   gen_durable.drop_limit('conc', 'r') AS wrong_kind;
SELECT * FROM pg_temp.moved(:'limiter_counters');

------------------------------------------------------------------------
-- 6. admit(): admission on its own for the worker's claimed rows
------------------------------------------------------------------------
SELECT gen_durable.set_rate_limit('ra', 3, '1 day');
SELECT pg_temp.ins('q6a', 2, 1, rl => 'ra') AS rows;
SELECT pg_temp.pk('q6a', 'w6a') AS picked;
SELECT min(id) AS a1, max(id) AS a2 FROM gen_durable.instances WHERE queue = 'q6a' \gset
SELECT * FROM pg_temp.bk('ra');
-- one token left: the first row gets it, the second is denied; an id the
-- worker does not own and one that does not exist are not admitted
SELECT id = :a1 AS first, id = :a2 AS second, admitted
  FROM gen_durable.admit(ARRAY[:a1, :a2]::bigint[], 'w6a');
SELECT * FROM pg_temp.bk('ra');
SELECT admitted FROM gen_durable.admit(ARRAY[:a1]::bigint[], 'someone_else');
SELECT admitted FROM gen_durable.admit(ARRAY[-1]::bigint[], 'w6a');
SELECT status, locked_by FROM gen_durable.instances WHERE queue = 'q6a' ORDER BY id;
-- a row claimed under K=1 before its gate existed gets a slot when the gate
-- is set (set_concurrency_limit counts it as a holder), so admit() admits
-- it without taking another
SELECT pg_temp.ins('q6g', 1, 1, 'ag:1') AS rows;
SELECT pg_temp.pk('q6g', 'w6g') AS picked;
SELECT id AS g1 FROM gen_durable.instances WHERE queue = 'q6g' \gset
SELECT gen_durable.set_concurrency_limit('ag', 2);
SELECT * FROM pg_temp.bk('ag:%');
SELECT admitted FROM gen_durable.admit(ARRAY[:g1]::bigint[], 'w6g');
SELECT concurrency_shard FROM gen_durable.instances WHERE id = :g1;
SELECT * FROM pg_temp.bk('ag:%');
-- holding a slot already, it is not gated again: admitted, nothing taken
SELECT admitted FROM gen_durable.admit(ARRAY[:g1]::bigint[], 'w6g');
SELECT * FROM pg_temp.bk('ag:%');
SELECT * FROM pg_temp.moved(:'limiter_counters');

------------------------------------------------------------------------
-- 7. A continue is admitted against the next step's limits
------------------------------------------------------------------------
SELECT gen_durable.set_rate_limit('rc', 1, '1 day');
SELECT pg_temp.ins('q7', 1, 1) AS rows;
SELECT id AS c1 FROM gen_durable.pick('q7', 'w7', lease => '1 hour') \gset
-- a token: continued, the job for the next step
SELECT applied, detail, job ->> 'step' AS step, job ->> 'steps' AS steps
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :c1, 'worker', 'w7', 'kind', 'next', 'step', 's1', 'rate_limit', 'rc', 'continue', true)));
SELECT * FROM pg_temp.bk('rc');
-- no token: requeued as a plain next, throttled
SELECT applied, detail, job IS NULL AS no_job
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :c1, 'worker', 'w7', 'kind', 'next', 'step', 's2', 'rate_limit', 'rc', 'continue', true)));
SELECT status, step, rate_limit, locked_by IS NULL AS unclaimed FROM gen_durable.instances WHERE id = :c1;
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- a gated row continues under a new gated key: a slot of the new key
-- (shard set), the old one credited
SELECT gen_durable.set_concurrency_limit('cg', 1);
SELECT pg_temp.ins('q7g', 1, 1, 'x:cont') AS rows;
SELECT id AS c2 FROM gen_durable.pick('q7g', 'w7', lease => '1 hour') \gset
SELECT pg_temp.avail('x:cont') AS old_avail;
SELECT applied, detail, job ->> 'step' AS step
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :c2, 'worker', 'w7', 'kind', 'next', 'step', 's1', 'concurrency_key', 'cg:1',
	'continue', true)));
SELECT status, concurrency_key, concurrency_shard FROM gen_durable.instances WHERE id = :c2;
SELECT pg_temp.avail('x:cont') AS old_avail, pg_temp.avail('cg:1') AS new_avail;
-- another row continuing into the full cg:1: requeued, throttled, its old
-- slot credited
SELECT pg_temp.ins('q7g', 1, 2, 'x:cont') AS rows;
SELECT id AS c3 FROM gen_durable.pick('q7g', 'w7', lease => '1 hour') \gset
SELECT pg_temp.avail('x:cont') AS old_avail;
SELECT applied, detail, job IS NULL AS no_job
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :c3, 'worker', 'w7', 'kind', 'next', 'step', 's1', 'concurrency_key', 'cg:1',
	'continue', true)));
SELECT status, concurrency_key, concurrency_shard FROM gen_durable.instances WHERE id = :c3;
SELECT pg_temp.avail('x:cont') AS old_avail, pg_temp.avail('cg:1') AS new_avail;
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- continuing under a new key whose name has no gate: not continued inline
-- (a plain next; its old slot credited)
SELECT pg_temp.ins('q7h', 1, 3, 'x:cont') AS rows;
SELECT id AS c4 FROM gen_durable.pick('q7h', 'w7', lease => '1 hour') \gset
SELECT pg_temp.avail('x:cont') AS old_avail;
SELECT applied, detail, job IS NULL AS no_job
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :c4, 'worker', 'w7', 'kind', 'next', 'step', 's1', 'concurrency_key', 'plain:1',
	'continue', true)));
SELECT status, concurrency_key, concurrency_shard FROM gen_durable.instances WHERE id = :c4;
SELECT pg_temp.avail('x:cont') AS old_avail;
-- dropping the key (null) while continuing frees the slot
SELECT * FROM pg_temp.out1(:c2, 'w7', 'next',
	'{"step": "s2", "concurrency_key": null, "continue": true}');
SELECT status, concurrency_key, concurrency_shard FROM gen_durable.instances WHERE id = :c2;
SELECT pg_temp.avail('cg:1') AS cg_avail;
SELECT * FROM pg_temp.moved(:'limiter_counters');

------------------------------------------------------------------------
-- 8. Maintenance: rate GC and gate reconcile
------------------------------------------------------------------------
-- first, everything still live ends (its slots credited); the sweep then
-- deletes every gate key (no holders: cold = full) and heals nothing
SELECT count(gen_durable.cancel(id)) AS cancel_calls FROM gen_durable.instances
 WHERE status NOT IN ('done', 'failed', 'cancelled') AND parent_id IS NULL;
SELECT count(*) AS live FROM gen_durable.instances WHERE status NOT IN ('done', 'failed', 'cancelled');
SELECT count(*) AS conc_buckets, count(*) FILTER (WHERE available = capacity) AS full
  FROM gen_durable.buckets WHERE kind = 'conc';
-- none is left short: every slot taken came back
SELECT key, capacity, available FROM gen_durable.buckets
 WHERE kind = 'conc' AND available <> capacity;
SELECT gen_durable.run_maintenance() - 'gc_deleted' AS maintenance;
SELECT count(*) AS conc_buckets FROM gen_durable.buckets WHERE kind = 'conc';
SELECT * FROM pg_temp.moved(:'limiter_counters');

-- a gate bucket tampered with is healed from its holders
SELECT gen_durable.set_concurrency_limit('m', 3);
SELECT pg_temp.ins('q8', 4, 1, 'm:1') AS rows;
SELECT pg_temp.pk('q8', 'w8', 1) AS picked;
SELECT * FROM pg_temp.bk('m:%');
UPDATE gen_durable.buckets SET available = 0 WHERE key = 'm:1';
SELECT pg_temp.pk('q8', 'w8') AS none_free;
SELECT gen_durable.run_maintenance() -> 'gate_shards_repaired' AS repaired;
SELECT * FROM pg_temp.bk('m:%');
UPDATE gen_durable.buckets SET available = 3 WHERE key = 'm:1';
SELECT gen_durable.run_maintenance() -> 'gate_shards_repaired' AS repaired;
SELECT * FROM pg_temp.bk('m:%');
SELECT pg_temp.pk('q8', 'w8') AS picked, pg_temp.ex('m:1') AS executing;
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- a missing shard of a 2-shard gate key in use is minted back
SELECT gen_durable.set_concurrency_limit('m2', 4, 2);
SELECT pg_temp.ins('q8b', 2, 1, 'm2:1') AS rows;
SELECT pg_temp.pk('q8b', 'w8') AS picked;
SELECT * FROM pg_temp.bk('m2:%');
DELETE FROM gen_durable.buckets WHERE key = 'm2:1' AND shard = 1;
SELECT gen_durable.run_maintenance() -> 'gate_shards_repaired' AS repaired;
SELECT * FROM pg_temp.bk('m2:%');
-- an orphan shard (beyond the gate's shards, no holder) is deleted
INSERT INTO gen_durable.buckets VALUES ('conc', 'm2:1', 5, 1, 1, NULL);
SELECT gen_durable.run_maintenance() -> 'buckets_swept' AS swept;
SELECT * FROM pg_temp.bk('m2:%');
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- rate GC: a key refilled to full is swept, a key not yet full is kept; a
-- key whose policy is gone is swept
SELECT gen_durable.set_rate_limit('rg', 2, '1 day');
SELECT pg_temp.ins('q8r', 1, 1, rl => 'rg:full') + pg_temp.ins('q8r', 1, 2, rl => 'rg:half') AS rows;
SELECT pg_temp.pk('q8r', 'w8') AS picked;
SELECT * FROM pg_temp.bk('rg:%');
UPDATE gen_durable.buckets SET last_refill = last_refill - interval '1 day 1 minute' WHERE key = 'rg:full';
UPDATE gen_durable.buckets SET last_refill = last_refill - interval '12 hours' WHERE key = 'rg:half';
INSERT INTO gen_durable.buckets VALUES ('rate', 'ghost:1', 0, 1, 0, now());
SELECT gen_durable.run_maintenance() -> 'buckets_swept' AS swept;
SELECT * FROM pg_temp.bk('rg:%');
SELECT count(*) AS ghost FROM gen_durable.buckets WHERE key LIKE 'ghost%';
-- the swept key is cold again: full
SELECT pg_temp.ins('q8r', 3, 3, rl => 'rg:full') AS rows;
SELECT pg_temp.pk('q8r', 'w8') AS picked;
SELECT * FROM pg_temp.moved(:'limiter_counters');

------------------------------------------------------------------------
-- 9. Argument errors
------------------------------------------------------------------------
SELECT gen_durable.set_rate_limit('a:b', 1, '1 second');
SELECT gen_durable.set_rate_limit('', 1, '1 second');
SELECT gen_durable.set_rate_limit(NULL, 1, '1 second');
SELECT gen_durable.set_rate_limit('e', -1, '1 second');
SELECT gen_durable.set_rate_limit('e', 'NaN', '1 second');
SELECT gen_durable.set_rate_limit('e', 1, '0');
SELECT gen_durable.set_rate_limit('e', 1, '-1 second');
SELECT gen_durable.set_rate_limit('e', 1, NULL);
SELECT gen_durable.set_rate_limit('e', 1, '1 second', burst => 0);
SELECT gen_durable.set_rate_limit('e', 0, '1 second');
SELECT gen_durable.set_rate_limit('e', 1, '1 second', shards => 0);
SELECT gen_durable.set_rate_limit('e', 1, '1 second', shards => 1001);
SELECT gen_durable.set_concurrency_limit('a:b', 1);
SELECT gen_durable.set_concurrency_limit('', 1);
SELECT gen_durable.set_concurrency_limit(NULL, 1);
SELECT gen_durable.set_concurrency_limit('e', 0);
SELECT gen_durable.set_concurrency_limit('e', NULL);
SELECT gen_durable.set_concurrency_limit('e', 2, 0);
SELECT gen_durable.set_concurrency_limit('e', 2, 3);
SELECT gen_durable.drop_limit('x', 'g');
SELECT gen_durable.drop_limit(NULL, 'g');
SELECT gen_durable.drop_limit('conc', 'g:a');
SELECT gen_durable.drop_limit('conc', '');
SELECT gen_durable.admit(NULL, 'w');
SELECT gen_durable.admit(ARRAY[1]::bigint[], NULL);
-- nothing was written by the refused calls
SELECT count(*) AS e_limits FROM gen_durable.limits WHERE name = 'e';
-- allowed 0 with a burst: a one-off allowance
SELECT gen_durable.set_rate_limit('e', 0, '1 second', burst => 2);
SELECT rate, capacity FROM gen_durable.limits WHERE kind = 'rate' AND name = 'e';

------------------------------------------------------------------------
-- 10. Edge cases
------------------------------------------------------------------------
-- rows a rate limit cannot admit now take no advisory key lock (only a
-- row that passed every other test does): 200 throttled rows with K=1
-- keys, then a pick in an open transaction holds no advisory lock
SELECT gen_durable.set_rate_limit('ex', 1, '1 day');
SELECT pg_temp.ins('q10', 1, 1, NULL, 'ex') AS rows;
SELECT pg_temp.pkn('q10', 'w10') AS drained;
SELECT count(gen_durable.insert('lim', jsonb_build_object('n', g), queue => 'q10',
								 concurrency_key => 'k1:' || g, rate_limit => 'ex'))
	   AS throttled_rows FROM generate_series(2, 201) AS g;
BEGIN;
SELECT pg_temp.pkn('q10', 'w10') AS picked;
SELECT count(*) AS advisory_locks FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid();
COMMIT;
-- a rate shard beyond the policy's count (left by a pick that raced a
-- change of shards) is not used
SELECT gen_durable.set_rate_limit('sx', 2, '1 day');
SELECT pg_temp.ins('q10b', 4, 1, NULL, 'sx') AS rows;
SELECT pg_temp.pkn('q10b', 'w10') AS picked;
INSERT INTO gen_durable.buckets VALUES ('rate', 'sx', 1, 2, 2, now());
SELECT pg_temp.pkn('q10b', 'w10') AS picked_with_stray_shard;
-- a weight above the burst: a warning at insert and in a next, counted;
-- a continue with it is requeued (no error, nothing else undone)
SELECT gen_durable.insert('lim', '{"n": 1}', queue => 'q10c', rate_limit => 'sx',
						  weight => 1e10) IS NOT NULL AS inserted;
SELECT gen_durable.insert('lim', '{"n": 2}', queue => 'q10c') AS h2 \gset
SELECT pg_temp.pkn('q10c', 'w10') AS picked;
SELECT applied, detail FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :h2, 'worker', 'w10', 'kind', 'next', 'step', 's', 'rate_limit', 'sx',
	'weight', 1e10, 'continue', true)));
SELECT * FROM pg_temp.moved(:'limiter_counters');
-- a burst that takes millennia to refill: the sweeps still run
SELECT gen_durable.set_rate_limit('big', 1, '1 day', burst => 1e7);
SELECT pg_temp.ins('q10d', 1, 1, NULL, 'big') AS rows;
SELECT pg_temp.pkn('q10d', 'w10') AS picked;
SELECT gen_durable.run_maintenance() - 'gc_deleted' AS maintenance;

DROP EXTENSION gen_durable;
