-- helpers.sql: the functions of the upgrade test (sql/upgrade.sql).  They
-- live in pg_temp, so that DROP EXTENSION leaves them; those that read the
-- extension's tables are PL/pgSQL, planned when first called, so they can
-- be created before the extension exists.

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

-- the instance holding a correlation key (every instance of this test has
-- one)
CREATE FUNCTION pg_temp.id(key text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN (SELECT i.id FROM gen_durable.instances i WHERE i.correlation_key = key);
END
$$;

CREATE FUNCTION pg_temp.ids(keys text[]) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN ARRAY(SELECT i.id FROM gen_durable.instances i
				  WHERE i.correlation_key = ANY (keys) ORDER BY i.id);
END
$$;

-- the instances of a queue, by key, with what an upgrade must keep
CREATE FUNCTION pg_temp.show(q text)
RETURNS TABLE (key text, fsm text, status text, step text, attempt int, steps bigint,
			   locked_by text, awaits text[], inbox bigint, result jsonb, error jsonb)
LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN QUERY
	SELECT i.correlation_key, i.fsm, i.status::text, i.step, i.attempt, i.steps, i.locked_by,
		   i.awaits, (SELECT count(*) FROM gen_durable.signals s WHERE s.target_id = i.id),
		   i.result, i.error
	  FROM gen_durable.instances i WHERE i.queue = q ORDER BY 1;
END
$$;

-- whether this database's maintenance worker runs (CREATE EXTENSION and
-- the updates ask for it after commit), waiting up to 30 s for it
CREATE FUNCTION pg_temp.worker_running() RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. 300 LOOP
		PERFORM pg_stat_clear_snapshot();
		IF EXISTS (SELECT FROM pg_stat_activity
					WHERE backend_type = 'gen_durable worker'
					  AND datname = current_database()) THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN false;
END
$$;

------------------------------------------------------------------------
-- What the releases before 0.6.0 wrote.  The library is always the
-- newest one (pg_regress cannot load an old library), and its pick, flush
-- and run_maintenance need the 0.6.0 schema (they fail with a hint to run
-- ALTER EXTENSION UPDATE, as the test shows), so the claims, parks,
-- spawns and settled rows an old library made are written directly, as
-- its statements wrote them.
------------------------------------------------------------------------

