// systems/common.mjs - what the system drivers share: a connection, running
// CONCURRENCY workers until a number of jobs is done (the drivers that run
// their own worker loops: gen_durable, bare), bulk inserts cut into calls
// of CHUNK jobs, a sleep, the backlog workloads' fill and timed claims, and
// the claims held by pick_inflight.

// jobs per bulk insert call (gen_durable's insert_many takes at most 10,000)
export const CHUNK = 10000;

// connect opens one client with the libpq environment
export async function connect(env) {
	const client = new env.pg.Client(env.config);
	await client.connect();
	return client;
}

// sleep resolves after ms milliseconds
export function sleep(ms) {
	return new Promise((resolve) => setTimeout(resolve, ms));
}

// inChunks calls insert(k) for consecutive chunks of at most CHUNK of n
// jobs, one after the other (each call commits its own chunk), the way
// every driver's bulk load goes
export async function inChunks(n, insert) {
	for (let done = 0; done < n; done += CHUNK)
		await insert(Math.min(CHUNK, n - done));
}

// enqueueWith inserts n no-op jobs through one producer of the system
// (producer(env) as bench.mjs describes it), CHUNK per call: the enqueue
// of every driver
export async function enqueueWith(producer, env, n) {
	const p = await producer(env);
	try {
		await inChunks(n, (k) => p.insert(k));
	} finally {
		await p.end();
	}
}

// untilDone starts `workers` workers (env.concurrency unless given),
// worker(env, id, progress), and resolves as soon as they have reported n
// jobs done through progress.counted(k) (workers loop while progress.done <
// n).  Workers still waiting for work then stop on their own; bench.mjs
// exits without them.
export async function untilDone(env, n, worker, workers = env.concurrency) {
	let reached;
	const all = new Promise((resolve) => { reached = resolve; });
	const progress = {
		done: 0,
		counted(k) {
			this.done += k;
			if (this.done >= n)
				reached();
		},
	};
	const running = [];
	for (let i = 0; i < workers; i++)
		running.push(worker(env, i, progress));
	await Promise.race([all, Promise.all(running)]);
}

// fillBacklog inserts `terminal` jobs and finishes them with finishSql (then
// VACUUMs `table`), then inserts `runnable` queued ones: the backlogFill of
// the systems that have the backlog workloads
export async function fillBacklog(env, enqueue, runnable, terminal, finishSql, table) {
	await enqueue(env, terminal);
	if (terminal > 0) {
		const c = await connect(env);
		await c.query(finishSql);
		await c.query(`VACUUM ${table}`);
		await c.end();
	}
	await enqueue(env, runnable);
}

// timeClaims times `samples` claims of 10 jobs, claim(client) each, every
// one in a transaction rolled back (the backlog stays the same); ms per
// claim: the pickAtBacklog of the systems that have it
export async function timeClaims(env, samples, claim) {
	const c = await connect(env);
	const ms = [];
	for (let i = 0; i < samples; i++) {
		await c.query('BEGIN');
		const t0 = performance.now();
		const { rows } = await claim(c);
		ms.push(performance.now() - t0);
		await c.query('ROLLBACK');
		if (rows.length !== 10)
			throw new Error(`a claim at the backlog claimed ${rows.length} of 10`);
	}
	await c.end();
	return ms;
}

// holdClaims claims n jobs and keeps them claimed without completing them:
// the long steps in flight of pick_inflight.  env.concurrency holders, each
// on a connection of its own, claim their share of n one after the other
// with claim(client, name, k), in calls of at most CHUNK jobs, each
// committed when it returns; the connections stay open (a system may tie a
// claim to its session) until end(), which closes them.  Fails unless every
// call claimed its k jobs.  The holdInFlight of the systems that have it.
export async function holdClaims(env, n, claim) {
	const holders = [];
	for (let i = 0; i < env.concurrency; i++) {
		const c = await connect(env);
		holders.push(c);
		const share = Math.floor(n / env.concurrency) + (i < n % env.concurrency ? 1 : 0);
		await inChunks(share, async (k) => {
			const { rows } = await claim(c, `h${i}`, k);
			if (rows.length !== k)
				throw new Error(`a holder claimed ${rows.length} of ${k}`);
		});
	}
	return { end: () => Promise.all(holders.map((c) => c.end())) };
}
