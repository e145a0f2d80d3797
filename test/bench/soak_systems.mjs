// test/bench/soak_systems.mjs - the systems of the soak (soak.mjs): how each
// one is set up, fed at a fixed rate, drained and calibrated.
//
// A system is an object with:
//   name, schemas            its name and the schemas of its tables (what
//                            the sampler measures);
//   mix                      the mix it runs ({class: weight}; the peers:
//                            {job: 1});
//   setup(env, o)            its schema in the empty database of
//                            PGDATABASE (o: the soak's options; calibrate:
//                            true for the calibration database);
//   producer(env, o, stamps) resolves to { insert(k), end() }: one
//                            connection; insert(k) inserts k top-level
//                            instances of the mix with one call of the
//                            system's bulk API, each tagged with the call's
//                            tag of stamps (a Stamps);
//   workers(env, o, rec, stamps)  starts CONCURRENCY workers; resolves to
//                            { stop() }; they report to rec (soak.mjs's
//                            Recorder): the lag of each job as its handler
//                            starts (stamps.report: see below);
//                            rec.completed(k) per top-level instance
//                            finished; rec.steps(k), rec.pick(ms),
//                            rec.flush(ms), rec.count(name, k);
//   calibrate(env, o, n)     optional: the drain rate of the mix, top-level
//                            instances/s, over a backlog of n (inserted
//                            before, not timed); without it soak.mjs uses
//                            the system's one-step drain of bench.mjs's
//                            drivers (enqueue, then drain).
//
// gen_durable's mix (the classes; a top-level instance is one of them):
//   job      a one-step job: pick, done;
//   five     a 5-step machine run inline: s1..s4 each `next` with
//            "continue": true (flush returns the next step's job, run at
//            once without a pick), s5 done;
//   park     parks on a signal: start -> await "go" (timeout 10 min); the
//            signaller sends "go" SIGNAL_DELAY later (payload: the time
//            just before the signal call, its due time); woken -> done;
//   fan      a fan-out: start -> spawn FAN_WIDTH one-step children (class
//            leaf, same queue), join all; joined -> done (the joined
//            parent's due time is the start of the flush that ended its
//            last child);
//   limited  a one-step job with rate_limit 'soak_api'
//            (set_rate_limit: RATE_LIMIT_HEADROOM x this class's share of
//            the offered rate per second, burst the same);
//   gated    a one-step job with concurrency_key 'tenant:1'
//            (set_concurrency_limit('tenant', GATE_MAX)).
// Every instance is in the queue 'soak'; each worker loops like the
// README's: pick(batch => BATCH, wait => WAIT) on its own connection, runs
// the batch's steps (no-ops), one flush of all their outcomes (each naming
// its claim); the jobs the flush continued are run and flushed again at
// once, without a pick.
//
// The pickup lag of a job is from the commit that made it due to the pick's
// answer arriving with it (the handler's start, for the peers): each call
// that makes jobs due (a producer's insert, a signaller's statement, a
// flush with spawns) takes a tag, a small integer that the call writes into
// each job's state ("b") or signal payload, and the harness notes when the
// call started and when its answer (its commit) arrived; at the pick, lag =
// pick answer - commit answer (0 when the pick's answer came first), and
// lag_call = pick answer - call start (which adds the call's own time, as
// eligible_at, that call's now(), would).  A joined parent's commit is the
// flush that ended its last child.  It costs the engine a few bytes of
// state per instance and no statement.  Inline steps have no lag; a step
// requeued by a throttled continue is not sampled.
//
// The peers run one-step jobs only (no machines, signals or fan-out), the
// bench.mjs drivers' producer (insert(k, tag): the tag, in the payload's
// "t", is the due stamp) and their worker configuration (systems/*.mjs);
// the lag is from that stamp to the handler's start.  Their GC:
//   graphile_worker  deletes a job when it completes (its batched DELETE):
//                    nothing to set;
//   pg_boss          deletes completed jobs deleteAfterSeconds after their
//                    completion, in its maintenance (supervise: true): the
//                    queue's deleteAfterSeconds = the soak's retention,
//                    maintenanceIntervalSeconds and superviseIntervalSeconds
//                    = 10 (gen_durable's maintenance_interval); monitoring,
//                    expiry, its vacuum check and index rebuilds (reindex)
//                    at their defaults.

import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { connect, sleep } from './systems/common.mjs';

