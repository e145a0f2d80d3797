-- at-0.2.0.sql: at 0.2.0.  First what 0.1.0 left, with the API of 0.2.0;
-- then instances that use what 0.2.0 added (queue v2): await, the stats
-- and queues views, and claims that record their session.

\if :since_010
-- 0.1.0's instances: await sees each as it is, w1 still holds its claims
-- and hands one back, a signal wakes the parked one, the queues view
-- counts them
SELECT i.correlation_key AS key, a.status, a.step, a.attempt
  FROM gen_durable.instances i, gen_durable.await(i.id, '0') a
 WHERE i.queue = 'v1' ORDER BY 1;
SELECT gen_durable.heartbeat('w1', pg_temp.ids('{v1-claimed,v1-k1-a,v1-released}'))
	   = pg_temp.ids('{v1-claimed,v1-k1-a,v1-released}') AS held;
SELECT gen_durable.release('w1', pg_temp.ids('{v1-released}')) AS released;
SELECT gen_durable.signal('v1-parked', 'go', '{"ok": true}', dedup_key => 'go-1') AS woken;
SELECT status, step, awaits, await_deadline IS NULL AS no_deadline
  FROM gen_durable.instances WHERE correlation_key = 'v1-parked';
SELECT queue, due, scheduled, executing, awaiting_signal, done, failed, cancelled,
	   oldest_due_age IS NOT NULL AS has_due_age
  FROM gen_durable.queues WHERE queue = 'v1';
\endif

-- 0.2.0's features: a claim whose backend exited (the sessions of a
-- server that ran before: ids start at the server's start time in
-- microseconds, so 1 was never live here), one with no session recorded
-- (reclaim_on_disconnect off), an instance some client awaits
SELECT gen_durable.insert('job', '{"n": 1}', queue => 'v2', correlation_key => 'v2-dead')
	   IS NOT NULL AS dead;
SELECT gen_durable.insert('job', '{"n": 2}', queue => 'v2', correlation_key => 'v2-claimed')
	   IS NOT NULL AS claimed;
SELECT gen_durable.insert('job', '{"n": 3}', queue => 'v2', correlation_key => 'v2-job')
	   IS NOT NULL AS job;
SELECT gen_durable.insert('job', '{"n": 4}', queue => 'v2', correlation_key => 'v2-done')
	   IS NOT NULL AS done;
SELECT pg_temp.old_claim('{v2-dead,v2-done}', 'w2', session => 1) AS claimed_in_dead_session;
SELECT pg_temp.old_claim('{v2-claimed}', 'w2') AS claimed_without_session;
SELECT pg_temp.old_end('v2-done', 'done', '{"n": 4}') AS done;
SELECT status, result FROM gen_durable.await(pg_temp.id('v2-done'), '0');
SELECT status FROM gen_durable.await(pg_temp.id('v2-claimed'), '0');
-- a timed await of a runnable instance waits its time out
SELECT status FROM gen_durable.await(pg_temp.id('v2-job'), '10 ms');
SELECT queue, due, executing, done FROM gen_durable.queues WHERE queue = 'v2';
SELECT count(*) > 0 AS has_counters FROM gen_durable.stats;
SELECT gen_durable.reset_stats() IS NOT NULL AS reset;

-- still waiting for a newer schema: pick, flush, cancel, run_maintenance
SELECT pg_temp.err($$SELECT * FROM gen_durable.pick('v2', 'w2')$$) AS pick,
	   pg_temp.err(format($$SELECT * FROM gen_durable.flush('[{"id": %s, "worker": "w2", "kind": "done"}]')$$,
						  pg_temp.id('v2-claimed'))) AS flush,
	   pg_temp.err(format('SELECT gen_durable.cancel(%s)', pg_temp.id('v2-job'))) AS cancel,
	   pg_temp.err($$SELECT gen_durable.run_maintenance()$$) AS run_maintenance;

SELECT * FROM pg_temp.show('v2');
