/*-------------------------------------------------------------------------
 *
 * job.c
 *		Jobs handed to workers, from the statements that build them
 *		(job.h): the values of one job out of a row of such a statement.
 *
 * IDENTIFICATION
 *		src/job.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "job.h"

/*
 * gd_job_values reads the job of one row of a statement whose first
 * columns are GD_JOB_COLUMNS into values and nulls (GD_JOB_NCOLS each),
 * after checking that the SRF returning it has the job's shape.
 */
void
gd_job_values(ReturnSetInfo *rsinfo, SPITupleTable *rows, int row, Datum *values,
			  bool *nulls)
{
	int			c;

	if (rsinfo->setDesc->natts != GD_JOB_NCOLS)
		elog(ERROR, "gen_durable.job has %d columns, the pick statement returned %d",
			 rsinfo->setDesc->natts, GD_JOB_NCOLS);
	for (c = 0; c < GD_JOB_NCOLS; c++)
		values[c] = SPI_getbinval(rows->vals[row], rows->tupdesc, c + 1, &nulls[c]);
}
