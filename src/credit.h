/*-------------------------------------------------------------------------
 *
 * credit.h
 *		Returning the gate slots of instances that leave executing.
 *
 * IDENTIFICATION
 *		src/credit.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_CREDIT_H
#define GD_CREDIT_H

#include "postgres.h"

#include "executor/spi.h"

/*
 * The gate slots (concurrency key, shard) that the current transaction
 * takes away from executing instances, to be credited to their buckets
 * before it commits.  A key may appear several times.
 */
typedef struct HeldSlots
{
	Datum	   *keys;			/* text */
	Datum	   *shards;			/* int2 */
	int			n;
	int			cap;
} HeldSlots;

extern void gd_slots_init(HeldSlots *slots);
extern void gd_slots_add_result(HeldSlots *slots, int row, int keycol, int shardcol);
extern void gd_slots_add(HeldSlots *slots, const char *key, int16 shard);
extern void gd_credit_slots(HeldSlots *slots, bool wait);

#endif							/* GD_CREDIT_H */
