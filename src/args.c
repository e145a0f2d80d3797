/*-------------------------------------------------------------------------
 *
 * args.c
 *		Validation of SQL arguments and of fields inside JSON arguments.
 *
 *		Bad input never crashes and never half-applies a batch: SQL
 *		arguments are checked before any statement runs and refused with an
 *		errcode, a message naming the argument and a hint.  Fields inside
 *		JSON (insert specs, outcome objects) are checked by functions that
 *		return a message instead of raising, because flush reports a bad
 *		outcome as an "invalid" row while the rest of the batch commits.
 *
 * IDENTIFICATION
 *		src/args.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/numeric.h"

#include "args.h"
#include "gen_durable.h"

/*
 * gd_check_name refuses an empty or overlong name.
 */
void
gd_check_name(const char *value, const char *argname)
{
	size_t		len = strlen(value);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must not be empty", argname),
				 errhint("Pass a non-empty name.")));
	if (len > GD_MAX_NAME_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" is %zu bytes long, more than the limit of %d",
						argname, len, GD_MAX_NAME_LEN),
				 errhint("Use a shorter name.")));
}

/*
 * gd_arg_name returns a text argument as a C string after checking that it
 * is non-empty and not overlong; NULL is refused when required and returned
 * as NULL otherwise.
 */
char *
gd_arg_name(FunctionCallInfo fcinfo, int argno, const char *argname, bool required)
{
	char	   *value;

	if (PG_ARGISNULL(argno))
	{
		if (required)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument \"%s\" must not be NULL", argname),
					 errhint("Pass a non-empty name.")));
		return NULL;
	}
	value = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	gd_check_name(value, argname);
	return value;
}

/*
 * gd_interval_positive says whether an interval is longer than zero.
 */
bool
gd_interval_positive(Interval *span)
{
	Interval	zero = {0};

	return DatumGetInt32(DirectFunctionCall2(interval_cmp,
											 IntervalPGetDatum(span),
											 IntervalPGetDatum(&zero))) > 0;
}

/*
 * gd_interval_negative says whether an interval is shorter than zero.
 */
bool
gd_interval_negative(Interval *span)
{
	Interval	zero = {0};

	return DatumGetInt32(DirectFunctionCall2(interval_cmp,
											 IntervalPGetDatum(span),
											 IntervalPGetDatum(&zero))) < 0;
}

/*
 * gd_interval_too_long says whether a span is longer than 1e9 seconds
 * (about 31 years), the bound of every duration the engine takes: a
 * longer one would push the timestamps it is added to out of range, an
 * error that names no argument.
 */
bool
gd_interval_too_long(Interval *span)
{
	return (double) span->month * DAYS_PER_MONTH * SECS_PER_DAY +
		(double) span->day * SECS_PER_DAY + (double) span->time / USECS_PER_SEC > 1e9;
}

/*
 * gd_arg_interval returns a non-NULL interval argument, which must be
 * positive (leases) or at least not negative (waits, delays), and not
 * longer than 1e9 seconds.
 */
Interval *
gd_arg_interval(FunctionCallInfo fcinfo, int argno, const char *argname, bool positive)
{
	Interval   *span;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be NULL", argname),
				 errhint("Pass an interval such as '30 seconds'.")));
	span = PG_GETARG_INTERVAL_P(argno);
	if (positive ? !gd_interval_positive(span) : gd_interval_negative(span))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be %s", argname,
						positive ? "a positive interval" : "an interval of zero or more"),
				 errhint("Pass an interval such as '30 seconds'.")));
	if (gd_interval_too_long(span))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must not be longer than 1e9 seconds", argname),
				 errhint("Pass an interval such as '30 seconds'.")));
	return span;
}

/*
 * gd_arg_jsonb returns a non-NULL jsonb argument; the hint for a NULL shows
 * a valid value of that argument (an object, an array of outcomes...).
 */
Jsonb *
gd_arg_jsonb(FunctionCallInfo fcinfo, int argno, const char *argname, const char *example)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be NULL", argname),
				 errhint("Pass for example '%s'.", example)));
	return PG_GETARG_JSONB_P(argno);
}

/*
 * gd_arg_batch returns a batch size argument, which must lie in
 * 1..GD_MAX_BATCH.
 */
int
gd_arg_batch(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	int32		batch;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be NULL", argname),
				 errhint("Pass a batch size between 1 and %d.", GD_MAX_BATCH)));
	batch = PG_GETARG_INT32(argno);
	if (batch < 1 || batch > GD_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" is %d, outside the range 1 to %d",
						argname, batch, GD_MAX_BATCH),
				 errhint("Pass a batch size between 1 and %d.", GD_MAX_BATCH)));
	return batch;
}

/*
 * gd_json_batch_array checks that a jsonb argument is an array of at most
 * GD_MAX_BATCH elements and returns its length; what is an element of a
 * good one is shown by example in the hint.
 */
