-- mem_update: the claim writes nothing (it would live in shared memory;
-- here each worker has a queue of its own, so a plain SELECT claims without
-- a race); the completion is one non-HOT update in place (status 'done',
-- the row kept), as today and as bare.
-- @schema
CREATE TABLE jobs (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	queue		text NOT NULL,
	payload		jsonb NOT NULL DEFAULT '{}',
	status		text NOT NULL DEFAULT 'queued',
	priority	int NOT NULL DEFAULT 0,
	run_at		timestamptz NOT NULL DEFAULT now(),
	attempts	int NOT NULL DEFAULT 0,
	step		int NOT NULL DEFAULT 1
);
CREATE INDEX jobs_queued ON jobs (queue, priority, run_at, id) WHERE status = 'queued';
-- @fill
INSERT INTO jobs (queue) SELECT 'q' || (i % :queues) FROM generate_series(1, :n) i;
-- @round
SELECT array_agg(id) AS ids FROM (
	SELECT id FROM jobs
	 WHERE queue = 'q' || :qn AND status = 'queued' AND run_at <= now()
	 ORDER BY priority, run_at, id LIMIT :batch) c \gset
UPDATE jobs SET status = 'done' WHERE id = ANY (:ids::bigint[]);
