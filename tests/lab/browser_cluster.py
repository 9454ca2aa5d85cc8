#!/usr/bin/python3
"""The lab's three Galera cards, one after the other, in headless Chromium.

  tests/lab/browser_cluster.py --url http://127.0.0.1:PORT/ --shots DIR

For each of galera-stock-cas, galera-read-own-writes and
galera-crash-durability it clicks the card's button on the page, then reads
the page itself (never the lab's API), sampling the drawn nodes while the
lesson runs. It checks that the "without" figure ends above zero with at
least one witness under it (a request or more, drawn), the "with" figure
ends at zero with none, every node was drawn Synced during the run, the
crash lesson drew the three nodes killed (and the run's seed and its
"run this again" button are shown), and the audit table has a column per
node and pass. Screenshots (one mid-crash, one per lesson at its end, one
of a witness) go to DIR. Waits follow the page's progress; the only clock
is an outer bound per lesson.
Exit status 0 when all held, 1 otherwise; it stops the Chromium it started.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from browser import FIGURE, WITNESSES, DevTools, page_ws, start_chromium  # noqa: E402

LESSONS = ["galera-stock-cas", "galera-read-own-writes", "galera-crash-durability"]
# The outer bound of one lesson (the cluster's start, two passes, the
# crash's restart by state transfer), not a step's timing.
BOUND_S = 900

NODES = ("Array.from(document.querySelectorAll('#nodes .node'))"
         ".map((n) => [n.dataset.node, n.dataset.state])")
STATE = ("[document.getElementById('run-status').dataset.status,"
         " document.getElementById('run-title').textContent,"
         " document.getElementById('message').textContent, String(runId)]")
AUDIT = ("(() => { const r = document.querySelectorAll('#checks tr');"
         " return [r.length, r.length ? r[0].children.length : 0,"
         " document.querySelectorAll('#checks td.bad').length]; })()")
REPEAT = ("(() => { const b = document.querySelector('#repeat button.again');"
          " return b ? [b.dataset.seed, document.getElementById('repeat').textContent] : null; })()")


def run_card(dt, name, shots):
    """Clicks the card, follows the run; a list of what failed (empty: ok)."""
    before = dt.js("String(runId)")
    if not dt.js("(() => { const b = document.querySelector('button[data-lesson=\"%s\"]');"
                 " if (!b || b.disabled) return false; b.click(); return true; })()" % name):
        return ["the card's button is missing or disabled"]
    deadline = time.monotonic() + BOUND_S
    seen = {}  # node: the states drawn
    crash_shot = False
    while time.monotonic() < deadline:
        st = dt.js(STATE)
        if st[3] != before and st[0] == "running" and name in st[1]:
            break
        if st[2]:
            return ["the page says: %s" % st[2]]
        time.sleep(0.05)
    fails = []
    # The nodes' states as the lesson runs, until the "with" figure is final.
    figures = {}
    while time.monotonic() < deadline:
        for node, state in dt.js(NODES) or []:
            if state == "killed" and not crash_shot:
                crash_shot = True
                dt.shot(os.path.join(shots, "lab-%s-killed.png" % name))
            seen.setdefault(node, set()).add(state)
        st = dt.js(STATE)
        for which in ("without", "with"):
            got = dt.js(FIGURE % which)
            if got and got[0] == "1":
                figures[which] = int(got[1])
        if "with" in figures or st[0] in ("error", "done"):
            break
        time.sleep(0.2)
    # The run ends once the nodes are stopped; the tables are drawn then.
    while time.monotonic() < deadline and dt.js(STATE)[0] == "running":
        time.sleep(0.2)
    st = dt.js(STATE)
    if st[0] != "done":
        return ["the run ended %s: %s" % (st[0], st[2])]
    for which in ("without", "with"):
        got = dt.js(FIGURE % which)
        figures[which] = int(got[1]) if got and got[0] == "1" else None
    wit = {w: dt.js(WITNESSES % w) for w in ("without", "with")}
    audit = dt.js(AUDIT)
    repeat = dt.js(REPEAT)
    dt.js("window.scrollTo(0, 0)")
    dt.shot(os.path.join(shots, "lab-%s-both.png" % name))
    if wit["without"] and wit["without"][0]:
        dt.js("document.querySelector('#witnesses-without .witness').scrollIntoView()")
        dt.shot(os.path.join(shots, "lab-%s-witness.png" % name))
        dt.js("window.scrollTo(0, 0)")
    states = {n: sorted(s) for n, s in sorted(seen.items())}
    print("browser: %s: %s without the defence, %s with it; witnesses %s and %s; the first: "
          "%s; nodes drawn %s; audit table %s; seed %s"
          % (name, figures["without"], figures["with"],
             wit["without"][0] if wit["without"] else None,
             wit["with"][0] if wit["with"] else None,
             (wit["without"][2][:160] if wit["without"] else ""), states, audit,
             repeat[0] if repeat else None))
    if not (figures["without"] or 0) > 0:
        fails.append("damage without the defence: %s" % figures["without"])
    if figures["with"] != 0:
        fails.append("damage with it: %s" % figures["with"])
    if not wit["without"] or wit["without"][0] < 1 or wit["without"][1] < 1:
        fails.append("no witness with its requests under the pass without the defence")
    if not wit["with"] or wit["with"][0] != 0:
        fails.append("witnesses under the pass with the defence")
    if sorted(seen) != ["1", "2", "3"] or any("synced" not in s for s in seen.values()):
        fails.append("not every node drawn synced: %s" % states)
    if name == "galera-crash-durability" and any("killed" not in s for s in seen.values()):
        fails.append("the crash did not draw the three nodes killed: %s" % states)
    # Header and a row per check; a column per node and pass (3 x 2 + 1).
    if not audit or audit[0] < 2 or audit[1] != 7:
        fails.append("the audit table has no column per node and pass: %s" % audit)
    if not repeat or not repeat[0].isdigit():
        fails.append("no seed and no \"run this again\"")
    return fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--shots", required=True)
    ap.add_argument("--lesson", action="append", choices=LESSONS,
                    help="only this card (repeatable; default: all three)")
    args = ap.parse_args()
    os.makedirs(args.shots, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="ticketd-lab-chromium-")
    proc, ws = start_chromium(profile)
    failed = 0
    try:
        dt = DevTools(page_ws(ws))
        dt.call("Page.enable")
        dt.call("Page.navigate", url=args.url)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not dt.js(
                "document.querySelectorAll('#cluster-cards .card').length === 3"):
            time.sleep(0.1)
        for name in args.lesson or LESSONS:
            fails = run_card(dt, name, args.shots)
            for f in fails:
                print("browser: FAIL %s: %s" % (name, f))
            failed += bool(fails)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    print("browser: %d of %d cluster cards as they should be"
          % (len(args.lesson or LESSONS) - failed, len(args.lesson or LESSONS)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
