#!/usr/bin/python3
"""Whether two histories of the lab (ticketd-load --history) sent the same
requests: per client (its "process"), the same requests in the same order.

  tests/lab/same_requests.py A.jsonl B.jsonl

A request is what the client chose to send: its kind, path, key and body,
first attempts only. Not when it was sent, to which instance, nor the
server's own words it carries back (an order token). Prints one line;
exit status 0 when they are the same (and not empty), 1 otherwise.
"""

import json
import sys

IGNORED = ("op", "time", "attempt", "target", "token")


def requests(path):
    by_client = {}
    head = None
    with open(path) as f:
        for line in f:
            ev = json.loads(line)
            if ev.get("type") == "run":
                head = ev
            if ev.get("type") != "invoke" or ev.get("attempt", 1) != 1:
                continue
            by_client.setdefault(ev.get("process"), []).append(json.dumps(
                {k: v for k, v in ev.items() if k not in IGNORED}, sort_keys=True))
    return head, by_client


def main(a, b):
    head_a, ra = requests(a)
    head_b, rb = requests(b)
    same = sum(1 for c in ra if ra[c] == rb.get(c))
    n = sum(len(v) for v in ra.values())
    print("%d of %d clients sent the same %d requests in the same order; seeds %s and %s"
          % (same, len(ra), n, (head_a or {}).get("seed"), (head_b or {}).get("seed")))
    return 0 if ra and ra == rb and n > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
