/*-------------------------------------------------------------------------
 *
 * utility_hook.h
 *		The ProcessUtility hook: stopping, waking and asking for
 *		maintenance workers around the commands that concern them.
 *
 * IDENTIFICATION
 *		src/utility_hook.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_UTILITY_HOOK_H
#define GD_UTILITY_HOOK_H

#include "postgres.h"

extern void gd_utility_hook_install(void);

#endif							/* GD_UTILITY_HOOK_H */
