-- plans.sql: the hot statements keep plans that find rows through indexes
-- however the table grows.  Their generic plans are made on first use and
-- kept for the backend's life; made while gen_durable.instances is empty,
-- a plan that reads the table whole looks cheapest, and would then read
-- every row (done ones included) on each call of a growing queue
-- (spi_util.c, execute_planned).
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

-- first use of pick and of both flush paths with an empty table
SELECT count(*) AS picked FROM gen_durable.pick('pq', 'w');
SELECT applied FROM gen_durable.flush('[{"id": 1, "worker": "w", "kind": "done"},
										{"id": 2, "worker": "w", "kind": "retry"}]');

-- the table grows (no ANALYZE: nothing replans)
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	(SELECT jsonb_agg(jsonb_build_object('fsm', 'f', 'queue', 'pq')) FROM generate_series(1, 10000)));
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	(SELECT jsonb_agg(jsonb_build_object('fsm', 'f', 'queue', 'pq')) FROM generate_series(1, 10000)));

-- a pick and the flush of its jobs (fast path), then a pick and a flush of
-- retries (the locked path): no sequential scan of the table.  (The
-- counter is this backend's, including what earlier transactions have not
-- reported yet: the difference is this transaction's.)
BEGIN;
SELECT pg_stat_get_xact_numscans('gen_durable.instances'::regclass) AS before \gset
SELECT applied, count(*) FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object(
	'id', id, 'worker', 'w', 'kind', 'done')) FROM gen_durable.pick('pq', 'w', 50)))
 GROUP BY applied;
SELECT applied, count(*) FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object(
	'id', id, 'worker', 'w', 'kind', 'retry')) FROM gen_durable.pick('pq', 'w', 50)))
 GROUP BY applied;
SELECT pg_stat_get_xact_numscans('gen_durable.instances'::regclass) - :before
	   AS sequential_scans;
COMMIT;

DROP EXTENSION gen_durable;
