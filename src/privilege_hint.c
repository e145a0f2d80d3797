/*-------------------------------------------------------------------------
 *
 * privilege_hint.c
 *		A hint on PostgreSQL's own permission errors for the engine's
 *		objects, naming the role to grant.
 *
 *		Nothing of gen_durable is granted to PUBLIC: a role gets its part
 *		through gen_durable_producer, gen_durable_worker or
 *		gen_durable_admin.  A role with none of them is refused by
 *		PostgreSQL before any engine code runs ("permission denied for
 *		schema gen_durable"), with nothing that points at the roles.  An
 *		emit_log_hook adds the hint to such an error as it is reported:
 *		for the schema it lists the three roles, for one of the engine's
 *		functions the role that has it, for its tables and views the admin
 *		role.  The hook sees only the error's text (no catalog access is
 *		safe while an error is reported), so a function is recognised by
 *		its name and the hint names it as gen_durable's.  It runs in the
 *		backends that have loaded the library: all of them with
 *		shared_preload_libraries; otherwise only after a first call, which
 *		is too late for the schema error.  An error caught by an exception
 *		handler is not reported, so it gets no hint.
 *
 * IDENTIFICATION
 *		src/privilege_hint.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/elog.h"

#include "privilege_hint.h"

static emit_log_hook_type prev_emit_log_hook = NULL;

/* which role is granted each API function (the install script's grants) */
static const struct
{
	const char *function;
	const char *role;
}			function_roles[] = {
	{"insert", "gen_durable_producer"},
	{"insert_many", "gen_durable_producer"},
	{"signal", "gen_durable_producer"},
	{"await", "gen_durable_producer"},
	{"cancel", "gen_durable_producer"},
	{"find", "gen_durable_producer"},
	{"timeline", "gen_durable_producer"},
	{"cron_next", "gen_durable_producer"},
	{"pick", "gen_durable_worker"},
	{"flush", "gen_durable_worker"},
	{"heartbeat", "gen_durable_worker"},
	{"release", "gen_durable_worker"},
	{"admit", "gen_durable_worker"},
	{"set_rate_limit", "gen_durable_admin"},
	{"set_concurrency_limit", "gen_durable_admin"},
	{"drop_limit", "gen_durable_admin"},
	{"pause_queue", "gen_durable_admin"},
	{"resume_queue", "gen_durable_admin"},
	{"set_queue_history", "gen_durable_admin"},
	{"schedule", "gen_durable_admin"},
	{"unschedule", "gen_durable_admin"},
	{"retry", "gen_durable_admin"},
	{"fail", "gen_durable_admin"},
	{"run_maintenance", "gen_durable_admin"},
	{"reset_stats", "gen_durable_admin"},
	{"_stats", "gen_durable_admin"},
	{"_health", "gen_durable_admin"},
	{"_memory_claims", "gen_durable_producer"},
};

/* the relations of the schema, readable by the admin role */
static const char *const relations[] = {
	"instances", "signals", "limits", "buckets", "queue_settings", "schedules",
	"step_history", "stats", "queues", "schedule_status", "health", "claims",
};

/*
 * denied_name returns the object name of a "permission denied for <kind>
 * <name>" error of the given untranslated format, or NULL when the error
 * is another one.  The name is the message's text after the format's
 * prefix; a translated message has no such prefix and gets no hint.
 */
static const char *
denied_name(ErrorData *edata, const char *format)
{
	size_t		prefix = strlen(format) - strlen("%s");

	if (edata->message_id == NULL || strcmp(edata->message_id, format) != 0 ||
		strncmp(edata->message, format, prefix) != 0)
		return NULL;
	return edata->message + prefix;
}

/*
 * privilege_hint is the emit_log_hook: it adds the hint to a permission
 * error on the engine's schema, functions or relations that has none.
 */
static void
privilege_hint(ErrorData *edata)
{
	const char *name;
	int			i;

	if (edata->elevel >= ERROR && edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE &&
		edata->hint == NULL)
	{
		if ((name = denied_name(edata, "permission denied for schema %s")) != NULL &&
			strcmp(name, "gen_durable") == 0)
			edata->hint = pstrdup("gen_durable's functions are granted to three roles: "
								  "gen_durable_producer (insert, signal, await, cancel, find), "
								  "gen_durable_worker (pick, flush, heartbeat, release) and "
								  "gen_durable_admin (all of them, limits, schedules, queues). "
								  "GRANT the one it needs to the role that calls them.");
		else if ((name = denied_name(edata, "permission denied for function %s")) != NULL)
		{
			for (i = 0; i < lengthof(function_roles); i++)
				if (strcmp(name, function_roles[i].function) == 0)
					edata->hint = psprintf("gen_durable.%s is granted to the role %s%s: "
										   "GRANT it to the role that calls it.",
										   name, function_roles[i].role,
										   strcmp(function_roles[i].role, "gen_durable_admin") == 0
										   ? "" : " (and to gen_durable_admin)");
		}
		else if ((name = denied_name(edata, "permission denied for table %s")) != NULL ||
				 (name = denied_name(edata, "permission denied for view %s")) != NULL)
		{
			for (i = 0; i < lengthof(relations); i++)
				if (strcmp(name, relations[i]) == 0)
					edata->hint = psprintf("gen_durable.%s can be read by the role gen_durable_admin%s; "
										   "only the engine's functions write it.",
										   name, strcmp(name, "instances") == 0
										   ? " (and gen_durable_producer)" : "");
		}
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * gd_privilege_hint_install installs the hook; called from _PG_init.
 */
void
gd_privilege_hint_install(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = privilege_hint;
}
