// systems/common.mjs - what the drivers that run their own worker loops
// (gen_durable, bare) share: a connection, and running CONCURRENCY workers
// until a number of jobs is done.

// connect opens one client with the libpq environment
export async function connect(env) {
	const client = new env.pg.Client(env.config);
	await client.connect();
	return client;
}

// untilDone starts env.concurrency workers, worker(env, id, progress), and
// resolves as soon as they have reported n jobs done through
// progress.counted(k) (workers loop while progress.done < n).  Workers
// still waiting for work then stop on their own; bench.mjs exits without
// them.
export async function untilDone(env, n, worker) {
	let reached;
	const all = new Promise((resolve) => { reached = resolve; });
	const progress = {
		done: 0,
		counted(k) {
			this.done += k;
			if (this.done >= n)
				reached();
		},
	};
	const workers = [];
	for (let i = 0; i < env.concurrency; i++)
		workers.push(worker(env, i, progress));
	await Promise.race([all, Promise.all(workers)]);
}
