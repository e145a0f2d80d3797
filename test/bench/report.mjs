// test/bench/report.mjs - the tables of BENCHMARKS.md from run.sh's raw
// lines: per workload and system, the median and min-max over the
// repetitions, and each system's median as a ratio to gen_durable's.
//
//   node report.mjs results.jsonl > results.md

import { readFileSync } from 'node:fs';
import os from 'node:os';

const lines = readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean)
	.map((l) => JSON.parse(l));

// median of numbers
function median(xs) {
	const s = [...xs].sort((a, b) => a - b);
	return s[Math.floor((s.length - 1) / 2)];
}

// group rows by workload, then system, keeping the systems' order of appearance
function group(workload) {
	const by = new Map();
	for (const r of lines.filter((l) => l.workload === workload)) {
		if (!by.has(r.system))
			by.set(r.system, []);
		by.get(r.system).push(r);
	}
	return by;
}

const fmt = (x, d = 0) => x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

// throughput table: jobs (or steps) per second median, min-max, ratio to
// gen_durable, and the WAL per job where measured
function throughput(workload, title, unit = 'jobs') {
	const by = group(workload);
	if (by.size === 0)
		return '';
	const base = by.has('gen_durable') ? median(by.get('gen_durable').map((r) => r.per_sec)) : null;
	const wal = [...by.values()].some((rows) => rows[0].wal_bytes_per_job !== undefined);
	let out = `### ${title}\n\n| system | ${unit}/s (median) | min-max | runs | gen_durable / system |` +
		(wal ? ' WAL bytes per job |' : '') + '\n|---|---|---|---|---|' + (wal ? '---|' : '') + '\n';
	for (const [system, rows] of by) {
		const xs = rows.map((r) => r.per_sec);
		const m = median(xs);
		out += `| ${system} | ${fmt(m)} | ${fmt(Math.min(...xs))}-${fmt(Math.max(...xs))} | ${rows.length} | ${base ? fmt(base / m, 2) + 'x' : ''} |` +
			(wal ? ` ${fmt(median(rows.map((r) => r.wal_bytes_per_job)))} |` : '') + '\n';
	}
	return out + `\n(n = ${fmt(lines.find((l) => l.workload === workload).n)} ${unit === 'steps' ? 'machines' : 'jobs'} per run)\n\n`;
}

// latency table: medians over the runs of each percentile
function latency() {
	const by = group('latency');
	if (by.size === 0)
		return '';
	let out = '### Idle pickup latency (insert commit -> handler starts), ms\n\n' +
		'| system | p50 | p95 | p99 | max | runs |\n|---|---|---|---|---|---|\n';
	for (const [system, rows] of by) {
		const m = (k) => fmt(median(rows.map((r) => r[k])), 2);
		out += `| ${system} | ${m('p50')} | ${m('p95')} | ${m('p99')} | ${m('max')} | ${rows.length} |\n`;
	}
	return out + `\n(${fmt(lines.find((l) => l.workload === 'latency').n)} samples per run; medians over the runs)\n\n`;
}

// claim latency per backlog: medians over the runs of each percentile
function backlog() {
	const rows = lines.filter((l) => l.workload === 'pick_backlog' || l.workload === 'pick_terminal');
	if (rows.length === 0)
		return '';
	const by = new Map();
	for (const r of rows) {
		const key = `${r.system}|${r.runnable}|${r.terminal}`;
		if (!by.has(key))
			by.set(key, []);
		by.get(key).push(r);
	}
	let out = '### Claim latency of a batch of 10 as the backlog grows, ms\n\n' +
		'| system | runnable rows | terminal rows | p50 | p95 | p99 | max | runs |\n|---|---|---|---|---|---|---|---|\n';
	for (const [, rs] of by) {
		const m = (k) => fmt(median(rs.map((r) => r[k])), 2);
		out += `| ${rs[0].system} | ${fmt(rs[0].runnable)} | ${fmt(rs[0].terminal)} | ${m('p50')} | ${m('p95')} | ${m('p99')} | ${m('max')} | ${rs.length} |\n`;
	}
	return out + '\n(200 claims per run, each rolled back so the backlog stays the same)\n\n';
}

const first = lines[0] || {};
process.stdout.write(
	`Measured ${new Date().toISOString().slice(0, 10)} on ${os.cpus().length} cores ` +
	`(${os.cpus()[0]?.model ?? 'unknown CPU'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ` +
	`PostgreSQL 15 with fsync and synchronous_commit on; ${first.concurrency} connections ` +
	`doing the work, batches of ${first.batch}, Node ${process.version}.\n\n` +
	throughput('enqueue', 'Bulk enqueue') +
	throughput('drain', 'Drain a backlog of no-op one-step jobs') +
	latency() +
	throughput('fsm', 'A machine of 5 no-op steps, each step queued', 'steps') +
	throughput('fsm_inline', 'The same machine, steps continued inline', 'steps') +
	backlog());
