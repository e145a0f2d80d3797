-- statements.sql: the number of statements a call runs does not grow with
-- its batch size (design §6 "set-based over array parameters"; contract
-- §4.5, §6.7, §16.1).  pg_stat_statements (preloaded, track = all) counts
-- every statement nested under the top-level call: the engine's SPI
-- statements and anything they run in turn (SQL functions, triggers).
-- Arguments are built beforehand into psql variables so that the measured
-- call is the only top-level statement with nested work.
CREATE EXTENSION gen_durable;
CREATE EXTENSION pg_stat_statements;
\set VERBOSITY terse

-- the statements nested under the calls since the last reset
CREATE VIEW pg_temp.nested AS
SELECT coalesce(sum(calls), 0)::int AS statements
  FROM pg_stat_statements WHERE NOT toplevel;

------------------------------------------------------------------------
-- insert_many: 1 spec vs 50 specs (draw ids + insert)
------------------------------------------------------------------------
SELECT jsonb_build_array(jsonb_build_object('fsm', 'm', 'queue', 'iq')) AS specs1 \gset
SELECT jsonb_agg(jsonb_build_object('fsm', 'm', 'queue', 'iq', 'correlation_key', 'k' || g))
	   AS specs50 FROM generate_series(1, 50) g \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS created FROM gen_durable.insert_many(:'specs1') WHERE created;
SELECT statements AS insert_many_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS created FROM gen_durable.insert_many(:'specs50') WHERE created;
SELECT statements AS insert_many_50 FROM pg_temp.nested \gset
SELECT :insert_many_1 AS insert_many_1, :insert_many_50 AS insert_many_50,
	   :insert_many_1 = :insert_many_50 AS same;
-- with duplicates (the occupants are looked up by one more statement)
SELECT jsonb_build_array(jsonb_build_object('fsm', 'm', 'correlation_key', 'k1')) AS dup1 \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS duplicates FROM gen_durable.insert_many(:'dup1') WHERE NOT created;
SELECT statements AS dup_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS duplicates FROM gen_durable.insert_many(:'specs50') WHERE NOT created;
SELECT statements AS dup_50 FROM pg_temp.nested \gset
SELECT :dup_1 AS duplicates_1, :dup_50 AS duplicates_50, :dup_1 = :dup_50 AS same;

------------------------------------------------------------------------
-- setup: 60 runnable children in queue pq, the first 51 of them children
-- of 51 parents in queue eq
------------------------------------------------------------------------
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	(SELECT jsonb_agg(jsonb_build_object('fsm', 'p', 'queue', 'pq')) FROM generate_series(1, 60)));
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	(SELECT jsonb_agg(jsonb_build_object('fsm', 'e', 'queue', 'eq')) FROM generate_series(1, 51)));
UPDATE gen_durable.instances SET children_total = 1, spawn_round = 1 WHERE queue = 'eq';
WITH c AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM gen_durable.instances WHERE queue = 'pq'),
	 p AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM gen_durable.instances WHERE queue = 'eq')
UPDATE gen_durable.instances i SET parent_id = p.id, child_index = 0, parent_round = 1
  FROM c JOIN p USING (n) WHERE i.id = c.id;

------------------------------------------------------------------------
-- pick: batch 1 vs batch 50 with at least 51 runnable rows (claim + flip)
------------------------------------------------------------------------
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS picked FROM gen_durable.pick('pq', 'w', 1);
SELECT statements AS pick_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS picked FROM gen_durable.pick('pq', 'w', 50);
SELECT statements AS pick_50 FROM pg_temp.nested \gset
SELECT :pick_1 AS pick_1, :pick_50 AS pick_50, :pick_1 = :pick_50 AS same;

-- jobs with inboxes, awaited signals and children are enriched by the same
-- statements: park the parents on "go", wake them with "go" and "note"
SELECT count(*) FROM gen_durable.pick('eq', 'setup', 100);
SELECT applied, count(*) FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object(
	'id', id, 'worker', 'setup', 'kind', 'await', 'names', '["go"]'::jsonb, 'step', 'woken'))
	FROM gen_durable.instances WHERE queue = 'eq')) GROUP BY applied;
SELECT count(*) FILTER (WHERE gen_durable.signal(id, 'go') = 'delivered')
	   + count(*) FILTER (WHERE gen_durable.signal(id, 'note') = 'delivered') AS signals
  FROM gen_durable.instances WHERE queue = 'eq';
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS picked, sum(jsonb_array_length(inbox)) AS inbox,
	   sum(jsonb_array_length(awaited)) AS awaited, sum(jsonb_array_length(children)) AS children
  FROM gen_durable.pick('eq', 'w', 1);
SELECT statements AS enriched_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS picked, sum(jsonb_array_length(inbox)) AS inbox,
	   sum(jsonb_array_length(awaited)) AS awaited, sum(jsonb_array_length(children)) AS children
  FROM gen_durable.pick('eq', 'w', 50);
