-- test/stats_helpers.sql: pg_temp.moved(), the stats counters that
-- changed since its previous call, for the pg_regress suites that check
-- counters; included with \i from the top of the tree.

-- the counters as last seen by moved()
CREATE TEMP TABLE seen (counter text PRIMARY KEY, value bigint NOT NULL);

-- the stats counters (those in wanted, when given) that changed since the
-- previous call, and by how much
CREATE FUNCTION pg_temp.moved(wanted text[] DEFAULT NULL)
RETURNS TABLE (counter text, delta bigint)
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY
		SELECT s.counter, s.value - coalesce(p.value, 0)
		  FROM gen_durable.stats s LEFT JOIN seen p ON p.counter = s.counter
		 WHERE s.value IS DISTINCT FROM coalesce(p.value, 0)
		   AND (wanted IS NULL OR s.counter = ANY (wanted))
		 ORDER BY s.counter;
	DELETE FROM seen;
	INSERT INTO seen SELECT s.counter, s.value FROM gen_durable.stats s;
END
$$;
