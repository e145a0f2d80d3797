// test/bench/report.mjs - the tables of BENCHMARKS.md from run.sh's raw
// lines: per workload and system, the median and min-max over the
// repetitions, and each system's median as a ratio to gen_durable's.
//
//   node report.mjs results.jsonl > results.md

import os from 'node:os';
import { bySystem, label, median, medianOf, readResults } from './results.mjs';

const lines = readResults(process.argv[2]);

const fmt = (x, d = 0) => (x === undefined || Number.isNaN(x) ? '' :
	x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }));

// ms renders the median over runs of a latency field, in ms
const ms = (key) => (rows) => fmt(medianOf(rows, key), 2);

// perJob renders the median over runs of a per-job figure (blank when a
// run did not measure it)
const perJob = (key) => (rows) => (rows.every((r) => r[key] !== undefined) ? fmt(medianOf(rows, key)) : '');

// measured says whether some run of workload has the field key
function measured(workload, key) {
	return lines.some((l) => l.workload === workload && l[key] !== undefined);
}

// sizeNote is the footnote with the size of a workload's runs
function sizeNote(workload, what) {
	const first = lines.find((l) => l.workload === workload);
	return first ? `(n = ${fmt(first.n)} ${what} per run)` : '';
}

// table renders groups ([name, runs] pairs) as a markdown table whose
// columns are [heading, cell(runs)] pairs, under a title, with a note
function table(title, groups, columns, note) {
	if (groups.length === 0)
		return '';
	let out = `### ${title}\n\n| system | ${columns.map(([h]) => h).join(' | ')} |\n` +
		`|---|${columns.map(() => '---|').join('')}\n`;
	for (const [name, rows] of groups)
		out += `| ${name} | ${columns.map(([, cell]) => cell(rows)).join(' | ')} |\n`;
	return out + `\n${note}\n\n`;
}

// rate are the throughput columns: unit/s median, min-max, runs, and the
// ratio of gen_durable's median (base runs) to the system's
function rate(unit, baseRows) {
	const base = baseRows ? medianOf(baseRows, 'per_sec') : null;
	return [
		[`${unit}/s (median)`, (rows) => fmt(medianOf(rows, 'per_sec'))],
		['min-max', (rows) => {
			const xs = rows.map((r) => r.per_sec);
			return `${fmt(Math.min(...xs))}-${fmt(Math.max(...xs))}`;
		}],
		['runs', (rows) => String(rows.length)],
		['gen_durable / system', (rows) => (base ? `${fmt(base / medianOf(rows, 'per_sec'), 2)}x` : '')],
	];
}

// groups are the runs of a workload per system, named for the table
function groups(workload) {
	return [...bySystem(lines, workload)].map(([system, rows]) => [label(system), rows]);
}

// throughput is the table of a jobs/s workload, with extra columns
function throughput(workload, title, extra = [], note = sizeNote(workload, 'jobs')) {
	return table(title, groups(workload),
		[...rate('jobs', bySystem(lines, workload).get('gen_durable')), ...extra], note);
}

// percentilesTable is the table of a latency workload: medians over the
// runs of each percentile
function percentilesTable(workload, title, note) {
	const first = lines.find((l) => l.workload === workload);
	return table(title, groups(workload), [
		['p50', ms('p50')], ['p95', ms('p95')], ['p99', ms('p99')], ['max', ms('max')],
		['runs', (rows) => String(rows.length)],
	], first ? `(${fmt(first.n)} samples per run; medians over the runs)${note}` : '');
}

// fsm is the 5-step machine: every system's queued steps, and gen_durable's
// inline steps next to them
function fsm() {
	const queued = bySystem(lines, 'fsm');
	const inline = bySystem(lines, 'fsm_inline').get('gen_durable');
	const rows = [];
	for (const [system, rs] of queued) {
		rows.push([system === 'gen_durable' ? 'gen_durable, steps queued' : system, rs]);
		if (system === 'gen_durable' && inline)
			rows.push(['gen_durable, steps continued inline', inline]);
	}
	if (inline && !queued.has('gen_durable'))
		rows.push(['gen_durable, steps continued inline', inline]);
	const n = lines.find((l) => l.workload === 'fsm' || l.workload === 'fsm_inline');
	return table('A machine of 5 no-op steps', rows, rate('steps', queued.get('gen_durable')),
		(n ? `(n = ${fmt(n.n)} machines per run.) ` : '') +
		'gen_durable: one instance per machine, each step a `next` flushed in the batch ' +
		'(inline: `continue`, the worker runs the next step without a pick). The peers have ' +
		'no machines: a step is a job, and finishing it enqueues the next (bare: one UPDATE ' +
		'per batch requeues each job at step + 1; graphile-worker: the task calls ' +
		'helpers.addJob; pg-boss: the batch handler insert()s the next steps).');
}

