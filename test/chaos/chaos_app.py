#!/usr/bin/env python3
"""test/chaos/chaos_app.py - the worker app of the chaos soak (test/chaos/run.sh).

Runs the soak's machines (see test/chaos/README.md) on the Python worker
library, examples/python/gen_durable_worker.py (imported, not copied):

    chaos_app.py [--queues qa,qb] [--concurrency 6] [--batch 10] [--lease 5]

  chain   a multi-step machine: steps 'work' 0..len-1, each one a `next`
          (some inline `continue`s) that may set a K=1 key (acct:*), a gate
          key (pool:*, lane:*) and a rate limit (api:*, slow) for the step
          after it; flaky steps `retry`; then `done` {"n": steps}.
  waiter  R rounds of `await` go<r> with a timeout, woken by the driver's
          signal or by the timeout ('woke'), then a `next` ('ack'); then
          `done` {"sig": .., "to": ..}.
  parent  rounds of `spawn` (join all / first_error) of `child` machines in
          queue qb; each round's join step ('join') checks the children list
          it was woken with; then `done` {"rounds": R}.
  child   steps like a chain, then by its fate: done, fail, an `await` of a
          signal nobody sends (timeout), or a nested `spawn` of two children
          (join all), checked at its own join.

Every handler carries its instance's step counter in the state (`n`,
incremented by every outcome that changes the step) and hands the worker,
besides the outcome, a ledger entry (the private key `_meta`).  The flush of
the library is replaced by one statement that runs gen_durable.flush and
inserts, from flush's own answer rows, a ledger row (chaos.ledger, UNIQUE
(id, steps)) for each entry applied 'ok' or 'requeued' that changes the step
or ends the instance, and a row in chaos.retries (UNIQUE (id, steps,
attempt)) for each retry applied: the ledger commits in the transaction of
the outcomes, never apart from them.  A second commit of the same (id,
steps) does not fail the flush: it is counted on the ledger row (dups) and
the checker reports it.

Prints `ready <worker id>` once picking and `stopped <worker id>` after a
graceful shutdown (SIGTERM/SIGINT); logs to stderr.
"""

import argparse
import json
import logging
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))

import gen_durable_worker as gd  # noqa: E402

LEASE = 5.0                     # seconds: pick's lease and every continue's

# One statement, hence one transaction: the outcomes and their ledger rows.
# Each entry's ledger data (m) is joined to flush's answer row of the same
# position (flush answers one row per entry, in input order).
FLUSH_WITH_LEDGER = """
WITH f AS MATERIALIZED (
    SELECT f.id, f.applied, f.detail, f.job, f.ord
      FROM gen_durable.flush(%(outcomes)s::jsonb)
           WITH ORDINALITY AS f(id, applied, detail, job, ord)
), m AS (
    SELECT m.ord, m.meta
      FROM jsonb_array_elements(%(metas)s::jsonb) WITH ORDINALITY AS m(meta, ord)
), steps AS (
    INSERT INTO chaos.ledger AS l
           (id, steps, attempt, fsm, step, kind, new_step, n_before, n_after,
            worker, applied, detail, info)
    SELECT f.id, (m.meta->>'steps')::bigint, (m.meta->>'attempt')::int,
           m.meta->>'fsm', m.meta->>'step', m.meta->>'kind', m.meta->>'new_step',
           (m.meta->>'n_before')::int, (m.meta->>'n_after')::int,
           %(worker)s, f.applied, f.detail, coalesce(m.meta->'info', '{}')
      FROM f JOIN m USING (ord)
     WHERE f.applied IN ('ok', 'requeued') AND m.meta->>'kind' <> 'retry'
    ON CONFLICT (id, steps) DO UPDATE
       SET dups = l.dups + 1,
           dup_rows = l.dup_rows || jsonb_build_array(jsonb_build_object(
               'kind', excluded.kind, 'step', excluded.step, 'worker', excluded.worker,
               'applied', excluded.applied, 'detail', excluded.detail,
               'attempt', excluded.attempt, 'n_before', excluded.n_before,
               'xact', excluded.xact, 'at', excluded.committed_at))
    RETURNING 1
), retries AS (
    INSERT INTO chaos.retries AS r (id, steps, attempt, worker, detail, info)
    SELECT f.id, (m.meta->>'steps')::bigint, (m.meta->>'attempt')::int, %(worker)s, f.detail,
           coalesce(m.meta->'info', '{}')
      FROM f JOIN m USING (ord)
     WHERE f.applied = 'ok' AND m.meta->>'kind' = 'retry'
    ON CONFLICT (id, steps, attempt) DO UPDATE
       SET dups = r.dups + 1
    RETURNING 1
)
SELECT f.id, f.applied, f.detail, f.job FROM f ORDER BY f.ord
"""

log = logging.getLogger("chaos_app")


