/*-------------------------------------------------------------------------
 *
 * cron.c
 *		Cron expressions for recurring schedules (schedule.c) and
 *		gen_durable.cron_next().
 *
 *		Syntax: five fields separated by blanks, minute (0-59), hour
 *		(0-23), day of month (1-31), month (1-12 or jan-dec) and day of
 *		week (0-7 or sun-sat, 0 and 7 both Sunday).  A field is a list of
 *		items separated by commas; an item is "*", a value or a range
 *		"a-b", each optionally followed by "/step" ("a/step" runs from a to
 *		the field's end).  Or one of @yearly (@annually), @monthly,
 *		@weekly, @daily (@midnight), @hourly.  As in Vixie cron, when both
 *		the day of month and the day of week are restricted, a day matches
 *		if either matches.
 *
 *		Ticks are minutes of the wall clock of a time zone.  The next tick
 *		is searched field by field in local time (a month, day or hour that
 *		does not match is skipped whole), then converted to an instant the
 *		way PostgreSQL reads a local time: a time that a daylight-saving
 *		change skips fires at the same offset after the change (02:30 on a
 *		spring-forward night is 03:30), and a time that occurs twice fires
 *		once, at its later occurrence (after the clocks went back).
 *
 * IDENTIFICATION
 *		src/cron.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "utils/builtins.h"
#include "utils/datetime.h"

#include "args.h"
#include "cron.h"

/* one of the five fields: its name, range and value names */
typedef struct CronField
{
	const char *name;
	int			min;
	int			max;
	const char *const *names;	/* names of min, min+1, ... or NULL */
} CronField;

static const char *const month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec", NULL
};
static const char *const weekday_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

static const CronField fields[5] = {
	{"minute", 0, 59, NULL},
	{"hour", 0, 23, NULL},
	{"day of month", 1, 31, NULL},
	{"month", 1, 12, month_names},
	{"day of week", 0, 7, weekday_names},
};

