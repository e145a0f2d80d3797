-- archive.sql: finished instances leave the live table (0.9.0;
-- docs/contract.md §10.5, D22): which instances the flush moves, that the
-- moved row is the row the update would have written and is still read
-- through gen_durable.instances, await, find and the views, that a late
-- outcome is stale, that the statements do not grow with the batch, and
-- the archive's rotation: segments close, open and are emptied whole
-- after the retention.  GC of the live table deletes the inbox and history
-- of what it deletes (no foreign keys since 0.9.0).
CREATE EXTENSION gen_durable;
CREATE EXTENSION pg_stat_statements;
\set VERBOSITY terse
\i test/regress_helpers.sql
-- the server default (test/gen_durable.conf turns it off for the suites
-- about finished rows kept in place)
SET gen_durable.archive_finished = on;

-- a row without what differs between two runs of the same job
CREATE FUNCTION pg_temp.shape(i bigint) RETURNS jsonb
LANGUAGE sql AS $$
	SELECT to_jsonb(x) - '{id, inserted_at, updated_at, eligible_at, claim, queue}'::text[]
	  FROM gen_durable.instances x WHERE x.id = i
$$;
CREATE FUNCTION pg_temp.place(i bigint) RETURNS text
LANGUAGE sql AS $$
	SELECT tableoid::regclass::text FROM gen_durable.instances WHERE id = i
$$;

------------------------------------------------------------------------
-- a plain job that ends done moves to the open segment, as the row the
-- update would have made: the same job with archiving off ends in place
-- with the same columns.  Both kinds of claim (in memory and on the row).
------------------------------------------------------------------------
SELECT segment FROM gen_durable.finished_segments
 WHERE opened_at IS NOT NULL AND closed_at IS NULL;
SELECT gen_durable.insert('job', '{"n": 1}', queue => 'aq', max_attempts => 3) AS a1 \gset
SELECT count(*) FROM gen_durable.pick('aq', 'w1');
SELECT * FROM pg_temp.out1(:a1, 'w1', 'done', '{"result": {"ok": true}}');
SET gen_durable.archive_finished = off;
SELECT gen_durable.insert('job', '{"n": 1}', queue => 'aq', max_attempts => 3) AS a2 \gset
SELECT count(*) FROM gen_durable.pick('aq', 'w1');
SELECT * FROM pg_temp.out1(:a2, 'w1', 'done', '{"result": {"ok": true}}');
SET gen_durable.archive_finished = on;
SELECT pg_temp.place(:a1) AS a1_in, pg_temp.place(:a2) AS a2_in,
	   pg_temp.shape(:a1) = pg_temp.shape(:a2) AS same_row;
SELECT status, result, error, locked_by, lease_expires_at, claim_session, attempt, steps
  FROM gen_durable.instances WHERE id = :a1;
SELECT count(*) AS live FROM ONLY gen_durable.instances WHERE id = :a1;

SET gen_durable.claim_in_memory = on;
SELECT gen_durable.insert('job', '{"n": 1}', queue => 'aq', max_attempts => 3) AS a3 \gset
SELECT claim AS a3_claim FROM gen_durable.pick('aq', 'w1') \gset
SELECT in_memory FROM gen_durable.claims WHERE id = :a3;
SELECT * FROM pg_temp.out1(:a3, 'w1', 'done', jsonb_build_object('claim', :a3_claim, 'result', '{"ok": true}'::jsonb));
RESET gen_durable.claim_in_memory;
SELECT pg_temp.place(:a3) AS a3_in, pg_temp.shape(:a3) = pg_temp.shape(:a2) AS same_row,
	   (SELECT claim FROM gen_durable.instances WHERE id = :a3) = :a3_claim AS claim_kept;

-- a late duplicate of the outcome is stale, as it was before
SELECT * FROM pg_temp.out1(:a1, 'w1', 'done');
SELECT * FROM pg_temp.out1(:a3, 'w1', 'done', jsonb_build_object('claim', :a3_claim));
-- and an id nobody has is still no such instance
SELECT * FROM pg_temp.out1(999999, 'w1', 'done');