int
gd_json_batch_array(Jsonb *arg, const char *argname, const char *what,
					const char *example)
{
	int			n;

	if (!JB_ROOT_IS_ARRAY(arg) || JB_ROOT_IS_SCALAR(arg))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be a JSON array of %s", argname, what),
				 errhint("Pass for example '%s'.", example)));
	n = JB_ROOT_COUNT(arg);
	gd_check_batch_size(n, argname);
	return n;
}

/*
 * gd_check_batch_size refuses a batch argument of more than GD_MAX_BATCH
 * elements.
 */
void
gd_check_batch_size(int n, const char *argname)
{
	if (n > GD_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("argument \"%s\" has %d elements, more than the limit of %d",
						argname, n, GD_MAX_BATCH),
				 errhint("Split the call into smaller batches.")));
}

/*
 * gd_json_field returns the value of key in a JSON object, or NULL when the
 * key is absent.
 */
JsonbValue *
gd_json_field(JsonbContainer *obj, const char *key)
{
	return getKeyJsonValueFromContainer(obj, key, strlen(key), NULL);
}

/*
 * gd_json_unknown_key reports the first key of a JSON object that is not in
 * the NULL-terminated allowed list: a misspelt field is an error, not a
 * silently ignored option.
 */
char *
gd_json_unknown_key(JsonbContainer *obj, const char *const *allowed)
{
	JsonbIterator *it = JsonbIteratorInit(obj);
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		const char *const *a;
		bool		known = false;

		if (tok != WJB_KEY)
			continue;
		for (a = allowed; *a != NULL; a++)
		{
			if (strlen(*a) == (size_t) v.val.string.len &&
				memcmp(*a, v.val.string.val, v.val.string.len) == 0)
			{
				known = true;
				break;
			}
		}
		if (!known)
			return psprintf("unknown key \"%s\"",
							gd_clip(v.val.string.val, v.val.string.len, 64));
	}
	return NULL;
}

/*
 * gd_clip returns at most max bytes of the len-byte string s, cut at a
 * character boundary, for quoting user input in messages: cutting inside
 * a multibyte character would make the message itself invalid text.
 */
char *
gd_clip(const char *s, int len, int max)
{
	return pnstrdup(s, pg_mbcliplen(s, len, Min(len, max)));
}

/*
 * gd_catch_bad_input runs parse(arg) and returns NULL, or the message of
 * the data exception (SQLSTATE class 22) it raised: bad input is then the
 * caller's to report, for example as one entry's problem.  Anything else
 * (out of memory, a cancel) is rethrown.  Only for parsing that touches no
 * shared state, so the error is caught without a subtransaction.
 */
char *
gd_catch_bad_input(void (*parse) (void *arg), void *arg)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	char	   *volatile problem = NULL;

	PG_TRY();
	{
		parse(arg);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION)
			PG_RE_THROW();
		FlushErrorState();
		problem = pstrdup(edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return problem;
}

/*
 * gd_json_is_null says whether a present value is JSON null.
 */
bool
gd_json_is_null(JsonbValue *v)
{
	return v->type == jbvNull;
}

/*
 * gd_json_name reads a non-empty string of at most GD_MAX_NAME_LEN bytes.
 */
char *
gd_json_name(JsonbValue *v, const char *key, char **out)
{
	if (v->type != jbvString || v->val.string.len == 0)
		return psprintf("\"%s\" must be a non-empty string", key);
	if (v->val.string.len > GD_MAX_NAME_LEN)
		return psprintf("\"%s\" is longer than %d bytes", key, GD_MAX_NAME_LEN);
	*out = pnstrdup(v->val.string.val, v->val.string.len);
	return NULL;
}

/*
 * gd_json_number returns a JSON number as a double, or false when v is not a
 * finite number.
 */
static bool
gd_json_number(JsonbValue *v, double *out)
{
	if (v->type != jbvNumeric)
		return false;
	*out = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow,
											  NumericGetDatum(v->val.numeric)));
	return isfinite(*out);
}

/*
 * gd_json_int reads a whole number in min..max.
 */
char *
gd_json_int(JsonbValue *v, const char *key, int64 min, int64 max, int64 *out)
{
	char	   *text;
	char	   *point;
	char	   *end;
	int64		value;

	/* exactly, from the decimal text: a double would round large ids */
	if (v->type == jbvNumeric)
	{
		text = DatumGetCString(DirectFunctionCall1(numeric_out,
												   NumericGetDatum(v->val.numeric)));
		point = strchr(text, '.');
		if (point != NULL && strspn(point + 1, "0") == strlen(point + 1))
			*point = '\0';		/* 12.000 is 12 */
		errno = 0;
		value = strtoi64(text, &end, 10);
		if (errno == 0 && *end == '\0' && end != text && value >= min && value <= max)
		{
			*out = value;
			return NULL;
		}
	}
	return psprintf("\"%s\" must be a whole number from " INT64_FORMAT " to " INT64_FORMAT,
					key, min, max);
}

