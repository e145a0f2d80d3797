-- upgrade.sql: installing an older version and updating it gives exactly
-- what a fresh install of the current version gives (issue 3, Upgrades).
--
-- This test stays and grows with every version.  For a new version X.Y.Z:
--   * keep installing the oldest released version below, run a little of
--     its API, then update step by step (ALTER EXTENSION gen_durable UPDATE
--     TO each released version in turn, exercising each), then UPDATE to
--     the default version;
--   * pg_temp.describe() needs no change unless the extension starts using
--     a new kind of object (it already lists every member by name, so a
--     new kind shows up there, but its definition would not be compared).
CREATE EXTENSION gen_durable VERSION '0.1.0';
\set VERBOSITY terse

-- the versions and the update paths the installation offers
SELECT version, superuser, relocatable, schema, requires
  FROM pg_available_extension_versions WHERE name = 'gen_durable' ORDER BY version;
SELECT * FROM pg_extension_update_paths('gen_durable') WHERE path IS NOT NULL ORDER BY 1, 2;

------------------------------------------------------------------------
-- 0.1.0, as released, run by the current library (after the library is
-- replaced and the server restarted, before ALTER EXTENSION UPDATE).
-- CHANGELOG 0.2.0: until then the functions that write the new column
-- (pick, flush, release, cancel, run_maintenance) fail with a hint to run
-- the update; the rest of the API works on the old schema.
------------------------------------------------------------------------
SELECT extversion FROM pg_extension WHERE extname = 'gen_durable';
SELECT to_regprocedure('gen_durable.await(bigint,interval,text)') IS NULL AS no_await,
	   to_regclass('gen_durable.stats') IS NULL AS no_stats,
	   to_regclass('gen_durable.queues') IS NULL AS no_queues;

-- the SQLSTATE of a statement's error
CREATE FUNCTION pg_temp.err(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
$$;
-- the hint of a statement's error
CREATE FUNCTION pg_temp.hint(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	h text;
BEGIN
	EXECUTE stmt;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT;
	RETURN h;
END
$$;

SELECT gen_durable.insert('job', '{"n": 1}', queue => 'uq', correlation_key => 'up-1') AS u1 \gset
SELECT gen_durable.insert('job', '{"n": 2}', queue => 'uq', correlation_key => 'up-2') AS u2 \gset
SELECT gen_durable.insert('job', '{"n": 3}', queue => 'uq', correlation_key => 'up-3') AS u3 \gset
SELECT gen_durable.insert('job', '{"n": 4}', queue => 'uq', correlation_key => 'up-4') AS u4 \gset
SELECT gen_durable.insert('job', '{"n": 5}', queue => 'uq', correlation_key => 'up-5') AS u5 \gset
SELECT gen_durable.signal('up-3', 'hello', '{"from": "0.1.0"}');
-- pick and run_maintenance wait for the update (42703: a new column; 42P01
-- for pick: the queue_settings table of 0.6.0)
SELECT pg_temp.err($$SELECT * FROM gen_durable.pick('uq', 'w1')$$) AS pick;
SELECT pg_temp.err($$SELECT gen_durable.run_maintenance()$$) AS run_maintenance;
SELECT pg_temp.hint($$SELECT * FROM gen_durable.pick('uq', 'w1')$$) AS hint;
-- claims made by the old library before it was replaced, as its pick
-- wrote them: u1, u2 and u4 held by w1
UPDATE gen_durable.instances
   SET status = 'executing', locked_by = 'w1', lease_expires_at = now() + interval '10 min'
 WHERE id IN (:u1, :u2, :u4);
SELECT gen_durable.heartbeat('w1', ARRAY[:u1, :u2, :u4]) = ARRAY[:u1, :u2, :u4]::bigint[] AS owned;
-- flush, release and cancel also wait for the update, and change nothing
SELECT pg_temp.err(format($$SELECT * FROM gen_durable.flush('[{"id": %s, "worker": "w1", "kind": "done"}]')$$, :u1)) AS flush;
SELECT pg_temp.err(format($$SELECT gen_durable.release('w1', ARRAY[%s])$$, :u4)) AS release;
SELECT pg_temp.err(format($$SELECT gen_durable.cancel(%s)$$, :u5)) AS cancel;
SELECT id = :u1 AS is_u1, status, result, locked_by, error
  FROM gen_durable.instances ORDER BY id;

------------------------------------------------------------------------
-- the update
------------------------------------------------------------------------
ALTER EXTENSION gen_durable UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'gen_durable';
-- the rows survived, with the new column empty
SELECT id = :u1 AS is_u1, status, step, state, result, locked_by, claim_session
  FROM gen_durable.instances ORDER BY id;
SELECT count(*) AS signals FROM gen_durable.signals;
-- claims made by the old library: u1 finishes, u4 is handed back, u5 is
-- cancelled; u2 stays claimed a little longer
SELECT applied, detail FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :u1, 'worker', 'w1', 'kind', 'done', 'result', '{"ok": 1}'::jsonb)));
SELECT gen_durable.release('w1', ARRAY[:u4]);
SELECT gen_durable.cancel(:u5, 'not needed');
-- the new API on the old rows: await, the views
SELECT * FROM gen_durable.await(:u1, '0');
SELECT * FROM gen_durable.await(:u2, '0');
SELECT * FROM gen_durable.await(:u5, '0');
SELECT queue, due, executing, done, cancelled, oldest_due_age IS NOT NULL AS has_due_age
  FROM gen_durable.queues WHERE queue = 'uq';
