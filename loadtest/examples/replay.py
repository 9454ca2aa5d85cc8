#!/usr/bin/env python3
"""replay.py - a concurrent replay test of POST /api/v1/orders, in Python 3
with the standard library only (socket, threading, hmac, json).

One user, one Idempotency-Key, one order token, one body, sent COPIES times
so that the copies truly arrive together: each copy opens its own connection
and sends its whole request but the last byte; when every copy is that far,
all of them send their last byte at once. Copies sent from plain threads
(--plain) leave one after another; the first is usually finished before most
of the others arrive, and they are nearly all answered by the response cache.
Only copies released together reach the in-flight key.

Then one more retry, after the storm, must get the same order back, and the
session must have lost the seats of exactly one order.

    python3 loadtest/examples/replay.py                 # against `make run`
    python3 loadtest/examples/replay.py --copies 200 --plain

Exit status: 0 when one order came out and no answer was forbidden, 1 when
not, 2 when the set-up failed. --json prints the tally as JSON.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import socket
import sys
import threading
import time
import urllib.parse

ADMIN_USER = 1


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(secret, user, admin=False, ttl=3600):
    """An HS256 token as ticketd expects it: sub, iat, exp (role admin)."""
    now = int(time.time())
    claims = {"sub": str(user), "iat": now, "exp": now + ttl}
    if admin:
        claims["role"] = "admin"
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims, separators=(",", ":")).encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(sig)}"


def raw_request(url, method, path, headers, body=b""):
    """The bytes of one HTTP/1.1 request, with Connection: close."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {url.hostname}:{url.port or 80}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode() + body


