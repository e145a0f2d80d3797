#!/usr/bin/env python3
"""examples/checkout/driver.py - the driver of the checkout workload.

The contract is examples/checkout/README.md: this program plays the shop
(orders come in), the payment provider (a webhook signals each order's
payment) and the customers (every 20th order is cancelled), while worker
processes in any language run the `checkout` and `line_item` machines.  It
then reports and checks what the workers did.

    driver.py setup                    the extension, the limits, zeroed stats
    driver.py run --orders N [--rate R] [--progress]
                                       N checkouts arriving at R a second, their
                                       payments and cancellations, until every
                                       instance has ended
    driver.py summary                  the final tables: instances per machine
                                       and status, gen_durable.queues,
                                       gen_durable.stats
    driver.py verify [--orders N]      every check of the contract; exits 1 and
                                       says what is wrong on any violation

It connects like the worker apps: with DATABASE_URL when set, otherwise
with the libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE).  Every
statement autocommits and nothing is prepared, so it also works through
PgBouncer in transaction pooling mode.  Needs Python 3 and psycopg 3
(Debian: python3-psycopg).  Used as a module, run_orders(), summary(),
verify() and progress_line() are the same steps.
"""

import argparse
import json
import os
import random
import shutil
import sys
import time

import psycopg
from psycopg.types.json import Jsonb

CANCEL_EVERY = 20               # orders with k % 20 == 0 are cancelled
STATUSES = ("runnable", "executing", "awaiting_signal", "awaiting_children",
            "done", "failed", "cancelled")
TERMINAL = STATUSES[4:]


def connect():
    """One autocommit connection from DATABASE_URL or the PG* environment."""
    return psycopg.connect(os.environ.get("DATABASE_URL", ""),
                           autocommit=True, prepare_threshold=None)


def lines_of(k):
    """How many line items order k has (1 to 5)."""
    return 1 + k % 5


def total_of(k):
    """What order k costs: line j costs 10 * j."""
    m = lines_of(k)
    return 10 * m * (m + 1) // 2


def is_cancelled(k):
    """Whether the customer of order k cancels it."""
    return k % CANCEL_EVERY == 0


def is_flaky(k, j):
    """Whether line j of order k fails its first reservation attempt."""
    return (k * 7 + j) % 10 == 0


# ---------------------------------------------------------------- setup

