#!/usr/bin/env python3
"""The names check of scripts/check-docs.py on pages written here, against
this checkout's code: a made-up name and a function named in the wrong
file must fail, real names and what is not code must pass.

  python3 tests/docs/test_check_docs.py   one "ok"/"FAIL" line per check,
                                          then "docs-checker: N checks, N failed"
"""
import importlib.util
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("check_docs", os.path.join(ROOT, "scripts", "check-docs.py"))
check_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_docs)

checker = check_docs.Checker(ROOT)


def made_up(*parts):
    """A name no code holds. Joined here, so that this file, which is in
    the code the checker reads, does not hold it either."""
    return "_".join(parts)


def problems(markdown):
    """What the checker says of a page holding markdown."""
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
        f.write("# A page\n\n" + markdown + "\n")
    try:
        found, _ = checker.problems(f.name)
    finally:
        os.unlink(f.name)
    return [p.split(": ", 1)[1] for p in found]


# (what, the page's text, the problems it must give)
CASES = [
    ("a made-up function fails", "`%s` does it." % made_up("orders", "vanish", "twice"),
     ["no name %s in the code" % made_up("orders", "vanish", "twice")]),
    ("a made-up function with parentheses fails", "call `%s()` first" % made_up("store", "wish", "idle"),
     ["no name %s() in the code" % made_up("store", "wish", "idle")]),
    ("a made-up macro fails", "routed with `%s`" % made_up("ROUTE", "NOWHERE", "AT", "ALL"),
     ["no name %s in the code" % made_up("ROUTE", "NOWHERE", "AT", "ALL")]),
    ("a made-up struct fails", "fill a `struct %s`" % made_up("order", "wish"),
     ["no name struct %s in the code" % made_up("order", "wish")]),
    ("a setting no code reads fails", "`%s`" % made_up("TICKETD", "NEVER", "READ"),
     ["no name %s in the code" % made_up("TICKETD", "NEVER", "READ")]),
    ("a command that sets it is no name", "`%s=1 make run`" % made_up("TICKETD", "NEVER", "READ"),
     []),
    ("a function in a file that does not define it fails", "`service/domain/token.c:orders_create`",
     ["service/domain/token.c does not define orders_create"]),
    ("a bare file name that does not define it fails", "`db.c:connect_thread`",
     ["db.c does not define connect_thread"]),
    ("a name found only in a comment is not in the code", None, None),
    ("a real function passes", "`orders_create` and `orders_create()`", []),
    ("a real function in its file passes", "`service/domain/orders.c:orders_create`, `orders.c:orders_create`", []),
    ("a real macro, constant and struct pass", "`ORDER_STOCK`, `SPEND_LUA`, `struct order_request`", []),
    ("a script's function and a Python def pass", "`lab/cluster_lessons.py:crash_pass`", []),
    ("a setting, an API code, a metric, a test pass",
     "`TICKETD_LOOPS`, `ORDER_TOKEN_INVALID`, `ticketd_orders_created_total`, `itest_orders`", []),
    ("what is not a name of code passes",
     "`Idempotency-Key`, `Prefer`, `SELECT`, `EVALSHA`, `make run`, `ok`, `_PORTS`, `whsec_`", []),
    ("another program's names pass",
     "`MHD_USE_THREAD_PER_CONNECTION`, `SO_REUSEPORT`, `rt_sigprocmask`, `Com_insert_select`", []),
    ("a name the page's own example writes passes",
     "write an `%s` beside it:\n\n```c\nvoid %s(void);\n```" % (made_up("order", "wish", "create"),
                                                            made_up("order", "wish", "create")), []),
]


def main():
    n = failed = 0
    for what, text, want in CASES:
        if text is None:
            # A renamed function whose old name a comment still holds, in
            # C, SQL and a script: only the code's words count.
            old = made_up("store", "wish", "idle")
            sources = {"x.c": "/* %s() was renamed */\nint store_idle(void);\n// %s\n" % (old, old),
                       "x.sql": "-- %s\nSELECT 1;\n" % old,
                       "x.py": "# %s\nx = 1  # %s\n" % (old, old)}
            got = [p for p, t in sources.items()
                   if old in check_docs.WORD.findall(check_docs.strip_comments(p, t))]
            ok = got == [] and "store_idle" in check_docs.WORD.findall(
                check_docs.strip_comments("x.c", sources["x.c"]))
        else:
            got = problems(text)
            ok = got == want
        n += 1
        if ok:
            print("ok    %s" % what)
        else:
            failed += 1
            print("FAIL  %s: got %s, want %s" % (what, got, want))
    print("docs-checker: %d checks, %d failed" % (n, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
