#!/usr/bin/python3
"""test/fuzz/fuzz.py - a randomized fuzzer of gen_durable's SQL API.

Calls every SQL function of schema gen_durable many thousand times with
malformed and hostile arguments (NULLs, huge and deeply nested JSON, wrong
types inside outcome objects and insert specs, out-of-range numbers and
intervals, unknown ids, other workers' ids, 1 MB names, odd Unicode,
duplicate ids, arrays with NULLs or two dimensions), interleaved with valid
calls so that real state exists: instances in every status, signals,
children, rate limits and gates, claims of two sessions, explicit
transactions and savepoints.  Then checks:

  - the server never crashed or restarted (the postmaster's start time and
    the backend's pid do not change, no connection is lost, and the server
    log shows no "terminated by signal" / "was terminated" / PANIC / TRAP);
  - no error has SQLSTATE XX000/XX001/XX002, every error message is
    non-empty, and every error about an argument names the argument (or the
    field inside a JSON argument) it is about;
  - results decode (no invalid UTF-8 from the server);
  - the invariants of the tables (invariants.sql, plus the checks below that
    need what the driver knows), every --check-every calls, and at the end
    before and after run_maintenance().

Needs Debian's python3-psycopg (run it with /usr/bin/python3) and a server
with gen_durable installed and preloaded; test/fuzz/run.sh starts a
throwaway one.  Randomized with a seed (printed; --seed replays the same
calls on a fresh server).  Exit status 0 only when nothing was violated.
"""

import argparse
import collections
import glob
import json
import os
import random
import re
import sys
import time

import psycopg
from psycopg.types.json import set_json_loads

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# --------------------------------------------------------------------------
# the engine's source files: an error whose diag.source_file is one of them
# was raised by gen_durable itself (elog.c reports the base name)
ENGINE_FILES = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "src", "*.c"))}
if not ENGINE_FILES:
    ENGINE_FILES = {
        "admit.c", "aftercommit.c", "args.c", "await.c", "buckets.c", "cancel.c", "credit.c",
        "flush.c", "gen_durable.c", "insert.c", "launcher.c", "lease.c", "limit_policy.c",
        "maintenance.c", "outcome.c", "pick.c", "session.c", "settle.c", "shmem.c", "signal.c",
        "spi_util.c", "stats.c", "wait.c", "worker.c"}

TERMINAL = ("done", "failed", "cancelled")
STATUSES = ("runnable", "executing", "awaiting_signal", "awaiting_children", "done", "failed",
            "cancelled")

SPEC_KEYS = ["fsm", "state", "step", "queue", "priority", "run_at", "delay", "correlation_key",
             "correlation_scope", "concurrency_key", "rate_limit", "weight", "max_attempts",
             "max_steps", "metadata", "fsm_version", "history"]
OUTCOME_KEYS = {
    "next": ["id", "worker", "kind", "claim", "step", "state", "rate_limit", "weight", "concurrency_key",
             "fsm_version", "continue", "lease"],
    "retry": ["id", "worker", "kind", "claim", "state", "delay", "error"],
    "await": ["id", "worker", "kind", "claim", "names", "step", "state", "timeout"],
    "spawn": ["id", "worker", "kind", "claim", "children", "step", "state", "join"],
    "done": ["id", "worker", "kind", "claim", "result"],
    "fail": ["id", "worker", "kind", "claim", "error"],
}
ALL_OUTCOME_KEYS = sorted({k for ks in OUTCOME_KEYS.values() for k in ks})

# the arguments (and JSON fields) an error of each function may be about
ARGNAMES = {
    "insert": ["fsm", "state", "step", "queue", "priority", "run_at", "delay", "correlation_key",
               "correlation_scope", "concurrency_key", "rate_limit", "weight", "max_attempts",
               "max_steps", "metadata", "fsm_version", "on_conflict", "history"],
    "insert_many": ["specs", "insert spec"] + SPEC_KEYS,
    "signal": ["target", "name", "payload", "dedup_key"],
    "signal_key": ["target", "name", "payload", "dedup_key"],
    "cancel": ["id", "reason"],
    "fail": ["id", "reason"],
    "retry": ["id", "step", "correlation key"],
    "find": ["metadata"],
    "pick": ["queue", "worker", "batch", "lease", "wait", "fsms"],
    "flush": ["outcomes", "spawns", "children"] + ALL_OUTCOME_KEYS + SPEC_KEYS,
    "heartbeat": ["worker", "ids", "lease"],
    "release": ["worker", "ids"],
    "admit": ["ids", "worker"],
    "await": ["id", "timeout", "until"],
    "set_rate_limit": ["name", "allowed", "per", "burst", "shards"],
    "set_concurrency_limit": ["name", "max", "shards"],
    "drop_limit": ["kind", "name"],
    "pause_queue": ["queue"],
    "resume_queue": ["queue"],
    "set_queue_history": ["queue", "enabled"],
    "timeline": ["id"],
    "schedule": ["name", "cron", "fsm", "state", "queue", "step", "time_zone", "missed",
                 "options", "instance of schedule", "insert spec"] + SPEC_KEYS,
    "unschedule": ["name"],
    "cron_next": ["cron", "after", "time_zone"],
    "run_maintenance": [],
    "reset_stats": [],
    "stats": [],
    "queues": [],
    "_session_alive": ["session"],
    "_stats": [],
    "_start_worker": [],
    "txn": [],
}

# quoted words kept in message prefixes (any other quoted text is input)
KNOWN_NAMES = {n for ns in ARGNAMES.values() for n in ns} | set(ALL_OUTCOME_KEYS) | {
    "rate", "conc", "settled", "terminal", "all", "first_error", "continue", "buckets"}

# SQLSTATEs that are about a bad argument value: the message must say which
ARG_STATE_CLASSES = ("22", "54")
ARG_STATES = {"2202E"}
INTERNAL_STATES = {"XX000", "XX001", "XX002"}