// backlog is claim latency per backlog: medians over the runs of each
// percentile
function backlog() {
	const by = new Map();
	for (const r of lines.filter((l) => l.workload === 'pick_backlog' || l.workload === 'pick_terminal')) {
		const key = `${r.system}|${r.runnable}|${r.terminal}`;
		if (!by.has(key))
			by.set(key, []);
		by.get(key).push(r);
	}
	return table('Claim latency of a batch of 10 as the backlog grows, ms',
		[...by.values()].map((rs) => [label(rs[0].system), rs]), [
			['runnable rows', (rs) => fmt(rs[0].runnable)],
			['terminal rows', (rs) => fmt(rs[0].terminal)],
			['p50', ms('p50')], ['p95', ms('p95')], ['p99', ms('p99')], ['max', ms('max')],
			['runs', (rs) => String(rs.length)],
		], '(200 claims per run, each rolled back so the backlog stays the same)');
}

// inFlight is claim latency with long steps in flight against none: per
// system, a row for each series of the runs (none in flight, then the
// holders' claims held), medians over the runs of each percentile, and on
// the held row the medians over the runs of the ratios held / none
function inFlight() {
	const rows = [];
	for (const [system, rs] of bySystem(lines, 'pick_inflight')) {
		rows.push([label(system), rs.map((r) => ({
			in_flight: 0, runnable: r.runnable + r.in_flight, ...r.none,
		}))]);
		rows.push([label(system), rs.map((r) => ({
			in_flight: r.in_flight, runnable: r.runnable, ...r.held, ratio: r.ratio,
		}))]);
	}
	const first = lines.find((l) => l.workload === 'pick_inflight');
	return table('Claim latency of a batch of 10 with long steps in flight, ms', rows, [
		['steps in flight', (rs) => fmt(rs[0].in_flight)],
		['runnable rows', (rs) => fmt(rs[0].runnable)],
		['p50', ms('p50')], ['p95', ms('p95')], ['p99', ms('p99')], ['max', ms('max')],
		['held / none: p50, p95, p99', (rs) => (rs[0].ratio
			? ['p50', 'p95', 'p99'].map((p) => `${fmt(median(rs.map((r) => r.ratio[p])), 2)}x`).join(', ')
			: '')],
		['runs', (rs) => String(rs.length)],
	], first ? `(${fmt(first.samples)} claims per series per run, each rolled back so the ` +
		'backlog stays the same, on one table: after a series not counted (a warm-up), ' +
		'first with none in flight, then once ' +
		`${first.concurrency} holder connections have kept ${fmt(first.in_flight)} jobs ` +
		'claimed, never completed (gen_durable: leases of 10 minutes), for ' +
		`${fmt(first.age_s)} s, and while they still do; each series after a \`VACUUM ` +
		'ANALYZE`. The ratios are medians over the runs of each run\'s held / none.)' : '');
}

const first = lines[0] || {};
process.stdout.write(
	`Measured ${new Date().toISOString().slice(0, 10)} on ${os.cpus().length} cores ` +
	`(${os.cpus()[0]?.model ?? 'unknown CPU'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ` +
	`PostgreSQL 15 with fsync and synchronous_commit on; ${first.concurrency} connections ` +
	`doing the work, batches of ${first.batch}, Node ${process.version}.\n\n` +
	throughput('enqueue', 'Bulk enqueue') +
	throughput('drain', 'Drain a backlog of no-op one-step jobs', [
		['WAL bytes per job', perJob('wal_bytes_per_job')],
		...(measured('drain', 'server_cpu_us_per_job')
			? [['server CPU µs per job', perJob('server_cpu_us_per_job')]] : []),
		...(measured('drain', 'client_cpu_us_per_job')
			? [['client CPU µs per job', perJob('client_cpu_us_per_job')]] : []),
	], sizeNote('drain', 'jobs') + (measured('drain', 'client_cpu_us_per_job')
		? ' CPU over the timed drain: server, every process of the cluster (backends, ' +
		'background workers, the postmaster), from /proc; client, the Node process of the ' +
		'workers (the C driver\'s runs measure neither).' : '')) +
	throughput('mixed', 'Producers and consumers at once', [
		['end-to-end p50 ms', ms('p50')], ['p95 ms', ms('p95')], ['p99 ms', ms('p99')],
	], `${sizeNote('mixed', 'jobs')} Two producers insert batches of ${first.batch} as fast ` +
	'as they can while the workers drain; jobs/s is n over the time until all n are ' +
	'completed; end-to-end latency is from the commit of a job\'s batch (its insert ' +
	'returning) to its handler starting (medians over the runs).') +
	percentilesTable('latency', 'Idle pickup latency (insert commit -> handler starts), ms', '') +
	percentilesTable('signal', 'Signal round trip (signal() returns -> the waiting pick returns the woken instance), ms',
		' gen_durable only: the peers have no signals.') +
	fsm() +
	table('Fan-out 1 -> 100 and join', groups('fanout'), [
		...rate('children', bySystem(lines, 'fanout').get('gen_durable')).slice(0, 3),
		['join p50 ms', ms('join_p50')], ['p95 ms', ms('join_p95')], ['p99 ms', ms('join_p99')],
	], `${sizeNote('fanout', 'parents of 100 children')} Each parent spawns 100 no-op ` +
	'children (one `spawn` outcome) and is woken by its join; one parent worker (a picker ' +
	'and a spawner connection) runs the parents, CONCURRENCY workers the children. Join latency: from the return of the flush that ' +
	'ended a parent\'s last child to the pick of the woken parent. gen_durable only: ' +
	'graphile-worker, pg-boss and the bare table have no native fan-out or join.') +
	backlog() +
	inFlight());
