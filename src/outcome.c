/*-------------------------------------------------------------------------
 *
 * outcome.c
 *		Parsing and validation of the outcome objects handed to flush().
 *
 *		Every entry is checked before anything is written (contract D9).
 *		A malformed entry does not raise: it is marked invalid with the
 *		reason, reported as such by flush, and its instance stays claimed;
 *		the other entries still commit.  Only a malformed argument as a
 *		whole (not an array, too many entries) is an error.  Unknown keys
 *		are invalid too, so that a misspelt field is never silently ignored.
 *
 * IDENTIFICATION
 *		src/outcome.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "args.h"
#include "gen_durable.h"
#include "insert_spec.h"
#include "outcome.h"

static const char *const next_keys[] = {
	"id", "worker", "kind", "claim", "step", "state", "rate_limit", "weight",
	"concurrency_key", "fsm_version", "continue", "lease", NULL
};
static const char *const retry_keys[] = {
	"id", "worker", "kind", "claim", "state", "delay", "error", NULL
};
static const char *const await_keys[] = {
	"id", "worker", "kind", "claim", "names", "step", "state", "timeout", NULL
};
static const char *const spawn_keys[] = {
	"id", "worker", "kind", "claim", "children", "step", "state", "join", NULL
};
static const char *const done_keys[] = {
	"id", "worker", "kind", "claim", "result", NULL
};
static const char *const fail_keys[] = {
	"id", "worker", "kind", "claim", "error", NULL
};

/*
 * parse_state reads the optional "state" (absent = keep).
 */
static char *
parse_state(JsonbContainer *obj, Outcome *o)
{
	JsonbValue *v = gd_json_field(obj, "state");

	if (v == NULL)
		return NULL;
	return gd_json_object(v, "state", &o->state);
}

/*
 * parse_step reads the required "step".
 */
static char *
parse_step(JsonbContainer *obj, Outcome *o)
{
	JsonbValue *v = gd_json_field(obj, "step");

	if (v == NULL)
		return pstrdup("\"step\" is required");
	return gd_json_name(v, "step", &o->step);
}

/*
 * parse_next reads a "next" entry: the next step, its state and the
 * admission options of the next step.
 */
static char *
parse_next(JsonbContainer *obj, Outcome *o)
{
	JsonbValue *v;
	char	   *problem;
	int64		version;

	if ((problem = parse_step(obj, o)) || (problem = parse_state(obj, o)))
		return problem;
	o->weight = 1;
	if ((v = gd_json_field(obj, "rate_limit")) != NULL && !gd_json_is_null(v) &&
		(problem = gd_json_name(v, "rate_limit", &o->rate_limit)))
		return problem;
	if ((v = gd_json_field(obj, "weight")) != NULL &&
		(problem = gd_json_positive_float(v, "weight", &o->weight)))
		return problem;
	if ((v = gd_json_field(obj, "concurrency_key")) != NULL)
	{
		o->set_key = true;
		if (!gd_json_is_null(v) &&
			(problem = gd_json_name(v, "concurrency_key", &o->concurrency_key)))
			return problem;
	}
	if ((v = gd_json_field(obj, "fsm_version")) != NULL)
	{
		if ((problem = gd_json_int(v, "fsm_version", PG_INT32_MIN, PG_INT32_MAX, &version)))
			return problem;
		o->has_fsm_version = true;
		o->fsm_version = (int32) version;
	}
	if ((v = gd_json_field(obj, "continue")) != NULL &&
		(problem = gd_json_bool(v, "continue", &o->cont)))
		return problem;
	if ((v = gd_json_field(obj, "lease")) != NULL)
	{
		if ((problem = gd_json_duration(v, "lease", &o->lease)))
			return problem;
		if (!gd_interval_positive(&o->lease))
			return pstrdup("\"lease\" must be longer than zero");
		if (!o->cont)
			return pstrdup("\"lease\" is only allowed with \"continue\": true");
		o->has_lease = true;
	}
	return NULL;
}

/*
 * parse_retry reads a "retry" entry: optional state, delay and error.
 */
