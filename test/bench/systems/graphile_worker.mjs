// test/bench/systems/graphile_worker.mjs - graphile-worker 0.18.0 for bench.mjs.
//
// Configuration: the documented high-throughput one, from the graphile-worker
// docs page "Performance" (worker.graphile.org/docs/performance), sections
// "Quick stats" and "Batching" (sub-sections "localQueue" and
// "completeJobBatchDelay / failJobBatchDelay"):
//
//   run({ pgPool, concurrency: CONCURRENCY, preset: { worker: {
//       concurrentJobs: CONCURRENCY, maxPoolSize: CONCURRENCY + 1,
//       localQueue: { size: max(BATCH, CONCURRENCY + 1) },
//       completeJobBatchDelay: 0, failJobBatchDelay: 0 } } })
//
//   - localQueue: the pool fetches and locks `size` jobs per query and hands
//     them to its workers locally ("Batching" / "localQueue": disabled by
//     default, "can have a significant impact on high throughput queues ...
//     sometimes by an order of magnitude").  The size is the harness's BATCH;
//     it is raised to CONCURRENCY + 1 if BATCH is smaller (the docs' "sensible
//     default ... one more than concurrency"; graphile warns below
//     CONCURRENCY).
//   - completeJobBatchDelay / failJobBatchDelay = 0: completions (and
//     failures) are released in batches, one DELETE per batch instead of one
//     per job.  0 is the value of the docs' "Quick stats" / "perfTest With
//     batching" configuration (the one that gives the quoted ~184k jobs/s):
//     everything completed within one timer tick goes in one round trip.
//     (The "Batching" section suggests 25 as a starting point and 250 as a
//     default to cut database load; with a larger delay a job stays locked,
//     not yet durably complete, for that long after its handler returns.)
//   - localQueue.refetchDelay is NOT set: it exists to stop many worker
//     instances hammering the database when there are too few jobs to go
//     round, by making an idle pool ignore "new job" notifications for
//     ~durationMs; with the single instance here it only adds that much pickup
//     latency, and it is off by default.
//   - Wake-up is graphile's normal one: LISTEN "jobs:insert" on a dedicated
//     connection (add_job / add_jobs NOTIFY), plus the default 2 s poll.
//
// Connections: one pg.Pool (env.pg, env.config, i.e. the PG* environment) of
// max CONCURRENCY + 1, passed as `pgPool` (graphile then ignores maxPoolSize,
// set to the same number for the record).  graphile-worker holds one of
// these permanently for its LISTEN; the other CONCURRENCY are shared, on
// demand, by the local queue's batch fetches, the batched completions and
// (in pickupLatency) the add_job calls and the completion check.  The
// docs' own perfTest uses the same shape (concurrentJobs 24, maxPoolSize 25).
// A producer (enqueue, and the mixed workload's two) has a pool of one
// connection of its own and commits one addJobs() call per batch (addJobs =
// one add_jobs() SQL call = one transaction, committed when it returns;
// add_jobs NOTIFYs); enqueue() commits chunks of 10,000 jobs, one after the
// other, as every system's enqueue does (bench.mjs).
//
// The 5-step machine: graphile has no state machine, so a step is a job
// of the task 'step' with payload {"step": k}: the task of a step before
// the last adds the job of the next step with helpers.addJob (on the
// runner's pool, committed before the task returns; the finished job's
// completion follows in graphile's completion batch).  Each addJob is a
// transaction of its own that NOTIFYs, and PostgreSQL serializes the
// commits of notifying transactions (a lock on the database object, held
// through the commit's WAL flush: "Lock:object" waits), so the machine
// runs at about one step per synchronous commit.
//
// Completion counting: graphile deletes a job when it completes, so
// completed() = jobs ever inserted (the last value of the sequence behind
// _private_jobs.id, found with pg_get_serial_sequence: 0.18's migrations
// leave it named jobs_id_seq1; a fresh database per run and no insert rolled
// back, so it is exactly the number added) minus the rows still in
// graphile_worker._private_jobs (queued, locked, retrying or permanently
// failed).  drain() counts `job:success` events only to know when to stop;
// it then stops the runner gracefully, which flushes the pending completion
// batch (the batcher's release awaits its last DELETE) before resolving, so
// all n are durably completed when drain() returns.  After the 5-step
// machine, completed() counts every step's job (n x steps).
//
// Logging: graphile's default logger prints an info line per completed job
// on stdout; a logger that keeps only warnings and errors (on stderr) is used
// instead, so stdout carries only bench.mjs's JSON line.