------------------------------------------------------------------------
-- what stays in the live table: an instance with metadata (find's index)
-- or a correlation key (the unique guard), a child (its parent's join),
-- one that records its step history, and every outcome but done.  The
-- batch has a fail in it, so it takes flush's locked path, which moves as
-- the fast one does: the gated job moves, and its slot is returned.
------------------------------------------------------------------------
SELECT gen_durable.set_concurrency_limit('agate', 2);
SELECT gen_durable.insert('job', queue => 'ak', metadata => '{"t": 1}') AS k_meta,
	   gen_durable.insert('job', queue => 'ak', correlation_key => 'k1') AS k_key,
	   gen_durable.insert('job', queue => 'ak', concurrency_key => 'agate') AS k_gate,
	   gen_durable.insert('job', queue => 'ak', history => true) AS k_hist,
	   gen_durable.insert('job', queue => 'ak') AS k_fail,
	   gen_durable.insert('job', queue => 'ak') AS k_next \gset
SELECT count(*) FROM gen_durable.pick('ak', 'w2', 10);
SELECT f.applied FROM gen_durable.flush(jsonb_build_array(
	jsonb_build_object('id', :k_meta, 'worker', 'w2', 'kind', 'done'),
	jsonb_build_object('id', :k_key, 'worker', 'w2', 'kind', 'done'),
	jsonb_build_object('id', :k_gate, 'worker', 'w2', 'kind', 'done'),
	jsonb_build_object('id', :k_hist, 'worker', 'w2', 'kind', 'done'),
	jsonb_build_object('id', :k_fail, 'worker', 'w2', 'kind', 'fail', 'error', '{"e": 1}'::jsonb),
	jsonb_build_object('id', :k_next, 'worker', 'w2', 'kind', 'next', 'step', 'two'))) f;
SELECT id = :k_meta AS meta, id = :k_key AS key, id = :k_gate AS gate, id = :k_hist AS hist,
	   id = :k_fail AS fail, id = :k_next AS next, status, tableoid::regclass AS place
  FROM gen_durable.instances WHERE queue = 'ak' ORDER BY id;
SELECT key, available, capacity FROM gen_durable.buckets WHERE kind = 'conc' ORDER BY key, shard;
-- a parent that ends done moves; its children, terminal or not, stay
SELECT gen_durable.insert('parent', queue => 'ap') AS p \gset
SELECT count(*) FROM gen_durable.pick('ap', 'w3');
SELECT f.applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :p, 'worker', 'w3', 'kind', 'spawn', 'step', 'join',
	'children', '[{"fsm": "child", "queue": "ac"}]'::jsonb))) f;
SELECT id AS c FROM gen_durable.instances WHERE parent_id = :p \gset
SELECT count(*) FROM gen_durable.pick('ac', 'w3');
SELECT * FROM pg_temp.out1(:c, 'w3', 'done');
SELECT count(*) FROM gen_durable.pick('ap', 'w3');
SELECT * FROM pg_temp.out1(:p, 'w3', 'done');
SELECT id = :p AS parent, status, tableoid::regclass AS place
  FROM gen_durable.instances WHERE id IN (:p, :c) ORDER BY id;

------------------------------------------------------------------------
-- a moved instance is read as any finished one: await, signal, cancel,
-- the queues view; the planner leaves the segments out of what cannot
-- match them
------------------------------------------------------------------------
SELECT * FROM gen_durable.await(:a1, '1 s');
SELECT gen_durable.signal(:a1, 'late') AS signal, gen_durable.cancel(:a1) AS cancelled;
SELECT count(*) AS inbox FROM gen_durable.signals WHERE target_id = :a1;
SELECT queue, done, executing FROM gen_durable.queues WHERE queue = 'aq';
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM gen_durable.find('{"t": 1}');
EXPLAIN (COSTS OFF) SELECT id FROM gen_durable.instances WHERE correlation_guard = 'k1';
EXPLAIN (COSTS OFF) SELECT id FROM gen_durable.instances WHERE parent_id = 1;
RESET enable_seqscan;
SELECT count(*) = 1 AS found_meta FROM gen_durable.find('{"t": 1}');

