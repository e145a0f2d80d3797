// systems/gen_durable_inplace.mjs - gen_durable with its finished jobs kept
// in the live table, as before 0.9.0 (gen_durable.archive_finished off for
// the benchmark's database): run beside gen_durable, it shows what the
// archive changes.  Everything but setup is gen_durable.mjs.

import { connect } from './common.mjs';
import * as gen_durable from './gen_durable.mjs';

export * from './gen_durable.mjs';

// setup creates the extension and turns the archive off for every
// connection the run opens afterwards
export async function setup(env) {
	await gen_durable.setup(env);
	const c = await connect(env);
	await c.query(`DO $$ BEGIN
	                 EXECUTE format('ALTER DATABASE %I SET gen_durable.archive_finished = off',
	                                current_database());
	               END $$`);
	await c.end();
}