static char *
parse_retry(JsonbContainer *obj, Outcome *o)
{
	JsonbValue *v;
	char	   *problem;

	if ((problem = parse_state(obj, o)))
		return problem;
	if ((v = gd_json_field(obj, "delay")) != NULL &&
		(problem = gd_json_duration(v, "delay", &o->delay)))
		return problem;
	if ((v = gd_json_field(obj, "error")) != NULL)
		o->error = gd_json_value(v);
	return NULL;
}

/*
 * parse_await reads an "await" entry: the names to wait for, the step to
 * run when woken, its state and an optional timeout.
 */
static char *
parse_await(JsonbContainer *obj, Outcome *o)
{
	JsonbValue *v;
	char	   *problem;

	if ((v = gd_json_field(obj, "names")) == NULL)
		return pstrdup("\"names\" is required");
	if ((problem = gd_json_name_array(v, "names", &o->names)) ||
		(problem = parse_step(obj, o)) ||
		(problem = parse_state(obj, o)))
		return problem;
	if ((v = gd_json_field(obj, "timeout")) != NULL && !gd_json_is_null(v))
	{
		if ((problem = gd_json_duration(v, "timeout", &o->timeout)))
			return problem;
		if (!gd_interval_positive(&o->timeout))
			return pstrdup("\"timeout\" must be longer than zero");
		o->has_timeout = true;
	}
	return NULL;
}

/* the time specs of spawned children count their delays from */
static TimestampTz parse_now;

/* the children of a spawn being parsed */
typedef struct ChildSpecs
{
	JsonbContainer *specs;
	Outcome    *o;
} ChildSpecs;

/*
 * parse_child_specs parses every child spec (for gd_catch_bad_input: the
 * spec parser raises errors, which insert_many wants).
 */
static void
parse_child_specs(void *arg)
{
	ChildSpecs *c = (ChildSpecs *) arg;
	int			i;

	for (i = 0; i < c->o->nchildren; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(c->specs, i);

		if (e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("insert spec at position %d: must be a JSON object", i)));
		gd_spec_from_json(e->val.binary.data, i, parse_now, &c->o->children[i]);
	}
}

/*
 * parse_children reads the insert specs of a spawn.  A bad spec makes the
 * entry invalid rather than failing the flush.
 */
static char *
parse_children(JsonbValue *v, Outcome *o)
{
	ChildSpecs	c;
	char	   *problem;

	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		return pstrdup("\"children\" must be an array of insert specs");
	c.specs = v->val.binary.data;
	c.o = o;
	o->nchildren = JsonContainerSize(c.specs);
	if (o->nchildren > GD_MAX_BATCH)
		return psprintf("\"children\" has more than %d specs", GD_MAX_BATCH);
	o->children = palloc0(sizeof(InsertSpec) * Max(o->nchildren, 1));
	problem = gd_catch_bad_input(parse_child_specs, &c);
	return problem ? psprintf("\"children\": %s", problem) : NULL;
}

/*
 * parse_spawn reads a "spawn" entry: the children, the step the parent
 * runs once they have all settled, its state and the join policy.
 */
static char *
parse_spawn(JsonbContainer *obj, Outcome *o)
{
	JsonbValue *v;
	char	   *problem;
	char	   *join;

	if ((v = gd_json_field(obj, "children")) == NULL)
		return pstrdup("\"children\" is required");
	if ((problem = parse_step(obj, o)) || (problem = parse_state(obj, o)))
		return problem;
	if ((v = gd_json_field(obj, "join")) != NULL && !gd_json_is_null(v))
	{
		if ((problem = gd_json_name(v, "join", &join)))
			return problem;
		if (strcmp(join, "first_error") == 0)
			o->first_error = true;
		else if (strcmp(join, "all") != 0)
			return pstrdup("\"join\" must be \"all\" or \"first_error\"");
	}
	return parse_children(gd_json_field(obj, "children"), o);
}

/*
 * parse_done reads a "done" entry: the optional result (default {}).
 */
static char *
parse_done(JsonbContainer *obj, Outcome *o)
{
	JsonbValue *v = gd_json_field(obj, "result");

	o->result = v ? gd_json_value(v)
		: DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
	return NULL;
}

/*
 * parse_fail reads a "fail" entry: the error, any JSON (default
 * {"reason": "failed"}).
 */