-- a claim as the old pick made it (0.1.0's flip: executing, the worker,
-- the lease, no gate slot, the awaited signals presented); session: the
-- claiming backend's session, which the picks of 0.2.0 to 0.5.0 recorded
CREATE FUNCTION pg_temp.old_claim(keys text[], worker text, session bigint DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	n int;
BEGIN
	UPDATE gen_durable.instances i
	   SET status = 'executing', locked_by = worker,
		   lease_expires_at = now() + interval '10 minutes', updated_at = now(),
		   concurrency_shard = NULL,
		   presented = (SELECT array_agg(s.id ORDER BY s.id) FROM gen_durable.signals s
						 WHERE s.target_id = i.id AND s.name = ANY (i.awaits))
	 WHERE i.correlation_key = ANY (keys) AND i.status = 'runnable';
	GET DIAGNOSTICS n = ROW_COUNT;
	IF session IS NOT NULL THEN
		UPDATE gen_durable.instances i SET claim_session = session
		 WHERE i.correlation_key = ANY (keys);
	END IF;
	RETURN n;
END
$$;

-- an await outcome as the old flush committed it
CREATE FUNCTION pg_temp.old_park(key text, step text, names text[], timeout interval)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	n int;
BEGIN
	UPDATE gen_durable.instances i
	   SET status = 'awaiting_signal', step = old_park.step, steps = i.steps + 1,
		   awaits = names, await_deadline = now() + timeout, presented = NULL,
		   locked_by = NULL, lease_expires_at = NULL, updated_at = now()
	 WHERE i.correlation_key = key AND i.status = 'executing';
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;

-- a spawn outcome as the flush of 0.3.0 to 0.5.0 committed it: the
-- children of the parent's next round, the parent waiting for them
CREATE FUNCTION pg_temp.old_spawn(key text, join_policy text, children text[])
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	p record;
BEGIN
	SELECT i.id, i.queue, i.spawn_round INTO p
	  FROM gen_durable.instances i WHERE i.correlation_key = key AND i.status = 'executing';
	INSERT INTO gen_durable.instances (fsm, step, queue, parent_id, child_index, parent_round,
									   correlation_key, correlation_scope)
	SELECT 'child', 'start', p.queue, p.id, c.ord - 1, p.spawn_round + 1, c.key,
		   '{runnable,executing,awaiting_signal,awaiting_children}'
	  FROM unnest(children) WITH ORDINALITY AS c(key, ord);
	UPDATE gen_durable.instances i
	   SET status = 'awaiting_children', spawn_round = i.spawn_round + 1, steps = i.steps + 1,
		   children_pending = cardinality(children), children_total = cardinality(children),
		   join_policy = old_spawn.join_policy, locked_by = NULL, lease_expires_at = NULL,
		   presented = NULL, updated_at = now()
	 WHERE i.id = p.id;
	RETURN cardinality(children);
END
$$;

-- a done or fail outcome as the old flush committed it: the claim
-- cleared, the inbox purged, the parent's join counted (and woken at 0)
CREATE FUNCTION pg_temp.old_end(key text, status text, outcome jsonb)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	c jsonb;
BEGIN
	UPDATE gen_durable.instances i
	   SET status = old_end.status::gen_durable.status,
		   result = CASE WHEN old_end.status = 'done' THEN outcome END,
		   error = CASE WHEN old_end.status = 'failed' THEN outcome END,
		   locked_by = NULL, lease_expires_at = NULL, awaits = NULL, await_deadline = NULL,
		   presented = NULL, updated_at = now()
	 WHERE i.correlation_key = key AND i.status = 'executing'
	RETURNING to_jsonb(i.*) INTO c;
	DELETE FROM gen_durable.signals s WHERE s.target_id = (c->>'id')::bigint;
	-- (claims record their session from 0.2.0 on)
	IF c ? 'claim_session' THEN
		UPDATE gen_durable.instances i SET claim_session = NULL
		 WHERE i.id = (c->>'id')::bigint;
	END IF;
	-- (children exist from 0.3.0 on, with their round)
	IF c->>'parent_id' IS NOT NULL THEN
		UPDATE gen_durable.instances p
		   SET children_pending = p.children_pending - 1,
			   status = CASE WHEN p.children_pending = 1 THEN 'runnable'
							 ELSE p.status END,
			   updated_at = now()
		 WHERE p.id = (c->>'parent_id')::bigint
		   AND p.spawn_round = (c->>'parent_round')::int
		   AND p.status = 'awaiting_children';
	END IF;
	RETURN CASE WHEN c IS NULL THEN 0 ELSE 1 END;
END
$$;

------------------------------------------------------------------------
-- Did the data survive a step?  snapshot() keeps every row of every
-- table of the schema and the position of every sequence; survived()
-- compares them with the tables after the step: for each table the rows
-- before and after, how many of the rows before are still there with
-- every column they had unchanged, and the values the step's new columns
-- took in the rows.
------------------------------------------------------------------------
CREATE FUNCTION pg_temp.snapshot() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	t record;
BEGIN
	IF to_regclass('pg_temp.snap_rows') IS NOT NULL THEN
		DROP TABLE pg_temp.snap_rows, pg_temp.snap_cols;
	END IF;
	CREATE TEMP TABLE snap_rows (tbl text, r jsonb);
	CREATE TEMP TABLE snap_cols (tbl text, cols text[]);
	FOR t IN SELECT c.oid::regclass AS tbl, c.relkind FROM pg_class c
			  WHERE c.relnamespace = 'gen_durable'::regnamespace AND c.relkind IN ('r', 'S')
	LOOP
		INSERT INTO pg_temp.snap_cols
		SELECT t.tbl::text, array_agg(a.attname::text ORDER BY a.attnum)
		  FROM pg_attribute a
		 WHERE a.attrelid = t.tbl AND a.attnum > 0 AND NOT a.attisdropped;
		IF t.relkind = 'S' THEN
			EXECUTE format('INSERT INTO pg_temp.snap_rows SELECT %L, to_jsonb(x) FROM (SELECT last_value, is_called FROM %s) x',
						   t.tbl, t.tbl);
		ELSE
			EXECUTE format('INSERT INTO pg_temp.snap_rows SELECT %L, to_jsonb(x) FROM %s x',
						   t.tbl, t.tbl);
		END IF;
	END LOOP;
END
$$;

CREATE FUNCTION pg_temp.survived()
RETURNS TABLE (relation text, rows_before bigint, rows_after bigint, rows_kept bigint,
			   new_columns text)
LANGUAGE plpgsql AS $$
DECLARE
	t record;
	old_cols text[];
	now_cols text[];
	sel text;
BEGIN
	FOR t IN SELECT c.oid::regclass::text AS tbl, c.relkind FROM pg_class c
			  WHERE c.relnamespace = 'gen_durable'::regnamespace AND c.relkind IN ('r', 'S')
			 UNION
			 SELECT s.tbl, NULL FROM pg_temp.snap_cols s
			  WHERE to_regclass(s.tbl) IS NULL
			 ORDER BY 1
	LOOP
		relation := t.tbl;
		SELECT s.cols INTO old_cols FROM pg_temp.snap_cols s WHERE s.tbl = relation;
		rows_before := (SELECT count(*) FROM pg_temp.snap_rows s WHERE s.tbl = relation);
		IF old_cols IS NULL THEN
			rows_before := NULL;
		END IF;
		IF t.relkind IS NULL THEN
			rows_after := NULL;
			rows_kept := 0;
			new_columns := 'dropped';
			RETURN NEXT;
			CONTINUE;
		END IF;
		sel := CASE WHEN t.relkind = 'S' THEN format('(SELECT last_value, is_called FROM %s)', t.tbl)
					ELSE t.tbl::text END;
		EXECUTE format('SELECT count(*) FROM %s x', sel) INTO rows_after;
		now_cols := ARRAY(SELECT a.attname::text FROM pg_attribute a
						   WHERE a.attrelid = t.tbl::regclass AND a.attnum > 0 AND NOT a.attisdropped
						   ORDER BY a.attnum);
		IF old_cols IS NULL THEN
			rows_kept := NULL;
			new_columns := 'new ' || CASE WHEN t.relkind = 'S' THEN 'sequence' ELSE 'table' END;
			RETURN NEXT;
			CONTINUE;
		END IF;
		-- the rows now, with the columns they had before
		EXECUTE format($q$
			SELECT count(*) FROM (
				SELECT s.r FROM pg_temp.snap_rows s WHERE s.tbl = %L
				INTERSECT ALL
				SELECT (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(to_jsonb(x)) e
						 WHERE e.key = ANY (%L::text[]))
				  FROM %s x) k$q$, relation, old_cols, sel) INTO rows_kept;
		-- each new column and the distinct values it holds
		SELECT string_agg(v, '; ' ORDER BY ord) INTO new_columns
		  FROM (SELECT c.ord, c.col || ': ' || coalesce(
					(SELECT string_agg(coalesce(d.val, 'NULL'), ', ' ORDER BY d.val NULLS FIRST)
					   FROM pg_temp.distinct_values(sel, c.col) d), '(no rows)') AS v
				  FROM unnest(now_cols) WITH ORDINALITY AS c(col, ord)
				 WHERE c.col <> ALL (old_cols)) n;
		RETURN NEXT;
	END LOOP;
END
$$;

CREATE FUNCTION pg_temp.distinct_values(sel text, col text) RETURNS TABLE (val text)
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXECUTE format('SELECT DISTINCT %I::text FROM %s x', col, sel);
END
$$;

------------------------------------------------------------------------
-- A clean slate for the next install, once the extension is dropped.  The
-- schema gen_durable, which CREATE EXTENSION made, stays after DROP
-- EXTENSION (it is not a member), with the privileges 0.5.0 granted on it;
-- the three roles the extension creates belong to the cluster and stay
-- too.  The test drops them (and the login roles it made), so that each
-- install and each update to 0.5.0 makes them again, and the
-- descriptions compare what it made.
------------------------------------------------------------------------
CREATE FUNCTION pg_temp.clean_slate() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	IF EXISTS (SELECT FROM pg_extension WHERE extname = 'gen_durable') THEN
		RAISE 'drop the extension first';
	END IF;
	IF EXISTS (SELECT FROM pg_namespace WHERE nspname = 'gen_durable') THEN
		DROP SCHEMA gen_durable;
	END IF;
	FOR r IN SELECT rolname FROM pg_roles
			  WHERE rolname LIKE 'regress\_up\_%' OR rolname LIKE 'gen\_durable%'
			  ORDER BY rolname DESC
	LOOP
		EXECUTE format('DROP ROLE %I', r);
	END LOOP;
END
$$;

------------------------------------------------------------------------
-- every object of the extension, described without OIDs: one row per
-- (kind, object, detail).  Covers the members (pg_depend deptype 'e') and
-- everything in schema gen_durable: relations, columns (logical order,
-- type, not null, default, generated, identity, collation, storage),
-- indexes, constraints, triggers, policies, rules, functions (signature
-- with defaults, result, kind, volatility, strictness, parallel safety,
-- security, cost, rows, language, body or C symbol and library,
-- settings), views, statistics objects, types (enum labels in order,
-- domains, composite attributes as columns), sequences, comments,
-- privileges and the initial privileges pg_dump keeps, owners, the
-- extension's own row and its pg_extension_config_dump configuration, and
-- the roles the extension creates.  Not compared: what only says how a
-- column came to be (atthasmissing: a column an update added with a
-- default has its value "missing" in the rows that were there; the
-- attribute version pg_attver), OIDs and the order of objects in the
-- catalogs.
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
	   format('position=%s type=%s notnull=%s default=%s generated=%s identity=%s collation=%s acl=%s storage=%s compression=%s stattarget=%s options=%s',
			  row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum),
			  format_type(a.atttypid, a.atttypmod), a.attnotnull,
			  pg_get_expr(ad.adbin, ad.adrelid), nullif(a.attgenerated, ''),
			  nullif(a.attidentity, ''),
			  (SELECT collname FROM pg_collation WHERE oid = nullif(a.attcollation, 0)),
			  a.attacl, a.attstorage, nullif(a.attcompression, ''), a.attstattarget,
			  -- (without pg_attver, the attribute version PostgreSQL 15.x keeps
			  -- there since 15.20: a count of catalog changes, not a setting)
			  nullif(array(SELECT o FROM unnest(a.attoptions) o
							WHERE o NOT LIKE 'pg\_attver=%'), '{}'))
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
	   format('type=%s validated=%s %s', k.contype, k.convalidated, pg_get_constraintdef(k.oid))
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
SELECT 'statistics', x.oid::regclass::text, pg_get_statisticsobjdef(x.oid)
  FROM pg_statistic_ext x WHERE x.stxnamespace IN (SELECT oid FROM nsp)
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
UNION ALL
-- the privileges pg_dump takes as the extension's own (pg_init_privs)
SELECT 'init_privs', pg_describe_object(ip.classoid, ip.objoid, ip.objsubid),
	   format('type=%s privs=%s', ip.privtype, ip.initprivs)
  FROM pg_init_privs ip
 WHERE (ip.classoid = 'pg_class'::regclass AND ip.objoid IN (SELECT oid FROM rel))
	OR (ip.classoid = 'pg_proc'::regclass AND ip.objoid IN (SELECT oid FROM fn))
	OR (ip.classoid = 'pg_type'::regclass AND ip.objoid IN (SELECT oid FROM typ))
	OR (ip.classoid = 'pg_namespace'::regclass AND ip.objoid IN (SELECT oid FROM nsp))
	OR (ip.classoid, ip.objoid) IN (SELECT classid, objid FROM member)
