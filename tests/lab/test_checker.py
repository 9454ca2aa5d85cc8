#!/usr/bin/python3
"""Checks of the lab's checker (lab/checker.py) on hand-made histories.

Each case is a small history of client operations (the invoke and
completion lines ticketd-load writes) and a database snapshot made by hand:
one for each kind of violation, which the checker must flag with a witness
naming the operations that make it, and clean ones (unknown outcomes
resolved by a later retry of the same key), which it must pass. Prints
"ok"/"FAIL" per check and ends with "checker: N checks, M failed";
scripts/run-tests.sh counts each check as one.
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "lab"))

import checker  # noqa: E402

checks = 0
failed = 0


def ok(cond, what):
    global checks, failed
    checks += 1
    if cond:
        print("ok    checker: %s" % what)
    else:
        failed += 1
        print("FAIL  checker: %s" % what)


class History:
    """Builds a history: op() adds an invoke line and its completion."""

    def __init__(self):
        self.events = []
        self.n = 0

    def op(self, process, f, t, end_t, kind, key=None, token=None, body=None, order_no=None,
           **end):
        self.n += 1
        inv = {"type": "invoke", "op": self.n, "process": process, "f": f, "time": t}
        if key:
            inv["key"] = key
        if token:
            inv["token"] = token
        if body is not None:
            inv["body"] = body
        if order_no and f == "cancel":
            inv["order_no"] = order_no
        self.events.append(inv)
        if kind is not None:
            done = {"type": kind, "op": self.n, "process": process, "f": f, "time": end_t}
            if key:
                done["key"] = key
            if order_no and f != "cancel":
                done["order_no"] = order_no
            done.update(end)
            self.events.append(done)
        return self.n

    def create(self, user, key, t, kind, status=None, order_no=None, session=1, token=None,
               **end):
        if status is not None:
            end["status"] = status
        return self.op(user, "create", t, t + 0.02, kind, key=key, token=token,
                       body={"session_id": session, "quantity": 1}, order_no=order_no, **end)


def order(no, user, key, session=1, status="PENDING_PAYMENT", quantity=1):
    return {"order_no": no, "user_id": user, "session_id": session, "request_id": key,
            "quantity": quantity, "status": status}


def snapshot(orders=(), sessions=None, payments=(), refunds=()):
    return {"orders": list(orders),
            "sessions": sessions if sessions is not None else [{"id": 1, "capacity": 100,
                                                               "stock": 90}],
            "payments": list(payments), "refunds": [{"txn_id": t} for t in refunds]}


def judge(h, snap):
    return checker.check(checker.history_from_events(h.events), snap)


def flags(name, h, snap, kind, ops_named, text_has=()):
    """The checker flags exactly `kind`, and its witness names ops_named."""
    res = judge(h, snap)
    ok(list(res["violations"]) == [kind],
       "%s: flagged as %s (got %s)" % (name, kind, res["violations"]))
    wit = [w for w in res["witnesses"] if w["kind"] == kind]
    named = sorted(o["op"] for o in wit[0]["ops"]) if wit else []
    ok(named == sorted(ops_named),
       "%s: the witness names ops %s (got %s)" % (name, sorted(ops_named), named))
    if wit:
        missing = [t for t in text_has if t not in wit[0]["text"]]
        ok(not missing, "%s: the witness says %s (%s)" % (name, list(text_has), wit[0]["text"]))


def main():
    # Two orders for one key, each told to a copy.
    h = History()
    a = h.create(7, "k-17", 0.41, "ok", 201, "O-01")
    b = h.create(7, "k-17", 0.43, "ok", 201, "O-02")
    flags("two orders for one key", h,
          snapshot([order("O-01", 7, "k-17"), order("O-02", 7, "k-17")]),
          "duplicate-order", [a, b], ("user 7, key k-17", "O-01", "O-02", "two orders"))

    # The second order told to no one: its copy's answer was lost (info).
    h = History()
    a = h.create(7, "k-18", 0.10, "ok", 201, "O-11")
    b = h.create(7, "k-18", 0.12, "info", error="Operation timed out")
    flags("a second order behind a lost answer", h,
          snapshot([order("O-11", 7, "k-18"), order("O-12", 7, "k-18")]),
          "duplicate-order", [a, b], ("O-12", "no client was told"))

    # The same order told new twice.
    h = History()
    a = h.create(8, "k-2", 0.1, "ok", 201, "O-03")
    b = h.create(8, "k-2", 0.1, "ok", 201, "O-03")
    flags("one order told new twice", h, snapshot([order("O-03", 8, "k-2")]),
          "told-new-twice", [a, b], ("told new twice",))

    # Two orders made with one token, under two keys.
    h = History()
    a = h.create(9, "k-3", 0.1, "ok", 201, "O-04", token="tok-abcdefgh12345678")
    b = h.create(9, "k-4", 0.1, "ok", 201, "O-05", token="tok-abcdefgh12345678")
    flags("one token, two orders", h,
          snapshot([order("O-04", 9, "k-3"), order("O-05", 9, "k-4")]),
          "token-reused", [a, b], ("two orders with one token",))

    # Two orders of one key made with its one token: a duplicate order,
    # not a token used by two keys.
    h = History()
    a = h.create(9, "k-3b", 0.1, "ok", 201, "O-04b", token="tok-same-key")
    b = h.create(9, "k-3b", 0.1, "ok", 201, "O-05b", token="tok-same-key")
    flags("two orders of one key, one token", h,
          snapshot([order("O-04b", 9, "k-3b"), order("O-05b", 9, "k-3b")]),
          "duplicate-order", [a, b])

    # More seats held than the session has.
    h = History()
    h.create(10, "k-5", 0.1, "ok", 201, "O-06", session=2)
    b = h.create(11, "k-6", 0.2, "ok", 201, "O-07", session=2)
    flags("oversold", h,
          snapshot([order("O-06", 10, "k-5", session=2), order("O-07", 11, "k-6", session=2)],
                   sessions=[{"id": 2, "capacity": 1, "stock": 0}]),
          "oversold", [b], ("session 2: capacity 1, 2 seats held",))

    # Told ORDER_TOKEN_INVALID for a key that has its order.
    h = History()
    a = h.create(12, "k-7", 0.1, "ok", 201, "O-09")
    b = h.create(12, "k-7", 0.3, "fail", 409, code="ORDER_TOKEN_INVALID", layer="token")
    flags("refused although the key has its order", h, snapshot([order("O-09", 12, "k-7")]),
          "refused-with-order", [a, b], ("op %d was told 409 ORDER_TOKEN_INVALID" % b, "O-09"))

    # A failure stored and replayed to a retry.
    h = History()
    a = h.create(13, "k-8", 0.1, "info", 503, code="DEPENDENCY_UNAVAILABLE")
    b = h.create(13, "k-8", 1.2, "info", 503, code="DEPENDENCY_UNAVAILABLE", replayed=True)
    flags("a failure replayed", h, snapshot(), "failure-replayed", [a, b],
          ("a failure replayed",))

    # Told 201 for an order the database does not have.
    h = History()
    a = h.create(14, "k-9", 0.1, "ok", 201, "O-404")
    flags("an answered order lost", h, snapshot(), "lost-order", [a],
          ("O-404", "no such order"))

    # An order both paid and cancelled.
    h = History()
    p = h.op("gateway", "pay", 0.5, 0.55, "ok", body={"txn_id": "t-1", "order_no": "O-P"},
             status=200, outcome="APPLIED")
    c = h.op(15, "cancel", 0.5, 0.56, "ok", order_no="O-P", status=200)
    flags("paid and cancelled", h,
          snapshot([order("O-P", 15, "k-p", status="CANCELLED")],
                   payments=[{"txn_id": "t-1", "order_no": "O-P", "outcome": "APPLIED",
                              "status": "SUCCESS"}]),
          "paid-and-cancelled", [p, c], ("order O-P", "paid and cancelled"))

    # Two payments applied to one order.
    h = History()
    p1 = h.op("gateway", "pay", 0.5, 0.55, "ok", body={"txn_id": "t-2", "order_no": "O-Q"},
              status=200, outcome="APPLIED")
    p2 = h.op("gateway", "pay", 0.5, 0.56, "ok", body={"txn_id": "t-3", "order_no": "O-Q"},
              status=200, outcome="APPLIED")
    flags("paid twice", h,
          snapshot([order("O-Q", 16, "k-q", status="PAID")],
                   payments=[{"txn_id": t, "order_no": "O-Q", "outcome": "APPLIED",
                              "status": "SUCCESS"} for t in ("t-2", "t-3")]),
          "double-applied", [p1, p2], ("t-2", "t-3"))

    # A payment applied and also sent back for refund.
    h = History()
    p = h.op("gateway", "pay", 0.5, 0.55, "ok", body={"txn_id": "t-4", "order_no": "O-R"},
             status=200, outcome="APPLIED")
    flags("applied and refunded", h,
          snapshot([order("O-R", 17, "k-r", status="PAID")],
                   payments=[{"txn_id": "t-4", "order_no": "O-R", "outcome": "APPLIED",
                              "status": "SUCCESS"}], refunds=["t-4"]),
          "applied-and-refunded", [p], ("t-4",))

    # Points credited twice for one paid order (a redelivered event).
    h = History()
    p = h.op("gateway", "pay", 0.5, 0.55, "ok", body={"txn_id": "t-5", "order_no": "O-W"},
             status=200, outcome="APPLIED")
    paid = order("O-W", 18, "k-w", status="PAID")
    paid["amount_cents"] = 1000
    snap = snapshot([paid])
    snap["points"] = [{"user_id": 18, "points": 20}]
    flags("points credited twice", h, snap, "points-wrong", [p],
          ("user 18: 20 points, 10 expected", "credited twice"))
    snap["points"] = [{"user_id": 18, "points": 10}]
    res = judge(h, snap)
    ok(res["violations"] == {}, "points once per paid order: no violation (got %s)"
       % res["violations"])

    # Clean: unknown outcomes resolved by a later retry of the same key (a
    # timeout whose order the retry is answered with; a 503 that did
    # nothing, then a retry that made the order), copies told "in
    # progress", a refusal for a key without an order.
    h = History()
    h.create(20, "r-1", 0.1, "info", error="Operation timed out")
    h.create(20, "r-1", 1.2, "ok", 201, "O-S", replayed=True, layer="unique-index")
    h.create(21, "r-2", 0.1, "info", 503, code="DEPENDENCY_UNAVAILABLE")
    h.create(21, "r-2", 1.1, "ok", 201, "O-T")
    h.create(21, "r-2", 1.1, "fail", 409, code="REQUEST_IN_PROGRESS", layer="inflight-key")
    h.create(22, "r-3", 0.2, "fail", 409, code="ORDER_TOKEN_INVALID", layer="token")
    # A retry sent with another key's spent token, answered with its own
    # order replayed: one order per token still.
    h.create(23, "r-4", 0.1, "ok", 201, "O-U", token="tok-A")
    h.create(23, "r-5", 0.1, "ok", 201, "O-V", token="tok-B")
    h.create(23, "r-4", 0.5, "ok", 201, "O-U", token="tok-B", replayed=True, layer="unique-index")
    res = judge(h, snapshot([order("O-S", 20, "r-1"), order("O-T", 21, "r-2"),
                             order("O-U", 23, "r-4"), order("O-V", 23, "r-5")]))
    ok(res["violations"] == {} and res["witnesses"] == [],
       "resolved unknowns: no violation (got %s)" % res["violations"])
    ok(res["unknown"] == 2 and res["unknown_resolved"] == 2,
       "resolved unknowns: 2 unknown, 2 resolved (got %d, %d)"
       % (res["unknown"], res["unknown_resolved"]))

    # The command line: a history file and a snapshot file; exit 2 and the
    # first witness printed when a rule is broken, 0 when none is.
    with tempfile.TemporaryDirectory() as tmp:
        hist = os.path.join(tmp, "h.jsonl")
        snap = os.path.join(tmp, "s.json")
        h = History()
        h.create(7, "k-17", 0.41, "ok", 201, "O-01")
        h.create(7, "k-17", 0.43, "ok", 201, "O-02")
        with open(hist, "w") as f:
            f.write("".join(json.dumps(e) + "\n" for e in h.events))
        with open(snap, "w") as f:
            json.dump(snapshot([order("O-01", 7, "k-17"), order("O-02", 7, "k-17")]), f)
        run = subprocess.run([sys.executable, os.path.join(ROOT, "lab", "checker.py"), hist,
                              "--snapshot", snap], capture_output=True, text=True)
        ok(run.returncode == 2 and "duplicate-order: user 7, key k-17" in run.stdout,
           "checker.py exits 2 and prints the first witness (%d: %s)"
           % (run.returncode, run.stdout.strip().replace("\n", " | ")))
        with open(snap, "w") as f:
            json.dump(snapshot([order("O-01", 7, "k-17")]), f)
        with open(hist, "w") as f:
            f.write(json.dumps(h.events[0]) + "\n" + json.dumps(h.events[1]) + "\n")
        run = subprocess.run([sys.executable, os.path.join(ROOT, "lab", "checker.py"), hist,
                              "--snapshot", snap], capture_output=True, text=True)
        ok(run.returncode == 0 and "no violation" in run.stdout,
           "checker.py exits 0 on a clean history (%d: %s)" % (run.returncode, run.stdout.strip()))

        # The lab's first line (the run's seed and the command that repeats
        # it, lab/runner.py:write_history_head) is no operation: the
        # history reads as before, and the line is first.
        import runner

        with open(hist, "w") as f:
            f.write("".join(json.dumps(e) + "\n" for e in h.events))
        before = checker.read_history(hist)
        runner.write_history_head(hist, {"lesson": "stock-cas", "pass": "without", "seed": 4242,
                                         "repeat": "make lesson L=stock-cas LAB_ARGS='--seed 4242'"})
        with open(hist) as f:
            head = json.loads(f.readline())
        after = checker.read_history(hist)
        ok(head.get("type") == "run" and head.get("seed") == 4242 and after == before
           and len(after) == 2, "the run's head line (seed %s) leaves the history's %d operations "
           "as they were" % (head.get("seed"), len(after)))

    print("checker: %d checks, %d failed" % (checks, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
