-- pick.sql: gen_durable.pick (claim, K=1 arbiter, window dedup, enrichment)
-- (design §3 Workers; contract §2 T2, §3.4, §4.1, §4.4, D7, D15, D16, D19, D20)
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

-- a job without its lease instant; inbox/awaited without signal ids
CREATE FUNCTION pg_temp.strip_ids(j jsonb) RETURNS jsonb
LANGUAGE sql AS $$
	SELECT coalesce(jsonb_agg(e - 'id' ORDER BY ord), '[]')
	  FROM jsonb_array_elements(j) WITH ORDINALITY AS t(e, ord)
$$;

------------------------------------------------------------------------
-- claim order: priority first (lower runs first), then eligible_at;
-- future rows are not picked; other queues are not touched
------------------------------------------------------------------------
SELECT gen_durable.insert('p5', queue => 'pq', priority => 5) AS p5 \gset
SELECT gen_durable.insert('p0_now', queue => 'pq') AS p0_now \gset
SELECT gen_durable.insert('p0_2001', queue => 'pq', run_at => '2001-01-01 00:00:00+00') AS p0_2001 \gset
SELECT gen_durable.insert('pminus1', queue => 'pq', priority => -1) AS pminus1 \gset
SELECT gen_durable.insert('p0_2000', queue => 'pq', run_at => '2000-01-01 00:00:00+00') AS p0_2000 \gset
SELECT gen_durable.insert('future', queue => 'pq', priority => -100, delay => '1 hour') AS future \gset
SELECT gen_durable.insert('elsewhere', queue => 'other', priority => -100) AS elsewhere \gset
SELECT eligible_at AS p0_2000_eligible FROM gen_durable.instances WHERE id = :p0_2000 \gset

-- batch limit: the two most urgent
SELECT fsm, step, attempt, steps, state, inbox, awaited, children, timed_out,
	   parent_id, correlation_key, metadata, fsm_version
  FROM gen_durable.pick('pq', 'w1', batch => 2);
-- the rest in order, with a lease of 5 minutes
SELECT fsm, lease_expires_at > now() + interval '4 min'
	   AND lease_expires_at < now() + interval '6 min' AS lease_5_min
  FROM gen_durable.pick('pq', 'w1', 10, lease => '5 minutes');
-- nothing due is left; the future row and the other queue stay runnable
SELECT count(*) FROM gen_durable.pick('pq', 'w1');
SELECT fsm, status FROM gen_durable.instances WHERE id IN (:future, :elsewhere) ORDER BY id;
-- T2: executing, claimed by the worker; attempt and eligible_at unchanged
SELECT fsm, status, locked_by, attempt,
	   lease_expires_at IS NOT NULL AS has_lease, updated_at > inserted_at AS touched
  FROM gen_durable.instances WHERE queue = 'pq' AND status = 'executing' ORDER BY priority, eligible_at;
SELECT eligible_at = :'p0_2000_eligible' AS eligible_kept
  FROM gen_durable.instances WHERE id = :p0_2000;
-- the default lease is 30 s
SELECT lease_expires_at > now() + interval '25 s'
	   AND lease_expires_at < now() + interval '35 s' AS lease_30_s
  FROM gen_durable.pick('other', 'w1');
-- a future row becomes pickable once due
UPDATE gen_durable.instances SET eligible_at = now() - interval '1 s' WHERE id = :future;
SELECT fsm FROM gen_durable.pick('pq', 'w1');

------------------------------------------------------------------------
-- fsms filter (D19)
------------------------------------------------------------------------
SELECT ord, created FROM gen_durable.insert_many('[
	{"fsm": "v1", "queue": "fq"}, {"fsm": "v2", "queue": "fq"},
	{"fsm": "v3", "queue": "fq"}, {"fsm": "v2", "queue": "fq", "fsm_version": 2}]');
SELECT fsm, fsm_version FROM gen_durable.pick('fq', 'w2', fsms => ARRAY['v2']);
SELECT fsm FROM gen_durable.pick('fq', 'w2', fsms => ARRAY['v3', 'nope']);
SELECT fsm FROM gen_durable.pick('fq', 'w2', fsms => ARRAY['v2']);
SELECT fsm FROM gen_durable.pick('fq', 'w2', fsms => NULL);

