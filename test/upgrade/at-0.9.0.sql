-- at-0.9.0.sql: at 0.9.0, the end of every path.  The two claims 0.8.0
-- left in flight (one in memory, one on the row) commit their outcomes
-- after the update, and, being plain jobs that end done, move to the
-- archive: still in gen_durable.instances, now in the open segment
-- finished_0, with their results.  The instance 0.8.0 finished stays
-- where it was.  Then the archive's rotation runs, and nothing may be
-- left stuck.

SET gen_durable.archive_finished = on;
SELECT c.worker, f.applied
  FROM gen_durable.claims c,
	   LATERAL gen_durable.flush(jsonb_build_array(jsonb_build_object(
		   'id', c.id, 'worker', c.worker, 'kind', 'done', 'claim', c.claim,
		   'result', jsonb_build_object('by', c.worker)))) f
 WHERE c.queue = 'v8' ORDER BY c.worker;
SELECT tableoid::regclass AS segment, status, state, result
  FROM gen_durable.instances WHERE queue = 'v8' ORDER BY id;
SELECT count(*) AS claims_left FROM gen_durable.claims;
RESET gen_durable.archive_finished;

-- the sweeps run on the upgraded schema; the open segment is 0, young
SELECT gen_durable.run_maintenance() - 'gate_shards_repaired' AS maintenance;
SELECT segment, opened_at IS NOT NULL AS opened, closed_at IS NOT NULL AS closed
  FROM gen_durable.finished_segments WHERE opened_at IS NOT NULL ORDER BY segment;

-- nothing is stuck: every instance has ended but the one waiting for
-- its rate limit's tokens
SELECT queue, correlation_key AS key, status, step, attempt, steps, error
  FROM gen_durable.instances
 WHERE status NOT IN ('done', 'failed', 'cancelled') OR locked_by IS NOT NULL
 ORDER BY 1, 2;