static char *
parse_fail(JsonbContainer *obj, Outcome *o)
{
	JsonbValue *v = gd_json_field(obj, "error");

	o->error = v ? gd_json_value(v)
		: DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
											 CStringGetDatum("{\"reason\": \"failed\"}")));
	return NULL;
}

/* the kinds, their keys and their parsers */
typedef struct KindDef
{
	const char *name;
	OutcomeKind kind;
	const char *const *keys;
	char	   *(*parse) (JsonbContainer *obj, Outcome *o);
} KindDef;

static const KindDef kinds[] = {
	{"next", OUTCOME_NEXT, next_keys, parse_next},
	{"retry", OUTCOME_RETRY, retry_keys, parse_retry},
	{"await", OUTCOME_AWAIT, await_keys, parse_await},
	{"spawn", OUTCOME_SPAWN, spawn_keys, parse_spawn},
	{"done", OUTCOME_DONE, done_keys, parse_done},
	{"fail", OUTCOME_FAIL, fail_keys, parse_fail},
};

/*
 * gd_outcome_kind_name returns the name of a kind, as written in outcomes.
 */
const char *
gd_outcome_kind_name(OutcomeKind kind)
{
	int			k;

	for (k = 0; k < lengthof(kinds); k++)
		if (kinds[k].kind == kind)
			return kinds[k].name;
	elog(ERROR, "unknown outcome kind %d", (int) kind);
	return NULL;				/* keep compiler quiet */
}

/*
 * parse_one validates one element of the outcomes array, returning why it
 * is invalid or NULL.
 */
static char *
parse_one(JsonbValue *e, Outcome *o)
{
	JsonbContainer *obj;
	JsonbValue *v;
	char	   *problem;
	char	   *kind;
	const KindDef *def = NULL;
	int			k;

	if (e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
		return pstrdup("an outcome must be a JSON object");
	obj = e->val.binary.data;

	if ((v = gd_json_field(obj, "id")) == NULL)
		return pstrdup("\"id\" is required");
	if ((problem = gd_json_id(v, "id", &o->id)))
		return problem;
	o->has_id = true;
	if ((v = gd_json_field(obj, "worker")) == NULL)
		return pstrdup("\"worker\" is required");
	if ((problem = gd_json_name(v, "worker", &o->worker)))
		return problem;
	if ((v = gd_json_field(obj, "claim")) != NULL && !gd_json_is_null(v))
	{
		if ((problem = gd_json_id(v, "claim", &o->claim)))
			return problem;
		o->has_claim = true;
	}
	else if (gen_durable_require_claim)
		return pstrdup("\"claim\" is required (gen_durable.require_claim is on): send the job's claim");
	if ((v = gd_json_field(obj, "kind")) == NULL)
		return pstrdup("\"kind\" is required");
	if ((problem = gd_json_name(v, "kind", &kind)))
		return problem;
	for (k = 0; k < lengthof(kinds); k++)
		if (strcmp(kinds[k].name, kind) == 0)
			def = &kinds[k];
	if (def == NULL)
		return psprintf("unknown kind \"%s\" (expected next, retry, await, spawn, done or fail)",
						gd_clip(kind, strlen(kind), 64));
	o->kind = def->kind;
	if ((problem = gd_json_unknown_key(obj, def->keys)))
		return psprintf("%s for kind %s", problem, def->name);
	return def->parse(obj, o);
}

/*
 * gd_parse_outcomes validates the outcomes argument of flush and returns
 * its entries in input order.
 */
Outcome *
gd_parse_outcomes(Jsonb *outcomes, TimestampTz now, int *n)
{
	Outcome    *out;
	int			count;
	int			i;

	count = gd_json_batch_array(outcomes, "outcomes", "outcome objects",
								"[{\"id\": 1, \"worker\": \"w1\", \"kind\": \"done\"}]");

	parse_now = now;
	out = palloc0(sizeof(Outcome) * Max(count, 1));
	for (i = 0; i < count; i++)
		out[i].invalid = parse_one(getIthJsonbValueFromContainer(&outcomes->root, i), &out[i]);
	*n = count;
	return out;
}
