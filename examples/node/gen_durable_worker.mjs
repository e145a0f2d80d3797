// gen_durable_worker.mjs - a small worker library for gen_durable on `pg`.
//
//   import { Worker, next, awaitSignals, spawn, done, fail, retry } from './gen_durable_worker.mjs';
//   const worker = new Worker({ queues: ['orders'], concurrency: 8 });
//   worker.step('checkout', 'start', async (job, ctx) => next('charge', { continue: true }));
//   await worker.start();    // picking now; SIGTERM/SIGINT stop it gracefully
//   await worker.stopped;    // resolves once it has stopped
//
// A Worker runs the loop gen_durable's README describes.  One picker per
// queue claims up to the free capacity with `pick` (a long-poll while the
// queue is idle); each job's step runs its handler, outside any
// transaction, concurrently up to `concurrency`;
// the outcomes are group-committed, one `flush` per batch (when every
// running step has finished, when `batch` outcomes wait, or after
// `flushDelayMs`); a `continue` that flush grants runs its next step at once
// without a pick; long steps get their lease extended (`heartbeat`) and are
// aborted when their claim is lost.  On stop (SIGTERM, SIGINT or stop()) it
// stops picking, lets running steps finish for `graceMs`, flushes their
// outcomes and releases the claims still running.
//
// A step holds one of the `concurrency` slots from its claim until its
// outcome is committed (or its claim is lost), so a continued step takes over
// its predecessor's slot and the limit is never exceeded.
//
// Steps run at least once: a step that crashed, timed out or lost its claim
// runs again, so handlers must be idempotent ((job.id, job.steps) is a key
// that stays the same across re-executions of a step).
//
// PgBouncer (transaction pooling): every call is one autocommitted statement
// with unnamed parameters (no named prepared statements, SET, LISTEN or
// other session state); the pickers and the control connection (flush,
// heartbeat, release) are separate clients because a client is busy while
// its pick waits.  A picker's connection stays open while the steps it
// claimed run: without PgBouncer, gen_durable takes the claims of a backend
// back when it exits (gen_durable.reclaim_on_disconnect).
//
// Ids and claims are bigints, and a JavaScript Number holds integers
// exactly only up to 2^53: the library keeps them as strings of decimal
// digits, as `pg` returns int8 (job.id, job.parent_id, job.claim, and the
// ids in job.inbox, job.awaited and job.children), and sends them back as
// such ("id": "9007199254740993"), which flush takes (gen_durable 0.7.0 and
// later).  Every outcome carries its job's claim: the fence that makes a late
// outcome of a lost claim `stale`.

import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import pg from 'pg';

// idsAsText is a jsonb array column of j (inbox, awaited, children) with
// each element's "id" as a string: pg parses jsonb with JSON.parse, which
// rounds an integer beyond 2^53
function idsAsText(column) {
	return `(SELECT coalesce(jsonb_agg(e || jsonb_build_object('id', e->>'id') ORDER BY n), '[]')
	           FROM jsonb_array_elements(j.${column}) WITH ORDINALITY AS x(e, n)) AS ${column}`;
}

// JOB_COLUMNS are the columns of a job j (gen_durable.job) that toJob reads
const JOB_COLUMNS = `j.id, j.fsm, j.fsm_version, j.step, j.state, j.attempt, j.steps,
	${idsAsText('inbox')}, ${idsAsText('awaited')}, ${idsAsText('children')},
	j.timed_out, j.parent_id, j.correlation_key, j.metadata, j.claim`;
const PICK_SQL = `SELECT ${JOB_COLUMNS}
                    FROM gen_durable.pick($1, $2, batch => $3, lease => $4::interval,
                                          wait => $5::interval, fsms => $6::text[]) AS j`;
