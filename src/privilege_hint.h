/*-------------------------------------------------------------------------
 *
 * privilege_hint.h
 *		A hint on PostgreSQL's permission errors for the engine's objects.
 *
 * IDENTIFICATION
 *		src/privilege_hint.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_PRIVILEGE_HINT_H
#define GD_PRIVILEGE_HINT_H

extern void gd_privilege_hint_install(void);

#endif							/* GD_PRIVILEGE_HINT_H */
