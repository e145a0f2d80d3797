-- at-0.4.0.sql: at 0.4.0.  First what the releases before left, with the
-- API of 0.4.0; then instances that use what 0.4.0 added (queue v4): rate
-- limits, concurrency gates, their buckets, admit.

\if :since_010
-- 0.1.0 stored rate limits without enforcing them: v1-rated now waits on
-- a limit nobody configured, and the queues view counts it (D6) until
-- the limit is set
SELECT queue, due, unknown_rate_limit FROM gen_durable.queues WHERE queue = 'v1';
SELECT gen_durable.set_rate_limit('api', 10, '1 second');
SELECT queue, due, unknown_rate_limit FROM gen_durable.queues WHERE queue = 'v1';
\endif

\if :since_030
-- 0.3.0's families are as they were
SELECT p.correlation_key AS parent, p.status, p.spawn_round, p.children_pending,
	   p.children_total,
	   (SELECT string_agg(c.correlation_key || ':' || c.status, ', ' ORDER BY c.id)
		  FROM gen_durable.instances c
		 WHERE c.parent_id = p.id AND c.parent_round = p.spawn_round) AS children
  FROM gen_durable.instances p WHERE p.queue = 'v3' AND p.fsm = 'parent' ORDER BY 1;
\endif

-- 0.4.0's features: a gate of 2 in 2 shards, a rate limit of 4 per hour
-- (burst 4: two instances of weight 2), a limit set and dropped again
SELECT gen_durable.set_concurrency_limit('v4gate', 2, shards => 2);
SELECT gen_durable.set_rate_limit('v4rate', 4, '1 hour', burst => 4);
SELECT gen_durable.set_concurrency_limit('v4tmp', 1);
SELECT gen_durable.drop_limit('conc', 'v4tmp') AS dropped,
	   gen_durable.drop_limit('conc', 'v4tmp') AS dropped_again;
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	'[{"fsm": "job", "queue": "v4", "correlation_key": "v4-gated-a", "concurrency_key": "v4gate:x"},
	  {"fsm": "job", "queue": "v4", "correlation_key": "v4-gated-b", "concurrency_key": "v4gate:x"},
	  {"fsm": "job", "queue": "v4", "correlation_key": "v4-gated-c", "concurrency_key": "v4gate:x"},
	  {"fsm": "job", "queue": "v4", "correlation_key": "v4-rated-a", "rate_limit": "v4rate:p", "weight": 2},
	  {"fsm": "job", "queue": "v4", "correlation_key": "v4-rated-b", "rate_limit": "v4rate:p", "weight": 2},
	  {"fsm": "job", "queue": "v4", "correlation_key": "v4-rated-c", "rate_limit": "v4rate:p", "weight": 2}]')
 WHERE created;
-- w4's claims, admitted as the 0.4.0 pick admitted them (before another
-- claim of the key: unadmitted, a claim of a key holds the K=1 arbiter):
-- the first two of the gated key take both slots, the first rated one two
-- tokens
SELECT pg_temp.old_claim('{v4-gated-a}', 'w4') AS claimed;
SELECT admitted FROM gen_durable.admit(pg_temp.ids('{v4-gated-a}'), 'w4');
SELECT pg_temp.old_claim('{v4-gated-b}', 'w4') AS claimed;
SELECT admitted FROM gen_durable.admit(pg_temp.ids('{v4-gated-b}'), 'w4');
SELECT pg_temp.old_claim('{v4-rated-a}', 'w4') AS claimed;
SELECT admitted FROM gen_durable.admit(pg_temp.ids('{v4-rated-a}'), 'w4');
SELECT correlation_key AS key, status, concurrency_key, concurrency_shard IS NOT NULL AS holds_slot,
	   rate_limit, weight
  FROM gen_durable.instances WHERE queue = 'v4' ORDER BY 1;
SELECT kind, name, rate, capacity, shards FROM gen_durable.limits ORDER BY 1, 2;
SELECT kind, key, shard, capacity, floor(available) AS available FROM gen_durable.buckets
 ORDER BY 1, 2, 3;

-- still waiting for a newer schema: pick, flush, run_maintenance
SELECT pg_temp.err($$SELECT * FROM gen_durable.pick('v4', 'w4')$$) AS pick,
	   pg_temp.err(format($$SELECT * FROM gen_durable.flush('[{"id": %s, "worker": "w4", "kind": "done"}]')$$,
						  pg_temp.id('v4-gated-a'))) AS flush,
	   pg_temp.err($$SELECT gen_durable.run_maintenance()$$) AS run_maintenance;
