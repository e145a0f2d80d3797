-- await.sql: gen_durable.await(id, timeout, until), waiting inside the server
-- for an instance to settle (design §3 Producers; contract §8, D15)
--
-- The answer comes from the row: done, failed or cancelled with result and
-- error; awaiting for a parked instance (until => 'settled' only);
-- not_found for a missing id; busy once the timeout passes, with the step
-- and attempt of the freshest read and no result or error.  The first check
-- is immediate, so a settled row answers even with timeout 0.  The wake-ups
-- at commit are tested by test/specs/await_wake.spec.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

\i test/regress_helpers.sql

-- the SQLSTATE and message of a statement's error
CREATE FUNCTION pg_temp.err(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

------------------------------------------------------------------------
-- not_found: a missing id, at once whatever the timeout
------------------------------------------------------------------------
SELECT * FROM gen_durable.await(999999999);
SELECT * FROM gen_durable.await(999999999, '0');
SELECT * FROM gen_durable.await(-1, '30 s', 'terminal');
SELECT status, clock_timestamp() - statement_timestamp() < interval '1 s' AS at_once
  FROM gen_durable.await(999999999, '30 s');

------------------------------------------------------------------------
-- terminal rows answer at once (timeout 0 too), with result, error, step
-- and attempt as they are on the row
------------------------------------------------------------------------
SELECT gen_durable.insert('job', queue => 'aq') AS d1 \gset
SELECT gen_durable.insert('job', queue => 'aq') AS f1 \gset
SELECT gen_durable.insert('job', queue => 'aq') AS c1 \gset
SELECT gen_durable.insert('job', queue => 'aq', max_attempts => 1) AS x1 \gset
SELECT count(*) FROM gen_durable.pick('aq', 'w1');
-- d1: a retry (error recorded, attempt 1), then done on the next step
SELECT * FROM pg_temp.out1(:d1, 'w1', 'retry', '{"error": {"message": "flaky"}}');
SELECT count(*) FROM gen_durable.pick('aq', 'w1');
SELECT * FROM pg_temp.out1(:d1, 'w1', 'next', '{"step": "second"}');
SELECT count(*) FROM gen_durable.pick('aq', 'w1');
SELECT * FROM pg_temp.out1(:d1, 'w1', 'done', '{"result": {"sent": true}}');
-- f1: fails with its error
SELECT * FROM pg_temp.out1(:f1, 'w1', 'fail', '{"error": {"message": "card expired"}}');
-- x1: a retry with no attempts left fails it (max_attempts 1)
SELECT * FROM pg_temp.out1(:x1, 'w1', 'retry', '{"error": "boom"}');
-- c1: cancelled while executing
SELECT gen_durable.cancel(:c1, 'changed my mind');

SELECT * FROM gen_durable.await(:d1);
SELECT * FROM gen_durable.await(:d1, '0');
SELECT * FROM gen_durable.await(:d1, '0', 'terminal');
SELECT * FROM gen_durable.await(:f1, '0');
SELECT * FROM gen_durable.await(:f1, '1 s', 'terminal');
SELECT * FROM gen_durable.await(:x1, '0');
SELECT * FROM gen_durable.await(:c1, '0');
SELECT * FROM gen_durable.await(:c1, '1 s', 'terminal');
-- a long timeout does not delay a settled answer
SELECT status, clock_timestamp() - statement_timestamp() < interval '1 s' AS at_once
  FROM gen_durable.await(:d1, '30 s');
-- the row's status and the answer agree
SELECT i.id = :d1 AS is_d1, i.status, a.status AS answer
  FROM gen_durable.instances i, gen_durable.await(i.id, '0') a
 WHERE i.id IN (:d1, :f1, :x1, :c1) ORDER BY i.id;

------------------------------------------------------------------------
-- parked: 'awaiting' at once with until => 'settled' (the default); with
-- until => 'terminal' the call waits, and answers busy at its timeout
------------------------------------------------------------------------
SELECT gen_durable.insert('order', queue => 'aq') AS p1 \gset
SELECT count(*) FROM gen_durable.pick('aq', 'w1');
SELECT * FROM pg_temp.out1(:p1, 'w1', 'retry', '{"error": {"message": "first try"}}');
SELECT count(*) FROM gen_durable.pick('aq', 'w1');
SELECT * FROM pg_temp.out1(:p1, 'w1', 'await', '{"names": ["paid"], "step": "charge", "timeout": "1 day"}');
SELECT status, step, attempt, awaits FROM gen_durable.instances WHERE id = :p1;
-- the error of the earlier retry is still on the row, and shown
SELECT * FROM gen_durable.await(:p1);
SELECT * FROM gen_durable.await(:p1, '0', 'settled');
SELECT status, clock_timestamp() - statement_timestamp() < interval '1 s' AS at_once
  FROM gen_durable.await(:p1, '30 s', 'settled');
-- until => 'terminal': waits the whole timeout, then busy without result
-- or error
SELECT *, clock_timestamp() - statement_timestamp() >= interval '200 ms' AS waited
  FROM gen_durable.await(:p1, '200 ms', 'terminal');
SELECT * FROM gen_durable.await(:p1, '0', 'terminal');
-- awaiting_children is parked too (not entered by 0.2.0 itself)
SELECT gen_durable.insert('parent', queue => 'aq_children') AS ch1 \gset
UPDATE gen_durable.instances SET status = 'awaiting_children' WHERE id = :ch1;
SELECT * FROM gen_durable.await(:ch1, '0');
SELECT *, clock_timestamp() - statement_timestamp() >= interval '100 ms' AS waited
  FROM gen_durable.await(:ch1, '100 ms', 'terminal');
-- a signal wakes the parked instance: now runnable, so busy again
SELECT gen_durable.signal(:p1, 'paid');
SELECT * FROM gen_durable.await(:p1, '0');

------------------------------------------------------------------------
-- runnable and executing: busy after the timeout, with step and attempt
-- and NULL result and error (even when the row has an error)
------------------------------------------------------------------------
SELECT gen_durable.insert('job', queue => 'aq_busy') AS b1 \gset
SELECT *, clock_timestamp() - statement_timestamp() >= interval '200 ms' AS waited
  FROM gen_durable.await(:b1, '200 ms');
SELECT * FROM gen_durable.await(:b1, '0');
SELECT * FROM gen_durable.await(:b1, '0', 'terminal');
SELECT count(*) FROM gen_durable.pick('aq_busy', 'w2');
SELECT *, clock_timestamp() - statement_timestamp() >= interval '200 ms' AS waited
  FROM gen_durable.await(:b1, '200 ms', 'terminal');
SELECT * FROM gen_durable.await(:b1, '0');
-- a step in retry backoff: busy, runnable, attempt 1; the recorded error
-- is not part of a busy answer
SELECT * FROM pg_temp.out1(:b1, 'w2', 'retry', '{"delay": "1 hour", "error": {"message": "later"}}');
SELECT status, attempt, error FROM gen_durable.instances WHERE id = :b1;
SELECT * FROM gen_durable.await(:b1, '0');
-- a scheduled row: busy, step 'start', attempt 0
SELECT gen_durable.insert('later', step => 'wake_up', queue => 'aq_busy', delay => '1 hour') AS s1 \gset
SELECT * FROM gen_durable.await(:s1, '0');

-- await works inside a READ COMMITTED transaction block too
BEGIN;
SELECT * FROM gen_durable.await(:d1, '0');
SELECT * FROM gen_durable.await(:b1, '0');
COMMIT;

------------------------------------------------------------------------
-- errors: raised before waiting
------------------------------------------------------------------------
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(NULL)$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(NULL, '0')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(1, '-1 s')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(1, '-1 microsecond')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(1, NULL)$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(1, '0', 'done')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(1, '0', 'Settled')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(1, '0', '')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(1, '0', NULL)$$);
-- the arguments are checked before the row: a bad until is an error even
-- for a missing id
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(999999999, '0', 'forever')$$);
-- the message names the argument and gives a hint
\set VERBOSITY default
SELECT * FROM gen_durable.await(1, '0', 'done');
SELECT * FROM gen_durable.await(1, '-5 s');
\set VERBOSITY terse
-- REPEATABLE READ and SERIALIZABLE are refused (a fresh snapshot per check
-- is needed), even for a row that would answer at once
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err(format('SELECT * FROM gen_durable.await(%s, %L)', :d1, '0'));
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pg_temp.err(format('SELECT * FROM gen_durable.await(%s, %L)', :d1, '0'));
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM gen_durable.await(:d1, '0');
ROLLBACK;

DROP EXTENSION gen_durable;
