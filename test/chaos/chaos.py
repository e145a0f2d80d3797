#!/usr/bin/env python3
"""test/chaos/chaos.py - the chaos soak of gen_durable (run it with test/chaos/run.sh).

One process plays every part but the workers:

  driver   inserts the top-level instances (chain, waiter, parent; see
           chaos_app.py) at --rate a second, each batch with one statement
           that also records the ids it created in chaos.inserted (same
           transaction), and keeps the ids the server acknowledged; signals
           the waiters (some twice, some never, some before they wait) and
           cancels a few instances at random moments;
  workers  --workers processes of chaos_app.py, started, killed and
           restarted here;
  sampler  one connection that reads every claim in flight (the view
           gen_durable.claims: executing rows and claims in memory) every
           few ms: the
           rows per concurrency key (K=1 for ungated names, the gate's max
           for gated ones), the claims of rate-limited steps, leases and
           await deadlines overdue; and every half second row invariants
           that hold in any snapshot;
  chaos    every 0.5..2.5 s (seeded) one of: SIGKILL a worker process
           (restarted 0.2..1.5 s later), SIGTERM one (it must stop cleanly;
           restarted), SIGSTOP one for longer than its lease (then SIGCONT),
           pg_terminate_backend on worker connections, SIGKILL
           the gen_durable maintenance worker (the postmaster then
           crash-restarts the server), pg_ctl stop -m immediate + start.

Phases: soak (--seconds of inserts and chaos); the final blow (every worker
SIGKILLed at once: their claims, on rows or in memory, must come back, and
after the leases and a run_maintenance() no claim may be past its lease); drain (workers
again, no chaos, no new inserts, until every instance has ended or
--drain-timeout); graceful stop; the checks (see README.md), which print
figures and every violation.  Exit status 0 only with no violation.

    chaos.py --seconds 60 --seed 42 --datadir DIR --serverlog FILE --rundir DIR

Connects with the libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE).
"""

import argparse
import collections
import datetime
import heapq
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
PG_BIN = "/usr/lib/postgresql/15/bin"
# the worker library sent two outcomes for one id in one flush (it must send
# only the latest claim's)
TWICE_IN_A_BATCH = "two outcomes for one id in one flush"
LEASE = 5.0                       # chaos_app's lease (pick and continue)
TERMINAL = ("done", "failed", "cancelled")
ALL_STATUSES = ["runnable", "executing", "awaiting_signal", "awaiting_children",
                "done", "failed", "cancelled"]
STEP_KINDS = ("next", "await", "spawn")
END_KINDS = ("done", "fail")

# the limits (configured before anything is inserted)
GATES = {"pool": 3, "lane": 1}              # name -> max per key
GATE_SHARDS = {"pool": 2, "lane": 1}
RATES = {"api": (30.0, 6.0, 2), "slow": (8.0, 3.0, 1)}   # name -> (per second, burst, shards)
K1_KEYS = ["acct:%d" % i for i in range(5)]
RATE_WINDOW = 10.0               # s: longest window the rate check looks at
OVERDUE_GRACE = 20.0             # s past a lease / await deadline before it counts as stuck

SCHEMA = """
CREATE SCHEMA chaos;
-- what the driver inserted, written by the insert's own statement
CREATE TABLE chaos.inserted (
    id bigint PRIMARY KEY,
    ckey text NOT NULL UNIQUE,
    fsm text NOT NULL,
    spec jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- one row per committed outcome that changes the step or ends the instance
CREATE TABLE chaos.ledger (
    id bigint NOT NULL,
    steps bigint NOT NULL,
    attempt int,
    fsm text, step text, kind text, new_step text,
    n_before int, n_after int,
    worker text, applied text, detail text, info jsonb,
    xact bigint NOT NULL DEFAULT txid_current(),
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    dups int NOT NULL DEFAULT 0,
    dup_rows jsonb NOT NULL DEFAULT '[]',
    UNIQUE (id, steps)
);
-- one row per committed retry
CREATE TABLE chaos.retries (
    id bigint NOT NULL,
    steps bigint NOT NULL,
    attempt int NOT NULL,
    worker text, detail text, info jsonb,
    xact bigint NOT NULL DEFAULT txid_current(),
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    dups int NOT NULL DEFAULT 0,
    UNIQUE (id, steps, attempt)
);
"""


def now():
    return time.monotonic()


def say(msg):
    print("[%7.1fs] %s" % (now() - T0, msg), flush=True)


T0 = now()


# ----------------------------------------------------------------- database

class Db:
    """An autocommit connection that reconnects.  run() retries a statement
    that failed for a reason of the operational kind (server gone, backend
    terminated, recovery, deadlock) for up to `patience` seconds."""

    def __init__(self, name, patience=180.0):
        self.name = name
        self.patience = patience
        self.conn = None
        self.failures = 0

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    def once(self, sql, params=None):
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.close()
            self.conn = psycopg.connect(os.environ.get("DATABASE_URL", ""), autocommit=True,
                                        prepare_threshold=None, connect_timeout=5,
                                        application_name="chaos-" + self.name)
        cur = self.conn.execute(sql, params)
        return cur.fetchall() if cur.description else []

    def run(self, sql, params=None, stop=None):
        deadline = now() + self.patience
        while True:
            try:
                return self.once(sql, params)
            except psycopg.OperationalError:
                self.failures += 1
                if self.conn is not None and self.conn.broken:
                    self.close()
                if now() > deadline or (stop is not None and stop.is_set()):
                    raise
                time.sleep(0.2)


def jdump(value):
    return json.dumps(value, separators=(",", ":"))


# -------------------------------------------------------------------- plans

