// test/bench/results.mjs - reading run.sh's raw lines (results.jsonl), for
// the tables (report.mjs) and the charts (charts.mjs): one place for how
// runs are grouped, summarized and named.

import { readFileSync } from 'node:fs';

// readResults returns the JSON lines of a results.jsonl file
export function readResults(path) {
	return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

// median of numbers
export function median(xs) {
	const s = [...xs].sort((a, b) => a - b);
	return s[Math.floor((s.length - 1) / 2)];
}

// medianOf is the median over runs of one field
export function medianOf(rows, key) {
	return median(rows.map((r) => r[key]));
}

// bySystem groups the lines of a workload by system, in the systems' order
// of appearance
export function bySystem(lines, workload) {
	const by = new Map();
	for (const r of lines.filter((l) => l.workload === workload)) {
		if (!by.has(r.system))
			by.set(r.system, []);
		by.get(r.system).push(r);
	}
	return by;
}

// label is how a system is named in tables and charts
export function label(system) {
	return system === 'gen_durable_libpq' ? 'gen_durable (C libpq driver)' : system;
}
