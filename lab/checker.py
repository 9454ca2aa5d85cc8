#!/usr/bin/python3
"""The lab's checker: a history of client operations and the database,
judged against ticketd's contract, each violation with its minimal witness.

  lab/checker.py HISTORY --snapshot FILE      a snapshot written by --save
  lab/checker.py HISTORY --port P --db NAME   read the database (mariadb CLI)
      [--save FILE] [--json FILE] [--all]

HISTORY is what `ticketd-load --history` writes (docs/lab.md): an "invoke"
line when an operation leaves and one completion line when it ends ("ok",
"fail" or "info"), paired by the operation's number, as in a Jepsen
history. The database gives what the operations did (orders, sessions,
payments); the history gives who was told what, and when. A violation is
reported with the few operations and rows that make it, e.g.

  duplicate-order: user 1042, key k-17: op 311 got 201 order ...01 at 0.41 s,
  op 318 got 201 order ...02 at 0.43 s: two orders for one key

An operation whose effect is unknown ("info": no answer, a reset, a 5xx) is
not a violation by itself: a later retry of the same key that is answered
with the key's one order resolves it. Exit status: 0 no violation, 2
violations found, 1 the input could not be read.

Standard library only; the database is read with the `mariadb` client.
"""

import argparse
import json
import os
import subprocess
import sys

# The kinds of violation, in the order they are reported, each with what it
# breaks in a few words.
KINDS = [
    ("duplicate-order", "two orders for one Idempotency-Key"),
    ("told-new-twice", "two answers told the same order is new"),
    ("token-reused", "two orders made with one order token"),
    ("oversold", "more seats held than the session has"),
    ("refused-with-order", "a client told its request was refused, for a key that has its order"),
    ("failure-replayed", "a retry answered with a stored failure"),
    ("lost-order", "a client told 201 for an order the database does not have"),
    ("paid-and-cancelled", "an order both paid and cancelled"),
    ("double-applied", "two payments applied to one order"),
    ("applied-and-refunded", "a payment applied and also sent back for refund"),
    ("points-wrong", "points credited other than once per paid order"),
]
KIND_TEXT = dict(KINDS)

# Refusals that say "not done" for a reason Redis vouched for: false when
# the key has its order (the client would buy again).
REFUSALS = ("ORDER_TOKEN_INVALID", "DUPLICATE_SUBMISSION")


class CheckError(Exception):
    pass


# --- the history ------------------------------------------------------------


def read_history(path):
    """The operations of a history file, by number, each a dict with the
    invoke's fields and "end" (the completion line, or None)."""
    ops = {}
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    raise CheckError("%s:%d: not JSON" % (path, n))
                add_event(ops, ev)
    except OSError as e:
        raise CheckError("cannot read %s: %s" % (path, e))
    return ops


def add_event(ops, ev):
    op = ev.get("op")
    if op is None:
        return
    if ev.get("type") == "invoke":
        ops[op] = dict(ev, end=None)
    elif op in ops:
        ops[op]["end"] = ev
    else:  # a completion without its invoke (a cut history): keep what it says
        ops[op] = dict(ev, type="invoke", time=ev.get("time"), end=ev)


def history_from_events(events):
    ops = {}
    for ev in events:
        add_event(ops, ev)
    return ops


def outcome(op):
    """"ok", "fail" or "info" (no completion counts as info: the client
    never learnt the outcome)."""
    end = op.get("end")
    return end.get("type", "info") if end else "info"


def answer_text(op):
    """The operation's answer in a few words: "201 replayed @unique-index"."""
    end = op.get("end")
    if not end:
        return "no completion (info)"
    if end.get("type") == "info" and not end.get("status"):
        return "no answer (%s)" % end.get("error", "info")
    words = [str(end.get("status"))]
    if end.get("code"):
        words.append(end["code"])
    if end.get("outcome"):
        words.append(end["outcome"])
    if end.get("replayed"):
        words.append("replayed")
    if end.get("layer"):
        words.append("@" + end["layer"])
    return " ".join(words)


