-- stats.sql: the gen_durable.stats counters and the gen_durable.queues view
-- (design §3 Views; issue 3 Observability; src/stats.c, src/aftercommit.c)
--
-- The counters live in shared memory, are cluster-wide, and are added by
-- committed transactions only, at commit.  pg_regress runs one test at a
-- time and the maintenance worker idles (gen_durable.maintenance_worker =
-- off in test/gen_durable.conf), so every change seen here is this file's.
-- After each group of calls pg_temp.moved() shows which counters changed,
-- and by how much, since the previous call.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

\i test/regress_helpers.sql
\i test/stats_helpers.sql

------------------------------------------------------------------------
-- reset_stats() zeroes every counter and returns the reset time
------------------------------------------------------------------------
SELECT gen_durable.reset_stats() IS NOT NULL AS reset;
SELECT gen_durable.reset_stats() BETWEEN now() AND clock_timestamp() AS reset_time;
SELECT count(*) AS counters, count(*) FILTER (WHERE value <> 0) AS nonzero
  FROM gen_durable.stats;
-- the counters, in their order
SELECT counter FROM gen_durable.stats;
SELECT * FROM pg_temp.moved();

------------------------------------------------------------------------
-- inserts: inserted, insert_duplicates (insert and insert_many)
------------------------------------------------------------------------
SELECT gen_durable.insert('job', queue => 'sq') AS i1 \gset
SELECT gen_durable.insert('job', queue => 'sq') AS i2 \gset
SELECT gen_durable.insert('job', queue => 'sq', correlation_key => 'sk1') AS i3 \gset
SELECT gen_durable.insert('job', queue => 'sq', correlation_key => 'sk1') AS taken;
SELECT gen_durable.insert('later', queue => 'sq', delay => '1 hour') IS NOT NULL AS scheduled;
SELECT ord, id IS NOT NULL AS has_id, created
  FROM gen_durable.insert_many('[{"fsm": "m", "queue": "sq_many"},
                                 {"fsm": "m", "queue": "sq_many", "correlation_key": "sk1"}]');
-- inserted 5 (4 + 1 of insert_many), insert_duplicates 2 (1 + 1)
SELECT * FROM pg_temp.moved();

-- rolled back: nothing counts
BEGIN;
SELECT gen_durable.insert('job', queue => 'sq_rolled_back') IS NOT NULL AS inserted;
SELECT gen_durable.insert('job', queue => 'sq', correlation_key => 'sk1') AS taken;
SELECT count(*) FROM gen_durable.pick('sq_rolled_back', 'w0');
ROLLBACK;
SELECT * FROM pg_temp.moved();
SELECT count(*) AS rolled_back_rows FROM gen_durable.instances WHERE queue = 'sq_rolled_back';

------------------------------------------------------------------------
-- picks: claimed (rows); waits (pick and await calls that slept)
------------------------------------------------------------------------
SELECT count(*) FROM gen_durable.pick('sq', 'w1', batch => 2);
SELECT count(*) FROM gen_durable.pick('sq', 'w1');
SELECT count(*) FROM gen_durable.pick('sq', 'w1');
-- claimed 3, nothing else
SELECT * FROM pg_temp.moved();
-- waits counts the waiting pick and await calls that slept (docs/operations.md,
-- stats); a call answered at once did not sleep: claimed 1
SELECT count(*) FROM gen_durable.pick('sq_many', 'w1', wait => '100 ms');
SELECT status FROM gen_durable.await(999999999, '100 ms');
SELECT status FROM gen_durable.await(:i1, '0');
SELECT * FROM pg_temp.moved();
-- a pick that waits in vain and an await that times out: waits 2
SELECT count(*) FROM gen_durable.pick('sq_empty', 'w1', wait => '100 ms');
SELECT status FROM gen_durable.await(:i1, '100 ms');
SELECT * FROM pg_temp.moved();

