-- debounce.sql: insert(on_conflict => 'replace') (issue 9, debounce): a
-- runnable instance occupying the correlation key takes the new state and
-- due time, and its id is returned; an occupant in any other status is
-- left alone (NULL); with no occupant the instance is created.
CREATE EXTENSION gen_durable;
\set VERBOSITY terse

-- the instances of a correlation key: state, status and how far off their
-- due time is (rounded to minutes)
CREATE FUNCTION pg_temp.key_rows(k text) RETURNS TABLE (
	id bigint, status gen_durable.status, state jsonb, due_in_min double precision)
LANGUAGE sql AS $$
	SELECT id, status, state, round(extract(epoch FROM eligible_at - now()) / 60)
	  FROM gen_durable.instances WHERE correlation_key = k ORDER BY id
$$;

-- created when nothing occupies the key
SELECT gen_durable.insert('mail', '{"v": 1}', queue => 'dq', correlation_key => 'k',
						  delay => '1 hour', on_conflict => 'replace') AS a \gset
SELECT id = :a AS is_a, status, state, due_in_min FROM pg_temp.key_rows('k');

-- a scheduled occupant: replaced (state and due time), its id returned
SELECT gen_durable.insert('mail', '{"v": 2}', queue => 'dq', correlation_key => 'k',
						  delay => '10 minutes', on_conflict => 'replace') = :a AS replaced_a;
SELECT id = :a AS is_a, status, state, due_in_min FROM pg_temp.key_rows('k');
-- only state and due time change: the occupant keeps its machine, step and queue
SELECT gen_durable.insert('other', '{"v": 3}', 'elsewhere', queue => 'dq2', correlation_key => 'k',
						  on_conflict => 'replace') = :a AS replaced_a;
SELECT i.fsm, i.step, i.queue, i.state, k.due_in_min
  FROM gen_durable.instances i, pg_temp.key_rows('k') k WHERE i.id = k.id;
SELECT queue, due, scheduled FROM gen_durable.queues WHERE queue LIKE 'dq%' ORDER BY queue;

-- the default (nothing) leaves it alone and returns NULL
SELECT gen_durable.insert('mail', '{"v": 4}', queue => 'dq', correlation_key => 'k') IS NULL AS dup;
SELECT gen_durable.insert('mail', '{"v": 4}', queue => 'dq', correlation_key => 'k',
						  on_conflict => 'nothing') IS NULL AS dup;
SELECT state FROM pg_temp.key_rows('k');

-- an executing occupant is not replaced: its step already read the state
SELECT count(*) AS picked FROM gen_durable.pick('dq', 'w', 10);
SELECT gen_durable.insert('mail', '{"v": 5}', queue => 'dq', correlation_key => 'k',
						  on_conflict => 'replace') IS NULL AS not_replaced;
SELECT status, state FROM pg_temp.key_rows('k');

-- nor a parked one
SELECT f.applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :a, 'worker', 'w', 'kind', 'await', 'names', '["go"]'::jsonb, 'step', 'later'))) f;
SELECT gen_durable.insert('mail', '{"v": 6}', queue => 'dq', correlation_key => 'k',
						  on_conflict => 'replace') IS NULL AS not_replaced;
SELECT status, state FROM pg_temp.key_rows('k');

-- once the occupant has ended, the key is free: a new instance
SELECT gen_durable.cancel(:a);
SELECT gen_durable.insert('mail', '{"v": 7}', queue => 'dq', correlation_key => 'k',
						  on_conflict => 'replace') <> :a AS created_new;
SELECT id = :a AS is_a, status, state FROM pg_temp.key_rows('k');

-- a scope that keeps the key after the end: a done occupant is not replaced
SELECT gen_durable.insert('mail', '{"v": 1}', queue => 'dk', correlation_key => 'kept',
						  correlation_scope => '{runnable,executing,awaiting_signal,awaiting_children,done}')
	   AS kept \gset
SELECT gen_durable.insert('mail', '{"v": 2}', queue => 'dk', correlation_key => 'kept',
						  on_conflict => 'replace') = :kept AS replaced_runnable;
SELECT count(*) AS picked FROM gen_durable.pick('dk', 'w', 10);
SELECT f.applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
		 'id', :kept, 'worker', 'w', 'kind', 'done'))) f;
SELECT gen_durable.insert('mail', '{"v": 3}', queue => 'dk', correlation_key => 'kept',
						  on_conflict => 'replace') IS NULL AS not_replaced_done;
SELECT status, state FROM pg_temp.key_rows('kept');

-- bad input
SELECT gen_durable.insert('mail', correlation_key => 'k', on_conflict => 'update');
SELECT gen_durable.insert('mail', correlation_key => 'k', on_conflict => NULL);
SELECT gen_durable.insert('mail', on_conflict => 'replace');
SELECT gen_durable.insert('mail', correlation_key => 'k', correlation_scope => '{}',
						  on_conflict => 'replace');

DROP FUNCTION pg_temp.key_rows(text);
DROP EXTENSION gen_durable;
