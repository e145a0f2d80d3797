// test/bench/soak.mjs - one system under sustained load (soak.sh runs it,
// once per system, each on a throwaway cluster of its own).
//
//   node soak.mjs --system NAME [--seconds 1800] [--rate 0] [--rate-fraction 0.7]
//                 [--calibrate 100000] [--mix job=80,five=5,park=5,fan=2,limited=4,gated=4]
//                 [--concurrency 4] [--batch 100] [--producers 2] [--insert-batch 100]
//                 [--sample-seconds 10] [--hold-xmin 0] [--hold-at SECONDS]
//                 [--signal-delay 5] [--retention 60] [--wait '10 s']
//                 [--gate-max 8] [--rate-limit-headroom 1.25] [--label NAME] [--smoke]
//
// Connects with the libpq environment (PGHOST, PGPORT, PGUSER; it makes
// its own databases, soak_calib and soak, through the database postgres) and
// prints JSON lines on stdout: one "meta" line (the settings, the
// calibration, the offered rate), one "sample" line every --sample-seconds,
// one "end" line (totals and, once the load has stopped, exact counts of
// the engine's rows), each with "system": --label, or the system's name.  Progress goes to stderr.  BENCH_PGDATA (the
// cluster's data directory) turns on the server CPU measurement.
//
// The run:
// 1. Calibration (unless --rate is given): in the database soak_calib, a
//    drain of a backlog of --calibrate top-level instances of the system's
//    mix (gen_durable: its mix, signals sent as soon as an instance parks,
//    no rate limit; the peers: one-step jobs through bench.mjs's drivers,
//    enqueue then drain), timed from the workers' start to the last one
//    done; the database is dropped and a CHECKPOINT taken.  The offered
//    rate is --rate-fraction of that drain rate.
// 2. The soak, in the database soak, for --seconds: --producers producers,
//    each on a connection of its own, insert batches of --insert-batch
//    top-level instances, each batch when it falls due on a fixed schedule
//    (rate / producers per producer; a producer that falls behind inserts
//    at once, and its lateness is recorded); --concurrency workers drain
//    (soak_systems.mjs has each system's loop and mix); the table turns
//    over through the system's GC (gen_durable: gen_durable.retention, a
//    setting of the cluster; pg-boss: deleteAfterSeconds = --retention;
//    graphile-worker: deleted at completion).
// 3. With --hold-xmin S, one more connection opens a REPEATABLE READ
//    transaction with an xid at --hold-at (default: the middle of the run)
//    and holds it S seconds: the vacuum horizon is pinned meanwhile.
//
// Every sample (a window of --sample-seconds) has, from the harness:
// offered and inserted jobs/s, completed top-level instances/s (and
// steps/s), the pickup lag p50/p99/max (soak_systems.mjs says how it is
// stamped), the round trips of the inserts and (gen_durable) of pick
// (with its long-poll wait when the queue is empty) and flush, the
// producers' lateness; and from the server, read with catalog functions and the
// statistics views only (no scan of an engine table): per table of the
// system's schemas, heap (pg_relation_size), index (pg_indexes_size),
// TOAST (pg_total_relation_size of its TOAST table) and total
// (pg_total_relation_size, which adds the free space and visibility maps)
// bytes, n_live_tup, n_dead_tup, autovacuum and autoanalyze counts, the
// last autovacuum, inserts, updates (HOT), deletes, sequential scans and
// rows they read; per index, its size and scans, entries read and rows
// fetched (pg_stat_user_indexes: entries read per scan grow with the dead
// entries an index scan walks); the vacuums in progress
// (pg_stat_progress_vacuum: table, phase, blocks, index passes, dead
// tuples collected); the WAL written (pg_current_wal_lsn), checkpoints
// (pg_stat_bgwriter), the oldest transaction holding a snapshot; the
// server's CPU (procstat.mjs: every process of the cluster, split by kind:
// backends, autovacuum, the gen_durable maintenance worker, checkpointer,
// walwriter, bgwriter) and the client's; gen_durable: the deltas of
// gen_durable.stats, and from them the live and retained terminal rows.
// A benchmark, not a test: with --smoke it checks only that work was done.