/* the shortcuts and the expressions they stand for */
static const char *const shortcuts[][2] = {
	{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"}, {"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

/* how far ahead the next tick is searched: a tick may be years away (29 Feb) */
#define CRON_HORIZON_YEARS	8

/*
 * how far before the wall-clock time of `after` the search starts: when the
 * clocks go back, a local time earlier than that of `after` can still be
 * ahead of it (at 01:45 EDT, 01:30 EST is yet to come); no zone moves its
 * clocks by more than this
 */
#define CRON_LOOKBACK		(2 * USECS_PER_HOUR)

/*
 * parse_value reads a number or (for fields with names) a name at *p,
 * advancing *p; returns false when there is neither.
 */
static bool
parse_value(const char **p, const CronField *f, int *value)
{
	const char *s = *p;

	if (isdigit((unsigned char) *s))
	{
		int			v = 0;

		while (isdigit((unsigned char) *s) && v < 1000)
			v = v * 10 + (*s++ - '0');
		*value = v;
		*p = s;
		return true;
	}
	if (f->names != NULL)
	{
		int			i;

		for (i = 0; f->names[i] != NULL; i++)
			if (pg_strncasecmp(s, f->names[i], 3) == 0 && !isalpha((unsigned char) s[3]))
			{
				*value = f->min + i;
				*p = s + 3;
				return true;
			}
	}
	return false;
}

/*
 * parse_field reads one field (text of len bytes) into a bit set; returns
 * NULL or what is wrong.
 */
static char *
parse_field(const char *text, int len, const CronField *f, uint64 *bits, bool *any)
{
	char	   *copy = pnstrdup(text, len);
	char	   *item;
	char	   *save = NULL;

	*bits = 0;
	*any = strcmp(copy, "*") == 0;
	for (item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save))
	{
		const char *p = item;
		int			lo;
		int			hi;
		int			step = 1;
		int			v;

		if (*p == '*')
		{
			lo = f->min;
			hi = f->max;
			p++;
		}
		else if (parse_value(&p, f, &lo))
		{
			hi = lo;
			if (*p == '-')
			{
				p++;
				if (!parse_value(&p, f, &hi))
					return psprintf("%s field \"%s\": a range needs an end", f->name, item);
			}
			else if (*p == '/')
				hi = f->max;
		}
		else
			return psprintf("%s field \"%s\": expected *, a number%s or a range",
							f->name, item, f->names ? ", a name" : "");
		if (*p == '/')
		{
			p++;
			if (!parse_value(&p, &fields[0], &step) || step < 1)
				return psprintf("%s field \"%s\": a step must be a whole number of 1 or more",
								f->name, item);
		}
		if (*p != '\0')
			return psprintf("%s field \"%s\": unexpected \"%s\"", f->name, item, p);
		if (lo < f->min || hi > f->max || lo > hi)
			return psprintf("%s field \"%s\": values must be from %d to %d, in order",
							f->name, item, f->min, f->max);
		for (v = lo; v <= hi; v += step)
			*bits |= UINT64CONST(1) << v;
	}
	if (*bits == 0)
		return psprintf("%s field is empty", f->name);
	return NULL;
}

/*
 * gd_cron_parse parses an expression; returns NULL, or what is wrong.
 */
char *
gd_cron_parse(const char *expr, GdCron *out)
{
	const char *p = expr;
	uint64		bits[5];
	bool		any[5];
	int			i;

	while (isspace((unsigned char) *p))
		p++;
	if (*p == '@')
	{
		for (i = 0; i < lengthof(shortcuts); i++)
			if (pg_strcasecmp(p, shortcuts[i][0]) == 0)
				return gd_cron_parse(shortcuts[i][1], out);
		return psprintf("unknown shortcut \"%s\" (expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)",
						gd_clip(p, strlen(p), 64));
	}
	for (i = 0; i < 5; i++)
	{
		const char *start;
		char	   *problem;

		while (isspace((unsigned char) *p))
			p++;
		if (*p == '\0')
			return psprintf("%d fields instead of 5 (minute hour day-of-month month day-of-week)", i);
		start = p;
		while (*p != '\0' && !isspace((unsigned char) *p))
			p++;
		if ((problem = parse_field(start, p - start, &fields[i], &bits[i], &any[i])) != NULL)
			return problem;
	}
	while (isspace((unsigned char) *p))
		p++;
	if (*p != '\0')
		return pstrdup("more than 5 fields (minute hour day-of-month month day-of-week)");

	out->minutes = bits[0];
	out->hours = (uint32) bits[1];
	out->days = (uint32) bits[2];
	out->months = (uint16) bits[3];
	/* 7 is Sunday too */
	out->weekdays = (uint8) ((bits[4] | (bits[4] >> 7)) & 0x7F);
	out->days_any = any[2];
	out->weekdays_any = any[4];
	return NULL;
}

/*
 * day_matches applies the day-of-month / day-of-week rule to a local date.
 */
static bool
day_matches(const GdCron *cron, struct pg_tm *tm)
{
	bool		dom = (cron->days >> tm->tm_mday) & 1;
	bool		dow = (cron->weekdays >> j2day(date2j(tm->tm_year, tm->tm_mon, tm->tm_mday))) & 1;

	if (cron->days_any && cron->weekdays_any)
		return true;
	if (cron->days_any)
		return dow;
	if (cron->weekdays_any)
		return dom;
	return dom || dow;
}

/*
 * local_start returns the local timestamp of a date and time (fields
 * beyond the unit given are zero).
 */
static Timestamp
local_start(int year, int mon, int mday, int hour, int min)
{
	struct pg_tm tm = {0};
	Timestamp	ts;

	tm.tm_year = year;
	tm.tm_mon = mon;
	tm.tm_mday = mday;
	tm.tm_hour = hour;
	tm.tm_min = min;
	if (tm2timestamp(&tm, 0, NULL, &ts) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("cron tick out of range")));
	return ts;
}

/*
 * gd_cron_next finds the first tick strictly after `after`, in the wall
 * clock of zone; false when there is none within CRON_HORIZON_YEARS (an
 * expression such as "0 0 30 2 *" never fires).
 */
bool
gd_cron_next(const GdCron *cron, pg_tz *zone, TimestampTz after, TimestampTz *next)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;
	Timestamp	local;
	int			horizon;

	if (timestamp2tm(after, &tz, &tm, &fsec, NULL, zone) != 0)
		return false;
	horizon = tm.tm_year + CRON_HORIZON_YEARS;
	/* from a little before the local minute of `after`: see CRON_LOOKBACK */
	local = local_start(tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min) -
		CRON_LOOKBACK;
	for (;;)
	{
		if (timestamp2tm(local, NULL, &tm, &fsec, NULL, NULL) != 0 || tm.tm_year > horizon)
			return false;
		if (!((cron->months >> tm.tm_mon) & 1))
			local = tm.tm_mon == 12 ? local_start(tm.tm_year + 1, 1, 1, 0, 0)
				: local_start(tm.tm_year, tm.tm_mon + 1, 1, 0, 0);
		else if (!day_matches(cron, &tm))
			local = local_start(tm.tm_year, tm.tm_mon, tm.tm_mday, 0, 0) + USECS_PER_DAY;
		else if (!((cron->hours >> tm.tm_hour) & 1))
			local = local_start(tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, 0) +
				USECS_PER_HOUR;
		else if (!((cron->minutes >> tm.tm_min) & 1))
			local += USECS_PER_MINUTE;
		else
		{
			/* a matching local minute: the instant it names in the zone */
			tz = DetermineTimeZoneOffset(&tm, zone);
			if (tm2timestamp(&tm, 0, &tz, next) == 0 && *next > after)
				return true;
			/* not after `after` (the look-back, or `after` itself) */
			local += USECS_PER_MINUTE;
		}
	}
}