class Planner:
    """The seeded workload: specs of the top-level instances and the
    driver's events for them."""

    def __init__(self, rng):
        self.rng = rng
        self.seq = 0

    def step_plan(self, length, first_cont=False):
        rng = self.rng
        plan = []
        for i in range(length):
            spec = {"ms": rng.randint(3, 30)}
            u = rng.random()
            if u < 0.22:
                spec["ck"] = rng.choice(K1_KEYS)
            elif u < 0.40:
                spec["ck"] = "pool:%d" % rng.randrange(2)
            elif u < 0.50:
                spec["ck"] = "lane:%d" % rng.randrange(2)
            if "ck" in spec:
                spec["ms"] += rng.randint(10, 40)
            v = rng.random()
            if v < 0.18:
                spec["rl"], spec["w"] = "api:%d" % rng.randrange(2), 1
            elif v < 0.23:
                spec["rl"], spec["w"] = "slow", rng.choice([1, 2])
            if rng.random() < 0.15:
                spec["flaky"] = True
            if (i > 0 or first_cont) and rng.random() < 0.4:
                spec["cont"] = True
            plan.append(spec)
        return plan

    @staticmethod
    def limit_opts(first):
        opts = {}
        if first.get("ck"):
            opts["concurrency_key"] = first["ck"]
        if first.get("rl"):
            opts["rate_limit"] = first["rl"]
            opts["weight"] = first["w"]
        return opts

    def child(self, fate, long=False):
        plan = self.step_plan(self.rng.randint(2, 4) if long else self.rng.randint(1, 2))
        spec = {"fsm": "child", "queue": "qb", "step": "work", "max_attempts": 100,
                "state": {"n": 0, "fate": fate, "plan": plan,
                          "T": round(self.rng.uniform(0.8, 2.0), 2)}}
        spec.update(self.limit_opts(plan[0]))
        return spec

    def parent_rounds(self):
        rng = self.rng
        rounds = []
        for _ in range(rng.randint(1, 3)):
            join = rng.choice(["all", "first_error"])
            n = rng.randint(2, 4)
            if join == "all":
                fates = [rng.choices(["ok", "fail", "wait", "nest"], [55, 15, 12, 18])[0]
                         for _ in range(n)]
                kids = [self.child(f) for f in fates]
            elif rng.random() < 0.65:   # a failing child among slow siblings
                fails = rng.randint(1, 2)
                kids = [self.child("fail") for _ in range(fails)]
                kids += [self.child(rng.choice(["ok", "wait", "nest"]), long=True)
                         for _ in range(n - fails)]
                rng.shuffle(kids)
            else:
                kids = [self.child(rng.choice(["ok", "nest"])) for _ in range(n)]
            rounds.append({"join": join, "kids": kids})
        return rounds

    def next_instance(self):
        """(spec, events): events are (delay after the insert, kind, data)."""
        rng = self.rng
        self.seq += 1
        kind = rng.choices(["chain", "waiter", "parent"], [50, 25, 25])[0]
        ckey = "%s-%d" % (kind, self.seq)
        spec = {"fsm": kind, "queue": "qa", "correlation_key": ckey,
                "correlation_scope": ALL_STATUSES, "max_attempts": 100}
        events = []
        if kind == "chain":
            plan = self.step_plan(rng.randint(2, 7))
            spec["state"] = {"n": 0, "plan": plan}
            spec["step"] = "work"
            spec.update(self.limit_opts(plan[0]))
        elif kind == "waiter":
            R, T = rng.randint(1, 3), round(rng.uniform(1.0, 2.5), 2)
            spec["state"] = {"n": 0, "k": self.seq, "R": R, "T": T, "r": 0, "sig": 0, "to": 0}
            for r in range(R):
                if rng.random() < 0.8:
                    at = rng.uniform(0, (r + 1) * T + 0.5)
                    sig = (ckey, "go%d" % r, {"k": self.seq, "r": r}, "go-%d-%d" % (self.seq, r))
                    events.append((at, "signal", sig))
                    if rng.random() < 0.12:
                        events.append((at + rng.uniform(0, 2), "signal", sig))
        else:
            spec["state"] = {"n": 0, "rounds": self.parent_rounds(), "r": 0}
        if rng.random() < 0.03:
            events.append((rng.uniform(0, 5), "cancel", None))
        return spec, events


# ------------------------------------------------------------------- driver

class Driver(threading.Thread):
    """Inserts at `rate` a second while `inserting` is set; sends the
    signals and cancels as they fall due until `stop`."""

    def __init__(self, planner, rate, rundir):
        super().__init__(name="driver", daemon=True)
        self.planner = planner
        self.rate = rate
        self.db = Db("driver")
        self.inserting = threading.Event()
        self.inserting.set()
        self.stop = threading.Event()
        self.acked = {}                 # id -> ckey: what the server acknowledged
        self.events = []                # heap (at, seq, kind, data, id)
        self.seq = 0
        self.sent = collections.Counter()
        self.ack_log = open(os.path.join(rundir, "acked.log"), "a")
        self.error = None
        self.lock = threading.Lock()

    def pending(self):
        with self.lock:
            return len(self.events)

    def insert(self, batch):
        specs = [s for s, _ in batch]
        rows = self.db.run(
            "WITH s AS (SELECT spec, (o - 1)::int AS ord"
            "             FROM jsonb_array_elements(%(specs)s::jsonb) WITH ORDINALITY AS s(spec, o)),"
            "     i AS MATERIALIZED (SELECT * FROM gen_durable.insert_many(%(specs)s::jsonb)),"
            "     rec AS (INSERT INTO chaos.inserted (id, ckey, fsm, spec)"
            "             SELECT i.id, s.spec->>'correlation_key', s.spec->>'fsm', s.spec"
            "               FROM i JOIN s USING (ord) WHERE i.created RETURNING id)"
            " SELECT i.ord, i.id, i.created FROM i ORDER BY i.ord",
            {"specs": jdump(specs)})
        t = now()
        with self.lock:
            for (ordinal, id_, created), (spec, events) in zip(rows, batch):
                self.acked[id_] = spec["correlation_key"]
                self.ack_log.write("%d %s %s\n" % (id_, spec["correlation_key"],
                                                   "created" if created else "existing"))
                self.sent["inserted"] += 1
                if not created:
                    self.sent["insert_retried"] += 1
                for delay, kind, data in events:
                    self.seq += 1
                    heapq.heappush(self.events, (t + delay, self.seq, kind, data, id_))
            self.ack_log.flush()

    def fire(self, kind, data, id_):
        if kind == "signal":
            key, name, payload, dedup = data
            answer = self.db.run("SELECT gen_durable.signal(%s::text, %s, %s::jsonb,"
                                 " dedup_key => %s)", (key, name, jdump(payload), dedup),
                                 stop=self.stop)[0][0]
            self.sent["signal_" + answer] += 1
        else:
            n = self.db.run("SELECT gen_durable.cancel(%s, 'chaos cancel')", (id_,),
                            stop=self.stop)[0][0]
            self.sent["cancel_hit" if n else "cancel_missed"] += 1
            self.sent["cancelled_instances"] += n

    def run(self):
        try:
            credit = 0.0
            last = now()
            while not self.stop.is_set():
                t = now()
                if self.inserting.is_set():
                    credit += (t - last) * self.rate
                    n = int(credit)
                    if n:
                        credit -= n
                        self.insert([self.planner.next_instance() for _ in range(n)])
                last = t
                while True:
                    with self.lock:
                        if not self.events or self.events[0][0] > now():
                            break
                        _, _, kind, data, id_ = heapq.heappop(self.events)
                    self.fire(kind, data, id_)
                self.stop.wait(0.1)
        except Exception as exc:  # reported by the main thread
            self.error = repr(exc)
            say("driver failed: %r" % exc)


# ------------------------------------------------------------------ sampler