const QUEUE = 'soak';
const FAN_WIDTH = 3;
const FIVE_STEPS = 5;
export const GD_CLASSES = ['job', 'five', 'park', 'fan', 'limited', 'gated'];

// Stamps are the start and answer times (performance.now(), ms) of the
// calls that make jobs due, by tag
export class Stamps {
	constructor() {
		this.start = [];
		this.end = [];
	}

	// open notes the start of a call and returns its tag
	open() {
		this.start.push(performance.now());
		this.end.push(undefined);
		return this.start.length - 1;
	}

	// close notes the answer of the call of tag
	close(tag) {
		this.end[tag] = performance.now();
	}

	// report gives rec the lag, at t, of a job due by the call of tag
	report(rec, tag, t) {
		const end = this.end[tag];
		rec.lag(end === undefined ? 0 : t - end, t - this.start[tag]);
	}
}

// pattern spreads a mix ({class: weight}) over a cycle of `length`
// positions (smooth weighted round robin): the classes of consecutive
// instances, so that every batch carries the mix
function pattern(mix, length = 100) {
	const classes = Object.keys(mix).filter((k) => mix[k] > 0);
	const total = classes.reduce((a, k) => a + mix[k], 0);
	const current = Object.fromEntries(classes.map((k) => [k, 0]));
	const out = [];
	for (let i = 0; i < length; i++) {
		for (const k of classes)
			current[k] += mix[k];
		const best = classes.reduce((a, b) => (current[b] > current[a] ? b : a));
		current[best] -= total;
		out.push(best);
	}
	return out;
}

// ---------------------------------------------------------------- gen_durable

// specOf is the insert spec of a top-level instance of a class, made due
// by the call of tag b
function specOf(cls, b) {
	const spec = { fsm: cls, queue: QUEUE, state: { b } };
	if (cls === 'five')
		spec.step = 's1';
	else if (cls === 'limited')
		spec.rate_limit = 'soak_api';
	else if (cls === 'gated')
		spec.concurrency_key = 'tenant:1';
	return spec;
}

// Signaller sends "go" to parked instances `delayMs` after they parked,
// in one statement per tick (every 20 ms) for all that are due
class Signaller {
	constructor(env, delayMs, rec, stamps) {
		this.env = env;
		this.delayMs = delayMs;
		this.rec = rec;
		this.stamps = stamps;
		this.queue = [];		// [at, id], in order of at (one delay for all)
		this.stopped = false;
	}

	add(id) {
		this.queue.push([performance.now() + this.delayMs, id]);
	}

	async start() {
		this.c = await connect(this.env);
		this.done = this.loop();
	}

	async loop() {
		while (!this.stopped) {
			const now = performance.now();
			let k = 0;
			while (k < this.queue.length && this.queue[k][0] <= now)
				k++;
			if (k === 0) {
				await sleep(20);
				continue;
			}
			const ids = this.queue.splice(0, k).map(([, id]) => id);
			const tag = this.stamps.open();
			try {
				const { rows } = await this.c.query(
					`SELECT count(*) FILTER (WHERE a = 'delivered')::int AS delivered
					   FROM unnest($1::bigint[]) AS t(id),
					        LATERAL gen_durable.signal(t.id, 'go', pg_catalog.jsonb_build_object('b', $2::int)) AS a`,
					[ids, tag]);
				this.stamps.close(tag);
				this.rec.count('signals_sent', ids.length);
				this.rec.count('signals_not_delivered', ids.length - rows[0].delivered);
			} catch (err) {
				if (this.stopped)
					return;
				throw err;
			}
		}
	}

	async stop() {
		this.stopped = true;
		await this.done?.catch(() => {});
		await this.c?.end().catch(() => {});
	}
}

// gdOutcome is the outcome of a job of the mix; spawned children are made
// due by the flush of tag
function gdOutcome(job, worker, tag) {
	const base = { id: job.id, worker, claim: job.claim };
	switch (job.fsm) {
		case 'five': {
			const k = Number(job.step.slice(1));
			if (k >= FIVE_STEPS)
				return { ...base, kind: 'done' };
			return { ...base, kind: 'next', step: `s${k + 1}`, continue: true };
		}
		case 'park':
			if (job.step === 'start')
				return { ...base, kind: 'await', names: ['go'], step: 'woken', timeout: '10 min' };
			return { ...base, kind: 'done' };
		case 'fan':
			if (job.step === 'start') {
				const children = Array.from({ length: FAN_WIDTH },
					() => ({ fsm: 'leaf', queue: QUEUE, state: { b: tag } }));
				return { ...base, kind: 'spawn', children, step: 'joined' };
			}
			return { ...base, kind: 'done' };
		default:
			return { ...base, kind: 'done' };
	}
}

