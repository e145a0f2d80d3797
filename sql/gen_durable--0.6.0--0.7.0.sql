/* gen_durable--0.6.0--0.7.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gen_durable UPDATE TO '0.7.0'" to load this file. \quit

-- pg_dump keeps the identity sequences' positions.  They are extension
-- members, and pg_dump writes a member's data only when it is marked here:
-- a database restored without them restarted every id at 1, so each new
-- insert, signal or history row failed on a restored primary key until
-- the sequence passed the highest restored id.
SELECT pg_catalog.pg_extension_config_dump('gen_durable.instances_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.signals_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('gen_durable.step_history_id_seq', '');

-- A child's parent_id is no longer a foreign key.  pg_dump restores the
-- rows of an extension's tables under the extension's own constraints, so
-- it orders them by their foreign keys, and a table that references itself
-- made every dump warn of circular foreign-key constraints.  The engine
-- never relied on the key: children are created only by a flush that
-- holds their parent; a parent is deleted by GC only once terminal, while
-- GC spares the terminal children of a live parent (I-29); a child that
-- outlives its parent (one retried after the parent ended) just has no
-- join to report to.  The column now keeps the parent's id after GC
-- deleted the parent, instead of being set to NULL by a second write of
-- every child row (which GC also no longer pays).
ALTER TABLE gen_durable.instances DROP CONSTRAINT instances_parent_id_fkey;

COMMENT ON COLUMN gen_durable.instances.parent_id IS
	'The parent that spawned this instance (NULL for a top-level one); kept after GC deletes the parent';

-- this database keeps (or gets) its maintenance worker once the update commits
SELECT gen_durable._start_worker();
