-- at-0.8.0.sql: at 0.8.0.  The claim 0.7.0 left in flight commits its
-- outcome after the update, as it would have before; then what 0.8.0
-- added: a plain instance is claimed in memory (its row stays runnable,
-- the claims view shows the claim), and its outcome commits.  It leaves
-- two claims in flight for 0.9.0: one in memory, one on the row.

\if :since_070
SELECT i.correlation_key AS key, f.applied
  FROM gen_durable.flush((
	SELECT jsonb_agg(jsonb_build_object('id', id, 'worker', 'w7', 'kind', 'done', 'claim', claim))
	  FROM gen_durable.instances WHERE queue = 'v7' AND locked_by = 'w7')) f
  JOIN gen_durable.instances i ON i.id = f.id;
\endif

SET gen_durable.claim_in_memory = on;
SELECT gen_durable.insert('job', queue => 'v8') AS v8 \gset
SELECT claim AS v8_claim FROM gen_durable.pick('v8', 'w8') \gset
SELECT i.status, c.in_memory, c.worker, c.claim = :v8_claim AS same_claim
  FROM gen_durable.instances i JOIN gen_durable.claims c USING (id) WHERE i.id = :v8;
SELECT f.applied FROM gen_durable.flush(jsonb_build_array(jsonb_build_object(
	'id', :v8, 'worker', 'w8', 'kind', 'done', 'claim', :v8_claim))) f;
SELECT count(*) AS claims_left FROM gen_durable.claims;
RESET gen_durable.claim_in_memory;


-- in flight across the update: a claim in memory and one on the row
SET gen_durable.claim_in_memory = on;
SELECT gen_durable.insert('job', queue => 'v8', state => '{"n": 1}') AS v8_mem \gset
SELECT count(*) AS picked FROM gen_durable.pick('v8', 'w8m');
SET gen_durable.claim_in_memory = off;
SELECT gen_durable.insert('job', queue => 'v8', state => '{"n": 2}') AS v8_row \gset
SELECT count(*) AS picked FROM gen_durable.pick('v8', 'w8r');
RESET gen_durable.claim_in_memory;
SELECT id = :v8_mem AS mem, in_memory, worker FROM gen_durable.claims
 WHERE queue = 'v8' ORDER BY id;
