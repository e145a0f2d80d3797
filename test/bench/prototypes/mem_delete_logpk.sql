-- mem_delete_logpk: the claim writes nothing (see mem_update.sql); the
-- completion deletes the live row and appends a narrow terminal record
-- (id, status, result, time) to a finished table with a btree on id,
-- which GC would truncate a partition at a time.
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
CREATE TABLE finished (
	id			bigint NOT NULL,
	status		"char" NOT NULL,
	result		jsonb,
	finished_at	timestamptz NOT NULL
) WITH (autovacuum_enabled = off);
CREATE INDEX finished_id ON finished (id);
-- @fill
INSERT INTO jobs (queue) SELECT 'q' || (i % :queues) FROM generate_series(1, :n) i;
-- @round
SELECT array_agg(id) AS ids FROM (
	SELECT id FROM jobs
	 WHERE queue = 'q' || :qn AND run_at <= now()
	 ORDER BY priority, run_at, id LIMIT :batch) c \gset
WITH d AS (DELETE FROM jobs WHERE id = ANY (:ids::bigint[]) RETURNING id)
INSERT INTO finished SELECT id, 'd', NULL, now() FROM d;
