/*-------------------------------------------------------------------------
 *
 * slots.h
 *		The maintenance workers' slots in shared memory (GdDatabase): which
 *		databases want a worker, and holding a worker back while a command
 *		needs its database to itself.
 *
 * IDENTIFICATION
 *		src/slots.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_SLOTS_H
#define GD_SLOTS_H

#include "postgres.h"

#include "shmem.h"

/* how long a paused worker, or one that found no free process, waits */
#define GD_PAUSE_MS				10000

extern GdDatabase *gd_find_database(Oid dboid);
extern void gd_want_worker(Oid dboid);
extern void gd_pause_worker(Oid dboid);

#endif							/* GD_SLOTS_H */
