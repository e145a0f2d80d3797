-- bare: the hand-rolled SKIP LOCKED table of test/bench/systems/bare.mjs.
-- The claim and the completion are two non-HOT updates (status is in the
-- pick index's predicate); finished rows are kept with status 'done'.
-- @schema
CREATE TABLE jobs (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	queue		text NOT NULL,
	payload		jsonb NOT NULL DEFAULT '{}',
	status		text NOT NULL DEFAULT 'queued',
	priority	int NOT NULL DEFAULT 0,
	run_at		timestamptz NOT NULL DEFAULT now(),
	locked_by	text,
	locked_at	timestamptz,
	attempts	int NOT NULL DEFAULT 0,
	step		int NOT NULL DEFAULT 1
);
CREATE INDEX jobs_queued ON jobs (queue, priority, run_at, id) WHERE status = 'queued';
-- @fill
INSERT INTO jobs (queue) SELECT 'q' || (i % :queues) FROM generate_series(1, :n) i;
-- @round
WITH c AS (
	UPDATE jobs j SET status = 'running', locked_by = 'w' || :client_id,
		   locked_at = now(), attempts = j.attempts + 1
	  FROM (SELECT id FROM jobs
			 WHERE queue = 'q' || :qn AND status = 'queued' AND run_at <= now()
			 ORDER BY priority, run_at, id
			 LIMIT :batch FOR UPDATE SKIP LOCKED) c
	 WHERE j.id = c.id
	RETURNING j.id)
SELECT array_agg(id) AS ids FROM c \gset
UPDATE jobs SET status = 'done', locked_by = NULL
 WHERE id = ANY (:ids::bigint[]) AND locked_by = 'w' || :client_id;