class LedgerDatabase(gd._Database):
    """The library's control connection, with its flush replaced by
    FLUSH_WITH_LEDGER: the `_meta` each handler put in its outcome is taken
    out of the flush entry and becomes the ledger data."""

    def __init__(self, conninfo, worker_id):
        super().__init__(conninfo, worker_id)
        self.worker_id = worker_id

    def query(self, sql, params):
        if sql is not gd._FLUSH_SQL:
            return super().query(sql, params)
        entries = json.loads(params[0])
        metas = [entry.pop("_meta", None) for entry in entries]
        return super().query(FLUSH_WITH_LEDGER, {"outcomes": json.dumps(entries),
                                                 "metas": json.dumps(metas),
                                                 "worker": self.worker_id})


def _iso(value):
    """A timestamp from a pick row (datetime) or a flush job (string) as text."""
    return value.isoformat() if hasattr(value, "isoformat") else value


def ledger(outcome, job, info=None):
    """Attaches the ledger entry of `outcome` (the step `job` ran)."""
    state = outcome.get("state")
    outcome["_meta"] = {
        "steps": job.steps, "attempt": job.attempt, "fsm": job.fsm, "step": job.step,
        "kind": outcome["kind"], "new_step": outcome.get("step"),
        "n_before": job.state.get("n"),
        "n_after": state.get("n") if isinstance(state, dict) else None,
        "info": dict(info or {}, claimed=_iso(job.lease_expires_at),
                     cont=bool(outcome.get("continue"))),
    }
    return outcome


def bumped(job, **changes):
    """The job's state with the step counter incremented and `changes`."""
    state = dict(job.state)
    state.update(changes)
    state["n"] = job.state["n"] + 1
    return state


def hold(ctx, ms):
    """The step's "work": sleeps ms milliseconds; a lost claim stops it (the
    outcome would be stale and is dropped by the library)."""
    if not ctx.sleep(ms / 1000.0):
        raise RuntimeError("stopped: %s" % ctx.stop_reason)


def limits_of(spec):
    """The limit options of a `next` into a planned step (None releases)."""
    return {"concurrency_key": spec.get("ck"), "rate_limit": spec.get("rl"),
            "weight": spec.get("w")}


def flaky(job, spec):
    """A retry outcome for a planned flaky step (its first two attempts)."""
    if spec.get("flaky") and job.attempt < 2:
        return ledger(gd.retry(random.uniform(0.05, 0.3),
                               {"message": "flaky", "attempt": job.attempt}), job,
                      {"rate": spec.get("rl"), "w": spec.get("w")})
    return None


def planned_step(job, ctx, after):
    """Runs step n of a planned chain (state plan[n]); `after` builds the
    outcome once the plan is over."""
    plan, n = job.state["plan"], job.state["n"]
    if n >= len(plan):
        return after(job, ctx)
    spec = plan[n]
    hold(ctx, spec["ms"])
    again = flaky(job, spec)
    if again is not None:
        return again
    info = {"rate": spec.get("rl"), "w": spec.get("w")}
    if n + 1 < len(plan):
        nxt = plan[n + 1]
        opts = limits_of(nxt)
        cont = bool(nxt.get("cont"))
    else:  # the last planned step: what follows runs without limits
        opts = {"concurrency_key": None, "rate_limit": None, "weight": None}
        cont = False
    return ledger(gd.next("work", bumped(job), continue_=cont,
                          lease=LEASE if cont else None, **opts), job, info)


# ----------------------------------------------------------------- joins

TERMINAL = ("done", "failed", "cancelled")


def check_join(job, kids, policy):
    """Checks the children list a join step was woken with against the
    fates of the round: returns 'ok' or what is wrong."""
    children = job.children
    if len(children) != len(kids):
        return "woken with %d children, %d spawned" % (len(children), len(kids))
    if [c["index"] for c in children] != list(range(len(kids))):
        return "child indexes %s not dense" % [c["index"] for c in children]
    live = [c for c in children if c["status"] not in TERMINAL]
    if live:
        return "woken while child %d is %s" % (live[0]["index"], live[0]["status"])
    statuses = [c["status"] for c in children]
    fates = [k["state"]["fate"] for k in kids]
    if policy == "all":
        want = ["failed" if f == "fail" else "done" for f in fates]
        if statuses != want:
            return "join all: statuses %s, fates %s" % (statuses, fates)
        return "ok"
    # first_error
    if "fail" not in fates:
        if statuses != ["done"] * len(fates):
            return "first_error without a failing fate: statuses %s" % statuses
        return "ok"
    if "failed" not in statuses:
        return "first_error: no child failed (statuses %s, fates %s)" % (statuses, fates)
    for status, fate in zip(statuses, fates):
        if status == "failed" and fate != "fail":
            return "first_error: a child of fate %s failed" % fate
        if status == "done" and fate == "fail":
            return "first_error: a child of fate fail is done"
    return "ok"


# --------------------------------------------------------------- handlers