------------------------------------------------------------------------
-- the statements of a flush do not grow with its batch: 1 vs 50 dones
-- that move
------------------------------------------------------------------------
CREATE VIEW pg_temp.nested AS
SELECT coalesce(sum(calls), 0)::int AS statements
  FROM pg_stat_statements WHERE NOT toplevel;
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	(SELECT jsonb_agg(jsonb_build_object('fsm', 'f', 'queue', 'as')) FROM generate_series(1, 51)));
SELECT count(*) FROM gen_durable.pick('as', 'w', 100);
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
	   AS done1 FROM (SELECT id FROM gen_durable.instances
						WHERE queue = 'as' AND locked_by = 'w' ORDER BY id LIMIT 1) s \gset
SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w', 'kind', 'done'))
	   AS done50 FROM (SELECT id FROM gen_durable.instances
						 WHERE queue = 'as' AND locked_by = 'w' ORDER BY id OFFSET 1) s \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'done1') GROUP BY applied;
SELECT statements AS done_1 FROM pg_temp.nested \gset
SELECT pg_stat_statements_reset() IS NOT NULL AS reset;
SELECT applied, count(*) FROM gen_durable.flush(:'done50') GROUP BY applied;
SELECT statements AS done_50 FROM pg_temp.nested \gset
SELECT :done_1 AS done_1, :done_50 AS done_50, :done_1 = :done_50 AS same;
SELECT tableoid::regclass AS place, count(*) FROM gen_durable.instances
 WHERE queue = 'as' GROUP BY 1;

------------------------------------------------------------------------
-- the rotation (retention: 1 day, a quarter of it per segment).  The
-- times are set back by hand to stand for the time passed.
------------------------------------------------------------------------
CREATE FUNCTION pg_temp.segments()
RETURNS TABLE (segment smallint, state text, has_rows boolean)
LANGUAGE sql AS $$
	SELECT s.segment,
		   CASE WHEN s.closed_at IS NOT NULL THEN 'closed'
				WHEN s.opened_at IS NOT NULL THEN 'open' ELSE 'empty' END,
		   EXISTS (SELECT 1 FROM gen_durable.instances i
					WHERE i.tableoid = ('gen_durable.finished_' || s.segment)::regclass)
	  FROM gen_durable.finished_segments s ORDER BY s.segment
$$;
SELECT * FROM pg_temp.segments() WHERE state <> 'empty';
-- young: nothing happens
SELECT gen_durable.run_maintenance() -> 'segments_truncated' AS truncated;
SELECT * FROM pg_temp.segments() WHERE state <> 'empty';
-- open for 7 hours (more than a quarter of the retention): the next one
-- opens, and the flushes write there; the old one closes in the next
-- round, which sees the new one
UPDATE gen_durable.finished_segments SET opened_at = opened_at - interval '7 hours'
 WHERE segment = 0;
SELECT gen_durable.run_maintenance() -> 'segments_truncated' AS truncated;
SELECT * FROM pg_temp.segments() WHERE state <> 'empty';
SELECT gen_durable.insert('job', queue => 'aq') AS a4 \gset
SELECT count(*) FROM gen_durable.pick('aq', 'w1');
SELECT * FROM pg_temp.out1(:a4, 'w1', 'done');
SELECT pg_temp.place(:a4) AS a4_in;
SELECT gen_durable.run_maintenance() -> 'segments_truncated' AS truncated;
SELECT * FROM pg_temp.segments() WHERE state <> 'empty';
-- closed for less than the retention: kept
UPDATE gen_durable.finished_segments SET closed_at = now() - interval '23 hours'
 WHERE segment = 0;
SELECT gen_durable.run_maintenance() -> 'segments_truncated' AS truncated;
-- closed for longer: emptied whole, while a reader holds no lock on it;
-- the rows of the open segment stay
UPDATE gen_durable.finished_segments SET closed_at = now() - interval '25 hours'
 WHERE segment = 0;
