// test/bench/bench.mjs - one measurement of one system on one workload.
//
//   node bench.mjs SYSTEM WORKLOAD N [CONCURRENCY] [BATCH]
//
// Connects with the libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE:
// a fresh database per run, made by run.sh), prints one JSON line with what
// it measured, and exits.  Every system is driven the same way: from this
// Node process, through `pg`, with CONCURRENCY connections doing the work
// (default 4) and batches of BATCH (default 50) where the system batches.
// BENCH_PGDATA, the cluster's data directory, turns on the server CPU
// measurement of drain (run.sh sets it); INFLIGHT_AGE is how long
// pick_inflight's claims are held before they are timed against (seconds,
// default 10).
//
// A system is a module systems/SYSTEM.mjs exporting:
//   setup(env)                   create its schema in the empty database;
//   producer(env)                resolves to { insert(k, tag), end() }: a
//                                producer on one connection of its own;
//                                insert(k, tag) inserts k no-op one-step jobs
//                                with one call of the system's bulk API,
//                                committed when it returns, each job
//                                carrying the number tag in its payload
//                                ({"t": tag}; no payload when tag is
//                                undefined); end() closes the connection;
//   enqueue(env, n)              insert n no-op one-step jobs, committed when
//                                it returns, through one producer in calls
//                                of up to 10,000 jobs, one after the other
//                                (common.mjs: enqueueWith);
//   drain(env, n, onStart)       run CONCURRENCY workers until n jobs are
//                                completed (each job's handler does nothing
//                                but call onStart(tag) first, when onStart
//                                is given), then stop them; resolves when
//                                all n are durably completed;
//   pickupLatency(env, samples)  with the queue idle and a worker waiting the
//                                way the system waits, insert one job at a
//                                time; returns, per sample, the milliseconds
//                                from the insert's commit (its call
//                                returning) to the handler starting;
//   completed(env)               how many jobs are completed (checked after
//                                drain and mixed; after fsm and fanout, at
//                                least the machines finished);
//   fsmEnqueue(env, n, steps)    optional (with fsmRun): insert n instances
//                                of a machine of `steps` no-op steps;
//   fsmRun(env, n, steps, inline)  run CONCURRENCY workers until all n have
//                                gone through the steps and finished, each
//                                step committed as its own transition (the
//                                peers: a job per step, each step's job
//                                adding the next one); inline says whether
//                                a worker runs an instance's next step at
//                                once (gen_durable's continue) rather than
//                                queueing it;
//   fsmInline                    true when fsmRun has the inline mode;
//   backlogFill(env, runnable, terminal)  optional (with pickAtBacklog):
//                                insert terminal finished jobs, then runnable
//                                queued ones;
//   pickAtBacklog(env, samples)  time `samples` claims of a batch of 10, each
//                                in a transaction rolled back (the backlog
//                                stays the same); ms per claim;
//   holdInFlight(env, n)         optional (with backlogFill and
//                                pickAtBacklog): claim n of the queued jobs
//                                and hold them, not completed, with leases
//                                longer than the run (common.mjs:
//                                holdClaims); resolves to { end() }, which
//                                closes the holders' connections;
//   fanoutEnqueue(env, n)        optional (with fanoutRun): insert n parents;
//   fanoutRun(env, n, width)     run the parents to the end: each spawns
//                                `width` no-op children, run by CONCURRENCY
//                                workers, and is woken by its join and
//                                picked again; returns per parent the ms from
//                                the return of the last flush of its
//                                children to the pick of its woken step;
//   signalLatency(env, samples)  optional: with instances parked awaiting a
//                                signal and a worker waiting in a long-poll
//                                pick, signal one at a time; returns per
//                                sample the ms from signal() returning to
//                                the pick returning the woken instance.
// env = { pg (the pg module), config (pg client config), concurrency, batch }.
//
// Workloads:
//   enqueue  time enqueue(n): jobs/s;
//   drain    enqueue(n) and ANALYZE untimed, then time drain(n): jobs/s, the
//            WAL written per job, and the CPU per job of the server (every
//            process of the cluster: the postmaster and its children, from
//            /proc, when BENCH_PGDATA names the data directory) and of this
//            client process (process.cpuUsage), in microseconds;
//   mixed    producers and consumers at once: MIXED_PRODUCERS producers,
//            each inserting batches of BATCH as fast as it can until n jobs
//            are inserted in all, while drain(n) runs; jobs/s = n / (time
//            from the start until all n are completed), and the end-to-end
//            latency, insert commit (the batch's insert call returning) to
//            handler start, p50/p95/p99 in ms (a handler starting before its
//            producer read the commit counts 0);
//   fsm      fsmEnqueue(n) untimed, then time the 5-step machine: steps/s;
//   fsm_inline  the same with inline steps (systems with fsmInline);
//   fanout   fanoutEnqueue(n) untimed, then time fanoutRun(n, 100):
//            children/s, and the join latency p50/p95/p99 over the parents;
//   latency  pickupLatency(n): p50, p95, p99, max in ms;
//   signal   signalLatency(n): p50, p95, p99, max in ms;
//   pick_backlog   claim latency with n runnable rows queued;
//   pick_terminal  claim latency with 1,000 runnable rows behind n finished
//            ones (systems that have pickAtBacklog);
//   pick_inflight  claim latency with n long steps in flight against none:
//            backlogFill(n + 10,000 runnable), then the claims of
//            pickAtBacklog timed twice (after a series not counted, to
//            warm up), before holdInFlight(n) and after its claims have
//            been held INFLIGHT_AGE seconds, each series after a VACUUM
//            ANALYZE (as autovacuum would have by then); p50, p95,
//            p99 and max of each, and the ratios held / none (systems that
//            have holdInFlight).
// This is a benchmark, not a test: it checks only that the work was done.

