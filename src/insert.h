/*-------------------------------------------------------------------------
 *
 * insert.h
 *		Writing insert specs: the batch insert that insert_many(), spawned
 *		children and schedule ticks share.
 *
 * IDENTIFICATION
 *		src/insert.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_INSERT_H
#define GD_INSERT_H

#include "postgres.h"

#include "utils/timestamp.h"

#include "insert_spec.h"

/* what inserting a batch of specs did, per spec */
typedef struct InsertResult
{
	int64	   *ids;			/* the new id, or the occupying one */
	bool	   *created;
	bool	   *idnull;			/* no id: a duplicate whose occupant is gone */
} InsertResult;

extern void gd_insert_specs(InsertSpec *specs, int n, TimestampTz now,
							InsertResult *result);

#endif							/* GD_INSERT_H */