// flush's answers in input order, each with the job of a granted continue
// turned back into typed columns (continued: there is one), so that its
// bigints come as strings like pick's
const FLUSH_SQL = `SELECT f.applied, f.detail, f.job IS NOT NULL AS continued, ${JOB_COLUMNS}
                     FROM gen_durable.flush($1::jsonb) WITH ORDINALITY AS f(id, applied, detail, job, n)
                          LEFT JOIN LATERAL jsonb_populate_record(NULL::gen_durable.job, f.job) AS j ON true
                    ORDER BY f.n`;
const HEARTBEAT_SQL = 'SELECT gen_durable.heartbeat($1, $2::bigint[], $3::interval) AS ids';
const RELEASE_SQL = 'SELECT gen_durable.release($1) AS released';

const KINDS = new Set(['next', 'retry', 'await', 'spawn', 'done', 'fail']);

// extra time after the grace period for the last flush and the release
const FINAL_MS = 5000;

// outcome builds an outcome of `kind` from its required fields and the
// options a helper accepts (`names` maps each option to its JSON key); an
// unknown option is an error, as gen_durable never ignores a misspelt key
function outcome(kind, fields, options, names) {
	const o = { kind, ...fields };
	for (const [key, value] of Object.entries(options)) {
		if (!Object.hasOwn(names, key))
			throw new TypeError(`${kind}: unknown option "${key}"`);
		if (value !== undefined)
			o[names[key]] = value;
	}
	return o;
}

// next goes on to `step`; `continue: true` asks to run it in this worker at
// once; `concurrencyKey: null` releases the key (absent keeps it); durations
// here and below are seconds or interval strings ("500 ms")
export function next(step, options = {}) {
	return outcome('next', { step }, options, {
		state: 'state', continue: 'continue', rateLimit: 'rate_limit', weight: 'weight',
		concurrencyKey: 'concurrency_key', fsmVersion: 'fsm_version',
	});
}

// awaitSignals parks the instance until one of `names` is signalled (or
// `timeout` passes: the job then has timed_out), then `step` runs
export function awaitSignals(names, step, options = {}) {
	return outcome('await', { names, step }, options, { timeout: 'timeout', state: 'state' });
}

// spawn inserts `children` (insert specs as insert_many takes them) and parks
// the instance until they have ended (join "all", or "first_error"), then
// `step` runs with their results in job.children
export function spawn(children, step, options = {}) {
	return outcome('spawn', { children, step }, options, { join: 'join', state: 'state' });
}

// done ends the instance with `result`
export function done(result) {
	return outcome('done', {}, { result }, { result: 'result' });
}

// fail ends the instance as failed with `error`
export function fail(error) {
	return outcome('fail', {}, { error }, { error: 'error' });
}

// retry runs the same step again after `delay` (absent: the worker's
// backoff), recording `error`
export function retry(options = {}) {
	return outcome('retry', {}, options, { delay: 'delay', error: 'error', state: 'state' });
}

// defaultLog writes one line per event to stderr; debug lines only when
// GEN_DURABLE_DEBUG is set
function defaultLog(level, message) {
	if (level !== 'debug' || process.env.GEN_DURABLE_DEBUG)
		process.stderr.write(`${new Date().toISOString()} ${level} ${message}\n`);
}

// sleep resolves after ms milliseconds
function sleep(ms) {
	return new Promise((resolve) => setTimeout(resolve, ms));
}

// interval renders milliseconds as a PostgreSQL interval
function interval(ms) {
	return `${ms} milliseconds`;
}

// errorJson is what a thrown value records in the instance's error column
function errorJson(err) {
	return err instanceof Error ? { name: err.name, message: err.message } : { message: String(err) };
}

// toJob is the job handed to a handler, from a pick row or a flush row
// (JOB_COLUMNS): ids and the claim as strings of decimal digits, exact
// (see the file header), steps as a Number
function toJob(row) {
	return {
		id: row.id,
		fsm: row.fsm,
		fsm_version: row.fsm_version,
		step: row.step,
		state: row.state,
		attempt: row.attempt,
		steps: Number(row.steps),
		inbox: row.inbox,
		awaited: row.awaited,
		children: row.children,
		timed_out: row.timed_out,
		parent_id: row.parent_id,
		correlation_key: row.correlation_key,
		metadata: row.metadata,
		claim: row.claim,
	};
}

