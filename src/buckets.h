/*-------------------------------------------------------------------------
 *
 * buckets.h
 *		Keeping the limiter's buckets true: rate-bucket GC and gate
 *		reconcile.
 *
 * IDENTIFICATION
 *		src/buckets.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_BUCKETS_H
#define GD_BUCKETS_H

#include "postgres.h"

#include "utils/timestamp.h"

/* what a repair did */
typedef struct BucketCounts
{
	int64		buckets_swept;	/* bucket rows deleted */
	int64		gate_shards_repaired;	/* gate shards healed or minted */
} BucketCounts;

/* each requires a connected SPI and READ COMMITTED */
extern void gd_sweep_buckets(TimestampTz now, BucketCounts *counts);
extern void gd_reconcile_gate(const char *name);

#endif							/* GD_BUCKETS_H */