class Sampler(threading.Thread):
    """Watches the instances table from its own connection."""

    def __init__(self, interval):
        super().__init__(name="sampler", daemon=True)
        self.interval = interval
        self.db = Db("sampler")
        self.stop = threading.Event()
        self.samples = 0
        self.row_checks = 0
        self.max_per_key = {}           # key class -> max executing rows seen on one key
        self.max_per_key_name = {}
        self.over = []                  # (t, key, count, limit, ids)
        self.over_count = 0
        self.rate_claims = {}           # (id, steps, attempt, worker) -> (start, seen, key, weight)
        self.max_lease_overdue = 0.0
        self.max_deadline_overdue = 0.0
        self.overdue = []
        self.row_violations = collections.Counter()
        self.row_examples = []
        self.stats_base = collections.Counter()
        self.stats_last = {}
        self.executing_seen = 0

    def limit_of(self, key):
        name = key.split(":", 1)[0]
        return (name, GATES[name]) if name in GATES else ("K=1", 1)

    def sample(self):
        # every claim in flight, on its row or in memory (gen_durable.claims)
        rows = self.db.once(
            "SELECT i.id, i.concurrency_key, i.rate_limit, i.weight, i.steps, i.attempt, c.worker,"
            "       c.lease_expires_at, extract(epoch FROM clock_timestamp() - c.lease_expires_at),"
            "       clock_timestamp()"
            "  FROM gen_durable.claims c JOIN gen_durable.instances i USING (id)")
        self.samples += 1
        self.executing_seen = max(self.executing_seen, len(rows))
        per_key = collections.defaultdict(list)
        for id_, ck, rl, w, steps, attempt, worker, lease, overdue, seen in rows:
            if ck is not None:
                per_key[ck].append(id_)
            if rl is not None:
                k = (id_, steps, attempt, worker)
                claimed = lease - datetime.timedelta(seconds=LEASE)
                if k not in self.rate_claims or claimed < self.rate_claims[k][0]:
                    self.rate_claims[k] = (claimed, seen, rl, w)
            overdue = float(overdue)
            self.max_lease_overdue = max(self.max_lease_overdue, overdue)
            if overdue > OVERDUE_GRACE and len(self.overdue) < 50:
                self.overdue.append(("lease", id_, overdue, now() - T0))
        for key, ids in per_key.items():
            cls, limit = self.limit_of(key)
            n = len(ids)
            if n > self.max_per_key.get(cls, 0):
                self.max_per_key[cls] = n
            if n > limit:
                self.over_count += 1
                if len(self.over) < 50:
                    self.over.append((round(now() - T0, 3), key, n, limit, sorted(ids)))

    def row_check(self):
        (r,) = self.db.once("""
            SELECT count(*) FILTER (WHERE (status = 'executing') <> (locked_by IS NOT NULL)),
                   count(*) FILTER (WHERE (status = 'executing') <> (lease_expires_at IS NOT NULL)),
                   count(*) FILTER (WHERE status = 'awaiting_signal' AND awaits IS NULL),
                   count(*) FILTER (WHERE status = 'awaiting_children' AND NOT EXISTS (
                       SELECT 1 FROM gen_durable.instances c
                        WHERE c.parent_id = p.id AND c.parent_round = p.spawn_round
                          AND c.status NOT IN ('done', 'failed', 'cancelled'))),
                   max(extract(epoch FROM clock_timestamp() - await_deadline))
                       FILTER (WHERE status = 'awaiting_signal'),
                   array_agg(id) FILTER (WHERE status = 'awaiting_children' AND NOT EXISTS (
                       SELECT 1 FROM gen_durable.instances c
                        WHERE c.parent_id = p.id AND c.parent_round = p.spawn_round
                          AND c.status NOT IN ('done', 'failed', 'cancelled')))
              FROM gen_durable.instances p""")
        self.row_checks += 1
        names = ["executing <> locked_by set", "executing <> lease set",
                 "awaiting_signal without awaits",
                 "awaiting_children with no live child of its round"]
        for name, n in zip(names, r[:4]):
            if n:
                self.row_violations[name] += 1
                if len(self.row_examples) < 20:
                    self.row_examples.append((round(now() - T0, 2), name, n, r[5]))
        if r[4] is not None:
            overdue = float(r[4])
            self.max_deadline_overdue = max(self.max_deadline_overdue, overdue)
            if overdue > OVERDUE_GRACE and len(self.overdue) < 50:
                self.overdue.append(("await_deadline", None, overdue, now() - T0))

    def read_stats(self):
        cur = dict(self.db.once("SELECT counter, value FROM gen_durable.stats"))
        if any(cur.get(k, 0) < v for k, v in self.stats_last.items()):
            self.stats_base.update(self.stats_last)     # a server restart reset them
        self.stats_last = cur

    def stats(self):
        total = collections.Counter(self.stats_base)
        total.update(self.stats_last)
        return total

    def run(self):
        last_rows = last_stats = 0.0
        while not self.stop.is_set():
            try:
                self.sample()
                t = now()
                if t - last_rows >= 0.5:
                    self.row_check()
                    last_rows = t
                if t - last_stats >= 1.0:
                    self.read_stats()
                    last_stats = t
            except psycopg.OperationalError:
                self.db.close()
                self.stop.wait(0.1)
                continue
            self.stop.wait(self.interval)


# ------------------------------------------------------------------ workers