// Slots counts the free places of the concurrency limit; acquire waits for
// at least one and takes up to `max`; it answers 0 once `closed`
class Slots {
	constructor(n) {
		this.free = n;
		this.closed = false;
		this.waiters = [];
	}

	async acquire(max) {
		while (this.free === 0 && !this.closed)
			await new Promise((resolve) => this.waiters.push(resolve));
		if (this.closed)
			return 0;
		const k = Math.min(this.free, max);
		this.free -= k;
		return k;
	}

	release(k) {
		this.free += k;
		if (k > 0)
			this.wake();
	}

	close() {
		this.closed = true;
		this.wake();
	}

	wake() {
		for (const resolve of this.waiters.splice(0))
			resolve();
	}
}

// Conn is one connection used for one purpose.  It connects on first use
// and is dropped when the connection fails (not on an SQL error: the claims
// a pick makes are tied to its backend, which must outlive them), so the
// next call reconnects; every call is its own transaction, so nothing but
// the socket is lost.
class Conn {
	constructor(config, log, role) {
		this.config = config;
		this.log = log;
		this.role = role;
		this.pending = null;
		this.client = null;
	}

	// connect resolves to the connected client, opening one if there is none
	connect() {
		if (this.pending === null) {
			const client = new pg.Client(this.config);
			const pending = client.connect().then(() => {
				this.client = client;
				return client;
			});
			client.on('error', (err) => {
				this.log('warn', `${this.role} connection: ${err.message}`);
				this.drop(pending);
			});
			client.on('end', () => this.drop(pending));
			client.on('notice', (msg) => this.log('warn', `${this.role}: server ${msg.severity}: ${msg.message}`));
			pending.catch(() => this.drop(pending));
			this.pending = pending;
		}
		return this.pending;
	}

	// drop forgets the connection `pending` resolves to, if still current,
	// and closes it
	drop(pending) {
		if (this.pending !== pending)
			return;
		this.pending = null;
		this.client = null;
		pending.then((client) => client.end().catch(() => {}), () => {});
	}

	async query(text, values) {
		const pending = this.connect();
		try {
			return await (await pending).query(text, values);
		} catch (err) {
			if (!(err instanceof pg.DatabaseError))
				this.drop(pending);
			throw err;
		}
	}

	// cancel sends a protocol CancelRequest for the statement running on this
	// connection (PgBouncer forwards it): it ends a waiting pick at once.
	// Like libpq, it waits for the other side to close the socket: a client
	// that closes first crashes PgBouncer 1.18, Debian 12's (pgbouncer#801)
	cancel() {
		const c = this.client;
		if (c === null || !c.processID)
			return;
		const socket = c.host.startsWith('/')
			? net.connect(`${c.host}/.s.PGSQL.${c.port}`)
			: net.connect(c.port, c.host);
		const request = Buffer.alloc(16);
		request.writeInt32BE(16, 0);
		request.writeInt32BE(80877102, 4);
		request.writeInt32BE(c.processID, 8);
		request.writeInt32BE(c.secretKey, 12);
		socket.setTimeout(10000, () => socket.destroy());
		socket.on('connect', () => socket.write(request));
		socket.on('end', () => socket.destroy());
		socket.on('error', (err) => this.log('warn', `${this.role}: cancel: ${err.message}`));
		socket.resume();
	}

	async end() {
		const pending = this.pending;
		this.pending = null;
		this.client = null;
		if (pending)
			await pending.then((client) => client.end(), () => {}).catch(() => {});
	}
}