// gdDue is the tag of the call that made a picked job due, or null when
// its pick is not a lag sample (an inline step requeued by a throttled
// continue, a timed-out await)
function gdDue(job, lastChildFlush) {
	const entry = job.step === 'start' || (job.fsm === 'five' && job.step === 's1');
	if (entry)
		return job.state?.b ?? null;
	if (job.fsm === 'park' && job.step === 'woken')
		return job.timed_out ? null : (job.awaited?.[0]?.payload?.b ?? null);
	if (job.fsm === 'fan' && job.step === 'joined') {
		const tag = lastChildFlush.get(String(job.id)) ?? null;
		lastChildFlush.delete(String(job.id));
		return tag;
	}
	return null;
}

export function genDurable() {
	return {
		name: 'gen_durable',
		schemas: ['gen_durable'],

		async setup(env, o) {
			const c = await connect(env);
			await c.query('CREATE EXTENSION IF NOT EXISTS gen_durable');
			// the rate-limited class's share of the offered rate, with headroom
			// (calibration: no limit worth the name, the backlog is the test)
			const share = (o.mix.limited ?? 0) / Object.values(o.mix).reduce((a, b) => a + b, 0);
			const allowed = o.calibrate ? 1e6 : Math.max(1, share * o.rate * o.rateLimitHeadroom);
			await c.query("SELECT gen_durable.set_rate_limit('soak_api', $1, '1 second', burst => $1)", [allowed]);
			await c.query("SELECT gen_durable.set_concurrency_limit('tenant', $1)", [o.gateMax]);
			await c.end();
			return { rate_limit_per_s: allowed, gate_max: o.gateMax };
		},

		async producer(env, o, stamps) {
			const c = await connect(env);
			const cycle = pattern(o.mix);
			let n = Math.floor(Math.random() * cycle.length);
			return {
				insert: async (k) => {
					const tag = stamps.open();
					const specs = [];
					for (let i = 0; i < k; i++)
						specs.push(specOf(cycle[n++ % cycle.length], tag));
					await c.query('SELECT count(*) FROM gen_durable.insert_many($1::jsonb)',
						[JSON.stringify(specs)]);
					stamps.close(tag);
				},
				end: () => c.end(),
			};
		},

		async workers(env, o, rec, stamps) {
			const signaller = new Signaller(env, o.signalDelayMs, rec, stamps);
			await signaller.start();
			const lastChildFlush = new Map();		// parent id -> tag of the flush that ended its last child
			let stopping = false;
			const clients = [];
			const worker = async (i) => {
				const c = await connect(env);
				clients.push(c);
				const name = `w${i}`;
				while (!stopping) {
					const t0 = performance.now();
					const { rows } = await c.query(
						`SELECT id, fsm, step, state, claim, parent_id, awaited, timed_out
						   FROM gen_durable.pick($1, $2, batch => $3, wait => $4)`,
						[QUEUE, name, env.batch, o.wait]);
					const picked = performance.now();
					rec.pick(picked - t0);
					if (rows.length === 0)
						continue;
					for (const job of rows) {
						const tag = gdDue(job, lastChildFlush);
						if (tag !== null)
							stamps.report(rec, tag, picked);
						else if (job.fsm === 'park' && job.timed_out)
							rec.count('await_timeouts', 1);
					}
					let jobs = rows;
					while (jobs.length > 0) {
						const tag = stamps.open();
						const outcomes = jobs.map((j) => gdOutcome(j, name, tag));
						const res = await c.query(
							'SELECT applied, detail, job FROM gen_durable.flush($1)', [JSON.stringify(outcomes)]);
						stamps.close(tag);
						rec.flush(stamps.end[tag] - stamps.start[tag]);
						const next = [];
						let completed = 0;
						let steps = 0;
						res.rows.forEach((r, k) => {
							const job = jobs[k];
							const out = outcomes[k];
							if (r.applied === 'ok' || r.applied === 'requeued') {
								steps++;
								if (r.applied === 'requeued')
									rec.count('requeued', 1);
								if (out.kind === 'done' && job.fsm !== 'leaf')
									completed++;
								if (out.kind === 'done' && job.fsm === 'leaf' && job.parent_id != null) {
									const p = String(job.parent_id);
									lastChildFlush.set(p, Math.max(lastChildFlush.get(p) ?? 0, tag));
								}
								if (out.kind === 'await' && r.detail !== 'woken')
									signaller.add(job.id);
								if (r.job)
									next.push(r.job);
							} else {
								rec.count(r.applied, 1);
								if (r.applied === 'invalid')
									rec.note(`flush answered invalid: ${r.detail}`);
							}
						});
						rec.steps(steps);
						rec.completed(completed);
						jobs = next;
					}
				}
			};
			const running = Array.from({ length: env.concurrency }, (_, i) => worker(i).catch((err) => {
				if (!stopping)
					rec.fail(err);
			}));
			return {
				stop: async (graceful = true) => {
					stopping = true;
					await signaller.stop();
					if (graceful)
						await Promise.all(running);
					for (const c of clients)
						c.end().catch(() => {});
				},
			};
		},

		// calibrate drains a backlog of n top-level instances of the mix
		// (signals sent as soon as an instance parks): instances/s
		async calibrate(env, o, n, rec) {
			const stamps = new Stamps();
			const p = await this.producer(env, o, stamps);
			for (let done = 0; done < n; done += 1000)
				await p.insert(Math.min(1000, n - done));
			await p.end();
			const c = await connect(env);
			await c.query('ANALYZE');
			await c.end();
			const t0 = performance.now();
			const w = await this.workers(env, { ...o, signalDelayMs: 0, wait: '1 s' }, rec, stamps);
			while (rec.total.completed < n) {
				if (rec.failed)
					throw rec.failed;
				await sleep(10);
			}
			const seconds = (performance.now() - t0) / 1000;
			await w.stop();
			return { n, seconds, per_sec: n / seconds };
		},
	};
}