import pg from 'pg';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { GD_CLASSES, Stamps, system } from './soak_systems.mjs';
import { ClusterCpu } from './procstat.mjs';
import { sleep } from './systems/common.mjs';

const { values: a } = parseArgs({
	options: {
		system: { type: 'string' },
		seconds: { type: 'string', default: '1800' },
		rate: { type: 'string', default: '0' },
		'rate-fraction': { type: 'string', default: '0.7' },
		calibrate: { type: 'string', default: '100000' },
		mix: { type: 'string', default: 'job=80,five=5,park=5,fan=2,limited=4,gated=4' },
		concurrency: { type: 'string', default: '4' },
		batch: { type: 'string', default: '100' },
		producers: { type: 'string', default: '2' },
		'insert-batch': { type: 'string', default: '100' },
		'sample-seconds': { type: 'string', default: '10' },
		'hold-xmin': { type: 'string', default: '0' },
		'hold-at': { type: 'string', default: '' },
		'signal-delay': { type: 'string', default: '5' },
		retention: { type: 'string', default: '60' },
		wait: { type: 'string', default: '10 s' },
		'gate-max': { type: 'string', default: '8' },
		'rate-limit-headroom': { type: 'string', default: '1.25' },
		label: { type: 'string' },
		smoke: { type: 'boolean', default: false },
	},
});
if (!a.system) {
	console.error('usage: node soak.mjs --system NAME [options] (see the header)');
	process.exit(2);
}

// parseMix reads "class=weight,..."
function parseMix(text, classes) {
	const mix = {};
	for (const part of text.split(',').filter(Boolean)) {
		const [k, v] = part.split('=');
		if (!classes.includes(k) || !(Number(v) >= 0))
			throw new Error(`soak: bad mix entry "${part}" (classes: ${classes.join(', ')})`);
		mix[k] = Number(v);
	}
	if (Object.values(mix).reduce((x, y) => x + y, 0) <= 0)
		throw new Error('soak: the mix is empty');
	return mix;
}

const sys = await system(a.system);
const seconds = Number(a.seconds);
const o = {
	seconds,
	rate: Number(a.rate),
	rateFraction: Number(a['rate-fraction']),
	calibrateN: Number(a.calibrate),
	// the peers run one-step jobs only
	mix: a.system === 'gen_durable'
		? parseMix(a.mix, GD_CLASSES) : { job: 1 },
	producers: Number(a.producers),
	insertBatch: Number(a['insert-batch']),
	sampleSeconds: Number(a['sample-seconds']),
	holdSeconds: Number(a['hold-xmin']),
	holdAt: a['hold-at'] !== '' ? Number(a['hold-at']) : seconds / 2,
	signalDelayMs: Number(a['signal-delay']) * 1000,
	retentionSeconds: Number(a.retention),
	wait: a.wait,
	gateMax: Number(a['gate-max']),
	rateLimitHeadroom: Number(a['rate-limit-headroom']),
};
const env = { pg, config: {}, concurrency: Number(a.concurrency), batch: Number(a.batch) };
const cpu = process.env.BENCH_PGDATA ? new ClusterCpu(process.env.BENCH_PGDATA) : null;
const cpuPoll = cpu ? setInterval(() => cpu.poll(), 1000) : null;

const label = a.label ?? sys.name;
const emit = (line) => process.stdout.write(JSON.stringify({ system: label, ...line }) + '\n');
const say = (text) => process.stderr.write(`soak ${label}: ${text}\n`);

// ------------------------------------------------------------ the recorder

// percentiles of ms samples: n, p50, p99, max
function percentiles(xs) {
	if (xs.length === 0)
		return { n: 0 };
	const s = Float64Array.from(xs).sort();
	const at = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
	return { n: s.length, p50: at(0.5), p99: at(0.99), max: s[s.length - 1] };
}

// Recorder collects what the producers and workers report, per window
class Recorder {
	constructor() {
		this.total = { completed: 0, steps: 0, inserted: 0, counts: {} };
		this.w = this.fresh();
		this.failed = null;
		this.notes = new Set();
	}

	fresh() {
		return {
			completed: 0, steps: 0, inserted: 0, lag: [], lagCall: [], pick: [], flush: [], insert: [],
			late: 0, counts: {},
		};
	}

