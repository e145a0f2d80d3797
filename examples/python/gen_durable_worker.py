"""gen_durable_worker: a small worker library for gen_durable on psycopg 3.

An application registers one handler per (fsm, step) and calls Worker.run().
The worker long-polls `gen_durable.pick` (one picker thread and connection
per queue), runs handlers on a pool of `concurrency` threads, group-commits
their outcomes with one `gen_durable.flush` per batch, runs inline
continuations at once, heartbeats long steps, and on SIGTERM/SIGINT finishes
running steps (for up to `grace` seconds), flushes, releases the rest and
returns.

Every call is one autocommit statement without server-side prepared
statements or session state, so it works through PgBouncer in transaction
pooling mode.  Steps run at least once: handlers must be idempotent (use
`job.id` with `job.steps` as the idempotency key for external effects).
"""

import datetime
import json
import logging
import os
import queue
import random
import secrets
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, List, Optional, Tuple

try:
    import psycopg
    from psycopg.rows import dict_row
except ImportError as missing:
    raise ImportError("gen_durable_worker needs psycopg 3: apt-get install python3-psycopg"
                      " (for Debian's /usr/bin/python3)") from missing

log = logging.getLogger("gen_durable_worker")

_PICK_SQL = (
    "SELECT * FROM gen_durable.pick(%s::text, %s::text, batch => %s::int,"
    " lease => %s::interval, wait => %s::interval, fsms => %s::text[])"
)
_FLUSH_SQL = "SELECT id, applied, detail, job FROM gen_durable.flush(%s::jsonb)"
_HEARTBEAT_SQL = "SELECT gen_durable.heartbeat(%s::text, %s::bigint[], %s::interval) AS held"
_RELEASE_SQL = "SELECT gen_durable.release(%s::text) AS released"

# The engine's limit on the entries of one flush is 10000; stay well below.
_MAX_FLUSH = 1000


# ---------------------------------------------------------------- outcomes

class Outcome(dict):
    """A step's outcome: the JSON object `flush` expects, without id and worker.

    Built only by the helpers below, so that the worker can tell a real outcome
    from a handler that returned something else by mistake.
    """


_KEEP = object()  # concurrency_key default of next(): keep the current key


def _duration(value):
    """Returns a duration as flush accepts it: seconds for a number or timedelta,
    an interval string ("60 s") as is."""
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return value


def next(step, state=None, *, continue_=False, rate_limit=None, weight=None,
         concurrency_key=_KEEP, fsm_version=None, lease=None):
    """Go on to `step` (with a new `state`, or the current one).

    continue_=True asks to keep the claim and run the next step here at once.
    concurrency_key: omitted keeps the current key, None releases it, a string
    sets it.  rate_limit and weight apply to the next step only.
    """
    outcome = Outcome(kind="next", step=step)
    if state is not None:
        outcome["state"] = state
    if continue_:
        outcome["continue"] = True
    if rate_limit is not None:
        outcome["rate_limit"] = rate_limit
    if weight is not None:
        outcome["weight"] = weight
    if concurrency_key is not _KEEP:
        outcome["concurrency_key"] = concurrency_key
    if fsm_version is not None:
        outcome["fsm_version"] = fsm_version
    if lease is not None:
        outcome["lease"] = _duration(lease)
    return outcome


def await_(names, step, *, timeout=None, state=None):
    """Park until one of the signal `names` arrives (or `timeout` passes), then
    run `step`."""
    outcome = Outcome(kind="await", names=[names] if isinstance(names, str) else list(names),
                      step=step)
    if timeout is not None:
        outcome["timeout"] = _duration(timeout)
    if state is not None:
        outcome["state"] = state
    return outcome


def spawn(children, step, *, join="all", state=None):
    """Start child instances (insert specs) and run `step` once they have ended
    (join "all") or at the first failure (join "first_error")."""
    outcome = Outcome(kind="spawn", children=list(children), step=step, join=join)
    if state is not None:
        outcome["state"] = state
    return outcome


def done(result=None):
    """Finish the instance with `result` (the engine's default is {})."""
    return Outcome(kind="done") if result is None else Outcome(kind="done", result=result)


