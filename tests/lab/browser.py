#!/usr/bin/python3
"""Drives the lab's page in headless Chromium through the DevTools protocol.

  tests/lab/browser.py --url http://127.0.0.1:PORT/ --lesson NAME --shots DIR

It opens the page with ?autorun=NAME&passes=both (the page clicks that
lesson's "without, then with" button), then reads the page itself, never
the lab's API: it waits until the "without" figure is final and above zero
and the checker's witnesses are drawn under it, at least one, with the
requests involved and a link to the run's history (screenshot 1, and one
of the witness), then until the "with" figure is final and zero, with no
witness (screenshot 2). Waits follow the page's progress; the only clock
is an outer bound.
Exit status 0 when both held, 1 otherwise; it stops the Chromium it started.
"""

import argparse
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

BOUND_S = 240  # the outer bound of the whole test, not a step's timing


class DevTools:
    """A minimal websocket client (RFC 6455, text frames) for one page."""

    def __init__(self, ws_url):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", ws_url)
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n"
                           % (m.group(3), m.group(1), m.group(2), key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("websocket handshake refused: %r" % head[:80])
        self.next_id = 0

    def send(self, data):
        payload = data.encode()
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("DevTools closed the connection")
            buf += chunk
        return buf

    def recv(self):
        message = b""
        while True:
            b0, b1 = self.recv_exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self.recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self.recv_exact(8))[0]
            message += self.recv_exact(n)
            if b0 & 0x80:
                return message.decode()

    def call(self, method, **params):
        self.next_id += 1
        self.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def js(self, expr):
        res = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        return res.get("result", {}).get("value")

    def shot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        print("browser: screenshot %s" % path)


def start_chromium(profile):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        sys.exit("browser: chromium not found (scripts/deps.sh installs it)")
    proc = subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu",
                             "--no-first-run", "--disable-extensions", "--hide-scrollbars",
                             "--user-data-dir=" + profile, "--remote-debugging-port=0",
                             "--remote-debugging-address=127.0.0.1", "--window-size=1920,1400",
                             "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        m = re.search(r"DevTools listening on (ws://\S+)", line)
        if m:
            return proc, m.group(1)
    proc.wait()
    sys.exit("browser: chromium exited before it listened")


def page_ws(browser_ws):
    port = re.match(r"ws://[^:]+:(\d+)/", browser_ws).group(1)
    with urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port, timeout=10) as r:
        targets = json.load(r)
    return next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")


FIGURE = ("(() => { const n = document.getElementById('figure-%s');"
          " return n ? [n.dataset.final, n.textContent,"
          " document.getElementById('run-status').dataset.status,"
          " document.getElementById('message').textContent] : null; })()")


def wait_final(dt, which, deadline):
    """The page's figure of a pass once it is final; None if the run failed."""
    last = None
    while time.monotonic() < deadline:
        got = dt.js(FIGURE % which)
        if got and got[0] == "1":
            return int(got[1])
        if got and (got[2] == "error" or got[3]):
            print("browser: the page says: %s %s" % (got[2], got[3]))
            return None
        if got != last:
            last = got
        time.sleep(0.2)
    print("browser: the %s figure was not final within %d s (last: %s)" % (which, BOUND_S, last))
    return None


WITNESSES = ("(() => { const b = document.getElementById('witnesses-%s');"
             " if (!b || !b.children.length) return null;"
             " const w = b.querySelectorAll('.witness');"
             " const a = b.querySelector('a.history');"
             " return [w.length, w.length ? w[0].querySelectorAll('.wop').length : 0,"
             " w.length ? w[0].textContent : b.textContent, a ? a.getAttribute('href') : ''];"
             " })()")


def wait_witnesses(dt, which, deadline):
    """[witnesses, requests in the first, its text, the history link] once
    the page drew the pass's witnesses (or said there are none)."""
    while time.monotonic() < deadline:
        got = dt.js(WITNESSES % which)
        if got:
            return got
        time.sleep(0.2)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--lesson", required=True)
    ap.add_argument("--shots", required=True)
    args = ap.parse_args()
    os.makedirs(args.shots, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="ticketd-lab-chromium-")
    proc, ws = start_chromium(profile)
    ok = False
    try:
        dt = DevTools(page_ws(ws))
        dt.call("Page.enable")
        dt.call("Page.navigate", url="%s?autorun=%s&passes=both" % (args.url, args.lesson))
        deadline = time.monotonic() + BOUND_S
        # The page first shows the lab's last run, which may be final
        # already: only once the run its button started goes are the
        # figures this run's.
        while time.monotonic() < deadline and dt.js(
                "document.getElementById('run-status').dataset.status") != "running":
            time.sleep(0.05)
        without = wait_final(dt, "without", deadline)
        wit = wait_witnesses(dt, "without", deadline) if without is not None else None
        dt.shot(os.path.join(args.shots, "lab-%s-without.png" % args.lesson))
        if wit:
            dt.js("document.querySelector('#witnesses-without').scrollIntoView()")
            dt.shot(os.path.join(args.shots, "lab-%s-witness.png" % args.lesson))
            print("browser: %d witnesses without the defence; the first has %d requests: %s; "
                  "history at %s" % (wit[0], wit[1], wit[2][:160], wit[3]))
        with_ = wait_final(dt, "with", deadline) if without is not None else None
        wit_with = wait_witnesses(dt, "with", deadline) if with_ is not None else None

        dt.js("window.scrollTo(0, 0)")
        dt.shot(os.path.join(args.shots, "lab-%s-both.png" % args.lesson))
        print("browser: the page shows %s without the defence, %s with it; witnesses %s and %s"
              % (without, with_, wit[0] if wit else None, wit_with[0] if wit_with else None))
        ok = (without is not None and without > 0 and with_ == 0 and wit is not None
              and wit[0] > 0 and wit[1] > 0 and wit[3].startswith("/api/history?")
              and wit_with is not None and wit_with[0] == 0)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