def op_view(op):
    """What a witness shows of an operation: a short timeline entry."""
    end = op.get("end") or {}
    return {
        "op": op.get("op"),
        "process": op.get("process"),
        "f": op.get("f"),
        "key": op.get("key"),
        "sent": op.get("time"),
        "done": end.get("time"),
        "type": outcome(op),
        "status": end.get("status"),
        "code": end.get("code") or end.get("outcome"),
        "layer": end.get("layer"),
        "replayed": bool(end.get("replayed")),
        "order_no": end.get("order_no") or op.get("order_no"),
        "answer": answer_text(op),
    }


def op_phrase(op):
    end = op.get("end") or {}
    t = end.get("time", op.get("time"))
    return "op %s (sent %.2f s) got %s%s at %.2f s" % (
        op.get("op"), op.get("time") or 0.0, answer_text(op),
        (" order %s" % end["order_no"]) if end.get("order_no") else "", t or 0.0)


# --- the database -------------------------------------------------------------

SNAPSHOT_SQL = {
    "orders": "SELECT order_no, user_id, session_id, request_id, quantity, status, amount_cents "
              "FROM orders",
    "points": "SELECT user_id, points FROM user_points",
    "sessions": "SELECT id, capacity, stock FROM sessions",
    "payments": "SELECT p.txn_id, o.order_no, p.outcome, p.status FROM payments p "
                "JOIN orders o ON o.id = p.order_id",
    "refunds": "SELECT biz_key FROM outbox WHERE event_type = 'payment.refund_required'",
}
SNAPSHOT_COLS = {
    "orders": ["order_no", "user_id", "session_id", "request_id", "quantity", "status",
               "amount_cents"],
    "points": ["user_id", "points"],
    "sessions": ["id", "capacity", "stock"],
    "payments": ["txn_id", "order_no", "outcome", "status"],
    "refunds": ["txn_id"],
}
INT_COLS = {"user_id", "session_id", "quantity", "id", "capacity", "stock", "amount_cents",
            "points"}
PAID = ("PAID", "TICKETED", "COMPLETED")


def read_database(argv, env=None):
    """A snapshot of what the checker needs, read with the mariadb client
    (argv: its command, with connection and database, --batch
    --skip-column-names)."""
    snap = {}
    for table, sql in SNAPSHOT_SQL.items():
        res = subprocess.run(list(argv) + ["-e", sql], capture_output=True, text=True, env=env)
        if res.returncode != 0:
            raise CheckError("reading %s: %s" % (table, res.stderr.strip()))
        rows = []
        for line in res.stdout.splitlines():
            cells = line.split("\t")
            row = dict(zip(SNAPSHOT_COLS[table], cells))
            for k in row:
                if k in INT_COLS:
                    row[k] = int(row[k])
            rows.append(row)
        snap[table] = rows
    return snap


# --- the checks ---------------------------------------------------------------


