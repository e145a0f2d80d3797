-- upgrade.sql: the complete install script of the current version
-- (sql/gen_durable--0.9.0.sql, what CREATE EXTENSION gen_durable runs)
-- gives exactly what every upgrade path gives: from each released version
-- (CREATE EXTENSION gen_durable VERSION 'X' installs it), stepping
-- through each later release in turn, on data that uses the features of
-- the version each step starts from.  After each step the data is all
-- there and still works; at the end of each path the full catalog
-- description of the upgraded extension (pg_temp.describe(), in
-- test/upgrade/helpers.sql) is compared with the fresh install's, and the
-- objects that differ are listed.
--
-- The library is always the current one (pg_regress cannot run an old
-- library).  Its pick, flush and run_maintenance fail on a schema older
-- than 0.6.0 with a hint to run ALTER EXTENSION UPDATE (shown at each old
-- version), so what an old library's pick and flush wrote (claims, parks,
-- spawns, settled instances) is written directly, as its statements wrote
-- it (the old_* helpers), and the rest with the calls that work.
--
-- (The \i paths are relative to the directory pg_regress runs in, the
-- top of the source tree, as make installcheck runs it.)
--
-- This test stays and grows with every version.  For a new version X.Y.Z:
--   * write sql/gen_durable--X.Y.Z.sql complete, by hand, and keep the
--     previous complete script only if a release shipped it;
--   * add test/upgrade/at-X.Y.Z.sql (what the versions before left, with
--     the API of X.Y.Z; then instances using what X.Y.Z added), its step
--     in test/upgrade/path.sql, and a path from the previous version below;
--   * pg_temp.describe() needs no change unless the extension starts using
--     a new kind of object (it already lists every member by name, so a
--     new kind shows up there, but its definition would not be compared).
\set VERBOSITY terse
\i test/upgrade/helpers.sql

-- the versions and the update paths the installation offers
SELECT version, superuser, relocatable, schema, requires
  FROM pg_available_extension_versions WHERE name = 'gen_durable' ORDER BY version;
SELECT * FROM pg_extension_update_paths('gen_durable') WHERE path IS NOT NULL ORDER BY 1, 2;

------------------------------------------------------------------------
-- a fresh install of the default version: gen_durable--0.9.0.sql alone
-- (no update script ran: the columns that updates added with a default
-- would have their value "missing" in the rows that were there), in a
-- cluster without the extension's roles
------------------------------------------------------------------------
SELECT FROM pg_temp.clean_slate();
CREATE EXTENSION gen_durable;
SELECT extversion FROM pg_extension WHERE extname = 'gen_durable';
SELECT pg_temp.worker_running() AS worker_running;
SELECT attname, atthasmissing FROM pg_attribute
 WHERE attrelid = 'gen_durable.instances'::regclass AND attname IN ('spawn_round', 'claim')
 ORDER BY attnum;
CREATE TEMP TABLE fresh AS SELECT * FROM pg_temp.describe();
CREATE TEMP TABLE upgraded (LIKE fresh);
-- the shape of the current version, kind by kind
SELECT kind, count(*) FROM fresh GROUP BY kind ORDER BY kind;
SELECT object FROM fresh WHERE kind = 'member' ORDER BY object;
SELECT object, regexp_replace(detail, ' owner=\S+', '') AS detail
  FROM fresh WHERE kind IN ('extension', 'config_dump', 'enum', 'role') ORDER BY kind, object;
-- the new install works
SELECT gen_durable.insert('job', queue => 'fresh') IS NOT NULL AS inserted;
SELECT f.applied FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done', 'claim', claim))
	  FROM gen_durable.pick('fresh', 'w'))) f;
DROP EXTENSION gen_durable;
SELECT FROM pg_temp.clean_slate();
SELECT count(*) AS left FROM pg_temp.describe();

------------------------------------------------------------------------
-- every upgrade path
------------------------------------------------------------------------
\set from 0.1.0
\i test/upgrade/path.sql
\set from 0.2.0
\i test/upgrade/path.sql
\set from 0.3.0
\i test/upgrade/path.sql
\set from 0.4.0
\i test/upgrade/path.sql
\set from 0.5.0
\i test/upgrade/path.sql
\set from 0.6.0
\i test/upgrade/path.sql
\set from 0.7.0
\i test/upgrade/path.sql
\set from 0.8.0
\i test/upgrade/path.sql
