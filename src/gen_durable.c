/*-------------------------------------------------------------------------
 *
 * gen_durable.c
 *		Module entry point: PG_MODULE_MAGIC, _PG_init and the GUCs.
 *
 *		Every GUC is PGC_SIGHUP or PGC_USERSET so the SQL API works whether
 *		or not the library is in shared_preload_libraries.  The hint on
 *		permission errors is installed in every backend that loads the
 *		library (privilege_hint.c).  When preloaded,
 *		_PG_init also installs the shared memory hooks, the utility hook
 *		and the launcher background worker; without preloading those are
 *		absent and the SQL functions fall back (wait.c, session.c).  The
 *		functions themselves live in one file per concern.
 *
 * IDENTIFICATION
 *		src/gen_durable.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "utils/guc.h"

#include "aftercommit.h"
#include "claim_log.h"
#include "claims.h"
#include "archive.h"
#include "gen_durable.h"
#include "launcher.h"
#include "privilege_hint.h"
#include "shmem.h"
#include "utility_hook.h"

PG_MODULE_MAGIC;

int			gen_durable_retention = 86400;	/* seconds a terminal row is kept */
int			gen_durable_gc_batch = 10000;	/* rows deleted per GC statement */
int			gen_durable_default_lease = 30000;	/* ms, lease of an inline continue */
int			gen_durable_max_wait = 30000;	/* ms, cap on pick's and await's wait */
int			gen_durable_maintenance_interval = 10000;	/* ms, longest worker sleep */
bool		gen_durable_notify = true;	/* send NOTIFY pokes */
bool		gen_durable_maintenance_worker = true;	/* the worker runs the sweeps */
bool		gen_durable_reclaim_on_disconnect = true;	/* record claim sessions */
bool		gen_durable_require_claim = false;	/* flush refuses outcomes without a claim */

/*
 * _PG_init defines the GUCs and reserves the gen_durable prefix so that a
 * misspelt setting is reported instead of silently ignored.
 */
void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	DefineCustomIntVariable("gen_durable.retention",
							"How long terminal instances are kept before GC deletes them.",
							NULL,
							&gen_durable_retention,
							86400, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gen_durable.gc_batch",
							"Largest number of terminal instances one GC statement deletes.",
							NULL,
							&gen_durable_gc_batch,
							10000, 1, GD_MAX_BATCH,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gen_durable.default_lease",
							"Lease given to a claim that an inline continue keeps, when the outcome names none.",
							NULL,
							&gen_durable_default_lease,
							30000, 1000, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gen_durable.max_wait",
							"Longest time pick(wait => ...) and await() wait.",
							"A waiting call holds its snapshot, and so the vacuum horizon, while it waits.",
							&gen_durable_max_wait,
							30000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gen_durable.maintenance_interval",
							"Longest time the maintenance worker sleeps between rounds.",
							"It wakes earlier when something falls due: a scheduled row, an await timeout or a lease.",
							&gen_durable_maintenance_interval,
							10000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("gen_durable.maintenance_worker",
							 "Runs the sweeps in the background worker of each database.",
							 "Off leaves the sweeps to gen_durable.run_maintenance().",
							 &gen_durable_maintenance_worker,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("gen_durable.notify",
							 "Sends a coalesced NOTIFY on channel gen_durable:<queue> when work in a queue becomes runnable.",
							 NULL,
							 &gen_durable_notify,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("gen_durable.reclaim_on_disconnect",
							 "Returns a claim to runnable soon after the connection that made it closes.",
							 "Turn it off for clients that pick and flush over different connections; the lease then is the only limit.",
							 &gen_durable_reclaim_on_disconnect,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("gen_durable.require_claim",
							 "Makes flush answer invalid to an outcome that does not name its claim.",
							 "An outcome without \"claim\" is checked by worker id alone, so a late outcome of a lost claim can apply to a later claim of the same worker; turn this on once every worker sends the claim.",
							 &gen_durable_require_claim,
							 false,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	gd_claims_define_gucs();
	gd_archive_define_gucs();
	MarkGUCPrefixReserved("gen_durable");
	gd_aftercommit_init();
	gd_claims_init();
	gd_privilege_hint_install();

	if (!process_shared_preload_libraries_in_progress)
		return;

	gd_shmem_install_hooks();
	gd_claims_install_hooks();
	gd_claim_log_register();
	gd_launcher_install();
	gd_utility_hook_install();
}
