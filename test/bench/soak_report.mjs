// test/bench/soak_report.mjs - the summary and the charts of soak.sh's
// lines (soak.jsonl: per system a "meta" line, its "sample" lines, an "end"
// line).
//
//   node soak_report.mjs soak.jsonl OUTDIR
//
// Writes OUTDIR/summary.md (also printed) and, with gnuplot, one chart per
// series over time, one line per system (charts.mjs's helpers draw them):
// soak_throughput.svg (completed top-level instances/s, and the offered
// rate), soak_lag_p50.svg and soak_lag_p99.svg (pickup lag, log scale),
// soak_size.svg, soak_heap.svg, soak_index.svg, soak_toast.svg (the
// engine tables' bytes, summed over its tables), soak_dead.svg (dead
// tuples), soak_autovacuum.svg (autovacuum runs so far), soak_wal.svg
// (WAL MB/s), soak_checkpoints.svg (checkpoints so far), soak_cpu.svg
// (server CPU, cores), soak_in_flight.svg (inserted and not yet completed
// top-level instances: the backlog and the parked ones), soak_rows.svg (the
// rows the engine keeps); and per system soak_tables_<system>.svg, the
// total size of each of its tables over 1 MB, and soak_dead_<system>.svg,
// the dead tuples of each with over 1,000, and soak_index_reads_<system>.svg,
// the index entries read per scan of its busy indexes (they grow with the
// dead entries a scan walks).  Dashed vertical lines mark the
// start and the end of a held transaction (--hold-xmin).
//
// Per system the summary has: completed / offered per window (min,
// median, windows outside +-10%), lag p99 per window after the first
// minute (max, median, windows over 50 ms), the tables' total size at
// 1/3, 2/3 and the end (and the growth in the last third), dead tuples
// (max), autovacuum runs per table, WAL bytes per job, checkpoints, server
// CPU per job and its split by kind of process, GC, and the held
// transaction's effect.

import { writeFileSync } from 'node:fs';
import { readResults, median } from './results.mjs';
import { renderCharts, svgPreamble, tsv } from './charts.mjs';

const [input, outDir] = process.argv.slice(2);
if (!input || !outDir) {
	console.error('usage: node soak_report.mjs soak.jsonl OUTDIR');
	process.exit(2);
}
const lines = readResults(input);

// runs: per system (label) its meta, samples and end, in order of appearance
const runs = new Map();
for (const l of lines) {
	if (!runs.has(l.system))
		runs.set(l.system, { system: l.system, meta: null, samples: [], end: null });
	const r = runs.get(l.system);
	if (l.type === 'meta')
		r.meta = l;
	else if (l.type === 'sample')
		r.samples.push(l);
	else if (l.type === 'end')
		r.end = l;
}
const all = [...runs.values()].filter((r) => r.meta && r.samples.length > 0);

const fmt = (x, d = 0) => (x === undefined || x === null || Number.isNaN(x) ? '' :
	x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }));
const mb = (x) => fmt(x / 1048576, 1);
const pct = (x) => (x === null || x === undefined ? '' : `${fmt(100 * x, 0)}%`);
const max = (xs) => (xs.length ? Math.max(...xs) : undefined);
const min = (xs) => (xs.length ? Math.min(...xs) : undefined);

// rowsKept are the rows the engine keeps at a sample: gen_durable's live
// and retained terminal rows (its stats counters), the peers' n_live_tup
function rowsKept(s) {
	return s.engine ? s.engine.live + s.engine.terminal : s.totals.live;
}

// at returns the sample nearest to time t
function at(samples, t) {
	return samples.reduce((a, b) => (Math.abs(b.t - t) < Math.abs(a.t - t) ? b : a));
}

