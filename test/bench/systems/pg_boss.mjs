// systems/pg_boss.mjs - pg-boss 12.38.0 (bench.mjs has the contract).
//
// Configuration, and where pg-boss documents it (pgboss.io, sections named
// below; the work() options are also described in the package's
// dist/types.d.ts):
//
// - Connections: one PgBoss instance whose pool is `max: CONCURRENCY`
//   (api/constructor "max": "maximum number of connections that will be
//   shared by all operations in this instance"), taking host, port, user,
//   database (and password) from the PG* environment.  pg-boss has no
//   per-worker connection: every fetch, completion, insert and anything it
//   runs in the background share that one pool.
// - Workers: one work() call with `localConcurrency: CONCURRENCY` (api/workers
//   "localConcurrency": the number of workers work() spawns in this process,
//   each polling and processing independently), so CONCURRENCY fetch loops on
//   a pool of CONCURRENCY connections: each loop holds at most one connection
//   at a time (fetch, then completion).
// - Batches: `batchSize: BATCH`; the handler takes the array and returns,
//   and pg-boss completes the whole batch with one statement (api/workers,
//   "Handler function": a batch handler is all-or-nothing by default).
// - Polling: `pollingIntervalSeconds: 0.5`, the documented minimum ("must be
//   >=0.5 (500ms)"), and `burstWhenBatchFull: true` (api/workers: "while each
//   fetch returns a full batchSize batch ... the worker keeps fetching
//   continuously with no delay; the first short fetch ends burst mode").
//   Without it a worker sleeps out the polling interval after every batch,
//   full or not (dist/worker.js), so draining is capped at BATCH jobs per
//   worker per 0.5 s; burst is pg-boss's own documented high-throughput mode,
//   off by default.  pg-boss ignores it at batchSize 1 (documented), so a
//   run with BATCH = 1 drains at 2 jobs per worker per second.
// - Enqueue: insert() (api/jobs "insert(name, jobs, options)", the bulk path:
//   one INSERT ... SELECT FROM json_to_recordset per call, committed when it
//   returns, with the queue's pg_notify), 10,000 jobs a call on one
//   connection of its own (insert()'s documented `db` option: a client
//   outside the pool, as the other drivers' producers have), the chunk the
//   other drivers use.  Jobs carry no data (the mixed workload's carry
//   {"t": batch}).
// - The 5-step machine: a step is a job with data {"step": k}; the batch
//   handler inserts the next steps of its batch with one insert() (on the
//   pool) before returning, and pg-boss then completes the batch: two
//   transactions, as pg-boss has no atomic complete-and-send.
// - Background work switched off, all documented constructor options
//   (api/constructor): `supervise: false` (maintenance, monitoring, the flow
//   resolver: expiry, retention deletes, queue stats, vacuum/bloat checks),
//   `schedule: false` (the cron/clock-skew timekeeper), `registerInstance:
//   false` (the instance registry's heartbeat), and `openTelemetry: { enabled:
//   false }` (opentelemetry docs; a no-op anyway without an SDK).  None of
//   these is on the path of a job from insert to completion.  Left at their
//   defaults: `migrate` (start() has to install the schema), the queue cache
//   refresh (queueCacheIntervalSeconds, 60 s), and the queue's own defaults
//   (policy standard, retryLimit 2, expireInSeconds 900, deleteAfterSeconds 7
//   days).
// - Wake-ups: LISTEN/NOTIFY, pg-boss 12's documented low-latency dispatch
//   (api/workers "Low-latency dispatch with LISTEN/NOTIFY", "an opt-in
//   optimization on top of polling"), opted into twice: constructor
//   `useListenNotify: true` and the queue's `notify: true`; it holds one more
//   connection for the listener, as graphile-worker's and gen_durable's waits
//   do.  PG_BOSS_NOTIFY=0 in the environment measures the polling default
//   instead.
//
// drain(n): work() as above; the handler counts the jobs it is given, and
// when the count reaches n, stop({ graceful: true }) (v12's StopOptions are
// close, graceful, timeout: there is no `wait`; the promise resolves after
// every worker's loop has ended, which includes the completion of the batch
// in hand, and the pool is closed).  pg-boss leaves ANALYZE to autovacuum;
// without statistics its fetch sorts the whole backlog every time, so the
// harness (bench.mjs) analyzes every system's tables after the untimed
// enqueue of a drain, as autovacuum would have in a running system.
//
// pickupLatency(samples): one worker (localConcurrency 1, batchSize 1), the
// way the peers measure with one consumer.  Per sample: send() one job (its
// own INSERT, committed when it returns); the sample is from send()
// returning to the handler's first line; then wait (findJobs) until the job
// is completed, so the next sample starts with the queue idle.  A polling
// worker's pickup depends on where in its polling cycle a job arrives, and
// a producer that sends right after the previous completion would always land
// at the same point of it (just after the worker went to sleep, a full
// interval every time), so in polling mode each send waits a uniformly random
// 0-500 ms first, spreading arrivals over the cycle the way independent
// arrivals would be.  With notifications (the default) the gap is 5 ms.  A handler can
// start before send() resolves in this process (the fetch can race the
// insert's reply); such a sample is counted as 0.
//
// completed(): pg-boss 10+ keeps no archive table: a completed job stays in
// the job table (pgboss.job, partitioned by queue name; this queue's rows
// live in pgboss.job_common) in state 'completed' until maintenance deletes it
// deleteAfterSeconds (default 7 days) after completion, and supervise is off
// here anyway.  So completed() counts pgboss.job rows of the queue in state
// 'completed', over a connection of its own (drain has closed the pool);
// after the 5-step machine, every step's job (n x steps).

