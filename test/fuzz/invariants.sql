-- test/fuzz/invariants.sql - the invariants of gen_durable's tables that SQL
-- can express, as queries that return the rows violating them (no rows = the
-- invariant holds).
--
-- Each check starts with a line "-- check: NAME" (holds at any committed
-- snapshot) or "-- check(post): NAME" (holds right after
-- gen_durable.run_maintenance() when nothing else ran since: the sweeps'
-- fixed point).  A post check may use :'t0', the clock_timestamp() read
-- just before that run_maintenance(), and :'retention', the retention in
-- seconds.  fuzz.py runs every check in one REPEATABLE READ snapshot; with
-- psql, set the two variables and run the file:
--
--   psql -v t0="$(psql -Atc 'select clock_timestamp()')" -v retention=86400 \
--        -c 'select gen_durable.run_maintenance()' -f test/fuzz/invariants.sql
--
-- The checks that need what the driver knows (which rows were already
-- executing when a gate was created, lowered or dropped) are in fuzz.py.
-- Sources: docs/contract.md (I-n, Dn), src/*.c, sql/gen_durable--*.sql.

-- check: claim_iff_executing
-- I-24: locked_by / lease_expires_at are set exactly while executing
SELECT id, status, locked_by, lease_expires_at
  FROM gen_durable.instances
 WHERE (locked_by IS NOT NULL) <> (status = 'executing')
    OR (lease_expires_at IS NOT NULL) <> (status = 'executing');

-- check: claim_session_only_executing
-- session.c: a claim's session is recorded by pick and cleared by every exit
SELECT id, status, claim_session
  FROM gen_durable.instances
 WHERE claim_session IS NOT NULL AND status <> 'executing';

-- check: slot_only_executing_with_key
-- 0.4.0 instances_slot_check, I-15: a gate slot is held only while executing,
-- and only by a row with a concurrency key
SELECT id, status, concurrency_key, concurrency_shard
  FROM gen_durable.instances
 WHERE concurrency_shard IS NOT NULL
   AND (status <> 'executing' OR concurrency_key IS NULL);

-- check: k1_one_executing_per_key
-- I-9: at most one executing row per key in the K=1 regime (shard NULL)
SELECT concurrency_key, pg_catalog.count(*) AS executing, pg_catalog.array_agg(id) AS ids
  FROM gen_durable.instances
 WHERE status = 'executing' AND concurrency_key IS NOT NULL AND concurrency_shard IS NULL
 GROUP BY concurrency_key
HAVING pg_catalog.count(*) > 1;

-- check: gated_holder_has_slot
-- limit_policy.c restamps every executing row of a gate when it is created or
-- changed, and admission stamps a slot on every gated claim: no executing row
-- of a configured gate runs outside its counters (the only exception is a
-- pick racing the gate's creation, which this single-client driver cannot do)
SELECT i.id, i.concurrency_key
  FROM gen_durable.instances i
  JOIN gen_durable.limits l ON l.kind = 'conc' AND l.name = i.concurrency_name
 WHERE i.status = 'executing' AND i.concurrency_shard IS NULL;

-- check: gate_shard_in_range
-- admit.c only takes shards below the gate's count; restamp respreads
SELECT i.id, i.concurrency_key, i.concurrency_shard, l.shards
  FROM gen_durable.instances i
  JOIN gen_durable.limits l ON l.kind = 'conc' AND l.name = i.concurrency_name
 WHERE i.status = 'executing' AND i.concurrency_shard IS NOT NULL
   AND (i.concurrency_shard < 0 OR i.concurrency_shard >= l.shards);

-- check: gate_counters_cover_holders
-- I-13, I-25, credit.c: a shard's counters account for at least the rows that
-- hold its slots (capacity - available >= holders); fewer free slots than the
-- truth is allowed until the reconcile (errs towards admitting less), more is
-- over-admission.  A holder without its bucket row: the key would look cold,
-- i.e. full (I-16).
WITH held AS (
	SELECT i.concurrency_key AS key, i.concurrency_shard AS shard, pg_catalog.count(*) AS n
	  FROM gen_durable.instances i
	  JOIN gen_durable.limits l ON l.kind = 'conc' AND l.name = i.concurrency_name
	 WHERE i.status = 'executing' AND i.concurrency_shard IS NOT NULL
	 GROUP BY 1, 2)
SELECT h.key, h.shard, h.n AS holders, b.capacity, b.available
  FROM held h
  LEFT JOIN gen_durable.buckets b ON b.kind = 'conc' AND b.key = h.key AND b.shard = h.shard
 WHERE b.key IS NULL OR b.capacity - b.available < h.n;

-- check: gate_buckets_all_shards
-- I-16/I-18: a gate key's buckets are all shards 0..S-1 or none
SELECT b.key, l.shards, pg_catalog.array_agg(b.shard ORDER BY b.shard) AS shards_present
  FROM gen_durable.buckets b
  JOIN gen_durable.limits l ON l.kind = 'conc' AND l.name = pg_catalog.split_part(b.key, ':', 1)
 WHERE b.kind = 'conc'
 GROUP BY b.key, l.shards
HAVING pg_catalog.count(*) FILTER (WHERE b.shard >= 0 AND b.shard < l.shards) <> l.shards;

-- check: rate_buckets_have_policy
-- limit_policy.c: dropping a rate limit drops its buckets; admission mints
-- only keys with a policy
SELECT b.key, b.shard
  FROM gen_durable.buckets b
 WHERE b.kind = 'rate'
   AND NOT EXISTS (SELECT 1 FROM gen_durable.limits l
					WHERE l.kind = 'rate' AND l.name = pg_catalog.split_part(b.key, ':', 1));

-- check: rate_buckets_all_shards
-- I-18: a rate key's buckets are exactly shards 0..S-1 (admission mints all,
-- a shard change re-mints all, GC deletes all)
SELECT b.key, l.shards, pg_catalog.array_agg(b.shard ORDER BY b.shard) AS shards_present
  FROM gen_durable.buckets b
  JOIN gen_durable.limits l ON l.kind = 'rate' AND l.name = pg_catalog.split_part(b.key, ':', 1)
 WHERE b.kind = 'rate'
 GROUP BY b.key, l.shards
HAVING pg_catalog.count(*) <> l.shards
    OR pg_catalog.count(*) FILTER (WHERE b.shard >= 0 AND b.shard < l.shards) <> l.shards;

-- check: bucket_shape
-- the CHECK (0 <= available <= capacity), finite numbers, last_refill set
-- exactly for rate buckets
SELECT kind, key, shard, capacity, available, last_refill
  FROM gen_durable.buckets
 WHERE NOT (available >= 0 AND available <= capacity)
    OR available = 'NaN'::float8 OR capacity = 'NaN'::float8
    OR capacity = 'Infinity'::float8
    OR (kind = 'conc') <> (last_refill IS NULL)
    OR (kind = 'conc' AND (capacity <> pg_catalog.floor(capacity)
                           OR available <> pg_catalog.floor(available)));

-- check: limits_shape
-- limit_policy.c validates: finite rate >= 0, capacity > 0, 1..1000 shards,
-- a gate's shards at most its max, whole-number gate capacity
SELECT kind, name, rate, capacity, shards
  FROM gen_durable.limits
 WHERE capacity = 'Infinity'::float8 OR capacity = 'NaN'::float8
    OR rate = 'NaN'::float8 OR shards < 1 OR shards > 1000
    OR (kind = 'conc' AND (rate IS NOT NULL OR capacity < shards
                           OR capacity <> pg_catalog.floor(capacity)))
    OR (kind = 'rate' AND rate IS NULL);

-- check: no_signals_of_terminal
-- I-27, I-28: a terminal instance's inbox is purged, and signals to it are refused
SELECT s.id AS signal, s.target_id, i.status
  FROM gen_durable.signals s
  JOIN gen_durable.instances i ON i.id = s.target_id
 WHERE i.status IN ('done', 'failed', 'cancelled');

-- check: no_orphan_signals_or_history
-- 0.9.0: signals and step_history have no foreign keys; the engine alone
-- keeps every inbox row and history row with an instance that exists
SELECT 'signal' AS kind, s.id, s.target_id AS instance
  FROM gen_durable.signals s
 WHERE NOT EXISTS (SELECT 1 FROM gen_durable.instances i WHERE i.id = s.target_id)
UNION ALL
SELECT 'history', h.id, h.instance_id
  FROM gen_durable.step_history h
 WHERE NOT EXISTS (SELECT 1 FROM gen_durable.instances i WHERE i.id = h.instance_id);

-- check: presented_in_inbox
-- D20: the awaited signals handed to a claim stay in the inbox until that
-- claim progresses (which consumes them and clears presented) or the
-- instance ends
SELECT i.id, i.status, p.sig AS missing_signal
  FROM gen_durable.instances i
 CROSS JOIN LATERAL pg_catalog.unnest(i.presented) AS p(sig)
 WHERE i.status NOT IN ('done', 'failed', 'cancelled')
   AND NOT EXISTS (SELECT 1 FROM gen_durable.signals s
					WHERE s.id = p.sig AND s.target_id = i.id);

-- check: terminal_rows_clean
-- D1: every path into a terminal status clears the claim, the slot, the
-- await names, deadline and presented signals; done has a result and no
-- error, failed and cancelled have an error
SELECT id, status, awaits, await_deadline, presented, result IS NULL AS no_result,
	   error IS NULL AS no_error
  FROM gen_durable.instances
 WHERE status IN ('done', 'failed', 'cancelled')
   AND (awaits IS NOT NULL OR await_deadline IS NOT NULL OR presented IS NOT NULL
		OR concurrency_shard IS NOT NULL OR timed_out
		OR (status = 'done' AND (result IS NULL OR error IS NOT NULL))
		OR (status <> 'done' AND (error IS NULL OR result IS NOT NULL)));

-- check: live_rows_have_no_result
-- flush writes result only with done; retry() clears it
SELECT id, status, result
  FROM gen_durable.instances
 WHERE status NOT IN ('done', 'failed', 'cancelled') AND result IS NOT NULL;

-- check: deadline_only_while_awaiting
-- D11: a wake (signal, recheck, timeout) and every other exit clears the deadline
SELECT id, status, await_deadline
  FROM gen_durable.instances
 WHERE await_deadline IS NOT NULL AND status <> 'awaiting_signal';

-- check: awaiting_signal_shape
-- an await outcome sets a non-empty list of non-empty names, timed_out false
SELECT id, awaits, timed_out
  FROM gen_durable.instances
 WHERE status = 'awaiting_signal'
   AND (awaits IS NULL OR pg_catalog.cardinality(awaits) = 0
		OR pg_catalog.array_position(awaits, NULL) IS NOT NULL
		OR pg_catalog.array_position(awaits, '') IS NOT NULL OR timed_out);

-- check: attempts_and_steps_within_budget
-- D2/D3: a live instance has attempts left; steps never exceed max_steps
SELECT id, status, attempt, max_attempts, steps, max_steps
  FROM gen_durable.instances
 WHERE attempt < 0 OR steps < 0
    OR (status NOT IN ('done', 'failed', 'cancelled') AND attempt >= max_attempts)
    OR (max_steps IS NOT NULL AND steps > max_steps);

-- check: join_counter
-- I-26, D12: a parent waiting for its children counts exactly the live
-- children of its current round, and waits only while that is at least one
SELECT p.id, p.spawn_round, p.children_pending, p.children_total,
	   (SELECT pg_catalog.count(*) FROM gen_durable.instances c
		 WHERE c.parent_id = p.id AND c.parent_round = p.spawn_round
		   AND c.status NOT IN ('done', 'failed', 'cancelled')) AS live_children
  FROM gen_durable.instances p
 WHERE p.status = 'awaiting_children'
   AND (p.children_pending < 1 OR p.spawn_round < 1 OR p.join_policy IS NULL
		OR p.children_pending <> (SELECT pg_catalog.count(*) FROM gen_durable.instances c
								   WHERE c.parent_id = p.id AND c.parent_round = p.spawn_round
									 AND c.status NOT IN ('done', 'failed', 'cancelled')));

-- check: join_round_rows_kept
-- D12, I-29: the children a waiting parent's round landed all exist (GC
-- spares terminal children of a live parent)
SELECT p.id, p.children_total,
	   (SELECT pg_catalog.count(*) FROM gen_durable.instances c
		 WHERE c.parent_id = p.id AND c.parent_round = p.spawn_round) AS rows_of_round
  FROM gen_durable.instances p
 WHERE p.status = 'awaiting_children'
   AND p.children_total <> (SELECT pg_catalog.count(*) FROM gen_durable.instances c
							 WHERE c.parent_id = p.id AND c.parent_round = p.spawn_round);

-- check: first_error_wakes
-- D13: a first_error parent does not keep waiting once a child of its round failed
SELECT p.id, c.id AS failed_child
  FROM gen_durable.instances p
  JOIN gen_durable.instances c ON c.parent_id = p.id AND c.parent_round = p.spawn_round
 WHERE p.status = 'awaiting_children' AND p.join_policy = 'first_error'
   AND c.status = 'failed';

-- check: child_shape
-- spawn_children: a child records its round and index; rounds only grow
SELECT c.id, c.parent_id, c.parent_round, c.child_index, p.spawn_round
  FROM gen_durable.instances c
  JOIN gen_durable.instances p ON p.id = c.parent_id
 WHERE c.parent_round IS NULL OR c.child_index IS NULL OR c.child_index < 0
    OR c.parent_round < 1 OR c.parent_round > p.spawn_round OR c.id <= p.id;

-- check: correlation_guard_unique
-- §3, D4: at most one instance occupies a key (the arbiter index)
SELECT correlation_guard, pg_catalog.count(*), pg_catalog.array_agg(id)
  FROM gen_durable.instances
 WHERE correlation_guard IS NOT NULL
 GROUP BY correlation_guard
HAVING pg_catalog.count(*) > 1;

-- check: correlation_scope_shape
-- D5: a scope is empty or holds all four live statuses; no scope without a key
SELECT id, correlation_key, correlation_scope
  FROM gen_durable.instances
 WHERE (correlation_scope <> '{}'
		AND NOT correlation_scope @> '{runnable,executing,awaiting_signal,awaiting_children}')
    OR (correlation_key IS NULL AND correlation_scope <> '{}');

-- check: names_within_limits
-- the Conventions: names are non-empty and at most 1024 bytes
SELECT id, pg_catalog.octet_length(fsm) AS fsm, pg_catalog.octet_length(step) AS step,
	   pg_catalog.octet_length(queue) AS queue
  FROM gen_durable.instances
 WHERE pg_catalog.octet_length(fsm) NOT BETWEEN 1 AND 1024
    OR pg_catalog.octet_length(step) NOT BETWEEN 1 AND 1024
    OR pg_catalog.octet_length(queue) NOT BETWEEN 1 AND 1024
    OR pg_catalog.octet_length(correlation_key) NOT BETWEEN 1 AND 1024
    OR pg_catalog.octet_length(concurrency_key) NOT BETWEEN 1 AND 1024
    OR pg_catalog.octet_length(rate_limit) NOT BETWEEN 1 AND 1024
    OR pg_catalog.octet_length(locked_by) NOT BETWEEN 1 AND 1024;

-- check: signal_shape
-- signal(): non-empty names and dedup keys of at most 1024 bytes
SELECT id, target_id, pg_catalog.octet_length(name), pg_catalog.octet_length(dedup_key)
  FROM gen_durable.signals
 WHERE pg_catalog.octet_length(name) NOT BETWEEN 1 AND 1024
    OR pg_catalog.octet_length(dedup_key) NOT BETWEEN 1 AND 1024;

-- check: history_only_of_history_instances
-- step history (0.6.0): no rows for an instance that said history => false,
-- rows at a step count the instance has reached, of a known kind
SELECT h.id, h.instance_id, h.steps, h.kind
  FROM gen_durable.step_history h
  JOIN gen_durable.instances i ON i.id = h.instance_id
 WHERE i.history IS FALSE OR h.steps > i.steps
    OR h.kind NOT IN ('next', 'continue', 'retry', 'await', 'spawn', 'done', 'fail');

-- check: queue_settings_shape
-- queue settings (0.6.0): names within limits
SELECT queue FROM gen_durable.queue_settings
 WHERE pg_catalog.octet_length(queue) NOT BETWEEN 1 AND 1024;

-- check(post): no_expired_claim_left
-- reaper (T14, D2): after a sweep no claim whose lease ran out before it started
-- remains, and no claim of a session that is gone
SELECT id, locked_by, lease_expires_at, claim_session
  FROM gen_durable.instances
 WHERE status = 'executing'
   AND (lease_expires_at < :'t0'::timestamptz
		OR (claim_session IS NOT NULL AND NOT gen_durable._session_alive(claim_session)));

-- check(post): no_passed_deadline_left
-- await timeouts (T9)
SELECT id, await_deadline
  FROM gen_durable.instances
 WHERE status = 'awaiting_signal' AND await_deadline < :'t0'::timestamptz;

-- check(post): gc_done
-- GC (T18, I-29): terminal rows of the live table older than the retention
-- are gone, except terminal children of a live parent (the archive goes a
-- segment at a time: gc_archive_done)
SELECT i.id, i.status, i.updated_at
  FROM ONLY gen_durable.instances i
 WHERE i.status IN ('done', 'failed', 'cancelled')
   AND i.updated_at < :'t0'::timestamptz - pg_catalog.make_interval(secs => :'retention'::float8)
   AND NOT EXISTS (SELECT 1 FROM gen_durable.instances p
					WHERE p.id = i.parent_id
					  AND p.status NOT IN ('done', 'failed', 'cancelled'));

-- check(post): gc_archive_done
-- the archive (contract §10.5): a segment closed longer ago than the
-- retention is empty after a round (no reader holds it when the checks run)
SELECT s.segment, s.closed_at, count(*)
  FROM gen_durable.finished_segments s
  JOIN gen_durable.instances i
	ON i.tableoid = ('gen_durable.finished_' || s.segment)::regclass
 WHERE s.closed_at < :'t0'::timestamptz - pg_catalog.make_interval(secs => :'retention'::float8)
 GROUP BY 1, 2;

-- check: archive_rows_in_open_or_closed_segments
-- a flush writes only the newest open segment, and a segment becomes empty
-- only by its TRUNCATE: no row is in a segment the rotation says is empty,
-- and every archived row is a plain done one
SELECT i.id, i.tableoid::regclass, i.status, s.opened_at
  FROM gen_durable.instances i
  JOIN gen_durable.finished_segments s
	ON i.tableoid = ('gen_durable.finished_' || s.segment)::regclass
 WHERE s.opened_at IS NULL OR i.status <> 'done' OR i.parent_id IS NOT NULL
	OR i.locked_by IS NOT NULL OR i.concurrency_shard IS NOT NULL;

-- check(post): gate_counters_exact
-- buckets.c reconcile: every gate shard is exactly its truth, available =
-- capacity - holders with capacity = GREATEST(share, holders) (a holder
-- without a slot counts on shard 0, one of a shard the gate no longer has on
-- shard mod S), keys nothing holds have no rows, and a key in use has all
-- its shards
WITH keys AS (
	SELECT DISTINCT key FROM gen_durable.buckets WHERE kind = 'conc'
	UNION
	SELECT DISTINCT i.concurrency_key FROM gen_durable.instances i
	  JOIN gen_durable.limits l ON l.kind = 'conc' AND l.name = i.concurrency_name
	 WHERE i.status = 'executing'
), held AS (
	SELECT i.concurrency_key AS key,
		   (CASE WHEN COALESCE(i.concurrency_shard, 0) >= p.shards
				 THEN COALESCE(i.concurrency_shard, 0) % p.shards
				 ELSE COALESCE(i.concurrency_shard, 0) END)::int2 AS shard,
		   pg_catalog.count(*) AS n
	  FROM gen_durable.instances i
	  JOIN gen_durable.limits p ON p.kind = 'conc' AND p.name = i.concurrency_name
	 WHERE i.status = 'executing'
	 GROUP BY 1, 2
), want AS (
	SELECT k.key, s.shard::int2 AS shard,
		   (c.capacity::int / c.shards
			+ CASE WHEN s.shard < c.capacity::int % c.shards THEN 1 ELSE 0 END)::float8 AS cap
	  FROM keys k
	  JOIN gen_durable.limits c ON c.kind = 'conc' AND c.name = pg_catalog.split_part(k.key, ':', 1)
	 CROSS JOIN LATERAL pg_catalog.generate_series(0, c.shards - 1) AS s(shard)
	 WHERE EXISTS (SELECT 1 FROM held h WHERE h.key = k.key)
), truth AS (
	SELECT w.key, w.shard, GREATEST(w.cap, COALESCE(h.n, 0)) AS capacity,
		   GREATEST(w.cap, COALESCE(h.n, 0)) - COALESCE(h.n, 0) AS available
	  FROM want w LEFT JOIN held h ON h.key = w.key AND h.shard = w.shard
), conc AS (
	SELECT b.key, b.shard, b.capacity, b.available
	  FROM gen_durable.buckets b
	 WHERE b.kind = 'conc'
	   AND EXISTS (SELECT 1 FROM gen_durable.limits c
				   WHERE c.kind = 'conc' AND c.name = pg_catalog.split_part(b.key, ':', 1))
)
SELECT COALESCE(t.key, c.key) AS key, COALESCE(t.shard, c.shard) AS shard,
	   t.capacity AS want_capacity, t.available AS want_available,
	   c.capacity AS capacity, c.available AS available
  FROM truth t FULL JOIN conc c ON c.key = t.key AND c.shard = t.shard
 WHERE t.key IS NULL OR c.key IS NULL
    OR t.capacity <> c.capacity OR t.available <> c.available;

-- check(post): orphan_gate_buckets_held
-- buckets.c: the shards a gate no longer has go once nothing holds them; the
-- buckets of a dropped gate go once no executing row of the key counts on
-- them (as the reconcile counts: a row without a slot on shard 0)
SELECT b.key, b.shard
  FROM gen_durable.buckets b
  LEFT JOIN gen_durable.limits c
		 ON c.kind = 'conc' AND c.name = pg_catalog.split_part(b.key, ':', 1)
 WHERE b.kind = 'conc'
   AND ((c.name IS NOT NULL AND b.shard >= c.shards)
		OR (c.name IS NULL
			AND NOT EXISTS (SELECT 1 FROM gen_durable.instances i
							 WHERE i.status = 'executing' AND i.concurrency_key = b.key
							   AND COALESCE(i.concurrency_shard, 0) = b.shard)));

-- check(post): rate_full_keys_swept
-- buckets.c rate GC: a key whose shards have all refilled to full is deleted
-- (rate 0 keys are kept)
SELECT b.key
  FROM gen_durable.buckets b
  JOIN gen_durable.limits c ON c.kind = 'rate' AND c.name = pg_catalog.split_part(b.key, ':', 1)
 WHERE b.kind = 'rate'
 GROUP BY b.key, c.rate, c.capacity
HAVING c.rate > 0
   AND EXTRACT(epoch FROM :'t0'::timestamptz - pg_catalog.max(b.last_refill)) * c.rate
	   > c.capacity * 1.000001 + 1e-6;
