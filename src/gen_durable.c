/*-------------------------------------------------------------------------
 *
 * gen_durable.c
 *		Module entry point: PG_MODULE_MAGIC, _PG_init and the GUCs.
 *
 *		Every GUC is PGC_SIGHUP or PGC_USERSET so the SQL API works whether
 *		or not the library is in shared_preload_libraries; the functions
 *		themselves live in one file per concern (insert.c, pick.c, ...).
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

#include "gen_durable.h"

PG_MODULE_MAGIC;

int			gen_durable_retention = 86400;	/* seconds a terminal row is kept */
int			gen_durable_gc_batch = 10000;	/* rows deleted per GC statement */
int			gen_durable_default_lease = 30000;	/* ms, lease of an inline continue */
int			gen_durable_max_wait = 30000;	/* ms, cap on pick's wait */

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
							"Longest time pick(wait => ...) waits for work.",
							"A waiting call holds its snapshot, and so the vacuum horizon, while it waits.",
							&gen_durable_max_wait,
							30000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("gen_durable");
}