class Raw:
    """A piece of JSON text to embed verbatim (numbers JSON allows but
    Python cannot hold, deep nesting)."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


class DupObj:
    """A JSON object written with its keys in order, duplicates allowed."""
    __slots__ = ("pairs",)

    def __init__(self, pairs):
        self.pairs = pairs


def J(v):
    """JSON text of a value built from dict/list/str/int/float/bool/None,
    Raw and DupObj."""
    if isinstance(v, Raw):
        return v.text
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, DupObj):
        return "{" + ", ".join(J(k) + ": " + J(x) for k, x in v.pairs) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(J(str(k)) + ": " + J(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(J(x) for x in v) + "]"
    raise TypeError(type(v))


def safe_json_loads(text):
    """jsonb results as Python values; what Python cannot load (nesting
    deeper than its recursion limit) as a marker instead of an exception."""
    try:
        return json.loads(text)
    except (RecursionError, ValueError):
        return {"__unparsed__": len(text)}


def fmt_pair(p):
    return "%s, %s" % (p[0], p[1])


def short(s, n=160):
    """A value shortened for a report."""
    if s is None:
        return "NULL"
    s = str(s)
    if len(s) <= n:
        return s
    return "%s...(%d chars)...%s" % (s[: n // 2], len(s), s[-20:])


def sql_literal(v, n=300):
    """A value as an SQL literal for a repro line (long ones shortened)."""
    if v is None:
        return "NULL"
    s = str(v)
    if len(s) > n:
        # a long repetition is written as repeat() so the repro stays exact
        unit = s[:1]
        if s == unit * len(s):
            return "repeat(%s, %d)" % (sql_literal(unit), len(s))
        for k in (2, 3, 4, 8):
            unit = s[:k]
            if len(s) % k == 0 and s == unit * (len(s) // k):
                return "repeat(%s, %d)" % (sql_literal(unit), len(s) // k)
        return "'%s'/*...%d chars...*/" % (s[:n].replace("'", "''"), len(s))
    if "\\" in s or any(ord(c) < 32 for c in s):
        body = "".join("\\x%02x" % ord(c) if ord(c) < 32 else ("\\\\" if c == "\\" else c)
                       for c in s).replace("'", "''")
        return "E'%s'" % body
    return "'%s'" % s.replace("'", "''")


# --------------------------------------------------------------------------
# hostile values, as SQL parameter text (None = SQL NULL).  Each generator
# returns (text, risky): risky says the literal may be refused by the type's
# input function before gen_durable runs (that is PostgreSQL's business).

ODD_UNICODE = [
    "\uffff", "\ufffe", "\u200f\u200e", "\u202eabc\u202c", "e\u0301\u0301\u0301\u0301",
    "\U0001F600", "\U0001F468\u200d\U0001F469\u200d\U0001F467", "Z\u0337\u0322\u031ba\u0338l",
    "\u00a0", "\u2028\u2029", "\U0010FFFF", "\u0627\u0644\u0639\u0631\u0628\u064a",
    "\u4e2d\u6587", "\ufeffbom", "\x01\x02\x7f", "tab\there", "line\nbreak",
]


class Gen:
    """Random values; rnd is the run's seeded Random."""

    def __init__(self, rnd, model):
        self.r = rnd
        self.m = model

    def chance(self, p):
        return self.r.random() < p

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    # ---- names
    def hostile_text(self):
        r = self.r
        c = r.random()
        if c < 0.08:
            return None
        if c < 0.14:
            return ""
        if c < 0.22:
            return self.pick(ODD_UNICODE) * r.choice([1, 2, 7])
        if c < 0.30:
            n = r.choice([1023, 1024, 1025, 2048])
            return "x" * n
        if c < 0.36:
            # multi-byte right at the limit: 341 * 3 = 1023 bytes, 342 * 3 = 1026
            return r.choice(["\u20ac" * 341, "\u20ac" * 342, "\u00e9" * 512, "\u00e9" * 513,
                             "\U0001F600" * 256, "\U0001F600" * 257])
        if c < 0.39:
            return "y" * (1 << 20) if self.chance(0.5) else "\u20ac" * (1 << 18)
        if c < 0.47:
            return r.choice(["a:b", ":", "a:", ":b", "a:b:c", "g1:", "g1:a:b", "r1:\u20ac"])
        if c < 0.55:
            return r.choice(["'; DROP TABLE gen_durable.instances; --", "%s%d%n%x%%", "\\",
                             '"', "\"quoted\"", "$1", "\t", " ", "  x  ", "NULL", "null",
                             "{}", "[]", "default", "settled", "terminal", "rate", "conc",
                             "RATE", "Conc", "all", "first_error"])
        return self.m.name_pool_value(self)

    def hostile_int(self):
        c = self.r.random()
        if c < 0.1:
            return None, False
        if c < 0.85:
            return str(self.pick([0, -1, 1, 2, 3, 10, 32767, 32768, -32768, -32769, 1000,
                                  1001, 10000, 10001, 2147483647, -2147483648])), False
        return self.pick(["2147483648", "-2147483649", "1.5", "abc", "", "1e3"]), True

    def hostile_bigint(self):
        c = self.r.random()
        if c < 0.1:
            return None, False
        if c < 0.5 and self.m.ids:
            return str(self.m.some_id(self)), False
        if c < 0.9:
            return str(self.pick([0, -1, 1, 9223372036854775807, -9223372036854775808,
                                  self.m.max_id + 1, self.m.max_id + 1000, 2 ** 31, 2 ** 32])), False
        return self.pick(["9223372036854775808", "1.5", "x", ""]), True

    def hostile_float(self):
        c = self.r.random()
        if c < 0.1:
            return None, False
        if c < 0.9:
            return self.pick(["0", "-0", "1", "0.5", "1e-320", "5e-324", "1e308", "-1", "NaN",
                              "Infinity", "-Infinity", "2", "10000", "1e-9", "3"]), False
        return self.pick(["1e309", "x", "", "--1"]), True

    def hostile_interval(self):
        c = self.r.random()
        if c < 0.1:
            return None, False
        if c < 0.9:
            return self.pick([
                "0", "-1 second", "1 microsecond", "-1 microsecond", "1 month -30 days",
                "1 month -29 days", "-1 month 31 days", "1 day -86400 seconds",
                "1 day -86399.999999 seconds", "1000000 years", "178000000 years",
                "-178000000 years", "P1Y2M3DT4H5M6S", "PT0.000001S", "2147483647 days",
                "2147483647 months", "100 years", "30 seconds", "10 ms", "1 hour",
                "1 mon -2592000 seconds 1 microsecond", "-2147483648 days"]), False
        return self.pick(["infinity", "garbage", "", "1 fortnight", "P", "9999999999 years"]), True

    def hostile_timestamptz(self):
        c = self.r.random()
        if c < 0.15:
            return None, False
        if c < 0.9:
            return self.pick(["infinity", "-infinity", "epoch", "4713-11-25 00:00:00+00 BC",
                              "294276-12-30 23:59:59+00", "2000-01-01", "now", "today",
                              "tomorrow", "1999-12-31 23:59:59.999999+14"]), False
        return self.pick(["allballs", "garbage", "", "294277-01-01", "4714-11-23 BC",
                          "4713-01-01 00:00:00+00 BC"]), True

    def hostile_text_array(self):
        c = self.r.random()
        if c < 0.1:
            return None, False
        if c < 0.92:
            return self.pick(["{}", "{NULL}", "{a,NULL}", "{{a},{b}}", "{\"\"}", "{job,mail}",
                              "[2:3]={job,order}", "{\"a,b\"}",
                              "{" + ",".join("f%d" % i for i in range(20000)) + "}",
                              "{" + ",".join(['"' + "x" * 2000 + '"'] * 3) + "}"]), False
        return self.pick(["garbage", "{", "{{a},b}"]), True

    def hostile_bigint_array(self):
        c = self.r.random()
        if c < 0.1:
            return None, False
        ids = self.m.claim_ids(self)
        if c < 0.55:
            return self.pick([
                "{}", "{NULL}", "{1,NULL}", "{{1},{2}}", "{-1,0}", "[0:1]={1,2}",
                "{9223372036854775807,-9223372036854775808}",
                "{" + ",".join(str(i) for i in range(1, 10002)) + "}",
                "{" + ",".join(str(i) for i in range(1, 10001)) + "}",
                "{" + ",".join(["1"] * 50) + "}"]), False
        if c < 0.92:
            xs = ids + [self.m.some_id(self) for _ in range(self.r.randrange(3))] if self.m.ids else ids
            if self.chance(0.3):
                xs = xs + xs
            return "{" + ",".join(str(x) for x in xs) + "}", False
        return self.pick(["garbage", "{1.5}", "{x}", "{9223372036854775808}"]), True

    def hostile_status_array(self):
        c = self.r.random()
        if c < 0.1:
            return None, False
        if c < 0.92:
            return self.pick([
                "{}", "{runnable}", "{runnable,executing,awaiting_signal,awaiting_children}",
                "{runnable,executing,awaiting_signal,awaiting_children,done}",
                "{runnable,executing,awaiting_signal,awaiting_children,done,failed,cancelled}",
                "{NULL}", "{runnable,executing,awaiting_signal,awaiting_children,NULL}",
                "{{runnable,executing},{awaiting_signal,awaiting_children}}",
                "{runnable,runnable,executing,awaiting_signal,awaiting_children}",
                "{done}", "{done,failed,cancelled}"]), False
        return self.pick(["{bogus}", "{Runnable}", "garbage"]), True

    # ---- JSON
    def deep(self, depth, kind=None):
        kind = kind or self.pick(["array", "object"])
        if kind == "object":
            # an object level takes more of the parser's stack than an array
            # level: keep a near-limit depth near the objects' limit
            if self.m.max_depth and depth > 0.8 * self.m.max_depth:
                depth = int(depth * 0.9)
        if kind == "array":
            return Raw("[" * depth + "]" * depth)
        return Raw('{"a": ' * depth + "1" + "}" * depth)

    def hostile_json_scalar(self):
        return self.pick([
            None, True, False, 0, -1, 1, 1.5, -0.0, Raw("1e308"), Raw("1e400"), Raw("-1e-400"),
            Raw("123456789012345678901234567890"), Raw("12.000"), Raw("0.000001"), Raw("-0"),
            Raw("9223372036854775807"), Raw("9223372036854775808"), Raw("-9223372036854775809"),
            Raw("1E2"), Raw("2147483648"), "", "x", "1", "true", "null", "1 s", "-1 s", "P1D",
            "PT0S", "garbage", "1e9999 seconds", "infinity", "178000000 years", "1000000000",
            "1000000001 seconds", "0.5", "\u20ac" * 30, self.pick(ODD_UNICODE), "x" * 1025,
            "first_error", "ALL"])

    def hostile_json(self, depth=0):
        c = self.r.random()
        if c < 0.45 or depth > 3:
            return self.hostile_json_scalar()
        if c < 0.6:
            return [self.hostile_json(depth + 1) for _ in range(self.r.randrange(4))]
        if c < 0.75:
            return {self.hostile_key(): self.hostile_json(depth + 1)
                    for _ in range(self.r.randrange(4))}
        if c < 0.8:
            return DupObj([("a", 1), ("a", self.hostile_json(depth + 1)), ("a", None)])
        if c < 0.84:
            return self.deep(self.pick([64, 200, 1000, 3000]))
        if c < 0.86 and self.m.max_depth:
            # just inside what PostgreSQL parses: the engine's own copies and
            # re-parses of such a value run on a deeper stack
            return self.deep(self.m.max_depth - 3 - self.r.randrange(600))
        if c < 0.88:
            return "z" * (1 << 20)
        if c < 0.9:
            return [None] * self.pick([1000, 10001])
        if c < 0.92:
            return {"k%d" % i: i for i in range(self.pick([100, 5000]))}
        return self.pick([[], {}, [None], [""], [1, [2, [3]]], {"": None}, {"a": {}}])

    def hostile_key(self):
        return self.pick(["reslt", "ID", "Kind", "continue ", "", "\u00fc", "\U0001F600" * 20,
                          "x" * 100, "\u20ac" * 30, "e\u0301" * 40, "id", "kind", "worker",
                          "state", "step", "%s", "fsm", "children", "join"])

    def hostile_jsonb_arg(self):
        """A jsonb argument: (text, risky)."""
        c = self.r.random()
        if c < 0.1:
            return None, False
        if c < 0.16:
            return self.pick(["not json", "{", "[1,]", "{\"a\":\"\\u0000\"}", "\"\\ud800\"",
                              "{'a': 1}", "", "NaN", "[1] [2]"]), True
        if c < 0.22:
            return J(self.deep(self.pick([5000, 20000, 200000]))), True
        return J(self.hostile_json()), False


# --------------------------------------------------------------------------
class Model:
    """What the driver believes about the server's state, to make plausible
    calls (ids, claims, keys); it need not be exact."""

    QUEUES = ["default", "q1", "q2", "q\u00fc\u20ac", "Q" * 60]
    WORKERS = ["w1", "w2", "w3", "w\u00e9\u0301"]
    FSMS = ["job", "order", "mail", "\U0001F600fsm"]
    STEPS = ["start", "reserve", "charge", "ship", "s\u20ac"]
    SIGNALS = ["paid", "ship", "x", "\u00fc"]
    CORR = ["c1", "c2", "c3", "c4", "c\u20ac"]
    CONC = ["k1", "k2", "g1:a", "g1:b", "g2:x", "g2:y", "g3", "k\u20ac"]
    RATE = ["r1", "r1:a", "r2", "r2:b", "rx"]
    GATES = ["g1", "g2", "g3"]
    RATES = ["r1", "r2", "r3"]

    def __init__(self):
        self.ids = []               # ids seen (instances, most recent last)
        self.idset = set()
        self.max_id = 0
        self.claims = {}            # id -> worker
        self.claim_no = {}          # id -> the number of its latest claim seen
        self.grandfathered = {}     # gate name -> ids executing when it was last set
        self.dropped = {}           # gate name -> ids holding a slot when it was dropped
        self.max_depth = 0          # deepest JSON nesting the server parses as an argument

    def add_id(self, i):
        if i is None:
            return
        i = int(i)
        if i not in self.idset:
            self.idset.add(i)
            self.ids.append(i)
            if len(self.ids) > 5000:
                old = self.ids.pop(0)
                self.idset.discard(old)
        self.max_id = max(self.max_id, i)

    def some_id(self, g):
        if not self.ids:
            return 1
        if g.chance(0.6):
            return self.ids[-1 - g.r.randrange(min(len(self.ids), 200))]
        return g.pick(self.ids)

    def claim_ids(self, g):
        ids = list(self.claims)
        g.r.shuffle(ids)
        return ids[: g.r.randrange(0, 6)]

    def name_pool_value(self, g):
        return g.pick(self.QUEUES + self.WORKERS + self.FSMS + self.STEPS + self.SIGNALS
                      + self.CORR + self.CONC + self.RATE + self.GATES + self.RATES)


# --------------------------------------------------------------------------
class Violation(Exception):
    pass


