-- at-0.1.0.sql: at 0.1.0, instances that use what 0.1.0 had (queue v1):
-- correlation keys (one in every status's scope), priorities, a delay,
-- metadata, step budgets and fsm versions, a K=1 concurrency key, a rate
-- limit (stored, not enforced before 0.4.0), signals by key and by id with
-- a dedup key; and what the 0.1.0 library's pick and flush left: claims,
-- a parked instance, settled ones.

SELECT gen_durable.insert('job', '{"n": 1}', queue => 'v1', correlation_key => 'v1-plain',
						  metadata => '{"made": "0.1.0"}') IS NOT NULL AS plain;
SELECT gen_durable.insert('order', '{"n": 2}', queue => 'v1', priority => -1,
						  correlation_key => 'v1-signalled') IS NOT NULL AS signalled;
SELECT gen_durable.insert('job', '{"n": 3}', queue => 'v1', correlation_key => 'v1-claimed')
	   IS NOT NULL AS claimed;
SELECT gen_durable.insert('order', '{"n": 4}', queue => 'v1', correlation_key => 'v1-parked')
	   IS NOT NULL AS parked;
SELECT gen_durable.insert('job', '{"n": 5}', queue => 'v1', correlation_key => 'v1-done',
						  correlation_scope => '{runnable,executing,awaiting_signal,awaiting_children,done,failed,cancelled}')
	   IS NOT NULL AS done;
SELECT gen_durable.insert('job', '{"n": 6}', queue => 'v1', correlation_key => 'v1-failed')
	   IS NOT NULL AS failed;
SELECT gen_durable.insert('job', queue => 'v1', correlation_key => 'v1-k1-a',
						  concurrency_key => 'acct:1') IS NOT NULL AS k1_a;
SELECT gen_durable.insert('job', queue => 'v1', correlation_key => 'v1-k1-b',
						  concurrency_key => 'acct:1') IS NOT NULL AS k1_b;
SELECT gen_durable.insert('job', queue => 'v1', correlation_key => 'v1-rated',
						  rate_limit => 'api:eu', weight => 2) IS NOT NULL AS rated;
SELECT gen_durable.insert('job', queue => 'v1', correlation_key => 'v1-later', delay => '1 day')
	   IS NOT NULL AS later;
SELECT gen_durable.insert('job', queue => 'v1', correlation_key => 'v1-budget', max_steps => 1,
						  fsm_version => 2, max_attempts => 3) IS NOT NULL AS budget;
SELECT gen_durable.insert('job', queue => 'v1', correlation_key => 'v1-released')
	   IS NOT NULL AS released;
SELECT gen_durable.insert('job', queue => 'v1', correlation_key => 'v1-spare')
	   IS NOT NULL AS spare;
-- a live instance holds its key
SELECT gen_durable.insert('job', queue => 'v1', correlation_key => 'v1-plain') IS NULL AS taken;

-- signals: by key with a dedup key (sent twice), by id, to nobody
SELECT gen_durable.signal('v1-signalled', 'hello', '{"from": "0.1.0"}', dedup_key => 'hello-1');
SELECT gen_durable.signal('v1-signalled', 'hello', '{"from": "0.1.0"}', dedup_key => 'hello-1');
SELECT gen_durable.signal(pg_temp.id('v1-signalled'), 'by-id');
SELECT gen_durable.signal('v1-nobody', 'hello');

-- what the 0.1.0 library's pick and flush wrote: w1 claims six; one parks
-- until signal 'go' (a day at most), one is done, one failed
SELECT pg_temp.old_claim('{v1-claimed,v1-parked,v1-done,v1-failed,v1-k1-a,v1-released}', 'w1')
	   AS claimed;
SELECT pg_temp.old_park('v1-parked', 'after', '{go}', '1 day');
SELECT pg_temp.old_end('v1-done', 'done', '{"sent": true}');
SELECT pg_temp.old_end('v1-failed', 'failed', '{"message": "card expired"}');
-- the claims are held
SELECT gen_durable.heartbeat('w1', pg_temp.ids('{v1-claimed,v1-k1-a,v1-released}'))
	   = pg_temp.ids('{v1-claimed,v1-k1-a,v1-released}') AS held;

-- the current library's pick, flush, release, cancel and run_maintenance
-- need a newer schema, and say so
SELECT pg_temp.err($$SELECT * FROM gen_durable.pick('v1', 'w1')$$) AS pick,
	   pg_temp.err(format($$SELECT * FROM gen_durable.flush('[{"id": %s, "worker": "w1", "kind": "done"}]')$$,
						  pg_temp.id('v1-claimed'))) AS flush,
	   pg_temp.err($$SELECT gen_durable.release('w1')$$) AS release,
	   pg_temp.err(format('SELECT gen_durable.cancel(%s)', pg_temp.id('v1-spare'))) AS cancel,
	   pg_temp.err($$SELECT gen_durable.run_maintenance()$$) AS run_maintenance;
SELECT pg_temp.hint($$SELECT * FROM gen_durable.pick('v1', 'w1')$$) AS hint;

SELECT * FROM pg_temp.show('v1');
