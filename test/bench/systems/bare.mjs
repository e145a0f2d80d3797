// systems/bare.mjs - the hand-rolled baseline: one jobs table and
// FOR UPDATE SKIP LOCKED, the way an application writes its own queue
// (bench.mjs has the contract).
//
// - claim a batch with one UPDATE over a SKIP LOCKED subselect, in priority
//   and due order, served by a partial index on the queued rows;
// - complete a batch with one UPDATE (status done, kept like gen_durable's
//   terminal rows, so that both write the same kind of change);
// - insert with one INSERT ... SELECT over generate_series per call (a
//   batch of the producer; 10,000 per call for enqueue);
// - wake-ups: an idle worker LISTENs; the producer's INSERT and a NOTIFY
//   commit together (one statement), and the worker claims on the
//   notification (the usual hand-rolled design; with no notification it
//   re-checks every second);
// - the 5-step machine: a job carries its step; one UPDATE completes a
//   claimed batch, putting each job not at its last step back in the queue
//   at step + 1 (at the back: run_at = now(), as gen_durable's next) and
//   marking the others done.  That requeue sends no NOTIFY: the worker that
//   requeues claims again at once, and the queue is only empty at the very
//   end of a run.

import {
	connect, enqueueWith, fillBacklog, holdClaims, inChunks, timeClaims, untilDone,
} from './common.mjs';

const SCHEMA = `
CREATE TABLE bare_jobs (
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
CREATE INDEX bare_jobs_queued ON bare_jobs (queue, priority, run_at, id)
	WHERE status = 'queued';
`;

const CLAIM = `
UPDATE bare_jobs j SET status = 'running', locked_by = $2, locked_at = now(),
	   attempts = j.attempts + 1
  FROM (SELECT id FROM bare_jobs
		 WHERE queue = $1 AND status = 'queued' AND run_at <= now()
		 ORDER BY priority, run_at, id
		 LIMIT $3 FOR UPDATE SKIP LOCKED) c
 WHERE j.id = c.id
RETURNING j.id, j.payload, j.step`;

const COMPLETE = `UPDATE bare_jobs SET status = 'done', locked_by = NULL
 WHERE id = ANY ($1::bigint[]) AND locked_by = $2`;

// the machine's transition: $3 is the last step
const ADVANCE = `UPDATE bare_jobs
   SET status = CASE WHEN step < $3 THEN 'queued' ELSE 'done' END,
	   step = CASE WHEN step < $3 THEN step + 1 ELSE step END,
	   attempts = 0, run_at = now(), locked_by = NULL
 WHERE id = ANY ($1::bigint[]) AND locked_by = $2`;

// k queued jobs of queue with payload, and the notification, in one statement
const INSERT = `WITH jobs AS (
	INSERT INTO bare_jobs (queue, payload)
	SELECT $1, $2::jsonb FROM generate_series(1, $3::int))
SELECT pg_notify('bare_jobs', '')`;

export async function setup(env) {
	const c = await connect(env);
	await c.query(SCHEMA);
	await c.end();
}

// producer: one connection; insert(k, tag) inserts k no-op jobs (payload
// {"t": tag} when tagged) and notifies, in one statement
export async function producer(env) {
	const c = await connect(env);
	return {
		insert: (k, tag) => c.query(INSERT,
			['bench', JSON.stringify(tag === undefined ? {} : { t: tag }), k]),
		end: () => c.end(),
	};
}

export async function enqueue(env, n) {
	await enqueueWith(producer, env, n);
}

// worker claims batches of queue and ends each with finish(c, rows, name),
// which returns how many of them count as done, until the shared count
// reaches n; it sleeps on its LISTEN when the queue is empty
async function worker(env, id, n, progress, queue, finish) {
	const c = await connect(env);
	const name = `w${id}`;
	let wake = null;
	c.on('notification', () => wake && wake());
	await c.query('LISTEN bare_jobs');
	while (progress.done < n) {
		const { rows } = await c.query(CLAIM, [queue, name, env.batch]);
		if (rows.length === 0) {
			await new Promise((resolve) => {
				wake = resolve;
				setTimeout(resolve, 1000);
			});
			wake = null;
			continue;
		}
		progress.counted(await finish(c, rows, name));
	}
	await c.end();
}

// drain resolves as soon as n jobs are completed (common.mjs), calling
// onStart(tag) for each job claimed when given
export async function drain(env, n, onStart) {
	const complete = async (c, rows, name) => {
		if (onStart)
			for (const r of rows)
				onStart(r.payload.t);
		await c.query(COMPLETE, [rows.map((r) => r.id), name]);
		return rows.length;
	};
	await untilDone(env, n, (e, id, progress) => worker(e, id, n, progress, 'bench', complete));
}

export async function pickupLatency(env, samples) {
	const producer = await connect(env);
	const consumer = await connect(env);
	const ms = [];
	await consumer.query('LISTEN bare_jobs');
	for (let i = 0; i < samples; i++) {
		const started = new Promise((resolve) => {
			consumer.once('notification', async () => {
				const { rows } = await consumer.query(CLAIM, ['bench', 'lat', 1]);
				const t = performance.now();
				await consumer.query(COMPLETE, [rows.map((r) => r.id), 'lat']);
				resolve({ t, claimed: rows.length });
			});
		});
		await producer.query(
			"BEGIN; INSERT INTO bare_jobs (queue) VALUES ('bench'); NOTIFY bare_jobs; COMMIT");
		const committed = performance.now();
		const got = await started;
		if (got.claimed !== 1)
			throw new Error('the notified claim found no job');
		ms.push(got.t - committed);
	}
	await producer.end();
	await consumer.end();
	return ms;
}

export async function completed(env) {
	const c = await connect(env);
	const { rows } = await c.query("SELECT count(*)::int AS n FROM bare_jobs WHERE status = 'done'");
	await c.end();
	return rows[0].n;
}

// fsmEnqueue inserts n jobs of the machine at its first step
export async function fsmEnqueue(env, n, steps) {
	const c = await connect(env);
	await inChunks(n, (k) => c.query(INSERT, ['fsm', '{}', k]));
	await c.end();
}

// fsmRun runs the machines: each claimed batch advances with one UPDATE;
// the jobs claimed at the last step are the machines finished
export async function fsmRun(env, n, steps) {
	const advance = async (c, rows, name) => {
		await c.query(ADVANCE, [rows.map((r) => r.id), name, steps]);
		return rows.filter((r) => r.step >= steps).length;
	};
	await untilDone(env, n, (e, id, progress) => worker(e, id, n, progress, 'fsm', advance));
}

// backlogFill inserts terminal done jobs, then queued ones
export async function backlogFill(env, runnable, terminal) {
	await fillBacklog(env, enqueue, runnable, terminal,
		"UPDATE bare_jobs SET status = 'done'", 'bare_jobs');
}

// pickAtBacklog times claims of 10 jobs, each rolled back
export async function pickAtBacklog(env, samples) {
	return timeClaims(env, samples, (c) => c.query(CLAIM, ['bench', 'bk', 10]));
}

// holdInFlight claims n jobs (committed: status running) and holds them
// until end()
export async function holdInFlight(env, n) {
	return holdClaims(env, n, (c, name, k) => c.query(CLAIM, ['bench', name, k]));
}
