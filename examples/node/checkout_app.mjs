// checkout_app.mjs - the checkout workload's worker app (the contract:
// examples/checkout/README.md) on gen_durable_worker.mjs.
//
//   node checkout_app.mjs [--queues orders,items] [--concurrency 8] [--batch 20]
//
// Connects with the libpq environment (PG*) or DATABASE_URL, prints
// `ready <worker id>` on stdout once it picks and `stopped <worker id>` after
// a graceful shutdown (SIGTERM, SIGINT), then exits 0; logs go to stderr.

import { parseArgs } from 'node:util';
import { Worker, awaitSignals, done, fail, next, spawn } from './gen_durable_worker.mjs';

const USAGE = 'usage: checkout_app.mjs [--queues orders,items] [--concurrency 8] [--batch 20]';

// options parses the command line; exits 2 with the usage on a bad one
function options() {
	try {
		const { values } = parseArgs({
			options: {
				queues: { type: 'string', default: 'orders,items' },
				concurrency: { type: 'string', default: '8' },
				batch: { type: 'string', default: '20' },
			},
		});
		const queues = values.queues.split(',').filter((q) => q !== '');
		const concurrency = Number(values.concurrency);
		const batch = Number(values.batch);
		if (queues.length === 0 || !Number.isInteger(concurrency) || concurrency < 1
			|| !Number.isInteger(batch) || batch < 1)
			throw new Error('--queues must name a queue, --concurrency and --batch must be positive integers');
		return { queues, concurrency, batch };
	} catch (err) {
		process.stderr.write(`${err.message}\n${USAGE}\n`);
		process.exit(2);
	}
}

// sleep resolves after ms milliseconds, or rejects when `signal` aborts
function sleep(ms, signal) {
	return new Promise((resolve, reject) => {
		const timer = setTimeout(resolve, ms);
		signal.addEventListener('abort', () => {
			clearTimeout(timer);
			reject(signal.reason);
		}, { once: true });
	});
}

const worker = new Worker(options());

// checkout/start plans the order: one line_item child per line, joined
// (all) into step collect
worker.step('checkout', 'start', async (job) => {
	const { order, lines } = job.state;
	const children = [];
	for (let line = 1; line <= lines; line++)
		children.push({
			fsm: 'line_item', queue: 'items', state: { order, line, price: 10 * line }, max_attempts: 5,
		});
	return spawn(children, 'collect', { join: 'all' });
});

// checkout/collect totals the lines' prices and waits for the payment
worker.step('checkout', 'collect', async (job) => {
	const { order, lines } = job.state;
	if (job.children.some((c) => c.status !== 'done'))
		return fail({ reason: 'line failed' });
	const total = job.children.reduce((sum, c) => sum + c.result.price, 0);
	return awaitSignals(['paid'], 'charge', { timeout: '60 s', state: { order, lines, total } });
});

// checkout/charge checks the payment against the total
worker.step('checkout', 'charge', async (job) => {
	const { order, total } = job.state;
	if (job.timed_out)
		return fail({ reason: 'payment timeout' });
	const paid = job.awaited.find((s) => s.name === 'paid');
	if (!paid)
		throw new Error('woken without a paid signal');
	const amount = paid.payload.amount;
	return amount === total
		? done({ order, total, paid: amount })
		: fail({ reason: 'amount mismatch' });
});

// line_item/start is the flaky reservation: the first attempt of one line
// in ten fails (and is retried with the library's backoff)
worker.step('line_item', 'start', async (job) => {
	const { order, line } = job.state;
	if ((order * 7 + line) % 10 === 0 && job.attempt === 0)
		throw new Error(`reservation of order ${order} line ${line} failed`);
	return next('ship', { rateLimit: 'shipping_api', concurrencyKey: `warehouse:${line % 3}`, continue: true });
});

// line_item/ship calls the "shipping API" (5 to 20 ms)
worker.step('line_item', 'ship', async (job, ctx) => {
	const { order, line, price } = job.state;
	await sleep(5 + Math.random() * 15, ctx.signal);
	return done({ order, line, price, shipped: true });
});

try {
	await worker.start();
} catch (err) {
	process.stderr.write(`checkout_app: cannot start: ${err.message}\n`);
	process.exit(1);
}
process.stdout.write(`ready ${worker.id}\n`);
await worker.stopped;
process.stdout.write(`stopped ${worker.id}\n`, () => process.exit(0));
