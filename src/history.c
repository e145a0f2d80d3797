/*-------------------------------------------------------------------------
 *
 * history.c
 *		Step history (opt-in per instance, or per queue for the instances
 *		that do not say): every outcome a flush commits for an instance
 *		that records its history becomes a row
 *		of gen_durable.step_history, written by that flush, in its
 *		transaction, with one statement for the whole batch.  A row says
 *		which step ran (its steps count, name and attempt), what was
 *		committed (the kind), by which worker, when, and the error of a
 *		retry or a failure.  The rows go with their instance (ON DELETE
 *		CASCADE, so GC prunes them), and gen_durable.timeline(id) reads
 *		them back in order.
 *
 * IDENTIFICATION
 *		src/history.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "history.h"
#include "spi_util.h"

static GdPlan append_plan = {
	"INSERT INTO gen_durable.step_history"
	"       (instance_id, steps, step, kind, attempt, worker, at, error)"
	" SELECT h.instance_id, h.steps, h.step, h.kind, h.attempt, h.worker, $8, h.error"
	"   FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::int8[]),"
	"                   pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),"
	"                   pg_catalog.unnest($5::int4[]), pg_catalog.unnest($6::text[]),"
	"                   pg_catalog.unnest($7::jsonb[]))"
	"        AS h(instance_id, steps, step, kind, attempt, worker, error)",
	8,
	{INT8ARRAYOID, INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT4ARRAYOID,
	TEXTARRAYOID, JSONBARRAYOID, TIMESTAMPTZOID}
};

/*
 * gd_history_init makes room for up to max rows.
 */
void
gd_history_init(GdHistory *h, int max)
{
	max = Max(max, 1);
	h->n = 0;
	h->instance_ids = palloc(sizeof(Datum) * max);
	h->steps = palloc(sizeof(Datum) * max);
	h->step_names = palloc(sizeof(Datum) * max);
	h->kinds = palloc(sizeof(Datum) * max);
	h->attempts = palloc(sizeof(Datum) * max);
	h->workers = palloc(sizeof(Datum) * max);
	h->errors = palloc(sizeof(Datum) * max);
	h->error_nulls = palloc(sizeof(bool) * max);
}

/*
 * gd_history_add appends one committed outcome: the step that ran (at
 * steps, attempt), the kind committed, the worker, and the error (NULL for
 * none).
 */
void
gd_history_add(GdHistory *h, int64 instance_id, int64 steps, const char *step,
			   const char *kind, int32 attempt, const char *worker, Jsonb *error)
{
	int			i = h->n++;

	h->instance_ids[i] = Int64GetDatum(instance_id);
	h->steps[i] = Int64GetDatum(steps);
	h->step_names[i] = CStringGetTextDatum(step);
	h->kinds[i] = CStringGetTextDatum(kind);
	h->attempts[i] = Int32GetDatum(attempt);
	h->workers[i] = CStringGetTextDatum(worker);
	h->errors[i] = error ? JsonbPGetDatum(error) : (Datum) 0;
	h->error_nulls[i] = error == NULL;
}

/*
 * gd_history_write writes the rows added, stamped at, with one statement
 * (none when there are none).  SPI must be connected.
 */
void
gd_history_write(GdHistory *h, TimestampTz at)
{
	Datum		values[8];

	if (h->n == 0)
		return;
	values[0] = PointerGetDatum(gd_array(h->instance_ids, NULL, h->n, INT8OID));
	values[1] = PointerGetDatum(gd_array(h->steps, NULL, h->n, INT8OID));
	values[2] = PointerGetDatum(gd_array(h->step_names, NULL, h->n, TEXTOID));
	values[3] = PointerGetDatum(gd_array(h->kinds, NULL, h->n, TEXTOID));
	values[4] = PointerGetDatum(gd_array(h->attempts, NULL, h->n, INT4OID));
	values[5] = PointerGetDatum(gd_array(h->workers, NULL, h->n, TEXTOID));
	values[6] = PointerGetDatum(gd_array(h->errors, h->error_nulls, h->n, JSONBOID));
	values[7] = TimestampTzGetDatum(at);
	gd_execute(&append_plan, values, NULL, SPI_OK_INSERT);
}
