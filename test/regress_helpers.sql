-- test/regress_helpers.sql: helpers shared by the pg_regress suites,
-- included with \i from the top of the tree (where make runs pg_regress).

-- one outcome for one instance; extra holds the kind's fields
CREATE FUNCTION pg_temp.out1(id bigint, worker text, kind text, extra jsonb DEFAULT '{}')
RETURNS TABLE (applied text, detail text)
LANGUAGE sql AS $$
	SELECT f.applied, f.detail
	  FROM gen_durable.flush(jsonb_build_array(
			jsonb_build_object('id', id, 'worker', worker, 'kind', kind) || extra)) f
$$;
