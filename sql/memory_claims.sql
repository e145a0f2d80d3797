-- memory_claims.sql: claims kept in shared memory (0.8.0; docs/contract.md
-- §4.7, D21, I-31; docs/design.md §8.1): which picks claim in memory,
-- what the claims view shows, and that flush, heartbeat, release, cancel,
-- the claim fence and the maintenance sweep treat a claim in memory as
-- they treat one written to its row.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse
\i test/regress_helpers.sql
-- the default of a server (test/gen_durable.conf turns it off for the
-- suites about claims written to rows)
SET gen_durable.claim_in_memory = on;

-- a claim number handed out in memory is larger than any a row counts to
-- by itself (it starts at the server's start time in microseconds)
CREATE FUNCTION pg_temp.big(claim bigint) RETURNS boolean
LANGUAGE sql AS $$ SELECT claim > 100000000000000 $$;

-- the claim of an instance, as the claims view shows it
CREATE FUNCTION pg_temp.claim_of(i bigint)
RETURNS TABLE (in_memory boolean, worker text, big_claim boolean, lease_ok boolean)
LANGUAGE sql AS $$
	SELECT c.in_memory, c.worker, pg_temp.big(c.claim),
		   c.lease_expires_at > now() AND c.claimed_at <= now()
	  FROM gen_durable.claims c WHERE c.id = i
$$;

------------------------------------------------------------------------
-- a plain instance is claimed in memory: its row stays runnable, nothing
-- is written to it, and the claims view shows the claim
------------------------------------------------------------------------
SELECT gen_durable.insert('plain', queue => 'mq') AS a \gset
SELECT xmin AS a_xmin, ctid AS a_ctid FROM gen_durable.instances WHERE id = :a \gset
SELECT id = :a AS mine, pg_temp.big(claim) AS big_claim, attempt,
	   lease_expires_at > now() + interval '25 s' AS lease_30_s
  FROM gen_durable.pick('mq', 'w1') \gset
\echo :mine :big_claim :attempt :lease_30_s
SELECT status, locked_by, lease_expires_at, xmin = :'a_xmin' AS same_xmin,
	   ctid = :'a_ctid' AS same_ctid
  FROM gen_durable.instances WHERE id = :a;
SELECT * FROM pg_temp.claim_of(:a);
-- the queues view counts it as executing, not as due
SELECT due, executing FROM gen_durable.queues WHERE queue = 'mq';
-- a second pick does not see it
SELECT count(*) FROM gen_durable.pick('mq', 'w2');
-- heartbeat extends it in memory and still writes nothing
SELECT gen_durable.heartbeat('w1', ARRAY[:a], '10 min') = ARRAY[:a]::bigint[] AS owned;
SELECT c.lease_expires_at > now() + interval '9 min' AS extended, i.xmin = :'a_xmin' AS same_xmin
  FROM gen_durable.claims c JOIN gen_durable.instances i USING (id) WHERE id = :a;
-- another worker's heartbeat does not own it
SELECT gen_durable.heartbeat('w2', ARRAY[:a]);
-- its outcome commits like any other, and the claim is gone
SELECT * FROM pg_temp.out1(:a, 'w2', 'done');
SELECT * FROM pg_temp.out1(:a, 'w1', 'done');
SELECT status, locked_by FROM gen_durable.instances WHERE id = :a;
SELECT count(*) FROM gen_durable.claims;
-- the row records the claim whose outcome it took (the fence's number)
SELECT pg_temp.big(claim) AS row_claim_big FROM gen_durable.instances WHERE id = :a;
-- a late duplicate of the outcome is stale
SELECT * FROM pg_temp.out1(:a, 'w1', 'done');

------------------------------------------------------------------------
-- the claim fence: an outcome naming another claim is stale; the claim
-- numbers of one instance only grow
------------------------------------------------------------------------
SELECT gen_durable.insert('fenced', queue => 'mq') AS b \gset
SELECT claim AS b_claim1 FROM gen_durable.pick('mq', 'w1') \gset
SELECT applied, detail = format('the outcome is for claim %s, the instance is now in claim %s',
								:b_claim1 - 1, :b_claim1) AS names_both
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :b, 'worker', 'w1', 'kind', 'done', 'claim', :b_claim1 - 1)));
-- next: the instance is runnable again at its next step, and unclaimed
SELECT applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :b, 'worker', 'w1', 'kind', 'next', 'step', 'second', 'claim', :b_claim1)));
SELECT status, step, steps FROM gen_durable.instances WHERE id = :b;
SELECT count(*) FROM gen_durable.claims WHERE id = :b;
SELECT step, claim > :b_claim1 AS larger, claim AS b_claim2 FROM gen_durable.pick('mq', 'w1') \gset
\echo :step :larger
-- the first claim's outcome, late, is stale
SELECT applied, detail = format('the outcome is for claim %s, the instance is now in claim %s',
								:b_claim1, :b_claim2) AS names_both
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :b, 'worker', 'w1', 'kind', 'done', 'claim', :b_claim1)));
-- a continue from a claim in memory goes on as a claim on the row, with
-- the next number
SELECT applied, (job->>'claim')::bigint = :b_claim2 + 1 AS next_number, job->>'step' AS step
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :b, 'worker', 'w1', 'kind', 'next', 'step', 'third', 'continue', true,
	'claim', :b_claim2)));
