-- insert.sql: gen_durable.insert and gen_durable.insert_many
-- (design §3 Producers; contract D4, D5, D6, D18, D19, §3)
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

-- the columns an insert writes, without timestamps
CREATE FUNCTION pg_temp.row_of(bigint) RETURNS TABLE (
	fsm text, fsm_version int, step text, state jsonb, status gen_durable.status,
	attempt int, max_attempts int, steps bigint, max_steps int, queue text,
	priority smallint, correlation_key text, correlation_scope gen_durable.status[],
	correlation_guard text, concurrency_key text, concurrency_name text,
	rate_limit text, weight float8, metadata jsonb, result jsonb, error jsonb,
	claimed bool, awaits text[], parent_id bigint, children_pending int)
LANGUAGE sql AS $$
	SELECT fsm, fsm_version, step, state, status, attempt, max_attempts, steps,
		   max_steps, queue, priority, correlation_key, correlation_scope,
		   correlation_guard, concurrency_key, concurrency_name, rate_limit,
		   weight, metadata, result, error,
		   locked_by IS NOT NULL OR lease_expires_at IS NOT NULL, awaits,
		   parent_id, children_pending
	  FROM gen_durable.instances WHERE id = $1
$$;

-- end an instance with a done or fail outcome: claim its queue, flush the
-- outcome for it and hand every other claim back untouched
CREATE FUNCTION pg_temp.finish(target bigint, kind text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	answer text;
BEGIN
	PERFORM gen_durable.pick((SELECT queue FROM gen_durable.instances WHERE id = target),
							 'finisher', 10000);
	SELECT f.applied INTO answer
	  FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
			'id', target, 'worker', 'finisher', 'kind', kind))) f;
	PERFORM gen_durable.release('finisher');
	RETURN answer;
END
$$;

------------------------------------------------------------------------
-- insert_many writes its rows in correlation_key order (I-21): on the
-- empty table the physical order shows it (keyless rows last)
------------------------------------------------------------------------
SELECT ord, created FROM gen_durable.insert_many('[
	{"fsm": "o", "queue": "order_q", "correlation_key": "m"},
	{"fsm": "o", "queue": "order_q"},
	{"fsm": "o", "queue": "order_q", "correlation_key": "c"},
	{"fsm": "o", "queue": "order_q", "correlation_key": "x"}
]');
SELECT correlation_key FROM gen_durable.instances WHERE queue = 'order_q' ORDER BY ctid;

------------------------------------------------------------------------
-- insert with every default
------------------------------------------------------------------------
SELECT gen_durable.insert('mail') AS id1 \gset
SELECT * FROM pg_temp.row_of(:id1);
-- eligible now, inserted_at = updated_at, not in the future
SELECT eligible_at <= now() + interval '1 s' AND eligible_at >= now() - interval '1 min'
	   AS eligible_now, inserted_at = updated_at AS same_instants,
	   awaits IS NULL AND await_deadline IS NULL AND presented IS NULL
	   AND NOT timed_out AND concurrency_shard IS NULL AS clean
  FROM gen_durable.instances WHERE id = :id1;

------------------------------------------------------------------------
-- insert with every argument given
------------------------------------------------------------------------
SELECT gen_durable.insert(
	fsm => 'order',
	state => '{"n": 1, "items": [1, 2]}',
	step => 'charge',
	queue => 'payments',
	priority => -5,
	run_at => NULL,
	delay => interval '10 minutes',
	correlation_key => 'order-1',
	correlation_scope => '{runnable,executing,awaiting_signal,awaiting_children,done}',
	concurrency_key => 'customer:42',
	rate_limit => 'stripe:eu',
	weight => 2.5,
	max_attempts => 3,
	max_steps => 7,
	metadata => '{"tenant": 42}',
	fsm_version => 3) AS id2 \gset