------------------------------------------------------------------------
-- K=1 per unconfigured concurrency key (§4.1, I-9, I-11)
------------------------------------------------------------------------
SELECT gen_durable.insert('k_first', queue => 'kq', concurrency_key => 'acct:1',
						  run_at => '2000-01-01') AS k_first \gset
SELECT gen_durable.insert('k_second', queue => 'kq', concurrency_key => 'acct:1',
						  run_at => '2000-01-02') AS k_second \gset
SELECT gen_durable.insert('k_other', queue => 'kq', concurrency_key => 'acct:2',
						  run_at => '2000-01-03') AS k_other \gset
SELECT gen_durable.insert('keyless', queue => 'kq', run_at => '2000-01-04') AS keyless \gset
SELECT gen_durable.insert('k_elsewhere', queue => 'kq2', concurrency_key => 'acct:1',
						  run_at => '1999-01-01') AS k_elsewhere \gset
-- one batch claims only the most urgent row of each key
SELECT fsm FROM gen_durable.pick('kq', 'w3', 10);
-- none of the same key while one executes, in any queue (the arbiter is global)
SELECT count(*) FROM gen_durable.pick('kq', 'w3', 10);
SELECT count(*) FROM gen_durable.pick('kq2', 'w3', 10);
SELECT count(*) AS executing_acct_1 FROM gen_durable.instances
 WHERE concurrency_key = 'acct:1' AND status = 'executing';
-- the outcome releases the key: the waiting row of the key is claimable
SELECT applied FROM gen_durable.flush(format(
	'[{"id": %s, "worker": "w3", "kind": "next", "step": "s2"}]', :k_first)::jsonb);
SELECT fsm FROM gen_durable.pick('kq', 'w3', 10);
-- and again only one of the key at a time: the re-queued first row waits now
SELECT count(*) FROM gen_durable.pick('kq', 'w3', 10);
SELECT count(*) FROM gen_durable.pick('kq2', 'w3', 10);
SELECT applied FROM gen_durable.flush(format(
	'[{"id": %s, "worker": "w3", "kind": "done"}]', :k_second)::jsonb);
-- k_elsewhere (older) and k_first compete across queues: whichever queue
-- picks first wins the key, the other stays runnable
SELECT fsm FROM gen_durable.pick('kq2', 'w3', 10);
SELECT count(*) FROM gen_durable.pick('kq', 'w3', 10);
SELECT applied FROM gen_durable.flush(format(
	'[{"id": %s, "worker": "w3", "kind": "fail"}]', :k_elsewhere)::jsonb);
SELECT fsm, step FROM gen_durable.pick('kq', 'w3', 10);
-- a key released by "concurrency_key": null frees the next row of the key
SELECT gen_durable.insert('k_third', queue => 'kq', concurrency_key => 'acct:1') AS k_third \gset
SELECT count(*) FROM gen_durable.pick('kq', 'w3', 10);
SELECT applied FROM gen_durable.flush(format(
	'[{"id": %s, "worker": "w3", "kind": "next", "step": "s3", "concurrency_key": null}]',
	:k_first)::jsonb);
SELECT fsm FROM gen_durable.pick('kq', 'w3', 10);
-- the arbiter index holds at most one executing row per key
SELECT concurrency_key, count(*) FROM gen_durable.instances
 WHERE status = 'executing' AND concurrency_key IS NOT NULL
 GROUP BY concurrency_key ORDER BY concurrency_key;

------------------------------------------------------------------------
-- enrichment: inbox (all signals, id order), awaited (those whose names
-- the instance awaited, D20), children, timed_out (§4.4)
------------------------------------------------------------------------
SELECT gen_durable.insert('enrich', queue => 'eq', state => '{"n": 1}',
						  correlation_key => 'enrich-1', metadata => '{"tenant": 7}',
						  fsm_version => 4) AS e1 \gset
