// systems/gen_durable.mjs - gen_durable driven through `pg` (bench.mjs has
// the contract).
//
// The worker loop is the one the README documents: pick a batch (long-poll
// when idle), run the steps, flush their outcomes with one call.  Each of
// CONCURRENCY workers owns one connection; pick(batch => BATCH) and one
// flush per batch.  A producer inserts with insert_many, one call per batch
// of jobs (enqueue: 10,000 specs a call, its limit, on one connection).
// Pickup latency: a worker waits in pick(wait => '10 s'); the producer's
// insert returns after its commit, and the pick is woken in the server by
// that commit.  Signal latency: the same wait, woken by signal() instead.
// Fan-out: parents in one queue, run by one parent worker (a picker and a
// spawner connection) that spawns their children and picks them again
// once joined; CONCURRENCY workers run the children in another queue.
// Claims in flight: holders pick with a 10-minute lease and flush nothing.

import {
	connect, enqueueWith, fillBacklog, holdClaims, inChunks, sleep, timeClaims, untilDone,
} from './common.mjs';

const QUEUE = 'bench';
const FSM_QUEUE = 'fsm';
const SIGNAL_QUEUE = 'sig';
const PARENT_QUEUE = 'fan_parents';
const CHILD_QUEUE = 'fan_children';

// setup creates the extension; with GD_HISTORY=1 every queue records the
// step history of its instances (to measure what history costs)
export async function setup(env) {
	const c = await connect(env);
	await c.query('CREATE EXTENSION IF NOT EXISTS gen_durable');
	if (process.env.GD_HISTORY === '1')
		await c.query('SELECT gen_durable.set_queue_history(q, true) FROM unnest($1::text[]) AS q',
			[[QUEUE, FSM_QUEUE, SIGNAL_QUEUE, PARENT_QUEUE, CHILD_QUEUE]]);
	await c.end();
}

// insertMany inserts k copies of one insert spec with one insert_many call
async function insertMany(c, k, spec) {
	await c.query(
		`SELECT count(*) FROM gen_durable.insert_many(
		   (SELECT jsonb_agg($1::jsonb) FROM generate_series(1, $2::int)))`,
		[JSON.stringify(spec), k]);
}

// flush applies a batch of outcomes and returns flush's rows; every entry
// must be applied (anything else is a harness or engine bug)
async function flush(c, outcomes) {
	const { rows } = await c.query(
		'SELECT applied, detail, job FROM gen_durable.flush($1)', [JSON.stringify(outcomes)]);
	const bad = rows.find((r) => r.applied !== 'ok');
	if (bad)
		throw new Error(`gen_durable: flush answered ${bad.applied} (${bad.detail})`);
	return rows;
}

// producer: one connection; insert(k, tag) inserts k no-op jobs (state
// {"t": tag} when tagged) with one insert_many call
export async function producer(env) {
	const c = await connect(env);
	return {
		insert: (k, tag) => insertMany(c, k,
			tag === undefined ? { fsm: 'noop', queue: QUEUE } : { fsm: 'noop', queue: QUEUE, state: { t: tag } }),
		end: () => c.end(),
	};
}

export async function enqueue(env, n) {
	await enqueueWith(producer, env, n);
}

// worker picks and completes batches until the shared count reaches n,
// calling onStart(tag) for each job picked when given
async function worker(env, id, n, progress, onStart) {
	const c = await connect(env);
	const name = `w${id}`;
	const columns = onStart ? 'id, state' : 'id';
	while (progress.done < n) {
		const { rows } = await c.query(
			`SELECT ${columns} FROM gen_durable.pick($1, $2, batch => $3, wait => $4)`,
			[QUEUE, name, env.batch, '1 s']);
		if (rows.length === 0)
			continue;
		if (onStart)
			for (const r of rows)
				onStart(r.state.t);
		const outcomes = rows.map((r) => ({ id: Number(r.id), worker: name, kind: 'done' }));
		await c.query('SELECT count(*) FROM gen_durable.flush($1)', [JSON.stringify(outcomes)]);
		progress.counted(rows.length);
	}
	await c.end();
}

// drain resolves as soon as n jobs are completed (common.mjs)
export async function drain(env, n, onStart) {
	await untilDone(env, n, (e, id, progress) => worker(e, id, n, progress, onStart));
}

