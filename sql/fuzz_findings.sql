-- fuzz_findings.sql: the inputs the fuzzer (test/fuzz) found mishandled,
-- each kept here once: every one must be a clean error (or an invalid
-- entry) with a data-exception SQLSTATE and a message naming what was
-- wrong, never XX000 and never a message that is not valid text.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

-- a statement's SQLSTATE and message, or 'no error'
CREATE FUNCTION pg_temp.err(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	msg text;
BEGIN
	EXECUTE stmt;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
	RETURN SQLSTATE || ': ' || msg;
END
$$;

-- a spawn whose children are not objects: the entry is invalid (was XX000
-- for the whole flush)
SELECT gen_durable.insert('f', queue => 'z') AS z \gset
SELECT count(*) FROM gen_durable.pick('z', 'w', 1);
SELECT f.applied, f.detail
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :z, 'worker', 'w', 'kind', 'spawn', 'step', 'b', 'children', '[1, "x"]'::jsonb))) f;

-- names quoted in messages are clipped at a character boundary (a cut
-- inside a multibyte character made the message invalid UTF-8)
SELECT f.detail, octet_length(f.detail)
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :z, 'worker', 'w', 'kind', repeat('é', 100)))) f;
SELECT f.detail
  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :z, 'worker', 'w', 'kind', 'done', repeat('€', 40), 1))) f;

-- intervals too long to add to now() are the argument's error (were 22008
-- "timestamp out of range", naming no argument)
SELECT pg_temp.err($$SELECT gen_durable.insert('f', delay => '1000000 years')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.pick('z', 'w', 1, lease => '1000000 years')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.pick('z', 'w', 1, wait => '1000000 years')$$);
SELECT pg_temp.err($$SELECT gen_durable.heartbeat('w', '{1}', '1000000 years')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.await(1, '1000000 years')$$);
SELECT pg_temp.err($$SELECT gen_durable.set_rate_limit('r', 1, '1000000 years')$$);
-- the bound itself is accepted
SELECT pg_temp.err($$SELECT gen_durable.insert('far', delay => '1000000000 seconds')$$);

-- a malformed run_at in an insert spec names the spec and the field (the
-- message was timestamptz_in's alone)
SELECT pg_temp.err($$SELECT * FROM gen_durable.insert_many('[{"fsm": "f"}, {"fsm": "f", "run_at": "soon"}]')$$);
SELECT pg_temp.err($$SELECT * FROM gen_durable.insert_many('[{"fsm": "f", "run_at": "300000-01-01"}]')$$);
SELECT count(*) AS none_inserted FROM gen_durable.instances WHERE fsm = 'f' AND queue = 'default';

-- a NULL gate size is 22004 like every required argument (was 22023)
SELECT pg_temp.err($$SELECT gen_durable.set_concurrency_limit('g', NULL)$$);
SELECT pg_temp.err($$SELECT gen_durable.set_concurrency_limit('g', 0)$$);

DROP EXTENSION gen_durable;
