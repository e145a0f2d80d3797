-- at-0.5.0.sql: at 0.5.0, which added least privilege: the roles
-- gen_durable_producer, gen_durable_worker and gen_durable_admin, and
-- nothing for PUBLIC.  Login roles that are members of each (made here,
-- dropped with the extension at the end of the path) use what the releases
-- before left and add instances of their own (queue v5); the later steps
-- check that each can still do its part.

CREATE ROLE regress_up_producer LOGIN IN ROLE gen_durable_producer;
CREATE ROLE regress_up_worker LOGIN IN ROLE gen_durable_worker;
CREATE ROLE regress_up_admin LOGIN IN ROLE gen_durable_admin;
CREATE ROLE regress_up_nobody LOGIN;
SELECT pg_temp.id('v1-signalled') AS v1_signalled, pg_temp.id('v1-done') AS v1_done,
	   pg_temp.ids('{v1-claimed,v1-k1-a}') AS w1_claims,
	   pg_temp.ids('{v4-gated-a,v4-gated-b,v4-rated-a}') AS w4_claims \gset

SET ROLE regress_up_producer;
SELECT gen_durable.insert('job', '{"by": "producer"}', queue => 'v5',
						  correlation_key => 'v5-by-producer') IS NOT NULL AS inserted;
SELECT gen_durable.insert('job', queue => 'v5', correlation_key => 'v5-claimed')
	   IS NOT NULL AS inserted;
SELECT count(*) AS found FROM gen_durable.find('{"made": "0.1.0"}');
\if :since_010
SELECT gen_durable.signal(:v1_signalled, 'again', dedup_key => 'again-1') AS signalled;
SELECT status, result FROM gen_durable.await(:v1_done, '0');
\endif
SELECT pg_temp.err($$SELECT * FROM gen_durable.pick('v5', 'p')$$) AS pick,
	   pg_temp.err($$UPDATE gen_durable.instances SET priority = 1$$) AS write_instances,
	   pg_temp.err($$SELECT count(*) FROM gen_durable.signals$$) AS read_signals;
RESET ROLE;

SET ROLE regress_up_worker;
\if :since_010
SELECT gen_durable.heartbeat('w1', :'w1_claims') = :'w1_claims' AS w1_held;
\endif
\if :since_040
SELECT gen_durable.heartbeat('w4', :'w4_claims') = :'w4_claims' AS w4_held;
\endif
SELECT pg_temp.err($$SELECT gen_durable.insert('job', queue => 'v5')$$) AS insert,
	   pg_temp.err($$SELECT count(*) FROM gen_durable.instances$$) AS read_instances;
RESET ROLE;

SET ROLE regress_up_admin;
SELECT queue, due, executing, done, failed, cancelled
  FROM gen_durable.queues ORDER BY queue;
SELECT count(*) AS limits FROM gen_durable.limits;
SELECT gen_durable.signal('v5-by-producer', 'from-admin') AS signalled;
RESET ROLE;

SET ROLE regress_up_nobody;
SELECT pg_temp.err($$SELECT gen_durable.insert('job', queue => 'v5')$$) AS insert,
	   pg_temp.err($$SELECT count(*) FROM gen_durable.instances$$) AS read_instances,
	   pg_temp.err($$SELECT * FROM gen_durable.queues$$) AS read_queues;
RESET ROLE;

-- a claim the 0.5.0 library made
SELECT pg_temp.old_claim('{v5-claimed}', 'w5') AS claimed;

-- what each role may execute
SELECT r.rolname, string_agg(p.proname, ', ' ORDER BY p.proname) AS may_execute
  FROM (VALUES ('regress_up_producer'), ('regress_up_worker'), ('regress_up_admin'),
			   ('regress_up_nobody')) AS r(rolname)
  LEFT JOIN pg_proc p ON p.pronamespace = 'gen_durable'::regnamespace
					 AND has_function_privilege(r.rolname, p.oid, 'EXECUTE')
 GROUP BY 1 ORDER BY 1;

-- still waiting for a newer schema: pick, flush, run_maintenance
SELECT pg_temp.err($$SELECT * FROM gen_durable.pick('v5', 'w5')$$) AS pick,
	   pg_temp.err(format($$SELECT * FROM gen_durable.flush('[{"id": %s, "worker": "w5", "kind": "done"}]')$$,
						  pg_temp.id('v5-claimed'))) AS flush,
	   pg_temp.err($$SELECT gen_durable.run_maintenance()$$) AS run_maintenance;

SELECT * FROM pg_temp.show('v5');
