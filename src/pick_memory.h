/*-------------------------------------------------------------------------
 *
 * pick_memory.h
 *		The memory path of pick: plain instances claimed in the shared
 *		claim table (claims.h), with nothing written to their rows.
 *
 * IDENTIFICATION
 *		src/pick_memory.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_PICK_MEMORY_H
#define GD_PICK_MEMORY_H

#include "postgres.h"

#include "executor/spi.h"
#include "funcapi.h"
#include "utils/timestamp.h"

/* the rows one pick claimed in memory, most urgent first */
typedef struct GdMemoryCandidates
{
	SPITupleTable *rows;		/* the claiming statement's result */
	int			n;
	int16	   *priority;		/* per row, for merging with row claims */
	TimestampTz *eligible_at;
	int64	   *id;
	int64	   *claim;			/* per row: its claim number, 0 once released */
	ItemPointerData *tid;		/* per row: the version claimed */
	TimestampTz lease;			/* the lease of every claim */
} GdMemoryCandidates;

extern void gd_memory_claim(GdMemoryCandidates *mc, const char *queue, TimestampTz now,
							int batch, Datum fsms, const char *worker, int64 session,
							TimestampTz lease, bool *full);
extern void gd_memory_release(GdMemoryCandidates *mc, int row);
extern void gd_memory_log(GdMemoryCandidates *mc, const char *worker, int64 session,
						  TimestampTz now);
extern void gd_memory_emit(GdMemoryCandidates *mc, int row, ReturnSetInfo *rsinfo);

#endif							/* GD_PICK_MEMORY_H */