def register(w):
    """The step handlers of the four machines."""

    @w.step("chain", "work")
    def chain_work(job, ctx):
        return planned_step(job, ctx, lambda job, ctx: ledger(
            gd.done({"n": job.state["n"], "len": len(job.state["plan"])}), job))

    @w.step("waiter", "start")
    def waiter_start(job, ctx):
        hold(ctx, random.uniform(1, 10))
        r = job.state["r"]
        return ledger(gd.await_(["go%d" % r], "woke", timeout=job.state["T"],
                                state=bumped(job)), job, {"round": r})

    @w.step("waiter", "woke")
    def waiter_woke(job, ctx):
        r, k = job.state["r"], job.state["k"]
        payload = job.awaited_payload("go%d" % r)
        sig, to = job.state["sig"], job.state["to"]
        if payload is not None:
            wake = "signal" if payload == {"k": k, "r": r} else "wrong payload %r" % (payload,)
            sig += 1
        elif job.timed_out:
            wake = "timeout"
            to += 1
        else:
            wake = "spurious (no awaited signal, not timed out; awaited %r)" % (job.awaited,)
        hold(ctx, random.uniform(1, 10))
        cont = random.random() < 0.5
        return ledger(gd.next("ack", bumped(job, r=r + 1, sig=sig, to=to), continue_=cont,
                              lease=LEASE if cont else None), job,
                      {"round": r, "wake": wake, "inbox": len(job.inbox)})

    @w.step("waiter", "ack")
    def waiter_ack(job, ctx):
        r = job.state["r"]
        hold(ctx, random.uniform(1, 10))
        if r < job.state["R"]:
            return ledger(gd.await_(["go%d" % r], "woke", timeout=job.state["T"],
                                    state=bumped(job)), job, {"round": r})
        return ledger(gd.done({"sig": job.state["sig"], "to": job.state["to"],
                               "R": job.state["R"]}), job)

    @w.step("parent", "start")
    def parent_start(job, ctx):
        hold(ctx, random.uniform(1, 10))
        rnd = job.state["rounds"][0]
        return ledger(gd.spawn(rnd["kids"], "join", join=rnd["join"],
                               state=bumped(job, r=0)), job,
                      {"round": 0, "kids": len(rnd["kids"]), "join": rnd["join"]})

    @w.step("parent", "join")
    def parent_join(job, ctx):
        r, rounds = job.state["r"], job.state["rounds"]
        check = check_join(job, rounds[r]["kids"], rounds[r]["join"])
        info = {"round": r, "join": rounds[r]["join"], "check": check,
                "statuses": [c["status"] for c in job.children]}
        if check != "ok":
            log.error("parent %d round %d: %s", job.id, r, check)
        hold(ctx, random.uniform(1, 10))
        if r + 1 < len(rounds):
            nxt = rounds[r + 1]
            info.update(next_round=r + 1, kids=len(nxt["kids"]), next_join=nxt["join"])
            return ledger(gd.spawn(nxt["kids"], "join", join=nxt["join"],
                                   state=bumped(job, r=r + 1)), job, info)
        return ledger(gd.done({"rounds": len(rounds)}), job, info)

    def child_end(job, ctx):
        fate = job.state["fate"]
        if fate == "fail":
            return ledger(gd.fail({"reason": "designed"}), job)
        if fate == "wait":
            return ledger(gd.await_(["never"], "after", timeout=job.state.get("T", 1.5),
                                    state=bumped(job)), job)
        if fate == "nest":
            kids = [{"fsm": "child", "queue": "qb", "step": "work", "max_attempts": 100,
                     "state": {"n": 0, "fate": "ok",
                               "plan": [{"ms": random.randint(5, 40)}]}}
                    for _ in range(2)]
            return ledger(gd.spawn(kids, "joined", join="all",
                                   state=bumped(job, nest=kids)), job,
                          {"round": 0, "kids": len(kids), "join": "all"})
        return ledger(gd.done({"n": job.state["n"]}), job)

    @w.step("child", "work")
    def child_work(job, ctx):
        return planned_step(job, ctx, child_end)

    @w.step("child", "after")
    def child_after(job, ctx):
        return ledger(gd.done({"waited": True, "timed_out": job.timed_out}), job)

    @w.step("child", "joined")
    def child_joined(job, ctx):
        check = check_join(job, job.state["nest"], "all")
        if check != "ok":
            log.error("child %d: %s", job.id, check)
        return ledger(gd.done({"nested": len(job.children)}), job,
                      {"round": 0, "join": "all", "check": check,
                       "statuses": [c["status"] for c in job.children]})


def main(argv):
    parser = argparse.ArgumentParser(description="gen_durable chaos soak worker")
    parser.add_argument("--queues", default="qa,qb")
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--lease", type=float, default=LEASE)
    args = parser.parse_args(argv)

    def build():
        worker = gd.Worker([q for q in args.queues.split(",") if q],
                           concurrency=args.concurrency, batch=args.batch, lease=args.lease,
                           poll_wait=2.0, retry_base=0.2, retry_cap=2.0)
        # the library's control connection (flush, heartbeat, release), with the ledger
        worker._control = LedgerDatabase(worker._conninfo, worker.worker_id)
        register(worker)
        return worker
    return gd.serve(build)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