import { performance } from 'node:perf_hooks';
import { EventEmitter } from 'node:events';
import { Logger, run, runMigrations, makeWorkerUtils } from 'graphile-worker';
import { enqueueWith, inChunks, sleep } from './common.mjs';

const logger = new Logger(() => (level, message) => {
	if (level === 'error' || level === 'warning')
		process.stderr.write(`[graphile-worker ${level}] ${message}\n`);
});

const noop = async () => {};

function makePool(env, max) {
	const pool = new env.pg.Pool({ ...env.config, max });
	// graphile-worker wants both handlers on a pool it is given (it warns
	// otherwise): errors of idle and of checked-out clients are logged, pg
	// raises them again on the next query anyway
	const report = (err) => logger.error(`PostgreSQL client error: ${err.message}`);
	pool.on('error', report);
	pool.on('connect', (client) => client.on('error', report));
	return pool;
}

function options(env, pgPool, taskList, events) {
	const concurrency = env.concurrency;
	return {
		pgPool,
		logger,
		events,
		concurrency,
		noHandleSignals: true,
		taskList,
		parsedCronItems: [],
		preset: {
			worker: {
				concurrentJobs: concurrency,
				maxPoolSize: concurrency + 1,
				localQueue: { size: Math.max(env.batch, concurrency + 1) },
				completeJobBatchDelay: 0,
				failJobBatchDelay: 0,
			},
		},
	};
}

export async function setup(env) {
	const pool = makePool(env, 1);
	try {
		await runMigrations({ pgPool: pool, logger });
	} finally {
		await pool.end();
	}
}

// ownUtils makes worker utils on a pool of one connection of their own;
// end() releases both
async function ownUtils(env) {
	const pool = makePool(env, 1);
	const utils = await makeWorkerUtils({ pgPool: pool, logger });
	return {
		utils,
		end: async () => {
			await utils.release();
			await pool.end();
		},
	};
}

// specs is k addJobs specs of one task with one payload
function specs(identifier, k, payload) {
	return Array.from({ length: k }, () => ({ identifier, payload }));
}

// producer: one connection; insert(k, tag) adds k no-op jobs (payload
// {"t": tag} when tagged) with one addJobs() call
export async function producer(env) {
	const { utils, end } = await ownUtils(env);
	return {
		insert: (k, tag) => utils.addJobs(specs('noop', k, tag === undefined ? {} : { t: tag })),
		end,
	};
}

export async function enqueue(env, n) {
	await enqueueWith(producer, env, n);
}

// runUntil runs a runner with taskList until `counts` has said yes for n
// successful jobs (job:success), then stops it gracefully: the stop
// flushes the pending completion batch, so they are durably complete when
// it resolves
async function runUntil(env, taskList, n, counts) {
	const pool = makePool(env, env.concurrency + 1);
	const events = new EventEmitter();
	let done = 0;
	let reached;
	const allDone = new Promise((resolve) => { reached = resolve; });
	events.on('job:success', ({ job }) => {
		if (counts(job) && ++done >= n)
			reached();
	});
	try {
		const runner = await run(options(env, pool, taskList, events));
		// the runner only ends early on a fatal error (or a breaking migration)
		const ended = runner.promise.then(
			() => { throw new Error('graphile-worker runner exited before the run finished'); });
		ended.catch(() => {});
		await Promise.race([allDone, ended]);
		await runner.stop();
		await runner.promise;
	} finally {
		await pool.end();
	}
}

