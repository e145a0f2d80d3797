-- at-0.8.0.sql: at 0.8.0, the end of every path.  The claim 0.7.0 left in
-- flight commits its outcome after the update, as it would have before;
-- then what 0.8.0 added: a plain instance is claimed in memory (its row
-- stays runnable, the claims view shows the claim), and its outcome
-- commits.  Nothing may be left stuck.

SELECT i.correlation_key AS key, f.applied
  FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w7', 'kind', 'done', 'claim', claim))
	  FROM gen_durable.instances WHERE queue = 'v7' AND locked_by = 'w7')) f
  JOIN gen_durable.instances i ON i.id = f.id;

SET gen_durable.claim_in_memory = on;
SELECT gen_durable.insert('job', queue => 'v8') AS v8 \gset
SELECT claim AS v8_claim FROM gen_durable.pick('v8', 'w8') \gset
SELECT i.status, c.in_memory, c.worker, c.claim = :v8_claim AS same_claim
  FROM gen_durable.instances i JOIN gen_durable.claims c USING (id) WHERE i.id = :v8;
SELECT f.applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :v8, 'worker', 'w8', 'kind', 'done', 'claim', :v8_claim))) f;
SELECT count(*) AS claims_left FROM gen_durable.claims;
RESET gen_durable.claim_in_memory;

-- nothing is stuck: every instance has ended but the one waiting for
-- its rate limit's tokens
SELECT queue, correlation_key AS key, status, step, attempt, steps, error
  FROM gen_durable.instances
 WHERE status NOT IN ('done', 'failed', 'cancelled') OR locked_by IS NOT NULL
 ORDER BY 1, 2;