// timedWake measures one wake-up: the consumer sends a long-poll pick of one
// job of queue and lets it reach its wait; trigger() then commits what
// makes one job of the queue runnable; returns the ms from trigger()
// returning to the pick's answer, and the job (id, number of awaited
// signals), which it then flushes done
async function timedWake(consumer, queue, trigger) {
	const picked = consumer.query(
		`SELECT id, jsonb_array_length(awaited) AS awaited
		   FROM gen_durable.pick($1, 'lat', batch => 1, wait => '10 s')`, [queue])
		.then((r) => ({ started: performance.now(), rows: r.rows }));
	// let the pick reach its wait first
	await sleep(5);
	await trigger();
	const committed = performance.now();
	const { started, rows } = await picked;
	if (rows.length !== 1)
		throw new Error(`gen_durable: the waiting pick of ${queue} returned no job`);
	await flush(consumer, [{ id: Number(rows[0].id), worker: 'lat', kind: 'done' }]);
	return { ms: started - committed, job: rows[0] };
}

export async function pickupLatency(env, samples) {
	const producer = await connect(env);
	const consumer = await connect(env);
	const ms = [];
	for (let i = 0; i < samples; i++) {
		const woke = await timedWake(consumer, QUEUE,
			() => producer.query("SELECT gen_durable.insert('noop', queue => $1)", [QUEUE]));
		ms.push(woke.ms);
	}
	await producer.end();
	await consumer.end();
	return ms;
}

// park inserts n instances and parks each awaiting the signal 'go' (a pick,
// then a flush of kind await), in batches of up to 1,000; returns their ids
async function park(c, n) {
	await inChunks(n, (k) => insertMany(c, k, { fsm: 'sig', queue: SIGNAL_QUEUE }));
	const ids = [];
	while (ids.length < n) {
		const { rows } = await c.query(
			"SELECT id FROM gen_durable.pick($1, 'park', batch => 1000)", [SIGNAL_QUEUE]);
		if (rows.length === 0)
			throw new Error(`gen_durable: parked ${ids.length} of ${n}, then nothing to pick`);
		await flush(c, rows.map((r) => ({
			id: Number(r.id), worker: 'park', kind: 'await', names: ['go'], step: 'woken',
		})));
		ids.push(...rows.map((r) => r.id));
	}
	return ids;
}

