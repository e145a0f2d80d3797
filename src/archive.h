/*-------------------------------------------------------------------------
 *
 * archive.h
 *		The archive of finished instances (0.9.0, docs/contract.md §10.5):
 *		the segments a flush moves finished instances into, and the sweep
 *		that rotates and empties them.
 *
 * IDENTIFICATION
 *		src/archive.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_ARCHIVE_H
#define GD_ARCHIVE_H

#include "postgres.h"

#include "utils/timestamp.h"

/* the segments gen_durable.finished_0 .. finished_7 */
#define GD_ARCHIVE_SEGMENTS		8

/* gen_durable.archive_finished: flushes move finished instances */
extern bool gen_durable_archive_finished;

extern void gd_archive_define_gucs(void);
extern int	gd_archive_open_segment(void);
extern int	gd_archive_sweep(int retention_seconds, int64 *rows);

#endif							/* GD_ARCHIVE_H */