def check(ops, snap, limit=5):
    """Judges the history against the database. Returns {"violations":
    {kind: count}, "witnesses": [first `limit` of each kind, in KINDS
    order], "ops", "unknown", "unknown_resolved"}."""
    found = {k: [] for k, _ in KINDS}
    creates = [op for op in ops.values() if op.get("f") in ("create", "cart")]
    by_key = {}
    for op in sorted(creates, key=lambda o: (o.get("time") or 0, o.get("op") or 0)):
        by_key.setdefault((op.get("process"), op.get("key")), []).append(op)
    orders = snap.get("orders", [])
    order_by_no = {o["order_no"]: o for o in orders}
    orders_of_key = {}
    for o in orders:
        orders_of_key.setdefault((o["user_id"], o["request_id"]), []).append(o)

    told_of = {}
    for op in sorted(creates, key=lambda o: (o.get("time") or 0, o.get("op") or 0)):
        no = (op.get("end") or {}).get("order_no")
        if outcome(op) == "ok" and no:
            told_of.setdefault(no, []).append(op)

    def told(order_no):
        """The operations that were answered with this order, first first."""
        return told_of.get(order_no, [])

    # Two orders for one key (the database says so; the history says who
    # was told which).
    for (user, key), rows in sorted(orders_of_key.items(), key=lambda x: str(x[0])):
        if len(rows) < 2:
            continue
        parts, wops = [], []
        for o in rows[:2]:
            t = told(o["order_no"])
            if t:
                parts.append(op_phrase(t[0]))
                wops.append(t[0])
            else:
                lost = [op for op in by_key.get((user, key), []) if outcome(op) == "info"]
                parts.append("order %s, which no client was told of%s" % (
                    o["order_no"], (" (op %s: %s)" % (lost[0]["op"], answer_text(lost[0])))
                    if lost else ""))
                if lost:
                    wops.append(lost[0])
        found["duplicate-order"].append(witness(
            "duplicate-order",
            "user %s, key %s: %s: %s orders for one key" % (
                user, key, ", ".join(parts), "two" if len(rows) == 2 else str(len(rows))),
            wops, [o for o in rows]))

    # Two answers telling the same order is new.
    for (user, key), kops in by_key.items():
        new = {}
        for op in kops:
            end = op.get("end") or {}
            if outcome(op) == "ok" and end.get("status") == 201 and not end.get("replayed") \
                    and end.get("order_no"):
                new.setdefault(end["order_no"], []).append(op)
        for no, nops in new.items():
            if len(nops) > 1:
                found["told-new-twice"].append(witness(
                    "told-new-twice",
                    "user %s, key %s: %s, %s: the same order told new twice (no "
                    "Idempotent-Replayed)" % (user, key, op_phrase(nops[0]), op_phrase(nops[1])),
                    nops[:2], [order_by_no[no]] if no in order_by_no else []))

    # One token, two orders (of different keys).
    by_token = {}
    for op in creates:
        end = op.get("end") or {}
        # Orders made (201, not replayed): a replay of a key's own order
        # under another token is that key's order, not a second one.
        if op.get("token") and outcome(op) == "ok" and end.get("order_no") \
                and end.get("status") == 201 and not end.get("replayed"):
            by_token.setdefault(op["token"], {}).setdefault(end["order_no"], op)
    for token, made in by_token.items():
        # Two orders of one key are a duplicate-order already; here two
        # keys each bought with the token.
        by_key_made = {}
        for op in made.values():
            by_key_made.setdefault(op.get("key"), op)
        if len(by_key_made) > 1:
            wops = list(by_key_made.values())[:2]
            made = {(op.get("end") or {}).get("order_no"): op for op in wops}
            found["token-reused"].append(witness(
                "token-reused",
                "user %s, token …%s: %s (key %s), %s (key %s): two orders with one token" % (
                    wops[0].get("process"), token[-8:], op_phrase(wops[0]), wops[0].get("key"),
                    op_phrase(wops[1]), wops[1].get("key")),
                wops, [order_by_no[n] for n in list(made)[:2] if n in order_by_no]))

    # Seats held beyond a session's capacity.
    held = {}
    for o in orders:
        if o["status"] != "CANCELLED":
            held[o["session_id"]] = held.get(o["session_id"], 0) + o["quantity"]
    for s in snap.get("sessions", []):
        h = held.get(s["id"], 0)
        if h > s["capacity"]:
            late = [op for op in creates if outcome(op) == "ok"
                    and (op.get("end") or {}).get("status") == 201
                    and not (op.get("end") or {}).get("replayed")
                    and isinstance(op.get("body"), dict)
                    and op["body"].get("session_id") == s["id"]]
            late.sort(key=lambda o: (o.get("end") or {}).get("time") or 0)
            extra = late[s["capacity"]:s["capacity"] + 2] if len(late) > s["capacity"] else late[-2:]
            found["oversold"].append(witness(
                "oversold",
                "session %s: capacity %d, %d seats held%s" % (
                    s["id"], s["capacity"], h,
                    (": beyond it " + ", ".join(op_phrase(o) for o in extra)) if extra else ""),
                extra, [s]))

    # Refused although the key has its order.
    for (user, key), kops in by_key.items():
        rows = orders_of_key.get((user, key))
        if not rows:
            continue
        for op in kops:
            end = op.get("end") or {}
            if outcome(op) == "fail" and end.get("code") in REFUSALS:
                maker = told(rows[0]["order_no"])
                found["refused-with-order"].append(witness(
                    "refused-with-order",
                    "op %s was told %s for key %s at %.2f s, which has order %s%s" % (
                        op["op"], answer_text(op), key, end.get("time") or 0.0,
                        rows[0]["order_no"],
                        (" (%s)" % op_phrase(maker[0])) if maker else ""),
                    [op] + maker[:1], rows[:1]))
                break  # one witness per key: the first refusal

    # A stored failure replayed.
    for (user, key), kops in by_key.items():
        for op in kops:
            end = op.get("end") or {}
            if (end.get("status") or 0) >= 400 and end.get("replayed"):
                first = [o for o in kops if (o.get("end") or {}).get("status") == end.get("status")
                         and not (o.get("end") or {}).get("replayed") and o["op"] != op["op"]]
                found["failure-replayed"].append(witness(
                    "failure-replayed",
                    "user %s, key %s: %s, a failure replayed%s" % (
                        user, key, op_phrase(op),
                        (" (first: %s)" % op_phrase(first[0])) if first else ""),
                    first[:1] + [op], []))
                break

    # Told 201 for an order the database does not have.
    for op in creates:
        end = op.get("end") or {}
        if outcome(op) == "ok" and end.get("status") == 201 and end.get("order_no") \
                and end["order_no"] not in order_by_no and op.get("f") == "create":
            found["lost-order"].append(witness(
                "lost-order",
                "user %s, key %s: %s, and the database has no such order" % (
                    op.get("process"), op.get("key"), op_phrase(op)), [op], []))

    # Payments.
    pays = [op for op in ops.values() if op.get("f") == "pay"]
    cancels = [op for op in ops.values() if op.get("f") == "cancel"]

    def pay_ops(order_no=None, txn=None):
        out = []
        for op in pays:
            body = op.get("body") if isinstance(op.get("body"), dict) else {}
            if (order_no and body.get("order_no") == order_no) or (txn and body.get("txn_id") == txn):
                out.append(op)
        # The copy that applied first, then the others in time order.
        return sorted(out, key=lambda o: ((o.get("end") or {}).get("outcome") != "APPLIED",
                                          o.get("time") or 0))

    applied = {}
    for p in snap.get("payments", []):
        if p["outcome"] == "APPLIED":
            applied.setdefault(p["order_no"], []).append(p)
    for o in orders:
        if o["status"] == "CANCELLED" and o["order_no"] in applied:
            c = sorted([op for op in cancels if op.get("order_no") == o["order_no"]
                        and outcome(op) == "ok"], key=lambda x: x.get("time") or 0)
            pops = [op for op in pay_ops(order_no=o["order_no"])
                    if (op.get("end") or {}).get("outcome") == "APPLIED"] or \
                pay_ops(order_no=o["order_no"])
            wops = pops[:1] + c[:1]
            found["paid-and-cancelled"].append(witness(
                "paid-and-cancelled",
                "order %s: %s: paid and cancelled" % (
                    o["order_no"], ", ".join("%s %s" % (op.get("f"), op_phrase(op)) for op in wops)
                    or "payment applied, status CANCELLED"),
                wops, [o] + applied[o["order_no"]][:1]))
    for no, ps in applied.items():
        if len(ps) > 1:
            wops = [x for p in ps[:2] for x in pay_ops(txn=p["txn_id"])[:1]]
            found["double-applied"].append(witness(
                "double-applied",
                "order %s: payments %s and %s both applied%s" % (
                    no, ps[0]["txn_id"], ps[1]["txn_id"],
                    (": " + ", ".join(op_phrase(o) for o in wops)) if wops else ""),
                wops, ps[:2]))
    refunds = {r["txn_id"] for r in snap.get("refunds", [])}
    for p in snap.get("payments", []):
        if p["outcome"] == "APPLIED" and p["txn_id"] in refunds:
            wops = pay_ops(txn=p["txn_id"])[:2]
            found["applied-and-refunded"].append(witness(
                "applied-and-refunded",
                "order %s, payment %s: applied and also sent back for refund%s" % (
                    p["order_no"], p["txn_id"],
                    (": " + ", ".join(op_phrase(o) for o in wops)) if wops else ""),
                wops, [p]))

    # Points: a user's points are one credit per paid order (a point per
    # whole unit of its amount), as the audit's points_match_paid_orders.
    if "points" in snap:
        want = {}
        for o in orders:
            if o["status"] in PAID:
                want[o["user_id"]] = want.get(o["user_id"], 0) + o.get("amount_cents", 0) // 100
        have = {p["user_id"]: p["points"] for p in snap["points"]}
        for user in sorted(set(want) | set(have)):
            w, h = want.get(user, 0), have.get(user, 0)
            if w == h:
                continue
            mine = [o["order_no"] for o in orders if o["user_id"] == user]
            wops = [op for no in mine for op in pay_ops(order_no=no)[:1]][:2]
            found["points-wrong"].append(witness(
                "points-wrong",
                "user %s: %d points, %d expected from %d paid orders (%s)%s" % (
                    user, h, w, sum(1 for o in orders if o["user_id"] == user
                                    and o["status"] in PAID),
                    "credited twice" if h > w else "lost",
                    (": " + ", ".join(op_phrase(o) for o in wops)) if wops else ""),
                wops, [{"user_id": user, "points": h, "expected": w}]))

    # Unknown outcomes, and which of them a later retry of the key resolved.
    unknown = resolved = 0
    for (user, key), kops in by_key.items():
        rows = orders_of_key.get((user, key), [])
        for i, op in enumerate(kops):
            if outcome(op) != "info":
                continue
            unknown += 1
            later = [o for o in kops[i + 1:] if outcome(o) == "ok"
                     and (o.get("end") or {}).get("order_no")]
            if later and len(rows) <= 1:
                resolved += 1

    out = {"violations": {k: len(v) for k, v in found.items() if v},
           "witnesses": [w for k, _ in KINDS for w in found[k][:limit]],
           "ops": len(ops), "unknown": unknown, "unknown_resolved": resolved}
    return out