// startRunner starts a runner with taskList (the configuration above,
// events on the emitter given) until stop() is called: for soak.mjs, whose
// workers run for a time rather than for a number of jobs; stop() stops it
// gracefully (the pending completion batch is flushed) and ends its pool
export async function startRunner(env, taskList, events) {
	const pool = makePool(env, env.concurrency + 1);
	let runner;
	try {
		runner = await run(options(env, pool, taskList, events));
	} catch (err) {
		await pool.end();
		throw err;
	}
	return {
		stop: async () => {
			await runner.stop();
			await runner.promise.catch(() => {});
			await pool.end();
		},
	};
}

// drain runs the no-op task until n jobs succeeded, calling onStart(tag)
// when each starts if given
export async function drain(env, n, onStart) {
	const task = onStart ? async (payload) => { onStart(payload.t); } : noop;
	await runUntil(env, { noop: task }, n, () => true);
}

// fsmEnqueue adds n jobs of the task 'step' at step 1
export async function fsmEnqueue(env, n) {
	const { utils, end } = await ownUtils(env);
	try {
		await inChunks(n, (k) => utils.addJobs(specs('step', k, { step: 1 })));
	} finally {
		await end();
	}
}

// fsmRun: the task of step k < steps adds the job of step k + 1
// (helpers.addJob, its own transaction on the pool) and returns; a machine
// is finished when its last step's job succeeded
export async function fsmRun(env, n, steps) {
	const step = async (payload, helpers) => {
		if (payload.step < steps)
			await helpers.addJob('step', { step: payload.step + 1 });
	};
	await runUntil(env, { step }, n, (job) => job.payload.step >= steps);
}

export async function pickupLatency(env, samples) {
	const pool = makePool(env, env.concurrency + 1);
	const events = new EventEmitter();
	let startedAt = null;		// performance.now() when the handler started
	let onStart = null;
	let onComplete = null;
	const task = async () => {
		startedAt = performance.now();
		onStart?.();
	};
	events.on('job:complete', ({ job }) => onComplete?.(job));
	const firstFetch = new Promise((resolve) => events.once('localQueue:getJobs:complete', resolve));
	const out = [];
	let runner = null;
	try {
		runner = await run(options(env, pool, { noop: task }, events));
		// Idle and waiting: the local queue has made its first (empty) fetch,
		// and the listener's LISTEN has been executed (pool:listen:success is
		// emitted before the LISTEN statement is sent).
		await firstFetch;
		for (;;) {
			const { rows } = await pool.query(
				`SELECT count(*)::int AS c FROM pg_stat_activity
				  WHERE datname = current_database() AND state = 'idle'
				    AND query LIKE 'LISTEN "jobs:insert"%'`);
			if (rows[0].c > 0)
				break;
			await sleep(5);
		}
		for (let i = 0; i < samples; i++) {
			startedAt = null;
			let jobId = null;
			const started = new Promise((resolve) => { onStart = resolve; });
			const completed = new Promise((resolve) => {
				onComplete = (job) => { if (jobId === null || String(job.id) === jobId) resolve(); };
			});
			const job = await runner.addJob('noop', {});
			const addedAt = performance.now();
			jobId = String(job.id);
			await started;
			out.push(startedAt - addedAt);
			// wait for the job to finish: its handler done and its completion
			// (a batched DELETE) committed, so the queue is idle again
			await completed;
			for (;;) {
				const { rowCount } = await pool.query(
					'SELECT 1 FROM graphile_worker._private_jobs WHERE id = $1', [jobId]);
				if (rowCount === 0)
					break;
				await sleep(1);
			}
		}
	} finally {
		onStart = onComplete = null;
		if (runner) {
			await runner.stop();
			await runner.promise.catch(() => {});
		}
		await pool.end();
	}
	return out;
}

export async function completed(env) {
	const client = new env.pg.Client(env.config);
	await client.connect();
	try {
		const { rows } = await client.query(
			`SELECT pg_sequence_last_value(
			            pg_get_serial_sequence('graphile_worker._private_jobs', 'id'))
			      - (SELECT count(*) FROM graphile_worker._private_jobs) AS done`);
		return Number(rows[0].done);
	} finally {
		await client.end();
	}
}