SELECT statements AS enriched_50 FROM pg_temp.nested \gset
SELECT :enriched_1 AS enriched_1, :enriched_50 AS enriched_50, :enriched_1 = :enriched_50 AS same;

------------------------------------------------------------------------
-- flush: 1 vs 50 "next" outcomes of children (the fast path's update,
-- which writes none of them: they have a parent; then lock + update)
------------------------------------------------------------------------
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'next', 'step', 's2'))
	   AS next1 FROM (SELECT id FROM gen_durable.instances
					   WHERE queue = 'pq' AND locked_by = 'w' ORDER BY id LIMIT 1) s \gset
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'next', 'step', 's2'))
	   AS next50 FROM (SELECT id FROM gen_durable.instances
						WHERE queue = 'pq' AND locked_by = 'w' ORDER BY id OFFSET 1) s \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'next1') GROUP BY applied;
SELECT statements AS next_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'next50') GROUP BY applied;
SELECT statements AS next_50 FROM pg_temp.nested \gset
SELECT :next_1 AS next_1, :next_50 AS next_50, :next_1 = :next_50 AS same;

-- "next" consuming the awaited signals presented at pick (+ consume)
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'next', 'step', 's2'))
	   AS cnext1 FROM (SELECT id FROM gen_durable.instances
						WHERE queue = 'eq' AND locked_by = 'w' ORDER BY id LIMIT 1) s \gset
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'next', 'step', 's2'))
	   AS cnext50 FROM (SELECT id FROM gen_durable.instances
						 WHERE queue = 'eq' AND locked_by = 'w' ORDER BY id OFFSET 1) s \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'cnext1') GROUP BY applied;
SELECT statements AS cnext_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'cnext50') GROUP BY applied;
SELECT statements AS cnext_50 FROM pg_temp.nested \gset
SELECT :cnext_1 AS consuming_next_1, :cnext_50 AS consuming_next_50, :cnext_1 = :cnext_50 AS same;
SELECT name, count(*) AS left_in_inboxes FROM gen_durable.signals s
  JOIN gen_durable.instances i ON i.id = s.target_id WHERE i.queue = 'eq'
 GROUP BY name ORDER BY name;

------------------------------------------------------------------------
-- flush: 1 vs 50 "await" outcomes (lock + update + recheck, every one
-- woken at once by its unpresented "note")
------------------------------------------------------------------------
SELECT count(*) FROM gen_durable.pick('eq', 'w', 100);
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'await',
									'names', '["note"]'::jsonb, 'step', 'again'))
	   AS await1 FROM (SELECT id FROM gen_durable.instances
						WHERE queue = 'eq' AND locked_by = 'w' ORDER BY id LIMIT 1) s \gset
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'await',
									'names', '["note"]'::jsonb, 'step', 'again'))
	   AS await50 FROM (SELECT id FROM gen_durable.instances
						 WHERE queue = 'eq' AND locked_by = 'w' ORDER BY id OFFSET 1) s \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, detail, count(*) FROM gen_durable.flush(:'await1') GROUP BY applied, detail;
SELECT statements AS await_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, detail, count(*) FROM gen_durable.flush(:'await50') GROUP BY applied, detail;
SELECT statements AS await_50 FROM pg_temp.nested \gset
SELECT :await_1 AS await_1, :await_50 AS await_50, :await_1 = :await_50 AS same;

------------------------------------------------------------------------
-- flush: 1 vs 50 "done" outcomes of children (fast update writing none,
-- lock + update + inbox purge + join of their parents)
------------------------------------------------------------------------
UPDATE gen_durable.instances SET status = 'awaiting_children', children_pending = 1
 WHERE queue = 'eq';
SELECT count(*) FROM gen_durable.pick('pq', 'w', 100);
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
	   AS done1 FROM (SELECT id FROM gen_durable.instances
					   WHERE queue = 'pq' AND locked_by = 'w' ORDER BY id LIMIT 1) s \gset
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
	   AS done50 FROM (SELECT id FROM gen_durable.instances
						WHERE queue = 'pq' AND locked_by = 'w' ORDER BY id OFFSET 1 LIMIT 50) s \gset
SELECT count(*) FILTER (WHERE gen_durable.signal(id, 'x') = 'delivered') AS signals
  FROM gen_durable.instances WHERE queue = 'pq' AND locked_by = 'w';
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'done1') GROUP BY applied;
SELECT statements AS done_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'done50') GROUP BY applied;
SELECT statements AS done_50 FROM pg_temp.nested \gset
SELECT :done_1 AS done_1, :done_50 AS done_50, :done_1 = :done_50 AS same;
SELECT status, count(*) AS parents FROM gen_durable.instances WHERE queue = 'eq'
 GROUP BY status ORDER BY status;
SELECT count(*) AS inboxes_left FROM gen_durable.signals s
  JOIN gen_durable.instances i ON i.id = s.target_id WHERE i.queue = 'pq';