	// lag notes a job's pickup lag: from the commit (the answer) of the call
	// that made it due, and from that call's start
	lag(ms, callMs) {
		this.w.lag.push(ms > 0 ? ms : 0);
		this.w.lagCall.push(callMs);
	}
	pick(ms) { this.w.pick.push(ms); }
	flush(ms) { this.w.flush.push(ms); }
	insert(ms) { this.w.insert.push(ms); }
	late(ms) { this.w.late = Math.max(this.w.late, ms); }
	completed(k) { this.w.completed += k; this.total.completed += k; }
	steps(k) { this.w.steps += k; this.total.steps += k; }
	inserted(k) { this.w.inserted += k; this.total.inserted += k; }
	count(name, k) {
		this.w.counts[name] = (this.w.counts[name] ?? 0) + k;
		this.total.counts[name] = (this.total.counts[name] ?? 0) + k;
	}
	note(text) {
		if (!this.notes.has(text))
			say(text);
		this.notes.add(text);
	}
	fail(err) { this.failed ??= err; }

	// take ends the window and starts the next
	take() {
		const w = this.w;
		this.w = this.fresh();
		return w;
	}
}

// ------------------------------------------------------------ the server

async function withClient(database, fn) {
	const c = new pg.Client({ database });
	await c.connect();
	try {
		return await fn(c);
	} finally {
		await c.end();
	}
}

async function createDb(name) {
	await withClient('postgres', async (c) => {
		await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
		await c.query(`CREATE DATABASE ${name}`);
	});
}

