// test/bench/bench.mjs - one measurement of one system on one workload.
//
//   node bench.mjs SYSTEM WORKLOAD N [CONCURRENCY] [BATCH]
//
// Connects with the libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE:
// a fresh database per run, made by run.sh), prints one JSON line with what
// it measured, and exits.  Every system is driven the same way: from this
// Node process, through `pg`, with CONCURRENCY connections doing the work
// (default 4) and batches of BATCH (default 50) where the system batches.
//
// A system is a module systems/SYSTEM.mjs exporting:
//   setup(env)                   create its schema in the empty database;
//   enqueue(env, n)              insert n no-op one-step jobs, committed when
//                                it returns, with the system's bulk API in
//                                calls of up to 10,000 jobs, one after the
//                                other on one connection;
//   drain(env, n)                run CONCURRENCY workers until n jobs are
//                                completed (each job's handler does nothing),
//                                then stop them; resolves when all n are
//                                durably completed;
//   pickupLatency(env, samples)  with the queue idle and a worker waiting the
//                                way the system waits, insert one job at a
//                                time; returns, per sample, the milliseconds
//                                from the insert's commit (its call
//                                returning) to the handler starting;
//   completed(env)               how many jobs are completed (checked after
//                                drain);
//   fsmEnqueue(env, n, steps)    optional (with fsmRun): insert n instances
//                                of a machine of `steps` no-op steps;
//   backlogFill(env, runnable, terminal)  optional (with pickAtBacklog):
//                                insert terminal finished jobs, then runnable
//                                queued ones;
//   pickAtBacklog(env, samples)  time `samples` claims of a batch of 10, each
//                                in a transaction rolled back (the backlog
//                                stays the same); ms per claim;
//   fsmRun(env, n, steps, inline)  run CONCURRENCY workers until all n have
//                                gone through the steps and finished, each
//                                step committed as its own transition; inline
//                                says whether a worker runs an instance's
//                                next step at once (gen_durable's continue)
//                                rather than queueing it.
// env = { pg (the pg module), config (pg client config), concurrency, batch }.
//
// Workloads:
//   enqueue  time enqueue(n): jobs/s;
//   drain    enqueue(n) and ANALYZE untimed, then time drain(n): jobs/s, and
//            the WAL written per job;
//   fsm      fsmEnqueue(n) untimed, then time the 5-step machine: steps/s;
//   fsm_inline  the same with inline steps (systems that have them);
//   latency  pickupLatency(n): p50, p95, p99, max in ms;
//   pick_backlog   claim latency with n runnable rows queued;
//   pick_terminal  claim latency with 1,000 runnable rows behind n finished
//            ones (systems that have pickAtBacklog).
// This is a benchmark, not a test: it checks only that the work was done.

import pg from 'pg';
import { performance } from 'node:perf_hooks';

const [system, workload, nArg, concArg, batchArg] = process.argv.slice(2);
if (!system || !workload || !nArg) {
	console.error('usage: node bench.mjs SYSTEM WORKLOAD N [CONCURRENCY] [BATCH]');
	process.exit(2);
}
const n = Number(nArg);
const env = {
	pg,
	config: {},		// everything from the PG* environment
	concurrency: Number(concArg || 4),
	batch: Number(batchArg || 50),
};

const sys = await import(`./systems/${system}.mjs`);

// steps of the fsm workloads' machine
const FSM_STEPS = 5;

// pick_backlog / pick_terminal: picks timed, and the runnable rows behind
// the terminal ones
const BACKLOG_SAMPLES = 200;
const BACKLOG_RUNNABLE = 1000;

// walLsn returns the server's current WAL position
async function walLsn(env) {
	const c = new pg.Client(env.config);
	await c.connect();
	const { rows } = await c.query('SELECT pg_current_wal_lsn() AS lsn');
	await c.end();
	return rows[0].lsn;
}

// walBytesSince returns the WAL written since lsn (by every session: a
// drain's own, plus whatever the system's background work wrote meanwhile)
async function walBytesSince(env, lsn) {
	const c = new pg.Client(env.config);
	await c.connect();
	const { rows } = await c.query(
		'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::float8 AS bytes', [lsn]);
	await c.end();
	return rows[0].bytes;
}

// percentile p (0..1) of sorted values
function percentile(sorted, p) {
	return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

async function main() {
	await sys.setup(env);
	const out = { system, workload, n, concurrency: env.concurrency, batch: env.batch };
	if (workload === 'enqueue') {
		const t0 = performance.now();
		await sys.enqueue(env, n);
		out.seconds = (performance.now() - t0) / 1000;
		out.per_sec = n / out.seconds;
	} else if (workload === 'drain') {
		await sys.enqueue(env, n);
		// statistics, as autovacuum would have gathered them in a running
		// system (without, some planners sort the whole backlog per fetch)
		const c = new pg.Client(env.config);
		await c.connect();
		await c.query('ANALYZE');
		await c.end();
		const wal0 = await walLsn(env);
		const t0 = performance.now();
		await sys.drain(env, n);
		out.seconds = (performance.now() - t0) / 1000;
		out.per_sec = n / out.seconds;
		out.wal_bytes_per_job = (await walBytesSince(env, wal0)) / n;
		const done = await sys.completed(env);
		if (done < n)
			throw new Error(`${system}: drain returned with ${done} of ${n} jobs completed`);
	} else if (workload === 'fsm' || workload === 'fsm_inline') {
		if (!sys.fsmRun)
			throw new Error(`${system} has no fsm workload`);
		await sys.fsmEnqueue(env, n, FSM_STEPS);
		const t0 = performance.now();
		await sys.fsmRun(env, n, FSM_STEPS, workload === 'fsm_inline');
		out.seconds = (performance.now() - t0) / 1000;
		out.steps = n * FSM_STEPS;
		out.per_sec = out.steps / out.seconds;
		const done = await sys.completed(env);
		if (done < n)
			throw new Error(`${system}: ${done} of ${n} machines finished`);
	} else if (workload === 'pick_backlog' || workload === 'pick_terminal') {
		if (!sys.pickAtBacklog)
			throw new Error(`${system} has no pick_backlog workload`);
		// n runnable rows; or BACKLOG_RUNNABLE runnable rows behind n terminal ones
		const terminal = workload === 'pick_terminal' ? n : 0;
		const runnable = workload === 'pick_terminal' ? BACKLOG_RUNNABLE : n;
		await sys.backlogFill(env, runnable, terminal);
		const c = new pg.Client(env.config);
		await c.connect();
		await c.query('ANALYZE');
		await c.end();
		const ms = (await sys.pickAtBacklog(env, BACKLOG_SAMPLES)).sort((a, b) => a - b);
		Object.assign(out, {
			runnable, terminal,
			p50: percentile(ms, 0.5), p95: percentile(ms, 0.95),
			p99: percentile(ms, 0.99), max: ms[ms.length - 1],
		});
	} else if (workload === 'latency') {
		// a job can start before its producer has even read the commit's
		// answer: that pickup counts as 0 ms
		const ms = (await sys.pickupLatency(env, n)).map((x) => Math.max(0, x))
			.sort((a, b) => a - b);
		if (ms.length !== n)
			throw new Error(`${system}: ${ms.length} latency samples of ${n}`);
		Object.assign(out, {
			p50: percentile(ms, 0.5), p95: percentile(ms, 0.95),
			p99: percentile(ms, 0.99), max: ms[ms.length - 1],
		});
	} else {
		throw new Error(`unknown workload ${workload}`);
	}
	console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (err) => {
	console.error(err);
	process.exit(1);
});