// summarize computes a run's figures
function summarize(r) {
	const s = r.samples;
	const T = r.meta.seconds;
	// the warm-up left out of the lag figures: the first minute, or in a
	// run shorter than 3 minutes the first window
	const warmup = T >= 180 ? 60 : r.meta.sample_seconds;
	const after1 = s.filter((x) => x.t > warmup);
	const ratios = s.map((x) => x.ratio).filter((x) => x !== null);
	const p99s = after1.filter((x) => x.lag_ms.n > 0).map((x) => x.lag_ms.p99);
	const jobs = s.reduce((a, x) => a + x.completed_per_s * x.dt, 0);
	const steps = s.reduce((a, x) => a + x.steps_per_s * x.dt, 0);
	const wal = s.reduce((a, x) => a + x.wal_bytes, 0);
	const seconds = s.reduce((a, x) => a + x.dt, 0);
	const cpu = s.every((x) => x.cpu) ? s.reduce((a, x) => a + x.cpu.server_us, 0) : null;
	const byKind = {};
	if (cpu !== null)
		for (const x of s)
			for (const [k, v] of Object.entries(x.cpu.by_kind_us))
				byKind[k] = (byKind[k] ?? 0) + v;
	const last = s[s.length - 1];
	const size1 = at(s, T / 3).totals.total;
	const size2 = at(s, (2 * T) / 3).totals.total;
	const deadMax = s.reduce((a, x) => (x.totals.dead > a.totals.dead ? x : a));
	const deadTable = Object.entries(deadMax.tables).reduce((a, b) => (b[1].dead > a[1].dead ? b : a))[0];
	// the share of samples in which autovacuum was working on each table
	const vacuumBusy = {};
	for (const x of s)
		for (const v of x.vacuum)
			if (v.auto)
				vacuumBusy[v.table] = (vacuumBusy[v.table] ?? 0) + 1;
	const autovacuums = Object.entries(last.tables).filter(([, t]) => t.autovacuums > 0)
		.map(([name, t]) => `${name} ${t.autovacuums}`).join(', ');
	const out = {
		warmup,
		offered: r.meta.offered_per_s,
		calibration: r.meta.calibration,
		windows: s.length,
		ratio_min: min(ratios), ratio_median: ratios.length ? median(ratios) : null,
		ratio_off: ratios.filter((x) => Math.abs(x - 1) > 0.1).length,
		lag_p50_median: median(after1.filter((x) => x.lag_ms.n > 0).map((x) => x.lag_ms.p50)),
		lag_p99_max: max(p99s), lag_p99_median: p99s.length ? median(p99s) : undefined,
		lag_p99_over50: p99s.filter((x) => x >= 50).length, lag_windows: p99s.length,
		size1, size2, size3: last.totals.total,
		growth_last_third: size2 > 0 ? last.totals.total / size2 - 1 : null,
		size_max: max(s.map((x) => x.totals.total)),
		rows_kept_end: rowsKept(last),
		dead_max: deadMax.totals.dead, dead_max_t: deadMax.t, dead_max_table: deadTable,
		autovacuums, vacuum_busy: vacuumBusy,
		wal_per_job: jobs > 0 ? wal / jobs : null, wal_per_step: steps > 0 ? wal / steps : null,
		ckpt_timed: last.checkpoints.timed, ckpt_req: last.checkpoints.req,
		cpu_per_job: cpu !== null && jobs > 0 ? cpu / jobs : null,
		cpu_cores: cpu !== null ? cpu / 1e6 / seconds : null,
		cpu_share: cpu ? Object.fromEntries(Object.entries(byKind).map(([k, v]) => [k, v / cpu])) : null,
		client_cores: s.reduce((a, x) => a + x.client_cores * x.dt, 0) / seconds,
		late_max: max(s.map((x) => x.producer_late_ms)),
		in_flight_max: max(s.map((x) => x.in_flight)),
		jobs, steps,
		end: r.end,
		terminal_end: last.engine?.terminal, terminal_max: last.engine ? max(s.map((x) => x.engine.terminal)) : undefined,
		gc_deleted: last.engine?.gc_deleted,
	};
	// the held transaction: the windows it covered, and the recovery
	const held = s.filter((x) => x.hold_s > 0);
	if (held.length > 0) {
		const first = s.indexOf(held[0]);
		const lastHeld = s.indexOf(held[held.length - 1]);
		const before = first > 0 ? s[first - 1].totals.total : null;
		// back: the first window after the hold whose size is within 5% of the
		// window's before it began
		const back = s.slice(lastHeld + 1).find((x) => before !== null && x.totals.total <= before * 1.05);
		out.hold = {
			from: r.end?.hold_from_s ?? held[0].t - held[0].dt, to: r.end?.hold_to_s ?? held[held.length - 1].t,
			windows: `${held[0].t}-${held[held.length - 1].t}`,
			ratio_min: min(held.map((x) => x.ratio)),
			lag_p99_max: max(held.filter((x) => x.lag_ms.n).map((x) => x.lag_ms.p99)),
			size_before: before, size_peak: max(s.slice(first).map((x) => x.totals.total)),
			back_at: back ? back.t : null,
		};
	}
	return out;
}