SELECT count(*) FROM gen_durable.pick('eq', 'w4');
SELECT applied FROM gen_durable.flush(format(
	'[{"id": %s, "worker": "w4", "kind": "await", "names": ["a", "b"], "step": "woken"}]',
	:e1)::jsonb);
SELECT gen_durable.signal(:e1, 'x', '{"i": 1}');
SELECT gen_durable.signal(:e1, 'b', '{"i": 2}');
SELECT gen_durable.signal(:e1, 'a', '{"i": 3}');
SELECT gen_durable.signal(:e1, 'y', '{"i": 4}');
SELECT fsm, fsm_version, step, state, attempt, steps,
	   pg_temp.strip_ids(inbox) AS inbox, pg_temp.strip_ids(awaited) AS awaited,
	   children, timed_out, parent_id IS NULL AS no_parent, correlation_key, metadata
  FROM gen_durable.pick('eq', 'w4');
-- pick recorded the awaited ids it presented (D20)
SELECT presented = ARRAY(SELECT id FROM gen_durable.signals
						  WHERE target_id = :e1 AND name IN ('a', 'b') ORDER BY id) AS presented_recorded
  FROM gen_durable.instances WHERE id = :e1;
SELECT applied FROM gen_durable.flush(format(
	'[{"id": %s, "worker": "w4", "kind": "retry"}]', :e1)::jsonb);
SELECT j.inbox = (SELECT jsonb_agg(jsonb_build_object('id', s.id, 'name', s.name,
												   'payload', s.payload) ORDER BY s.id)
				  FROM gen_durable.signals s WHERE s.target_id = :e1) AS inbox_exact,
	   j.awaited = (SELECT jsonb_agg(jsonb_build_object('id', s.id, 'name', s.name,
													 'payload', s.payload) ORDER BY s.id)
					FROM gen_durable.signals s
				   WHERE s.target_id = :e1 AND s.name IN ('a', 'b')) AS awaited_exact,
	   j.attempt
  FROM gen_durable.pick('eq', 'w4') j;

-- children of a parent, dense in child_index order (set up directly here:
-- spawn itself is tested in spawn.sql)
SELECT gen_durable.insert('parent', queue => 'cq') AS par \gset
SELECT gen_durable.insert('child_b', queue => 'cq_kids') AS c1 \gset
SELECT gen_durable.insert('child_a', queue => 'cq_kids') AS c0 \gset
UPDATE gen_durable.instances SET parent_id = :par, child_index = 1, parent_round = 1,
	   status = 'done', result = '{"ok": true}' WHERE id = :c1;
UPDATE gen_durable.instances SET parent_id = :par, child_index = 0, parent_round = 1,
	   status = 'failed', error = '{"reason": "boom"}' WHERE id = :c0;
UPDATE gen_durable.instances SET children_total = 2, spawn_round = 1 WHERE id = :par;
SELECT jsonb_path_query_array(children, '$[*].index') AS indexes,
	   jsonb_path_query_array(children, '$[*].status') AS statuses,
	   jsonb_path_query_array(children, '$[*].result') AS results,
	   jsonb_path_query_array(children, '$[*].error') AS errors,
	   children -> 0 ->> 'id' = :'c0' AND children -> 1 ->> 'id' = :'c1' AS ids_match
  FROM gen_durable.pick('cq', 'w5');
-- a child knows its parent
UPDATE gen_durable.instances SET status = 'runnable', result = NULL, error = NULL
 WHERE id = :c0;
SELECT fsm, parent_id = :par AS parent_ok FROM gen_durable.pick('cq_kids', 'w5');

-- timed_out: a passed await deadline wakes the instance (T9)
SELECT gen_durable.insert('timer', queue => 'tq') AS tm \gset
SELECT count(*) FROM gen_durable.pick('tq', 'w6');
SELECT applied FROM gen_durable.flush(format(
	'[{"id": %s, "worker": "w6", "kind": "await", "names": ["never"], "step": "late", "timeout": 60}]',
	:tm)::jsonb);
