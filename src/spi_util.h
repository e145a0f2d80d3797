/*-------------------------------------------------------------------------
 *
 * spi_util.h
 *		Plans prepared once per backend, and small helpers for passing
 *		arrays to and reading results from SPI.
 *
 * IDENTIFICATION
 *		src/spi_util.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_SPI_UTIL_H
#define GD_SPI_UTIL_H

#include "postgres.h"

#include "executor/spi.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#define GD_PLAN_MAX_ARGS	32

/*
 * A statement of the engine: its text and parameter types are fixed at
 * compile time; the plan is prepared on first use and kept for the life of
 * the backend (SPI_keepplan).  Declare one static GdPlan per statement.
 */
typedef struct GdPlan
{
	const char *sql;			/* schema-qualified statement text */
	int			nargs;			/* number of $n parameters */
	Oid			argtypes[GD_PLAN_MAX_ARGS]; /* their types */
	SPIPlanPtr	plan;			/* NULL until first use */
	bool		replan;			/* plan each call for its parameters' values
								 * (sweeps); else one generic plan */
} GdPlan;

extern int	gd_execute(GdPlan *plan, Datum *values, const char *nulls,
					   int expected);
extern void gd_connect(void);
extern void gd_finish(void);

extern Datum gd_result_datum(int row, int col, bool *isnull);
extern Datum gd_result_copy(int row, int col, bool *isnull);
extern int64 gd_result_int64(int row, int col);

extern ArrayType *gd_int8_array(const int64 *values, int n);
extern ArrayType *gd_array(Datum *values, bool *nulls, int n, Oid elemtype);
extern int	gd_array_int8(ArrayType *array, const char *argname, bool capped,
						  int64 **out);

extern TimestampTz gd_add_interval(TimestampTz ts, Interval *span);
extern void gd_require_read_committed(const char *function);
extern int	gd_run_in_subxact(int (*body) (void *arg), void *arg, bool keep_when_empty,
							  bool (*tolerate) (ErrorData *edata));

#endif							/* GD_SPI_UTIL_H */
