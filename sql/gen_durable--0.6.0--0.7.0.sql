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

-- health: for each of the engine's tables, its size, its live and dead
-- rows and its vacuuming, and what holds the vacuum horizon back: the
-- oldest transaction or snapshot of the cluster (a backend, a prepared
-- transaction, a replication slot, a standby's feedback), which keeps
-- vacuum from removing any row that died after it began.  The hint says
-- what to do.  The horizon counts as held back when its holder is older
-- than the longest wait the engine itself holds a snapshot for
-- (gen_durable.max_wait) plus 5 seconds, or, for a replication slot or a
-- standby, more than a million transactions behind.  Reads only the
-- statistics views and the catalogs (no scan of the tables), as the
-- extension's owner, so that other roles' backends are shown
-- (pg_stat_activity hides them from unprivileged roles).
CREATE FUNCTION gen_durable._health()
RETURNS TABLE (table_name text, total_bytes bigint, heap_bytes bigint, index_bytes bigint,
			   toast_bytes bigint, live_rows bigint, dead_rows bigint,
			   last_autovacuum timestamptz, autovacuum_count bigint, vacuum_phase text,
			   horizon_held boolean, horizon_kind text, horizon_pid int,
			   horizon_application text, horizon_age interval, hint text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH limits AS (
		SELECT COALESCE(pg_catalog.current_setting('gen_durable.max_wait', true), '30s')::interval
			   + interval '5 seconds' AS held_after
	), holder AS (
		SELECT kind, pid, application, age, xid_age
		  FROM (SELECT 'backend' AS kind, a.pid, a.application_name AS application,
					   pg_catalog.now() - COALESCE(a.xact_start, a.query_start) AS age,
					   GREATEST(pg_catalog.age(a.backend_xid), pg_catalog.age(a.backend_xmin)) AS xid_age
				  FROM pg_catalog.pg_stat_activity a
				 WHERE (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
				   AND a.pid <> pg_catalog.pg_backend_pid()
				UNION ALL
				SELECT 'prepared transaction', NULL, p.gid, pg_catalog.now() - p.prepared,
					   pg_catalog.age(p.transaction)
				  FROM pg_catalog.pg_prepared_xacts p
				UNION ALL
				SELECT 'replication slot', s.active_pid, s.slot_name, NULL,
					   GREATEST(pg_catalog.age(s.xmin), pg_catalog.age(s.catalog_xmin))
				  FROM pg_catalog.pg_replication_slots s
				 WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL
				UNION ALL
				SELECT 'standby', r.pid, r.application_name, NULL, pg_catalog.age(r.backend_xmin)
				  FROM pg_catalog.pg_stat_replication r
				 WHERE r.backend_xmin IS NOT NULL) h
		 ORDER BY xid_age DESC NULLS LAST, age DESC NULLS LAST
		 LIMIT 1
	)
	SELECT c.relname::text,
		   pg_catalog.pg_total_relation_size(c.oid),
		   pg_catalog.pg_relation_size(c.oid),
		   pg_catalog.pg_indexes_size(c.oid),
		   COALESCE(pg_catalog.pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0),
		   s.n_live_tup, s.n_dead_tup, s.last_autovacuum, s.autovacuum_count,
		   v.phase,
		   COALESCE(h.age > l.held_after OR h.kind IN ('replication slot', 'standby')
					AND h.xid_age > 1000000, false),
		   h.kind, h.pid, h.application, h.age,
		   CASE
		   WHEN h.age > l.held_after AND h.kind = 'backend' THEN
			   pg_catalog.format('Backend %s (%s) has had a transaction or snapshot open for %s: vacuum removes no row that died since. End it (pg_terminate_backend(%s)) or keep transactions short.',
								 h.pid, COALESCE(NULLIF(h.application, ''), 'no application name'),
								 pg_catalog.date_trunc('second', h.age), h.pid)
		   WHEN h.age > l.held_after THEN
			   pg_catalog.format('The prepared transaction %L has been open for %s: vacuum removes no row that died since. COMMIT PREPARED or ROLLBACK PREPARED it.',
								 h.application, pg_catalog.date_trunc('second', h.age))
		   WHEN h.kind IN ('replication slot', 'standby') AND h.xid_age > 1000000 THEN
			   pg_catalog.format('The %s %s holds the horizon %s transactions back: vacuum removes no row that died since. Let it catch up, or drop it.',
								 h.kind, h.application, h.xid_age)
		   WHEN s.n_dead_tup > GREATEST(s.n_live_tup, 10000) AND v.phase IS NULL THEN
			   'More dead rows than live ones and no vacuum running: autovacuum is behind on this table (docs/operations.md, "Operating it under load").'
		   END
	  FROM pg_catalog.pg_class c
	  LEFT JOIN pg_catalog.pg_stat_all_tables s ON s.relid = c.oid
	  LEFT JOIN pg_catalog.pg_stat_progress_vacuum v ON v.relid = c.oid
	  CROSS JOIN limits l
	  LEFT JOIN holder h ON true
	 WHERE c.relnamespace = 'gen_durable'::pg_catalog.regnamespace AND c.relkind = 'r'
	 ORDER BY c.relname
$$;

COMMENT ON FUNCTION gen_durable._health IS
	'The rows of the health view, read as the extension''s owner';

CREATE VIEW gen_durable.health AS
	SELECT * FROM gen_durable._health();

COMMENT ON VIEW gen_durable.health IS
	'gen_durable tables: size, live and dead rows, vacuuming, and what holds the vacuum horizon back';

REVOKE ALL ON FUNCTION gen_durable._health() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gen_durable._health() TO gen_durable_admin;
GRANT SELECT ON gen_durable.health TO gen_durable_admin;

-- this database keeps (or gets) its maintenance worker once the update commits
SELECT gen_durable._start_worker();