def fail(error=None):
    """Fail the instance for good with `error` (no more attempts)."""
    return Outcome(kind="fail") if error is None else Outcome(kind="fail", error=error)


def retry(delay=0, error=None, *, state=None):
    """Run the same step again after `delay`, recording `error`; the engine fails
    the instance when max_attempts runs out."""
    outcome = Outcome(kind="retry", delay=_duration(delay))
    if error is not None:
        outcome["error"] = error
    if state is not None:
        outcome["state"] = state
    return outcome


# ------------------------------------------------------------ jobs, context

@dataclass(frozen=True)
class Job:
    """One claimed step: the columns of gen_durable.job."""
    id: int
    fsm: str
    fsm_version: int
    step: str
    state: Dict[str, Any]
    attempt: int
    steps: int
    inbox: List[Dict[str, Any]]
    awaited: List[Dict[str, Any]]
    children: List[Dict[str, Any]]
    timed_out: bool
    parent_id: Optional[int]
    correlation_key: Optional[str]
    metadata: Optional[Dict[str, Any]]
    lease_expires_at: Any
    claim: Optional[int] = None  # the claim's number (engine 0.6.0 and later)

    @classmethod
    def from_row(cls, row):
        """Builds a Job from a pick row or a flush `job` object, ignoring columns
        a later engine version may add."""
        return cls(**{f.name: row.get(f.name) for f in fields(cls)})

    def awaited_payload(self, name):
        """Returns the payload of the first awaited signal called `name`, or None."""
        for signal_ in self.awaited:
            if signal_["name"] == name:
                return signal_["payload"]
        return None


class StepContext:
    """What a handler gets besides its job: a stop flag it should check.

    The flag is set when the claim is lost (its outcome would be stale) or when
    shutdown's grace period is over (the claim is about to be released).
    """

    def __init__(self, worker_id):
        self.worker_id = worker_id
        self.stop_reason = None
        self._stop = threading.Event()

    @property
    def stopped(self):
        """Whether the handler should give up now."""
        return self._stop.is_set()

    def sleep(self, seconds):
        """Sleeps up to `seconds`, waking early when stopped; returns False then."""
        return not self._stop.wait(seconds)

    def _set_stop(self, reason):
        """Asks the handler to stop (called by the worker)."""
        self.stop_reason = reason
        self._stop.set()


class _Claim:
    """A claim this worker holds: the job, its context, when its lease was last
    extended (monotonic) and whether it occupies a concurrency slot."""

    def __init__(self, job, worker_id, extended_at):
        self.job = job
        self.context = StepContext(worker_id)
        self.extended_at = extended_at
        self.has_slot = True


# ---------------------------------------------------------------- plumbing

class _Database:
    """One autocommit connection, opened on first use and again after it broke.

    Calls are serialized (a connection runs one statement at a time); cancel()
    interrupts the running one from another thread.
    """

    def __init__(self, conninfo, application_name):
        self._conninfo = conninfo
        self._application_name = application_name
        self._conn = None
        self._lock = threading.Lock()

    def _connection(self):
        """Returns the open connection, connecting if needed (caller holds the lock)."""
        if self._conn is None:
            # prepare_threshold=None: no server-side prepared statements (PgBouncer).
            self._conn = psycopg.connect(self._conninfo, autocommit=True,
                                         prepare_threshold=None, row_factory=dict_row,
                                         application_name=self._application_name)
        return self._conn

    def open(self):
        """Connects now, so that configuration errors show at start."""
        with self._lock:
            self._connection()

    def query(self, sql, params):
        """Runs one statement (its own transaction) and returns its rows."""
        with self._lock:
            conn = self._connection()
            try:
                return conn.execute(sql, params).fetchall()
            except psycopg.Error:
                if conn.broken:
                    self._conn = None
                    conn.close()
                raise

    def cancel(self):
        """Cancels the statement running right now, if any."""
        conn = self._conn
        if conn is not None:
            try:
                conn.cancel()
            except psycopg.Error as exc:
                log.debug("cancel failed: %s", exc)

    def close(self):
        """Closes the connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class _Slots:
    """The free concurrency slots, shared by the pickers; a picker blocks while
    none is free."""

    def __init__(self, total):
        self._free = total
        self._closed = False
        self._changed = threading.Condition()

    def take(self, most):
        """Takes between 1 and `most` free slots, waiting for one; 0 once closed."""
        with self._changed:
            self._changed.wait_for(lambda: self._free > 0 or self._closed)
            if self._closed:
                return 0
            taken = min(most, self._free)
            self._free -= taken
            return taken

    def give(self, count):
        """Returns `count` slots."""
        if count:
            with self._changed:
                self._free += count
                self._changed.notify_all()

    def close(self):
        """Wakes every waiting picker with 0 (shutdown)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()


