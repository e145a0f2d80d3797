-- at-0.3.0.sql: at 0.3.0.  First what 0.1.0 and 0.2.0 left, with the API
-- of 0.3.0; then instances that use what 0.3.0 added (queue v3): fan-out
-- with both join policies and rounds, cancellation of a tree, find,
-- insert_many, fail and retry.

\if :since_010
-- 0.1.0's instances: find by metadata, cancel one, fail one, run a failed
-- one again
SELECT correlation_key AS found FROM gen_durable.find('{"made": "0.1.0"}');
SELECT gen_durable.cancel(pg_temp.id('v1-later'), 'not needed') AS cancelled;
SELECT gen_durable.fail(pg_temp.id('v1-spare'), 'spare') AS failed;
SELECT gen_durable.retry(pg_temp.id('v1-failed')) AS retried;
SELECT correlation_key AS key, status, attempt, error
  FROM gen_durable.instances
 WHERE correlation_key IN ('v1-later', 'v1-spare', 'v1-failed') ORDER BY 1;
\endif

\if :since_020
-- 0.2.0's: cancelling a claimed instance takes the claim from its worker
-- (D14), whose heartbeat then no longer holds it
SELECT gen_durable.cancel(pg_temp.id('v2-claimed')) AS cancelled;
SELECT gen_durable.heartbeat('w2', pg_temp.ids('{v2-claimed,v2-dead}'))
	   = pg_temp.ids('{v2-dead}') AS only_dead_held;
\endif

-- 0.3.0's features.  v3-parent (join all) spawned one child in round 1,
-- which is done, and three in round 2: one done, one claimed by w3, one
-- runnable.  v3-fe (join first_error) has two runnable children.  v3-tree
-- has one child and is cancelled with it.  (The spawns, claims and
-- outcomes are written as the 0.3.0 flush wrote them.)
SELECT count(*) AS inserted FROM gen_durable.insert_many(
	'[{"fsm": "parent", "queue": "v3", "correlation_key": "v3-parent", "metadata": {"made": "0.3.0"}},
	  {"fsm": "parent", "queue": "v3", "correlation_key": "v3-fe"},
	  {"fsm": "parent", "queue": "v3", "correlation_key": "v3-tree"},
	  {"fsm": "job", "queue": "v3", "correlation_key": "v3-failme"},
	  {"fsm": "job", "queue": "v3", "correlation_key": "v3-many", "metadata": {"made": "0.3.0", "n": 2}}]')
 WHERE created;
SELECT pg_temp.old_claim('{v3-parent,v3-fe,v3-tree}', 'w3') AS claimed;
SELECT pg_temp.old_spawn('v3-parent', 'all', '{v3-r1-c0}') AS round_1;
SELECT pg_temp.old_claim('{v3-r1-c0}', 'w3') AS claimed;
SELECT pg_temp.old_end('v3-r1-c0', 'done', '{"round": 1}') AS done;
SELECT status, spawn_round, children_pending FROM gen_durable.instances
 WHERE correlation_key = 'v3-parent';
SELECT pg_temp.old_claim('{v3-parent}', 'w3') AS claimed;
SELECT pg_temp.old_spawn('v3-parent', 'all', '{v3-c0,v3-c1,v3-c2}') AS round_2;
SELECT pg_temp.old_claim('{v3-c0,v3-c2}', 'w3') AS claimed;
SELECT pg_temp.old_end('v3-c0', 'done', '{"i": 0}') AS done;
SELECT pg_temp.old_spawn('v3-fe', 'first_error', '{v3-fe-c0,v3-fe-c1}') AS spawned;
SELECT pg_temp.old_spawn('v3-tree', 'all', '{v3-tree-c0}') AS spawned;
SELECT gen_durable.cancel(pg_temp.id('v3-tree'), 'tree not needed') AS cancelled;
SELECT gen_durable.fail(pg_temp.id('v3-failme'), 'first try') AS failed;
SELECT gen_durable.retry(pg_temp.id('v3-failme'), 'again') AS retried;
SELECT correlation_key AS found FROM gen_durable.find('{"made": "0.3.0"}') ORDER BY 1;

-- the families: parents, then children by round and index
SELECT p.correlation_key AS parent, p.status, p.spawn_round, p.children_pending,
	   p.children_total, p.join_policy
  FROM gen_durable.instances p WHERE p.queue = 'v3' AND p.fsm = 'parent' ORDER BY 1;
SELECT p.correlation_key AS parent, c.parent_round, c.child_index, c.correlation_key AS child,
	   c.status, c.result
  FROM gen_durable.instances c JOIN gen_durable.instances p ON p.id = c.parent_id
 ORDER BY 1, 2, 3;

-- still waiting for a newer schema: pick, flush, run_maintenance
SELECT pg_temp.err($$SELECT * FROM gen_durable.pick('v3', 'w3')$$) AS pick,
	   pg_temp.err(format($$SELECT * FROM gen_durable.flush('[{"id": %s, "worker": "w3", "kind": "done"}]')$$,
						  pg_temp.id('v3-c2'))) AS flush,
	   pg_temp.err($$SELECT gen_durable.run_maintenance()$$) AS run_maintenance;

SELECT * FROM pg_temp.show('v3');
