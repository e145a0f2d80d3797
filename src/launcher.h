/*-------------------------------------------------------------------------
 *
 * launcher.h
 *		The launcher background worker, which keeps one maintenance worker
 *		running per database that has the extension, and the maintenance
 *		worker's entry point.
 *
 * IDENTIFICATION
 *		src/launcher.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_LAUNCHER_H
#define GD_LAUNCHER_H

#include "postgres.h"

extern void gd_launcher_install(void);

PGDLLEXPORT void gd_launcher_main(Datum main_arg) pg_attribute_noreturn();
PGDLLEXPORT void gd_worker_main(Datum main_arg) pg_attribute_noreturn();

#endif							/* GD_LAUNCHER_H */