_FINISH = object()  # put in the outcome queue: flush what came before, then exit


# ------------------------------------------------------------------ worker

class Worker:
    """Runs registered step handlers for the jobs of some queues.

    queues: the queues to pick from (one picker thread and connection each).
    concurrency: most steps running at once (handler threads); at least the
        number of queues, since an idle picker long-polls with one slot.
    batch: most jobs one pick claims.
    conninfo: libpq connection string; default DATABASE_URL, else the PG* env.
    lease: claim lease in seconds; steps running longer than lease/3 are
        heartbeated.
    poll_wait: how long an idle pick waits in the server for work.
    flush_delay: most seconds an outcome waits for others to share its flush.
    grace: how long shutdown lets running steps finish.
    retry_base, retry_cap: backoff of a failing handler, in seconds:
        min(retry_base * 2**attempt, retry_cap), the upper half jittered.
    """

    def __init__(self, queues, *, concurrency=8, batch=20, conninfo=None, lease=30.0,
                 poll_wait=5.0, flush_delay=0.01, grace=10.0, retry_base=1.0,
                 retry_cap=300.0):
        if not queues:
            raise ValueError("at least one queue is needed")
        if concurrency < len(queues):
            raise ValueError("concurrency must be at least the number of queues")
        self.worker_id = "python-%s-%d-%s" % (socket.gethostname(), os.getpid(),
                                              secrets.token_hex(4))
        self.queues = list(queues)
        self.concurrency = concurrency
        self.batch = batch
        self.lease = lease
        self.poll_wait = poll_wait
        self.flush_delay = flush_delay
        self.grace = grace
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self._conninfo = os.environ.get("DATABASE_URL", "") if conninfo is None else conninfo
        self._handlers: Dict[Tuple[str, str], Callable] = {}
        self._claims: Dict[int, _Claim] = {}
        self._running = 0  # handlers running, under _lock
        self._lock = threading.Lock()
        self._running_changed = threading.Condition(self._lock)
        self._slots = _Slots(concurrency)
        self._runnable: "queue.Queue[_Claim]" = queue.Queue()
        self._outcomes: "queue.Queue" = queue.Queue()
        self._stopping = threading.Event()
        self._finished = threading.Event()
        self._control = _Database(self._conninfo, self.worker_id)  # flush, heartbeat, release

    # -- public API

    def step(self, fsm, step):
        """Decorator registering `handler(job, context) -> Outcome` for (fsm, step)."""
        def register(handler):
            self._handlers[(fsm, step)] = handler
            return handler
        return register

    def stop(self):
        """Requests a graceful shutdown; safe to call from a signal handler."""
        self._stopping.set()
        self._slots.close()

    def run(self, on_ready=None):
        """Works until SIGTERM/SIGINT (or stop()), then shuts down gracefully.

        on_ready() is called once every picker has its connection and picks.
        Returns when the worker has stopped; raises ConnectionError if the
        database cannot be reached at start.
        """
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: self.stop())
        try:
            self._control.open()
            databases = [_Database(self._conninfo, self.worker_id) for _ in self.queues]
            for database in databases:
                database.open()
        except psycopg.OperationalError as exc:
            raise ConnectionError(str(exc).strip()) from exc
        pickers = [(threading.Thread(target=self._pick_loop, args=(queue_name, database),
                                     name="pick-" + queue_name, daemon=True), database)
                   for queue_name, database in zip(self.queues, databases)]
        for index in range(self.concurrency):
            threading.Thread(target=self._handler_loop, name="step-%d" % index,
                             daemon=True).start()
        flusher = threading.Thread(target=self._flush_loop, name="flush", daemon=True)
        heartbeater = threading.Thread(target=self._heartbeat_loop, name="heartbeat",
                                       daemon=True)
        flusher.start()
        heartbeater.start()
        for thread, _ in pickers:
            thread.start()
        log.info("worker %s picking from %s", self.worker_id, ", ".join(self.queues))
        if on_ready:
            on_ready()
        while not self._stopping.wait(0.5):
            pass
        self._shutdown(pickers, flusher, heartbeater)

    # -- picking

    def _pick_loop(self, queue_name, database):
        """Claims jobs of one queue while slots are free.

        After a pick that got all it asked for, picks again at once with every
        free slot (up to `batch`); after one that came back short, long-polls
        with a single slot, so that an idle queue does not hold the slots
        another queue could use.
        """
        fsms = sorted({fsm for fsm, _ in self._handlers})
        lease = datetime.timedelta(seconds=self.lease)
        long_poll = datetime.timedelta(seconds=self.poll_wait)
        idle = False
        failures = 0
        while not self._stopping.is_set():
            wanted = self._slots.take(1 if idle else self.batch)
            if not wanted:
                break
            started = time.monotonic()
            try:
                rows = database.query(_PICK_SQL, (queue_name, self.worker_id, wanted, lease,
                                                  long_poll if idle else datetime.timedelta(0),
                                                  fsms))
            except psycopg.Error as exc:
                self._slots.give(wanted)
                if self._stopping.is_set():
                    break
                failures += 1
                log.warning("pick from %s failed (%s); retrying", queue_name, exc)
                self._stopping.wait(min(0.1 * 2 ** failures, 5.0))
                continue
            failures = 0
            self._slots.give(wanted - len(rows))
            for row in rows:
                self._accept(_Claim(Job.from_row(row), self.worker_id, started))
            idle = len(rows) < wanted

    def _accept(self, claim):
        """Records a new claim and queues it for a handler thread."""
        with self._lock:
            superseded = self._claims.get(claim.job.id)
            self._claims[claim.job.id] = claim
        if superseded is not None:
            # Our earlier claim of this id was reaped and we picked it again.
            superseded.context._set_stop("claim lost")
        self._runnable.put(claim)

    # -- running steps

    def _handler_loop(self):
        """Runs queued claims, one at a time, until the process exits."""
        while True:
            claim = self._runnable.get()
            with self._lock:
                stopping = self._stopping.is_set()
                start = (not stopping and not claim.context.stopped
                         and self._claims.get(claim.job.id) is claim)
                if start:
                    self._running += 1
            if start:
                self._run_step(claim)
            elif not stopping:  # lost before it started; during shutdown release() takes it
                self._drop(claim)

    def _run_step(self, claim):
        """Runs the claim's handler and hands its outcome to the flusher."""
        job, context = claim.job, claim.context
        started = time.monotonic()
        try:
            handler = self._handlers.get((job.fsm, job.step))
            if handler is None:
                raise LookupError("no handler for %s/%s" % (job.fsm, job.step))
            outcome = handler(job, context)
            if not isinstance(outcome, Outcome):
                raise TypeError("handler returned %r, not an outcome" % (outcome,))
            json.dumps(outcome)  # an unserializable state is the step's error
        except Exception as exc:  # any handler error becomes a retry
            delay = self._backoff(job.attempt)
            log.warning("%s %d step %s attempt %d failed: %s; retry in %.1f s", job.fsm,
                        job.id, job.step, job.attempt, exc, delay)
            outcome = retry(delay, {"message": str(exc), "type": type(exc).__name__})
        log.debug("%s %d %s took %.1f ms: %s", job.fsm, job.id, job.step,
                  (time.monotonic() - started) * 1000, outcome["kind"])
        keep_slot = False
        with self._lock:
            if context.stopped or self._claims.get(job.id) is not claim:
                self._forget(claim)  # its outcome would be stale
            else:
                # Queued under the lock, so that the flusher and shutdown never
                # see the step neither running nor reported.
                self._outcomes.put((claim, outcome))
                keep_slot = outcome.get("continue", False)
            self._running -= 1
            self._running_changed.notify_all()
        if not keep_slot:
            self._free_slot(claim)

    def _backoff(self, attempt):
        """Seconds before retrying a failed step: capped exponential, jittered."""
        ceiling = min(self.retry_base * 2 ** min(attempt, 30), self.retry_cap)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def _forget(self, claim):
        """Drops a claim we no longer hold (caller holds _lock)."""
        if self._claims.get(claim.job.id) is claim:
            del self._claims[claim.job.id]

    def _drop(self, claim):
        """Forgets a claim and frees its slot."""
        with self._lock:
            self._forget(claim)
        self._free_slot(claim)

    def _free_slot(self, claim):
        """Gives the claim's concurrency slot back, once."""
        with self._lock:
            had_slot, claim.has_slot = claim.has_slot, False
        if had_slot:
            self._slots.give(1)

    # -- flushing

    def _flush_loop(self):
        """Group commit: flushes the outcomes that arrive within flush_delay of
        the first (fewer when no other step is running, since none can join),
        until _FINISH."""
        finishing = False
        while not finishing:
            first = self._outcomes.get()
            if first is _FINISH:
                break
            batch = [first]
            deadline = time.monotonic() + self.flush_delay
            while len(batch) < self.concurrency:
                with self._lock:
                    others_running = self._running > 0
                remaining = deadline - time.monotonic()
                if not others_running or remaining <= 0:
                    break
                try:
                    item = self._outcomes.get(timeout=remaining)
                except queue.Empty:
                    break
                if item is _FINISH:
                    finishing = True
                    break
                batch.append(item)
            while not finishing and len(batch) < _MAX_FLUSH:
                try:
                    item = self._outcomes.get_nowait()
                except queue.Empty:
                    break
                if item is _FINISH:
                    finishing = True
                else:
                    batch.append(item)
            self._flush(batch)

    def _flush(self, batch):
        """Commits a batch of (claim, outcome) with one flush call, retrying the
        call while the database is unreachable (a few times during shutdown)."""
        stopping = self._stopping.is_set()
        with self._lock:
            # A claim we picked again after losing it supersedes the old one,
            # whose outcome would be stale: it is not sent.
            superseded = [c for c, _ in batch if self._claims.get(c.job.id) is not c]
            batch = [(c, o) for c, o in batch if self._claims.get(c.job.id) is c]
        for claim in superseded:
            log.info("%s %d: outcome of a superseded claim dropped", claim.job.fsm, claim.job.id)
            self._free_slot(claim)
        if not batch:
            return
        entries = []
        for claim, outcome in batch:
            entry = dict(outcome, id=claim.job.id, worker=self.worker_id)
            if claim.job.claim is not None:
                # The fence: applied only while this claim is the latest.
                entry["claim"] = claim.job.claim
            if stopping:
                # Shutting down: the next step goes back to the queue instead.
                entry.pop("continue", None)
                entry.pop("lease", None)
            entries.append(entry)
        payload = json.dumps(entries)
        failures = 0
        while True:
            try:
                rows = self._control.query(_FLUSH_SQL, (payload,))
                break
            except psycopg.Error as exc:
                failures += 1
                if self._stopping.is_set() and failures >= 3:
                    log.error("flush of %d outcomes failed, giving up: %s", len(batch), exc)
                    return
                log.warning("flush of %d outcomes failed (%s); retrying", len(batch), exc)
                time.sleep(min(0.1 * 2 ** failures, 5.0))
        for (claim, outcome), row in zip(batch, rows):
            self._settle(claim, outcome, row)

    def _settle(self, claim, outcome, row):
        """Acts on one flush answer: runs a continuation, turns an invalid outcome
        into a retry, or forgets the claim."""
        job, applied, detail = claim.job, row["applied"], row["detail"]
        if applied == "invalid":
            log.error("%s %d: invalid outcome %s: %s", job.fsm, job.id, outcome, detail)
            self._free_slot(claim)
            if getattr(outcome, "replaces_invalid", False):
                # What the library itself sends is wrong: leave the claim to
                # expire with its lease rather than flush again and again.
                log.error("%s %d: left to its lease (the retry replacing an invalid outcome"
                          " is invalid too)", job.fsm, job.id)
                with self._lock:
                    self._forget(claim)
                return
            fallback = retry(self._backoff(job.attempt), {"message": "invalid outcome: %s" % detail})
            fallback.replaces_invalid = True
            self._outcomes.put((claim, fallback))
            return
        if applied == "stale":
            log.info("%s %d: outcome stale (%s)", job.fsm, job.id, detail)
        elif applied == "budget_exhausted" or detail == "attempts_exhausted":
            log.warning("%s %d failed: %s", job.fsm, job.id, detail or applied)
        elif applied != "ok" or detail:
            log.debug("%s %d: %s %s", job.fsm, job.id, applied, detail or "")
        with self._lock:
            self._forget(claim)
        if row["job"] is not None:
            continued = _Claim(Job.from_row(row["job"]), self.worker_id, time.monotonic())
            continued.has_slot, claim.has_slot = claim.has_slot, False
            self._accept(continued)
        else:
            self._free_slot(claim)

    # -- heartbeat

    def _heartbeat_loop(self):
        """Every lease/3 s, extends the claims held longer than lease/3 since
        their last extension, and stops the steps whose claim was lost."""
        interval = self.lease / 3
        lease = datetime.timedelta(seconds=self.lease)
        while not self._finished.wait(interval):
            now = time.monotonic()
            with self._lock:
                due = [c for c in self._claims.values() if now - c.extended_at >= interval]
            if not due:
                continue
            try:
                rows = self._control.query(_HEARTBEAT_SQL, (self.worker_id,
                                                            [c.job.id for c in due], lease))
            except psycopg.Error as exc:
                log.warning("heartbeat failed: %s", exc)
                continue
            held = set(rows[0]["held"])
            for claim in due:
                if claim.job.id in held:
                    claim.extended_at = now
                    continue
                with self._lock:
                    current = self._claims.get(claim.job.id) is claim
                if current:  # not merely flushed meanwhile
                    log.warning("%s %d: claim lost; stopping its step", claim.job.fsm,
                                claim.job.id)
                    claim.context._set_stop("claim lost")

    # -- shutdown

    def _shutdown(self, pickers, flusher, heartbeater):
        """Stops picking, lets running steps finish for `grace` seconds, flushes
        their outcomes, releases every claim still held and closes connections."""
        deadline = time.monotonic() + self.grace
        log.info("worker %s stopping", self.worker_id)
        for thread, database in pickers:
            while thread.is_alive() and time.monotonic() < deadline:
                database.cancel()  # interrupt a long-poll pick
                thread.join(0.1)
        with self._running_changed:
            finished = self._running_changed.wait_for(
                lambda: self._running == 0, max(0.0, deadline - time.monotonic()))
            leftovers = list(self._claims.values())
        if not finished:
            log.warning("steps still running after %.0f s; releasing them", self.grace)
        for claim in leftovers:
            claim.context._set_stop("shutdown")
        self._outcomes.put(_FINISH)
        flusher.join()
        try:
            released = self._control.query(_RELEASE_SQL, (self.worker_id,))[0]["released"]
            log.info("released %d claims", released)
        except psycopg.Error as exc:
            log.error("release failed (%s); the claims return when the leases expire", exc)
        self._finished.set()
        heartbeater.join()
        for thread, database in pickers:
            if not thread.is_alive():  # else it is stuck connecting; exit closes it
                database.close()  # only now: a closed pick connection gets its claims reaped
        self._control.close()
        log.info("worker %s stopped", self.worker_id)


# ------------------------------------------------------------ worker apps

def serve(build):
    """Runs the worker that build() returns until SIGTERM/SIGINT, the way a
    worker app's command line goes (examples/checkout/README.md): logs to
    stderr, prints "ready <id>" once picking and "stopped <id>" at the end.
    Returns the exit status: 0, or 1 when the worker cannot run (bad
    arguments, no database)."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(threadName)s: %(message)s")
    try:
        worker = build()
        worker.run(on_ready=lambda: print("ready " + worker.worker_id, flush=True))
    except (ValueError, ConnectionError) as exc:
        logging.error("cannot run: %s", exc)
        return 1
    print("stopped " + worker.worker_id, flush=True)
    return 0