SELECT count(*) AS counters FROM gen_durable.stats;
-- the claim made before the update (no session recorded) is flushed now
SELECT gen_durable.heartbeat('w1', ARRAY[:u2]) = ARRAY[:u2]::bigint[] AS still_owned;
SELECT applied, detail FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :u2, 'worker', 'w1', 'kind', 'done', 'result', '{"ok": 2}'::jsonb)));
SELECT * FROM gen_durable.await(:u2, '0');
-- u3 with its signal from 0.1.0, and the released u4: picked (a waiting
-- pick claims at once) and finished
SELECT id = :u3 AS is_u3, state, jsonb_array_length(inbox) AS inbox
  FROM gen_durable.pick('uq', 'w2', wait => '1 s') ORDER BY id;
SELECT applied FROM gen_durable.flush(jsonb_build_array(
	jsonb_build_object('id', :u3, 'worker', 'w2', 'kind', 'fail'),
	jsonb_build_object('id', :u4, 'worker', 'w2', 'kind', 'done')));
SELECT * FROM gen_durable.await(:u3, '0');
SELECT * FROM gen_durable.await(:u4, '0');
SELECT gen_durable.insert('job', queue => 'uq', correlation_key => 'up-1') IS NOT NULL AS key_free_again;
SELECT gen_durable.run_maintenance();

------------------------------------------------------------------------
-- every object of the extension, described without OIDs: one row per
-- (kind, object, detail).  Covers the members (pg_depend deptype 'e') and
-- everything in schema gen_durable: relations, columns (logical order,
-- type, not null, default, generated, identity, collation), indexes,
-- constraints, triggers, policies, rules, functions (signature with
-- defaults, result, kind, volatility, strictness, parallel safety,
-- security, cost, rows, language, body or C symbol and library, settings),
-- views, types (enum labels in order, domains, composite attributes as
-- columns), sequences, comments, privileges, owners, the extension's own
-- row and its pg_extension_config_dump configuration.
------------------------------------------------------------------------
CREATE FUNCTION pg_temp.describe()
RETURNS TABLE (kind text, object text, detail text)
LANGUAGE sql STABLE AS $describe$
WITH ext AS (
	SELECT * FROM pg_extension WHERE extname = 'gen_durable'
), nsp AS (
	SELECT oid FROM pg_namespace WHERE nspname = 'gen_durable'
), member AS (
	SELECT d.classid, d.objid, d.objsubid
	  FROM pg_depend d, ext
	 WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid
	   AND d.deptype = 'e'
), rel AS (
	SELECT c.* FROM pg_class c
	 WHERE c.relnamespace IN (SELECT oid FROM nsp)
		OR (c.tableoid, c.oid) IN (SELECT classid, objid FROM member)
), fn AS (
	SELECT p.* FROM pg_proc p
	 WHERE p.pronamespace IN (SELECT oid FROM nsp)
		OR (p.tableoid, p.oid) IN (SELECT classid, objid FROM member)
), typ AS (
	SELECT t.* FROM pg_type t
	 WHERE t.typnamespace IN (SELECT oid FROM nsp)
		OR (t.tableoid, t.oid) IN (SELECT classid, objid FROM member)
), con AS (
	SELECT k.* FROM pg_constraint k
	 WHERE k.conrelid IN (SELECT oid FROM rel) OR k.contypid IN (SELECT oid FROM typ)
		OR k.connamespace IN (SELECT oid FROM nsp)
)
-- the extension itself
SELECT 'extension', extname::text,
	   format('version=%s relocatable=%s schema=%s owner=%s', extversion, extrelocatable,
			  extnamespace::regnamespace, pg_get_userbyid(extowner))
  FROM ext