const sums = all.map((r) => [r, summarize(r)]);

// ------------------------------------------------------------ summary.md

let md = `## Soak: ${all.map((r) => r.system).join(', ')}\n\n`;
if (all.length === 0)
	md += 'No samples.\n';
for (const [r, x] of sums) {
	const m = r.meta;
	md += `### ${r.system}\n\n`;
	md += `${fmt(m.seconds / 60, 1)} minutes at ${fmt(x.offered)} top-level instances/s offered` +
		(x.calibration ? ` (${pct(m.rate_fraction)} of its drain rate, ${fmt(x.calibration.per_sec)}/s over a backlog of ${fmt(x.calibration.n)})`
			: r.system.endsWith('@gd_rate') ? ' (the rate offered to gen_durable)' : ' (--rate)') +
		`; mix ${Object.entries(m.mix).map(([k, v]) => `${k} ${v}`).join(', ')}; ${m.concurrency} workers, batch ${m.batch}; ` +
		`${m.producers} producers, batches of ${m.insert_batch}; retention ${m.settings['gen_durable.retention'] ?? '?'} s` +
		` (${r.system.startsWith('pg_boss') ? `deleteAfterSeconds ${m.retention_s}` : r.system.startsWith('graphile') ? 'deleted at completion' : 'gen_durable.retention'}); ` +
		`max_wal_size ${m.settings.max_wal_size} MB, autovacuum_vacuum_cost_delay ${m.settings.autovacuum_vacuum_cost_delay} ms, naptime ${m.settings.autovacuum_naptime} s` +
		(m.hold_xmin_s ? `; a transaction held ${fmt(m.hold_xmin_s)} s from ${fmt(m.hold_at_s)} s` : '') + '.\n\n';
	const win = `${m.sample_seconds} s`;
	const after = x.warmup === 60 ? 'after the first minute' : 'after the first window';
	const rows = [
		[`completed / offered per ${win} window, min / median`, `${pct(x.ratio_min)} / ${pct(x.ratio_median)}`],
		['windows outside ±10% of the offered rate', `${x.ratio_off} of ${x.windows}`],
		[`pickup lag p99 per window ${after}, max / median`, `${fmt(x.lag_p99_max, 1)} / ${fmt(x.lag_p99_median, 1)} ms`],
		[`windows ${after} with lag p99 ≥ 50 ms`, `${x.lag_p99_over50} of ${x.lag_windows}`],
		[`pickup lag p50, median over the windows ${after}`, `${fmt(x.lag_p50_median, 1)} ms`],
		['engine tables, total size at 1/3, 2/3, end (max)', `${mb(x.size1)}, ${mb(x.size2)}, ${mb(x.size3)} MB (${mb(x.size_max)})`],
		['growth in the last third', pct(x.growth_last_third)],
		['rows kept at the end (live + retained terminal)', `${fmt(x.rows_kept_end)} (${fmt(x.size3 / Math.max(1, x.rows_kept_end))} bytes of table per row)`],
		['dead tuples, max', `${fmt(x.dead_max)} at ${x.dead_max_t} s (most in ${x.dead_max_table})`],
		['autovacuum runs', x.autovacuums || 'none'],
		['autovacuum at work, share of samples', Object.entries(x.vacuum_busy).map(([k, v]) => `${k} ${pct(v / x.windows)}`).join(', ') || 'none seen'],
		['WAL bytes per completed top-level instance (per step)', `${fmt(x.wal_per_job)} (${fmt(x.wal_per_step)})`],
		['checkpoints timed + requested', `${x.ckpt_timed} + ${x.ckpt_req}`],
		['server CPU µs per completed instance (cores)', x.cpu_per_job === null ? '' : `${fmt(x.cpu_per_job)} (${fmt(x.cpu_cores, 2)})`],
		['server CPU by process', x.cpu_share ? Object.entries(x.cpu_share).filter(([, v]) => v >= 0.005)
			.map(([k, v]) => `${k} ${pct(v)}`).join(', ') : ''],
		['the harness\'s CPU (cores)', fmt(x.client_cores, 2)],
		['inserted and not completed, max (backlog and parked)', fmt(x.in_flight_max)],
		['producers late by, max', `${fmt(x.late_max)} ms`],
	];
	if (x.gc_deleted !== undefined)
		rows.push(['GC: deleted; terminal rows kept at the end (max)', `${fmt(x.gc_deleted)}; ${fmt(x.terminal_end)} (${fmt(x.terminal_max)})`]);
	if (x.hold)
		rows.push(['held transaction: completed / offered min, lag p99 max',
			`${pct(x.hold.ratio_min)}, ${fmt(x.hold.lag_p99_max, 1)} ms (held ${fmt(x.hold.from)}-${fmt(x.hold.to)} s; windows ending ${x.hold.windows} s)`],
		['held transaction: size before, peak, back within 5% at',
			`${mb(x.hold.size_before)}, ${mb(x.hold.size_peak)} MB, ${x.hold.back_at === null ? 'not in the run' : `${x.hold.back_at} s`}`]);
	if (r.end)
		rows.push(['totals: inserted, completed, steps', `${fmt(r.end.inserted)}, ${fmt(r.end.completed)}, ${fmt(r.end.steps)}`],
			['harness counts', Object.entries(r.end.counts).map(([k, v]) => `${k} ${fmt(v)}`).join(', ') || 'none'],
			['rows after the run (exact count)', Object.entries(r.end.exact_after ?? {}).map(([k, v]) => `${k} ${fmt(v)}`).join(', ')]);
	md += `| | |\n|---|---|\n${rows.map(([k, v]) => `| ${k} | ${v} |`).join('\n')}\n\n`;
}
md += 'Lag: from the commit of the call that made a job due (its answer reaching the harness) to the pick (handler start) that got it. ' +
	'Sizes: pg_total_relation_size summed over the system\'s tables (heap, indexes, TOAST, free space and visibility maps). ' +
	'CPU: every process of the cluster, from /proc.\n';
