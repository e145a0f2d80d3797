/*-------------------------------------------------------------------------
 *
 * gen_durable.h
 *		Declarations shared by every part of gen_durable: the GUC variables,
 *		engine-wide constants and the PostgreSQL version compatibility
 *		section (kept here, in one place, rather than scattered in .c files).
 *
 * IDENTIFICATION
 *		src/gen_durable.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GEN_DURABLE_H
#define GEN_DURABLE_H

#include "postgres.h"

#include "fmgr.h"

/* ---- PostgreSQL version compatibility ---- */
#if PG_VERSION_NUM < 150000
#error "gen_durable requires PostgreSQL 15 or later"
#endif

/* PG15's fmgr.h does not declare it (16+ does) */
extern void _PG_init(void);

/* the schema version this library installs */
#define GD_SCHEMA_VERSION		"0.9.0"

/*
 * Every installed schema version whose tables and functions this library's
 * statements work with; the maintenance worker runs on each of them, so
 * the sweeps go on between a server restart on a new build and ALTER
 * EXTENSION UPDATE.  (0.7.0 changed no table or function the C code uses;
 * on a schema older than 0.8.0 every claim is written to its row, see
 * claims.c.)
 */
#define GD_SCHEMA_VERSIONS_SERVED	{"0.6.0", "0.7.0", "0.8.0", "0.9.0"}

/* ---- engine-wide limits ---- */

/* largest batch accepted by pick, insert_many, flush, heartbeat and release */
#define GD_MAX_BATCH			10000

/* longest fsm, step, queue, worker, key or signal name accepted */
#define GD_MAX_NAME_LEN			1024

/*
 * The first key of the transaction-level advisory locks with which picks
 * claim concurrency keys without waiting for each other ("gd" in ASCII);
 * the second key is hashtext(concurrency_key).  Applications using the
 * two-key advisory lock functions should avoid this first key.
 */
#define GD_KEY_LOCK_CLASS		"26468"

/* the most shards a limit may have */
#define GD_MAX_SHARDS			1000

/* claim attempts when the K=1 arbiter reports a concurrent claim (D7) */
#define GD_CLAIM_ATTEMPTS		3

/* ---- GUC variables (gen_durable.c) ---- */
extern int	gen_durable_retention;		/* seconds a terminal row is kept */
extern int	gen_durable_gc_batch;		/* rows deleted per GC statement */
extern int	gen_durable_default_lease;	/* ms, lease of an inline continue */
extern int	gen_durable_max_wait;		/* ms, cap on pick's and await's wait */
extern int	gen_durable_maintenance_interval;	/* ms, longest sleep of the worker */
extern bool gen_durable_notify;			/* send NOTIFY pokes */
extern bool gen_durable_maintenance_worker;	/* the worker runs the sweeps */
extern bool gen_durable_reclaim_on_disconnect;	/* record claim sessions */
extern bool gen_durable_require_claim;	/* flush refuses outcomes without a claim */

#endif							/* GEN_DURABLE_H */