async function dropDb(name) {
	await withClient('postgres', (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

const TABLES_SQL = `
SELECT c.relname AS name,
       pg_relation_size(c.oid)::float8 AS heap,
       pg_indexes_size(c.oid)::float8 AS index,
       (CASE WHEN c.reltoastrelid <> 0 THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END)::float8 AS toast,
       pg_total_relation_size(c.oid)::float8 AS total,
       s.n_live_tup::float8 AS live, s.n_dead_tup::float8 AS dead,
       s.autovacuum_count::int AS autovacuums, s.autoanalyze_count::int AS autoanalyzes,
       s.vacuum_count::int AS vacuums,
       extract(epoch FROM s.last_autovacuum)::float8 AS last_autovacuum,
       s.n_tup_ins::float8 AS ins, s.n_tup_upd::float8 AS upd, s.n_tup_hot_upd::float8 AS hot_upd,
       s.n_tup_del::float8 AS del, s.seq_scan::float8 AS seq_scan,
       s.seq_tup_read::float8 AS seq_tup_read, s.idx_scan::float8 AS idx_scan
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
 WHERE n.nspname = ANY ($1) AND c.relkind = 'r'`;

const INDEXES_SQL = `
SELECT s.relname AS table, s.indexrelname AS name, pg_relation_size(s.indexrelid)::float8 AS size,
       s.idx_scan::float8 AS scans, s.idx_tup_read::float8 AS read, s.idx_tup_fetch::float8 AS fetched
  FROM pg_stat_user_indexes s WHERE s.schemaname = ANY ($1)`;

const VACUUM_SQL = `
SELECT p.pid, c.relname AS table, p.phase, p.heap_blks_total::float8 AS blks_total,
       p.heap_blks_scanned::float8 AS blks_scanned, p.heap_blks_vacuumed::float8 AS blks_vacuumed,
       p.index_vacuum_count::int AS index_passes, p.num_dead_tuples::float8 AS dead_collected,
       p.max_dead_tuples::float8 AS dead_max,
       extract(epoch FROM now() - a.xact_start)::float8 AS seconds,
       coalesce(a.query LIKE 'autovacuum:%', false) AS auto
  FROM pg_stat_progress_vacuum p LEFT JOIN pg_class c ON c.oid = p.relid
  LEFT JOIN pg_stat_activity a ON a.pid = p.pid
 WHERE p.datname = current_database()`;

const GLOBAL_SQL = `
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS wal,
       b.checkpoints_timed::int AS ckpt_timed, b.checkpoints_req::int AS ckpt_req,
       b.checkpoint_write_time::float8 AS ckpt_write_ms, b.checkpoint_sync_time::float8 AS ckpt_sync_ms,
       b.buffers_checkpoint::float8 AS buf_ckpt, b.buffers_clean::float8 AS buf_clean,
       b.buffers_backend::float8 AS buf_backend,
       d.xact_commit::float8 AS xact_commit, d.blks_read::float8 AS blks_read, d.blks_hit::float8 AS blks_hit,
       (SELECT max(extract(epoch FROM clock_timestamp() - xact_start)) FROM pg_stat_activity
         WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid())::float8 AS oldest_snapshot_s,
       (SELECT max(age(backend_xmin)) FROM pg_stat_activity
         WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid())::float8 AS oldest_xmin_age
  FROM pg_stat_bgwriter b, pg_stat_database d WHERE d.datname = current_database()`;

// Sampler reads the server's side of a sample: catalog functions and
// statistics views, one connection of its own
class Sampler {
	constructor(system) {
		this.system = system;
	}

	async start() {
		this.c = new pg.Client({});
		await this.c.connect();
		await this.c.query("SET application_name = 'soak sampler'");
	}

	async snapshot() {
		const c = this.c;
		const at = performance.now();
		const schemas = this.system.schemas;
		const tables = Object.fromEntries((await c.query(TABLES_SQL, [schemas])).rows.map((r) => [r.name, r]));
		const indexes = Object.fromEntries((await c.query(INDEXES_SQL, [schemas])).rows.map((r) => [r.name, r]));
		const vacuum = (await c.query(VACUUM_SQL)).rows;
		const global = (await c.query(GLOBAL_SQL)).rows[0];
		let stats = null;
		if (this.system.name === 'gen_durable')
			stats = Object.fromEntries((await c.query('SELECT counter, value::float8 AS value FROM gen_durable.stats'))
				.rows.map((r) => [r.counter, r.value]));
		let queue = null;
		if (this.system.name === 'pg_boss')
			queue = (await c.query("SELECT * FROM pgboss.queue WHERE name = 'bench'")).rows[0] ?? null;
		const server = cpu ? cpu.poll() : null;
		const client = process.cpuUsage();
		return {
			at, tables, indexes, vacuum, global, stats, queue, server,
			clientUs: client.user + client.system, took_ms: performance.now() - at,
		};
	}

	async end() {
		await this.c.end();
	}
}

// sum of a field over the tables of a snapshot
const sum = (tables, key) => Object.values(tables).reduce((x, t) => x + (t[key] ?? 0), 0);

// delta of a counter between two snapshots' maps (null when absent)
const delta = (a1, a0, key) => (a1?.[key] == null ? null : a1[key] - (a0?.[key] ?? 0));

// engineRows are gen_durable's live and retained terminal rows since the
// start, from its stats counters (the soak database starts empty)
function engineRows(s, base) {
	if (!s)
		return null;
	const d = (k) => (s[k] ?? 0) - (base[k] ?? 0);
	const created = d('inserted');
	const ended = d('committed_done') + d('committed_fail') + d('cancelled') + d('lease_failed');
	return { created, ended, live: created - ended, terminal: ended - d('gc_deleted'), gc_deleted: d('gc_deleted') };
}

// sampleLine builds a sample line from two snapshots and a recorder window
function sampleLine(t, s1, s0, base, w, hold) {
	const dt = (s1.at - s0.at) / 1000;
	const rate = (x) => x / dt;
	const tables = {};
	for (const [name, r] of Object.entries(s1.tables)) {
		const p = s0.tables[name] ?? {};
		tables[name] = {
			heap: r.heap, index: r.index, toast: r.toast, total: r.total, live: r.live, dead: r.dead,
			autovacuums: r.autovacuums - (base.tables[name]?.autovacuums ?? 0),
			autoanalyzes: r.autoanalyzes - (base.tables[name]?.autoanalyzes ?? 0),
			last_autovacuum: r.last_autovacuum,
			ins_per_s: rate(r.ins - (p.ins ?? 0)), upd_per_s: rate(r.upd - (p.upd ?? 0)),
			hot_upd_per_s: rate(r.hot_upd - (p.hot_upd ?? 0)), del_per_s: rate(r.del - (p.del ?? 0)),
			seq_scans: r.seq_scan - (p.seq_scan ?? 0), seq_tup_read: r.seq_tup_read - (p.seq_tup_read ?? 0),
			idx_scans: r.idx_scan - (p.idx_scan ?? 0),
		};
	}
	const indexes = {};
	for (const [name, r] of Object.entries(s1.indexes)) {
		const p = s0.indexes[name] ?? {};
		const scans = r.scans - (p.scans ?? 0);
		const read = r.read - (p.read ?? 0);
		indexes[name] = {
			table: r.table, size: r.size, scans, read, fetched: r.fetched - (p.fetched ?? 0),
			read_per_scan: scans > 0 ? read / scans : null,
		};
	}
	const g1 = s1.global;
	const g0 = s0.global;
	const gb = base.global;
	let cpuOut = null;
	if (s1.server && s0.server) {
		const byKind = {};
		for (const k of Object.keys(s1.server.by_kind_us))
			byKind[k] = s1.server.by_kind_us[k] - (s0.server.by_kind_us[k] ?? 0);
		const us = s1.server.total_us - s0.server.total_us;
		cpuOut = { server_us: us, server_cores: us / 1e6 / dt, by_kind_us: byKind };
	}
	const clientUs = s1.clientUs - s0.clientUs;
	return {
		type: 'sample', t, dt,
		offered_per_s: o.rate, inserted_per_s: rate(w.inserted), completed_per_s: rate(w.completed),
		steps_per_s: rate(w.steps), ratio: o.rate > 0 ? rate(w.completed) / o.rate : null,
		lag_ms: percentiles(w.lag), lag_call_ms: percentiles(w.lagCall),
		pick_ms: percentiles(w.pick), flush_ms: percentiles(w.flush), insert_ms: percentiles(w.insert),
		producer_late_ms: w.late, counts: w.counts,
		in_flight: rec.total.inserted - rec.total.completed,
		totals: {
			heap: sum(s1.tables, 'heap'), index: sum(s1.tables, 'index'), toast: sum(s1.tables, 'toast'),
			total: sum(s1.tables, 'total'), live: sum(s1.tables, 'live'), dead: sum(s1.tables, 'dead'),
			autovacuums: sum(s1.tables, 'autovacuums') - sum(base.tables, 'autovacuums'),
		},
		tables, indexes,
		vacuum: s1.vacuum,
		wal_bytes: g1.wal - g0.wal, wal_bytes_per_s: rate(g1.wal - g0.wal),
		checkpoints: { timed: g1.ckpt_timed - gb.ckpt_timed, req: g1.ckpt_req - gb.ckpt_req },
		checkpoint_write_ms: g1.ckpt_write_ms - g0.ckpt_write_ms,
		buffers: { checkpoint: g1.buf_ckpt - g0.buf_ckpt, clean: g1.buf_clean - g0.buf_clean, backend: g1.buf_backend - g0.buf_backend },
		blks_read: g1.blks_read - g0.blks_read, blks_hit: g1.blks_hit - g0.blks_hit,
		xact_per_s: rate(g1.xact_commit - g0.xact_commit),
		oldest_snapshot_s: g1.oldest_snapshot_s, oldest_xmin_age: g1.oldest_xmin_age,
		cpu: cpuOut, client_cores: clientUs / 1e6 / dt,
		engine: engineRows(s1.stats, base.stats ?? {}),
		stats: s1.stats ? Object.fromEntries(Object.keys(s1.stats).map((k) => [k, delta(s1.stats, s0.stats, k)])
			.filter(([, v]) => v !== 0)) : null,
		pg_boss_queue: s1.queue,
		hold_s: hold, sample_ms: s1.took_ms,
	};
}

// progress is the stderr line of a sample
function progress(s) {
	const mb = (x) => (x / 1048576).toFixed(0);
	const vac = s.vacuum.map((v) => `${v.table}:${v.phase}`).join(',') || '-';
	const lag = s.lag_ms.n ? `${s.lag_ms.p50.toFixed(1)}/${s.lag_ms.p99.toFixed(0)}` : '-';
	return `t=${s.t}s done/s=${s.completed_per_s.toFixed(0)} (${(100 * (s.ratio ?? 0)).toFixed(0)}%)` +
		` lag p50/p99=${lag}ms size=${mb(s.totals.total)}MB dead=${s.totals.dead}` +
		` av=${s.totals.autovacuums} vac=${vac} wal=${mb(s.wal_bytes_per_s)}MB/s` +
		` ckpt=${s.checkpoints.timed}+${s.checkpoints.req}` +
		(s.cpu ? ` cpu=${s.cpu.server_cores.toFixed(2)}` : '') + (s.hold_s > 0 ? ' HOLD' : '');
}

// ------------------------------------------------------------ the run

const rec = new Recorder();

// holdXmin holds a transaction with an xid (REPEATABLE READ: its snapshot
// too) from atMs to atMs + durMs after t0
function holdXmin(t0, atMs, durMs, state) {
	return (async () => {
		await sleep(Math.max(0, t0 + atMs - performance.now()));
		const c = new pg.Client({});
		await c.connect();
		await c.query("SET application_name = 'soak hold-xmin'");
		await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
		const { rows } = await c.query('SELECT txid_current()::text AS xid');
		state.from = (performance.now() - t0) / 1000;
		state.holding = true;
		say(`holding xid ${rows[0].xid} for ${durMs / 1000} s`);
		while (!state.stop && performance.now() < t0 + atMs + durMs)
			await sleep(100);
		await c.query('COMMIT');
		state.to = (performance.now() - t0) / 1000;
		state.holding = false;
		say('hold released');
		await c.end();
	})();
}

// produce inserts batches on a fixed schedule at `rate` per second until
// `until` (performance.now() ms)
async function produce(p, rate, t0, until) {
	const batch = o.insertBatch;
	let inserted = 0;
	for (;;) {
		const dueAt = t0 + ((inserted + batch) / rate) * 1000;
		if (dueAt > until || rec.failed)
			return;
		const ahead = dueAt - performance.now();
		if (ahead > 0)
			await sleep(ahead);
		else
			rec.late(-ahead);
		const t = performance.now();
		await p.insert(batch);
		rec.insert(performance.now() - t);
		inserted += batch;
		rec.inserted(batch);
	}
}

// calibrate measures the drain rate in a database of its own
async function calibrate() {
	await createDb('soak_calib');
	process.env.PGDATABASE = 'soak_calib';
	const co = { ...o, calibrate: true };
	let result;
	say(`calibrating: a drain of ${o.calibrateN}`);
	await sys.setup(env, co);
	if (sys.calibrate) {
		result = await sys.calibrate(env, co, o.calibrateN, new Recorder());
	} else {
		await sys.drv.enqueue(env, o.calibrateN);
		await withClient('soak_calib', (c) => c.query('ANALYZE'));
		const t0 = performance.now();
		await sys.drv.drain(env, o.calibrateN);
		const secs = (performance.now() - t0) / 1000;
		result = { n: o.calibrateN, seconds: secs, per_sec: o.calibrateN / secs };
	}
	await dropDb('soak_calib');
	await withClient('postgres', (c) => c.query('CHECKPOINT'));
	say(`drain rate ${result.per_sec.toFixed(0)}/s`);
	return result;
}

async function main() {
	let calibration = null;
	if (!(o.rate > 0)) {
		calibration = await calibrate();
		o.rate = Math.max(1, Math.round(calibration.per_sec * o.rateFraction));
	}
	await createDb('soak');
	process.env.PGDATABASE = 'soak';
	const setupInfo = await sys.setup(env, o);
	const settings = await withClient('soak', async (c) => Object.fromEntries((await c.query(
		`SELECT name, setting FROM pg_settings WHERE name IN ('max_wal_size', 'shared_buffers',
		        'autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_cost_delay',
		        'autovacuum_vacuum_cost_limit', 'autovacuum_vacuum_scale_factor',
		        'autovacuum_vacuum_insert_scale_factor', 'autovacuum_max_workers',
		        'checkpoint_timeout', 'synchronous_commit', 'fsync', 'full_page_writes',
		        'gen_durable.retention', 'gen_durable.gc_batch', 'gen_durable.maintenance_interval')`))
		.rows.map((r) => [r.name, r.setting])));
	emit({
		type: 'meta', seconds: o.seconds, offered_per_s: o.rate, rate_fraction: calibration ? o.rateFraction : null,
		calibration, mix: o.mix, concurrency: env.concurrency, batch: env.batch, producers: o.producers,
		insert_batch: o.insertBatch, sample_seconds: o.sampleSeconds, hold_xmin_s: o.holdSeconds,
		hold_at_s: o.holdSeconds > 0 ? o.holdAt : null, signal_delay_s: o.signalDelayMs / 1000,
		retention_s: o.retentionSeconds, wait: o.wait, setup: setupInfo, settings,
		started_at: new Date().toISOString(),
	});
	say(`offering ${o.rate}/s for ${o.seconds} s`);

	const sampler = new Sampler(sys);
	await sampler.start();
	const base = await sampler.snapshot();
	const stamps = new Stamps();
	const workers = await sys.workers(env, o, rec, stamps);
	const producers = await Promise.all(Array.from({ length: o.producers }, () => sys.producer(env, o, stamps)));
	const t0 = performance.now();
	const until = t0 + o.seconds * 1000;
	const producing = producers.map((p) => produce(p, o.rate / o.producers, t0, until)
		.catch((err) => rec.fail(err)));
	const hold = { holding: false, stop: false };
	const holding = o.holdSeconds > 0
		? holdXmin(t0, o.holdAt * 1000, o.holdSeconds * 1000, hold).catch((err) => rec.fail(err)) : null;

	let prev = base;
	let samples = 0;
	for (let k = 1; k * o.sampleSeconds <= o.seconds; k++) {
		const at = t0 + k * o.sampleSeconds * 1000;
		while (performance.now() < at) {
			if (rec.failed)
				throw rec.failed;
			await sleep(Math.min(200, at - performance.now()));
		}
		const snap = await sampler.snapshot();
		// the seconds of this window during which the transaction was held
		const w0 = (prev.at - t0) / 1000;
		const w1 = (snap.at - t0) / 1000;
		const held = hold.from === undefined ? 0
			: Math.max(0, Math.min(w1, hold.to ?? w1) - Math.max(w0, hold.from));
		const s = sampleLine(k * o.sampleSeconds, snap, prev, base, rec.take(), held);
		emit(s);
		say(progress(s));
		prev = snap;
		samples++;
	}
	if (rec.failed)
		throw rec.failed;
	await Promise.all(producing);
	hold.stop = true;
	await holding;
	await workers.stop(false);
	await Promise.all(producers.map((p) => p.end().catch(() => {})));
	const last = await sampler.snapshot();
	await sampler.end();

	// exact counts, now that the load has stopped
	const exact = await withClient('soak', async (c) => {
		if (sys.name === 'gen_durable')
			return Object.fromEntries((await c.query(
				'SELECT status::text AS s, count(*)::int AS n FROM gen_durable.instances GROUP BY 1')).rows.map((r) => [r.s, r.n]));
		if (sys.name === 'graphile_worker')
			return { jobs: Number((await c.query('SELECT count(*) AS n FROM graphile_worker._private_jobs')).rows[0].n) };
		return Object.fromEntries((await c.query(
			'SELECT state::text AS s, count(*)::int AS n FROM pgboss.job GROUP BY 1')).rows.map((r) => [r.s, r.n]));
	});
	emit({
		type: 'end', samples, inserted: rec.total.inserted, completed: rec.total.completed,
		steps: rec.total.steps, counts: rec.total.counts, notes: [...rec.notes],
		engine: engineRows(last.stats, base.stats ?? {}), exact_after: exact,
		hold_from_s: hold.from ?? null, hold_to_s: hold.to ?? null,
	});
	if (a.smoke) {
		if (samples === 0 || rec.total.completed === 0 || rec.total.counts.invalid || rec.total.counts.stale)
			throw new Error(`smoke: ${samples} samples, ${rec.total.completed} completed, counts ${JSON.stringify(rec.total.counts)}`);
	}
}

main().then(() => {
	if (cpuPoll)
		clearInterval(cpuPoll);
	process.exit(0);
}, (err) => {
	console.error(err);
	process.exit(1);
});