SELECT * FROM pg_temp.row_of(:id2);
SELECT eligible_at > now() + interval '9 minutes'
	   AND eligible_at < now() + interval '11 minutes' AS delayed_10_min
  FROM gen_durable.instances WHERE id = :id2;

-- run_at in the future and in the past (a past instant is allowed and due)
SELECT gen_durable.insert('t', run_at => now() + interval '1 hour') AS id_future \gset
SELECT gen_durable.insert('t', run_at => '2000-01-01 00:00:00+00') AS id_past \gset
SELECT id = :id_future AS is_future, eligible_at > now() AS in_future,
	   eligible_at = '2000-01-01 00:00:00+00' AS in_2000
  FROM gen_durable.instances WHERE id IN (:id_future, :id_past) ORDER BY id;
-- explicit NULL for the optional arguments means "none"
SELECT gen_durable.insert('t', correlation_key => NULL, concurrency_key => NULL,
						  rate_limit => NULL, max_steps => NULL, metadata => NULL,
						  run_at => NULL, delay => NULL) IS NOT NULL AS inserted;

------------------------------------------------------------------------
-- correlation keys: default scope = the four live statuses (D4, D5)
------------------------------------------------------------------------
SELECT gen_durable.insert('k', correlation_key => 'user-1') AS k1 \gset
SELECT correlation_scope, correlation_guard FROM gen_durable.instances WHERE id = :k1;
-- a live duplicate returns NULL and writes nothing
SELECT count(*) AS before FROM gen_durable.instances \gset
SELECT gen_durable.insert('k', correlation_key => 'user-1') IS NULL AS duplicate_is_null;
SELECT gen_durable.insert('other', state => '{"x": 1}', queue => 'q2',
						  correlation_key => 'user-1') IS NULL AS duplicate_is_null;
SELECT count(*) = :before AS nothing_written FROM gen_durable.instances;
-- while executing the key stays occupied
SELECT count(*) FROM gen_durable.pick('default', 'w', 10000);
SELECT status FROM gen_durable.instances WHERE id = :k1;
SELECT gen_durable.insert('k', correlation_key => 'user-1') IS NULL AS occupied_while_executing;
SELECT gen_durable.release('w') > 0 AS released;
-- a terminal occupant frees the key: done, failed and cancelled
SELECT pg_temp.finish(:k1, 'done');
SELECT status, correlation_guard FROM gen_durable.instances WHERE id = :k1;
SELECT gen_durable.insert('k', correlation_key => 'user-1') AS k2 \gset
SELECT :k2 > :k1 AS new_instance;
SELECT pg_temp.finish(:k2, 'fail');
SELECT gen_durable.insert('k', correlation_key => 'user-1') AS k3 \gset
SELECT :k3 > :k2 AS new_instance;
SELECT gen_durable.cancel(:k3);
SELECT gen_durable.insert('k', correlation_key => 'user-1') > :k3 AS new_instance;
-- keys are independent of fsm and queue: only one live per key
SELECT count(*) AS live_user_1 FROM gen_durable.instances
 WHERE correlation_key = 'user-1' AND correlation_guard IS NOT NULL;

------------------------------------------------------------------------
-- correlation_scope '{}': a label only, neither unique nor addressable
------------------------------------------------------------------------
SELECT gen_durable.insert('l', correlation_key => 'label', correlation_scope => '{}') AS l1 \gset
SELECT gen_durable.insert('l', correlation_key => 'label', correlation_scope => '{}') AS l2 \gset
SELECT :l1 <> :l2 AS both_created;
SELECT correlation_key, correlation_scope, correlation_guard
  FROM gen_durable.instances WHERE id IN (:l1, :l2) ORDER BY id;
-- a default-scope instance may take the same key beside labels, then it is unique
SELECT gen_durable.insert('l', correlation_key => 'label') IS NOT NULL AS created;
SELECT gen_durable.insert('l', correlation_key => 'label') IS NULL AS now_duplicate;
SELECT gen_durable.insert('l', correlation_key => 'label', correlation_scope => '{}') IS NOT NULL
	   AS label_still_free;