------------------------------------------------------------------------
-- flushes: committed_<kind>, stale_outcomes, invalid_outcomes, requeued,
-- budget_exhausted, attempts_exhausted
------------------------------------------------------------------------
SELECT gen_durable.insert('next', queue => 'sf') AS n1 \gset
SELECT gen_durable.insert('retry', queue => 'sf') AS r1 \gset
SELECT gen_durable.insert('await', queue => 'sf') AS a1 \gset
SELECT gen_durable.insert('done', queue => 'sf') AS d1 \gset
SELECT gen_durable.insert('fail', queue => 'sf') AS f1 \gset
SELECT gen_durable.insert('continue', queue => 'sf') AS c1 \gset
SELECT gen_durable.insert('requeue', queue => 'sf') AS q1 \gset
SELECT gen_durable.insert('budget', queue => 'sf', max_steps => 1) AS b1 \gset
SELECT gen_durable.insert('attempts', queue => 'sf', max_attempts => 1) AS x1 \gset
SELECT gen_durable.insert('unclaimed', queue => 'sf_idle') AS u1 \gset
SELECT count(*) FROM gen_durable.pick('sf', 'w1', batch => 100);
-- b1 spends its budget of one step first
SELECT * FROM pg_temp.out1(:b1, 'w1', 'next', '{"step": "second"}');
SELECT count(*) FROM gen_durable.pick('sf', 'w1');
-- inserted 10, claimed 10, committed_next 1
SELECT * FROM pg_temp.moved();

-- one batch with an entry of every kind and every verdict
SELECT f.id IS NULL AS no_id, f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(
         jsonb_build_object('id', :n1, 'worker', 'w1', 'kind', 'next', 'step', 's2'),
         jsonb_build_object('id', :r1, 'worker', 'w1', 'kind', 'retry', 'delay', '1 hour'),
         jsonb_build_object('id', :a1, 'worker', 'w1', 'kind', 'await',
                            'names', '["go"]'::jsonb, 'step', 'went'),
         jsonb_build_object('id', :d1, 'worker', 'w1', 'kind', 'done'),
         jsonb_build_object('id', :f1, 'worker', 'w1', 'kind', 'fail'),
         jsonb_build_object('id', :c1, 'worker', 'w1', 'kind', 'next', 'step', 's2',
                            'continue', true),
         jsonb_build_object('id', :q1, 'worker', 'w1', 'kind', 'next', 'step', 's2',
                            'continue', true, 'concurrency_key', 'newkey'),
         jsonb_build_object('id', :b1, 'worker', 'w1', 'kind', 'next', 'step', 'third'),
         jsonb_build_object('id', :x1, 'worker', 'w1', 'kind', 'retry'),
         jsonb_build_object('id', 999999999, 'worker', 'w1', 'kind', 'done'),
         jsonb_build_object('id', :u1, 'worker', 'w1', 'kind', 'done'),
         jsonb_build_object('id', :n1, 'worker', 'w1', 'kind', 'done'),
         jsonb_build_object('worker', 'w1', 'kind', 'done'),
         jsonb_build_object('id', :d1, 'worker', 'w1', 'kind', 'done', 'reslt', '{}'::jsonb)
       )) WITH ORDINALITY AS f
 ORDER BY f.ordinality;
-- committed_next 2 (n1, q1), committed_continue 1, committed_retry 1,
-- committed_await 1, committed_done 1, committed_fail 3 (f1, and b1 and x1
-- failed by the engine), requeued 1, budget_exhausted 1,
-- attempts_exhausted 1, stale_outcomes 2, invalid_outcomes 3
SELECT * FROM pg_temp.moved();
-- after the flush, the same outcome again is stale; a flush of [] counts
-- nothing
SELECT * FROM pg_temp.out1(:d1, 'w1', 'done');
SELECT count(*) FROM gen_durable.flush('[]');
SELECT * FROM pg_temp.moved();

------------------------------------------------------------------------
-- signals: signals_delivered, signals_duplicate, signals_no_target,
-- signal_wakes (a delivery that wakes a parked instance)
------------------------------------------------------------------------
SELECT gen_durable.signal(:a1, 'other');
SELECT * FROM pg_temp.moved();
SELECT gen_durable.signal(:a1, 'go', dedup_key => 'g1');
SELECT status FROM gen_durable.instances WHERE id = :a1;
SELECT * FROM pg_temp.moved();
SELECT gen_durable.signal(:a1, 'go', dedup_key => 'g1');
SELECT gen_durable.signal(999999999, 'go');
SELECT gen_durable.signal('no-such-key', 'go');
SELECT gen_durable.signal(:d1, 'go');
-- signals_duplicate 1, signals_no_target 3
SELECT * FROM pg_temp.moved();

