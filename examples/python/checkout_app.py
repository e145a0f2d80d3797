#!/usr/bin/env python3
"""checkout_app.py: the checkout workload of examples/checkout/README.md.

Handlers of the `checkout` machine (start, collect, charge) and of its
`line_item` children (start, ship), run by gen_durable_worker, with the
command line of the contract:

    checkout_app.py [--queues orders,items] [--concurrency 8] [--batch 20]

Connects with DATABASE_URL or the PG* environment, prints `ready <worker id>`
once picking and `stopped <worker id>` after a graceful shutdown (SIGTERM or
SIGINT) on stdout, and logs to stderr.
"""

import argparse
import random
import sys

import gen_durable_worker as gd


def register_handlers(w):
    """Registers the five step handlers of the workload on worker `w`."""

    @w.step("checkout", "start")
    def plan_lines(job, ctx):
        """Spawns one line_item child per line of the order, then joins them."""
        order, lines = job.state["order"], job.state["lines"]
        children = [{"fsm": "line_item", "queue": "items", "max_attempts": 5,
                     "state": {"order": order, "line": line, "price": 10 * line}}
                    for line in range(1, lines + 1)]
        return gd.spawn(children, "collect", join="all")

    @w.step("checkout", "collect")
    def collect_lines(job, ctx):
        """Totals the shipped lines and waits for the payment."""
        if any(child["status"] != "done" for child in job.children):
            return gd.fail({"reason": "line failed"})
        total = sum(child["result"]["price"] for child in job.children)
        state = {"order": job.state["order"], "lines": job.state["lines"], "total": total}
        return gd.await_(["paid"], "charge", timeout="60 s", state=state)

    @w.step("checkout", "charge")
    def charge(job, ctx):
        """Checks the paid amount against the total and finishes the order."""
        if job.timed_out:
            return gd.fail({"reason": "payment timeout"})
        payment = job.awaited_payload("paid")
        if payment is None:
            raise RuntimeError("charge ran without a paid signal")
        order, total = job.state["order"], job.state["total"]
        if payment["amount"] != total:
            return gd.fail({"reason": "amount mismatch"})
        return gd.done({"order": order, "total": total, "paid": payment["amount"]})

    @w.step("line_item", "start")
    def reserve(job, ctx):
        """The flaky reservation: fails the first try of every tenth line, then
        goes on to ship under the shipping rate limit and a warehouse gate."""
        order, line = job.state["order"], job.state["line"]
        if (order * 7 + line) % 10 == 0 and job.attempt == 0:
            raise RuntimeError("reservation service unavailable (order %d line %d)"
                               % (order, line))
        return gd.next("ship", continue_=True, rate_limit="shipping_api",
                       concurrency_key="warehouse:%d" % (line % 3))

    @w.step("line_item", "ship")
    def ship(job, ctx):
        """The shipping API call: 5 to 20 ms."""
        if not ctx.sleep(random.uniform(0.005, 0.020)):
            raise RuntimeError("stopped while shipping: " + ctx.stop_reason)
        state = job.state
        return gd.done({"order": state["order"], "line": state["line"],
                        "price": state["price"], "shipped": True})


def parse_args(argv):
    """Parses the contract's command line."""
    parser = argparse.ArgumentParser(description="gen_durable checkout worker (Python)")
    parser.add_argument("--queues", default="orders,items",
                        help="comma-separated queues to pick from (default orders,items)")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="most steps running at once (default 8)")
    parser.add_argument("--batch", type=int, default=20,
                        help="most jobs one pick claims (default 20)")
    args = parser.parse_args(argv)
    args.queues = [name for name in args.queues.split(",") if name]
    return args


def main(argv):
    """Runs the worker until SIGTERM/SIGINT; returns the exit status."""
    args = parse_args(argv)

    def build():
        worker = gd.Worker(args.queues, concurrency=args.concurrency, batch=args.batch)
        register_handlers(worker)
        return worker
    return gd.serve(build)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
