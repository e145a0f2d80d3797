-- privileges.sql: least privilege.  gen_durable_producer inserts, signals,
-- awaits, cancels and finds; gen_durable_worker picks, flushes, heartbeats,
-- releases and admits; gen_durable_admin does both and sets limits,
-- retries, fails, runs maintenance and reads the views and tables.
-- PUBLIC gets nothing, and no role but the owner writes the tables.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

CREATE ROLE regress_gd_producer LOGIN IN ROLE gen_durable_producer;
CREATE ROLE regress_gd_worker LOGIN IN ROLE gen_durable_worker;
CREATE ROLE regress_gd_admin LOGIN IN ROLE gen_durable_admin;
CREATE ROLE regress_gd_nobody LOGIN;

-- what each role may execute, and read or write
SELECT r.rolname, f.name,
	   has_function_privilege(r.rolname, f.sig, 'EXECUTE') AS can_execute
  FROM (VALUES ('regress_gd_producer'), ('regress_gd_worker'), ('regress_gd_admin'),
			   ('regress_gd_nobody')) AS r(rolname)
 CROSS JOIN (SELECT p.proname AS name, p.oid::regprocedure AS sig
			   FROM pg_proc p WHERE p.pronamespace = 'gen_durable'::regnamespace) f
 WHERE has_function_privilege(r.rolname, f.sig, 'EXECUTE')
 ORDER BY 1, 2;
SELECT r.rolname, t.relname,
	   has_table_privilege(r.rolname, t.oid, 'SELECT') AS can_read,
	   has_table_privilege(r.rolname, t.oid, 'INSERT, UPDATE, DELETE, TRUNCATE') AS can_write
  FROM (VALUES ('regress_gd_producer'), ('regress_gd_worker'), ('regress_gd_admin'),
			   ('regress_gd_nobody')) AS r(rolname)
 CROSS JOIN pg_class t
 WHERE t.relnamespace = 'gen_durable'::regnamespace AND t.relkind IN ('r', 'v')
 ORDER BY 1, 2;
SELECT count(*) AS functions_public_may_execute FROM pg_proc p
 WHERE p.pronamespace = 'gen_durable'::regnamespace
   AND has_function_privilege('public', p.oid, 'EXECUTE');

-- the producer's part
SET ROLE regress_gd_producer;
SELECT gen_durable.insert('job', queue => 'lp', correlation_key => 'lp-1') IS NOT NULL AS inserted;
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	'[{"fsm": "job", "queue": "lp"}, {"fsm": "job", "queue": "lp", "metadata": {"t": 1}}]');
SELECT gen_durable.signal('lp-1', 'go') AS signalled;
SELECT count(*) AS found FROM gen_durable.find('{"t": 1}');
SELECT status FROM gen_durable.await((SELECT id FROM gen_durable.find('{"t": 1}')), '0');
-- but not the worker's, nor writing the tables (reading the instances is
-- what find does)
SELECT * FROM gen_durable.pick('lp', 'w');
SELECT count(*) AS reads_instances FROM gen_durable.instances;
UPDATE gen_durable.instances SET status = 'done';
SELECT count(*) FROM gen_durable.signals;
RESET ROLE;

-- the worker's part
SET ROLE regress_gd_worker;
SELECT f.applied, count(*) FROM gen_durable.flush(
	(SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
	   FROM gen_durable.pick('lp', 'w', 2) p)) f GROUP BY 1;
SELECT cardinality(gen_durable.heartbeat('w', ARRAY(SELECT id FROM gen_durable.pick('lp', 'w', 3))))
	   AS held;
SELECT gen_durable.release('w') AS released;
-- but not the producer's or the admin's
SELECT gen_durable.insert('job', queue => 'lp');
SELECT gen_durable.set_rate_limit('r', 1, '1 s');
DELETE FROM gen_durable.signals;
RESET ROLE;

-- the admin's part, and both others'
SET ROLE regress_gd_admin;
SELECT gen_durable.set_rate_limit('r', 10, '1 second');
SELECT gen_durable.set_concurrency_limit('g', 2);
SELECT gen_durable.drop_limit('rate', 'r') AS dropped;
SELECT gen_durable.insert('job', queue => 'la') IS NOT NULL AS inserted;
SELECT count(*) AS picked FROM gen_durable.pick('la', 'wa');
SELECT gen_durable.fail((SELECT id FROM gen_durable.instances WHERE queue = 'la'), 'no') AS failed;
SELECT gen_durable.retry((SELECT id FROM gen_durable.instances WHERE queue = 'la')) AS retried;
SELECT gen_durable.run_maintenance() IS NOT NULL AS maintained;
SELECT count(*) > 0 AS reads_stats FROM gen_durable.stats;
SELECT queue, due, failed FROM gen_durable.queues WHERE queue IN ('la', 'lp') ORDER BY queue;
SELECT count(*) AS reads_instances FROM gen_durable.instances;
-- reading, not writing
DELETE FROM gen_durable.instances;
RESET ROLE;

-- a role with none of them gets nothing
SET ROLE regress_gd_nobody;
SELECT gen_durable.insert('job');
SELECT count(*) FROM gen_durable.stats;
RESET ROLE;

-- and each refusal says which role to grant (0.7.0; the hint is added as
-- the error is reported, so it shows with the default verbosity)
\set VERBOSITY default
SET ROLE regress_gd_nobody;
SELECT gen_durable.insert('job');
RESET ROLE;
SET ROLE regress_gd_producer;
SELECT * FROM gen_durable.pick('lp', 'w');
SELECT gen_durable.pause_queue('lp');
SELECT count(*) FROM gen_durable.signals;
SELECT count(*) FROM gen_durable.queues;
RESET ROLE;
SET ROLE regress_gd_worker;
SELECT gen_durable.insert('job');
SELECT count(*) FROM gen_durable.instances;
RESET ROLE;
-- a function that is not one of gen_durable's gets no hint (one of the
-- same name would get gen_durable's, which names itself as such)
CREATE FUNCTION pg_temp.no_hint_here() RETURNS int LANGUAGE sql AS 'SELECT 1';
REVOKE ALL ON FUNCTION pg_temp.no_hint_here() FROM PUBLIC;
SET ROLE regress_gd_worker;
SELECT pg_temp.no_hint_here();
RESET ROLE;
\set VERBOSITY terse

DROP EXTENSION gen_durable;
DROP ROLE regress_gd_producer, regress_gd_worker, regress_gd_admin, regress_gd_nobody;
