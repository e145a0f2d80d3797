/* gen_durable--0.4.0--0.5.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.5.0'" to load this file. \quit

-- pick and flush build a job from the instance's columns in place
-- (src/job.h) instead of calling this function over the whole row, which
-- cost a claim about a tenth of its time: nothing calls it any more.
DROP FUNCTION gen_durable._job(gen_durable.instances);

-- Least privilege.  Three roles, each able to do exactly its part:
--   gen_durable_producer  insert, insert_many, signal, await, cancel, find;
--   gen_durable_worker    pick, flush, heartbeat, release, admit;
--   gen_durable_admin     both of the above, and the limits, retry, fail,
--                         run_maintenance, reset_stats, the views, and
--                         reading the tables.
-- Roles belong to the cluster: a database that installed the extension
-- earlier created them already.  Nothing is granted to PUBLIC, and only
-- the extension's owner writes the tables: every function runs with the
-- owner's rights (SECURITY DEFINER) and does only what it documents; the C
-- functions run their statements with pg_catalog alone on the search path.
-- The exception is find, a SQL function the planner inlines into the
-- caller's query (so that the caller's filters reach the GIN index): it
-- runs with the caller's rights, and producers may read the instances,
-- which is what find shows them anyway.
DO $roles$
DECLARE
	r text;
BEGIN
	FOREACH r IN ARRAY ARRAY['gen_durable_producer', 'gen_durable_worker', 'gen_durable_admin']
	LOOP
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
			EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
		END IF;
	END LOOP;
END
$roles$;
GRANT gen_durable_producer, gen_durable_worker TO gen_durable_admin;

REVOKE ALL ON SCHEMA gen_durable FROM PUBLIC;
GRANT USAGE ON SCHEMA gen_durable
	TO gen_durable_producer, gen_durable_worker, gen_durable_admin;
REVOKE ALL ON ALL TABLES IN SCHEMA gen_durable FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA gen_durable FROM PUBLIC;
GRANT SELECT ON ALL TABLES IN SCHEMA gen_durable TO gen_durable_admin;
GRANT SELECT ON gen_durable.instances TO gen_durable_producer;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA gen_durable FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gen_durable.find(jsonb) TO gen_durable_producer;

DO $grants$
DECLARE
	f record;
	role_of CONSTANT jsonb := '{
		"insert": "gen_durable_producer", "insert_many": "gen_durable_producer",
		"signal": "gen_durable_producer", "await": "gen_durable_producer",
		"cancel": "gen_durable_producer",
		"pick": "gen_durable_worker", "flush": "gen_durable_worker",
		"heartbeat": "gen_durable_worker", "release": "gen_durable_worker",
		"admit": "gen_durable_worker",
		"set_rate_limit": "gen_durable_admin", "set_concurrency_limit": "gen_durable_admin",
		"drop_limit": "gen_durable_admin", "retry": "gen_durable_admin",
		"fail": "gen_durable_admin", "run_maintenance": "gen_durable_admin",
		"reset_stats": "gen_durable_admin", "_stats": "gen_durable_admin"}';
BEGIN
	FOR f IN
		SELECT p.oid::pg_catalog.regprocedure AS sig, p.proname
		  FROM pg_catalog.pg_proc p
		 WHERE p.pronamespace = 'gen_durable'::pg_catalog.regnamespace
	LOOP
		IF role_of ? f.proname THEN
			EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER', f.sig);
			EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I',
									  f.sig, role_of ->> f.proname::text);
		END IF;
	END LOOP;
END
$grants$;