// defaultId is a worker id unique per process
function defaultId() {
	return `node-${os.hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

// Worker picks, runs and flushes jobs of its queues (see the file header).
// Options (times in ms): queues (required), concurrency (8), batch (most
// jobs per pick and outcomes per flush trigger, 20), leaseMs (30000),
// waitMs (long-poll wait, 5000), flushDelayMs (10), retryBaseMs (1000) and
// retryCapMs (300000) for the backoff, graceMs (10000), signals (stop on
// these, ['SIGTERM', 'SIGINT']), id, pgConfig (default: DATABASE_URL when
// set, else the PG* environment), log(level, message).
export class Worker {
	constructor(options) {
		const {
			queues, concurrency = 8, batch = 20, leaseMs = 30000, waitMs = 5000,
			flushDelayMs = 10, retryBaseMs = 1000, retryCapMs = 300000, graceMs = 10000,
			signals = ['SIGTERM', 'SIGINT'], id = defaultId(), pgConfig, log = defaultLog,
		} = options;
		if (!Array.isArray(queues) || queues.length === 0)
			throw new TypeError('Worker: queues must be a non-empty array');
		if (!(concurrency >= 1 && concurrency <= 10000) || !(batch >= 1 && batch <= 10000))
			throw new TypeError('Worker: concurrency and batch must be 1..10000');
		Object.assign(this, {
			queues, concurrency, batch, leaseMs, waitMs, flushDelayMs, retryBaseMs, retryCapMs, graceMs, signals, id, log,
		});
		this.pgConfig = {
			application_name: id.slice(0, 63),
			keepAlive: true,
			keepAliveInitialDelayMillis: 10000,
			...(pgConfig ?? (process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {})),
		};
		this.handlers = new Map();   // fsm -> Map(step -> handler)
		this.slots = new Slots(concurrency);
		this.running = new Set();    // runs whose handler has not returned
		this.buffer = [];            // { run, outcome } waiting for a flush
		this.flushing = false;
		this.flushTimer = null;
		this.beating = false;        // a heartbeat call is in progress
		this.waiters = [];           // resolved by settle()
		this.stopping = false;
		this.giveUpAt = Infinity;    // database calls stop retrying after this, once stopping
		this.stopped = new Promise((resolve) => { this.resolveStopped = resolve; });
	}

	// step registers the handler of (fsm, step): async (job, ctx) => outcome,
	// where ctx = { signal (AbortSignal: the claim is lost or the worker
	// stops), worker (this worker's id), log }
	step(fsm, step, handler) {
		if (!this.handlers.has(fsm))
			this.handlers.set(fsm, new Map());
		this.handlers.get(fsm).set(step, handler);
		return this;
	}

	// start connects, then starts the pickers and the heartbeat; resolves
	// when picking (rejects when the database cannot be reached)
	async start() {
		if (this.handlers.size === 0)
			throw new Error('Worker: register step handlers before start()');
		this.control = new Conn(this.pgConfig, this.log, 'control');
		const pickers = this.queues.map((queue) =>
			({ queue, conn: new Conn(this.pgConfig, this.log, `pick ${queue}`) }));
		try {
			await Promise.all([this.control, ...pickers.map((p) => p.conn)].map((c) => c.connect()));
		} catch (err) {
			await Promise.all([this.control, ...pickers.map((p) => p.conn)].map((c) => c.end()));
			throw err;
		}
		this.pickers = pickers;
		this.pickLoops = pickers.map((p) => this.pickLoop(p));
		this.heartbeatTimer = setInterval(() => this.heartbeat(), this.leaseMs / 6);
		this.onSignal = (sig) => {
			this.log('info', this.stopping
				? `${sig}: already stopping` : `${sig}: stopping (grace ${this.graceMs} ms)`);
			this.stop();
		};
		for (const sig of this.signals)
			process.on(sig, this.onSignal);
		this.log('info', `worker ${this.id} picking ${this.queues.join(',')} (concurrency ${this.concurrency})`);
	}

	// pickLoop claims jobs of one queue while the worker runs: a pick without
	// wait for up to the free slots (at most `batch`); when it finds nothing,
	// a long-poll pick holding one slot, so that an idle queue holds back one
	// slot only, not the capacity the other queues may need
	async pickLoop({ queue, conn }) {
		const fsms = [...this.handlers.keys()];
		let idle = false;
		let failures = 0;
		while (!this.stopping) {
			const k = await this.slots.acquire(idle ? 1 : this.batch);
			if (k === 0)
				break;
			const sentAt = Date.now();
			let rows;
			try {
				({ rows } = await conn.query(PICK_SQL,
					[queue, this.id, k, interval(this.leaseMs), interval(idle ? this.waitMs : 0), fsms]));
				failures = 0;
			} catch (err) {
				this.slots.release(k);
				if (this.stopping)
					break;
				this.log('warn', `pick ${queue}: ${err.message}`);
				await sleep(Math.min(100 * 2 ** failures++, 5000));
				continue;
			}
			this.slots.release(k - rows.length);
			if (this.stopping)
				break;   // rows picked meanwhile go back with the release at the end of stop()
			idle = rows.length === 0;
			for (const row of rows)
				this.run(toJob(row), sentAt);
		}
	}

	// run starts one job's step; its outcome goes to the flush buffer unless
	// its claim was lost meanwhile (then it frees its slot: nothing to commit)
	run(job, leaseAt) {
		const run = { job, leaseAt, lost: false, controller: new AbortController() };
		this.running.add(run);
		this.execute(run).then((outcome) => {
			this.running.delete(run);
			if (run.lost)
				this.slots.release(1);
			else {
				this.buffer.push({ run, outcome });
				this.scheduleFlush();
			}
			this.settle();
		});
	}

	// execute calls the handler and resolves to its outcome; a thrown error
	// or an answer that is not an outcome becomes a retry with backoff, and a
	// retry without delay gets the backoff too
	async execute(run) {
		const { job } = run;
		try {
			const handler = this.handlers.get(job.fsm)?.get(job.step);
			if (!handler)
				throw new Error(`no handler for step ${job.fsm}/${job.step}`);
			const o = await handler(job, { signal: run.controller.signal, worker: this.id, log: this.log });
			if (!KINDS.has(o?.kind))
				throw new TypeError(`the handler of ${job.fsm}/${job.step} returned no outcome`);
			return o.kind === 'retry' && o.delay === undefined ? { ...o, delay: this.backoff(job.attempt) } : o;
		} catch (err) {
			if (!run.lost) {
				this.log('warn', `${job.fsm}/${job.step} #${job.id} attempt ${job.attempt}: ${err?.message ?? err}`);
				this.log('debug', err?.stack ?? String(err));
			}
			return { kind: 'retry', delay: this.backoff(job.attempt), error: errorJson(err) };
		}
	}

	// backoff is the delay in seconds before retry `attempt` + 1:
	// min(base * 2^attempt, cap), jittered down by up to half
	backoff(attempt) {
		const ms = Math.min(this.retryBaseMs * 2 ** attempt, this.retryCapMs);
		return (ms * (0.5 + Math.random() / 2)) / 1000;
	}

	// scheduleFlush flushes now when the batch is full (every running step
	// has finished, or `batch` outcomes wait, or the worker is stopping), and
	// otherwise within flushDelayMs; a flush in progress looks again when it
	// ends
	scheduleFlush() {
		if (this.flushing)
			return;
		if (this.activeSteps() === 0 || this.buffer.length >= this.batch || this.stopping)
			this.flush();
		else
			this.flushTimer ??= setTimeout(() => this.flush(), this.flushDelayMs);
	}

	// flush commits every buffered outcome with one flush call (retried
	// until it succeeds: an error rolls the whole call back), then handles
	// each entry's answer
	async flush() {
		clearTimeout(this.flushTimer);
		this.flushTimer = null;
		if (this.flushing || this.buffer.length === 0)
			return;
		this.flushing = true;
		const entries = this.latestClaims(this.buffer.splice(0));
		const body = entries.map(({ run, outcome: o }) => {
			// claim fences the outcome: applied only while this claim is the
			// latest; id and claim go back as the strings pick gave (exact)
			const entry = { ...o, id: run.job.id, worker: this.id, claim: run.job.claim };
			if (entry.continue && this.stopping)
				delete entry.continue;
			else if (entry.continue)
				entry.lease = interval(this.leaseMs);
			return entry;
		});
		const sentAt = Date.now();
		const rows = await this.call('flush', FLUSH_SQL, [JSON.stringify(body)]);
		this.flushing = false;
		entries.forEach((entry, i) => this.applied(entry, rows?.[i], sentAt));
		if (this.buffer.length > 0)
			this.scheduleFlush();
		this.settle();
	}

	// latestClaims keeps, of buffered outcomes for one id, the one of its
	// latest claim: an id picked again after its claim was lost has the old
	// claim's outcome too, which would be stale (and flush takes one outcome
	// per id); the dropped ones free their slots
	latestClaims(buffered) {
		const latest = new Map();
		for (const b of buffered) {
			const seen = latest.get(b.run.job.id);
			if (!seen || BigInt(seen.run.job.claim) < BigInt(b.run.job.claim))
				latest.set(b.run.job.id, b);
		}
		const kept = buffered.filter((b) => latest.get(b.run.job.id) === b);
		this.slots.release(buffered.length - kept.length);
		return kept;
	}

	// applied handles flush's answer for one entry (none: the flush was
	// given up while stopping): a granted continue runs its next step at
	// once in the same slot; an invalid outcome (a handler bug) is flushed
	// again as a retry recording why, and when that retry is invalid too
	// (what the library itself sends is wrong) the claim is left to expire
	// with its lease, rather than flushed again and again; anything else
	// frees the slot
	applied({ run, outcome: o, replacesInvalid }, row, sentAt) {
		const { job } = run;
		const what = `${job.fsm}/${job.step} #${job.id}`;
		if (row?.applied === 'ok' && row.continued) {
			if (this.stopping)
				this.slots.release(1);   // not run: the release at the end of stop() returns it
			else
				this.run(toJob(row), sentAt);
			return;
		}
		if (row?.applied === 'invalid') {
			this.log('error', `${what}: invalid ${o.kind} outcome: ${row.detail}`);
			if (replacesInvalid) {
				this.log('error', `${what}: left to its lease (the retry replacing an invalid outcome is invalid too)`);
				this.slots.release(1);
				return;
			}
			const error = { message: `invalid ${o.kind} outcome: ${row.detail}` };
			this.buffer.push({
				run, outcome: { kind: 'retry', delay: this.backoff(job.attempt), error }, replacesInvalid: true,
			});
			return;
		}
		if (row && (row.applied !== 'ok' || row.detail)) {
			const level = row.applied === 'stale' ? 'info'
				: row.applied === 'budget_exhausted' || row.detail === 'attempts_exhausted' ? 'warn' : 'debug';
			this.log(level, `${what}: ${o.kind} ${row.applied}${row.detail ? ` (${row.detail})` : ''}`);
		}
		this.slots.release(1);
	}

	// heartbeat extends the leases of the steps running for a third of the
	// lease or more, and aborts those whose claims are no longer held
	async heartbeat() {
		if (this.beating)
			return;
		const now = Date.now();
		const due = [...this.running].filter((r) => !r.lost && now - r.leaseAt >= this.leaseMs / 3);
		if (due.length === 0)
			return;
		this.beating = true;
		const rows = await this.call('heartbeat', HEARTBEAT_SQL,
			[this.id, due.map((r) => r.job.id), interval(this.leaseMs)], 1);
		this.beating = false;
		if (!rows)
			return;
		const owned = new Set(rows[0].ids);   // strings, like job.id
		for (const r of due) {
			if (owned.has(r.job.id))
				r.leaseAt = now;
			else if (this.running.has(r)) {
				this.log('warn', `${r.job.fsm}/${r.job.step} #${r.job.id}: claim lost, aborting the step`);
				r.lost = true;
				r.controller.abort(new Error('the claim was lost'));
			}
		}
	}

	// call runs one statement on the control connection and returns its
	// rows, retrying with backoff up to `tries` times (default: until it
	// succeeds, or until giveUpAt once stopping); null when it gave up
	async call(what, text, values, tries = Infinity) {
		for (let failures = 0; ; failures++) {
			try {
				return (await this.control.query(text, values)).rows;
			} catch (err) {
				this.log('warn', `${what}: ${err.message}`);
				if (failures + 1 >= tries || (this.stopping && Date.now() >= this.giveUpAt))
					return null;
				await sleep(Math.min(100 * 2 ** failures, 5000));
			}
		}
	}

	// activeSteps counts the running steps whose outcomes are still wanted
	// (a step whose claim was lost may run on, but will commit nothing)
	activeSteps() {
		let n = 0;
		for (const r of this.running)
			n += r.lost ? 0 : 1;
		return n;
	}

	// settle wakes whoever waits for running steps or flushes to change
	settle() {
		for (const resolve of this.waiters.splice(0))
			resolve();
	}

	// idleBy waits until nothing runs and nothing waits for a flush, or until
	// the time `deadline`; resolves to whether it is idle
	async idleBy(deadline) {
		for (;;) {
			if (this.activeSteps() === 0 && this.buffer.length === 0 && !this.flushing)
				return true;
			const left = deadline - Date.now();
			if (left <= 0)
				return false;
			let timer;
			await Promise.race([
				new Promise((resolve) => this.waiters.push(resolve)),
				new Promise((resolve) => { timer = setTimeout(resolve, left); }),
			]);
			clearTimeout(timer);
		}
	}

	// stop shuts the worker down gracefully (idempotent) and resolves, like
	// `stopped`, when done: stop picking (a waiting pick is cancelled), let
	// running steps finish for graceMs and flush their outcomes, abort the
	// steps still running, release every claim the worker still holds, close
	// the connections
	stop() {
		if (this.stopping)
			return this.stopped;
		this.stopping = true;
		const graceEnd = Date.now() + this.graceMs;
		this.giveUpAt = graceEnd + FINAL_MS;
		this.slots.close();
		for (const p of this.pickers ?? [])
			p.conn.cancel();
		this.shutdown(graceEnd)
			.catch((err) => this.log('error', `stop: ${err?.stack ?? err}`))
			.then(this.resolveStopped);
		return this.stopped;
	}

	// shutdown is stop()'s work after the pickers were told to stop
	async shutdown(graceEnd) {
		if (!this.pickers)
			return;
		await this.idleBy(graceEnd);
		await Promise.all(this.pickLoops);
		for (const r of [...this.running].filter((run) => !run.lost)) {
			this.log('warn', `${r.job.fsm}/${r.job.step} #${r.job.id}: still running after the grace period`);
			r.lost = true;
			r.controller.abort(new Error('the worker is stopping'));
		}
		clearInterval(this.heartbeatTimer);
		await this.idleBy(this.giveUpAt);   // the last flush (running steps are lost now)
		const rows = await this.call('release', RELEASE_SQL, [this.id]);
		if (rows && rows[0].released > 0)
			this.log('info', `released ${rows[0].released} claims`);
		await Promise.all([this.control, ...this.pickers.map((p) => p.conn)].map((c) => c.end()));
		for (const sig of this.signals)
			process.off(sig, this.onSignal);
		this.log('info', `worker ${this.id} stopped`);
	}
}
