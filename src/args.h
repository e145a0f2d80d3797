/*-------------------------------------------------------------------------
 *
 * args.h
 *		Validation of SQL arguments and of fields inside JSON arguments.
 *
 * IDENTIFICATION
 *		src/args.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_ARGS_H
#define GD_ARGS_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* SQL arguments: these ereport(ERROR) naming the argument */
extern char *gd_arg_name(FunctionCallInfo fcinfo, int argno, const char *argname,
						 bool required);
extern void gd_check_name(const char *value, const char *argname);
extern Interval *gd_arg_interval(FunctionCallInfo fcinfo, int argno,
								 const char *argname, bool positive);
extern Jsonb *gd_arg_jsonb(FunctionCallInfo fcinfo, int argno, const char *argname,
						  const char *example);
extern int	gd_arg_batch(FunctionCallInfo fcinfo, int argno, const char *argname);
extern int	gd_json_batch_array(Jsonb *arg, const char *argname,
								const char *what, const char *example);
extern void gd_check_batch_size(int n, const char *argname);
extern bool gd_interval_positive(Interval *span);
extern bool gd_interval_negative(Interval *span);
extern bool gd_interval_too_long(Interval *span);

/*
 * JSON fields: these return NULL on success, or a palloc'd message saying
 * what is wrong (so flush can report an invalid entry and insert_many can
 * raise an error).
 */
extern JsonbValue *gd_json_field(JsonbContainer *obj, const char *key);
extern char *gd_json_unknown_key(JsonbContainer *obj, const char *const *allowed);
extern char *gd_json_name(JsonbValue *v, const char *key, char **out);
extern char *gd_json_int(JsonbValue *v, const char *key, int64 min, int64 max,
						 int64 *out);
extern char *gd_json_id(JsonbValue *v, const char *key, int64 *out);
extern char *gd_json_positive_float(JsonbValue *v, const char *key, double *out);
extern char *gd_json_object(JsonbValue *v, const char *key, Jsonb **out);
extern char *gd_json_duration(JsonbValue *v, const char *key, Interval *out);
extern char *gd_json_bool(JsonbValue *v, const char *key, bool *out);
extern char *gd_json_name_array(JsonbValue *v, const char *key, Jsonb **out);
extern Jsonb *gd_json_value(JsonbValue *v);
extern bool gd_json_is_null(JsonbValue *v);
extern char *gd_clip(const char *s, int len, int max);
extern char *gd_catch_bad_input(void (*parse) (void *arg), void *arg);

#endif							/* GD_ARGS_H */
