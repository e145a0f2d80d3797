/*-------------------------------------------------------------------------
 *
 * libpq_driver.c
 *		gen_durable driven from C through libpq: the engine's own ceiling,
 *		without a Node client in the way.  It mirrors
 *		systems/gen_durable.mjs on two of bench.mjs's workloads:
 *		- enqueue: time inserting N no-op jobs {"fsm":"noop","queue":"bench"}
 *		  with insert_many, 10,000 specs a call (its limit), one call after
 *		  the other on one connection;
 *		- drain: enqueue N and ANALYZE (untimed), read the WAL position, then
 *		  time CONCURRENCY workers, each with its own connection, looping
 *		  pick(batch => BATCH, wait => '1 s') then one flush of the batch's
 *		  done outcomes, until N jobs are done in all; then check that N
 *		  instances are done.
 *		Prints one JSON line in bench.mjs's format, system
 *		"gen_durable_libpq" (drain adds wal_bytes_per_job: the WAL the whole
 *		server wrote during the timed part, per job).
 *
 *		Choices, against the Node driver:
 *		- the specs of an insert_many call are built as JSON text here and
 *		  sent as one jsonb parameter (the Node driver builds them in the
 *		  server with jsonb_agg over generate_series); a flush's outcomes
 *		  are built the same way from the ids pick returned;
 *		- every statement is prepared once per connection (PQprepare) and
 *		  run with PQexecPrepared;
 *		- a worker is a process: fork() of one child per connection.  They
 *		  share a counter of completed jobs in a MAP_SHARED anonymous mmap
 *		  (C11 atomics).  The children connect and prepare before the clock
 *		  starts (a pipe is the start line; the Node driver connects inside
 *		  its timed part, a few ms); the child whose flush brings the count
 *		  to N notes the end time and tells the parent through another pipe.
 *		  Workers then stop on their own (an idle pick returns after its
 *		  1 s wait), untimed;
 *		- a flush counts only the outcomes it applied ('ok'); any other
 *		  answer (nobody else touches these claims) is an error.
 *
 *		Build: cc -O2 -Wall -I$(pg_config --includedir) -o libpq_driver \
 *				  libpq_driver.c -L$(pg_config --libdir) -lpq
 *		Usage: libpq_driver enqueue|drain N CONCURRENCY BATCH
 *		Connects with the libpq environment (PGHOST, PGPORT, PGUSER,
 *		PGDATABASE) to an empty database of a server with gen_durable
 *		installed (preloaded, for the waits), and creates the extension.
 *		Exits non-zero, with a message on stderr, on any error.  A
 *		benchmark, not a test: it checks only that the work was done.
 *
 * IDENTIFICATION
 *		test/bench/libpq_driver.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#define QUEUE			"bench"
#define SPECS_PER_CALL	10000
#define JOB_SPEC		"{\"fsm\":\"noop\",\"queue\":\"" QUEUE "\"}"

/* what the processes of a drain share (an anonymous MAP_SHARED mapping) */
typedef struct Shared
{
	atomic_long done;			/* jobs completed (flushed ok) so far */
	atomic_int	failed;			/* set by a worker that gave up */
	double		end_us;			/* when done reached N (written once) */
} Shared;

static Shared *shared;			/* in a drain, else NULL */
static int	done_fd = -1;		/* a worker's write end of the done pipe */
static int	is_worker;			/* this process is a forked worker */
static pid_t *workers;			/* the parent's children */
static int	nworkers;

/* now_us returns a monotonic clock in microseconds (the same in every process). */
static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/*
 * die prints a message and exits 1.  A worker first marks the drain failed
 * and wakes the parent; the parent first stops its workers.
 */