import { performance } from 'node:perf_hooks';
import { PgBoss } from 'pg-boss';
import { enqueueWith, inChunks, sleep } from './common.mjs';

const QUEUE = 'bench';
const SCHEMA = 'pgboss';
const POLL_SECONDS = 0.5;		// api/workers: pollingIntervalSeconds >= 0.5
const NOTIFY = process.env.PG_BOSS_NOTIFY !== '0';

let boss = null;

// connection options from the PG* environment, as pg-boss's constructor
// takes them
function connection() {
	const c = {};
	if (process.env.PGHOST) c.host = process.env.PGHOST;
	if (process.env.PGPORT) c.port = Number(process.env.PGPORT);
	if (process.env.PGUSER) c.user = process.env.PGUSER;
	if (process.env.PGDATABASE) c.database = process.env.PGDATABASE;
	if (process.env.PGPASSWORD) c.password = process.env.PGPASSWORD;
	return c;
}

// setup starts pg-boss as above; env.pgBoss, when given (soak.mjs), adds
// to or overrides the constructor's options (env.pgBoss.constructor: for
// example supervise and its intervals) and the queue's (env.pgBoss.queue:
// for example deleteAfterSeconds)
export async function setup(env) {
	boss = new PgBoss({
		...connection(),
		schema: SCHEMA,
		max: env.concurrency,
		supervise: false,
		schedule: false,
		registerInstance: false,
		openTelemetry: { enabled: false },
		useListenNotify: NOTIFY,
		...env.pgBoss?.constructor,
	});
	boss.on('error', (err) => console.error('pg-boss error:', err.message));
	boss.on('warning', (w) => console.error('pg-boss warning:', w.message));
	await boss.start();
	await boss.createQueue(QUEUE, { ...(NOTIFY ? { notify: true } : {}), ...env.pgBoss?.queue });
}

// producer: a connection of its own (a pg Client, given to insert() as its
// `db`); insert(k, tag) inserts k jobs (data {"t": tag} when tagged) with
// one insert() call
export async function producer(env) {
	const c = new env.pg.Client(env.config);
	await c.connect();
	const db = { executeSql: (text, values) => c.query(text, values) };
	return {
		insert: (k, tag) => boss.insert(QUEUE,
			Array.from({ length: k }, () => (tag === undefined ? {} : { data: { t: tag } })), { db }),
		end: () => c.end(),
	};
}