import pg from 'pg';
import { performance } from 'node:perf_hooks';
import { readFileSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { sleep } from './systems/common.mjs';

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

// pick_backlog / pick_terminal / pick_inflight: picks timed per series, and
// the runnable rows behind the terminal ones
const BACKLOG_SAMPLES = 200;
const BACKLOG_RUNNABLE = 1000;

// pick_inflight: the runnable rows behind the claims held, and how long
// they are held before the claims are timed (seconds)
const INFLIGHT_RUNNABLE = 10000;
const INFLIGHT_AGE = Number(process.env.INFLIGHT_AGE ?? 10);

// mixed: producers inserting at once
const MIXED_PRODUCERS = 2;

// fanout: children per parent
const FAN_WIDTH = 100;

// query runs one statement on a connection of its own and returns its rows
async function query(sql, params) {
	const c = new pg.Client(env.config);
	await c.connect();
	try {
		return (await c.query(sql, params)).rows;
	} finally {
		await c.end();
	}
}

// walLsn returns the server's current WAL position
async function walLsn() {
	return (await query('SELECT pg_current_wal_lsn() AS lsn'))[0].lsn;
}

// walBytesSince returns the WAL written since lsn (by every session: a
// drain's own, plus whatever the system's background work wrote meanwhile)
async function walBytesSince(lsn) {
	return (await query(
		'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::float8 AS bytes', [lsn]))[0].bytes;
}

// analyze gathers statistics, as autovacuum would have in a running system
// (without, some planners sort the whole backlog per fetch)
async function analyze() {
	await query('ANALYZE');
}

// serverCpuUs returns the CPU time (user + system, µs) the cluster has used
// so far: the postmaster's own and that of its children it has reaped
// (processes that exited: backends of closed connections), plus that of
// its live children (backends, background workers, auxiliary processes),
// from /proc/PID/stat; null without BENCH_PGDATA
function serverCpuUs() {
	const pgdata = process.env.BENCH_PGDATA;
	if (!pgdata)
		return null;
	const postmaster = Number(readFileSync(`${pgdata}/postmaster.pid`, 'utf8').split('\n')[0]);
	let ticks = 0;
	for (const entry of readdirSync('/proc')) {
		if (!/^\d+$/.test(entry))
			continue;
		let stat;
		try {
			stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
		} catch {
			continue;		// exited meanwhile
		}
		// the fields after "(comm)": state ppid ... utime (14th field of the
		// line) stime cutime cstime
		const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
		const [utime, stime, cutime, cstime] = f.slice(11, 15).map(Number);
		if (Number(entry) === postmaster)
			ticks += utime + stime + cutime + cstime;
		else if (Number(f[1]) === postmaster)
			ticks += utime + stime;
	}
	return ticks * 1e6 / clockTicks();
}

// clockTicks is the kernel's clock ticks per second (the unit of /proc stat)
function clockTicks() {
	return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
}

// clientCpuUs returns this process's CPU time so far (user + system, µs)
function clientCpuUs() {
	const { user, system } = process.cpuUsage();
	return user + system;
}

// percentile p (0..1) of sorted values
function percentile(sorted, p) {
	return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

// percentiles returns p50, p95, p99 and max of ms samples, negative ones
// counted as 0 (a job can start before its producer has even read the
// commit's answer)
function percentiles(ms) {
	const s = ms.map((x) => Math.max(0, x)).sort((a, b) => a - b);
	return {
		p50: percentile(s, 0.5), p95: percentile(s, 0.95),
		p99: percentile(s, 0.99), max: s[s.length - 1],
	};
}

// vacuumAnalyze vacuums and analyzes the database, as autovacuum would have
// once a good part of a table changed and some time passed
async function vacuumAnalyze() {
	await query('VACUUM ANALYZE');
}

// inFlight times the claims of pickAtBacklog with none in flight, then
// with n held for INFLIGHT_AGE seconds (the holders closed after); returns
// the percentiles of both series and the ratios held / none.  A first
// series, not counted, warms this process and the server's caches, so
// that the later series is not the only one to run warm.
async function inFlight() {
	await sys.backlogFill(env, n + INFLIGHT_RUNNABLE, 0);
	await vacuumAnalyze();
	await sys.pickAtBacklog(env, BACKLOG_SAMPLES);
	const none = percentiles(await sys.pickAtBacklog(env, BACKLOG_SAMPLES));
	const holders = await sys.holdInFlight(env, n);
	await sleep(INFLIGHT_AGE * 1000);
	await vacuumAnalyze();
	const held = percentiles(await sys.pickAtBacklog(env, BACKLOG_SAMPLES));
	await holders.end();
	const ratio = {};
	for (const p of ['p50', 'p95', 'p99'])
		ratio[p] = held[p] / none[p];
	return { none, held, ratio };
}

// checkCompleted fails the run unless at least `want` jobs are completed
async function checkCompleted(want, what) {
	const done = await sys.completed(env);
	if (done < want)
		throw new Error(`${system}: ${done} of ${want} ${what} completed`);
}

// timed runs fn and returns its result and the seconds it took
async function timed(fn) {
	const t0 = performance.now();
	const result = await fn();
	return { result, seconds: (performance.now() - t0) / 1000 };
}

// needs fails the run unless the system has the functions of a workload
function needs(...names) {
	for (const name of names)
		if (!sys[name])
			throw new Error(`${system} has no ${workload} workload (no ${name})`);
}

// mixed runs drain(n) while the producers (connected beforehand) insert
// the n jobs in batches of BATCH, each batch tagged with its number;
// returns the end-to-end latencies: per job, from its batch's insert
// returning to its handler start
async function mixed(producers) {
	const committedAt = [];		// per batch tag
	const startTag = [];		// per job started: its tag, and when
	const startAt = [];
	let inserted = 0;
	const produce = async (p) => {
		while (inserted < n) {
			const k = Math.min(env.batch, n - inserted);
			const tag = committedAt.length;
			committedAt.push(undefined);
			inserted += k;
			await p.insert(k, tag);
			committedAt[tag] = performance.now();
		}
	};
	const onStart = (tag) => {
		startTag.push(tag);
		startAt.push(performance.now());
	};
	await Promise.all([sys.drain(env, n, onStart), ...producers.map(produce)]);
	if (startTag.length < n)
		throw new Error(`${system}: ${startTag.length} of ${n} mixed jobs started`);
	return startAt.map((t, i) => t - committedAt[startTag[i]]);
}

async function main() {
	await sys.setup(env);
	const out = { system, workload, n, concurrency: env.concurrency, batch: env.batch };
	if (workload === 'enqueue') {
		const { seconds } = await timed(() => sys.enqueue(env, n));
		Object.assign(out, { seconds, per_sec: n / seconds });
	} else if (workload === 'drain') {
		await sys.enqueue(env, n);
		await analyze();
		const wal0 = await walLsn();
		const server0 = serverCpuUs();
		const client0 = clientCpuUs();
		const { seconds } = await timed(() => sys.drain(env, n));
		const client1 = clientCpuUs();
		const server1 = serverCpuUs();
		Object.assign(out, {
			seconds, per_sec: n / seconds,
			wal_bytes_per_job: (await walBytesSince(wal0)) / n,
			client_cpu_us_per_job: (client1 - client0) / n,
		});
		if (server0 !== null)
			out.server_cpu_us_per_job = (server1 - server0) / n;
		await checkCompleted(n, 'jobs');
	} else if (workload === 'mixed') {
		needs('producer');
		const producers = await Promise.all(
			Array.from({ length: MIXED_PRODUCERS }, () => sys.producer(env)));
		const { result: ms, seconds } = await timed(() => mixed(producers));
		await Promise.all(producers.map((p) => p.end()));
		const { p50, p95, p99 } = percentiles(ms);
		Object.assign(out, { producers: MIXED_PRODUCERS, seconds, per_sec: n / seconds, p50, p95, p99 });
		await checkCompleted(n, 'jobs');
	} else if (workload === 'fsm' || workload === 'fsm_inline') {
		needs('fsmEnqueue', 'fsmRun', ...(workload === 'fsm_inline' ? ['fsmInline'] : []));
		await sys.fsmEnqueue(env, n, FSM_STEPS);
		const { seconds } = await timed(
			() => sys.fsmRun(env, n, FSM_STEPS, workload === 'fsm_inline'));
		Object.assign(out, { seconds, steps: n * FSM_STEPS, per_sec: n * FSM_STEPS / seconds });
		await checkCompleted(n, 'machines');
	} else if (workload === 'fanout') {
		needs('fanoutEnqueue', 'fanoutRun');
		await sys.fanoutEnqueue(env, n);
		const { result: ms, seconds } = await timed(() => sys.fanoutRun(env, n, FAN_WIDTH));
		if (ms.length !== n)
			throw new Error(`${system}: ${ms.length} joins of ${n} parents`);
		const { p50, p95, p99, max } = percentiles(ms);
		Object.assign(out, {
			width: FAN_WIDTH, children: n * FAN_WIDTH, seconds, per_sec: n * FAN_WIDTH / seconds,
			join_p50: p50, join_p95: p95, join_p99: p99, join_max: max,
		});
		await checkCompleted(n * (FAN_WIDTH + 1), 'parents and children');
	} else if (workload === 'pick_backlog' || workload === 'pick_terminal') {
		needs('backlogFill', 'pickAtBacklog');
		// n runnable rows; or BACKLOG_RUNNABLE runnable rows behind n terminal ones
		const terminal = workload === 'pick_terminal' ? n : 0;
		const runnable = workload === 'pick_terminal' ? BACKLOG_RUNNABLE : n;
		await sys.backlogFill(env, runnable, terminal);
		await analyze();
		const ms = await sys.pickAtBacklog(env, BACKLOG_SAMPLES);
		Object.assign(out, { runnable, terminal, ...percentiles(ms) });
	} else if (workload === 'pick_inflight') {
		needs('backlogFill', 'pickAtBacklog', 'holdInFlight');
		Object.assign(out, {
			runnable: INFLIGHT_RUNNABLE, in_flight: n, age_s: INFLIGHT_AGE,
			samples: BACKLOG_SAMPLES, ...await inFlight(),
		});
	} else if (workload === 'latency' || workload === 'signal') {
		if (workload === 'signal')
			needs('signalLatency');
		const ms = workload === 'latency'
			? await sys.pickupLatency(env, n) : await sys.signalLatency(env, n);
		if (ms.length !== n)
			throw new Error(`${system}: ${ms.length} ${workload} samples of ${n}`);
		Object.assign(out, percentiles(ms));
	} else {
		throw new Error(`unknown workload ${workload}`);
	}
	console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (err) => {
	console.error(err);
	process.exit(1);
});
