// systems/bare.mjs - the hand-rolled baseline: one jobs table and
// FOR UPDATE SKIP LOCKED, the way an application writes its own queue
// (bench.mjs has the contract).
//
// - claim a batch with one UPDATE over a SKIP LOCKED subselect, in priority
//   and due order, served by a partial index on the queued rows;
// - complete a batch with one UPDATE (status done, kept like gen_durable's
//   terminal rows, so that both write the same kind of change);
// - enqueue with one INSERT ... SELECT over generate_series per 10,000;
// - wake-ups: an idle worker LISTENs; the producer's INSERT and a NOTIFY
//   commit together, and the worker claims on the notification (the usual
//   hand-rolled design; with no notification it re-checks every second).

import { connect, untilDone } from './common.mjs';

const CHUNK = 10000;

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
	attempts	int NOT NULL DEFAULT 0
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
RETURNING j.id`;

const COMPLETE = `UPDATE bare_jobs SET status = 'done', locked_by = NULL
 WHERE id = ANY ($1::bigint[]) AND locked_by = $2`;

export async function setup(env) {
	const c = await connect(env);
	await c.query(SCHEMA);
	await c.end();
}

export async function enqueue(env, n) {
	const c = await connect(env);
	for (let done = 0; done < n; done += CHUNK) {
		await c.query(
			"INSERT INTO bare_jobs (queue) SELECT 'bench' FROM generate_series(1, $1::int)",
			[Math.min(CHUNK, n - done)]);
	}
	await c.end();
}

// worker claims and completes batches until the shared count reaches n,
// sleeping on its LISTEN when the queue is empty
async function worker(env, id, n, progress) {
	const c = await connect(env);
	const name = `w${id}`;
	let wake = null;
	c.on('notification', () => wake && wake());
	await c.query('LISTEN bare_jobs');
	while (progress.done < n) {
		const { rows } = await c.query(CLAIM, ['bench', name, env.batch]);
		if (rows.length === 0) {
			await new Promise((resolve) => {
				wake = resolve;
				setTimeout(resolve, 1000);
			});
			wake = null;
			continue;
		}
		await c.query(COMPLETE, [rows.map((r) => r.id), name]);
		progress.counted(rows.length);
	}
	await c.end();
}

// drain resolves as soon as n jobs are completed (common.mjs)
export async function drain(env, n) {
	await untilDone(env, n, (e, id, progress) => worker(e, id, n, progress));
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

// backlogFill inserts terminal done jobs, then queued ones
export async function backlogFill(env, runnable, terminal) {
	await enqueue(env, terminal);
	if (terminal > 0) {
		const c = await connect(env);
		await c.query("UPDATE bare_jobs SET status = 'done'");
		await c.query('VACUUM bare_jobs');
		await c.end();
	}
	await enqueue(env, runnable);
}

// pickAtBacklog times claims of 10 jobs, each rolled back
export async function pickAtBacklog(env, samples) {
	const c = await connect(env);
	const ms = [];
	for (let i = 0; i < samples; i++) {
		await c.query('BEGIN');
		const t0 = performance.now();
		const { rows } = await c.query(CLAIM, ['bench', 'bk', 10]);
		ms.push(performance.now() - t0);
		await c.query('ROLLBACK');
		if (rows.length !== 10)
			throw new Error(`a claim at the backlog claimed ${rows.length} of 10`);
	}
	await c.end();
	return ms;
}
