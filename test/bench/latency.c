/*-------------------------------------------------------------------------
 *
 * latency.c
 *		Wake-up latency of gen_durable's waits, seen from a client:
 *		- pickup: a long-poll pick(wait => ...) is waiting on an idle queue;
 *		  another connection inserts a job; the time from the insert's
 *		  commit (its answer reaching the client) to the pick's answer;
 *		- await: await(id) is waiting; another connection flushes the
 *		  instance's done; the time from the flush's commit to await's answer.
 *		Prints p50, p95, p99 and max over N samples of each.
 *
 *		Build: cc -O2 -I$(pg_config --includedir) -o latency latency.c \
 *				  -L$(pg_config --libdir) -lpq
 *		Usage: latency "connection string" [samples]   (default 1000)
 *		The database must have the extension, preloaded.  A benchmark, not a
 *		test: nothing checks the numbers.
 *
 * IDENTIFICATION
 *		test/bench/latency.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

/* now_us returns a monotonic clock in microseconds. */
static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* run executes a statement, exits on error, returns the first value. */
static char *
run(PGconn *conn, const char *sql)
{
	static char value[64];
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "latency: %s: %s", sql, PQerrorMessage(conn));
		exit(1);
	}
	value[0] = '\0';
	if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		snprintf(value, sizeof(value), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return value;
}

/* finish waits for the answer of a sent query and returns its first value. */
static char *
finish(PGconn *conn)
{
	static char value[64];
	PGresult   *res;

	value[0] = '\0';
	while ((res = PQgetResult(conn)) != NULL)
	{
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			fprintf(stderr, "latency: %s", PQerrorMessage(conn));
			exit(1);
		}
		if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
			snprintf(value, sizeof(value), "%s", PQgetvalue(res, 0, 0));
		PQclear(res);
	}
	return value;
}

static int
compare_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* report prints the percentiles of n samples (microseconds) in ms. */
static void
report(const char *what, double *samples, int n)
{
	qsort(samples, n, sizeof(double), compare_double);
	printf("%-8s n=%d  p50=%.3f ms  p95=%.3f ms  p99=%.3f ms  max=%.3f ms\n", what, n,
		   samples[n / 2] / 1e3, samples[(int) (n * 0.95)] / 1e3,
		   samples[(int) (n * 0.99)] / 1e3, samples[n - 1] / 1e3);
}

int
main(int argc, char **argv)
{
	const char *conninfo = argc > 1 ? argv[1] : "";
	int			n = argc > 2 ? atoi(argv[2]) : 1000;
	PGconn	   *waiter = PQconnectdb(conninfo);
	PGconn	   *actor = PQconnectdb(conninfo);
	double	   *samples = malloc(sizeof(double) * n);
	char		sql[256];
	int			i;

	if (PQstatus(waiter) != CONNECTION_OK || PQstatus(actor) != CONNECTION_OK)
	{
		fprintf(stderr, "latency: %s", PQerrorMessage(waiter));
		return 1;
	}

	/* pickup: insert commit -> long-poll pick returns */
	for (i = 0; i < n; i++)
	{
		double		t0;

		PQsendQuery(waiter, "SELECT id FROM gen_durable.pick('latency', 'bench', 1, wait => '10 s')");
		usleep(2000);			/* let the pick go to sleep */
		run(actor, "SELECT gen_durable.insert('latency', queue => 'latency')");
		t0 = now_us();
		if (finish(waiter)[0] == '\0')
		{
			fprintf(stderr, "latency: the pick returned no job\n");
			return 1;
		}
		samples[i] = now_us() - t0;
		run(waiter, "SELECT count(*) FROM gen_durable.flush((SELECT jsonb_agg(jsonb_build_object("
			"'id', id, 'worker', 'bench', 'kind', 'done')) FROM gen_durable.instances"
			" WHERE queue = 'latency' AND status = 'executing'))");
	}
	report("pickup", samples, n);

	/* await: flush commit -> await returns */
	for (i = 0; i < n; i++)
	{
		char		id[64];
		double		t0;

		snprintf(id, sizeof(id), "%s", run(actor, "SELECT gen_durable.insert('latency', queue => 'latency_await')"));
		run(actor, "SELECT id FROM gen_durable.pick('latency_await', 'bench', 1)");
		snprintf(sql, sizeof(sql), "SELECT status FROM gen_durable.await(%s, '10 s')", id);
		PQsendQuery(waiter, sql);
		usleep(2000);			/* let await go to sleep */
		snprintf(sql, sizeof(sql),
				 "SELECT applied FROM gen_durable.flush('[{\"id\": %s, \"worker\": \"bench\", \"kind\": \"done\"}]')", id);
		run(actor, sql);
		t0 = now_us();
		if (strcmp(finish(waiter), "done") != 0)
		{
			fprintf(stderr, "latency: await did not answer done\n");
			return 1;
		}
		samples[i] = now_us() - t0;
	}
	report("await", samples, n);

	PQfinish(waiter);
	PQfinish(actor);
	return 0;
}