writeFileSync(`${outDir}/summary.md`, md);
process.stdout.write(md);

// ------------------------------------------------------------ charts

const labels = all.map((r) => r.system);
const times = [...new Set(all.flatMap((r) => r.samples.map((s) => s.t)))].sort((x, y) => x - y);
// the held transaction of the first run that had one (the runs hold theirs
// at the same time)
const holdRun = all.find((r) => r.end?.hold_from_s != null);

// series is the data of one chart: a column per system of value(sample)
function series(value, extra = []) {
	const by = all.map((r) => new Map(r.samples.map((s) => [s.t, s])));
	return tsv(['minute', ...labels, ...extra.map(([name]) => name)], times.map((t) => [
		(t / 60).toFixed(3),
		...by.map((m) => (m.has(t) ? value(m.get(t)) : undefined)),
		...extra.map(([, f]) => f(t)),
	]));
}

// lineScript is the gnuplot script of a chart of lines over time: columns
// 2..columns, one line each; with dashed, the `dashed` columns after the
// first ones (columns - dashed of them) are drawn dashed in the colours of
// those (the offered rate of each system)
function lineScript(title, ylabel, columns, { log = false, dashed = 0, hold = holdRun } = {}) {
	return (dat, svg) => {
		let gp = svgPreamble(svg, title) +
			`set format x '%g min'\nset ylabel '${ylabel}'\nset grid\nset key below\nset xrange [0:*]\n` +
			(log ? 'set logscale y\n' : 'set yrange [0:*]\n');
		if (hold?.end?.hold_from_s != null) {
			for (const x of [hold.end.hold_from_s, hold.end.hold_to_s ?? hold.meta.seconds])
				gp += `set arrow from ${(x / 60).toFixed(3)}, graph 0 to ${(x / 60).toFixed(3)}, graph 1 nohead dt 2 lc rgb 'gray40'\n`;
		}
		const solid = columns - dashed;
		gp += `plot for [i=2:${solid}] '${dat}' using 1:i with lines lw 2 lc i-1 title columnheader(i)` +
			(dashed > 0 ? `, for [i=${solid + 1}:${columns}] '${dat}' using 1:i with lines lw 1 dt 2 lc i-${solid} title columnheader(i)` : '') +
			'\n';
		return gp;
	};
}