------------------------------------------------------------------------
-- heartbeats (claims extended), released, cancelled (rows)
------------------------------------------------------------------------
SELECT gen_durable.heartbeat('w1', ARRAY[:i1, :i2, 999999999]) = ARRAY[:i1, :i2]::bigint[] AS owned;
SELECT gen_durable.heartbeat('nobody', ARRAY[:i1]);
SELECT gen_durable.heartbeat('w1', '{}');
SELECT * FROM pg_temp.moved();
SELECT gen_durable.release('w1', ARRAY[:i1]);
SELECT gen_durable.release('w1', ARRAY[:i1]);
SELECT * FROM pg_temp.moved();
SELECT gen_durable.cancel(:i2, 'no longer needed');
SELECT gen_durable.cancel(:i2);
SELECT gen_durable.cancel(:d1);
SELECT * FROM pg_temp.moved();

------------------------------------------------------------------------
-- run_maintenance: reaped, lease_failed, timeouts_fired, gc_deleted
------------------------------------------------------------------------
SELECT gen_durable.insert('fragile', queue => 'sm', max_attempts => 1) AS l1 \gset
SELECT gen_durable.insert('parked', queue => 'sm') AS t1 \gset
SELECT count(*) FROM gen_durable.pick('sm', 'w1');
SELECT * FROM pg_temp.out1(:t1, 'w1', 'await', '{"names": ["never"], "step": "woke", "timeout": "1 hour"}');
-- inserted 2, claimed 2, committed_await 1
SELECT * FROM pg_temp.moved();
-- age i3's and l1's leases, t1's deadline, and d1 and f1 past the
-- retention (1 day)
UPDATE gen_durable.instances SET lease_expires_at = now() - interval '1 min' WHERE id IN (:i3, :l1);
UPDATE gen_durable.instances SET await_deadline = now() - interval '1 s' WHERE id = :t1;
UPDATE gen_durable.instances SET updated_at = now() - interval '2 days' WHERE id IN (:d1, :f1);
-- a maintenance round that rolls back counts nothing
BEGIN;
SELECT gen_durable.run_maintenance();
ROLLBACK;
SELECT * FROM pg_temp.moved();
SELECT gen_durable.run_maintenance();
-- reaped 1, lease_failed 1, timeouts_fired 1, gc_deleted 2
SELECT * FROM pg_temp.moved();
-- a round with nothing to do counts nothing
SELECT gen_durable.run_maintenance();
SELECT * FROM pg_temp.moved();

------------------------------------------------------------------------
-- the totals since the reset, and each against what this file did
------------------------------------------------------------------------
SELECT counter, value FROM gen_durable.stats WHERE value > 0 ORDER BY counter;
SELECT s.counter, s.value, e.expected
  FROM gen_durable.stats s
  FULL JOIN (VALUES
	('inserted', 17), ('insert_duplicates', 2), ('claimed', 16),
	('committed_next', 3), ('committed_continue', 1), ('committed_retry', 1),
	('committed_await', 2), ('committed_done', 1), ('committed_fail', 3),
	('stale_outcomes', 3), ('invalid_outcomes', 3), ('requeued', 1),
	('budget_exhausted', 1), ('attempts_exhausted', 1),
	('signals_delivered', 2), ('signals_duplicate', 1), ('signals_no_target', 3),
	('signal_wakes', 1), ('heartbeats', 2), ('released', 1), ('cancelled', 1),
	('reaped', 1), ('lease_failed', 1), ('timeouts_fired', 1), ('gc_deleted', 2),
	('waits', 2)) AS e(counter, expected) ON e.counter = s.counter
 WHERE s.value IS DISTINCT FROM coalesce(e.expected, 0);
-- the rows left: 17 inserted, 2 deleted by GC
SELECT status, count(*) FROM gen_durable.instances GROUP BY status ORDER BY status;