------------------------------------------------------------------------
-- flush: 1 vs 50 "done" outcomes of plain jobs: the fast path (one update
-- that locks and writes them + inbox purge)
------------------------------------------------------------------------
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	(SELECT jsonb_agg(jsonb_build_object('fsm', 'f', 'queue', 'fq')) FROM generate_series(1, 51)));
SELECT count(*) FROM gen_durable.pick('fq', 'w', 100);
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
	   AS fdone1 FROM (SELECT id FROM gen_durable.instances
						WHERE queue = 'fq' AND locked_by = 'w' ORDER BY id LIMIT 1) s \gset
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
	   AS fdone50 FROM (SELECT id FROM gen_durable.instances
						 WHERE queue = 'fq' AND locked_by = 'w' ORDER BY id OFFSET 1) s \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'fdone1') GROUP BY applied;
SELECT statements AS fdone_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'fdone50') GROUP BY applied;
SELECT statements AS fdone_50 FROM pg_temp.nested \gset
SELECT :fdone_1 AS fast_done_1, :fdone_50 AS fast_done_50, :fdone_1 = :fdone_50 AS same;

------------------------------------------------------------------------
-- heartbeat and release: 1 vs 50 ids
------------------------------------------------------------------------
SELECT count(*) FROM gen_durable.pick('iq', 'hb', 100);
SELECT array_agg(id ORDER BY id) AS hb_all FROM gen_durable.instances WHERE locked_by = 'hb' \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT cardinality(gen_durable.heartbeat('hb', (:'hb_all'::bigint[])[1:1])) AS owned;
SELECT statements AS hb_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT cardinality(gen_durable.heartbeat('hb', (:'hb_all'::bigint[])[2:51])) AS owned;
SELECT statements AS hb_50 FROM pg_temp.nested \gset
SELECT :hb_1 AS heartbeat_1, :hb_50 AS heartbeat_50, :hb_1 = :hb_50 AS same;
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT gen_durable.release('hb', (:'hb_all'::bigint[])[1:1]) AS released;
SELECT statements AS rel_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT gen_durable.release('hb', (:'hb_all'::bigint[])[2:51]) AS released;
SELECT statements AS rel_50 FROM pg_temp.nested \gset
SELECT :rel_1 AS release_1, :rel_50 AS release_50, :rel_1 = :rel_50 AS same;

------------------------------------------------------------------------
-- the limiter: a pick of 1 vs 50 rows that are gated and rate-limited over
-- several partitions (claim + lock buckets + debit + flip), then flushing
-- them done (+ one credit) and releasing them (+ one credit)
------------------------------------------------------------------------
SELECT gen_durable.set_concurrency_limit('lg', 100, 2) IS NULL AS gate,
	   gen_durable.set_rate_limit('lr', 1000000, '1 second') IS NULL AS rate;
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	(SELECT jsonb_agg(jsonb_build_object('fsm', 'l', 'queue', 'lq',
										 'concurrency_key', 'lg:' || g % 7,
										 'rate_limit', 'lr:' || g % 5))
	   FROM generate_series(1, 120) g));
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS picked FROM gen_durable.pick('lq', 'lw', 1);
SELECT statements AS lpick_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT count(*) AS picked FROM gen_durable.pick('lq', 'lw', 50);
SELECT statements AS lpick_50 FROM pg_temp.nested \gset
SELECT :lpick_1 AS limited_pick_1, :lpick_50 AS limited_pick_50, :lpick_1 = :lpick_50 AS same;
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'lw', 'kind', 'done'))
	   AS ldone1 FROM (SELECT id FROM gen_durable.instances
						WHERE queue = 'lq' AND locked_by = 'lw' ORDER BY id LIMIT 1) s \gset
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'lw', 'kind', 'done'))
	   AS ldone50 FROM (SELECT id FROM gen_durable.instances
						 WHERE queue = 'lq' AND locked_by = 'lw' ORDER BY id OFFSET 1) s \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'ldone1') GROUP BY applied;
SELECT statements AS ldone_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'ldone50') GROUP BY applied;
SELECT statements AS ldone_50 FROM pg_temp.nested \gset
SELECT :ldone_1 AS gated_done_1, :ldone_50 AS gated_done_50, :ldone_1 = :ldone_50 AS same;
SELECT count(*) FROM gen_durable.pick('lq', 'lr', 51);
SELECT array_agg(id ORDER BY id) AS lr_all FROM gen_durable.instances WHERE locked_by = 'lr' \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT gen_durable.release('lr', (:'lr_all'::bigint[])[1:1]) AS released;
SELECT statements AS lrel_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT gen_durable.release('lr', (:'lr_all'::bigint[])[2:51]) AS released;
SELECT statements AS lrel_50 FROM pg_temp.nested \gset
SELECT :lrel_1 AS gated_release_1, :lrel_50 AS gated_release_50, :lrel_1 = :lrel_50 AS same;
-- every slot came back
SELECT sum(available) = sum(capacity) AS all_slots_free
  FROM gen_durable.buckets WHERE kind = 'conc';

DROP VIEW pg_temp.nested;
DROP EXTENSION pg_stat_statements;
DROP EXTENSION gen_durable;