SELECT gen_durable.run_maintenance() -> 'segments_truncated' AS truncated;
SELECT * FROM pg_temp.segments() WHERE state <> 'empty';
SELECT count(*) AS a1_left FROM gen_durable.instances WHERE id IN (:a1, :a3);
SELECT pg_temp.place(:a4) AS a4_in;
-- the next segment's turn: it closes and, after the retention, goes
-- (pg_temp.close_aged: open for 7 hours, then two rounds, then closed a
-- day and an hour ago)
CREATE FUNCTION pg_temp.close_aged(seg int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	truncated int;
BEGIN
	UPDATE gen_durable.finished_segments SET opened_at = opened_at - interval '7 hours'
	 WHERE segment = seg;
	truncated := (gen_durable.run_maintenance() ->> 'segments_truncated')::int
				 + (gen_durable.run_maintenance() ->> 'segments_truncated')::int;
	UPDATE gen_durable.finished_segments SET closed_at = now() - interval '25 hours'
	 WHERE segment = seg;
	RETURN truncated;
END
$$;
SELECT pg_temp.close_aged(1) AS truncated;
SELECT * FROM pg_temp.segments() WHERE state <> 'empty';
SELECT gen_durable.run_maintenance() -> 'segments_truncated' AS truncated;
SELECT * FROM pg_temp.segments() WHERE state <> 'empty';
SELECT count(*) AS a4_left FROM gen_durable.instances WHERE id = :a4;

-- an instance whose queue recorded its first step and then stopped moves
-- with that history, which goes with its segment
SELECT gen_durable.set_queue_history('ah', true);
SELECT gen_durable.insert('job', queue => 'ah') AS h1 \gset
SELECT count(*) FROM gen_durable.pick('ah', 'w5');
SELECT * FROM pg_temp.out1(:h1, 'w5', 'next', '{"step": "two"}');
SELECT gen_durable.set_queue_history('ah', false);
SELECT count(*) FROM gen_durable.pick('ah', 'w5');
SELECT * FROM pg_temp.out1(:h1, 'w5', 'done');
SELECT pg_temp.place(:h1) AS h1_in,
	   (SELECT count(*) FROM gen_durable.step_history WHERE instance_id = :h1) AS history;
SELECT pg_temp.close_aged(2) AS truncated;
SELECT gen_durable.run_maintenance() -> 'segments_truncated' AS truncated;
SELECT (SELECT count(*) FROM gen_durable.instances WHERE id = :h1) AS instance,
	   (SELECT count(*) FROM gen_durable.step_history WHERE instance_id = :h1) AS history;

------------------------------------------------------------------------
-- GC of the live table deletes the inbox and the step history of what it
-- deletes: they have no foreign keys since 0.9.0
------------------------------------------------------------------------
SELECT conname FROM pg_constraint
 WHERE conrelid IN ('gen_durable.signals'::regclass, 'gen_durable.step_history'::regclass)
   AND contype = 'f';
SELECT gen_durable.insert('job', queue => 'ag', history => true) AS g1 \gset
SELECT count(*) FROM gen_durable.pick('ag', 'w4');
SELECT * FROM pg_temp.out1(:g1, 'w4', 'fail', '{"error": {"e": 1}}');
SELECT pg_temp.place(:g1) AS g1_in,
	   (SELECT count(*) FROM gen_durable.step_history WHERE instance_id = :g1) AS history;
UPDATE gen_durable.instances SET updated_at = now() - interval '2 days' WHERE id = :g1;
SELECT gen_durable.run_maintenance() -> 'gc_deleted' AS gc_deleted;
SELECT (SELECT count(*) FROM gen_durable.instances WHERE id = :g1) AS instance,
	   (SELECT count(*) FROM gen_durable.step_history WHERE instance_id = :g1) AS history;

DROP VIEW pg_temp.nested;
DROP EXTENSION pg_stat_statements;
DROP EXTENSION gen_durable;