------------------------------------------------------------------------
-- correlation_scope with terminal statuses reserves the key after the end
------------------------------------------------------------------------
SELECT gen_durable.insert('r', correlation_key => 'once',
	correlation_scope => '{runnable,executing,awaiting_signal,awaiting_children,done,failed}') AS r1 \gset
SELECT pg_temp.finish(:r1, 'done');
SELECT status, correlation_guard FROM gen_durable.instances WHERE id = :r1;
SELECT gen_durable.insert('r', correlation_key => 'once') IS NULL AS reserved_after_done;
-- ... the reservation covers only the listed terminal statuses
SELECT gen_durable.insert('r', correlation_key => 'once-c',
	correlation_scope => '{runnable,executing,awaiting_signal,awaiting_children,done}') AS r2 \gset
SELECT gen_durable.cancel(:r2);
SELECT correlation_guard IS NULL AS freed_by_cancel FROM gen_durable.instances WHERE id = :r2;
SELECT gen_durable.insert('r', correlation_key => 'once-c') IS NOT NULL AS reusable_after_cancel;
-- scope order and repetitions do not matter
SELECT gen_durable.insert('r', correlation_key => 'order-scope',
	correlation_scope => '{cancelled,awaiting_children,awaiting_signal,executing,runnable,runnable}')
	AS r3 \gset
SELECT correlation_scope FROM gen_durable.instances WHERE id = :r3;

-- scopes that do not contain every live status are refused (D5, A-2)
SELECT gen_durable.insert('r', correlation_key => 'bad', correlation_scope => '{runnable}');
SELECT gen_durable.insert('r', correlation_key => 'bad', correlation_scope => '{done}');
SELECT gen_durable.insert('r', correlation_key => 'bad',
	correlation_scope => '{runnable,executing,awaiting_signal,done}');
SELECT gen_durable.insert('r', correlation_key => 'bad',
	correlation_scope => ARRAY['runnable', NULL]::gen_durable.status[]);
SELECT count(*) AS nothing_written FROM gen_durable.instances WHERE correlation_key = 'bad';

------------------------------------------------------------------------
-- insert errors: every argument check, nothing written
------------------------------------------------------------------------
SELECT count(*) AS before FROM gen_durable.instances \gset
SELECT gen_durable.insert(NULL);
SELECT gen_durable.insert('');
SELECT gen_durable.insert('f', step => NULL);
SELECT gen_durable.insert('f', step => '');
SELECT gen_durable.insert('f', queue => NULL);
SELECT gen_durable.insert('f', queue => '');
SELECT gen_durable.insert('f', state => NULL);
SELECT gen_durable.insert('f', state => '[]');
SELECT gen_durable.insert('f', state => '"text"');
SELECT gen_durable.insert('f', state => '1');
SELECT gen_durable.insert('f', state => 'null');
SELECT gen_durable.insert('f', metadata => '[1]');
SELECT gen_durable.insert('f', metadata => '"m"');
SELECT gen_durable.insert('f', weight => 0);
SELECT gen_durable.insert('f', weight => -1);
SELECT gen_durable.insert('f', weight => 'NaN');
SELECT gen_durable.insert('f', weight => 'Infinity');
SELECT gen_durable.insert('f', weight => NULL);
SELECT gen_durable.insert('f', max_attempts => 0);
SELECT gen_durable.insert('f', max_attempts => NULL);
SELECT gen_durable.insert('f', max_steps => 0);
SELECT gen_durable.insert('f', max_steps => -3);
SELECT gen_durable.insert('f', priority => 32768);
SELECT gen_durable.insert('f', priority => -32769);
SELECT gen_durable.insert('f', priority => NULL);
SELECT gen_durable.insert('f', fsm_version => NULL);
SELECT gen_durable.insert('f', run_at => now(), delay => interval '1 s');
-- a delay is zero or more, as in an insert spec (args.c: "waits, delays")
SELECT gen_durable.insert('f', delay => interval '-1 hour');
SELECT gen_durable.insert('f', correlation_key => '');
SELECT gen_durable.insert('f', concurrency_key => '');
SELECT gen_durable.insert('f', rate_limit => '');
SELECT gen_durable.insert(repeat('x', 1025));
-- the boundaries themselves are accepted
SELECT gen_durable.insert('f', delay => interval '0 s') IS NOT NULL AS ok;
SELECT gen_durable.insert('f', priority => 32767, weight => 1e-9, max_attempts => 1,
						  max_steps => 1, state => '{}', metadata => '{}') IS NOT NULL AS ok;