UNION ALL
SELECT 'config_dump', c.cfg::regclass::text,
	   format('position=%s condition=%L', c.ord, ext.extcondition[c.ord])
  FROM ext, unnest(ext.extconfig) WITH ORDINALITY AS c(cfg, ord)
UNION ALL
SELECT 'schema', n.nspname::text,
	   format('owner=%s acl=%s', pg_get_userbyid(n.nspowner), n.nspacl)
  FROM pg_namespace n WHERE n.oid IN (SELECT oid FROM nsp)
UNION ALL
-- every member, by name (any kind of object, also outside the schema)
SELECT 'member', pg_describe_object(m.classid, m.objid, m.objsubid), NULL
  FROM member m
UNION ALL
SELECT 'relation', r.oid::regclass::text,
	   format('relkind=%s persistence=%s options=%s acl=%s owner=%s rls=%s/%s replident=%s of_type=%s',
			  r.relkind, r.relpersistence, r.reloptions, r.relacl, pg_get_userbyid(r.relowner),
			  r.relrowsecurity, r.relforcerowsecurity, r.relreplident,
			  nullif(r.reloftype, 0)::regtype)
  FROM rel r
UNION ALL
SELECT 'column', a.attrelid::regclass::text || '.' || a.attname,
	   format('position=%s type=%s notnull=%s default=%s generated=%s identity=%s collation=%s acl=%s',
			  row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum),
			  format_type(a.atttypid, a.atttypmod), a.attnotnull,
			  pg_get_expr(ad.adbin, ad.adrelid), nullif(a.attgenerated, ''),
			  nullif(a.attidentity, ''),
			  (SELECT collname FROM pg_collation WHERE oid = nullif(a.attcollation, 0)),
			  a.attacl)
  FROM pg_attribute a
  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
 WHERE a.attrelid IN (SELECT oid FROM rel) AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index', i.indexrelid::regclass::text,
	   format('%s clustered=%s replident=%s', pg_get_indexdef(i.indexrelid),
			  i.indisclustered, i.indisreplident)
  FROM pg_index i WHERE i.indrelid IN (SELECT oid FROM rel)
UNION ALL
SELECT 'constraint',
	   coalesce(nullif(k.conrelid, 0)::regclass::text, nullif(k.contypid, 0)::regtype::text) || '.' || k.conname,
	   format('type=%s %s', k.contype, pg_get_constraintdef(k.oid))
  FROM con k
UNION ALL
SELECT 'trigger', t.tgrelid::regclass::text || '.' || t.tgname,
	   pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
  FROM pg_trigger t WHERE t.tgrelid IN (SELECT oid FROM rel) AND NOT t.tgisinternal
UNION ALL
SELECT 'policy', p.polrelid::regclass::text || '.' || p.polname,
	   format('cmd=%s permissive=%s roles=%s using=%s check=%s', p.polcmd, p.polpermissive,
			  p.polroles, pg_get_expr(p.polqual, p.polrelid),
			  pg_get_expr(p.polwithcheck, p.polrelid))
  FROM pg_policy p WHERE p.polrelid IN (SELECT oid FROM rel)
UNION ALL
SELECT 'rule', w.ev_class::regclass::text || '.' || w.rulename,
	   pg_get_ruledef(w.oid)
  FROM pg_rewrite w WHERE w.ev_class IN (SELECT oid FROM rel) AND w.rulename <> '_RETURN'
UNION ALL
SELECT 'view', v.oid::regclass::text, pg_get_viewdef(v.oid)
  FROM rel v WHERE v.relkind IN ('v', 'm')