/*
 * gd_json_id reads an instance id or a claim number: a whole number from 1
 * to 2^63 - 1, as a JSON number or as a string of its decimal digits.
 * A client whose numbers are doubles (JavaScript) receives a bigint as a
 * string, and would round it past 2^53 if it had to send a number back.
 */
char *
gd_json_id(JsonbValue *v, const char *key, int64 *out)
{
	if (v->type == jbvString)
	{
		int			len = v->val.string.len;
		char	   *digits = v->val.string.val;	/* not NUL-terminated */
		char		text[20];
		int64		value;
		int			i;

		for (i = 0; i < len && i < 19 && digits[i] >= '0' && digits[i] <= '9'; i++)
			;
		if (len >= 1 && i == len)
		{
			memcpy(text, digits, len);
			text[len] = '\0';
			errno = 0;
			value = strtoi64(text, NULL, 10);
			if (errno == 0 && value >= 1)
			{
				*out = value;
				return NULL;
			}
		}
	}
	else if (gd_json_int(v, key, 1, PG_INT64_MAX, out) == NULL)
		return NULL;
	return psprintf("\"%s\" must be a whole number from 1 to " INT64_FORMAT
					", as a JSON number or a string of decimal digits",
					key, PG_INT64_MAX);
}

/*
 * gd_json_positive_float reads a finite number greater than zero.
 */
char *
gd_json_positive_float(JsonbValue *v, const char *key, double *out)
{
	if (!gd_json_number(v, out) || *out <= 0)
		return psprintf("\"%s\" must be a number greater than 0", key);
	return NULL;
}

/*
 * gd_json_value returns any JSON value (scalar or container) as a jsonb datum.
 */
Jsonb *
gd_json_value(JsonbValue *v)
{
	return JsonbValueToJsonb(v);
}

/*
 * gd_json_object reads a JSON object.
 */
char *
gd_json_object(JsonbValue *v, const char *key, Jsonb **out)
{
	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		return psprintf("\"%s\" must be a JSON object", key);
	*out = JsonbValueToJsonb(v);
	return NULL;
}

/*
 * gd_json_bool reads true or false.
 */
char *
gd_json_bool(JsonbValue *v, const char *key, bool *out)
{
	if (v->type != jbvBool)
		return psprintf("\"%s\" must be true or false", key);
	*out = v->val.boolean;
	return NULL;
}

/*
 * gd_json_name_array reads a non-empty array of non-empty strings (await
 * names) and returns it as jsonb.
 */
char *
gd_json_name_array(JsonbValue *v, const char *key, Jsonb **out)
{
	JsonbContainer *c;
	uint32		n;
	uint32		i;

	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		return psprintf("\"%s\" must be a non-empty array of names", key);
	c = v->val.binary.data;
	n = JsonContainerSize(c);
	if (n == 0)
		return psprintf("\"%s\" must be a non-empty array of names", key);
	for (i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(c, i);
		char	   *name;
		char	   *err = gd_json_name(e, key, &name);

		if (err)
			return psprintf("every element of \"%s\" must be a non-empty string", key);
	}
	*out = JsonbValueToJsonb(v);
	return NULL;
}

/*
 * gd_parse_interval parses interval text without raising an error (the
 * input function would throw), accepting both the PostgreSQL and the
 * ISO 8601 forms.
 */
static bool
gd_parse_interval(const char *str, Interval *out)
{
	char		workbuf[256];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	struct pg_itm_in itm_in;

	if (strlen(str) >= sizeof(workbuf))
		return false;
	memset(&itm_in, 0, sizeof(itm_in));
	if (ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0 ||
		DecodeInterval(field, ftype, nf, INTERVAL_FULL_RANGE, &dtype, &itm_in) != 0)
	{
		char	   *copy = pstrdup(str);

		memset(&itm_in, 0, sizeof(itm_in));
		if (DecodeISO8601Interval(copy, &dtype, &itm_in) != 0)
			return false;
	}
	if (dtype != DTK_DELTA)
		return false;
	return itmin2interval(&itm_in, out) == 0;
}

/*
 * gd_json_duration reads a duration of zero or more: a number of seconds
 * (fractions allowed) or an interval string such as '500 ms'.
 */
char *
gd_json_duration(JsonbValue *v, const char *key, Interval *out)
{
	double		secs;

	if (v->type == jbvString)
	{
		char	   *str = pnstrdup(v->val.string.val, v->val.string.len);

		if (!gd_parse_interval(str, out))
			return psprintf("\"%s\" is not a valid interval", key);
		if (gd_interval_negative(out))
			return psprintf("\"%s\" must not be negative", key);
		if (gd_interval_too_long(out))
			return psprintf("\"%s\" must not be longer than 1e9 seconds", key);
		return NULL;
	}
	if (!gd_json_number(v, &secs) || secs < 0 || secs > 1e9)
		return psprintf("\"%s\" must be a number of seconds (0 to 1e9) or an interval string", key);
	memset(out, 0, sizeof(Interval));
	out->time = (TimeOffset) rint(secs * USECS_PER_SEC);
	return NULL;
}