UNION ALL
-- the roles the extension creates (they belong to the cluster; any role
-- named gen_durable*), and the roles each is a member of
SELECT 'role', r.rolname::text,
	   format('super=%s inherit=%s createrole=%s createdb=%s login=%s replication=%s bypassrls=%s connlimit=%s valid_until=%s config=%s member_of=%s',
			  r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin,
			  r.rolreplication, r.rolbypassrls, r.rolconnlimit, r.rolvaliduntil, r.rolconfig,
			  (SELECT string_agg(g.rolname || CASE WHEN m.admin_option THEN ' (admin)' ELSE '' END,
								 ', ' ORDER BY g.rolname)
				 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
				WHERE m.member = r.oid))
  FROM pg_roles r
 WHERE r.rolname LIKE 'gen\_durable%'
$describe$;

-- the rows of two descriptions that differ: what only one of them has
CREATE FUNCTION pg_temp.differences(a regclass, b regclass, a_name text, b_name text)
RETURNS TABLE (side text, kind text, object text, detail text)
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXECUTE format($q$
		(SELECT %3$L, * FROM %1$s EXCEPT ALL SELECT %3$L, * FROM %2$s)
		UNION ALL
		(SELECT %4$L, * FROM %2$s EXCEPT ALL SELECT %4$L, * FROM %1$s)
		ORDER BY 2, 3, 1, 4$q$, a, b, a_name, b_name);
END
$$;