const n = labels.length + 1;
const charts = [
	['soak_throughput', series((s) => s.completed_per_s.toFixed(1),
		all.map((r) => [`offered (${r.system})`, () => r.meta.offered_per_s])),
	'Completed top-level instances/s per window (dashed: the offered rate)', 'per second', n + all.length,
	{ dashed: all.length }],
	['soak_lag_p50', series((s) => (s.lag_ms.n ? Math.max(0.01, s.lag_ms.p50).toFixed(3) : undefined)),
		'Pickup lag p50 per window (commit that made the job due -> its pick)', 'ms', n, { log: true }],
	['soak_lag_p99', series((s) => (s.lag_ms.n ? Math.max(0.01, s.lag_ms.p99).toFixed(3) : undefined)),
		'Pickup lag p99 per window (commit that made the job due -> its pick)', 'ms', n, { log: true }],
	['soak_size', series((s) => (s.totals.total / 1048576).toFixed(2)), 'Engine tables, total size (heap + indexes + TOAST + maps)', 'MB', n],
	['soak_heap', series((s) => (s.totals.heap / 1048576).toFixed(2)), 'Engine tables, heap', 'MB', n],
	['soak_index', series((s) => (s.totals.index / 1048576).toFixed(2)), 'Engine tables, indexes', 'MB', n],
	['soak_toast', series((s) => (s.totals.toast / 1048576).toFixed(3)), 'Engine tables, TOAST', 'MB', n],
	['soak_dead', series((s) => s.totals.dead), 'Dead tuples in the engine tables (n_dead_tup)', 'tuples', n],
	['soak_autovacuum', series((s) => s.totals.autovacuums), 'Autovacuum runs on the engine tables so far', 'runs', n],
	['soak_wal', series((s) => (s.wal_bytes_per_s / 1048576).toFixed(2)), 'WAL written', 'MB/s', n],
	['soak_checkpoints', series((s) => s.checkpoints.timed + s.checkpoints.req), 'Checkpoints so far (timed + requested)', 'checkpoints', n],
	['soak_cpu', series((s) => (s.cpu ? s.cpu.server_cores.toFixed(3) : undefined)), 'Server CPU (every process of the cluster)', 'cores', n],
	['soak_in_flight', series((s) => s.in_flight), 'Inserted and not yet completed top-level instances (backlog + parked)', 'instances', n],
	['soak_rows', series(rowsKept), 'Rows the engine keeps (gen_durable: live + retained terminal, from its stats; peers: n_live_tup)', 'rows', n],
].map(([name, data, title, ylabel, columns, opts]) => ({ name, data, script: lineScript(title, ylabel, columns, opts) }));

// per system, the size of each table over 1 MB, and the dead tuples of
// each table with over 1,000, at some point
for (const r of all) {
	const file = r.system.replace(/[^A-Za-z0-9_]/g, '_');
	for (const [what, key, over, scale, title, ylabel] of [
		['tables', 'total', 1048576, 1048576, 'total size of each table over 1 MB', 'MB'],
		['dead', 'dead', 1000, 1, 'dead tuples of each table with over 1,000', 'tuples'],
	]) {
		const names = [...new Set(r.samples.flatMap((s) => Object.entries(s.tables)
			.filter(([, t]) => t[key] > over).map(([k]) => k)))];
		if (names.length === 0)
			continue;
		const data = tsv(['minute', ...names], r.samples.map((s) => [(s.t / 60).toFixed(3),
			...names.map((k) => (s.tables[k] ? (s.tables[k][key] / scale).toFixed(2) : undefined))]));
		charts.push({
			name: `soak_${what}_${file}`, data,
			script: lineScript(`${r.system}: ${title}`, ylabel, names.length + 1, { hold: r }),
		});
	}
	// index entries read per scan, of the indexes scanned in every window
	// that read more than 2 entries a scan in some window
	const scanned = Object.keys(r.samples[0].indexes).filter((k) =>
		r.samples.every((s) => s.indexes[k]?.scans > 0) &&
		r.samples.some((s) => s.indexes[k].read_per_scan > 2));
	if (scanned.length > 0)
		charts.push({
			name: `soak_index_reads_${file}`,
			data: tsv(['minute', ...scanned], r.samples.map((s) => [(s.t / 60).toFixed(3),
				...scanned.map((k) => (s.indexes[k].read_per_scan > 0 ? s.indexes[k].read_per_scan.toFixed(2) : undefined))])),
			script: lineScript(`${r.system}: index entries read per index scan (pg_stat_user_indexes)`,
				'entries per scan', scanned.length + 1, { log: true, hold: r }),
		});
}

renderCharts(charts, outDir, 'soak_report.mjs');
