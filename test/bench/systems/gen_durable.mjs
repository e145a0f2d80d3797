// systems/gen_durable.mjs - gen_durable driven through `pg` (bench.mjs has
// the contract).
//
// The worker loop is the one the README documents: pick a batch (long-poll
// when idle), run the steps, flush their outcomes with one call.  Each of
// CONCURRENCY workers owns one connection; pick(batch => BATCH) and one
// flush per batch.  Enqueue uses insert_many, 10,000 specs a call (its
// limit), one connection.  Pickup latency: a worker waits in
// pick(wait => '10 s'); the producer's insert returns after its commit, and
// the pick is woken in the server by that commit.

import { connect, untilDone } from './common.mjs';

const QUEUE = 'bench';
const SPECS_PER_CALL = 10000;

export async function setup(env) {
	const c = await connect(env);
	await c.query('CREATE EXTENSION IF NOT EXISTS gen_durable');
	await c.end();
}

export async function enqueue(env, n) {
	const c = await connect(env);
	for (let done = 0; done < n; done += SPECS_PER_CALL) {
		const k = Math.min(SPECS_PER_CALL, n - done);
		await c.query(
			`SELECT count(*) FROM gen_durable.insert_many(
			   (SELECT jsonb_agg(jsonb_build_object('fsm', 'noop', 'queue', $1::text))
			      FROM generate_series(1, $2::int)))`, [QUEUE, k]);
	}
	await c.end();
}

// worker picks and completes batches until the shared count reaches n
async function worker(env, id, n, progress) {
	const c = await connect(env);
	const name = `w${id}`;
	while (progress.done < n) {
		const { rows } = await c.query(
			'SELECT id FROM gen_durable.pick($1, $2, batch => $3, wait => $4)',
			[QUEUE, name, env.batch, '1 s']);
		if (rows.length === 0)
			continue;
		const outcomes = rows.map((r) => ({ id: Number(r.id), worker: name, kind: 'done' }));
		await c.query('SELECT count(*) FROM gen_durable.flush($1)', [JSON.stringify(outcomes)]);
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
	for (let i = 0; i < samples; i++) {
		let committed = 0;
		const picked = consumer.query(
			"SELECT id FROM gen_durable.pick($1, 'lat', batch => 1, wait => '10 s')", [QUEUE])
			.then((r) => {
				const started = performance.now();
				if (r.rows.length !== 1)
					throw new Error('the waiting pick returned no job');
				return { started, id: r.rows[0].id };
			});
		// let the pick reach its wait before inserting
		await new Promise((resolve) => setTimeout(resolve, 5));
		await producer.query("SELECT gen_durable.insert('noop', queue => $1)", [QUEUE]);
		committed = performance.now();
		const { started, id } = await picked;
		ms.push(started - committed);
		await consumer.query('SELECT count(*) FROM gen_durable.flush($1)',
			[JSON.stringify([{ id: Number(id), worker: 'lat', kind: 'done' }])]);
	}
	await producer.end();
	await consumer.end();
	return ms;
}

export async function completed(env) {
	const c = await connect(env);
	const { rows } = await c.query(
		"SELECT count(*)::int AS n FROM gen_durable.instances WHERE status = 'done'");
	await c.end();
	return rows[0].n;
}

// fsmEnqueue inserts n instances of the machine at its first step
export async function fsmEnqueue(env, n, steps) {
	const c = await connect(env);
	for (let done = 0; done < n; done += SPECS_PER_CALL) {
		const k = Math.min(SPECS_PER_CALL, n - done);
		await c.query(
			`SELECT count(*) FROM gen_durable.insert_many(
			   (SELECT jsonb_agg(jsonb_build_object('fsm', 'five', 'queue', 'fsm', 'step', 's1'))
			      FROM generate_series(1, $1::int)))`, [k]);
	}
	await c.end();
}

// outcomeOf is the outcome of a no-op step: the next step, or done after
// the last one; inline continues the instance in the same worker
function outcomeOf(job, worker, steps, inline) {
	const k = Number(job.step.slice(1));
	if (k >= steps)
		return { id: Number(job.id), worker, kind: 'done' };
	return { id: Number(job.id), worker, kind: 'next', step: `s${k + 1}`, continue: inline };
}

// fsmWorker runs steps until the shared count of finished instances
// reaches n: each batch of jobs is flushed with one call; with inline, the
// jobs that flush continues are run again at once (their next step), without
// a pick
async function fsmWorker(env, id, n, steps, inline, progress) {
	const c = await connect(env);
	const name = `f${id}`;
	let jobs = [];
	while (progress.done < n) {
		if (jobs.length === 0) {
			const { rows } = await c.query(
				'SELECT id, step FROM gen_durable.pick($1, $2, batch => $3, wait => $4)',
				['fsm', name, env.batch, '1 s']);
			jobs = rows;
			if (jobs.length === 0)
				continue;
		}
		const outcomes = jobs.map((j) => outcomeOf(j, name, steps, inline));
		const { rows } = await c.query(
			'SELECT applied, job FROM gen_durable.flush($1)', [JSON.stringify(outcomes)]);
		progress.counted(outcomes.filter((o) => o.kind === 'done').length);
		jobs = rows.filter((r) => r.job !== null).map((r) => r.job);
	}
	await c.end();
}

export async function fsmRun(env, n, steps, inline) {
	await untilDone(env, n, (e, id, progress) => fsmWorker(e, id, n, steps, inline, progress));
}

// backlogFill inserts terminal done instances, then runnable ones
export async function backlogFill(env, runnable, terminal) {
	await enqueue(env, terminal);
	if (terminal > 0) {
		const c = await connect(env);
		await c.query(
			"UPDATE gen_durable.instances SET status = 'done', result = '{}' WHERE queue = $1",
			[QUEUE]);
		await c.query('VACUUM gen_durable.instances');
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
		const { rows } = await c.query('SELECT id FROM gen_durable.pick($1, $2, batch => 10)',
			[QUEUE, 'bk']);
		ms.push(performance.now() - t0);
		await c.query('ROLLBACK');
		if (rows.length !== 10)
			throw new Error(`a pick at the backlog claimed ${rows.length} of 10`);
	}
	await c.end();
	return ms;
}