class Fuzzer:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.r = random.Random(self.seed)
        self.m = Model()
        self.g = Gen(self.r, self.m)
        self.calls = collections.Counter()          # per function
        self.call_errors = collections.Counter()    # per function
        self.states = collections.Counter()         # per sqlstate
        self.distinct = {}                          # (sqlstate, prefix) -> [count, example]
        self.notices = collections.Counter()
        self.violations = []                        # (kind, text)
        self.violation_kinds = collections.Counter()
        self.violation_sigs = collections.Counter()
        self.applied = collections.Counter()        # flush outcomes by applied/detail
        self.answers = collections.Counter()        # signal answers etc.
        self.ncall = 0
        self.in_txn = False
        self.txn_failed = False
        self.pending = []
        self.reconnects = 0
        self.aux_reconnects = 0
        self.invariant_runs = 0
        self.t0 = time.time()
        self.conn = None
        self.aux = None
        self.retention = args.retention
        self.last_error = None
        self.minimizing = False
        self.maint_errors = 0

    # ---------------------------------------------------------------- output
    def log(self, *a):
        print(*a, flush=True)

    def violation(self, kind, text, sig=None):
        """Count a violation; print the first --max-reports of each kind and
        signature (for errors: function, SQLSTATE and message prefix)."""
        self.violation_kinds[kind] += 1
        self.violation_sigs[(kind, sig)] += 1
        if self.violation_sigs[(kind, sig)] <= self.args.max_reports:
            self.violations.append((kind, text))
            self.log("VIOLATION [%s] %s" % (kind, text))

    # ---------------------------------------------------------------- connections
    def connect(self, app):
        conn = psycopg.connect(host=self.args.host, port=self.args.port, user=self.args.user,
                               dbname=self.args.dbname, autocommit=True, prepare_threshold=None,
                               application_name=app, connect_timeout=10)
        conn.add_notice_handler(self.on_notice)
        set_json_loads(safe_json_loads, conn)
        conn.execute("SET statement_timeout = %s" % int(self.args.statement_timeout * 1000))
        conn.execute("SET lock_timeout = %s" % int(self.args.statement_timeout * 1000))
        # log_parameter_max_length_on_error = 0: the error context names the
        # parameter without repeating 1 MB values
        return conn

    def on_notice(self, diag):
        if self.minimizing:
            return
        msg = diag.message_primary or ""
        self.notices[(diag.severity or "?", self.prefix(msg))] += 1
        if not msg.strip():
            self.violation("empty_notice", "a %s with an empty message" % diag.severity)

    def server_identity(self, conn):
        """The backend's pid, and what changes when the server restarts: the
        postmaster's start time, and (a crash restart keeps the postmaster)
        the reset time of the shared statistics, which crash recovery
        discards."""
        row = conn.execute("SELECT pg_backend_pid(), pg_postmaster_start_time(), "
                           "(SELECT stats_reset FROM pg_stat_bgwriter)").fetchone()
        return row[0], (row[1], row[2])

    def setup(self):
        admin = psycopg.connect(host=self.args.host, port=self.args.port, user=self.args.user,
                                dbname="postgres", autocommit=True)
        if self.args.dbname != "postgres":
            exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                   (self.args.dbname,)).fetchone()
            if exists and not self.args.reuse_db:
                admin.execute('DROP DATABASE "%s"' % self.args.dbname.replace('"', '""'))
                exists = None
            if not exists:
                admin.execute('CREATE DATABASE "%s"' % self.args.dbname.replace('"', '""'))
        if not self.args.no_configure:
            settings = {
                "gen_durable.max_wait": "'%dms'" % self.args.max_wait_ms,
                "gen_durable.retention": "'%ds'" % self.retention,
                "gen_durable.maintenance_worker": "on" if self.args.bgworker else "off",
                "log_line_prefix": "'%m [%p] %e %a '",
                "log_parameter_max_length_on_error": "0",
            }
            for k, v in settings.items():
                admin.execute("ALTER SYSTEM SET %s = %s" % (k, v))
            admin.execute("SELECT pg_reload_conf()")
            time.sleep(0.3)
        admin.close()
        self.conn = self.connect("fuzz-main")
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS gen_durable")
        got = self.conn.execute("SHOW gen_durable.retention").fetchone()[0]
        self.pid, self.start_time = self.server_identity(self.conn)
        self.aux = self.connect("fuzz-aux")
        self.m.max_depth = self.probe_depth()
        self.log("connected: backend pid %d, postmaster started %s, retention %s, JSON nesting "
                 "parsed up to %d levels" % (self.pid, self.start_time[0], got, self.m.max_depth))

    def probe_depth(self):
        """The deepest array nesting a jsonb argument may have (stack depth)."""
        lo, hi = 100, 400000
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                self.conn.execute("SELECT %s::jsonb IS NULL", ["[" * mid + "]" * mid])
                lo = mid
            except psycopg.Error:
                hi = mid
        return lo

    def reconnect_main(self, why):
        self.reconnects += 1
        try:
            if self.conn is not None:
                self.conn.close()
        except Exception:
            pass
        for attempt in range(30):
            try:
                self.conn = self.connect("fuzz-main")
                break
            except psycopg.Error:
                time.sleep(1)
        else:
            raise SystemExit("fuzz.py: cannot reconnect to the server (%s)" % why)
        pid, start = self.server_identity(self.conn)
        if start != self.start_time:
            self.violation("server_restart", "the server restarted (postmaster start, stats reset: "
                           "%s -> %s) after %s" % (fmt_pair(self.start_time), fmt_pair(start), why))
            self.start_time = start
        self.pid = pid
        self.in_txn = False
        self.pending = []

    def check_alive(self, where):
        try:
            pid, start = self.server_identity(self.conn)
        except psycopg.Error as e:
            self.violation("connection_lost", "liveness check %s failed: %s" % (where, e))
            self.reconnect_main("a failed liveness check")
            return
        if start != self.start_time:
            self.violation("server_restart", "the server restarted (postmaster start, stats reset: "
                           "%s -> %s) (%s)" % (fmt_pair(self.start_time), fmt_pair(start), where))
            self.start_time = start
        if pid != self.pid:
            self.violation("backend_changed", "backend pid changed %d -> %d without a reconnect (%s)"
                           % (self.pid, pid, where))
            self.pid = pid

    # ---------------------------------------------------------------- errors
    @staticmethod
    def prefix(msg):
        msg = re.sub(r'"([^"]*)"', lambda m: m.group(0) if m.group(1) in KNOWN_NAMES else '"…"',
                     msg or "")
        msg = re.sub(r"\d+", "N", msg)
        return msg[:96]

    def record_error(self, fn, e, sql, params, risky, conn):
        """Classify one error; returns True when it is a connection loss."""
        state = e.sqlstate
        diag = e.diag
        msg = diag.message_primary or ""
        src = diag.source_file or ""
        ctx = diag.context or ""
        self.call_errors[fn] += 1
        self.last_error = (state, msg)
        if state is None:
            # no SQLSTATE: the connection or the protocol failed
            broken = conn.broken or conn.closed
            self.violation("connection_lost" if broken else "client_error",
                           "%s: %s: %s\n    repro: %s" % (fn, type(e).__name__, short(str(e), 300),
                                                         self.repro(sql, params)))
            return broken
        self.states[state] += 1
        key = (state, self.prefix(msg))
        if key not in self.distinct:
            self.distinct[key] = [0, fn, short(self.repro(sql, params), 600), src]
        self.distinct[key][0] += 1
        want = ("error", state, self.prefix(msg))
        sig = (fn, state, self.prefix(msg))

        def repro(kind):
            return self.min_repro(kind, sql, params, want, conn, sig)
        if state in INTERNAL_STATES:
            self.violation("internal_error", "%s %s: %s (%s:%s)\n    repro: %s"
                           % (state, fn, short(msg, 300), src, diag.source_line,
                              repro("internal_error")), sig)
        if not msg.strip():
            self.violation("empty_message", "%s %s with an empty message\n    repro: %s"
                           % (state, fn, repro("empty_message")), sig)
        if "\ufffd" in msg or "\ufffd" in (diag.message_detail or "") or "\ufffd" in (diag.message_hint or ""):
            self.violation("invalid_utf8_message", "%s %s: the message has bytes that are not "
                           "UTF-8: %s (%s:%s)\n    repro: %s"
                           % (state, fn, short(msg, 200), src, diag.source_line,
                              repro("invalid_utf8_message")), sig)
        if state == "57014":
            self.violation("statement_timeout", "%s ran into statement_timeout (%ss)\n    repro: %s"
                           % (fn, self.args.statement_timeout, short(self.repro(sql, params), 600)), sig)
        in_parameter = "portal parameter" in ctx or ("parameter $" in ctx and "SQL statement" not in ctx)
        engine = src in ENGINE_FILES
        if in_parameter:
            # PostgreSQL refused a literal while binding it: not gen_durable's
            # doing (the driver sends such literals on purpose)
            if not risky:
                self.answers["unexpected input refusal %s" % state] += 1
            return False
        if state == "25P02":
            return False
        about_argument = state[:2] in ARG_STATE_CLASSES or state in ARG_STATES
        if about_argument:
            names = ARGNAMES.get(fn, [])
            if names and not any(re.search(r"(?<![A-Za-z_])%s(?![A-Za-z_])" % re.escape(n), msg)
                                 for n in names):
                where = "gen_durable (%s:%s)" % (src, diag.source_line) if engine else \
                    "PostgreSQL (%s:%s, %s)" % (src, diag.source_line,
                                                "inside a gen_durable statement" if "SQL statement" in ctx
                                                else "called from gen_durable")
                self.violation("unhelpful_message",
                               "%s %s: \"%s\" names no argument of %s; raised by %s\n    repro: %s"
                               % (state, fn, short(msg, 200), fn, where, repro("unhelpful_message")), sig)
        return False

    def repro(self, sql, params):
        out = sql
        if params:
            parts = out.split("%s")
            lit = [sql_literal(p) for p in params]
            out = "".join(a + (lit[i] if i < len(lit) else "") for i, a in enumerate(parts))
        return out.replace("%%", "%")

    # ---------------------------------------------------------------- minimal repros
    def reproduces(self, sql, params, want):
        """Whether a call still shows the same problem, run in a transaction
        that is rolled back (so it changes nothing)."""
        conn = self.conn
        self.minimizing = True
        ok = False
        try:
            conn.execute("BEGIN")
            try:
                cur = conn.execute(sql, list(params) if params else None)
                if cur.description is not None:
                    cur.fetchall()
            except UnicodeDecodeError:
                ok = want[0] == "utf8"
            except psycopg.Error as e:
                ok = (want[0] == "error" and e.sqlstate == want[1]
                      and self.prefix(e.diag.message_primary) == want[2])
        finally:
            self.minimizing = False
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                if conn.broken:
                    self.reconnect_main("a lost connection while minimizing a repro")
        return ok

    def min_repro(self, kind, sql, params, want, conn, sig=None):
        """The call, made smaller while it still shows the problem (for the
        reports that are printed): the elements of a JSON array argument,
        the keys of a JSON object, the optional named arguments."""
        full = self.repro(sql, params)
        if (self.violation_sigs[(kind, sig)] >= self.args.max_reports or self.in_txn
                or conn is not self.conn or self.args.no_minimize or not params):
            return short(full, 600)
        params = list(params)
        budget = [60]

        def try_(s, p):
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            return self.reproduces(s, p, want)

        try:
            if not try_(sql, params):
                return short(full, 600) + "  (does not reproduce alone: depends on state)"
            # 1. JSON arguments: fewer elements, fewer keys
            for i, p in enumerate(params):
                if p is None or not p[:1] in "[{" or len(p) > 3000000:
                    continue
                try:
                    v = json.loads(p, parse_float=Raw, parse_int=Raw,
                                   object_pairs_hook=lambda pairs: DupObj(list(pairs)))
                except (ValueError, RecursionError):
                    continue
                if isinstance(v, list):
                    while len(v) > 1:
                        k = min(len(v), 8)
                        size = (len(v) + k - 1) // k
                        for c in range(0, len(v), size):
                            cand = v[c:c + size]
                            if try_(sql, params[:i] + [J(cand)] + params[i + 1:]):
                                v = cand
                                break
                        else:
                            break
                    params[i] = J(v)
                    elems = v if len(v) == 1 else []
                else:
                    elems = []
                for el in elems + ([v] if isinstance(v, DupObj) else []):
                    if not isinstance(el, DupObj):
                        continue
                    for pair in list(el.pairs):
                        if pair[0] in ("id", "worker", "kind", "fsm"):
                            continue
                        pos = el.pairs.index(pair)
                        el.pairs.remove(pair)
                        if try_(sql, params[:i] + [J(v)] + params[i + 1:]):
                            continue
                        # keep the key, but try a plain value
                        el.pairs.insert(pos, (pair[0], 0))
                        if not try_(sql, params[:i] + [J(v)] + params[i + 1:]):
                            el.pairs[pos] = pair
                    params[i] = J(v)
            # 2. named arguments that do not matter
            m = re.match(r"^(.*?gen_durable\.\w+\()(.*)(\).*)$", sql, re.S)
            if m and "=>" in m.group(2):
                args = m.group(2).split(", ")
                j = 0
                while j < len(args) and len(args) == len(params):
                    s2 = m.group(1) + ", ".join(args[:j] + args[j + 1:]) + m.group(3)
                    p2 = params[:j] + params[j + 1:]
                    if try_(s2, p2):
                        args, params, sql = args[:j] + args[j + 1:], p2, s2
                    else:
                        j += 1
        except Exception as e:       # never let the minimizer stop the run
            return short(full, 600) + "  (minimizing failed: %s)" % e
        return short(self.repro(sql, params), 1200)

    # ---------------------------------------------------------------- calls
    def run(self, fn, sql, params=(), risky=False, conn=None, fetch=True):
        """Run one call; returns the rows, or None after an error."""
        conn = conn or self.conn
        self.calls[fn] += 1
        self.ncall += 1
        if self.args.trace:
            self.log("#%d %s" % (self.ncall, short(self.repro(sql, params), 400)))
        if self.in_txn and self.txn_failed and conn is self.conn:
            # still sent: PostgreSQL must refuse it with 25P02
            pass
        try:
            cur = conn.execute(sql, list(params) if params else None)
            rows = cur.fetchall() if fetch and cur.description is not None else []
            return rows
        except UnicodeDecodeError as e:
            self.violation("invalid_utf8_result", "%s returned text that is not UTF-8: %s\n"
                           "    repro: %s" % (fn, e, self.min_repro("invalid_utf8_result", sql, params,
                                                                 ("utf8",), conn, fn)), fn)
            return None
        except psycopg.Error as e:
            if conn is self.conn and self.in_txn:
                self.txn_failed = True
            lost = self.record_error(fn, e, sql, params, risky, conn)
            if lost:
                if conn is self.aux:
                    self.aux = self.connect("fuzz-aux")
                    self.aux_reconnects += 1
                else:
                    self.reconnect_main("the connection was lost in %s" % fn)
            return None

    def commit_model(self, fn):
        """Apply a model update now, or at COMMIT inside a transaction."""
        if self.in_txn:
            self.pending.append(fn)
        else:
            fn()

    # ---------------------------------------------------------------- valid values
    def valid_state(self):
        g = self.g
        c = g.r.random()
        if c < 0.01 and self.m.max_depth:
            # an object nested just inside what the server parses
            return g.deep(self.m.max_depth - 3 - g.r.randrange(600), "object")
        if c < 0.5:
            return {"n": g.r.randrange(100)}
        if c < 0.7:
            return {}
        if c < 0.8:
            return {"nested": {"a": [1, 2, {"b": None}]}, "s": g.pick(ODD_UNICODE)}
        if c < 0.85:
            return {"big": "b" * g.pick([1000, 100000])}
        return {"k%d" % i: i for i in range(g.r.randrange(1, 20))}

    def valid_spec(self, for_child=False):
        g = self.g
        m = self.m
        spec = {"fsm": g.pick(m.FSMS)}
        if g.chance(0.5):
            spec["state"] = self.valid_state()
        if g.chance(0.3):
            spec["step"] = g.pick(m.STEPS)
        if g.chance(0.6):
            spec["queue"] = g.pick(m.QUEUES)
        if g.chance(0.2):
            spec["priority"] = g.r.randrange(-3, 4)
        if g.chance(0.1):
            spec["delay"] = g.pick([0, 0.05, "1 s", "PT0.2S", "1 hour"])
        elif g.chance(0.05):
            spec["run_at"] = g.pick(["2000-01-01 00:00:00+00", "infinity", "epoch", "-infinity"])
        if g.chance(0.3):
            spec["correlation_key"] = g.pick(m.CORR)
            if g.chance(0.3):
                spec["correlation_scope"] = g.pick([
                    [], ["runnable", "executing", "awaiting_signal", "awaiting_children"],
                    ["runnable", "executing", "awaiting_signal", "awaiting_children", "done"],
                    None])
        if g.chance(0.35):
            spec["concurrency_key"] = g.pick(m.CONC)
        if g.chance(0.25):
            spec["rate_limit"] = g.pick(m.RATE)
            if g.chance(0.5):
                spec["weight"] = g.pick([0.5, 1, 2, 3.5, 1000])
        if g.chance(0.3):
            spec["max_attempts"] = g.pick([1, 2, 3, 20])
        if g.chance(0.15):
            spec["max_steps"] = g.pick([1, 2, 5])
        if g.chance(0.2):
            spec["metadata"] = {"tenant": g.r.randrange(5), "tag": g.pick(m.FSMS)}
        if g.chance(0.05):
            spec["fsm_version"] = g.pick([1, 2, -1, 2147483647])
        if g.chance(0.15):
            spec["history"] = g.pick([True, False, None])
        return spec

    def hostile_spec(self):
        spec = self.valid_spec()
        self.mutate(spec, SPEC_KEYS)
        return spec

    def mutate(self, obj, keys):
        """Damage a JSON object in place (one to three mutations)."""
        g = self.g
        for _ in range(g.r.randrange(1, 4)):
            c = g.r.random()
            if c < 0.2 and obj:
                del obj[g.pick(list(obj))]
            elif c < 0.35:
                obj[g.hostile_key()] = g.hostile_json()
            elif c < 0.85:
                obj[g.pick(keys)] = g.hostile_json()
            elif c < 0.92:
                obj["id"] = g.pick(["1", 1.0, 1.5, Raw("1e30"), -1, 0, 9223372036854775807,
                                    Raw("9223372036854775808"), None, True, [1], {"id": 1},
                                    Raw("12.000"), Raw("1E1"), self.m.max_id + 5])
            else:
                obj["kind"] = g.pick(["NEXT", "", "\u20ac" * 30, "e\u0301" * 40, None, 1,
                                      "done ", "don", "spawn", "await", "x" * 2000, ["done"]])

    def valid_outcome(self, oid, worker, kind=None):
        g = self.g
        m = self.m
        kind = kind or g.pick(["next", "next", "next", "retry", "await", "await", "spawn",
                               "done", "done", "done", "fail"])
        o = {"id": oid, "worker": worker, "kind": kind}
        if oid in m.claim_no and g.chance(0.7):
            # the claim fence: mostly the claim picked, sometimes an earlier or later one
            o["claim"] = m.claim_no[oid] + g.pick([0, 0, 0, 0, 0, 0, -1, 1])
        if kind in ("next", "await", "spawn"):
            o["step"] = g.pick(m.STEPS)
        if kind in ("next", "retry", "await", "spawn") and g.chance(0.4):
            o["state"] = self.valid_state()
        if kind == "next":
            if g.chance(0.2):
                o["rate_limit"] = g.pick(m.RATE + [None])
            if g.chance(0.15):
                o["weight"] = g.pick([0.5, 1, 2, 100])
            if g.chance(0.25):
                o["concurrency_key"] = g.pick(m.CONC + [None])
            if g.chance(0.05):
                o["fsm_version"] = g.pick([1, 2, 7])
            if g.chance(0.35):
                o["continue"] = True
                if g.chance(0.3):
                    o["lease"] = g.pick([30, "1 minute", 0.001, "PT1S"])
        elif kind == "retry":
            if g.chance(0.5):
                o["delay"] = g.pick([0, 0.01, "1 s", "10 min", "PT0S"])
            if g.chance(0.5):
                o["error"] = g.pick([{"message": "boom"}, "text error", None, [1, 2], 42])
                if g.chance(0.03) and m.max_depth:
                    o["error"] = g.deep(m.max_depth - 3 - g.r.randrange(600))
        elif kind == "await":
            o["names"] = g.r.sample(m.SIGNALS, g.r.randrange(1, 3))
            if g.chance(0.5):
                o["timeout"] = g.pick([0.05, "1 hour", None, "10 ms", 3600])
        elif kind == "spawn":
            o["children"] = [self.valid_spec(True) for _ in range(g.pick([0, 1, 1, 2, 3, 5]))]
            if g.chance(0.4):
                o["join"] = g.pick(["all", "first_error"])
        elif kind == "done":
            if g.chance(0.6):
                o["result"] = g.pick([{"ok": True}, {}, None, "fine", [1], 3])
        elif kind == "fail":
            if g.chance(0.6):
                o["error"] = g.pick([{"message": "bad"}, None, "err", {"reason": "x"}])
        return o

    # ---------------------------------------------------------------- model updates from results
    def note_jobs(self, rows, worker):
        for row in rows or []:
            jid = row[0]

            def upd(jid=jid, claim=row[5]):
                self.m.add_id(jid)
                self.m.claims[jid] = worker
                self.m.claim_no[jid] = claim
            self.commit_model(upd)

    def note_flush(self, rows, entries):
        if rows is None:
            return
        for i, row in enumerate(rows):
            oid, applied, detail, job = row
            self.applied["%s/%s" % (applied, detail if detail is None else self.prefix(detail))] += 1
            if oid is None:
                continue

            def upd(oid=oid, applied=applied, job=job):
                if applied == "invalid":
                    return
                if applied == "ok" and job is not None:
                    return  # continue: still claimed
                self.m.claims.pop(oid, None)
            self.commit_model(upd)
            if isinstance(job, dict) and job.get("children"):
                for c in job["children"]:
                    if isinstance(c, dict) and c.get("id"):
                        self.m.add_id(c["id"])

    # ---------------------------------------------------------------- operations
    # each returns nothing; self.run records everything

    def op_insert_valid(self):
        s = self.valid_spec()
        args = []
        params = []
        for k, cast in (("fsm", "text"), ("state", "jsonb"), ("step", "text"), ("queue", "text"),
                        ("priority", "int"), ("run_at", "timestamptz"), ("delay", "interval"),
                        ("correlation_key", "text"), ("correlation_scope", "gen_durable.status[]"),
                        ("concurrency_key", "text"), ("rate_limit", "text"), ("weight", "float8"),
                        ("max_attempts", "int"), ("max_steps", "int"), ("metadata", "jsonb"),
                        ("fsm_version", "int"), ("history", "boolean"), ("on_conflict", "text")):
            if k == "on_conflict" and s.get("correlation_key") and self.g.chance(0.3):
                s[k] = "replace"
            if k not in s or s[k] is None:
                continue
            v = s[k]
            if cast == "jsonb":
                v = J(v)
            elif cast == "gen_durable.status[]":
                v = "{" + ",".join(v) + "}"
            elif k == "delay":
                v = "%s seconds" % v if isinstance(v, (int, float)) else v
            args.append("%s => %%s::%s" % (k, cast))
            params.append(str(v))
        rows = self.run("insert", "SELECT gen_durable.insert(%s)" % ", ".join(args), params)
        if rows:
            self.commit_model(lambda: self.m.add_id(rows[0][0]))

    def op_insert_hostile(self):
        sig = [("fsm", "text"), ("state", "jsonb"), ("step", "text"), ("queue", "text"),
               ("priority", "int"), ("run_at", "timestamptz"), ("delay", "interval"),
               ("correlation_key", "text"), ("correlation_scope", "gen_durable.status[]"),
               ("concurrency_key", "text"), ("rate_limit", "text"), ("weight", "float8"),
               ("max_attempts", "int"), ("max_steps", "int"), ("metadata", "jsonb"),
               ("fsm_version", "int"), ("on_conflict", "text"), ("history", "boolean")]
        args, params, risky = self.hostile_args(sig, required=1)
        names = [a.split(" ")[0] for a in args]
        if "run_at" in names and "delay" in names and self.g.chance(0.8):
            # both are refused at once: mostly keep one, to reach what follows
            k = names.index(self.g.pick(["run_at", "delay"]))
            del args[k], params[k]
        rows = self.run("insert", "SELECT gen_durable.insert(%s)" % ", ".join(args), params, risky)
        if rows and rows[0][0] is not None:
            self.commit_model(lambda: self.m.add_id(rows[0][0]))

    def hostile_args(self, sig, required=0, p_hostile=0.35, positional=False):
        """Arguments for a call: each either omitted (optional ones), valid
        or hostile.  Returns (arg sql list, params, risky)."""
        g = self.g
        args, params = [], []
        risky = False
        for i, (name, cast) in enumerate(sig):
            if i >= required and g.chance(0.35) and not positional:
                continue
            if g.chance(p_hostile):
                v, rk = self.hostile_value(cast)
                risky |= rk
            else:
                v = self.valid_value(name, cast)
            args.append(("%%s::%s" % cast) if positional else ("%s => %%s::%s" % (name, cast)))
            params.append(v)
        return args, params, risky

    def hostile_value(self, cast):
        g = self.g
        if cast == "text":
            return g.hostile_text(), False
        if cast == "int":
            return g.hostile_int()
        if cast == "bigint":
            return g.hostile_bigint()
        if cast == "float8":
            return g.hostile_float()
        if cast == "interval":
            return g.hostile_interval()
        if cast == "timestamptz":
            return g.hostile_timestamptz()
        if cast == "jsonb":
            return g.hostile_jsonb_arg()
        if cast == "text[]":
            return g.hostile_text_array()
        if cast == "bigint[]":
            return g.hostile_bigint_array()
        if cast == "gen_durable.status[]":
            return g.hostile_status_array()
        if cast == "boolean":
            v = g.pick([None, "maybe", "", "2", "t", "yes", "off"])
            return v, v not in (None, "t", "yes", "off")
        raise ValueError(cast)

    def valid_value(self, name, cast):
        g = self.g
        m = self.m
        table = {
            "fsm": lambda: g.pick(m.FSMS), "step": lambda: g.pick(m.STEPS),
            "queue": lambda: g.pick(m.QUEUES), "worker": lambda: g.pick(m.WORKERS),
            "correlation_key": lambda: g.pick(m.CORR), "concurrency_key": lambda: g.pick(m.CONC),
            "rate_limit": lambda: g.pick(m.RATE), "reason": lambda: g.pick(["why", "\u20ac"]),
            "dedup_key": lambda: g.pick(["d1", "d2", "d3"]), "until": lambda: g.pick(["settled", "terminal"]),
            "kind": lambda: g.pick(["rate", "conc"]),
            "name": lambda: g.pick(m.SIGNALS),
            "on_conflict": lambda: g.pick(["nothing", "replace"]),
        }
        if name in table:
            return table[name]()
        if cast == "jsonb":
            return J(self.valid_state())
        if cast == "int":
            return str(g.pick([0, 1, 2, 3, 5, 10]))
        if cast == "bigint":
            return str(m.some_id(g))
        if cast == "float8":
            return str(g.pick([0.5, 1, 2]))
        if cast == "interval":
            return g.pick(["0", "10 ms", "30 s", "1 minute"])
        if cast == "timestamptz":
            return g.pick(["2000-01-01 00:00:00+00", "now"])
        if cast == "text[]":
            return "{" + ",".join(g.r.sample(m.FSMS[:3], 2)) + "}"
        if cast == "bigint[]":
            return "{" + ",".join(str(i) for i in m.claim_ids(g)) + "}"
        if cast == "gen_durable.status[]":
            return "{runnable,executing,awaiting_signal,awaiting_children}"
        if cast == "boolean":
            return g.pick(["true", "false"])
        return "x"

    def op_insert_many(self, hostile):
        g = self.g
        risky = False
        c = g.r.random()
        if hostile and c < 0.25:
            text, risky = g.hostile_jsonb_arg()
        else:
            n = g.pick([0, 1, 2, 3, 5, 10, 20]) if g.chance(0.97) else \
                g.pick([200, 1000, 1000, 1000, 10000, 10001, 10001, 10001])
            specs = []
            for i in range(n):
                if hostile and g.chance(0.3 if n < 50 else 0.001):
                    specs.append(self.hostile_spec() if g.chance(0.85) else g.hostile_json())
                else:
                    specs.append(self.valid_spec())
            if n > 1 and g.chance(0.2) and isinstance(specs[0], dict):
                specs.append(dict(specs[0]))      # a duplicate correlation key, maybe
            text = J(specs)
        rows = self.run("insert_many", "SELECT ord, id, created FROM gen_durable.insert_many(%s::jsonb)",
                        [text], risky)
        if rows:
            ids = [r[1] for r in rows if r[1] is not None]

            def upd():
                for i in ids:
                    self.m.add_id(i)
            self.commit_model(upd)

    def op_pick(self, hostile, conn=None, worker=None):
        g = self.g
        m = self.m
        if hostile:
            sig = [("queue", "text"), ("worker", "text"), ("batch", "int"), ("lease", "interval"),
                   ("wait", "interval"), ("fsms", "text[]")]
            args, params, risky = self.hostile_args(sig, required=2)
            worker = None
            for a, p in zip(args, params):
                if a.startswith("worker"):
                    worker = p
        else:
            worker = worker or g.pick(m.WORKERS)
            args = ["queue => %s::text", "worker => %s::text", "batch => %s::int"]
            params = [g.pick(m.QUEUES), worker, str(g.pick([1, 1, 2, 5, 10, 20]))]
            if g.chance(0.3):
                args.append("lease => %s::interval")
                params.append(g.pick(["1 microsecond", "50 ms", "2 s", "30 s", "1 hour"]))
            if g.chance(0.1):
                args.append("wait => %s::interval")
                params.append(g.pick(["10 ms", "1 hour"]))
            if g.chance(0.1):
                args.append("fsms => %s::text[]")
                params.append("{" + ",".join(J(x) for x in g.r.sample(m.FSMS, 2)) + "}")
            risky = False
        rows = self.run("pick", "SELECT id, step, attempt, awaited, children, claim FROM gen_durable.pick(%s)"
                        % ", ".join(args), params, risky, conn=conn)
        if rows and worker is not None:
            self.note_jobs(rows, worker)
            for row in rows:
                for c in row[4] or []:
                    if isinstance(c, dict) and c.get("id"):
                        self.m.add_id(c["id"])

    def op_flush(self, hostile, conn=None):
        g = self.g
        m = self.m
        risky = False
        if hostile and g.chance(0.12):
            text, risky = g.hostile_jsonb_arg()
            entries = None
        else:
            claims = list(m.claims.items())
            g.r.shuffle(claims)
            n = g.pick([0, 1, 1, 1, 2, 3, 5, 8]) if g.chance(0.98) else g.pick([200, 10000, 10001])
            entries = []
            for i in range(n):
                if claims and (i < len(claims)) and g.chance(0.85):
                    oid, worker = claims[i]
                    if g.chance(0.08):
                        worker = g.pick(m.WORKERS + ["aux"])   # another worker's claim
                elif g.chance(0.5) and m.ids:
                    oid, worker = m.some_id(g), g.pick(m.WORKERS)
                else:
                    oid, worker = g.pick([m.max_id + 7, 0, 1]), g.pick(m.WORKERS)
                o = self.valid_outcome(oid, worker)
                if hostile and g.chance(0.35 if n < 50 else 0.002):
                    if g.chance(0.9):
                        self.mutate(o, OUTCOME_KEYS[o["kind"]] if o.get("kind") in OUTCOME_KEYS
                                    else ALL_OUTCOME_KEYS)
                        if o.get("kind") == "spawn" and g.chance(0.3):
                            o["children"] = g.pick([
                                [1], ["x"], [None], [[]], [self.hostile_spec()],
                                [self.hostile_spec(), self.valid_spec()],
                                [{"fsm": "a", "run_at": g.pick(["garbage", "294277-01-01",
                                                                "infinity", ""])}],
                                [{"fsm": "a", "delay": g.pick(["1000000 years", -1, "garbage"])}],
                                [self.valid_spec() for _ in range(g.pick([100, 10001]))]])
                    else:
                        o = g.hostile_json()
                entries.append(o)
            if entries and g.chance(0.08):
                entries.append(dict(entries[0]) if isinstance(entries[0], dict) else entries[0])
            text = J(entries)
        rows = self.run("flush", "SELECT id, applied, detail, job FROM gen_durable.flush(%s::jsonb)",
                        [text], risky, conn=conn)
        self.note_flush(rows, entries)

    def op_signal(self, hostile):
        g = self.g
        m = self.m
        by_key = g.chance(0.35)
        fn = "signal_key" if by_key else "signal"
        if hostile:
            sig = [("target", "text" if by_key else "bigint"), ("name", "text"), ("payload", "jsonb"),
                   ("dedup_key", "text")]
            args, params, risky = self.hostile_args(sig, required=2)
        else:
            args = ["target => %s::text" if by_key else "target => %s::bigint", "name => %s::text"]
            params = [g.pick(m.CORR) if by_key else str(m.some_id(g)), g.pick(m.SIGNALS)]
            if g.chance(0.5):
                args.append("payload => %s::jsonb")
                params.append(J(g.pick([{"amount": 12}, [], None, "s", {"big": "p" * 5000}])))
            if g.chance(0.4):
                args.append("dedup_key => %s::text")
                params.append(g.pick(["d1", "d2", "d3"]))
            risky = False
        rows = self.run(fn, "SELECT gen_durable.signal(%s)" % ", ".join(args), params, risky)
        if rows:
            self.answers["signal:%s" % rows[0][0]] += 1

    def op_simple(self, fn, sig, required, sql, hostile):
        if hostile:
            args, params, risky = self.hostile_args(sig, required=required)
        else:
            args, params, risky = self.hostile_args(sig, required=required, p_hostile=0)
        return self.run(fn, sql % ", ".join(args), params, risky)

    def op_cancel(self, hostile):
        rows = self.op_simple("cancel", [("id", "bigint"), ("reason", "text")], 1,
                              "SELECT gen_durable.cancel(%s)", hostile)
        if rows:
            self.answers["cancel:%s" % min(rows[0][0], 2)] += 1

    def op_fail(self, hostile):
        rows = self.op_simple("fail", [("id", "bigint"), ("reason", "text")], 1,
                              "SELECT gen_durable.fail(%s)", hostile)
        if rows:
            self.answers["fail:%s" % rows[0][0]] += 1

    def op_retry(self, hostile):
        rows = self.op_simple("retry", [("id", "bigint"), ("step", "text")], 1,
                              "SELECT gen_durable.retry(%s)", hostile)
        if rows:
            self.answers["retry:%s" % rows[0][0]] += 1

    def op_find(self, hostile):
        self.op_simple("find", [("metadata", "jsonb")], 1,
                       "SELECT count(*) FROM gen_durable.find(%s)", hostile)

    def op_heartbeat(self, hostile):
        g = self.g
        if hostile:
            rows = self.op_simple("heartbeat", [("worker", "text"), ("ids", "bigint[]"),
                                                ("lease", "interval")], 2,
                                  "SELECT gen_durable.heartbeat(%s)", True)
            return
        worker = g.pick(self.m.WORKERS)
        ids = [i for i, w in self.m.claims.items() if w == worker] + \
            ([self.m.some_id(g)] if g.chance(0.3) and self.m.ids else [])
        args = ["worker => %s::text", "ids => %s::bigint[]"]
        params = [worker, "{" + ",".join(str(i) for i in ids) + "}"]
        if g.chance(0.4):
            args.append("lease => %s::interval")
            params.append(g.pick(["1 microsecond", "1 s", "1 minute"]))
        rows = self.run("heartbeat", "SELECT gen_durable.heartbeat(%s)" % ", ".join(args), params)
        if rows:
            held = set(rows[0][0] or [])

            def upd():
                for i in ids:
                    if i not in held and self.m.claims.get(i) == worker:
                        self.m.claims.pop(i, None)
            self.commit_model(upd)

    def op_release(self, hostile):
        g = self.g
        if hostile:
            self.op_simple("release", [("worker", "text"), ("ids", "bigint[]")], 1,
                           "SELECT gen_durable.release(%s)", True)
            return
        worker = g.pick(self.m.WORKERS)
        mine = [i for i, w in self.m.claims.items() if w == worker]
        if g.chance(0.5):
            rows = self.run("release", "SELECT gen_durable.release(%s::text)", [worker])
            gone = mine
        else:
            part = mine[: max(1, len(mine) // 2)]
            rows = self.run("release", "SELECT gen_durable.release(%s::text, %s::bigint[])",
                            [worker, "{" + ",".join(str(i) for i in part) + "}"])
            gone = part
        if rows:
            def upd():
                for i in gone:
                    self.m.claims.pop(i, None)
            self.commit_model(upd)

    def op_admit(self, hostile):
        g = self.g
        if hostile:
            self.op_simple("admit", [("ids", "bigint[]"), ("worker", "text")], 2,
                           "SELECT * FROM gen_durable.admit(%s)", True)
            return
        worker = g.pick(self.m.WORKERS)
        ids = [i for i, w in self.m.claims.items() if w == worker][:5]
        if g.chance(0.3):
            ids += ids[:1]
        self.run("admit", "SELECT * FROM gen_durable.admit(%s::bigint[], %s::text)",
                 ["{" + ",".join(str(i) for i in ids) + "}", worker])

    def op_await(self, hostile):
        g = self.g
        if hostile:
            self.op_simple("await", [("id", "bigint"), ("timeout", "interval"), ("until", "text")], 1,
                           "SELECT * FROM gen_durable.await(%s)", True)
            return
        self.run("await", "SELECT * FROM gen_durable.await(%s::bigint, %s::interval, %s::text)",
                 [str(self.m.some_id(g)), g.pick(["0", "0", "20 ms"]), g.pick(["settled", "terminal"])])

    def op_set_rate_limit(self, hostile):
        g = self.g
        if hostile:
            self.op_simple("set_rate_limit", [("name", "text"), ("allowed", "float8"),
                                              ("per", "interval"), ("burst", "float8"),
                                              ("shards", "int")], 3,
                           "SELECT gen_durable.set_rate_limit(%s)", True)
            return
        params = [g.pick(self.m.RATES), str(g.pick([0.5, 5, 100, 1e6, 0])),
                  g.pick(["1 s", "1 minute", "10 ms", "1 hour"]),
                  g.pick([None, 1, 3, 10, 1000]), str(g.pick([1, 1, 2, 4, 1000]))]
        if params[1] == "0" and params[3] is None:
            params[3] = "5"
        params[3] = None if params[3] is None else str(params[3])
        self.run("set_rate_limit", "SELECT gen_durable.set_rate_limit(%s::text, %s::float8, "
                 "%s::interval, %s::float8, %s::int)", params)

    def op_set_concurrency_limit(self, hostile):
        g = self.g
        if hostile:
            args, params, risky = self.hostile_args([("name", "text"), ("max", "int"), ("shards", "int")], 2)
            name = params[0]
        else:
            name = g.pick(self.m.GATES)
            mx = g.pick([1, 1, 2, 3, 5])
            args = ["name => %s::text", "max => %s::int", "shards => %s::int"]
            params = [name, str(mx), str(g.r.randrange(1, min(mx, 4) + 1))]
            risky = False
        rows = self.run("set_concurrency_limit", "SELECT gen_durable.set_concurrency_limit(%s)"
                        % ", ".join(args), params, risky)
        if rows is not None and name is not None and not self.in_txn:
            ids = self.conn.execute(
                "SELECT id FROM gen_durable.instances WHERE status = 'executing' "
                "AND concurrency_name = %s", (name,)).fetchall()
            self.m.grandfathered[name] = {r[0] for r in ids}
            self.m.dropped.pop(name, None)

    def op_drop_limit(self, hostile):
        g = self.g
        if hostile:
            args, params, risky = self.hostile_args([("kind", "text"), ("name", "text")], 2)
            kind, name = params[0], params[1]
        else:
            kind = g.pick(["rate", "conc"])
            name = g.pick(self.m.GATES if kind == "conc" else self.m.RATES)
            args, params, risky = ["%s::text", "%s::text"], [kind, name], False
        rows = self.run("drop_limit", "SELECT gen_durable.drop_limit(%s)" % ", ".join(args),
                        params, risky)
        if rows is not None and kind == "conc" and name is not None and not self.in_txn:
            ids = self.conn.execute(
                "SELECT id FROM gen_durable.instances WHERE status = 'executing' "
                "AND concurrency_name = %s AND concurrency_shard IS NOT NULL", (name,)).fetchall()
            self.m.dropped[name] = self.m.dropped.get(name, set()) | {r[0] for r in ids}
            self.m.grandfathered.pop(name, None)

    def op_queue_control(self, hostile):
        """pause_queue, resume_queue and set_queue_history of a known queue, or
        hostile arguments."""
        g = self.g
        fn = g.pick(["pause_queue", "resume_queue", "resume_queue", "set_queue_history"])
        sig = [("queue", "text")] + ([("enabled", "boolean")] if fn == "set_queue_history" else [])
        if hostile:
            args, params, risky = self.hostile_args(sig, required=len(sig))
        else:
            args = ["%s::text"] + (["%s::boolean"] if len(sig) == 2 else [])
            params = [g.pick(self.m.QUEUES)] + ([g.pick(["true", "false"])] if len(sig) == 2 else [])
            risky = False
        rows = self.run(fn, "SELECT gen_durable.%s(%s)" % (fn, ", ".join(args)), params, risky)
        if rows:
            self.answers["%s:%s" % (fn, rows[0][0])] += 1

    # every-minute expressions weigh most, so that the sweep fires during a run
    CRONS = ["* * * * *", "* * * * *", "* * * * *", "*/2 * * * *", "0 * * * *", "@daily",
             "0 9 * * mon-fri", "0 0 29 2 *", "0 0 30 2 *", "61 * * * *", "* * * *", "@never",
             "*/0 * * * *", "1-2-3 * * * *", "0 0 1 jan,JUL sun", "5/7 1-23/2 * * *"]
    ZONES = ["UTC", "Europe/Paris", "America/New_York", "Nowhere", "", "+05:30"]

    def op_schedule(self, hostile):
        """schedule, unschedule and cron_next with known or hostile arguments;
        every-minute schedules make the sweep fire during the run."""
        g = self.g
        fn = g.pick(["schedule", "schedule", "unschedule", "cron_next"])
        if fn == "schedule":
            sig = [("name", "text"), ("cron", "text"), ("fsm", "text"), ("state", "jsonb"),
                   ("queue", "text"), ("step", "text"), ("time_zone", "text"),
                   ("missed", "text"), ("options", "jsonb")]
            required = 3
        elif fn == "unschedule":
            sig, required = [("name", "text")], 1
        else:
            sig, required = [("cron", "text"), ("after", "timestamptz"), ("time_zone", "text")], 1
        if hostile:
            args, params, risky = self.hostile_args(sig, required=required)
        else:
            args, params, risky = [], [], False
            for i, (name, cast) in enumerate(sig):
                if i >= required and g.chance(0.5):
                    continue
                v = {"name": lambda: g.pick(["s1", "s2", "s3"]),
                     "cron": lambda: g.pick(self.CRONS),
                     "time_zone": lambda: g.pick(self.ZONES),
                     "missed": lambda: g.pick(["skip", "catch_up"]),
                     "options": lambda: J(g.pick([{}, {"priority": 1}, {"history": True},
                                                  {"metadata": {"a": 1}}, {"delay": 1}])),
                     }.get(name, lambda: self.valid_value(name, cast))()
                args.append("%s => %%s::%s" % (name, cast))
                params.append(v)
        self.run(fn, "SELECT gen_durable.%s(%s)" % (fn, ", ".join(args)), params, risky)

    def op_timeline(self, hostile):
        rows = self.op_simple("timeline", [("id", "bigint")], 1,
                              "SELECT count(*) FROM gen_durable.timeline(%s)", hostile)
        if rows:
            self.answers["timeline:%s" % ("rows" if rows[0][0] else "none")] += 1

    def op_maintenance(self, hostile=False):
        rows = self.run("run_maintenance", "SELECT gen_durable.run_maintenance()")
        if rows:
            for k, v in (rows[0][0] or {}).items():
                self.answers["maint:%s" % k] += v

    def op_views(self, hostile=False):
        g = self.g
        c = g.r.random()
        if c < 0.4:
            self.run("stats", "SELECT count(*), sum(value) FROM gen_durable.stats")
        elif c < 0.8:
            self.run("queues", "SELECT count(*), sum(due), sum(executing), sum(unknown_rate_limit) "
                     "FROM gen_durable.queues")
        elif c < 0.88:
            # keep what the maintenance worker counted before the reset
            self.maint_errors += self.counter("maintenance_errors")
            self.run("reset_stats", "SELECT gen_durable.reset_stats()")
        elif c < 0.96:
            v, rk = g.hostile_bigint()
            self.run("_session_alive", "SELECT gen_durable._session_alive(%s::bigint)", [v], rk)
        else:
            self.run("_stats", "SELECT count(*) FROM gen_durable._stats()")

    def counter(self, name):
        """A counter of gen_durable.stats (0 when it cannot be read)."""
        if self.in_txn:
            return 0
        try:
            row = self.conn.execute("SELECT value FROM gen_durable.stats WHERE counter = %s",
                                    (name,)).fetchone()
            return row[0] if row else 0
        except psycopg.Error:
            return 0

    def op_aux(self, hostile=False):
        """The second session: a worker on another connection, which is
        sometimes closed (its claims then go back at the next reaper)."""
        g = self.g
        c = g.r.random()
        if c < 0.6:
            self.op_pick(False, conn=self.aux, worker=g.pick(["aux", "w1"]))
        elif c < 0.9:
            self.op_flush(hostile, conn=self.aux)
        else:
            # close the session; wait until its backend is gone, so that a
            # sweep run next sees its claims as those of a dead session
            try:
                old = self.aux.info.backend_pid
                self.aux.close()
            except Exception:
                old = None
            self.aux = self.connect("fuzz-aux")
            self.aux_reconnects += 1
            self.calls["(aux reconnect)"] += 1
            for _ in range(100):
                if old is None or not self.conn.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (old,)).fetchone():
                    break
                time.sleep(0.02)

    def op_txn(self, hostile=False):
        """An explicit transaction (maybe REPEATABLE READ / SERIALIZABLE, where
        pick, flush, signal, admit, await and run_maintenance must refuse),
        with savepoints, committed or rolled back."""
        g = self.g
        level = g.pick(["", "", " ISOLATION LEVEL REPEATABLE READ", " ISOLATION LEVEL SERIALIZABLE",
                        " ISOLATION LEVEL READ COMMITTED"])
        self.run("txn", "BEGIN" + level)
        self.in_txn, self.txn_failed, self.pending = True, False, []
        ops = [self.op_insert_valid, lambda: self.op_pick(False), lambda: self.op_flush(g.chance(0.3)),
               lambda: self.op_signal(False), lambda: self.op_cancel(False),
               lambda: self.op_insert_many(False), lambda: self.op_heartbeat(False),
               lambda: self.op_release(False), lambda: self.op_retry(False),
               lambda: self.op_fail(False), self.op_maintenance, lambda: self.op_admit(False),
               lambda: self.op_await(False)]
        for i in range(g.r.randrange(1, 5)):
            if not self.txn_failed and g.chance(0.25):
                self.run("txn", "SAVEPOINT s%d" % i)
                g.pick(ops)()
                self.run("txn", ("ROLLBACK TO SAVEPOINT s%d" if g.chance(0.5) else
                                 "RELEASE SAVEPOINT s%d") % i)
                # a savepoint's model changes are not tracked: the claims it
                # made (or did not) show up as stale flushes, which is fine
            else:
                g.pick(ops)()
        commit = g.chance(0.6) and not self.txn_failed
        self.run("txn", "COMMIT" if commit else "ROLLBACK")
        pending = self.pending
        self.in_txn, self.txn_failed, self.pending = False, False, []
        if commit:
            for f in pending:
                f()

    def op_prepare_rows(self):
        """Drive the state forward: picks and valid flushes of what is
        claimed, so instances reach every status."""
        self.op_pick(False)
        if self.m.claims:
            self.op_flush(False)

    # ---------------------------------------------------------------- the plan
    def plan(self):
        h = True
        return [
            # (weight, name, callable)
            (6, "insert", self.op_insert_valid),
            (5, "insert!", self.op_insert_hostile),
            (2, "insert_many", lambda: self.op_insert_many(False)),
            (4, "insert_many!", lambda: self.op_insert_many(h)),
            (9, "pick", lambda: self.op_pick(False)),
            (4, "pick!", lambda: self.op_pick(h)),
            (10, "flush", lambda: self.op_flush(False)),
            (10, "flush!", lambda: self.op_flush(h)),
            (4, "signal", lambda: self.op_signal(False)),
            (3, "signal!", lambda: self.op_signal(h)),
            (1.5, "cancel", lambda: self.op_cancel(False)),
            (1.5, "cancel!", lambda: self.op_cancel(h)),
            (1, "fail", lambda: self.op_fail(False)),
            (1, "fail!", lambda: self.op_fail(h)),
            (1.5, "retry", lambda: self.op_retry(False)),
            (1, "retry!", lambda: self.op_retry(h)),
            (0.5, "find", lambda: self.op_find(False)),
            (1, "find!", lambda: self.op_find(h)),
            (2, "heartbeat", lambda: self.op_heartbeat(False)),
            (2, "heartbeat!", lambda: self.op_heartbeat(h)),
            (1.5, "release", lambda: self.op_release(False)),
            (1.5, "release!", lambda: self.op_release(h)),
            (1, "admit", lambda: self.op_admit(False)),
            (1.5, "admit!", lambda: self.op_admit(h)),
            (1, "await", lambda: self.op_await(False)),
            (1.5, "await!", lambda: self.op_await(h)),
            (0.7, "set_rate_limit", lambda: self.op_set_rate_limit(False)),
            (1.5, "set_rate_limit!", lambda: self.op_set_rate_limit(h)),
            (0.7, "set_concurrency_limit", lambda: self.op_set_concurrency_limit(False)),
            (1.2, "set_concurrency_limit!", lambda: self.op_set_concurrency_limit(h)),
            (0.4, "drop_limit", lambda: self.op_drop_limit(False)),
            (1, "drop_limit!", lambda: self.op_drop_limit(h)),
            (0.6, "queue_control", lambda: self.op_queue_control(False)),
            (0.8, "queue_control!", lambda: self.op_queue_control(h)),
            (0.4, "timeline", lambda: self.op_timeline(False)),
            (0.5, "schedule", lambda: self.op_schedule(False)),
            (0.6, "schedule!", lambda: self.op_schedule(h)),
            (0.4, "timeline!", lambda: self.op_timeline(h)),
            (1.5, "run_maintenance", self.op_maintenance),
            (1.5, "views", self.op_views),
            (3, "aux", lambda: self.op_aux(self.g.chance(0.3))),
            (1.5, "txn", self.op_txn),
            (6, "progress", self.op_prepare_rows),
        ]

    # ---------------------------------------------------------------- invariants
    def load_checks(self):
        path = os.path.join(HERE, "invariants.sql")
        checks = []
        name, post, lines = None, False, []
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^-- check(\(post\))?: (\S+)", line)
                if m:
                    if name:
                        checks.append((name, post, "".join(lines)))
                    name, post, lines = m.group(2), bool(m.group(1)), []
                elif name:
                    if not line.startswith("--"):
                        lines.append(line)
        if name:
            checks.append((name, post, "".join(lines)))
        return checks

    def check_invariants(self, where, post=False, t0=None):
        """Run the checks in one REPEATABLE READ snapshot; report violations."""
        self.invariant_runs += 1
        conn = self.conn
        found = 0
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                for name, is_post, text in self.checks:
                    if is_post and not post:
                        continue
                    q = text.replace("%", "%%").replace(":'t0'", "%(t0)s").replace(
                        ":'retention'", "%(retention)s")
                    rows = conn.execute(q, {"t0": t0, "retention": str(self.retention)}).fetchall()
                    if rows:
                        found += 1
                        self.violation("invariant:" + name, "%s, after call #%d: %d rows, e.g. %s"
                                       % (where, self.ncall, len(rows),
                                          short("; ".join(repr(tuple(r)) for r in rows[:5]), 700)))
                found += self.model_checks(conn, where)
        except psycopg.Error as e:
            self.violation("invariant_check_failed", "%s: %s" % (where, e))
        return found

    def model_checks(self, conn, where):
        """The invariants that need what the driver knows."""
        found = 0
        # gates: at most max executing per key, beyond the rows that were
        # already executing when the gate was last set (a lowered gate lets
        # them finish; docs/decisions.md "A gate lowered under running rows")
        rows = conn.execute(
            "SELECT i.concurrency_name, i.concurrency_key, l.capacity::int, "
            "       array_agg(i.id ORDER BY i.id) "
            "  FROM gen_durable.instances i "
            "  JOIN gen_durable.limits l ON l.kind = 'conc' AND l.name = i.concurrency_name "
            " WHERE i.status = 'executing' GROUP BY 1, 2, 3").fetchall()
        for name, key, mx, ids in rows:
            old = self.m.grandfathered.get(name, set())
            allowed = mx + len([i for i in ids if i in old])
            if len(ids) > allowed:
                found += 1
                self.violation("invariant:gate_max", "%s: key %r of gate %r (max %d) has %d "
                               "executing rows %s; %d of them were executing when the gate was set"
                               % (where, key, name, mx, len(ids), ids[:20], allowed - mx))
        # a slot without a gate only for rows that held it when the gate was dropped
        rows = conn.execute(
            "SELECT i.id, i.concurrency_name, i.concurrency_key FROM gen_durable.instances i "
            " WHERE i.status = 'executing' AND i.concurrency_shard IS NOT NULL "
            "   AND NOT EXISTS (SELECT 1 FROM gen_durable.limits l "
            "                    WHERE l.kind = 'conc' AND l.name = i.concurrency_name)").fetchall()
        bad = [r for r in rows if r[0] not in self.m.dropped.get(r[1], set())]
        if bad:
            found += 1
            self.violation("invariant:slot_without_gate", "%s: executing rows hold a gate slot "
                           "but no gate is configured and they were not holding one when it was "
                           "dropped: %s" % (where, bad[:10]))
        return found

    # ---------------------------------------------------------------- coverage
    def coverage(self):
        rows = self.conn.execute("SELECT status::text, count(*) FROM gen_durable.instances "
                                 "GROUP BY 1 ORDER BY 1").fetchall()
        st = dict(rows)
        extra = self.conn.execute(
            "SELECT (SELECT count(*) FROM gen_durable.signals),"
            "       (SELECT count(*) FROM gen_durable.instances WHERE parent_id IS NOT NULL),"
            "       (SELECT count(*) FROM gen_durable.limits),"
            "       (SELECT count(*) FROM gen_durable.buckets)").fetchone()
        return st, extra

    # ---------------------------------------------------------------- server log
    def scan_log(self):
        path = self.args.server_log
        if not path:
            return
        try:
            with open(path, "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError as e:
            self.log("cannot read the server log %s: %s" % (path, e))
            return
        patterns = [r"terminated by signal", r"was terminated", r"\bPANIC\b", r"TRAP:",
                    r"server process .* exited with exit code [^01]", r"reinitializing",
                    r"all server processes terminated", r"\bXX00[012]\b"]
        hits = collections.Counter()
        examples = {}
        for line in data.splitlines():
            for p in patterns:
                if re.search(p, line):
                    hits[p] += 1
                    examples.setdefault(p, line)
        for p, n in hits.items():
            self.violation("server_log", "%d log lines match /%s/, e.g. %s" % (n, p, short(examples[p], 400)))
        # errors of other processes than the driver's sessions: the
        # maintenance worker, the launcher
        others = [l for l in data.splitlines()
                  if re.search(r"\b(ERROR|FATAL):", l) and "fuzz-" not in l
                  and "pg_regress/" not in l]
        if others:
            self.violation("server_log", "%d ERROR/FATAL lines from other processes than the "
                           "driver's sessions, e.g. %s" % (len(others), short(others[0], 400)))
        self.log("server log: %d lines, %d bytes scanned" % (len(data.splitlines()), len(data)))

    # ---------------------------------------------------------------- main loop
    def main(self):
        self.log("fuzz.py: seed %d, %d calls" % (self.seed, self.args.calls))
        self.setup()
        self.checks = self.load_checks()
        plan = self.plan()
        weights = [w for w, _, _ in plan]
        names = [n for _, n, _ in plan]
        ops = [f for _, _, f in plan]
        op_counts = collections.Counter()
        next_check = self.args.check_every
        next_alive = 100
        last_report = time.time()
        while self.ncall < self.args.calls:
            if self.args.deadline and time.time() - self.t0 > self.args.deadline:
                self.log("deadline of %ss reached after %d calls" % (self.args.deadline, self.ncall))
                break
            k = self.r.choices(range(len(ops)), weights)[0]
            op_counts[names[k]] += 1
            try:
                ops[k]()
            except psycopg.Error as e:
                # a statement of the driver's own bookkeeping failed
                self.violation("driver_error", "%s: %s" % (names[k], e))
                if self.conn.broken:
                    self.reconnect_main("a driver statement lost the connection")
            except Exception:
                import traceback
                self.violation("driver_error", "%s: %s" % (names[k], traceback.format_exc()))
                if self.in_txn:
                    self.run("txn", "ROLLBACK")
                    self.in_txn, self.txn_failed, self.pending = False, False, []
            if self.ncall >= next_alive:
                self.check_alive("after call #%d" % self.ncall)
                next_alive = self.ncall + 100
            if self.ncall >= next_check:
                next_check = self.ncall + self.args.check_every
                post = self.r.random() < 0.5
                if post:
                    t0 = self.conn.execute("SELECT clock_timestamp()").fetchone()[0]
                    self.op_maintenance()
                    self.check_invariants("periodic (after run_maintenance)", post=True, t0=t0)
                else:
                    self.check_invariants("periodic")
            if time.time() - last_report > 10:
                last_report = time.time()
                self.log("... %d calls, %.0fs, %d violations" % (self.ncall, time.time() - self.t0,
                                                                 sum(self.violation_kinds.values())))
        # the end: everything still standing, then the sweeps' fixed point
        self.check_alive("at the end")
        self.check_invariants("final")
        t0 = self.conn.execute("SELECT clock_timestamp()").fetchone()[0]
        self.op_maintenance()
        self.check_invariants("final, after run_maintenance", post=True, t0=t0)
        self.check_alive("after the final checks")
        st, extra = self.coverage()
        self.maint_errors += self.counter("maintenance_errors")
        if self.maint_errors:
            self.violation("maintenance_errors", "the maintenance worker's sweeps failed %d times "
                           "(gen_durable.stats maintenance_errors; the server log has them)"
                           % self.maint_errors)
        self.scan_log()
        self.summary(op_counts, st, extra)
        return 0 if not self.violation_kinds else 1

    def summary(self, op_counts, st, extra):
        elapsed = time.time() - self.t0
        p = self.log
        p("\n==================== gen_durable fuzz summary ====================")
        p("seed %d; %d calls in %.1fs (%.0f calls/s); %d reconnects of the main session, %d of the "
          "aux session; %d invariant runs" % (self.seed, self.ncall, elapsed, self.ncall / max(elapsed, 1e-9),
                                              self.reconnects, self.aux_reconnects, self.invariant_runs))
        p("\ncalls per function (errors):")
        for fn, n in sorted(self.calls.items()):
            p("  %-24s %7d  (%d errors)" % (fn, n, self.call_errors[fn]))
        p("\nerrors per SQLSTATE:")
        for s, n in sorted(self.states.items()):
            p("  %s %7d" % (s, n))
        p("\ndistinct (SQLSTATE, message prefix) [count, function, raised in]: %d" % len(self.distinct))
        for (s, pre), (n, fn, repro, src) in sorted(self.distinct.items()):
            p("  %s %6d  %-16s %-16s %s" % (s, n, fn, src or "-", pre))
        if self.notices:
            p("\nnotices and warnings:")
            for (sev, pre), n in sorted(self.notices.items()):
                p("  %-8s %6d  %s" % (sev, n, pre))
        p("\nflush entries (applied/detail):")
        for k, n in sorted(self.applied.items()):
            p("  %6d  %s" % (n, k))
        p("\nother answers:")
        for k, n in sorted(self.answers.items()):
            p("  %6d  %s" % (n, k))
        p("\ninstances by status at the end: %s" % ", ".join("%s %d" % (s, st.get(s, 0)) for s in STATUSES))
        p("signals %d, children %d, limits %d, buckets %d" % tuple(extra))
        missing = [s for s in STATUSES if not st.get(s)]
        if missing:
            p("(no instance ended the run as: %s; GC or the last sweeps may have taken them)"
              % ", ".join(missing))
        p("\nviolations: %d" % sum(self.violation_kinds.values()))
        for k, n in sorted(self.violation_kinds.items()):
            p("  %-40s %d" % (k, n))
            for (k2, sig), n2 in sorted(self.violation_sigs.items(), key=lambda x: str(x)):
                if k2 == k and sig is not None:
                    p("      %6d  %s" % (n2, " / ".join(str(x) for x in (sig if isinstance(sig, tuple) else (sig,)))))
        if self.violations:
            p("\nfirst reports (replay with --seed %d):" % self.seed)
            for kind, text in self.violations:
                p("- [%s] %s" % (kind, text))
        p("\nresult: %s" % ("OK" if not self.violation_kinds else "VIOLATIONS FOUND"))


def main():
    sys.setrecursionlimit(20000)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default=os.environ.get("PGHOST", "/var/run/postgresql"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("PGPORT", "5432")))
    ap.add_argument("--user", default=os.environ.get("PGUSER", "postgres"))
    ap.add_argument("--dbname", default="gd_fuzz", help="database to (re)create and fuzz")
    ap.add_argument("--reuse-db", action="store_true", help="keep the database if it exists")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--calls", type=int, default=50000)
    ap.add_argument("--ci", action="store_true", help="CI size: 3000 calls, checks every 500")
    ap.add_argument("--check-every", type=int, default=1000)
    ap.add_argument("--deadline", type=float, default=0, help="stop after this many seconds")
    ap.add_argument("--retention", type=int, default=2, help="gen_durable.retention (s) to set")
    ap.add_argument("--max-wait-ms", type=int, default=100, help="gen_durable.max_wait to set")
    ap.add_argument("--bgworker", action="store_true",
                    help="leave the maintenance worker on (less reproducible)")
    ap.add_argument("--no-configure", action="store_true", help="do not ALTER SYSTEM anything")
    ap.add_argument("--statement-timeout", type=float, default=30)
    ap.add_argument("--server-log", default=None, help="server log to scan at the end")
    ap.add_argument("--max-reports", type=int, default=3,
                    help="reports printed per violation kind and signature")
    ap.add_argument("--trace", action="store_true", help="print every call")
    ap.add_argument("--no-minimize", action="store_true",
                    help="report the calls as made, without making them smaller")
    args = ap.parse_args()
    if args.ci:
        args.calls = 3000 if args.calls == 50000 else args.calls
        args.check_every = min(args.check_every, 500)
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "big")
    f = Fuzzer(args)
    try:
        rc = f.main()
    except KeyboardInterrupt:
        print("interrupted; seed %d" % args.seed)
        rc = 2
    sys.exit(rc)


if __name__ == "__main__":
    main()