def read_answer(sock):
    """Reads until the server closes: (status, headers (lower-case), body)."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def call(url, method, path, headers, body=None):
    """One request on a new connection; the body as JSON (or None)."""
    payload = json.dumps(body).encode() if body is not None else b""
    if body is not None:
        headers = dict(headers, **{"Content-Type": "application/json"})
    with socket.create_connection((url.hostname, url.port or 80), timeout=30) as s:
        s.sendall(raw_request(url, method, path, headers, payload))
        status, answer_headers, answer = read_answer(s)
    try:
        return status, answer_headers, json.loads(answer) if answer else None
    except ValueError:
        return status, answer_headers, None


class Copy:
    """One copy of the request: its connection and, in the end, its answer."""

    def __init__(self):
        self.status = 0
        self.headers = {}
        self.body = None
        self.error = None


def send_copies(url, request, copies, held):
    """Sends the copies from one thread each. held: every copy holds back
    its last byte until all are connected and that far, then all go."""
    ready = threading.Barrier(copies, timeout=30)
    results = [Copy() for _ in range(copies)]

    def one(i):
        c = results[i]
        try:
            with socket.create_connection((url.hostname, url.port or 80), timeout=30) as s:
                if held:
                    s.sendall(request[:-1])
                    ready.wait()
                    s.sendall(request[-1:])
                else:
                    s.sendall(request)
                c.status, c.headers, raw = read_answer(s)
                c.body = json.loads(raw) if raw else None
        except (OSError, ValueError, threading.BrokenBarrierError) as e:
            c.error = str(e)
            if held:
                ready.abort()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(copies)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def label(c):
    """How a copy was answered: status, problem code, Idempotency-Layer."""
    if c.error is not None:
        return f"no answer ({c.error})"
    code = c.body.get("code", "") if isinstance(c.body, dict) and c.status >= 400 else ""
    replayed = " replayed" if c.headers.get("idempotent-replayed") == "true" else ""
    layer = c.headers.get("idempotency-layer", "-")
    return f"{c.status}{' ' + code if code else ''}{replayed} @{layer}"


def judge(results, retry):
    """The order the key bought, and every answer the contract forbids for
    copies of one request: another order, a refusal meant for another
    key (DUPLICATE_SUBMISSION, ORDER_TOKEN_INVALID) while the key has its
    order, a failure, the same order twice as new."""
    orders = {c.body["order_no"] for c in results + [retry] if c.status == 201}
    new = [c for c in results if c.status == 201 and "idempotent-replayed" not in c.headers]
    forbidden = []
    if len(orders) > 1:
        forbidden.append(f"{len(orders)} different orders for one key")
    if len(new) > 1:
        forbidden.append(f"{len(new)} copies told their order was new")
    for c in results:
        code = c.body.get("code") if isinstance(c.body, dict) else None
        if c.status == 201 or (c.status == 409 and code == "REQUEST_IN_PROGRESS"):
            continue
        if c.status == 503 and "retry-after" in c.headers:
            continue  # a dependency down: the client retries, nothing was lied about
        forbidden.append(f"a copy answered {label(c)}")
    if retry.status != 201 or retry.headers.get("idempotent-replayed") != "true":
        forbidden.append(f"the retry after the storm answered {label(retry)}")
    return orders, forbidden


def jwt_secret(args):
    if args.jwt_secret:
        return args.jwt_secret
    if os.environ.get("TICKETD_JWT_SECRET"):
        return os.environ["TICKETD_JWT_SECRET"]
    with open(args.config, encoding="utf-8") as f:
        for line in f:
            name, _, value = line.strip().partition("=")
            if name == "TICKETD_JWT_SECRET":
                return value
    sys.exit(f"replay.py: no TICKETD_JWT_SECRET in {args.config}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--config", default="config/ticketd.env", help="read TICKETD_JWT_SECRET here")
    p.add_argument("--jwt-secret", help="instead of --config or $TICKETD_JWT_SECRET")
    p.add_argument("--copies", type=int, default=100, choices=range(2, 401), metavar="2..400")
    p.add_argument("--plain", action="store_true", help="plain threads: no byte held back")
    p.add_argument("--user", type=int, default=int(time.time() * 1000) % 10**12 + 10**6)
    p.add_argument("--json", action="store_true", help="print the tally as JSON")
    args = p.parse_args()
    url = urllib.parse.urlsplit(args.url)
    secret = jwt_secret(args)
    admin = {"Authorization": "Bearer " + jwt(secret, ADMIN_USER, admin=True)}
    user = {"Authorization": "Bearer " + jwt(secret, args.user)}

    status, _, session = call(url, "POST", "/api/v1/sessions", admin,
                              {"title": "replay.py", "price_cents": 1000, "stock": 10})
    if status != 201:
        sys.exit(f"replay.py: POST /api/v1/sessions answered {status} {session}")
    status, _, token = call(url, "POST", "/api/v1/tokens", user)
    if status != 201:
        sys.exit(f"replay.py: POST /api/v1/tokens answered {status} {token}")

    body = json.dumps({"session_id": session["id"], "quantity": 2}).encode()
    headers = dict(user, **{"Content-Type": "application/json",
                            "Idempotency-Key": f"replay-{args.user}-{time.time_ns()}",
                            "X-Order-Token": token["token"]})
    request = raw_request(url, "POST", "/api/v1/orders", headers, body)
    t0 = time.monotonic()
    results = send_copies(url, request, args.copies, held=not args.plain)
    elapsed = time.monotonic() - t0
    retry = Copy()
    retry.status, retry.headers, retry.body = call(url, "POST", "/api/v1/orders", headers,
                                                   json.loads(body))
    _, _, after = call(url, "GET", f"/api/v1/sessions/{session['id']}", user)

    orders, forbidden = judge(results, retry)
    if after["stock"] != 10 - 2 * len(orders):
        forbidden.append(f"the session's stock is {after['stock']} after {len(orders)} orders")
    tally = {}
    for c in results:
        tally[label(c)] = tally.get(label(c), 0) + 1
    report = {"copies": args.copies, "held": not args.plain, "seconds": round(elapsed, 3),
              "orders": sorted(orders), "answers": tally, "retry": label(retry),
              "stock_left": after["stock"], "forbidden": forbidden}
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        how = "plain threads" if args.plain else "last byte held back, then released together"
        print(f"{args.copies} copies of one order request ({how}), {elapsed:.2f} s:")
        for what, n in sorted(tally.items(), key=lambda kv: -kv[1]):
            print(f"  {n:5d}  {what}")
        print(f"  retry after the storm: {label(retry)}")
        print(f"orders: {len(orders)} {sorted(orders)}; seats left {after['stock']} of 10")
        print("forbidden answers: " + ("none" if not forbidden else "; ".join(forbidden)))
    return 0 if len(orders) == 1 and not forbidden else 1


if __name__ == "__main__":
    sys.exit(main())
