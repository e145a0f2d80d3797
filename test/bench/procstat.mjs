// test/bench/procstat.mjs - the CPU a PostgreSQL cluster uses, read from
// /proc, in total and per kind of process (the soak's sampler; bench.mjs has
// its own copy of the total, serverCpuUs).
//
// The total is what bench.mjs measures: the postmaster's own CPU and that
// of its children it has reaped (cutime, cstime: backends of closed
// connections, autovacuum workers that finished), plus that of its live
// children (utime, stime).  The split by kind follows each live child by
// its process title (/proc/PID/cmdline: "postgres: autovacuum worker",
// "postgres: gen_durable worker for database ...", "postgres: checkpointer",
// ...) and keeps the last CPU seen of every pid; a child that exits is
// credited with that last reading, and the CPU it used after it (at most one
// polling interval's worth) is left in `exited`.  Call poll() every second
// or so to keep that remainder small (an autovacuum worker lives for the
// tables of one round).

import { readFileSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

// the kinds of processes, by a pattern of their title; the first match wins
const KINDS = [
	['autovacuum', /autovacuum (worker|launcher)/],
	['gen_durable_worker', /gen_durable (worker|launcher)/],
	['checkpointer', /checkpointer/],
	['walwriter', /walwriter/],
	['bgwriter', /background writer/],
	['backends', /./],
];

export const CPU_KINDS = [...KINDS.map(([k]) => k), 'postmaster', 'exited'];

// clockTicks is the kernel's clock ticks per second (the unit of /proc stat)
function clockTicks() {
	return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
}

// statOf returns [ppid, utime + stime, cutime + cstime] of a pid, in ticks,
// or null when it is gone
function statOf(pid) {
	let stat;
	try {
		stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
	} catch {
		return null;
	}
	// the fields after "(comm)": state ppid ... utime (14th field of the
	// line) stime cutime cstime
	const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
	const [utime, stime, cutime, cstime] = f.slice(11, 15).map(Number);
	return [Number(f[1]), utime + stime, cutime + cstime];
}

// kindOf classifies a pid by its process title
function kindOf(pid) {
	let title = '';
	try {
		title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
	} catch {
		// gone: counted as a backend, it will not be seen again anyway
	}
	// (a pid gone before its title was read has none: a backend too)
	return (KINDS.find(([, re]) => re.test(title)) ?? ['backends'])[0];
}

// ClusterCpu follows the processes of the cluster whose data directory is
// pgdata
export class ClusterCpu {
	constructor(pgdata) {
		this.pgdata = pgdata;
		this.hz = clockTicks();
		this.seen = new Map();		// pid -> { kind, ticks }
		this.gone = Object.fromEntries(CPU_KINDS.map((k) => [k, 0]));	// ticks of exited pids
		this.postmaster = Number(readFileSync(`${pgdata}/postmaster.pid`, 'utf8').split('\n')[0]);
		this.last = null;
		this.poll();
	}

	// poll reads every live child of the postmaster once
	poll() {
		const pm = statOf(this.postmaster);
		if (pm === null)
			return this.last;
		const alive = new Set();
		for (const entry of readdirSync('/proc')) {
			if (!/^\d+$/.test(entry))
				continue;
			const pid = Number(entry);
			const st = statOf(pid);
			if (st === null || st[0] !== this.postmaster)
				continue;
			alive.add(pid);
			let p = this.seen.get(pid);
			if (!p) {
				p = { kind: kindOf(pid), ticks: 0 };
				this.seen.set(pid, p);
			}
			p.ticks = st[1];
		}
		for (const [pid, p] of this.seen) {
			if (!alive.has(pid)) {
				this.gone[p.kind] += p.ticks;
				this.seen.delete(pid);
			}
		}
		const byKind = Object.fromEntries(CPU_KINDS.map((k) => [k, this.gone[k]]));
		let liveTicks = 0;
		for (const p of this.seen.values()) {
			byKind[p.kind] += p.ticks;
			liveTicks += p.ticks;
		}
		byKind.postmaster = pm[1];
		// reaped children: what their last readings did not account for
		const goneTicks = CPU_KINDS.filter((k) => k !== 'postmaster' && k !== 'exited')
			.reduce((a, k) => a + this.gone[k], 0);
		byKind.exited = Math.max(0, pm[2] - goneTicks);
		const toUs = (t) => t * 1e6 / this.hz;
		this.last = {
			total_us: toUs(pm[1] + pm[2] + liveTicks),
			by_kind_us: Object.fromEntries(Object.entries(byKind).map(([k, t]) => [k, toUs(t)])),
		};
		return this.last;
	}
}
