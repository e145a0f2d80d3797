// test/bench/charts.mjs - the charts of run.sh's raw lines, drawn by
// gnuplot as SVG:
//   throughput.svg  per workload (enqueue, drain, mixed, fsm), one bar per
//                   system: median jobs/s (fsm: steps/s) over the runs;
//   latency.svg     idle pickup latency per system: median p50, p95, p99.
//
//   node charts.mjs results.jsonl OUTDIR
//
// The data and the gnuplot script are written to a temporary directory
// (removed after); only the SVGs land in OUTDIR.  Without gnuplot it says
// so and exits 0 (the charts are an extra; the tables are report.mjs's).
//
// Imported as a module (soak_report.mjs does) it draws nothing by itself and
// exports its helpers: tsv (the data files), svgPreamble (the terminal and
// look every chart shares) and renderCharts (gnuplot over a list of charts).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bySystem, label, medianOf, readResults } from './results.mjs';

const THROUGHPUT_WORKLOADS = ['enqueue', 'drain', 'mixed', 'fsm'];
const PERCENTILES = ['p50', 'p95', 'p99'];

// tsv renders a header and rows as tab-separated lines ('-' = no value)
export function tsv(header, rows) {
	return [header, ...rows].map((r) => r.map((x) => (x === undefined ? '-' : String(x))).join('\t'))
		.join('\n') + '\n';
}

// throughputData is a row per workload, a column per system (every system
// that ran any of them, in order of appearance)
function throughputData(lines) {
	const systems = [...new Set(lines.filter((l) => THROUGHPUT_WORKLOADS.includes(l.workload))
		.map((l) => l.system))];
	const workloads = THROUGHPUT_WORKLOADS.filter((w) => lines.some((l) => l.workload === w));
	if (workloads.length === 0)
		return null;
	return tsv(['workload', ...systems.map(label)], workloads.map((w) => {
		const by = bySystem(lines, w);
		return [w, ...systems.map((s) => (by.has(s) ? Math.round(medianOf(by.get(s), 'per_sec')) : undefined))];
	}));
}

// latencyData is a row per system, a column per percentile
function latencyData(lines) {
	const by = bySystem(lines, 'latency');
	if (by.size === 0)
		return null;
	return tsv(['system', ...PERCENTILES], [...by].map(([system, rows]) =>
		[label(system), ...PERCENTILES.map((p) => medianOf(rows, p).toFixed(3))]));
}

// svgPreamble is the start of every chart's gnuplot script: the SVG
// terminal, the output file, the title, and the data files' format (tsv)
export function svgPreamble(svg, title) {
	return `set terminal svg size 960,540 dynamic noenhanced font 'sans,12' background rgb 'white'
set output '${svg}'
set title '${title}'
set datafile separator '\\t'
set datafile missing '-'
`;
}

// script is the gnuplot script of one grouped-bar chart: data file dat,
// columns 2..columns as bars clustered per row
function script(dat, columns, svg, title, ylabel) {
	return `${svgPreamble(svg, title)}set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set ylabel '${ylabel}'
set yrange [0:*]
set grid ytics
set key below
plot for [i=2:${columns}] '${dat}' using i:xtic(1) title columnheader(i)
`;
}

// renderCharts draws charts ({ name, data, script(dat, svg) }: the data
// file's text, and the gnuplot script that draws it from the file dat into
// the file svg) as OUTDIR/<name>.svg, through a temporary directory removed
// after; without gnuplot it says so (as `who`) and draws nothing
export function renderCharts(charts, outDir, who = 'charts.mjs') {
	const tmp = mkdtempSync(path.join(os.tmpdir(), 'gd_charts.'));
	try {
		for (const { name, data, script: gpScript } of charts) {
			const dat = path.join(tmp, `${name}.dat`);
			const gp = path.join(tmp, `${name}.gp`);
			const svg = path.resolve(outDir, `${name}.svg`);
			writeFileSync(dat, data);
			writeFileSync(gp, gpScript(dat, svg));
			const r = spawnSync('gnuplot', [gp], { encoding: 'utf8' });
			if (r.error && r.error.code === 'ENOENT') {
				console.error(`${who}: no gnuplot, no charts`);
				break;
			}
			if (r.error || r.status !== 0)
				throw new Error(`gnuplot failed on ${name}: ${r.error?.message ?? r.stderr}`);
			console.error(`${who}: wrote ${svg}`);
		}
	} finally {
		rmSync(tmp, { recursive: true, force: true });
	}
}

// main draws run.sh's two charts
function main() {
	const [input, outDir] = process.argv.slice(2);
	if (!input || !outDir) {
		console.error('usage: node charts.mjs results.jsonl OUTDIR');
		process.exit(2);
	}
	const lines = readResults(input);
	const charts = [
		['throughput', throughputData(lines), 'Throughput, median over the runs', 'jobs/s (fsm: steps/s)'],
		['latency', latencyData(lines), 'Idle pickup latency (insert commit -> handler starts), median over the runs', 'ms'],
	].filter(([, data]) => data !== null).map(([name, data, title, ylabel]) => ({
		name, data,
		script: (dat, svg) => script(dat, data.split('\n')[0].split('\t').length, svg, title, ylabel),
	}));
	renderCharts(charts, outDir);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url))
	main();