SELECT gen_durable.insert(repeat('x', 1024), priority => -32768) IS NOT NULL AS ok;
SELECT count(*) - :before AS written FROM gen_durable.instances;

------------------------------------------------------------------------
-- insert_many: ord, id, created in input order; defaults; every key
------------------------------------------------------------------------
SELECT max(id) AS base FROM gen_durable.instances \gset
SELECT ord, id > :base AS new_id, created FROM gen_durable.insert_many('[
	{"fsm": "a"},
	{"fsm": "b", "state": {"v": 2}, "step": "s", "queue": "batchq", "priority": 3,
	 "delay": 60, "correlation_key": "m-1",
	 "correlation_scope": ["runnable", "executing", "awaiting_signal", "awaiting_children", "failed"],
	 "concurrency_key": "c:1", "rate_limit": "r", "weight": 0.5, "max_attempts": 2,
	 "max_steps": 9, "metadata": {"t": 1}, "fsm_version": 2},
	{"fsm": "c", "run_at": "2001-02-03 04:05:06+00", "delay": null, "step": null,
	 "metadata": null, "correlation_key": null, "priority": null}
]');
-- the rows written for each spec
CREATE TEMP TABLE batch AS
SELECT i.id, i.fsm FROM gen_durable.instances i WHERE i.id > :base;
SELECT b.fsm, r.* FROM batch b, pg_temp.row_of(b.id) r ORDER BY b.fsm;
SELECT fsm, eligible_at > now() + interval '50 s' AS delayed,
	   eligible_at = '2001-02-03 04:05:06+00' AS at_run_at
  FROM gen_durable.instances WHERE id > :base ORDER BY fsm;
-- durations accept seconds (fractions) and interval strings
SELECT ord, created FROM gen_durable.insert_many(
	'[{"fsm": "d", "delay": 0.5}, {"fsm": "d", "delay": "2 hours"}, {"fsm": "d", "delay": "PT1M"}]');
SELECT step, eligible_at > now() + interval '1 hour' AS two_hours,
	   eligible_at > now() + interval '30 s' AS later
  FROM gen_durable.instances WHERE fsm = 'd' ORDER BY id;

-- JSON null for a key means its default
SELECT ord, created FROM gen_durable.insert_many(
	'[{"fsm": "nulls", "state": null, "weight": null, "step": null, "queue": null, "priority": null}]');
SELECT state, weight, step, queue, priority FROM gen_durable.instances WHERE fsm = 'nulls';

-- an empty batch returns nothing and writes nothing
SELECT count(*) FROM gen_durable.insert_many('[]');