// ---------------------------------------------------------------- the peers

// peerProducer is a producer through a bench.mjs driver's: its tag (the
// payload's "t") is the call's
function peerProducer(drv) {
	return async (env, o, stamps) => {
		const p = await drv.producer(env);
		return {
			insert: async (k) => {
				const tag = stamps.open();
				await p.insert(k, tag);
				stamps.close(tag);
			},
			end: () => p.end(),
		};
	};
}

export function graphileWorker(drv) {
	return {
		name: 'graphile_worker',
		schemas: ['graphile_worker'],
		async setup(env) {
			await drv.setup(env);
			return { gc: 'a job is deleted when it completes' };
		},
		producer: peerProducer(drv),
		async workers(env, o, rec, stamps) {
			const events = new EventEmitter();
			events.on('job:success', () => {
				rec.completed(1);
				rec.steps(1);
			});
			const runner = await drv.startRunner(env, {
				noop: async (payload) => { stamps.report(rec, payload.t, performance.now()); },
			}, events);
			return { stop: () => runner.stop() };
		},
	};
}

export function pgBoss(drv) {
	return {
		name: 'pg_boss',
		schemas: ['pgboss'],
		async setup(env, o) {
			if (o.calibrate) {
				await drv.setup(env);
				return {};
			}
			const pgBossOptions = {
				constructor: { supervise: true, superviseIntervalSeconds: 10, maintenanceIntervalSeconds: 10 },
				queue: { deleteAfterSeconds: o.retentionSeconds },
			};
			await drv.setup({ ...env, pgBoss: pgBossOptions });
			return { pg_boss: pgBossOptions };
		},
		producer: peerProducer(drv),
		async workers(env, o, rec, stamps) {
			return drv.startWorkers(env, async (jobs) => {
				const t = performance.now();
				for (const j of jobs)
					stamps.report(rec, j.data.t, t);
				rec.completed(jobs.length);
				rec.steps(jobs.length);
			});
		},
	};
}

// system returns the soak's object for a system name
export async function system(name) {
	if (name === 'gen_durable')
		return genDurable();
	const drv = await import(`./systems/${name}.mjs`);
	if (name === 'graphile_worker')
		return { ...graphileWorker(drv), drv };
	if (name === 'pg_boss')
		return { ...pgBoss(drv), drv };
	throw new Error(`soak: unknown system ${name} (gen_durable, graphile_worker, pg_boss)`);
}