static void
die(const char *fmt,...)
{
	va_list		ap;
	int			i;

	fprintf(stderr, "libpq_driver: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (is_worker)
	{
		atomic_store(&shared->failed, 1);
		if (done_fd >= 0 && write(done_fd, "E", 1) < 0)
		{
			/* the parent also polls its children */
		}
		_exit(1);
	}
	for (i = 0; i < nworkers; i++)
		if (workers[i] > 0)
			kill(workers[i], SIGTERM);
	for (i = 0; i < nworkers; i++)
		if (workers[i] > 0)
			waitpid(workers[i], NULL, 0);
	exit(1);
}

/* connect_env opens a connection with the libpq environment, or dies. */
static PGconn *
connect_env(void)
{
	PGconn	   *conn = PQconnectdb("");

	if (PQstatus(conn) != CONNECTION_OK)
		die("connect: %s", PQerrorMessage(conn));
	return conn;
}

/* check dies unless res is a success; returns res. */
static PGresult *
check(PGconn *conn, PGresult *res, const char *what)
{
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
		die("%s: %s", what, PQerrorMessage(conn));
	return res;
}

/* run executes a statement and returns its first value (static buffer). */
static char *
run(PGconn *conn, const char *sql)
{
	static char value[64];
	PGresult   *res = check(conn, PQexec(conn, sql), sql);

	value[0] = '\0';
	if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		snprintf(value, sizeof(value), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return value;
}

/* prepare prepares a statement of one parameter on conn, or dies. */
static void
prepare(PGconn *conn, const char *name, const char *sql)
{
	PQclear(check(conn, PQprepare(conn, name, sql, 1, NULL), sql));
}

/* exec1 runs a prepared statement with one text parameter, or dies. */
static PGresult *
exec1(PGconn *conn, const char *name, const char *param)
{
	return check(conn, PQexecPrepared(conn, name, 1, &param, NULL, NULL, 0), name);
}

/*
 * enqueue inserts n no-op jobs on conn with insert_many, SPECS_PER_CALL specs
 * a call: the JSON array is built here once and its prefix sent each time.
 */
static void
enqueue(PGconn *conn, long n)
{
	size_t		spec = strlen(JOB_SPEC) + 1;	/* with its comma */
	char	   *specs = malloc(SPECS_PER_CALL * spec + 2);
	char	   *p = specs;
	long		sent;
	int			i;

	if (specs == NULL)
		die("out of memory\n");
	*p++ = '[';
	for (i = 0; i < SPECS_PER_CALL; i++)
	{
		memcpy(p, JOB_SPEC ",", spec);
		p += spec;
	}
	*p = '\0';					/* read (and put back) after the last comma */
	prepare(conn, "insert_many",
			"SELECT count(*) FROM gen_durable.insert_many($1::jsonb)");
	for (sent = 0; sent < n; sent += SPECS_PER_CALL)
	{
		long		k = n - sent < SPECS_PER_CALL ? n - sent : SPECS_PER_CALL;
		PGresult   *res;
		char		save[2];

		/* end the array after k specs (replacing the k-th comma) */
		p = specs + 1 + k * spec - 1;
		memcpy(save, p, 2);
		p[0] = ']';
		p[1] = '\0';
		res = exec1(conn, "insert_many", specs);
		if (atol(PQgetvalue(res, 0, 0)) != k)
			die("insert_many created %s of %ld jobs\n", PQgetvalue(res, 0, 0), k);
		PQclear(res);
		memcpy(p, save, 2);
	}
	free(specs);
}

/*
 * worker is a drain worker's life, in its own process: connect, prepare,
 * report ready and wait for the start, then pick and flush batches until the
 * shared count reaches n.  Never returns.
 */
static void
worker(int k, long n, int batch, int ready_fd, int go_fd)
{
	PGconn	   *conn = connect_env();
	char		name[32];
	char		pick_sql[256];
	char	   *outcomes;
	char		c;

	snprintf(name, sizeof(name), "w%d", k);
	snprintf(pick_sql, sizeof(pick_sql),
			 "SELECT id FROM gen_durable.pick('" QUEUE "', $1, batch => %d, wait => '1 s')",
			 batch);
	prepare(conn, "pick", pick_sql);
	prepare(conn, "flush",
			"SELECT count(*) FROM gen_durable.flush($1::jsonb) WHERE applied = 'ok'");
	/* one outcome: {"id":<bigint>,"worker":"<name>","kind":"done"}, */
	outcomes = malloc((size_t) batch * (64 + strlen(name)) + 2);
	if (outcomes == NULL)
		die("out of memory\n");

	/* ready; then wait for the parent to close the start pipe */
	if (write(ready_fd, "r", 1) != 1)
		die("ready pipe: %s\n", strerror(errno));
	close(ready_fd);
	while (read(go_fd, &c, 1) < 0 && errno == EINTR)
		;
	close(go_fd);

	while (atomic_load(&shared->done) < n && !atomic_load(&shared->failed))
	{
		PGresult   *res = exec1(conn, "pick", name);
		int			rows = PQntuples(res);
		char	   *p = outcomes;
		long		before;
		int			i;

		if (rows == 0)
		{
			PQclear(res);
			continue;
		}
		*p++ = '[';
		for (i = 0; i < rows; i++)
			p += sprintf(p, "%s{\"id\":%s,\"worker\":\"%s\",\"kind\":\"done\"}",
						 i > 0 ? "," : "", PQgetvalue(res, i, 0), name);
		*p++ = ']';
		*p = '\0';
		PQclear(res);
		res = exec1(conn, "flush", outcomes);
		if (atoi(PQgetvalue(res, 0, 0)) != rows)
			die("%s: flush applied %s of %d outcomes\n", name, PQgetvalue(res, 0, 0), rows);
		PQclear(res);
		before = atomic_fetch_add(&shared->done, rows);
		if (before < n && before + rows >= n)
		{
			shared->end_us = now_us();
			if (write(done_fd, "d", 1) != 1)
				die("done pipe: %s\n", strerror(errno));
		}
	}
	PQfinish(conn);
	_exit(0);
}

/*
 * drain enqueues n jobs and ANALYZEs on conn (then closes it), starts
 * concurrency workers, and times them until n jobs are done.  Returns the
 * seconds; *wal_bytes gets the WAL written meanwhile.
 */
static double
drain(PGconn *conn, long n, int concurrency, int batch, double *wal_bytes)
{
	int			ready[2],
				go[2],
				done[2];
	char		lsn[64];
	char		sql[128];
	char		c;
	int			nready = 0;
	int			i;
	double		t0;
	ssize_t		got;
	PGconn	   *wal;

	enqueue(conn, n);
	run(conn, "ANALYZE");
	PQfinish(conn);				/* no connection is open across fork() */

	shared = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		die("mmap: %s\n", strerror(errno));
	atomic_init(&shared->done, 0);
	atomic_init(&shared->failed, 0);
	shared->end_us = 0;
	if (pipe(ready) < 0 || pipe(go) < 0 || pipe(done) < 0)
		die("pipe: %s\n", strerror(errno));

	workers = calloc(concurrency, sizeof(pid_t));
	if (workers == NULL)
		die("out of memory\n");
	fflush(stdout);
	fflush(stderr);
	for (i = 0; i < concurrency; i++)
	{
		pid_t		pid = fork();

		if (pid < 0)
			die("fork: %s\n", strerror(errno));
		if (pid == 0)
		{
			is_worker = 1;
			close(ready[0]);
			close(go[1]);
			close(done[0]);
			done_fd = done[1];
			worker(i, n, batch, ready[1], go[0]);
		}
		workers[nworkers++] = pid;
	}
	close(ready[1]);
	close(go[0]);
	close(done[1]);

	/* every worker has connected and prepared (or died: EOF comes early) */
	while ((got = read(ready[0], &c, 1)) != 0)
	{
		if (got < 0 && errno != EINTR)
			die("ready pipe: %s\n", strerror(errno));
		if (got == 1)
			nready++;
	}
	close(ready[0]);
	if (nready != concurrency)
		die("%d of %d workers started\n", nready, concurrency);

	wal = connect_env();
	snprintf(lsn, sizeof(lsn), "%s", run(wal, "SELECT pg_current_wal_lsn()"));
	t0 = now_us();
	close(go[1]);				/* start */

	/* wait for the count to reach n, or a worker to fail or die */
	for (;;)
	{
		struct pollfd pfd = {.fd = done[0],.events = POLLIN};
		int			status;

		if (poll(&pfd, 1, 200) > 0)
		{
			got = read(done[0], &c, 1);
			if (got == 1 && c == 'd')
				break;
			if (got == 0 || (got == 1 && c != 'd'))
				die("a worker failed\n");
		}
		for (i = 0; i < nworkers; i++)
			if (workers[i] > 0 && waitpid(workers[i], &status, WNOHANG) == workers[i])
			{
				workers[i] = 0;
				if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
					die("worker w%d failed\n", i);
			}
	}

	snprintf(sql, sizeof(sql),
			 "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '%s')::float8", lsn);
	*wal_bytes = atof(run(wal, sql));

	/* the workers stop on their own (an idle pick waits 1 s) */
	for (i = 0; i < nworkers; i++)
	{
		int			status;

		if (workers[i] > 0)
		{
			if (waitpid(workers[i], &status, 0) != workers[i])
				die("waitpid: %s\n", strerror(errno));
			workers[i] = 0;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				die("worker w%d failed\n", i);
		}
	}
	if (atomic_load(&shared->failed))
		die("a worker failed\n");

	if (atol(run(wal, "SELECT count(*) FROM gen_durable.instances WHERE status = 'done'")) != n)
		die("drain returned with %s of %ld jobs done\n",
			run(wal, "SELECT count(*) FROM gen_durable.instances WHERE status = 'done'"), n);
	PQfinish(wal);
	return (shared->end_us - t0) / 1e6;
}

int
main(int argc, char **argv)
{
	const char *workload;
	long		n;
	int			concurrency,
				batch;
	PGconn	   *conn;
	double		seconds;

	if (argc != 5 || (strcmp(argv[1], "enqueue") != 0 && strcmp(argv[1], "drain") != 0))
	{
		fprintf(stderr, "usage: libpq_driver enqueue|drain N CONCURRENCY BATCH\n");
		return 2;
	}
	workload = argv[1];
	n = atol(argv[2]);
	concurrency = atoi(argv[3]);
	batch = atoi(argv[4]);
	if (n <= 0 || concurrency <= 0 || batch <= 0)
	{
		fprintf(stderr, "libpq_driver: N, CONCURRENCY and BATCH must be positive\n");
		return 2;
	}

	conn = connect_env();
	run(conn, "SET client_min_messages = warning");
	run(conn, "CREATE EXTENSION IF NOT EXISTS gen_durable");

	if (strcmp(workload, "enqueue") == 0)
	{
		double		t0 = now_us();

		enqueue(conn, n);
		seconds = (now_us() - t0) / 1e6;
		PQfinish(conn);
		printf("{\"system\":\"gen_durable_libpq\",\"workload\":\"enqueue\",\"n\":%ld,"
			   "\"concurrency\":%d,\"batch\":%d,\"seconds\":%.6f,\"per_sec\":%.1f}\n",
			   n, concurrency, batch, seconds, n / seconds);
	}
	else
	{
		double		wal_bytes;

		seconds = drain(conn, n, concurrency, batch, &wal_bytes);
		printf("{\"system\":\"gen_durable_libpq\",\"workload\":\"drain\",\"n\":%ld,"
			   "\"concurrency\":%d,\"batch\":%d,\"seconds\":%.6f,\"per_sec\":%.1f,"
			   "\"wal_bytes_per_job\":%.1f}\n",
			   n, concurrency, batch, seconds, n / seconds, wal_bytes / n);
	}
	return 0;
}
