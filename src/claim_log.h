/*-------------------------------------------------------------------------
 *
 * claim_log.h
 *		The WAL records of claims kept in memory (claim_log.c).
 *
 * IDENTIFICATION
 *		src/claim_log.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_CLAIM_LOG_H
#define GD_CLAIM_LOG_H

#include "postgres.h"

#include "storage/itemptr.h"
#include "utils/timestamp.h"

/*
 * gen_durable's custom WAL resource manager id.  Ids 128-255 are for
 * extensions; two extensions of one server must not use the same one.
 */
#define GD_RMGR_ID		173

extern void gd_claim_log_register(void);
extern void gd_claim_log_taken(const char *worker, int64 session, TimestampTz claimed_at,
							   const int64 *ids, const ItemPointerData *tids, int n);
extern void gd_claim_log_released(const int64 *ids, int n);

#endif							/* GD_CLAIM_LOG_H */