SELECT status, step, locked_by, claim = :b_claim2 + 1 AS row_claim FROM gen_durable.instances WHERE id = :b;
SELECT in_memory, worker FROM gen_durable.claims WHERE id = :b;
SELECT applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :b, 'worker', 'w1', 'kind', 'done', 'claim', :b_claim2 + 1)));

------------------------------------------------------------------------
-- what is claimed on the row instead: guarded instances (a concurrency
-- key, a rate limit, a correlation key, awaited signals), worker names of
-- 64 bytes or more, and sessions with gen_durable.claim_in_memory off
------------------------------------------------------------------------
SELECT gen_durable.insert('keyed', queue => 'gq', concurrency_key => 'k') AS k \gset
SELECT gen_durable.insert('correlated', queue => 'gq', correlation_key => 'c1') AS c \gset
SELECT fsm FROM gen_durable.pick('gq', 'w1', batch => 5) ORDER BY fsm;
SELECT fsm, status, locked_by FROM gen_durable.instances WHERE id IN (:k, :c) ORDER BY fsm;
SELECT c.fsm, c.in_memory FROM gen_durable.claims c WHERE c.id IN (:k, :c) ORDER BY c.fsm;
SELECT gen_durable.insert('longname', queue => 'lq') AS l \gset
SELECT count(*) FROM gen_durable.pick('lq', repeat('w', 64));
SELECT status FROM gen_durable.instances WHERE id = :l;
SELECT gen_durable.insert('shortname', queue => 'lq') AS s \gset
SELECT count(*) FROM gen_durable.pick('lq', repeat('w', 63));
SELECT status FROM gen_durable.instances WHERE id = :s;
SET gen_durable.claim_in_memory = off;
SELECT gen_durable.insert('off', queue => 'oq') AS o \gset
SELECT pg_temp.big(claim) AS big_claim FROM gen_durable.pick('oq', 'w1');
SELECT status, locked_by FROM gen_durable.instances WHERE id = :o;
SET gen_durable.claim_in_memory = on;

-- one pick takes both kinds, most urgent first
SELECT gen_durable.insert('guarded_urgent', queue => 'xq', priority => -1, concurrency_key => 'x') AS x1 \gset
SELECT gen_durable.insert('plain_later', queue => 'xq', priority => 1) AS x2 \gset
SELECT gen_durable.insert('plain_urgent', queue => 'xq', priority => -2) AS x3 \gset
SELECT fsm, pg_temp.big(claim) AS in_memory FROM gen_durable.pick('xq', 'w1', batch => 2);
SELECT fsm, pg_temp.big(claim) AS in_memory FROM gen_durable.pick('xq', 'w1', batch => 2);

------------------------------------------------------------------------
-- transactions: a pick rolled back takes nothing; a pick and the flush of
-- its claim may share a transaction; a subtransaction rolled back gives
-- its claims back
------------------------------------------------------------------------
SELECT gen_durable.insert('rolled_back', queue => 'tq') AS t \gset
BEGIN;
SELECT count(*) FROM gen_durable.pick('tq', 'w1');
SELECT state FROM gen_durable._memory_claims() WHERE id = :t;
ROLLBACK;
SELECT count(*) FROM gen_durable.claims WHERE id = :t;
BEGIN;
SELECT claim AS t_claim FROM gen_durable.pick('tq', 'w1') \gset
SELECT applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :t, 'worker', 'w1', 'kind', 'done', 'claim', :t_claim)));
COMMIT;
SELECT status FROM gen_durable.instances WHERE id = :t;
SELECT count(*) FROM gen_durable.claims WHERE id = :t;
SELECT gen_durable.insert('savepoint', queue => 'tq') AS sp \gset
BEGIN;
SAVEPOINT s;
SELECT count(*) FROM gen_durable.pick('tq', 'w1');
ROLLBACK TO SAVEPOINT s;
SELECT count(*) FROM gen_durable.claims WHERE id = :sp;
SELECT count(*) FROM gen_durable.pick('tq', 'w1');
COMMIT;
SELECT in_memory FROM gen_durable.claims WHERE id = :sp;
-- a flush rolled back leaves the claim held
BEGIN;
SELECT applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :sp, 'worker', 'w1', 'kind', 'done')));
ROLLBACK;
SELECT in_memory, worker FROM gen_durable.claims WHERE id = :sp;
SELECT * FROM pg_temp.out1(:sp, 'w1', 'done');

