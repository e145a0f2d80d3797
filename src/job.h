/*-------------------------------------------------------------------------
 *
 * job.h
 *		The SQL that builds a job (the type gen_durable.job) from an
 *		instance row, for the statements that hand jobs to workers: pick's
 *		flip and flush's continue.
 *
 *		GD_JOB_COLUMNS(i) is the job's column list over the instance row
 *		named i (a table alias, or a parenthesized composite), each
 *		expression named after its job column, in the type's order:
 *		- inbox: every signal in the instance's inbox, oldest first;
 *		- awaited: the awaited signals handed to this step (presented);
 *		- children: the children of the current round (D12), in
 *		  child_index order;
 *		- claim: the number of the claim the job runs under, which the
 *		  worker may send back in its outcome to fence it.
 *		The statements expand it in place rather than calling a function
 *		over the whole row: reading one column of a composite row value
 *		deforms the row again, and a claimed row is wide.  gd_job_values
 *		(job.c) reads a job back out of such a statement's row.
 *
 * IDENTIFICATION
 *		src/job.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GD_JOB_H
#define GD_JOB_H

#include "postgres.h"

#include "executor/spi.h"
#include "funcapi.h"

#define GD_JOB_COLUMNS(i) \
	i ".id AS id, " i ".fsm AS fsm, " i ".fsm_version AS fsm_version, " \
	i ".step AS step, " i ".state AS state, " i ".attempt AS attempt, " \
	i ".steps AS steps, " \
	"COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(" \
	"              'id', s.id, 'name', s.name, 'payload', s.payload) ORDER BY s.id)" \
	"            FROM gen_durable.signals s WHERE s.target_id = " i ".id)," \
	"          '[]') AS inbox, " \
	"CASE WHEN " i ".presented IS NULL THEN '[]'::jsonb ELSE" \
	" COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(" \
	"              'id', s.id, 'name', s.name, 'payload', s.payload) ORDER BY s.id)" \
	"            FROM gen_durable.signals s WHERE s.target_id = " i ".id" \
	"             AND s.id = ANY (" i ".presented)), '[]') END AS awaited, " \
	"CASE WHEN " i ".children_total > 0 THEN" \
	" COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(" \
	"              'index', c.child_index, 'id', c.id, 'status', c.status," \
	"              'result', c.result, 'error', c.error) ORDER BY c.child_index)" \
	"            FROM ONLY gen_durable.instances c" \
	"           WHERE c.parent_id = " i ".id AND c.parent_round = " i ".spawn_round)," \
	"          '[]') ELSE '[]'::jsonb END AS children, " \
	i ".timed_out AS timed_out, " i ".parent_id AS parent_id, " \
	i ".correlation_key AS correlation_key, " i ".metadata AS metadata, " \
	i ".lease_expires_at AS lease_expires_at, " i ".claim AS claim"

/* the number of columns of a job (the type gen_durable.job) */
#define GD_JOB_NCOLS	16

/* the names GD_JOB_COLUMNS gives its columns, in the same order */
#define GD_JOB_NAMES \
	"id, fsm, fsm_version, step, state, attempt, steps, inbox, awaited, children, " \
	"timed_out, parent_id, correlation_key, metadata, lease_expires_at, claim"

extern void gd_job_values(ReturnSetInfo *rsinfo, SPITupleTable *rows, int row,
						  Datum *values, bool *nulls);

#endif							/* GD_JOB_H */
