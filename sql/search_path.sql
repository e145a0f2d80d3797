-- search_path.sql: a caller's search_path cannot change what the engine's
-- statements do.  They qualify every table and function, but operators are
-- found on the search path: a schema of the caller's before pg_catalog
-- with "=" for bigint and text would otherwise run the caller's code inside
-- pick and flush (spi_util.c, prepare_and_execute).
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

CREATE SCHEMA trap;
CREATE FUNCTION trap.bigint_eq(bigint, bigint) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the trap''s = (bigint) ran'; END $$;
CREATE FUNCTION trap.text_eq(text, text) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the trap''s = (text) ran'; END $$;
CREATE OPERATOR trap.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = trap.bigint_eq);
CREATE OPERATOR trap.= (LEFTARG = text, RIGHTARG = text, FUNCTION = trap.text_eq);

SET search_path = trap, pg_catalog;
-- the trap works for the caller's own statements
SELECT 1::bigint = 1::bigint;

-- and changes nothing in the engine's
SELECT gen_durable.insert('j', queue => 'sq', correlation_key => 'sp-1') IS NOT NULL AS inserted;
SELECT gen_durable.insert('j', queue => 'sq', correlation_key => 'sp-2') IS NOT NULL AS inserted;
SELECT gen_durable.signal('sp-1', 'note') AS signalled;
SELECT step, jsonb_array_length(inbox) AS inbox FROM gen_durable.pick('sq', 'w', 2) ORDER BY 1;
SELECT f.applied FROM gen_durable.flush((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
	'id', id, 'worker', 'w', 'kind', 'next', 'step', 'two'))
	FROM gen_durable.instances WHERE status = 'executing')) f;
SELECT count(*) AS picked FROM gen_durable.pick('sq', 'w', 2);
SELECT gen_durable.heartbeat('w', ARRAY(SELECT id FROM gen_durable.instances WHERE status = 'executing' ORDER BY id)) IS NOT NULL AS heartbeat;
SELECT gen_durable.cancel(id, 'no') AS cancelled FROM gen_durable.instances WHERE correlation_key OPERATOR(pg_catalog.=) 'sp-2';
SELECT f.applied, f.detail FROM gen_durable.flush((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
	'id', id, 'worker', 'w', 'kind', 'done'))
	FROM gen_durable.instances WHERE correlation_key OPERATOR(pg_catalog.=) 'sp-1')) f;
SELECT gen_durable.run_maintenance() IS NOT NULL AS maintained;
RESET search_path;
SELECT correlation_key, status, step FROM gen_durable.instances ORDER BY id;

DROP SCHEMA trap CASCADE;
DROP EXTENSION gen_durable;