UNION ALL
SELECT 'sequence', s.seqrelid::regclass::text,
	   format('type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s owned_by=%s',
			  s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin, s.seqmax,
			  s.seqcache, s.seqcycle,
			  (SELECT d.refobjid::regclass::text || '.' || a.attname || ' (' || d.deptype::text || ')'
				 FROM pg_depend d
				 JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
				WHERE d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid
				  AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')))
  FROM pg_sequence s WHERE s.seqrelid IN (SELECT oid FROM rel)
UNION ALL
SELECT 'function', f.oid::regprocedure::text,
	   format('args=(%s) result=%s kind=%s volatile=%s strict=%s parallel=%s secdef=%s leakproof=%s cost=%s rows=%s lang=%s config=%s acl=%s owner=%s',
			  pg_get_function_arguments(f.oid), pg_get_function_result(f.oid), f.prokind,
			  f.provolatile, f.proisstrict, f.proparallel, f.prosecdef, f.proleakproof,
			  f.procost, f.prorows, l.lanname, f.proconfig, f.proacl,
			  pg_get_userbyid(f.proowner))
  FROM fn f JOIN pg_language l ON l.oid = f.prolang
UNION ALL
-- the body of a SQL or PL function, the symbol and library of a C one
SELECT 'function_body', f.oid::regprocedure::text,
	   CASE WHEN l.lanname = 'c' THEN format('symbol=%s library=%s', f.prosrc, f.probin)
			ELSE coalesce(pg_get_function_sqlbody(f.oid), f.prosrc) END
  FROM fn f JOIN pg_language l ON l.oid = f.prolang
UNION ALL
SELECT 'type', t.oid::regtype::text,
	   format('typtype=%s category=%s element=%s relation=%s base=%s notnull=%s default=%s acl=%s owner=%s',
			  t.typtype, t.typcategory, nullif(t.typelem, 0)::regtype,
			  nullif(t.typrelid, 0)::regclass, nullif(t.typbasetype, 0)::regtype,
			  t.typnotnull, t.typdefault, t.typacl, pg_get_userbyid(t.typowner))
  FROM typ t
UNION ALL
SELECT 'enum', e.enumtypid::regtype::text,
	   string_agg(e.enumlabel::text, ', ' ORDER BY e.enumsortorder)
  FROM pg_enum e WHERE e.enumtypid IN (SELECT oid FROM typ)
 GROUP BY e.enumtypid
UNION ALL
-- comments on any of these objects, and on their columns
SELECT 'comment', pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description
  FROM pg_description d
 WHERE (d.classoid = 'pg_class'::regclass AND d.objoid IN (SELECT oid FROM rel))
	OR (d.classoid = 'pg_proc'::regclass AND d.objoid IN (SELECT oid FROM fn))
	OR (d.classoid = 'pg_type'::regclass AND d.objoid IN (SELECT oid FROM typ))
	OR (d.classoid = 'pg_constraint'::regclass AND d.objoid IN (SELECT oid FROM con))
	OR (d.classoid = 'pg_namespace'::regclass AND d.objoid IN (SELECT oid FROM nsp))
	OR (d.classoid = 'pg_extension'::regclass AND d.objoid IN (SELECT oid FROM ext))
	OR (d.classoid, d.objoid) IN (SELECT classid, objid FROM member)
$describe$;

-- the description of the updated extension
CREATE TEMP TABLE upgraded AS SELECT * FROM pg_temp.describe();

------------------------------------------------------------------------
-- a fresh install of the default version
------------------------------------------------------------------------
DROP EXTENSION gen_durable;
SELECT count(*) AS left_after_drop FROM pg_temp.describe() WHERE kind <> 'schema';
CREATE EXTENSION gen_durable;
SELECT extversion FROM pg_extension WHERE extname = 'gen_durable';
CREATE TEMP TABLE fresh AS SELECT * FROM pg_temp.describe();

-- the same, row for row (EXCEPT ALL both ways), and neither is empty
SELECT (SELECT count(*) FROM (SELECT * FROM upgraded EXCEPT ALL SELECT * FROM fresh) d) = 0
   AND (SELECT count(*) FROM (SELECT * FROM fresh EXCEPT ALL SELECT * FROM upgraded) d) = 0
	   AS same_as_fresh;
SELECT (SELECT count(*) FROM upgraded) AS upgraded_rows, (SELECT count(*) FROM fresh) AS fresh_rows;
-- what differs, if anything
(SELECT 'only after update' AS side, * FROM upgraded EXCEPT ALL SELECT 'only after update', * FROM fresh)
UNION ALL
(SELECT 'only when fresh', * FROM fresh EXCEPT ALL SELECT 'only when fresh', * FROM upgraded)
ORDER BY 1, 2, 3, 4;
-- the shape of the current version, kind by kind
SELECT kind, count(*) FROM fresh GROUP BY kind ORDER BY kind;
SELECT object FROM fresh WHERE kind = 'member' ORDER BY object;
SELECT object, regexp_replace(detail, ' owner=\S+', '') AS detail
  FROM fresh WHERE kind IN ('extension', 'config_dump', 'enum') ORDER BY kind, object;

DROP EXTENSION gen_durable;