class Workers:
    """The worker processes, by slot; each start is a new generation."""

    def __init__(self, count, concurrency, rundir, python):
        self.count = count
        self.concurrency = concurrency
        self.rundir = rundir
        self.python = python
        self.procs = [None] * count
        self.gens = [0] * count
        self.restart_at = [0.0] * count
        self.termed = [None] * count    # monotonic time of our SIGTERM
        self.paused = [None] * count    # monotonic time to SIGCONT a SIGSTOPped worker
        self.ids = [None] * count
        self.logs = []
        self.events = collections.Counter()
        self.bad_stops = []
        self.enabled = True

    def start(self, i):
        self.gens[i] += 1
        prefix = os.path.join(self.rundir, "worker%d.%d" % (i, self.gens[i]))
        self.logs.append(prefix)
        out, err = open(prefix + ".out", "wb"), open(prefix + ".err", "wb")
        self.procs[i] = subprocess.Popen(
            [self.python, os.path.join(HERE, "chaos_app.py"), "--queues", "qa,qb",
             "--concurrency", str(self.concurrency), "--batch", "10"],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        out.close()
        err.close()
        self.ids[i] = None
        self.termed[i] = None
        self.paused[i] = None
        self.events["started"] += 1

    def worker_id(self, i):
        if self.ids[i] is None and self.procs[i] is not None:
            try:
                with open(self.logs_of(i) + ".out") as f:
                    for line in f:
                        if line.startswith("ready "):
                            self.ids[i] = line.split()[1]
            except OSError:
                pass
        return self.ids[i]

    def logs_of(self, i):
        return os.path.join(self.rundir, "worker%d.%d" % (i, self.gens[i]))

    def alive(self):
        return [i for i, p in enumerate(self.procs) if p is not None and p.poll() is None]

    def tick(self):
        """Reaps exited workers and restarts the due ones."""
        t = now()
        for i, p in enumerate(self.procs):
            if p is not None and self.paused[i] is not None and t >= self.paused[i]:
                if p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                self.paused[i] = None
            if p is not None:
                rc = p.poll()
                if rc is None:
                    if self.termed[i] is not None and t - self.termed[i] > 20:
                        self.bad_stops.append("worker%d.%d still running 20 s after SIGTERM"
                                              % (i, self.gens[i]))
                        p.kill()
                    continue
                if self.termed[i] is not None:
                    wid = self.worker_id(i)
                    with open(self.logs_of(i) + ".out") as f:
                        stopped = ("stopped %s\n" % wid) in f.read()
                    if rc != 0 or not stopped:
                        self.bad_stops.append("worker%d.%d: exit %s after SIGTERM, 'stopped' %s"
                                              % (i, self.gens[i], rc,
                                                 "printed" if stopped else "missing"))
                elif rc != -signal.SIGKILL:
                    self.events["exited_by_itself"] += 1   # e.g. no server at start
                self.procs[i] = None
                self.restart_at[i] = t + random.uniform(0.2, 1.5)
            elif self.enabled and t >= self.restart_at[i]:
                self.start(i)
                if self.events["started"] > self.count:
                    self.events["restarts"] += 1

    def kill(self, i):
        self.procs[i].kill()

    def term(self, i):
        self.termed[i] = now()
        self.procs[i].terminate()

    def pause(self, i, seconds):
        self.procs[i].send_signal(signal.SIGSTOP)
        self.paused[i] = now() + seconds

    def resume_all(self):
        for i, p in enumerate(self.procs):
            if p is not None and self.paused[i] is not None:
                if p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                self.paused[i] = None

    def kill_all(self):
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.kill()
        for i, p in enumerate(self.procs):
            if p is not None:
                p.wait()
                self.procs[i] = None

    def stop_all(self, grace=25.0):
        """SIGTERM every worker; each must exit 0 after printing `stopped <id>`."""
        self.enabled = False
        self.resume_all()
        for i in self.alive():
            self.worker_id(i)
            self.term(i)
        end = now() + grace
        while self.alive() and now() < end:
            time.sleep(0.1)
        for i in self.alive():
            self.bad_stops.append("worker%d.%d still running %d s after SIGTERM"
                                  % (i, self.gens[i], grace))
        self.tick()
        self.kill_all()


# -------------------------------------------------------------------- chaos

class Chaos:
    """The seeded chaos events against the workers and the server."""

    KINDS = ["worker_kill", "worker_term", "worker_pause", "backend_terminate", "maint_kill",
             "server_crash"]
    WEIGHTS = [28, 8, 8, 28, 12, 12]

    def __init__(self, rng, workers, datadir, serverlog):
        self.rng = rng
        self.workers = workers
        self.datadir = datadir
        self.serverlog = serverlog
        self.db = Db("chaos", patience=60)
        self.counts = collections.Counter()
        self.skipped = collections.Counter()
        self.restart_times = []
        self.maint_back = []
        self.problems = []

    def as_pg(self, args):
        if os.getuid() == 0:
            return ["runuser", "-u", "postgres", "--"] + args
        return args

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.datadir, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def wait_up(self, timeout=60.0):
        end = now() + timeout
        while now() < end:
            try:
                self.db.once("SELECT 1")
                return True
            except psycopg.OperationalError:
                self.db.close()
                time.sleep(0.1)
        return False

    def maintenance_pid(self):
        rows = self.db.once("SELECT pid FROM pg_stat_activity"
                            " WHERE backend_type = 'gen_durable worker'"
                            "   AND datname = current_database()")
        return rows[0][0] if rows else None

    def wait_maintenance(self, timeout=30.0):
        end = now() + timeout
        while now() < end:
            try:
                pid = self.maintenance_pid()
                if pid:
                    return pid
            except psycopg.OperationalError:
                self.db.close()
            time.sleep(0.1)
        return None

    def event(self):
        kind = self.rng.choices(self.KINDS, self.WEIGHTS)[0]
        getattr(self, kind)()

    def worker_kill(self):
        alive = self.workers.alive()
        if not alive:
            self.skipped["worker_kill"] += 1
            return
        i = self.rng.choice(alive)
        self.workers.kill(i)
        self.counts["worker_kill"] += 1
        say("chaos: SIGKILL worker%d.%d" % (i, self.workers.gens[i]))

    def worker_pause(self):
        alive = [i for i in self.workers.alive()
                 if self.workers.termed[i] is None and self.workers.paused[i] is None]
        if not alive:
            self.skipped["worker_pause"] += 1
            return
        i = self.rng.choice(alive)
        seconds = self.rng.uniform(LEASE + 1, LEASE + 4)
        self.workers.pause(i, seconds)
        self.counts["worker_pause"] += 1
        say("chaos: SIGSTOP worker%d.%d for %.1f s (its leases run out; then SIGCONT)"
            % (i, self.workers.gens[i], seconds))

    def worker_term(self):
        # only a worker that has printed `ready` (before that it has no SIGTERM handler)
        alive = [i for i in self.workers.alive()
                 if self.workers.termed[i] is None and self.workers.paused[i] is None
                 and self.workers.worker_id(i) is not None]
        if not alive:
            self.skipped["worker_term"] += 1
            return
        i = self.rng.choice(alive)
        self.workers.worker_id(i)
        self.workers.term(i)
        self.counts["worker_term"] += 1
        say("chaos: SIGTERM worker%d.%d" % (i, self.workers.gens[i]))

    def backend_terminate(self):
        try:
            rows = self.db.once("SELECT pid, application_name FROM pg_stat_activity"
                                " WHERE application_name LIKE 'python-%%'"
                                "   AND datname = current_database() ORDER BY pid")
            if not rows:
                self.skipped["backend_terminate"] += 1
                return
            if self.rng.random() < 0.5:
                victims = [self.rng.choice(rows)]
            else:
                app = self.rng.choice(rows)[1]
                victims = [r for r in rows if r[1] == app]
            n = 0
            for pid, _ in victims:
                n += bool(self.db.once("SELECT pg_terminate_backend(%s)", (pid,))[0][0])
        except psycopg.OperationalError:
            self.db.close()
            self.skipped["backend_terminate"] += 1
            return
        self.counts["backend_terminate"] += 1
        self.counts["backends_terminated"] += n
        say("chaos: pg_terminate_backend on %d worker connection(s)" % n)

    def maint_kill(self):
        try:
            pid = self.maintenance_pid()
        except psycopg.OperationalError:
            self.db.close()
            pid = None
        pm = self.postmaster_pid()
        if not pid or not pm:
            self.skipped["maint_kill"] += 1
            return
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                title = f.read().decode(errors="replace")
            with open("/proc/%d/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            self.skipped["maint_kill"] += 1
            return
        if not title.startswith("postgres: gen_durable worker") or ppid != pm:
            self.problems.append("pid %d is not our maintenance worker (%r, ppid %d)"
                                 % (pid, title, ppid))
            return
        t = now()
        os.kill(pid, signal.SIGKILL)
        self.counts["maint_kill"] += 1
        self.db.close()
        time.sleep(0.3)     # let the postmaster notice and start its crash restart
        up = self.wait_up()
        new = self.wait_maintenance() if up else None
        if new is None:
            self.problems.append("the maintenance worker did not come back within 90 s"
                                 " of a SIGKILL")
        else:
            self.maint_back.append(now() - t)
        say("chaos: SIGKILL maintenance worker %d (server crash-restart by the postmaster);"
            " maintenance worker %d back after %.1f s" % (pid, new or 0, now() - t))

    def server_crash(self):
        t = now()
        r = subprocess.run(self.as_pg([PG_BIN + "/pg_ctl", "-D", self.datadir, "-m",
                                       "immediate", "stop"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.db.close()
        if r.returncode != 0:
            self.problems.append("pg_ctl stop -m immediate failed: %s" % r.stderr.decode())
        time.sleep(self.rng.uniform(0, 1.0))
        self.start_server()
        self.counts["server_crash"] += 1
        self.restart_times.append(now() - t)
        say("chaos: pg_ctl stop -m immediate + start: up again after %.1f s" % (now() - t))

    def start_server(self):
        r = subprocess.run(self.as_pg([PG_BIN + "/pg_ctl", "-D", self.datadir, "-l",
                                       self.serverlog, "-w", "-t", "120", "start"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise SystemExit("chaos: pg_ctl start failed: %s" % r.stderr.decode())


# ------------------------------------------------------------------- checks

class Report:
    def __init__(self):
        self.violations = collections.OrderedDict()
        self.examples = collections.defaultdict(list)
        self.figures = collections.OrderedDict()
        self.warnings = []

    def check(self, name, count=0):
        self.violations.setdefault(name, 0)
        self.violations[name] += count

    def bad(self, name, example=None):
        self.check(name, 1)
        if example is not None and len(self.examples[name]) < 5:
            self.examples[name].append(example)

    def total(self):
        return sum(self.violations.values())


def rate_check(claims, report):
    """Every rate key, from its claims (start, end, key, weight): a claim's
    admission happened at a time between `start` (the clock its pick or
    continue read first: lease_expires_at - lease) and `end` (a time after
    its claim had committed: the first sample that saw it executing, or the
    commit of its step's outcome).  A token bucket grants at most
    burst + rate * T tokens in any T seconds, so for every window
    [start_i, end_j] (up to RATE_WINDOW long) the weights of the claims
    certainly admitted inside it (start >= start_i, end <= end_j) must not
    exceed burst + rate * (end_j - start_i): a violation found this way is
    proven whatever the delays between the clocks.  Also returns, as a
    figure, the largest excess over rate * window by the start clocks alone
    (an estimate: a claim that waited for a bucket lock looks early)."""
    by_key = collections.defaultdict(list)
    for start, end, key, w in claims:
        by_key[key].append((start, end, w))
    figures = {}
    for key, cl in by_key.items():
        name = key.split(":", 1)[0]
        rate, burst, _ = RATES[name]
        base = min(c[0] for c in cl)
        pts = sorted(((a - base).total_seconds(), (b - base).total_seconds(), w)
                     for a, b, w in cl)
        # the estimate: max over i <= j (by start) of tokens[i..j] - rate * (t_j - t_i)
        best, low, prefix = float("-inf"), float("inf"), 0.0
        for t, _, w in pts:
            low = min(low, prefix - rate * t)
            prefix += w
            best = max(best, prefix - rate * t - low)
        # the proof: windows [start_i, end_j]
        proven, worst = 0, None
        worst_margin = float("-inf")
        for i, (lo, _, _) in enumerate(pts):
            inside = []
            for s_, e, w in pts[i:]:
                if s_ >= lo + RATE_WINDOW:
                    break
                if e <= lo + RATE_WINDOW:
                    inside.append((e, w))
            inside.sort()
            total = 0.0
            for e, w in inside:
                total += w
                margin = total - (burst + rate * (e - lo))
                if margin > worst_margin:
                    worst_margin = margin
                    worst = (lo, e, total)
                if margin > 1e-9:
                    proven += 1
        figures[key] = {"claims": len(cl), "estimate: most tokens beyond rate*window":
                        round(best, 2), "burst": burst,
                        "proof: least slack in a window": round(-worst_margin, 2)}
        if proven:
            lo, e, total = worst
            report.bad("rate limit exceeded", {
                "key": key, "tokens surely admitted in the window": total,
                "window s": round(e - lo, 4), "allowed": round(burst + rate * (e - lo), 2),
                "window start": (base + datetime.timedelta(seconds=lo)).isoformat()})
    return figures


def check(db, driver, sampler, chaos, workers, final_blow, drain, rundir):
    report = Report()
    fig = report.figures

    inst = {}
    for row in db.once("SELECT id, fsm, status::text, step, state, steps, attempt, result, error,"
                       " parent_id, parent_round, spawn_round, child_index, locked_by,"
                       " lease_expires_at > clock_timestamp(), await_deadline > clock_timestamp(),"
                       " eligible_at > clock_timestamp(), correlation_key"
                       " FROM gen_durable.instances"):
        inst[row[0]] = dict(zip(["id", "fsm", "status", "step", "state", "steps", "attempt",
                                 "result", "error", "parent_id", "parent_round", "spawn_round",
                                 "child_index", "locked_by", "lease_future", "deadline_future",
                                 "eligible_future", "ckey"], row))
    inserted = {r[0]: {"ckey": r[1], "fsm": r[2], "spec": r[3]}
                for r in db.once("SELECT id, ckey, fsm, spec FROM chaos.inserted")}
    ledger = collections.defaultdict(list)
    n_ledger = dup_rows = 0
    for row in db.once("SELECT id, steps, attempt, fsm, step, kind, new_step, n_before,"
                       " n_after, worker, applied, detail, info, dups, dup_rows, committed_at"
                       " FROM chaos.ledger ORDER BY id, steps"):
        d = dict(zip(["id", "steps", "attempt", "fsm", "step", "kind", "new_step", "n_before",
                      "n_after", "worker", "applied", "detail", "info", "dups", "dup_rows",
                      "committed_at"], row))
        ledger[d["id"]].append(d)
        n_ledger += 1
        if d["dups"]:
            dup_rows += d["dups"]
            report.bad("step committed twice (ledger UNIQUE (id, steps) hit)",
                       {"id": d["id"], "steps": d["steps"], "first": {
                           k: d[k] for k in ("kind", "step", "worker", "applied", "attempt")},
                        "again": d["dup_rows"]})
    report.check("step committed twice (ledger UNIQUE (id, steps) hit)")
    retries = db.once("SELECT id, steps, attempt, info, dups, committed_at FROM chaos.retries")
    for id_, steps, attempt, info, dups, _ in retries:
        if dups:
            report.bad("retry committed twice (UNIQUE (id, steps, attempt) hit)",
                       {"id": id_, "steps": steps, "attempt": attempt, "dups": dups})
    report.check("retry committed twice (UNIQUE (id, steps, attempt) hit)")

    by_fsm = collections.Counter(i["fsm"] for i in inst.values())
    by_status = collections.Counter((i["fsm"], i["status"]) for i in inst.values())
    fig["instances"] = len(inst)
    fig["instances by machine"] = dict(by_fsm)
    fig["top-level inserted (chaos.inserted)"] = len(inserted)
    fig["inserts acknowledged to the driver"] = len(driver.acked)
    fig["statuses"] = {"%s %s" % k: v for k, v in sorted(by_status.items())}
    fig["steps committed (ledger rows)"] = n_ledger
    fig["retries committed"] = len(retries)

    # --- no instance lost
    for id_, ckey in driver.acked.items():
        if id_ not in inserted:
            report.bad("acknowledged insert not committed", {"id": id_, "ckey": ckey})
    report.check("acknowledged insert not committed")
    for id_, rec in inserted.items():
        if id_ not in inst:
            report.bad("inserted instance missing", {"id": id_, "ckey": rec["ckey"]})
    report.check("inserted instance missing")
    for i in inst.values():
        if i["parent_id"] is None and i["id"] not in inserted:
            report.bad("instance nobody inserted", {"id": i["id"], "fsm": i["fsm"]})
    report.check("instance nobody inserted")
    children = collections.defaultdict(lambda: collections.defaultdict(list))
    for i in inst.values():
        if i["parent_id"] is not None:
            children[i["parent_id"]][i["parent_round"]].append(i)
    for pid, rows in ledger.items():
        spawns = [r for r in rows if r["kind"] == "spawn"]
        rounds = children.get(pid, {})
        landed = [len(rounds[k]) for k in sorted(rounds)]
        wanted = [r["info"].get("kids") for r in spawns]
        if landed != wanted:
            report.bad("spawned children missing", {"parent": pid, "spawned": wanted,
                                                    "found per round": landed})
        for k in sorted(rounds):
            idx = sorted(c["child_index"] for c in rounds[k])
            if idx != list(range(len(idx))):
                report.bad("child indexes not dense", {"parent": pid, "round": k, "idx": idx})
    for pid in children:
        if pid not in ledger:
            report.bad("spawned children missing", {"parent": pid, "spawned": [],
                                                    "found per round": "children without a"
                                                    " committed spawn"})
    report.check("spawned children missing")
    report.check("child indexes not dense")
    legit = stuck = 0
    for i in inst.values():
        if i["status"] in TERMINAL:
            continue
        waiting = ((i["status"] == "awaiting_signal" and i["deadline_future"]) or
                   (i["status"] == "runnable" and i["eligible_future"]) or
                   (i["status"] == "executing" and i["lease_future"]) or
                   (i["status"] == "awaiting_children" and any(
                       c["status"] not in TERMINAL
                       for c in children.get(i["id"], {}).get(i["spawn_round"], []))))
        if waiting:
            legit += 1
        else:
            stuck += 1
            report.bad("instance stuck (not terminal, nothing it waits for)",
                       {k: i[k] for k in ("id", "fsm", "status", "step", "steps", "attempt")})
    report.check("instance stuck (not terminal, nothing it waits for)")
    fig["not terminal at the end: legitimately waiting"] = legit

    # --- steps: ledger vs the counter in the state vs the engine's steps
    for i in inst.values():
        rows = ledger.get(i["id"], [])
        step_rows = [r for r in rows if r["kind"] in STEP_KINDS]
        end_rows = [r for r in rows if r["kind"] in END_KINDS]
        n = i["state"].get("n")
        ex = {"id": i["id"], "fsm": i["fsm"], "status": i["status"], "steps": i["steps"],
              "state.n": n, "ledger steps": [(r["steps"], r["kind"]) for r in rows]}
        if not (len(step_rows) == i["steps"] == n):
            report.bad("state counter / steps / ledger disagree", ex)
        elif [r["steps"] for r in step_rows] != list(range(i["steps"])):
            report.bad("state counter / steps / ledger disagree", ex)
        for r in rows:
            if r["n_before"] != r["steps"]:
                report.bad("a step ran with a state of another step",
                           dict(ex, row=(r["steps"], r["kind"], r["n_before"])))
            if r["kind"] in STEP_KINDS and r["n_after"] != r["steps"] + 1:
                report.bad("a step ran with a state of another step",
                           dict(ex, row=(r["steps"], r["kind"], r["n_after"])))
        if len(end_rows) > 1 or any(r["steps"] != i["steps"] for r in end_rows):
            report.bad("ending outcome committed twice or mid-run", ex)
        end = end_rows[0]["kind"] if end_rows else None
        reason = (i["error"] or {}).get("reason") if isinstance(i["error"], dict) else None
        if i["status"] == "done" and end != "done":
            report.bad("done without a committed done outcome", ex)
        if i["status"] == "cancelled" and end is not None:
            report.bad("cancelled after a committed ending outcome", ex)
        if i["status"] == "failed" and end != "fail":
            report.bad("failed by the engine (not by a committed fail)",
                       dict(ex, error=i["error"]))
        if i["status"] == "failed" and end == "fail" and reason != "designed":
            report.bad("failed by the engine (not by a committed fail)",
                       dict(ex, error=i["error"]))
        if i["status"] in ("runnable", "executing", "awaiting_signal", "awaiting_children") \
                and end is not None:
            report.bad("live after a committed ending outcome", ex)
    for name in ("state counter / steps / ledger disagree", "a step ran with a state of another step",
                 "ending outcome committed twice or mid-run", "done without a committed done outcome",
                 "cancelled after a committed ending outcome",
                 "failed by the engine (not by a committed fail)",
                 "live after a committed ending outcome"):
        report.check(name)

    # --- results of the machines
    wakes = collections.Counter()
    for i in inst.values():
        res = i["result"] if isinstance(i["result"], dict) else {}
        st = i["state"]
        if i["fsm"] == "chain" and i["status"] == "done":
            if res.get("n") != len(st["plan"]) or i["steps"] != len(st["plan"]):
                report.bad("wrong result", {"id": i["id"], "result": res, "steps": i["steps"]})
        if i["fsm"] == "waiter" and i["status"] == "done":
            if res.get("sig", 0) + res.get("to", 0) != st["R"] or i["steps"] != 2 * st["R"]:
                report.bad("wrong result", {"id": i["id"], "result": res, "R": st["R"]})
        if i["fsm"] == "parent" and i["status"] == "done":
            if res.get("rounds") != len(st["rounds"]):
                report.bad("wrong result", {"id": i["id"], "result": res})
        if i["parent_id"] is None and i["status"] == "failed":
            report.bad("a top-level instance failed", {"id": i["id"], "error": i["error"]})
        if i["fsm"] == "child" and i["status"] == "failed" and st.get("fate") != "fail":
            report.bad("a child failed against its fate", {"id": i["id"], "fate": st.get("fate"),
                                                           "error": i["error"]})
        if i["fsm"] == "child" and i["status"] == "done" and st.get("fate") == "fail":
            report.bad("a child failed against its fate", {"id": i["id"], "fate": "fail",
                                                           "status": "done"})
    for name in ("wrong result", "a top-level instance failed", "a child failed against its fate"):
        report.check(name)

    # --- joins: each round of a parent joined once, with every child ended
    joins = rounds_joined = 0
    for id_, rows in ledger.items():
        spawn_rows = [r for r in rows if r["kind"] == "spawn"]
        join_rows = [r for r in rows if r["info"] and "check" in r["info"]]
        for r in join_rows:
            joins += 1
            if r["info"]["check"] != "ok":
                report.bad("parent woken with children not as the round's join policy says",
                           {"id": id_, "steps": r["steps"], "info": r["info"]})
        # the step after each spawn is the join of that round
        by_steps = {r["steps"]: r for r in rows}
        for s in spawn_rows:
            after = by_steps.get(s["steps"] + 1)
            if after is None:
                continue        # not joined yet (cancelled parent, ...)
            if "check" not in (after["info"] or {}):
                report.bad("parent ran something else than its join after a spawn",
                           {"id": id_, "spawn at": s["steps"], "then": after["step"]})
            rounds_joined += 1
        status = inst.get(id_, {}).get("status")
        if status == "done" and len(join_rows) != len(spawn_rows):
            report.bad("parent done without joining every round",
                       {"id": id_, "spawns": len(spawn_rows), "joins": len(join_rows)})
        if status == "done" and inst[id_]["fsm"] == "parent":
            got = [r["info"]["round"] for r in join_rows]
            if got != list(range(len(inst[id_]["state"]["rounds"]))):
                report.bad("parent done without joining every round", {"id": id_, "rounds": got})
        for r in rows:
            wake = (r["info"] or {}).get("wake")
            if wake is not None:
                wakes[wake if wake in ("signal", "timeout") else "bad"] += 1
                if wake not in ("signal", "timeout"):
                    report.bad("waiter woken without its signal or its timeout",
                               {"id": id_, "steps": r["steps"], "wake": wake})
    for name in ("parent woken with children not as the round's join policy says",
                 "parent ran something else than its join after a spawn",
                 "parent done without joining every round",
                 "waiter woken without its signal or its timeout"):
        report.check(name)
    fig["joins committed (parent woke and went on)"] = joins
    fig["rounds spawned then joined"] = rounds_joined
    fig["waiter wakes"] = dict(wakes)

    # --- K=1 and gates (sampled), rate limits (claims)
    fig["sampler: samples of executing rows"] = sampler.samples
    fig["sampler: most executing rows on one key"] = dict(sampler.max_per_key)
    fig["sampler: most executing rows at once"] = sampler.executing_seen
    report.check("K=1 / gate exceeded", sampler.over_count)
    for ex in sampler.over[:5]:
        report.examples["K=1 / gate exceeded"].append(
            {"t": ex[0], "key": ex[1], "executing": ex[2], "limit": ex[3], "ids": ex[4]})
    claims = {}     # (id, steps, attempt) -> [start, end, key, weight]
    for id_, rows in ledger.items():
        for r in rows:
            if (r["info"] or {}).get("rate"):
                claims[(id_, r["steps"], r["attempt"])] = [
                    datetime.datetime.fromisoformat(r["info"]["claimed"])
                    - datetime.timedelta(seconds=LEASE),
                    r["committed_at"], r["info"]["rate"], float(r["info"]["w"])]
    for id_, steps, attempt, info, _, committed_at in retries:
        if (info or {}).get("rate"):
            claims.setdefault((id_, steps, attempt), [
                datetime.datetime.fromisoformat(info["claimed"]) - datetime.timedelta(seconds=LEASE),
                committed_at, info["rate"], float(info["w"])])
    from_sampler = 0
    for (id_, steps, attempt, _), (start, seen, key, w) in sampler.rate_claims.items():
        c = claims.get((id_, steps, attempt))
        if c is None:
            claims[(id_, steps, attempt)] = [start, seen, key, float(w)]
            from_sampler += 1
        elif abs((c[0] - start).total_seconds()) < 1e-6:    # the same claim
            c[1] = min(c[1], seen)
    rate_figures = rate_check([tuple(c) for c in claims.values()], report)
    report.check("rate limit exceeded")
    fig["rate-limited claims checked (from ledger + sampler)"] = "%d (%d seen only by the sampler)" % (
        len(claims), from_sampler)
    fig["rate keys"] = rate_figures

    # --- leases and deadlines
    fig["final blow: rows executing when every worker was SIGKILLed"] = final_blow["executing_at_kill"]
    fig["final blow: claims returned after SIGKILL of every worker (s)"] = final_blow["returned_after"]
    report.check("executing past its lease after a maintenance pass", final_blow["stuck"])
    if final_blow["stuck"]:
        report.examples["executing past its lease after a maintenance pass"] = final_blow["stuck_rows"]
    report.check("claims of dead workers not returned by the time their leases ran out",
                 final_blow["left"])
    fig["sampler: most seconds an executing row was past its lease"] = round(sampler.max_lease_overdue, 2)
    fig["sampler: most seconds an await was past its deadline"] = round(sampler.max_deadline_overdue, 2)
    report.check("lease or await deadline overdue by more than %d s" % OVERDUE_GRACE,
                 len(sampler.overdue))
    report.examples["lease or await deadline overdue by more than %d s" % OVERDUE_GRACE] = sampler.overdue[:5]
    for name, n in sampler.row_violations.items():
        report.check("row invariant: " + name, n)
    for ex in sampler.row_examples:
        report.examples["row invariant: " + ex[1]].append(ex)
    fig["sampler: row-invariant checks"] = sampler.row_checks

    # --- gates after the run: every slot back
    leaked = db.once("SELECT key, shard, available, capacity FROM gen_durable.buckets"
                     " WHERE kind = 'conc' AND available <> capacity")
    for row in leaked:
        report.bad("gate slots not returned after the run", row)
    report.check("gate slots not returned after the run")

    # --- worker logs
    invalid = errors = handler_failures = stale = raised = batch_twice = 0
    for prefix in workers.logs:
        try:
            with open(prefix + ".err", errors="replace") as f:
                for line in f:
                    if "invalid outcome" in line and "already has an outcome earlier" in line:
                        batch_twice += 1
                        if len(report.examples[TWICE_IN_A_BATCH]) < 5:
                            report.examples[TWICE_IN_A_BATCH].append(line.strip())
                    elif "invalid outcome" in line:
                        invalid += 1
                        if len(report.examples["outcome rejected as invalid"]) < 5:
                            report.examples["outcome rejected as invalid"].append(line.strip())
                    elif " ERROR " in line:
                        errors += 1
                    if "failed:" in line and "retry in" in line:
                        if "failed: stopped" in line:
                            handler_failures += 1
                        else:
                            raised += 1
                            if len(report.examples["a handler raised (a bug of chaos_app)"]) < 5:
                                report.examples["a handler raised (a bug of chaos_app)"].append(
                                    line.strip())
                    if "outcome stale" in line:
                        stale += 1
        except OSError:
            pass
    report.check("outcome rejected as invalid", invalid)
    report.check("a handler raised (a bug of chaos_app)", raised)
    report.check(TWICE_IN_A_BATCH, batch_twice)
    fig["worker log: other ERROR lines (a worker started while the server was down, ...)"] = errors
    fig["worker log: steps interrupted (claim lost, server gone)"] = handler_failures
    fig["worker log: stale outcomes"] = stale

    # --- the rest of the figures
    fig["chaos events"] = dict(chaos.counts)
    fig["chaos events skipped (nothing to hit)"] = dict(chaos.skipped)
    fig["worker processes started"] = workers.events["started"]
    fig["worker restarts"] = workers.events["restarts"]
    fig["server crash-restarts"] = chaos.counts["server_crash"] + chaos.counts["maint_kill"]
    if chaos.restart_times:
        fig["pg_ctl immediate stop + start (s, max)"] = round(max(chaos.restart_times), 1)
    if chaos.maint_back:
        fig["maintenance worker back after its SIGKILL (s, max)"] = round(max(chaos.maint_back), 1)
    fig["driver"] = dict(driver.sent)
    st = sampler.stats()
    fig["engine stats (summed over server restarts, approximate)"] = {
        k: st[k] for k in ("claimed", "committed_next", "committed_continue", "committed_retry",
                           "committed_await", "committed_done", "committed_fail",
                           "stale_outcomes", "requeued", "reaped", "reaped_dead_backend",
                           "lease_failed", "timeouts_fired", "signal_wakes", "cancelled",
                           "claim_contended", "throttled_conc", "throttled_rate",
                           "limiter_contended", "gate_shards_repaired", "maintenance_errors")
        if k in st}
    fig["drain"] = drain
    for p in chaos.problems:
        report.warnings.append(p)
    for p in workers.bad_stops:
        report.warnings.append("graceful stop: " + p)
    if driver.error:
        report.bad("driver failed", driver.error)
    report.check("driver failed")
    return report


def print_report(report, rundir):
    print()
    print("=== figures")
    for k, v in report.figures.items():
        print("  %s: %s" % (k, v))
    print("=== checks (violations)")
    for k, v in report.violations.items():
        print("  %-75s %d" % (k, v))
        for ex in report.examples.get(k, [])[:5]:
            print("      e.g. %s" % (ex,))
    for w in report.warnings:
        print("  warning: %s" % w)
    print("violations: %d" % report.total())
    with open(os.path.join(rundir, "report.json"), "w") as f:
        json.dump({"figures": report.figures, "violations": report.violations,
                   "examples": report.examples, "warnings": report.warnings}, f,
                  indent=1, default=str)


# --------------------------------------------------------------------- main

def setup(db):
    db.run("CREATE EXTENSION IF NOT EXISTS gen_durable")
    db.run(SCHEMA)
    for name, k in GATES.items():
        db.run("SELECT gen_durable.set_concurrency_limit(%s, %s, shards => %s)",
               (name, k, GATE_SHARDS[name]))
    for name, (rate, burst, shards) in RATES.items():
        db.run("SELECT gen_durable.set_rate_limit(%s, %s, '1 second', burst => %s,"
               " shards => %s)", (name, rate, burst, shards))
    db.run("SELECT gen_durable.reset_stats()")


def final_blow(db, workers):
    """SIGKILL every worker at once; their claims must come back: by the
    time the last lease has run out and a maintenance pass has run, no
    claim may be left, on a row or in memory (no worker is alive)."""
    workers.enabled = False
    workers.resume_all()
    # strike while rows are executing (up to 15 s for 5 of them)
    end = now() + 15
    while True:
        before = db.run("SELECT count(*) FROM gen_durable.claims")[0]
        if before[0] >= 5 or now() > end:
            break
        time.sleep(0.02)
    t = now()
    workers.kill_all()
    say("final blow: every worker SIGKILLed, %d rows were executing" % before[0])
    returned = None
    end = t + LEASE + 12.0
    while now() < end:
        (n,) = db.run("SELECT count(*) FROM gen_durable.claims")[0]
        if n == 0:
            returned = round(now() - t, 2)
            break
        time.sleep(0.1)
    db.run("SELECT gen_durable.run_maintenance()")
    stuck = db.run("SELECT id, fsm, step, worker, lease_expires_at::text"
                   " FROM gen_durable.claims WHERE lease_expires_at < clock_timestamp()")
    (left,) = db.run("SELECT count(*) FROM gen_durable.claims")[0]
    say("final blow: executing rows gone after %s s; after run_maintenance(): %d executing,"
        " %d past their lease" % (returned, left, len(stuck)))
    return {"executing_at_kill": before[0], "returned_after": returned, "stuck": len(stuck),
            "stuck_rows": stuck[:5], "left": left}


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=6)
    p.add_argument("--rate", type=float, default=12.0, help="top-level instances a second")
    p.add_argument("--drain-timeout", type=float, default=120)
    p.add_argument("--sample-ms", type=float, default=5)
    p.add_argument("--gap", type=float, nargs=2, default=[0.5, 2.5],
                   help="seconds between chaos events (uniform)")
    p.add_argument("--datadir", required=True)
    p.add_argument("--serverlog", required=True)
    p.add_argument("--rundir", required=True)
    p.add_argument("--python", default=sys.executable)
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2 ** 31)
    print("chaos soak: seed %d, %g s, %d workers x %d, %g instances/s"
          % (seed, args.seconds, args.workers, args.concurrency, args.rate), flush=True)
    random.seed(seed + 1)
    db = Db("main")
    setup(db)

    driver = Driver(Planner(random.Random(seed)), args.rate, args.rundir)
    sampler = Sampler(args.sample_ms / 1000.0)
    workers = Workers(args.workers, args.concurrency, args.rundir, args.python)
    chaos = Chaos(random.Random(seed * 7919 + 1), workers, args.datadir, args.serverlog)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(2))
    try:
        return soak(args, seed, db, driver, sampler, workers, chaos)
    finally:
        workers.enabled = False
        workers.kill_all()


def soak(args, seed, db, driver, sampler, workers, chaos):
    for i in range(args.workers):
        workers.start(i)
    sampler.start()
    driver.start()

    # --- soak
    end = now() + args.seconds
    next_event = now() + chaos.rng.uniform(*args.gap)
    last_progress = now()
    while now() < end:
        workers.tick()
        if now() >= next_event:
            chaos.event()
            next_event = now() + chaos.rng.uniform(*args.gap)
        if now() - last_progress >= 5:
            last_progress = now()
            try:
                rows = chaos.db.once("SELECT status::text, count(*) FROM gen_durable.instances"
                                     " GROUP BY 1 ORDER BY 1")
                (steps,) = chaos.db.once("SELECT count(*) FROM chaos.ledger")[0]
                say("progress: %d workers alive, %d ledger steps, %s"
                    % (len(workers.alive()), steps, ", ".join("%s %d" % r for r in rows)))
            except psycopg.OperationalError:
                chaos.db.close()
        time.sleep(0.05)
    say("soak over: %s; %d inserted" % (dict(chaos.counts), len(driver.acked)))

    # --- the final blow
    blow = final_blow(db, workers)
    driver.inserting.clear()

    # --- drain
    workers.enabled = True
    t = now()
    drained = False
    while now() - t < args.drain_timeout:
        workers.tick()
        (live,) = db.run("SELECT count(*) FROM gen_durable.instances"
                         " WHERE status NOT IN ('done', 'failed', 'cancelled')")[0]
        if live == 0 and driver.pending() == 0:
            drained = True
            break
        time.sleep(0.2)
    drain = {"seconds": round(now() - t, 1), "complete": drained}
    say("drain: %s" % drain)
    workers.stop_all()
    driver.stop.set()
    driver.join(10)
    db.run("SELECT gen_durable.run_maintenance()")
    time.sleep(0.2)
    sampler.stop.set()
    sampler.join(10)

    report = check(db, driver, sampler, chaos, workers, blow, drain, args.rundir)
    if not drained:
        report.warnings.append("the drain did not finish in %d s" % args.drain_timeout)
    print_report(report, args.rundir)
    print("seed %d" % seed)
    return 0 if report.total() == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