SELECT count(*) FROM gen_durable.pick('tq', 'w6');
UPDATE gen_durable.instances SET await_deadline = now() - interval '1 s' WHERE id = :tm;
SELECT run_maintenance ->> 'timeouts' AS timeouts FROM gen_durable.run_maintenance();
SELECT step, timed_out, inbox, awaited FROM gen_durable.pick('tq', 'w6');

------------------------------------------------------------------------
-- wait: an empty queue returns no rows after the wait; a due row returns at
-- once; a row falling due during the wait is claimed then
------------------------------------------------------------------------
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) FROM gen_durable.pick('empty_q', 'w7', wait => '100 ms');
SELECT clock_timestamp() - :'t0' >= interval '100 ms' AS waited;
SELECT gen_durable.insert('ready', queue => 'wq') IS NOT NULL AS inserted;
SELECT fsm FROM gen_durable.pick('wq', 'w7', wait => '10 s');
-- a row falling due during the wait is claimed when it is due
SELECT gen_durable.insert('soon', queue => 'soon_q',
						  run_at => clock_timestamp() + interval '200 ms') IS NOT NULL AS inserted;
SELECT fsm, clock_timestamp() < now() + interval '5 s' AS before_the_wait_ended
  FROM gen_durable.pick('soon_q', 'w7', wait => '10 s');

------------------------------------------------------------------------
-- argument errors
------------------------------------------------------------------------
SELECT * FROM gen_durable.pick('pq', 'w', batch => 0);
SELECT * FROM gen_durable.pick('pq', 'w', batch => 10001);
SELECT * FROM gen_durable.pick('pq', 'w', batch => -1);
SELECT * FROM gen_durable.pick('pq', 'w', batch => NULL);
SELECT * FROM gen_durable.pick(NULL, 'w');
SELECT * FROM gen_durable.pick('', 'w');
SELECT * FROM gen_durable.pick('pq', NULL);
SELECT * FROM gen_durable.pick('pq', '');
SELECT * FROM gen_durable.pick('pq', 'w', lease => '0 s');
SELECT * FROM gen_durable.pick('pq', 'w', lease => '-1 s');
SELECT * FROM gen_durable.pick('pq', 'w', lease => NULL);
SELECT * FROM gen_durable.pick('pq', 'w', wait => '-1 s');
SELECT * FROM gen_durable.pick('pq', 'w', wait => NULL);
SELECT * FROM gen_durable.pick('pq', 'w', fsms => ARRAY['a', NULL]);
-- the boundary batch sizes are accepted
SELECT count(*) FROM gen_durable.pick('nothing', 'w', batch => 1);
SELECT count(*) FROM gen_durable.pick('nothing', 'w', batch => 10000);

------------------------------------------------------------------------
-- REPEATABLE READ and SERIALIZABLE are refused by pick, flush and signal
-- (D15, I-3); READ COMMITTED inside a transaction block is fine
------------------------------------------------------------------------
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM gen_durable.pick('pq', 'w');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT * FROM gen_durable.pick('pq', 'w');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM gen_durable.flush('[]');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT * FROM gen_durable.flush('[]');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT gen_durable.signal(:e1, 'x');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT gen_durable.signal('enrich-1', 'x');
ROLLBACK;
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT count(*) FROM gen_durable.pick('nothing', 'w');
SELECT count(*) FROM gen_durable.flush('[]');
COMMIT;

------------------------------------------------------------------------
-- eligibility uses the statement's clock, not the start of the caller's
-- transaction (D16, A-19): a row due 300 ms after BEGIN is claimable later
-- in the same transaction
------------------------------------------------------------------------
BEGIN;
SELECT gen_durable.insert('clocked', queue => 'clock_q',
						  run_at => clock_timestamp() + interval '300 ms') IS NOT NULL AS inserted;
SELECT count(*) FROM gen_durable.pick('clock_q', 'w8');
SELECT pg_sleep(0.4);
SELECT fsm, lease_expires_at > now() + interval '30 s' AS lease_from_statement_clock
  FROM gen_durable.pick('clock_q', 'w8', lease => '30 s');
COMMIT;

DROP EXTENSION gen_durable;