------------------------------------------------------------------------
-- release hands claims in memory back without counting an attempt;
-- cancel ends a claimed instance and makes its outcome stale
------------------------------------------------------------------------
SELECT count(*) FROM gen_durable.insert_many('[{"fsm": "r1", "queue": "rq"}, {"fsm": "r2", "queue": "rq"}]');
SELECT count(*) FROM gen_durable.pick('rq', 'wr', batch => 5);
SELECT gen_durable.release('wr', NULL);
SELECT count(*) FROM gen_durable.claims WHERE queue = 'rq';
SELECT fsm, attempt FROM gen_durable.pick('rq', 'wr', batch => 5) ORDER BY fsm;
SELECT id AS r1 FROM gen_durable.instances WHERE fsm = 'r1' \gset
SELECT gen_durable.release('wr', ARRAY[:r1]);
SELECT fsm FROM gen_durable.claims WHERE queue = 'rq';
-- the other worker's claims are not its to release
SELECT gen_durable.release('w9', NULL);
SELECT count(*) FROM gen_durable.claims WHERE queue = 'rq';
SELECT gen_durable.insert('cancelled', queue => 'cq') AS x \gset
SELECT count(*) FROM gen_durable.pick('cq', 'w1');
SELECT gen_durable.cancel(:x);
SELECT status FROM gen_durable.instances WHERE id = :x;
SELECT count(*) FROM gen_durable.claims WHERE id = :x;
SELECT gen_durable.heartbeat('w1', ARRAY[:x]);
SELECT * FROM pg_temp.out1(:x, 'w1', 'done');
SELECT status FROM gen_durable.instances WHERE id = :x;

------------------------------------------------------------------------
-- the maintenance sweep writes claims to their rows: an expired lease (the
-- reaper then requeues the instance, counting an attempt), and any claim
-- older than gen_durable.memory_claim_max_age (it goes on as a claim on
-- the row, with the same number, and its outcome still commits)
------------------------------------------------------------------------
SELECT gen_durable.insert('expiring', queue => 'eq') AS e \gset
SELECT count(*) FROM gen_durable.pick('eq', 'w1', lease => '1 ms');
SELECT pg_sleep(0.01);
SELECT (gen_durable.run_maintenance()->>'reaped')::int >= 1 AS reaped;
SELECT status, attempt, locked_by FROM gen_durable.instances WHERE id = :e;
SELECT count(*) FROM gen_durable.claims WHERE id = :e;
SELECT * FROM pg_temp.out1(:e, 'w1', 'done');
SELECT gen_durable.insert('long_step', queue => 'aq') AS g \gset
SELECT claim AS g_claim FROM gen_durable.pick('aq', 'w1', lease => '10 min') \gset
SET gen_durable.memory_claim_max_age = 0;
SELECT gen_durable.run_maintenance() IS NOT NULL AS ran;
RESET gen_durable.memory_claim_max_age;
SELECT status, locked_by, claim = :g_claim AS same_claim, attempt,
	   lease_expires_at > now() + interval '9 min' AS lease_kept
  FROM gen_durable.instances WHERE id = :g;
SELECT in_memory, worker FROM gen_durable.claims WHERE id = :g;
SELECT gen_durable.heartbeat('w1', ARRAY[:g]) = ARRAY[:g]::bigint[] AS owned;
SELECT applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :g, 'worker', 'w1', 'kind', 'done', 'claim', :g_claim)));
SELECT status FROM gen_durable.instances WHERE id = :g;

------------------------------------------------------------------------
-- the stats count claims in memory like any other
------------------------------------------------------------------------
SELECT counter, value > 0 AS counted FROM gen_durable.stats
 WHERE counter IN ('claimed', 'claims_written', 'released') ORDER BY counter;

DROP EXTENSION gen_durable;
