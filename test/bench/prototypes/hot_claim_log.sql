-- hot_claim_log: the claim is durable but HOT: no indexed column changes
-- (the pick index has no predicate; a claimed row is skipped by its
-- locked_by), on pages left 30% free for it; the completion deletes the
-- live row and appends a narrow terminal record, as mem_delete_log.
-- @schema
CREATE TABLE jobs (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	queue		text NOT NULL,
	payload		jsonb NOT NULL DEFAULT '{}',
	priority	int NOT NULL DEFAULT 0,
	run_at		timestamptz NOT NULL DEFAULT now(),
	locked_by	text,
	locked_at	timestamptz,
	attempts	int NOT NULL DEFAULT 0,
	step		int NOT NULL DEFAULT 1
) WITH (fillfactor = 70);
CREATE INDEX jobs_queued ON jobs (queue, priority, run_at, id);
CREATE TABLE finished (
	id			bigint NOT NULL,
	status		"char" NOT NULL,
	result		jsonb,
	finished_at	timestamptz NOT NULL
) WITH (autovacuum_enabled = off);
-- @fill
INSERT INTO jobs (queue) SELECT 'q' || (i % :queues) FROM generate_series(1, :n) i;
-- @round
WITH c AS (
	UPDATE jobs j SET locked_by = 'w' || :client_id, locked_at = now(),
		   attempts = j.attempts + 1
	  FROM (SELECT id FROM jobs
			 WHERE queue = 'q' || :qn AND locked_by IS NULL AND run_at <= now()
			 ORDER BY priority, run_at, id
			 LIMIT :batch FOR UPDATE SKIP LOCKED) c
	 WHERE j.id = c.id
	RETURNING j.id)
SELECT array_agg(id) AS ids FROM c \gset
WITH d AS (DELETE FROM jobs WHERE id = ANY (:ids::bigint[]) AND locked_by = 'w' || :client_id
		   RETURNING id)
INSERT INTO finished SELECT id, 'd', NULL, now() FROM d;