def setup(conn):
    """Creates the extension if needed, configures the contract's limits and
    zeroes the (cluster-wide) counters so that summary counts this run."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS gen_durable")
    conn.execute("SELECT gen_durable.set_rate_limit('shipping_api', 500, '1 second', burst => 50)")
    conn.execute("SELECT gen_durable.set_concurrency_limit('warehouse', 2)")
    conn.execute("SELECT gen_durable.reset_stats()")


# ----------------------------------------------------------- monitoring

def stats(conn):
    """gen_durable.stats as a dict (empty without shared_preload_libraries)."""
    try:
        return dict(conn.execute("SELECT counter, value FROM gen_durable.stats").fetchall())
    except psycopg.Error:
        return {}


def queues(conn):
    """gen_durable.queues as a dict: queue -> row (a dict of its columns)."""
    cur = conn.execute("SELECT * FROM gen_durable.queues ORDER BY queue")
    names = [c.name for c in cur.description]
    return {row[0]: dict(zip(names, row)) for row in cur.fetchall()}


def status_counts(conn):
    """Instances per (fsm, status)."""
    rows = conn.execute("SELECT fsm, status::text, count(*) FROM gen_durable.instances"
                        " GROUP BY 1, 2").fetchall()
    return {(fsm, status): n for fsm, status, n in rows}


def check_outcomes(conn):
    """Raises SystemExit once flush has answered any outcome `invalid`
    (counted since setup): the workload's handlers return only well-formed
    outcomes, so one is a bug of the worker app or its library, such as an
    outcome sent without its claim on a server with gen_durable.require_claim
    on.  The run stops at once rather than wait for instances that cannot end."""
    n = stats(conn).get("invalid_outcomes", 0)
    if n:
        raise SystemExit(f"driver: flush answered {n} outcome(s) 'invalid' (is the worker app sending"
                         " each outcome with its job's claim? see the workers' logs)")


def steps_of(st):
    """Outcomes committed so far, from the stats counters."""
    return sum(v for c, v in st.items() if c.startswith("committed_"))


def progress_line(conn, n_orders, started):
    """One line: where the orders are (from the status counts), the line
    items waiting or running (from gen_durable.queues), steps, retries and
    throttled picks (from gen_durable.stats).  Returns (line, live), live
    counting the instances that have not ended."""
    counts = status_counts(conn)
    items = queues(conn).get("items", {})
    st = stats(conn)

    def c(fsm, *statuses):
        """Instances of fsm in any of statuses."""
        return sum(counts.get((fsm, s), 0) for s in statuses)

    elapsed = time.monotonic() - started
    steps = steps_of(st)
    live = sum(n for (_, s), n in counts.items() if s not in TERMINAL)
    line = (f"{elapsed:5.1f}s orders {c('checkout', *STATUSES)}/{n_orders}: "
            f"{c('checkout', 'done')} done, {c('checkout', 'awaiting_signal')} paying, "
            f"{c('checkout', 'awaiting_children')} shipping, "
            f"{c('checkout', 'runnable', 'executing')} busy, "
            f"{c('checkout', 'cancelled')} cancelled, {c('checkout', 'failed')} failed"
            f" | items {c('line_item', 'done')}/{c('line_item', *STATUSES)} done, "
            f"{items.get('due', 0) + items.get('scheduled', 0)} queued"
            f" | {steps} steps {steps / elapsed if elapsed > 0 else 0:.0f}/s, "
            f"{st.get('committed_retry', 0)} retries, "
            f"{st.get('throttled_rate', 0) + st.get('throttled_conc', 0)} throttled")
    return line, live


class Progress:
    """The live display: one line redrawn in place on a terminal, a line
    every `every` seconds otherwise; silent when not enabled."""

    def __init__(self, enabled, every=2.0):
        self.enabled = enabled
        self.tty = sys.stdout.isatty()
        self.every = 0.25 if self.tty else every
        self.last = 0.0

    def due(self):
        """Whether it is time for another line."""
        return self.enabled and time.monotonic() - self.last >= self.every

    def show(self, line, final=False):
        """Prints the line (redrawn on a terminal); final ends it."""
        if not self.enabled:
            return
        self.last = time.monotonic()
        if self.tty:
            width = shutil.get_terminal_size().columns
            sys.stdout.write("\r" + line[:width - 1] + "\x1b[K" + ("\n" if final else ""))
        else:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()


# ------------------------------------------------------------------ run

def schedule(n_orders, rate, batch, rng):
    """The events of a run, as (time, kind, k) sorted by time: the arrival of
    each batch of orders ('insert', k = its first order), each payment
    ('pay') 0.2 to 3 s after its order arrived (so some land in the inbox
    before the order awaits them), and each cancellation ('cancel') 0 to 4 s
    after its order arrived (so orders are cancelled in every status)."""
    events = []
    for first in range(1, n_orders + 1, batch):
        at = (first - 1) / rate if rate > 0 else 0.0
        events.append((at, "insert", first))
        for k in range(first, min(first + batch, n_orders + 1)):
            if is_cancelled(k):
                events.append((at + rng.uniform(0, 4), "cancel", k))
            else:
                events.append((at + rng.uniform(0.2, 3), "pay", k))
    order = {"insert": 0, "pay": 1, "cancel": 1}
    events.sort(key=lambda e: (e[0], order[e[1]], e[2]))
    return events


def insert_orders(conn, first, last):
    """Inserts checkouts first..last with one insert_many; returns {k: id}."""
    specs = [{"fsm": "checkout", "queue": "orders", "correlation_key": f"order-{k}",
              "max_attempts": 5, "state": {"order": k, "lines": lines_of(k)}}
             for k in range(first, last + 1)]
    rows = conn.execute("SELECT ord, id, created FROM gen_durable.insert_many(%s)",
                        [Jsonb(specs)]).fetchall()
    refused = [first + ord_ for ord_, _, created in rows if not created]
    if refused:
        raise SystemExit(f"driver: order-{refused[0]} already exists: run against a fresh"
                         " database (driver.py setup in a new one)")
    return {first + ord_: id_ for ord_, id_, _ in rows}


def send_payments(conn, ks):
    """The webhook: signals 'paid' to each order of ks by its key, in one
    statement; dedup_key makes a resend harmless, so a batch that hit a
    deadlock with a worker's flush is simply sent again.  Returns
    {answer: count}."""
    batch = [{"key": f"order-{k}", "payload": {"amount": total_of(k)}, "dedup": f"pay-{k}"}
             for k in sorted(ks)]
    for attempt in range(5):
        try:
            rows = conn.execute(
                "SELECT gen_durable.signal(p.key, 'paid', p.payload, dedup_key => p.dedup)"
                "  FROM jsonb_to_recordset(%s) AS p(key text, payload jsonb, dedup text)",
                [Jsonb(batch)]).fetchall()
            break
        except psycopg.errors.DeadlockDetected:
            if attempt == 4:
                raise
    answers = {}
    for (answer,) in rows:
        answers[answer] = answers.get(answer, 0) + 1
    return answers


def run_orders(conn, n_orders, rate=50.0, batch=25, seed=1, timeout=300.0, progress=None):
    """Plays the shop, the webhook and the customers: inserts n_orders
    checkouts in batches at `rate` orders a second (0: all at once), pays
    each order that is not cancelled and cancels the others, while the
    workers run, then waits until no instance is live.  Returns a dict of
    what was sent; raises SystemExit after `timeout` seconds without the end."""
    progress = progress or Progress(False)
    rng = random.Random(seed)
    events = schedule(n_orders, rate, batch, rng)
    ids = {}
    sent = {"inserted": 0, "cancelled": 0, "signals": {}}
    started = time.monotonic()
    checked = started
    i = 0
    while i < len(events):
        now = time.monotonic() - started
        pays = []
        while i < len(events) and events[i][0] <= now:
            _, kind, k = events[i]
            if kind == "insert":
                ids.update(insert_orders(conn, k, min(k + batch - 1, n_orders)))
                sent["inserted"] = len(ids)
            elif kind == "pay":
                pays.append(k)
            else:
                ended = conn.execute("SELECT gen_durable.cancel(%s, 'customer cancelled')",
                                     [ids[k]]).fetchone()[0]
                sent["cancelled"] += 1 if ended else 0
            i += 1
        if pays:
            for answer, n in send_payments(conn, pays).items():
                sent["signals"][answer] = sent["signals"].get(answer, 0) + n
        if progress.due():
            progress.show(progress_line(conn, n_orders, started)[0])
        if time.monotonic() - checked >= 1.0:
            check_outcomes(conn)
            checked = time.monotonic()
        if i < len(events):
            time.sleep(max(0.0, min(0.05, events[i][0] - (time.monotonic() - started))))

    deadline = time.monotonic() + timeout
    while True:
        check_outcomes(conn)
        line, live = progress_line(conn, n_orders, started)
        if live == 0:
            progress.show(line, final=True)
            break
        if time.monotonic() > deadline:
            progress.show(line, final=True)
            raise SystemExit(f"driver: {live} instances still live {timeout:.0f} s after the"
                             " last order, payment and cancel were sent (are workers running?)")
        if progress.due():
            progress.show(line)
        time.sleep(0.1)
    sent["seconds"] = round(time.monotonic() - started, 1)
    return sent


# -------------------------------------------------------------- summary

def table(title, header, rows):
    """Prints rows (tuples) as an aligned text table under a title."""
    cells = [[str(h) for h in header]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for n, r in enumerate(cells):
        print("  " + "  ".join(v.rjust(w) if n and v.replace(".", "").isdigit() else v.ljust(w)
                               for v, w in zip(r, widths)).rstrip())
        if n == 0:
            print("  " + "  ".join("-" * w for w in widths))


def summary(conn):
    """Prints the final tables: instances per machine and status, the
    gen_durable.queues view, and the gen_durable.stats counters that moved."""
    counts = status_counts(conn)
    fsms = sorted({fsm for fsm, _ in counts})
    table("instances per machine and status", ("fsm",) + STATUSES,
          [(fsm,) + tuple(counts.get((fsm, s), 0) for s in STATUSES) for fsm in fsms])
    q = queues(conn)
    cols = ("due", "scheduled", "executing", "awaiting_signal", "awaiting_children",
            "done", "failed", "cancelled")
    table("gen_durable.queues", ("queue",) + cols,
          [(name,) + tuple(row[c] for c in cols) for name, row in q.items()])
    st = stats(conn)
    if st:
        moved = [(c, v) for c, v in st.items() if v]
        half = (len(moved) + 1) // 2
        left, right = moved[:half], moved[half:] + [("", "")] * (2 * half - len(moved))
        table(f"gen_durable.stats ({steps_of(st)} outcomes committed; zero counters left out)",
              ("counter", "value", "counter", "value"),
              [a + b for a, b in zip(left, right)])


# --------------------------------------------------------------- verify

def verify(conn, n_orders=None):
    """Checks every promise of the contract against the database; returns a
    list of violations (strings), empty when all hold, and prints what was
    checked."""
    orders = conn.execute(
        "SELECT id, correlation_key, status::text, result, error FROM gen_durable.instances"
        " WHERE fsm = 'checkout'").fetchall()
    items = conn.execute(
        "SELECT parent_id, status::text, state, result, error FROM gen_durable.instances"
        " WHERE fsm = 'line_item'").fetchall()
    others = conn.execute(
        "SELECT fsm, count(*) FROM gen_durable.instances"
        " WHERE fsm NOT IN ('checkout', 'line_item') GROUP BY fsm").fetchall()
    live = conn.execute(
        "SELECT status::text, count(*) FROM gen_durable.instances"
        " WHERE status NOT IN ('done', 'failed', 'cancelled') GROUP BY 1 ORDER BY 1").fetchall()
    failed = conn.execute(
        "SELECT fsm, id, error FROM gen_durable.instances WHERE status = 'failed'"
        " ORDER BY id LIMIT 5").fetchall()
    n_failed = conn.execute(
        "SELECT count(*) FROM gen_durable.instances WHERE status = 'failed'").fetchone()[0]

    problems = {}

    def bad(check, example):
        """Records one case violating check."""
        problems.setdefault(check, []).append(example)

    by_key = {}
    for row in orders:
        by_key.setdefault(row[1], []).append(row)
    n = n_orders if n_orders is not None else len(orders)
    expected = {f"order-{k}" for k in range(1, n + 1)}
    for key in sorted(expected - by_key.keys(), key=lambda s: int(s[6:])):
        bad("every order was inserted once", f"{key} is missing")
    for key in sorted(by_key.keys() - expected):
        bad("every order was inserted once", f"unexpected checkout {key}")
    for key, rows in by_key.items():
        if len(rows) > 1:
            bad("every order was inserted once", f"{key} exists {len(rows)} times")
    for fsm, count in others:
        bad("only checkout and line_item instances", f"{count} instances of '{fsm}'")

    children = {}
    for parent, status, state, result, error in items:
        children.setdefault(parent, []).append((status, state, result, error))

    done = cancelled = cancelled_done = items_done = 0
    for k in range(1, n + 1):
        rows = by_key.get(f"order-{k}")
        if not rows or len(rows) > 1:
            continue
        id_, _, status, result, error = rows[0]
        m, total = lines_of(k), total_of(k)
        if status == "done":
            want = {"order": k, "total": total, "paid": total}
            if not isinstance(result, dict) or \
                    any(result.get(f) != v for f, v in want.items()):
                bad("a done order has result.total = result.paid = its total",
                    f"order-{k} (id {id_}): result {json.dumps(result)}, want {json.dumps(want)}")
            lines = children.get(id_, [])
            if len(lines) != m:
                bad("a done order has one line item per line",
                    f"order-{k} (id {id_}) has {len(lines)} line items, want {m}")
            for lstatus, state, lresult, _ in lines:
                j = state.get("line") if isinstance(state, dict) else None
                want_line = {"order": k, "line": j, "price": 10 * j if isinstance(j, int) else None,
                             "shipped": True}
                if lstatus != "done":
                    bad("every line item of a done order is done",
                        f"order-{k} line {j} is {lstatus}")
                elif lresult != want_line:
                    bad("a shipped line item's result is right",
                        f"order-{k} line {j}: result {json.dumps(lresult)}, want {json.dumps(want_line)}")
                else:
                    items_done += 1
            if is_cancelled(k):
                cancelled_done += 1
            else:
                done += 1
        elif status == "cancelled" and is_cancelled(k):
            cancelled += 1
            if not (isinstance(error, dict) and error.get("message") == "customer cancelled"):
                bad("a cancelled order was cancelled by the customer",
                    f"order-{k} (id {id_}): error {json.dumps(error)}")
        elif is_cancelled(k):
            bad("a cancelled order ends cancelled (or done)",
                f"order-{k} (id {id_}) is {status}: {json.dumps(error)}")
        else:
            bad("every order that is not cancelled is done",
                f"order-{k} (id {id_}) is {status}: {json.dumps(error)}")

    if n_failed:
        for fsm, id_, error in failed:
            bad("no instance failed", f"{fsm} {id_}: {json.dumps(error)}")
        if n_failed > len(failed):
            bad("no instance failed", f"... {n_failed} in all")
    for status, count in live:
        bad("nothing is left live (runnable, executing, awaiting)", f"{count} {status}")

    # The flaky reservations must have been retried: the first attempt
    # (attempt 0) of every flaky line of a done order raised, and so ended
    # in a committed retry, unless the reaper took the claim back first
    # (a killed worker): that counts the attempt too, and the next run, at
    # attempt 1, succeeds.  Counted since setup reset the counters.
    st = stats(conn)
    flaky = sum(1 for k in range(1, n + 1)
                for j in range(1, lines_of(k) + 1)
                if is_flaky(k, j) and not is_cancelled(k))
    tried = st.get("committed_retry", 0) + st.get("reaped", 0)
    if st and tried < flaky:
        bad("a failing reservation is retried",
            f"{st.get('committed_retry', 0)} retries committed and {st.get('reaped', 0)} claims"
            f" reaped, want at least {flaky} in all")
    if st.get("invalid_outcomes", 0):
        bad("no outcome is invalid (each names its claim, and every key is right)",
            f"flush answered {st['invalid_outcomes']} outcome(s) 'invalid'")

    if problems:
        for check, examples in problems.items():
            print(f"verify: VIOLATED: {check}: {len(examples)} case(s), e.g.")
            for e in examples[:5]:
                print(f"    {e}")
    else:
        print(f"verify: ok: {n} orders: {done} done and paid, {cancelled} cancelled, "
              f"{cancelled_done} done before their cancel arrived; {items_done} line items "
              f"shipped; at least {flaky} flaky reservations retried; no outcome invalid, "
              "nothing failed, nothing left live")
    return list(problems)


# ------------------------------------------------------------------ CLI

def main(argv=None):
    """The command line: setup | run | summary | verify."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("setup", help="create the extension, configure the limits, zero the stats")
    r = sub.add_parser("run", help="insert, pay and cancel orders while workers run")
    r.add_argument("--orders", type=int, required=True, help="how many checkouts (N)")
    r.add_argument("--rate", type=float, default=50.0,
                   help="orders arriving per second (0: all at once; default 50)")
    r.add_argument("--batch", type=int, default=25, help="orders per insert_many (default 25)")
    r.add_argument("--seed", type=int, default=1, help="seed of the payment and cancel times")
    r.add_argument("--timeout", type=float, default=300.0,
                   help="seconds to wait for the end after the last event (default 300)")
    r.add_argument("--progress", action="store_true",
                   help="show progress: one live line on a terminal, a line every 2 s otherwise")
    sub.add_parser("summary", help="print the final tables")
    v = sub.add_parser("verify", help="check the contract; exit 1 on any violation")
    v.add_argument("--orders", type=int, help="the N of the run (default: as many as inserted)")
    args = ap.parse_args(argv)

    with connect() as conn:
        if args.command == "setup":
            setup(conn)
            print("driver: limits set: shipping_api 500/s (burst 50), warehouse 2 per key")
        elif args.command == "run":
            sent = run_orders(conn, args.orders, args.rate, args.batch, args.seed,
                              args.timeout, Progress(args.progress))
            answers = ", ".join(f"{n} {a}" for a, n in sorted(sent["signals"].items()))
            print(f"driver: {sent['inserted']} orders in {sent['seconds']} s; payments: "
                  f"{answers or 'none'}; {sent['cancelled']} orders cancelled")
        elif args.command == "summary":
            summary(conn)
        else:
            return 1 if verify(conn, args.orders) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