------------------------------------------------------------------------
-- the queues view: per queue, instances by status and the age of the
-- oldest due runnable row
------------------------------------------------------------------------
SELECT gen_durable.insert('due_old', queue => 'qa', run_at => now() - interval '1 hour') IS NOT NULL AS ok;
SELECT gen_durable.insert('due_new', queue => 'qa') IS NOT NULL AS ok;
SELECT gen_durable.insert('sched', queue => 'qa', delay => '1 hour') IS NOT NULL AS ok;
SELECT gen_durable.insert('exec', queue => 'qa') IS NOT NULL AS ok;
SELECT gen_durable.insert('park', queue => 'qa') AS qa_park \gset
SELECT gen_durable.insert('kids', queue => 'qa') AS qa_kids \gset
SELECT gen_durable.insert('ok', queue => 'qa') AS qa_ok \gset
SELECT gen_durable.insert('bad', queue => 'qa') AS qa_bad \gset
SELECT gen_durable.insert('stop', queue => 'qa') AS qa_stop \gset
SELECT gen_durable.insert('sched', queue => 'qb', delay => '1 day') IS NOT NULL AS ok;
SELECT gen_durable.insert('ok', queue => 'qb') AS qb_ok \gset
SELECT count(*) FROM gen_durable.pick('qa', 'wq', fsms => ARRAY['exec', 'park', 'ok', 'bad']);
SELECT count(*) FROM gen_durable.pick('qb', 'wq');
SELECT applied FROM gen_durable.flush(jsonb_build_array(
	jsonb_build_object('id', :qa_park, 'worker', 'wq', 'kind', 'await', 'names', '["x"]'::jsonb, 'step', 's'),
	jsonb_build_object('id', :qa_ok, 'worker', 'wq', 'kind', 'done'),
	jsonb_build_object('id', :qa_bad, 'worker', 'wq', 'kind', 'fail'),
	jsonb_build_object('id', :qb_ok, 'worker', 'wq', 'kind', 'done')));
SELECT gen_durable.cancel(:qa_stop);
UPDATE gen_durable.instances SET status = 'awaiting_children' WHERE id = :qa_kids;
SELECT queue, due, scheduled, executing, awaiting_signal, awaiting_children, done, failed,
	   cancelled, oldest_due_age IS NOT NULL AS has_due_age,
	   oldest_due_age >= interval '1 hour' AND oldest_due_age < interval '2 hours' AS age_1_hour
  FROM gen_durable.queues WHERE queue IN ('qa', 'qb') ORDER BY queue;
-- the view's columns
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'gen_durable.queues'::regclass AND attnum > 0
 ORDER BY attnum;
-- a queue with no rows is not listed
SELECT count(*) FROM gen_durable.queues WHERE queue = 'no_such_queue';
-- this section: inserted 11, claimed 5, committed_await 1, committed_done 2,
-- committed_fail 1, cancelled 1
SELECT * FROM pg_temp.moved();

------------------------------------------------------------------------
-- committed work only, also for subtransactions: a call undone by
-- ROLLBACK TO SAVEPOINT, or by an exception caught in PL/pgSQL, did not
-- happen, so its transaction's commit must not count it (src/stats.c: "a
-- rolled-back call counts nothing")
------------------------------------------------------------------------
-- a released savepoint is committed work: inserted 1
BEGIN;
SAVEPOINT sp;
SELECT gen_durable.insert('job', queue => 'sq_released') IS NOT NULL AS inserted;
RELEASE SAVEPOINT sp;
COMMIT;
SELECT * FROM pg_temp.moved();
-- rolled back to the savepoint: nothing
BEGIN;
SAVEPOINT sp;
SELECT gen_durable.insert('job', queue => 'sq_savepoint') IS NOT NULL AS inserted;
ROLLBACK TO SAVEPOINT sp;
COMMIT;
SELECT count(*) AS rows FROM gen_durable.instances WHERE queue = 'sq_savepoint';
SELECT * FROM pg_temp.moved();
DO $$
BEGIN
	PERFORM gen_durable.insert('job', queue => 'sq_savepoint');
	RAISE EXCEPTION 'undo the insert';
EXCEPTION WHEN raise_exception THEN
	NULL;
END
$$;
-- undone by the exception: nothing
SELECT count(*) AS rows FROM gen_durable.instances WHERE queue = 'sq_savepoint';
SELECT * FROM pg_temp.moved();

DROP EXTENSION gen_durable;
