/*-------------------------------------------------------------------------
 *
 * utility_hook.c
 *		The ProcessUtility hook: the commands that concern a database's
 *		maintenance worker.
 *
 *		Commands that need a database without other connections (DROP,
 *		RENAME, SET TABLESPACE, use as a template) would fail on the
 *		worker's connection: the hook stops that database's worker first
 *		and holds its restart back for GD_PAUSE_MS (slots.c).  CREATE
 *		DATABASE then asks for the copy's worker, after commit, since its
 *		template may have the extension.  DROP EXTENSION wakes the worker
 *		after commit so that it notices and exits at once.  DROP EXTENSION
 *		and DROP DATABASE also forget the database's claims in memory
 *		(claims.c): a new instances table would count its ids from 1
 *		again.
 *
 * IDENTIFICATION
 *		src/utility_hook.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"

#include "aftercommit.h"
#include "claims.h"
#include "slots.h"
#include "utility_hook.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * pause_worker pauses the worker of a database named by a command, for
 * someone the command itself would allow.
 */
static void
pause_worker(const char *dbname)
{
	Oid			dboid = get_database_oid(dbname, true);

	if (dboid == InvalidOid || !pg_database_ownercheck(dboid, GetUserId()))
		return;
	gd_pause_worker(dboid);
}

/*
 * has_option returns the value of a command's option, or NULL.
 */
static char *
has_option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *opt = lfirst_node(DefElem, lc);

		if (strcmp(opt->defname, name) == 0)
			return opt->arg != NULL ? defGetString(opt) : "";
	}
	return NULL;
}

/*
 * gd_process_utility stops or wakes workers around the commands that
 * concern them, then runs the command.
 */
static void
gd_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				   ProcessUtilityContext context, ParamListInfo params,
				   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	char	   *created = NULL;
	Oid			forget = InvalidOid;

	if (IsA(stmt, DropdbStmt))
	{
		pause_worker(((DropdbStmt *) stmt)->dbname);
		forget = get_database_oid(((DropdbStmt *) stmt)->dbname, true);
	}
	else if (IsA(stmt, RenameStmt) && ((RenameStmt *) stmt)->renameType == OBJECT_DATABASE)
		pause_worker(((RenameStmt *) stmt)->subname);
	else if (IsA(stmt, AlterDatabaseStmt) &&
			 has_option(((AlterDatabaseStmt *) stmt)->options, "tablespace"))
		pause_worker(((AlterDatabaseStmt *) stmt)->dbname);
	else if (IsA(stmt, CreatedbStmt))
	{
		char	   *template = has_option(((CreatedbStmt *) stmt)->options, "template");

		pause_worker(template ? template : "template1");
		created = ((CreatedbStmt *) stmt)->dbname;
	}
	else if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_EXTENSION)
	{
		ListCell   *lc;

		/* after commit the worker wakes, sees the extension gone and exits */
		foreach(lc, ((DropStmt *) stmt)->objects)
			if (strcmp(strVal(lfirst(lc)), "gen_durable") == 0)
			{
				gd_wake_worker();
				forget = MyDatabaseId;
			}
	}

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);

	/* a copy of a template with the extension needs its worker too */
	if (created != NULL)
		gd_worker_wanted(get_database_oid(created, false));
	if (OidIsValid(forget))
		gd_claims_forget(forget);
}

/*
 * gd_utility_hook_install installs the hook; called from _PG_init while
 * preloading (without the launcher there is no worker to stop or wake).
 */
void
gd_utility_hook_install(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = gd_process_utility;
}