export async function enqueue(env, n) {
	await enqueueWith(producer, env, n);
}

// workOptions are the work() options of the workers: batches of BATCH,
// CONCURRENCY fetch loops, polling at the minimum, burst while batches are
// full
function workOptions(env) {
	return {
		batchSize: env.batch,
		pollingIntervalSeconds: POLL_SECONDS,
		burstWhenBatchFull: true,
		localConcurrency: env.concurrency,
	};
}

// workUntil runs the workers (the options above) with handler(jobs), which
// returns how many of the batch count as done, until n are counted; then
// stops pg-boss gracefully (the batch in hand is completed first)
async function workUntil(env, n, handler) {
	let done = 0;
	let reached;
	const all = new Promise((resolve) => { reached = resolve; });
	await boss.work(QUEUE, workOptions(env), async (jobs) => {
		// (not `done += await ...`: that would read done before the await)
		const k = await handler(jobs);
		done += k;
		if (done >= n)
			reached();
	});
	await all;
	await boss.stop({ graceful: true, close: true });
}

// startWorkers runs the workers (the options above) with handler(jobs)
// until stop() is called: for soak.mjs, whose workers run for a time rather
// than for a number of jobs; stop() stops pg-boss gracefully (the batch in
// hand is completed first) and closes it
export async function startWorkers(env, handler) {
	await boss.work(QUEUE, workOptions(env), handler);
	return { stop: () => boss.stop({ graceful: true, close: true }) };
}

// drain works until n jobs are done, calling onStart(tag) for each job of
// a batch handed to the handler when given
export async function drain(env, n, onStart) {
	await workUntil(env, n, async (jobs) => {
		if (onStart)
			for (const j of jobs)
				onStart(j.data.t);
		return jobs.length;
	});
}

// fsmEnqueue inserts n jobs of the machine at step 1
export async function fsmEnqueue(env, n) {
	await inChunks(n, (k) => boss.insert(QUEUE, Array.from({ length: k }, () => ({ data: { step: 1 } }))));
}

// fsmRun: the batch handler inserts the next step of every job not at its
// last one with one insert() and returns (pg-boss then completes the
// batch); a machine is finished when its last step's job is handled
export async function fsmRun(env, n, steps) {
	await workUntil(env, n, async (jobs) => {
		const next = jobs.filter((j) => j.data.step < steps)
			.map((j) => ({ data: { step: j.data.step + 1 } }));
		if (next.length > 0)
			await boss.insert(QUEUE, next);
		return jobs.length - next.length;
	});
}

export async function pickupLatency(env, samples) {
	let waiting = null;
	await boss.work(QUEUE, {
		batchSize: 1,
		pollingIntervalSeconds: POLL_SECONDS,
		localConcurrency: 1,
	}, async ([job]) => {
		const t = performance.now();
		if (waiting)
			waiting({ t, id: job.id });
	});
	const ms = [];
	for (let i = 0; i < samples; i++) {
		const started = new Promise((resolve) => { waiting = resolve; });
		await sleep(NOTIFY ? 5 : Math.random() * POLL_SECONDS * 1000);
		const id = await boss.send(QUEUE, {});
		const sent = performance.now();
		const got = await started;
		waiting = null;
		if (got.id !== id)
			throw new Error(`pg-boss: handler got job ${got.id}, sent ${id}`);
		ms.push(Math.max(0, got.t - sent));
		// the queue idle again: this job completed before the next is sent
		for (;;) {
			const [job] = await boss.findJobs(QUEUE, { id });
			if (job && job.state === 'completed')
				break;
			await sleep(1);
		}
	}
	await boss.stop({ graceful: true, close: true });
	return ms;
}

export async function completed(env) {
	const c = new env.pg.Client(env.config);
	await c.connect();
	const { rows } = await c.query(
		`SELECT count(*)::int AS n FROM ${SCHEMA}.job WHERE name = $1 AND state = 'completed'`,
		[QUEUE]);
	await c.end();
	return rows[0].n;
}
