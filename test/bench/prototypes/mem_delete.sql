-- mem_delete: the claim writes nothing (see mem_update.sql); the completion
-- deletes the row and keeps nothing (graphile-worker's choice): the lower
-- bound of a design that keeps no terminal rows.
-- @schema
CREATE TABLE jobs (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	queue		text NOT NULL,
	payload		jsonb NOT NULL DEFAULT '{}',
	priority	int NOT NULL DEFAULT 0,
	run_at		timestamptz NOT NULL DEFAULT now(),
	attempts	int NOT NULL DEFAULT 0,
	step		int NOT NULL DEFAULT 1
);
CREATE INDEX jobs_queued ON jobs (queue, priority, run_at, id);
-- @fill
INSERT INTO jobs (queue) SELECT 'q' || (i % :queues) FROM generate_series(1, :n) i;
-- @round
SELECT array_agg(id) AS ids FROM (
	SELECT id FROM jobs
	 WHERE queue = 'q' || :qn AND run_at <= now()
	 ORDER BY priority, run_at, id LIMIT :batch) c \gset
DELETE FROM jobs WHERE id = ANY (:ids::bigint[]);