// signalLatency parks `samples` instances (untimed), then one at a time:
// a worker waits in a long-poll pick, the producer signals one instance,
// and the sample is from signal() returning to the pick returning it
export async function signalLatency(env, samples) {
	const producer = await connect(env);
	const consumer = await connect(env);
	const ids = await park(producer, samples);
	const ms = [];
	for (const id of ids) {
		const woke = await timedWake(consumer, SIGNAL_QUEUE, async () => {
			const { rows } = await producer.query(
				"SELECT gen_durable.signal($1::bigint, 'go') AS answer", [id]);
			if (rows[0].answer !== 'delivered')
				throw new Error(`gen_durable: signal answered ${rows[0].answer}`);
		});
		if (woke.job.id !== id || woke.job.awaited !== 1)
			throw new Error(`gen_durable: signalled ${id}, picked ${woke.job.id} with ${woke.job.awaited} awaited`);
		ms.push(woke.ms);
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
	await inChunks(n, (k) => insertMany(c, k, { fsm: 'five', queue: FSM_QUEUE, step: 's1' }));
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
				[FSM_QUEUE, name, env.batch, '1 s']);
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

export const fsmInline = true;

export async function fsmRun(env, n, steps, inline) {
	await untilDone(env, n, (e, id, progress) => fsmWorker(e, id, n, steps, inline, progress));
}

// fanoutEnqueue inserts n parents at their first step
export async function fanoutEnqueue(env, n) {
	const c = await connect(env);
	await inChunks(n, (k) => insertMany(c, k, { fsm: 'parent', queue: PARENT_QUEUE }));
	await c.end();
}

// parentWorker runs the parents with two connections, so that a woken
// parent is picked at once even while spawns are being written: the picker
// picks parents (with a long lease: a spawn can wait its turn); a parent at
// step 'start' is handed to the spawner connection, whose flushes (each the
// spawn of `width` no-op children per parent of a batch, join all, parked
// until they end) go one after the other; a parent at step 'joined' (woken
// by its join) is stamped in pickedAt, flushed done by the picker and
// counted in progress
async function parentWorker(env, n, width, progress, pickedAt) {
	const picker = await connect(env);
	const spawner = await connect(env);
	const children = Array.from({ length: width }, () => ({ fsm: 'leaf', queue: CHILD_QUEUE }));
	let spawning = Promise.resolve();
	let failed = null;
	while (progress.done < n && failed === null) {
		const { rows } = await picker.query(
			`SELECT id, step, jsonb_array_length(children) AS children
			   FROM gen_durable.pick($1, 'parent', batch => $2, lease => '10 min', wait => '1 s')`,
			[PARENT_QUEUE, env.batch]);
		const t = performance.now();
		const spawns = rows.filter((r) => r.step === 'start').map((r) => ({
			id: Number(r.id), worker: 'parent', kind: 'spawn', children, step: 'joined',
		}));
		if (spawns.length > 0) {
			spawning = spawning.then(() => flush(spawner, spawns));
			spawning.catch((err) => { failed = err; });
		}
		const joined = rows.filter((r) => r.step !== 'start');
		if (joined.length === 0)
			continue;
		for (const r of joined) {
			if (r.children !== width)
				throw new Error(`gen_durable: parent ${r.id} joined ${r.children} of ${width} children`);
			pickedAt.set(r.id, t);
		}
		await flush(picker, joined.map((r) => ({ id: Number(r.id), worker: 'parent', kind: 'done' })));
		progress.counted(joined.length);
	}
	await spawning;
	await picker.end();
	await spawner.end();
}

// childWorker runs children (done at once) until every parent is done,
// stamping in lastFlushAt, per parent, when a flush of its children returned
async function childWorker(env, id, n, progress, lastFlushAt) {
	const c = await connect(env);
	const name = `c${id}`;
	while (progress.done < n) {
		const { rows } = await c.query(
			'SELECT id, parent_id FROM gen_durable.pick($1, $2, batch => $3, wait => $4)',
			[CHILD_QUEUE, name, env.batch, '1 s']);
		if (rows.length === 0)
			continue;
		await flush(c, rows.map((r) => ({ id: Number(r.id), worker: name, kind: 'done' })));
		const t = performance.now();
		for (const r of rows)
			lastFlushAt.set(r.parent_id, t);
	}
	await c.end();
}

// fanoutRun runs the n parents of fanoutEnqueue to the end: one parent
// worker (two connections) and CONCURRENCY child workers;
// returns, per parent, the ms from the return of the last flush of its
// children to the pick of its joined step (0 when that pick answered first)
export async function fanoutRun(env, n, width) {
	const pickedAt = new Map();
	const lastFlushAt = new Map();
	await untilDone(env, n, (e, id, progress) => (id === 0
		? parentWorker(e, n, width, progress, pickedAt)
		: childWorker(e, id, n, progress, lastFlushAt)), env.concurrency + 1);
	return [...pickedAt].map(([parent, t]) => Math.max(0, t - (lastFlushAt.get(parent) ?? t)));
}

// backlogFill inserts terminal done instances, then runnable ones
export async function backlogFill(env, runnable, terminal) {
	await fillBacklog(env, enqueue, runnable, terminal,
		`UPDATE gen_durable.instances SET status = 'done', result = '{}' WHERE queue = '${QUEUE}'`,
		'gen_durable.instances');
}

// pickAtBacklog times claims of 10 jobs, each rolled back
export async function pickAtBacklog(env, samples) {
	return timeClaims(env, samples,
		(c) => c.query('SELECT id FROM gen_durable.pick($1, $2, batch => 10)', [QUEUE, 'bk']));
}

// holdInFlight picks n jobs with a lease longer than any run (10 minutes)
// and holds them, neither flushed nor heartbeaten, until end()
export async function holdInFlight(env, n) {
	return holdClaims(env, n, (c, name, k) => c.query(
		"SELECT id FROM gen_durable.pick($1, $2, batch => $3, lease => '10 min')", [QUEUE, name, k]));
}