------------------------------------------------------------------------
-- insert_many duplicates: inside the batch and against existing rows (D4)
------------------------------------------------------------------------
SELECT gen_durable.insert('x', correlation_key => 'dup-existing') AS existing \gset
SELECT max(id) AS base FROM gen_durable.instances \gset
CREATE TEMP TABLE dups AS
SELECT * FROM gen_durable.insert_many('[
	{"fsm": "x", "correlation_key": "dup-batch"},
	{"fsm": "x", "correlation_key": "dup-existing"},
	{"fsm": "x", "correlation_key": "dup-batch", "state": {"second": true}},
	{"fsm": "x"},
	{"fsm": "x", "correlation_key": "dup-label", "correlation_scope": []},
	{"fsm": "x", "correlation_key": "dup-label", "correlation_scope": []},
	{"fsm": "x", "correlation_key": "a-first"}
]');
SELECT ord, created,
	   CASE WHEN id = :existing THEN 'existing'
			WHEN id > :base THEN 'new' ELSE 'other' END AS which
  FROM dups WHERE ord NOT IN (0, 2) ORDER BY ord;
-- of the two specs with the same key in the batch exactly one is created
-- (the first in input order, A-21) and both report the id that won the key
SELECT count(*) FILTER (WHERE created) AS created, count(DISTINCT id) AS ids,
	   min(id) > :base AS new_id
  FROM dups WHERE ord IN (0, 2);
-- exactly one row per unique key; labels are not unique
SELECT correlation_key, count(*)
  FROM gen_durable.instances
 WHERE correlation_key IN ('dup-batch', 'dup-existing', 'dup-label', 'a-first')
 GROUP BY correlation_key ORDER BY correlation_key;
SELECT i.id = d.id AS winner_row_is_reported
  FROM gen_durable.instances i, dups d
 WHERE i.correlation_key = 'dup-batch' AND d.ord = 2;
-- every created row exists with the id reported for it
SELECT bool_and(i.id IS NOT NULL) AS created_ids_exist
  FROM dups d LEFT JOIN gen_durable.instances i ON i.id = d.id WHERE d.created;
SELECT count(*) AS created_rows FROM gen_durable.instances WHERE id > :base;
-- a key reserved by a terminal occupant (scope with done) is a duplicate too
SELECT ord, id = :r1 AS occupant_id, created
  FROM gen_durable.insert_many('[{"fsm": "r", "correlation_key": "once"}]');

------------------------------------------------------------------------
-- insert_many errors: the whole batch is refused, nothing written
------------------------------------------------------------------------
SELECT count(*) AS before FROM gen_durable.instances \gset
SELECT * FROM gen_durable.insert_many(NULL);
SELECT * FROM gen_durable.insert_many('{"fsm": "a"}');
SELECT * FROM gen_durable.insert_many('"a"');
SELECT * FROM gen_durable.insert_many(
	(SELECT jsonb_agg(jsonb_build_object('fsm', 'a')) FROM generate_series(1, 10001)));
SELECT * FROM gen_durable.insert_many('[{"fsm": "ok"}, 1]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "ok"}, [{"fsm": "a"}]]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "ok"}, {"fsm": "a", "sate": {}}]');
SELECT * FROM gen_durable.insert_many('[{"state": {}}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": null}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": ""}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": 7}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "step": ""}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "step": 1}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "queue": ""}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "state": [1]}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "state": "s"}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "metadata": [1]}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "priority": 40000}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "priority": 1.5}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "priority": "1"}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "weight": 0}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "weight": "2"}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "max_attempts": 0}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "max_steps": 0}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "fsm_version": "1"}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "delay": -1}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "delay": "-1 hour"}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "delay": "soon"}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "delay": true}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "run_at": 5}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "run_at": "2030-01-01", "delay": 5}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "correlation_key": ""}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "concurrency_key": 3}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "rate_limit": ""}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "correlation_key": "k", "correlation_scope": "runnable"}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "correlation_key": "k", "correlation_scope": ["runnable"]}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "correlation_key": "k", "correlation_scope": ["running"]}]');
SELECT * FROM gen_durable.insert_many('[{"fsm": "a", "correlation_key": "k", "correlation_scope": [null]}]');
SELECT count(*) = :before AS nothing_written FROM gen_durable.instances;

DROP FUNCTION pg_temp.row_of(bigint);
DROP EXTENSION gen_durable;