def witness(kind, text, wops, rows):
    return {"kind": kind, "rule": KIND_TEXT[kind], "text": "%s: %s" % (kind, text),
            "ops": [op_view(op) for op in wops], "rows": rows}


def first_witnesses(result, n=5):
    return result["witnesses"][:n]


def summary_line(result):
    v = result["violations"]
    if not v:
        return "checker: %d operations, no violation (%d unknown outcomes, %d resolved by a " \
               "later retry)" % (result["ops"], result["unknown"], result["unknown_resolved"])
    return "checker: %d operations, %s" % (
        result["ops"], ", ".join("%d %s" % (n, k) for k, n in v.items()))


def main(argv):
    ap = argparse.ArgumentParser(prog="checker.py", description=__doc__.split("\n")[0])
    ap.add_argument("history")
    ap.add_argument("--snapshot", help="a database snapshot (JSON) instead of the database")
    ap.add_argument("--port", type=int)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--user", default="ticketd")
    ap.add_argument("--db")
    ap.add_argument("--save", help="write the database snapshot read here")
    ap.add_argument("--json", help="write the result as JSON")
    ap.add_argument("--all", action="store_true", help="print every witness kept, not the first")
    args = ap.parse_args(argv)
    try:
        ops = read_history(args.history)
        if args.snapshot:
            with open(args.snapshot) as f:
                snap = json.load(f)
        elif args.port and args.db:
            argv_db = ["mariadb", "--no-defaults", "--protocol=TCP", "-h", args.host, "-P",
                       str(args.port), "-u", args.user, "-D", args.db, "--batch",
                       "--skip-column-names"]
            env = dict(os.environ)
            env.setdefault("MYSQL_PWD", "ticketd")
            snap = read_database(argv_db, env)
        else:
            ap.error("give --snapshot FILE, or --port and --db")
        if args.save:
            with open(args.save, "w") as f:
                json.dump(snap, f)
    except (CheckError, OSError, ValueError) as e:
        print("checker: %s" % e, file=sys.stderr)
        return 1
    result = check(ops, snap)
    print(summary_line(result))
    for w in result["witnesses"] if args.all else result["witnesses"][:1]:
        print("  " + w["text"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 2 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
