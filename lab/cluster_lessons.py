#!/usr/bin/python3
"""The three lessons that need a MariaDB Galera cluster of three nodes.

The replay lab's other lessons run on one MariaDB; these run on the test
cluster of scripts/cluster.sh (its 22xxx ports unless TICKETD_CLUSTER_SQL_PORTS,
_REDIS_PORTS and friends say otherwise, under .state/cluster-lab), with
`ticketd serve` instances each on its own node (TICKETD_CLUSTER_HTTP_PORTS,
default 22080-22082). Each runs without its
defence, then with it, and ends with the lab's line

    lesson NAME: without DEFENCE: N UNIT; with it: M UNIT

- galera-stock-cas: the stock read on one node and written back as a
  computed value (the demo's naive order, stock-cas off) by two instances
  on two nodes: Galera certifies the write sets, yet seats are oversold
  (lost updates); the compare-and-set decrement: 0.
- galera-read-own-writes: an order read on another node right after its
  201: 404 for an order that exists (a stale read), unless ticketd sets
  wsrep_sync_wait on its connections (TICKETD_MYSQL_SYNC_WAIT, 1 by
  default).
- galera-crash-durability: mid-storm, after 1000 answers, the nodes' log
  is flushed to their disks (the flush InnoDB does once a second with
  innodb_flush_log_at_trx_commit=2, played by the lesson); 400 answers
  later all three nodes are killed at once and their disks lose what the
  kernel had not written yet (a power cut, by scripts/cluster.sh's
  loop-device disks), then restarted: with 2, the orders answered between
  the flush and the crash are gone although their clients hold a 201;
  with 3 (the log flushed at prepare and at commit): 0.

  cluster_lessons.py list
  cluster_lessons.py lesson NAME [--size F] [--kill-only] [--seed N]
  cluster_lessons.py record [--runs N] [--out FILE] [--size F]

Each lesson prints its seed (ticketd-load's --seed, and the read-your-
writes clients' users and keys): --seed N sends the same requests again.
`make lesson L=galera-...` runs one (lab/ticketd-lab hands the name over);
`make cluster-lessons-run` records all three, three times in a row, into
docs/cluster-lessons-run.md. Everything it starts is stopped at the end
(the nodes too, unless TICKETD_CLUSTER_KEEP=1).
"""

import argparse
import datetime
import fcntl
import http.client
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time

import checker
import defences
import runner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
SERVICES = os.path.join(ROOT, "scripts", "services.sh")
TICKETD = os.path.join(ROOT, "build", "release", "ticketd")
LOAD = os.path.join(ROOT, "build", "loadtest", "ticketd-load")



def ports(name, default):
    """A port list from the environment, as scripts/cluster.sh and
    tests/cluster/run.sh read it (space-separated)."""
    text = os.environ.get(name, "").strip()
    try:
        got = [int(p) for p in text.split()] if text else default
    except ValueError:
        got = []
    if len(got) != len(default):
        raise SystemExit("cluster lessons: %s takes %d ports" % (name, len(default)))
    return got


# scripts/cluster.sh's ports (TICKETD_CLUSTER_SQL_PORTS and friends, which
# it reads itself), and the instances' (TICKETD_CLUSTER_HTTP_PORTS).
SQL_PORTS = ports("TICKETD_CLUSTER_SQL_PORTS", [22306, 22307, 22308])
HTTP_PORTS = ports("TICKETD_CLUSTER_HTTP_PORTS", [22080, 22081, 22082])
REDIS_PORT = ports("TICKETD_CLUSTER_REDIS_PORTS", [22379, 22380])[0]
# Each node a disk of its own, so that a power cut can be played (root only).
DISK_MB = "1024"


class LessonError(Exception):
    pass


# The page's run while a lesson runs from the lab's page (lab/server.py):
# it hears the lessons' lines, charts and results too; and its cluster,
# which stop_for_page stops when the lab exits mid-run. One run at a time.
SINK = None
ACTIVE = None


def stop_for_page():
    """The lab is stopping during a cluster lesson: its load, instances and
    nodes go with it (the nodes unless TICKETD_CLUSTER_KEEP=1)."""
    cl = ACTIVE
    if cl is not None:
        cl.down()


def log(text):
    print(text, flush=True)
    if SINK is not None:
        SINK.phase(None, text.strip())


def env_without_ticketd(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TICKETD_") or k.startswith("TICKETD_CLUSTER_")}
    env.update(extra or {})
    return env


class Cluster:
    """The three nodes and Redis of scripts/cluster.sh, and the instances."""

    def __init__(self, state, logs):
        self.state = os.path.abspath(state)
        self.logs = logs
        self.procs = []
        self.jwt_secret = os.urandom(32).hex()
        self.pay_secret = os.urandom(32).hex()
        self.disks = os.geteuid() == 0
        self.load_proc = None
        os.makedirs(logs, exist_ok=True)

    def cl(self, *args, check=True, quiet=True):
        extra = {"TICKETD_CLUSTER_DISK_MB": DISK_MB} if self.disks else {}
        with open(os.path.join(self.logs, "cluster.log"), "ab") as out:
            rc = subprocess.call([CLUSTER, args[0], self.state, *args[1:]],
                                 env=env_without_ticketd(extra), stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=out if quiet else None)
        if check and rc != 0:
            raise LessonError("scripts/cluster.sh %s failed (see %s/cluster.log)"
                              % (args[0], self.logs))
        return rc

    def services(self, cmd):
        env = env_without_ticketd({
            "TICKETD_MYSQL_HOST": "127.0.0.1", "TICKETD_MYSQL_PORT": str(SQL_PORTS[0]),
            "TICKETD_REDIS_HOST": "127.0.0.1", "TICKETD_REDIS_PORT": str(REDIS_PORT)})
        with open(os.path.join(self.logs, "services.log"), "ab") as out:
            if subprocess.call([SERVICES, cmd], env=env, stdout=out, stderr=out,
                               stdin=subprocess.DEVNULL) != 0:
                raise LessonError("scripts/services.sh %s failed (see %s/services.log)"
                                  % (cmd, self.logs))

    def up(self):
        for b in (TICKETD, LOAD):
            if not os.access(b, os.X_OK):
                raise LessonError("%s is missing: run it through make lesson (it builds it)"
                                  % os.path.relpath(b, ROOT))
        log("cluster: starting 3 Galera nodes (:%s) and Redis under %s%s"
            % (",".join(map(str, SQL_PORTS)), os.path.relpath(self.state, ROOT),
               ", each node on a disk of its own" if self.disks else ""))
        t0 = time.monotonic()
        self.cl("up")
        self.services("migrate")
        log("cluster: 3 nodes Synced, migrated (%.0f s)" % (time.monotonic() - t0))

    def down(self):
        if self.load_proc is not None and self.load_proc.poll() is None:
            self.load_proc.kill()
        self.stop_instances()
        # TICKETD_CLUSTER_KEEP=1 leaves the nodes running (as for
        # tests/cluster/run.sh): the next lesson starts in seconds.
        if os.environ.get("TICKETD_CLUSTER_KEEP") != "1":
            self.cl("down", check=False)

    def sql(self, node, statement):
        res = subprocess.run([CLUSTER, "sql", self.state, str(node), "--database=ticketd",
                              "-e", statement], env=env_without_ticketd(),
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise LessonError("SQL on node %d failed: %s" % (node, res.stderr.strip()))
        return res.stdout

    def set_global(self, name, value):
        for node in (1, 2, 3):
            self.sql(node, "SET GLOBAL %s = %s" % (name, value))

    def reset(self):
        self.services("reset")

    # --- instances ------------------------------------------------------------

    def start_instances(self, nodes, tag, off="", env=()):
        """One `ticketd serve` per entry of nodes (1-3), instance i on
        HTTP_PORTS[i] and node nodes[i]."""
        self.stop_instances()
        for i, node in enumerate(nodes):
            e = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": os.environ.get("HOME", "/"),
                "TICKETD_ENV": "demo",
                "TICKETD_DEFENSES": defences.setting(off),
                "TICKETD_BIND": "127.0.0.1",
                "TICKETD_PORT": str(HTTP_PORTS[i]),
                "TICKETD_REDIS_HOST": "127.0.0.1",
                "TICKETD_REDIS_PORT": str(REDIS_PORT),
                "TICKETD_MYSQL_HOST": "127.0.0.1",
                "TICKETD_MYSQL_PORT": str(SQL_PORTS[node - 1]),
                "TICKETD_MYSQL_USER": "ticketd",
                "TICKETD_MYSQL_PASSWORD": "ticketd",
                "TICKETD_MYSQL_DB": "ticketd",
                "TICKETD_JWT_SECRET": self.jwt_secret,
                "TICKETD_PAY_SECRET": self.pay_secret,
                "TICKETD_ACCESS_LOG": "0",
                "TICKETD_CONSUMER_BLOCK_MS": "100",
            }
            for kv in env:
                k, v = kv.split("=", 1)
                e[k] = v
            path = os.path.join(self.logs, "%s-%d.log" % (tag, HTTP_PORTS[i]))
            with open(path, "wb") as out:
                self.procs.append(subprocess.Popen([TICKETD, "serve"], env=e, stdout=out,
                                                   stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL))
        for i in range(len(nodes)):
            self.wait_ready(HTTP_PORTS[i])
        log("  %d instances: %s" % (len(nodes), ", ".join(
            ":%d on node %d" % (HTTP_PORTS[i], n) for i, n in enumerate(nodes))))

    def wait_ready(self, port):
        for _ in range(300):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            if any(p.poll() is not None for p in self.procs):
                raise LessonError("ticketd exited at start (logs in %s)" % self.logs)
            time.sleep(0.1)
        raise LessonError("ticketd on :%d not ready after 30 s" % port)

    def stop_instances(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    def metric(self, ports, name):
        """The sum of one metric's samples (a name with its labels) over
        the instances on ports."""
        total = 0.0
        for port in ports:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/metrics")
                for line in c.getresponse().read().decode().splitlines():
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == name:
                        total += float(parts[1])
            except OSError:
                pass
        return int(total)

    def load(self, tag, ports, args, seed, history=False):
        """ticketd-load over the instances on ports, with --seed seed; its
        JSON report. history: also write the run's history of client
        operations (TAG.history.jsonl), for the checker's witnesses."""
        json_path = os.path.join(self.logs, "%s.json" % tag)
        if os.path.exists(json_path):
            os.unlink(json_path)
        args = args + ["--seed", str(seed), "--interval", "200"]
        argv = [LOAD] + args
        if history:
            argv += ["--history", os.path.join(self.logs, "%s.history.jsonl" % tag)]
        for port in ports:
            argv += ["--target", "http://127.0.0.1:%d" % port]
        argv += ["--json", json_path]
        env = dict(os.environ)
        env.update({"TICKETD_JWT_SECRET": self.jwt_secret,
                    "TICKETD_PAY_SECRET": self.pay_secret})
        log("  ticketd-load %s" % " ".join(args))
        with open(os.path.join(self.logs, "%s.txt" % tag), "wb") as out:
            self.load_proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=out,
                                              stdin=subprocess.DEVNULL)
            try:
                rc = self.load_proc.wait(timeout=600)
            finally:
                if self.load_proc.poll() is None:
                    self.load_proc.kill()
                    self.load_proc.wait()
            self.load_proc = None
        try:
            with open(json_path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            raise LessonError("ticketd-load exited %d without its report (%s)" % (rc, json_path))
        report["command"] = "ticketd-load " + " ".join(args)
        if SINK is not None:
            SINK.series(series_ticks(report), fault_marks(
                os.path.join(self.logs, "%s.txt" % tag)))
        return report

    def node_states(self, seen):
        """Each node's state for the page: synced, joining (or donor),
        starting (its process runs, the server does not answer yet),
        killed (it ran and its process is gone), down. seen: the nodes
        seen running so far, updated."""
        out = []
        for n in (1, 2, 3):
            d = os.path.join(self.state, "g%d" % n)
            alive = any(pid_is_mariadbd(os.path.join(d, f)) for f in ("mysqld.pid", "launched.pid"))
            state = "down"
            if alive:
                seen.add(n)
                state = "starting"
                res = subprocess.run(
                    ["mariadb", "--no-defaults", "--socket=" + os.path.join(d, "sock"),
                     "--user=root", "--batch", "--skip-column-names", "--connect-timeout=1",
                     "-e", "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                     "WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'"],
                    capture_output=True, text=True, env=env_without_ticketd())
                word = res.stdout.strip().lower()
                if res.returncode == 0 and word:
                    state = "synced" if word == "synced" else "joining"
            elif n in seen:
                state = "killed"
            out.append({"node": n, "state": state, "port": SQL_PORTS[n - 1]})
        return out

    def audit(self, ports):
        """GET /api/v1/admin/audit through each instance (each on its own
        node): {"node N": [checks]}; a node that does not answer: []."""
        admin = self.jwt(1, admin=True)
        out = {}
        for i, port in enumerate(ports):
            checks = []
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                c.request("GET", "/api/v1/admin/audit",
                          headers={"Authorization": "Bearer " + admin})
                resp = c.getresponse()
                body = json.loads(resp.read() or b"{}")
                checks = [{"name": x.get("name"), "ok": bool(x.get("ok")),
                           "detail": x.get("detail", "")} for x in body.get("checks", [])]
            except (OSError, ValueError):
                pass
            out["node %d" % (i + 1)] = checks
        return out

    def jwt(self, user, admin=False):
        """A user's JWT, as `ticketd token` mints it."""
        argv = [TICKETD, "token", "--user", str(user)] + (["--admin"] if admin else [])
        env = {"PATH": "/usr/bin:/bin", "TICKETD_ENV": "demo",
               "TICKETD_JWT_SECRET": self.jwt_secret, "TICKETD_PAY_SECRET": self.pay_secret}
        res = subprocess.run(argv, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            raise LessonError("ticketd token failed: %s" % res.stderr.strip())
        return res.stdout.strip()


def pid_is_mariadbd(pidfile):
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
        with open("/proc/%d/comm" % pid) as f:
            return f.read().startswith("mariadbd")
    except (OSError, ValueError):
        return False


def series_ticks(report):
    """The page's chart points from ticketd-load's time series: answers
    per second by kind."""
    ser = report.get("series") or {}
    dt = ser.get("interval_s") or 1.0
    ticks = []
    for p in ser.get("points", []):
        created = p.get("orders_created", 0)
        rejected = p.get("rejections", 0)
        errors = p.get("errors", 0)
        other = max(p.get("requests", 0) - created - rejected - errors - p.get("replays", 0), 0)
        ticks.append({"t": round(p.get("t", 0) + dt, 2), "damage": None, "out": {
            "201 created": round(created / dt, 1), "refused (409, 422)": round(rejected / dt, 1),
            "errors (5xx, no answer)": round(errors / dt, 1),
            "other answers (tokens, reads)": round(other / dt, 1)},
            "layer": {"p50": p.get("p50_ms", 0), "p99": p.get("p99_ms", 0)}})
    return ticks


def fault_marks(txt):
    """The fault lines of a ticketd-load run (its stderr): when the crash
    lesson's flush and crash ran, in seconds since the load started."""
    marks = []
    try:
        with open(txt, errors="replace") as f:
            for line in f:
                for prefix, label in (("ticketd-load: fault at ", "log flushed"),
                                      ("ticketd-load: fault end at ", "3 nodes killed")):
                    if line.startswith(prefix):
                        t = float(line[len(prefix):].split()[0])
                        marks.append({"edge": "start", "t": t, "label": label,
                                      "text": line.strip()})
    except (OSError, ValueError):
        pass
    return marks


# ---------------------------------------------------------------------------
# (a) galera-stock-cas


def stock_cas_pass(cl, which, n, seed):
    # One database connection per instance, and one order per transaction
    # (no merged batches, in both passes): each instance orders one at a
    # time, so every race is between two nodes, none inside one. On one
    # server the same naive order oversells too (the stock-cas lesson);
    # here the point is that Galera's certification does not stop it.
    cl.start_instances([1, 2, 3], "galera-stock-cas-" + which,
                       off="stock-cas" if which == "without" else "",
                       env=["TICKETD_DB_CONNS=1", "TICKETD_MERGE=0"])
    tag = "galera-stock-cas-" + which
    rep = cl.load(tag, HTTP_PORTS,
                  ["flash-sale", "--users", "200", "--seats", "50", "--rounds",
                   str(n(24)), "--concurrency", "24", "--duration", "180", "--no-audit"], seed,
                  history=True)
    retries = {c: cl.metric(HTTP_PORTS, 'ticketd_transaction_retries_total{cause="%s"}' % c)
               for c in ("certification", "deadlock")}
    audit = cl.audit(HTTP_PORTS)
    cl.stop_instances()
    # The checker's witnesses: the orders of one sale that took more seats
    # than it had, from the history and node 1's tables.
    off = "stock-cas" if which == "without" else ""
    checked = runner.judge_history(NodeOne(), {"db": "main", "off": off},
                                   os.path.join(cl.logs, tag + ".history.jsonl"),
                                   BY_NAME["galera-stock-cas"])
    damage = rep.get("damage", {})
    oversold = int(damage.get("oversold_seats", 0))
    sold = sessions_sold(cl)
    return {
        "figure": oversold,
        "notes": "%d flash sales of 50 seats, %d seats taken in all; Galera refused %d "
                 "racing write-backs at certification and aborted %d (retried)"
                 % (n(24), sold, retries["certification"], retries["deadlock"]),
        "verdict": rep.get("verdict"),
        "command": rep.get("command"),
        "checker": checked,
        "audit": audit,
        "history": tag + ".history.jsonl",
    }


class NodeOne:
    """Node 1's database as the checker reads the lab's (runner.Stack's
    mariadb_argv and mariadb_env): every node holds the same rows."""

    def mariadb_argv(self, _db):
        return ["mariadb", "--no-defaults", "--protocol=TCP", "-h", "127.0.0.1", "-P",
                str(SQL_PORTS[0]), "-u", "ticketd", "-D", "ticketd", "--batch",
                "--skip-column-names", "--connect-timeout=2"]

    def mariadb_env(self):
        return env_without_ticketd({"MYSQL_PWD": "ticketd"})


def sessions_sold(cl):
    out = cl.sql(1, "SELECT COALESCE(SUM(quantity), 0) FROM orders WHERE status <> 'CANCELLED'")
    return int(out.split()[0]) if out.split() else 0


# ---------------------------------------------------------------------------
# (b) galera-read-own-writes


def make_session(admin):
    c = http.client.HTTPConnection("127.0.0.1", HTTP_PORTS[0], timeout=10)
    c.request("POST", "/api/v1/sessions",
              body=json.dumps({"title": "read your own writes", "price_cents": 1000,
                               "stock": 1000000}),
              headers={"Authorization": "Bearer " + admin, "Content-Type": "application/json"})
    resp = c.getresponse()
    body = resp.read()
    c.close()
    if resp.status != 201:
        raise LessonError("creating a session answered %d: %s" % (resp.status, body[:200]))
    return json.loads(body)["id"]


def read_own_writes_pass(cl, which, n, seed):
    sync_wait = "0" if which == "without" else "1"
    cl.start_instances([1, 2, 3], "galera-read-own-writes-" + which,
                       env=["TICKETD_MYSQL_SYNC_WAIT=" + sync_wait,
                            "TICKETD_ORDER_TOKEN_REQUIRED=0"])
    admin = cl.jwt(1, admin=True)
    workers = 12
    # A session per client: orders of different clients never touch one
    # stock row, so no certification conflict blurs the reads.
    sids = [make_session(admin) for _ in range(workers)]
    per_worker = max(1, n(900) // workers)
    # Users and keys from the seed: the same seed, the same requests.
    base = seed
    tokens = [cl.jwt(base + w) for w in range(workers)]
    stale = []  # (order_no, wrote on, read on)
    ops = {}  # order_no: its POST and GET, as the checker's witnesses show requests
    times = []  # (when answered, the answer), for the page's chart
    t0 = time.monotonic()
    counts = {"created": 0, "found": 0}
    others = {}
    lock = threading.Lock()
    log("  %d clients x %d orders: each POST /api/v1/orders on one instance, then at once "
        "GET /api/v1/orders/{order_no} on the next (another node); TICKETD_MYSQL_SYNC_WAIT=%s"
        % (workers, per_worker, sync_wait))

    def ask(conns, i, method, path, body=None, headers=None):
        """One request on instance i's kept-alive connection; a connection
        the server closed is opened again once. (status, body) or (0, b"")."""
        for _ in range(2):
            try:
                conns[i].request(method, path, body=body, headers=headers or {})
                r = conns[i].getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException):
                conns[i].close()
                conns[i] = http.client.HTTPConnection("127.0.0.1", HTTP_PORTS[i], timeout=10)
        return 0, b""

    def note(what):
        with lock:
            others[what] = others.get(what, 0) + 1

    def client(w):
        conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=10) for p in HTTP_PORTS]
        auth = {"Authorization": "Bearer " + tokens[w]}
        for i in range(per_worker):
            a = (w + i) % 3
            b = (a + 1) % 3
            key = "row-%d-%d-%d" % (base, w, i)
            sent = time.monotonic() - t0
            status, body = ask(conns, a, "POST", "/api/v1/orders",
                               json.dumps({"session_id": sids[w], "quantity": 1}),
                               dict(auth, **{"Idempotency-Key": key,
                                             "Content-Type": "application/json"}))
            made = time.monotonic() - t0
            if status != 201:
                note("POST %d" % status)
                with lock:
                    times.append((made, "POST %d" % status))
                continue
            no = json.loads(body)["order_no"]
            status, _ = ask(conns, b, "GET", "/api/v1/orders/" + no, headers=auth)
            read = time.monotonic() - t0
            with lock:
                times.append((made, "201 created"))
                times.append((read, {200: "GET 200 found", 404: "GET 404 ORDER_NOT_FOUND"}.get(
                    status, "GET %d" % status)))
                counts["created"] += 1
                if status == 200:
                    counts["found"] += 1
                elif status == 404:
                    stale.append((no, a + 1, b + 1))
                    ops[no] = [
                        {"op": "%d.%d" % (w, 2 * i), "f": "POST /orders on node %d" % (a + 1),
                         "key": key, "answer": "201", "layer": "-", "order_no": no,
                         "sent": sent, "done": made, "type": "ok"},
                        {"op": "%d.%d" % (w, 2 * i + 1), "f": "GET /orders/%s on node %d"
                         % (no, b + 1), "answer": "404 ORDER_NOT_FOUND", "layer": "-",
                         "sent": made, "done": read, "type": "fail"}]
            if status not in (200, 404):
                note("GET %d" % status)
        for conn in conns:
            conn.close()

    threads = [threading.Thread(target=client, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    audit = cl.audit(HTTP_PORTS)
    cl.stop_instances()
    if SINK is not None:
        SINK.series(bucket_ticks(times), [])
    # Each 404 against the database: an order every node holds.
    held = {s[0] for s in stale}
    if stale:
        nos = ",".join("'%s'" % s[0] for s in stale)
        for node in (1, 2, 3):
            held &= set(cl.sql(node, "SELECT order_no FROM orders WHERE order_no IN (%s)"
                               % nos).split())
    exist = len(held)
    with open(os.path.join(cl.logs, "galera-read-own-writes-%s.stale" % which), "w") as f:
        for s in stale:
            f.write("%s made on node %d, 404 on node %d%s\n"
                    % (s + ("" if s[0] in held else " (missing on a node)",)))
    first = ("; first: order %s made on node %d, 404 on node %d" % stale[0]) if stale else ""
    other = ", ".join("%d %s" % (v, k) for k, v in sorted(others.items())) or "none"
    return {
        "figure": exist,
        "notes": "%d orders made, each read at once on another node: %d found, %d answered "
                 "404, of which %d exist on every node%s; other answers: %s"
                 % (counts["created"], counts["found"], len(stale), exist, first, other),
        "verdict": "DAMAGE" if exist else "NO_DAMAGE",
        "command": "%d Python clients (lab/cluster_lessons.py:read_own_writes_pass), users "
                   "from the seed %d; TICKETD_MYSQL_SYNC_WAIT=%s" % (workers, seed, sync_wait),
        "checker": {"off": "wsrep_sync_wait" if which == "without" else "nothing",
                    "ops": 2 * counts["created"],
                    "violations": {"stale-read": exist} if exist else {},
                    "witnesses": [{
                        "kind": "stale-read",
                        "rule": "an order answered 201 is found by its owner's next read",
                        "text": "order %s made on node %d (201), then GET on node %d: 404, "
                                "although every node holds it" % s,
                        "ops": ops[s[0]]} for s in stale if s[0] in held][:WITNESSES]},
        "audit": audit,
    }


# Witnesses shown per pass, as the one-node lessons (runner.WITNESSES_KEPT).
WITNESSES = runner.WITNESSES_KEPT


def bucket_ticks(times, dt=0.2):
    """The page's chart points from (time, answer) pairs: answers per
    second by kind, over dt-second buckets."""
    if not times:
        return []
    end = max(t for t, _ in times)
    ticks = []
    for k in range(int(end / dt) + 1):
        lo, hi = k * dt, (k + 1) * dt
        counts = {}
        for t, what in times:
            if lo <= t < hi:
                counts[what] = counts.get(what, 0) + 1
        ticks.append({"t": round(hi, 2), "damage": None, "layer": {},
                      "out": {k2: round(v / dt, 1) for k2, v in counts.items()}})
    return ticks


# ---------------------------------------------------------------------------
# (c) galera-crash-durability


# innodb_flush_log_at_timeout's largest value: InnoDB's own once-a-second
# log flush does not come during the without pass; the lesson plays that
# flush itself, at a moment of the storm's choosing (see crash_pass).
FLUSH_TIMEOUT_OFF = "2700"


def crash_pass(cl, which, n, seed, kill_only=False):
    """The storm on the three nodes; after n(1000) answers the nodes' log
    is flushed to their disks (what InnoDB does once a second with
    innodb_flush_log_at_trx_commit=2); n(400) answers later the three
    nodes die at once, and their disks lose what the kernel had not
    written (a power cut). Every order answered after the flush is then
    on no disk with 2: the loss comes from the load's progress, not from
    where the crash fell in InnoDB's second. With 3 each commit reached
    the disk before its answer: 0. Not 1: with Galera a commit that went
    through the two-phase commit (prepare, then commit) has only its
    prepare flushed with 1, and the recovery rolls back what it finds
    only prepared (docs/scaling.md)."""
    flush = "2" if which == "without" else "3"
    tag = "galera-crash-durability-" + which
    # The log through the kernel's page cache on every node. A node's
    # redo log is written with O_DIRECT or through the cache depending on
    # how it started (a node that bootstrapped: O_DIRECT; one that joined
    # by mariabackup: the cache), and SET GLOBAL innodb_flush_log_at_trx_commit
    # does not change it. On the lab's disks (loop devices with direct I/O)
    # an O_DIRECT write is on the disk at once, as if a real disk had no
    # volatile write cache: a node that bootstrapped lost nothing with 2,
    # and the lesson showed its loss in half its runs, as the crash found
    # the most advanced node O_DIRECT or not. Through the cache, the
    # kernel's dirty pages play the disk's write cache, which only a flush
    # empties, on every node alike.
    cl.set_global("innodb_log_file_buffering", "ON")
    cl.set_global("innodb_flush_log_at_trx_commit", flush)
    # Without: InnoDB's timed flush held off for the pass (the lesson's
    # flush stands for it); with: the server's default, 1 s (irrelevant
    # with 3, where the commit itself flushes).
    cl.set_global("innodb_flush_log_at_timeout",
                  FLUSH_TIMEOUT_OFF if which == "without" else "1")
    cl.start_instances([1, 2, 3], tag)
    orders_out = os.path.join(cl.logs, tag + ".orders")
    mark = os.path.join(cl.logs, tag + ".flushed")
    for path in (orders_out, mark):
        if os.path.exists(path):
            os.unlink(path)
    # The flush: the orders answered so far are counted first (the load
    # appends each 201's order_no as it comes), then each node's file
    # system is synced (syncfs: its log reaches its disk, as InnoDB's
    # fsync of the log would put it there).
    disks = " ".join(os.path.join(cl.state, "g%d" % k) for k in (1, 2, 3))
    flush_cmd = "wc -l < %s > %s.tmp && sync -f %s && mv %s.tmp %s" % (
        orders_out, mark, disks, mark, mark)
    crash = "%s crash %s%s" % (CLUSTER, cl.state, "" if kill_only else " power")
    log("  innodb_flush_log_at_trx_commit=%s on the three nodes%s; after %d answers the "
        "nodes' log is flushed to their disks, %d answers later the crash: SIGKILL of the "
        "three nodes at once%s" % (
            flush, (", innodb_flush_log_at_timeout=%s (the lesson flushes instead)"
                    % FLUSH_TIMEOUT_OFF) if which == "without" else "", n(1000), n(400),
            "" if kill_only else ", then each disk loses what the kernel held (a power cut)"))
    rep = cl.load(tag, HTTP_PORTS, [
        "new-orders", "--sessions", "20", "--concurrency", "24",
        "--requests", str(n(8000)), "--duration", "60", "--client-retries", "0",
        "--no-audit", "--settle", "0", "--orders-out", orders_out,
        "--fault", flush_cmd, "--fault-after", str(n(1000)),
        "--fault-end", crash, "--fault-end-after", str(n(400))], seed, history=True)
    cl.stop_instances()
    with open(orders_out) as f:
        answered = [line.strip() for line in f if line.strip()]
    try:
        with open(mark) as f:
            flushed = int(f.read().strip())
    except (OSError, ValueError):
        raise LessonError("the flush before the crash did not run (see %s/%s.txt)"
                          % (cl.logs, tag))
    before, after = set(answered[:flushed]), set(answered[flushed:])
    log("  the clients hold %d answered orders (201): %d before the flush, %d after it; "
        "restarting the cluster" % (len(before | after), len(before), len(after - before)))
    t0 = time.monotonic()
    cl.cl("up")
    log("  cluster back (%.0f s): the most advanced node bootstrapped, the others joined"
        % (time.monotonic() - t0))
    rows = set(cl.sql(1, "SELECT order_no FROM orders").split())
    lost = [o for o in answered if o not in rows]
    lost_before = [o for o in lost if o in before]
    # The audit of each node, through instances started again on the
    # restarted cluster: a consistent database, which cannot know what
    # its clients were told.
    cl.start_instances([1, 2, 3], tag + "-after")
    audit = cl.audit(HTTP_PORTS)
    cl.stop_instances()
    witnesses = crash_witnesses(os.path.join(cl.logs, tag + ".history.jsonl"), lost,
                                fault_marks(os.path.join(cl.logs, tag + ".txt")))
    with open(os.path.join(cl.logs, tag + ".lost"), "w") as f:
        for o in lost:
            f.write("%s answered 201 %s the flush, missing after the restart\n"
                    % (o, "before" if o in before else "after"))
    fault = rep.get("fault") or {}
    # The restarted nodes run with scripts/cluster.sh's settings again
    # (flush at commit 3, the timed flush every second).
    return {
        "figure": len(lost),
        "notes": "%d orders answered 201: %d before the flush (%d of them lost), %d after it "
                 "before the crash (%d answers after the flush began); %d rows after the "
                 "restart; %d answered orders missing%s"
                 % (len(set(answered)), len(before), len(lost_before), len(after - before),
                    n(400), len(rows), len(lost), ("; first: " + lost[0]) if lost else ""),
        "verdict": "DAMAGE" if lost else "NO_DAMAGE",
        "lost": lost,
        "fault": fault,
        "command": rep.get("command"),
        "history": tag + ".history.jsonl",
        "checker": {"off": "innodb_flush_log_at_trx_commit=3 (2 on the nodes)"
                    if which == "without" else "nothing",
                    "ops": len(answered), "violations": {"lost-order": len(lost)} if lost else {},
                    "witnesses": witnesses},
        "audit": audit,
    }


def crash_witnesses(history, lost, marks):
    """The first lost orders as the page shows witnesses: each its POST
    from the history (answered 201), after the flush and before the
    crash, and gone after the restart."""
    if not lost:
        return []
    try:
        ops = checker.read_history(history)
    except checker.CheckError:
        ops = {}
    by_no = {}
    for op in ops.values():
        no = (op.get("end") or {}).get("order_no")
        if no and op.get("f") != "token":
            by_no.setdefault(no, op)
    at = {m["label"]: m["t"] for m in marks}
    out = []
    for no in lost[:WITNESSES]:
        op = by_no.get(no)
        view = [checker.op_view(op)] if op else []
        out.append({
            "kind": "lost-order",
            "rule": "an order answered 201 survives a crash of the whole cluster",
            "text": "order %s answered 201%s; the log flushed at %s s, the three nodes "
                    "killed at %s s; after the restart no node has it" % (
                        no, (" at %.2f s" % view[0]["done"]) if view and view[0]["done"]
                        is not None else "", at.get("log flushed", "?"),
                        at.get("3 nodes killed", "?")),
            "ops": view})
    return out


LESSONS = [
    {
        "name": "galera-stock-cas",
        "title": "Lost updates across Galera nodes",
        "articles": "002 §5, 004 §3.3",
        "idea": "Galera certifies the rows a transaction wrote, not what it read: two nodes "
        "read the same stock, each writes back the value it computed, and both commit. The "
        "compare-and-set decrement is computed by the database from the row it writes.",
        "defence": "stock-cas",
        "switches_off": [{"name": "stock-cas", "harm": defences.BY_NAME["stock-cas"]["harm"]}],
        "where": "service/mysql/store_mysql.c (S_ORDER_PLACE), "
        "service/naive/store_naive.c:store_naive_place_read_stock; three instances, each on "
        "its own node (scripts/cluster.sh)",
        "unit": "oversold seats",
        "figure": ["oversold_seats"],
        "run": stock_cas_pass,
    },
    {
        "name": "galera-read-own-writes",
        "title": "Reading your own write on another node",
        "articles": "beyond the articles: docs/scaling.md, reading your own writes",
        "idea": "A commit returns once every node has the write set and certified it, not "
        "once every node applied it: read on another node right after the 201, the order "
        "may not be there yet.",
        "defence": "wsrep_sync_wait",
        "switches_off": [{"name": "wsrep_sync_wait (TICKETD_MYSQL_SYNC_WAIT=0)",
                          "harm": "a read on a node that has not applied the latest commits "
                          "yet answers from before them"}],
        "where": "service/mysql/db.c:connect_thread (SET SESSION wsrep_sync_wait), "
        "service/base/config.c (TICKETD_MYSQL_SYNC_WAIT)",
        "unit": "404s for orders that exist",
        "figure": [],
        "run": read_own_writes_pass,
    },
    {
        "name": "galera-crash-durability",
        "title": "Three nodes crash together",
        "articles": "beyond the articles: docs/scaling.md, which flush setting",
        "idea": "A Galera commit is on every node before its 201, so one dead node loses "
        "nothing. Three that lose power together keep only what reached their disks: with "
        "innodb_flush_log_at_trx_commit=2, not what came after the last log flush; with 1, "
        "not a two-phase commit whose prepare only was flushed.",
        "defence": "innodb_flush_log_at_trx_commit=3",
        "switches_off": [{"name": "innodb_flush_log_at_trx_commit=3 (2 on every node)",
                          "harm": "a commit's log is written to the kernel and flushed to the "
                          "disk later; a power cut of every node loses what came in between"}],
        "where": "scripts/cluster.sh (write_node_cnf, crash, most_advanced), "
        "lab/cluster_lessons.py:crash_pass",
        "unit": "answered orders lost",
        "figure": [],
        "needs_root": True,
        "run": crash_pass,
    },
]
BY_NAME = {lesson["name"]: lesson for lesson in LESSONS}


def public(lesson):
    """What the lab's page shows of a lesson (as lessons.public)."""
    keys = ("name", "title", "articles", "idea", "defence", "where", "unit", "figure",
            "switches_off")
    out = {k: lesson[k] for k in keys}
    out.update(kind="cluster", judge="damage", expect="damage",
               available=availability(lesson["name"]))
    return out


GALERA = ("/usr/lib/galera/libgalera_smm.so", "/usr/lib/galera-4/libgalera_smm.so",
          "/usr/lib/x86_64-linux-gnu/galera/libgalera_smm.so")


def availability(name):
    """Whether this machine can run the lesson: {"ok": True}, or why not
    and how to get it (the page says so on the card instead of failing)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [b for b in ("mariadbd", "mariabackup", "socat", "redis-sentinel")
               if shutil.which(b, path=path) is None]
    if not any(os.path.exists(p) for p in GALERA):
        missing.insert(0, "Galera (libgalera_smm.so)")
    if missing:
        return {"ok": False, "why": "this machine has no %s" % ", ".join(missing),
                "how": "scripts/deps.sh --cluster installs Galera, mariabackup, socat and "
                       "Redis Sentinel (as root), then restart the lab"}
    if BY_NAME[name].get("needs_root") and os.geteuid() != 0:
        return {"ok": False, "why": "the power cut puts each node on a disk of its own (a "
                "loop device) and cuts it: that needs root",
                "how": "run the lab as root (sudo make lab), or on the command line: "
                       "lab/cluster_lessons.py lesson galera-crash-durability --kill-only "
                       "(the kill alone, which loses nothing)"}
    return {"ok": True}


def scaler(size):
    return lambda x: max(1, int(round(x * size)))


def new_seed():
    """As the lab draws one (runner.new_seed): from the clock, 10^5 a second."""
    return int(time.time() * 100000)


def repeat_command(name, seed, size=1.0, kill_only=False):
    """The command that runs a lesson again with the same requests."""
    if kill_only:
        return "lab/cluster_lessons.py lesson %s --kill-only --seed %d%s" % (
            name, seed, "" if size == 1.0 else " --size %g" % size)
    return "make lesson L=%s LAB_ARGS='--seed %d%s'" % (
        name, seed, "" if size == 1.0 else " --size %g" % size)


def run_lesson(cl, lesson, n, kill_only=False, seed=None, size=1.0):
    """Both passes, with one seed (the same requests without and with)."""
    seed = new_seed() if seed is None else seed
    log("seed %d: the same requests again with %s" % (seed, repeat_command(
        lesson["name"], seed, size, kill_only)))
    res = {"seed": seed}
    for which in ("without", "with"):
        log("%s, %s %s:" % (lesson["name"], which, lesson["defence"]))
        cl.reset()
        if lesson["name"] == "galera-crash-durability":
            r = lesson["run"](cl, which, n, seed, kill_only)
        else:
            r = lesson["run"](cl, which, n, seed)
        log("  %s: %d %s; %s" % (which, r["figure"], lesson["unit"], r["notes"]))
        finish_pass(cl, lesson, which, r, seed, size, kill_only)
        res[which] = r
    return res


def finish_pass(cl, lesson, which, r, seed, size, kill_only=False):
    """The seed and the command that repeats the pass, in its result and
    as the first line of its history (as the one-node lab's)."""
    r["seed"] = seed
    r["repeat"] = repeat_command(lesson["name"], seed, size, kill_only)
    r["history_dir"] = cl.logs
    if r.get("history"):
        runner.write_history_head(os.path.join(cl.logs, r["history"]), {
            "lesson": lesson["name"], "pass": which, "seed": seed,
            "load": r.get("command"), "repeat": r["repeat"]})


def run_for_page(sink, name, passes, seed, size, state=None, logs=None):
    """A lesson run from the lab's page (lab/server.py): the cluster
    brought up on demand, the passes asked for, and everything said to
    sink as it happens: each line (phase), the charts' points (series),
    each pass's result, and the nodes' states twice a second (nodes).
    The nodes are stopped at the end unless TICKETD_CLUSTER_KEEP=1."""
    global SINK
    lesson = BY_NAME[name]
    state = state or os.path.join(ROOT, ".state", "cluster-lab")
    logs = logs or os.path.join(ROOT, "build", "cluster-lab")
    fd = hold_lock(state)
    stop = threading.Event()
    cl = Cluster(state, logs)
    seen = set()

    def watch():
        while not stop.is_set():
            sink.nodes(cl.node_states(seen))
            stop.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    global ACTIVE
    ACTIVE = cl
    try:
        port = busy_cluster(state)
        if port is not None:
            raise LessonError("127.0.0.1:%d is taken: is make test-cluster running? One "
                              "cluster at a time" % port)
        watcher.start()
        SINK = sink
        try:
            cl.up()
            log("seed %d: the same requests again with %s" % (seed, repeat_command(name, seed,
                                                                                   size)))
            n = scaler(size)
            for which in (("without", "with") if passes == "both" else (passes,)):
                sink.phase(which, "%s %s: emptying the tables and Redis" % (which,
                                                                             lesson["defence"]))
                cl.reset()
                if name == "galera-crash-durability":
                    r = lesson["run"](cl, which, n, seed, False)
                else:
                    r = lesson["run"](cl, which, n, seed)
                finish_pass(cl, lesson, which, r, seed, size)
                sink.result(which, r)
        finally:
            log("cluster: stopping the instances%s" % (
                "" if os.environ.get("TICKETD_CLUSTER_KEEP") == "1" else " and the nodes"))
            cl.down()
            SINK = None
            ACTIVE = None
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
        sink.nodes(cl.node_states(set()) if os.environ.get("TICKETD_CLUSTER_KEEP") == "1"
                   else [{"node": k, "state": "stopped", "port": SQL_PORTS[k - 1]}
                         for k in (1, 2, 3)])
        os.close(fd)


def lesson_line(lesson, res):
    name = lesson["name"]
    return "lesson %s: without %s: %d %s; with it: %d %s" % (
        name, lesson["defence"], res["without"]["figure"], lesson["unit"],
        res["with"]["figure"], lesson["unit"])


def hold_lock(state):
    os.makedirs(state, exist_ok=True)
    fd = os.open(os.path.join(state, "lesson.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LessonError("another run uses %s" % state)
    return fd


def our_nodes(state):
    """True when a node of this state folder runs (kept by TICKETD_CLUSTER_KEEP)."""
    for n in (1, 2, 3):
        try:
            with open(os.path.join(state, "g%d" % n, "mysqld.pid")) as f:
                pid = int(f.read().strip())
            with open("/proc/%d/comm" % pid) as f:
                if f.read().startswith("mariadbd"):
                    return True
        except (OSError, ValueError):
            pass
    return False


def busy_cluster(state):
    """The cluster's ports are shared with make test-cluster."""
    import socket

    for port in (HTTP_PORTS if our_nodes(state) else SQL_PORTS + HTTP_PORTS):
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return port
    return None


def cmd_lesson(name, size=1.0, state=None, logs=None, kill_only=False, seed=None):
    lesson = BY_NAME.get(name)
    if lesson is None:
        print("cluster lessons: unknown lesson '%s'" % name, file=sys.stderr)
        return 2
    if kill_only and name != "galera-crash-durability":
        print("cluster lessons: --kill-only is for galera-crash-durability", file=sys.stderr)
        return 2
    state = state or os.path.join(ROOT, ".state", "cluster-lab")
    logs = logs or os.path.join(ROOT, "build", "cluster-lab")
    if name == "galera-crash-durability" and not kill_only and os.geteuid() != 0:
        print("cluster lessons: the power cut needs root (loop devices); run as root, or "
              "with --kill-only for the process kill alone", file=sys.stderr)
        return 2
    hold_lock(state)
    cl = Cluster(state, logs)
    port = busy_cluster(state)
    if port is not None:
        print("cluster lessons: 127.0.0.1:%d is taken: is make test-cluster running? "
              "One cluster at a time" % port, file=sys.stderr)
        return 1
    try:
        cl.up()
        res = run_lesson(cl, lesson, scaler(size), kill_only, seed, size)
    finally:
        cl.down()
    print(lesson_line(lesson, res), flush=True)
    return 0


def machine():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "%d cores (%s), %s %s" % (os.cpu_count() or 0, model, platform.system(),
                                     platform.release())


def revision():
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return rev + (" with local changes" if dirty else "")


def cmd_record(runs, out, size, state=None, logs=None, kill_only_too=True):
    state = state or os.path.join(ROOT, ".state", "cluster-lab")
    logs = logs or os.path.join(ROOT, "build", "cluster-lab")
    if os.geteuid() != 0:
        print("cluster lessons: recording needs root (the power cut's loop devices)",
              file=sys.stderr)
        return 2
    hold_lock(state)
    port = busy_cluster(state)
    if port is not None:
        print("cluster lessons: 127.0.0.1:%d is taken: is make test-cluster running?" % port,
              file=sys.stderr)
        return 1
    cl = Cluster(state, logs)
    rows = []
    kill_rows = []
    t0 = time.monotonic()
    n = scaler(size)
    try:
        cl.up()
        for run in range(1, runs + 1):
            for lesson in LESSONS:
                rows.append((run, lesson, run_lesson(cl, lesson, n, size=size)))
        if kill_only_too:
            lesson = BY_NAME["galera-crash-durability"]
            for run in range(1, runs + 1):
                kill_rows.append((run, run_lesson(cl, lesson, n, kill_only=True, size=size)))
    finally:
        cl.down()
    write(out, rows, kill_rows, size, time.monotonic() - t0)
    print("cluster lessons: wrote %s" % out, file=sys.stderr)
    return 0


def write(path, rows, kill_rows, size, took):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# The Galera lessons, measured",
        "",
        "Generated by `make cluster-lessons-run` (`lab/cluster_lessons.py record`); do not "
        "edit by hand. The figures docs/lessons.md and docs/scaling.md quote for the Galera "
        "lessons come from this run.",
        "",
        "- when: %s; ticketd %s; size %g" % (now, revision(), size),
        "- machine: %s" % machine(),
        "- cluster: scripts/cluster.sh, three MariaDB %s Galera nodes on 127.0.0.1 (each on "
        "an ext4 disk of its own: a loop device with direct I/O), Redis; the instances "
        "`TICKETD_ENV=demo`; the tables and Redis emptied before each pass; %.0f s in all"
        % (server_version(), took),
        "",
        "Figures vary from run to run (they count races); the pattern is what holds: "
        "damage without the defence, 0 with it. The crash lesson's loss is set by the "
        "load's progress: the orders answered between the nodes' last log flush (after "
        "1000 answers) and the crash (400 answers later). Each run's seed repeats its "
        "requests: `make lesson L=NAME LAB_ARGS='--seed SEED'` (which answers win each "
        "race is the servers' doing, so the figures differ).",
        "",
        "| run | lesson | seed | without the defence | with it | without: what happened "
        "| with: what happened |",
        "|--:|---|--:|--:|--:|---|---|",
    ]
    for run, lesson, res in rows:
        out.append("| %d | `%s` | %d | **%d %s** (without %s) | %d | %s | %s |" % (
            run, lesson["name"], res["seed"], res["without"]["figure"], lesson["unit"],
            lesson["defence"], res["with"]["figure"], res["without"]["notes"],
            res["with"]["notes"]))
    if kill_rows:
        out += [
            "",
            "## The crash without the power cut",
            "",
            "`galera-crash-durability --kill-only`: the same storm, flush and SIGKILL of the "
            "three nodes, but their disks keep the kernel's page cache (the processes die, "
            "the machine does not). With `innodb_flush_log_at_trx_commit=2` a commit's log "
            "is written to the kernel at once and only flushed to the disk later, so a "
            "process kill alone loses nothing; it takes the machine's crash (here: its "
            "disks' power cut) to lose what came after the last flush.",
            "",
            "| run | seed | without (flush 2) | with (flush 3) | without: what happened |",
            "|--:|--:|--:|--:|---|",
        ]
        for run, res in kill_rows:
            out.append("| %d | %d | %d answered orders lost | %d | %s |" % (
                run, res["seed"], res["without"]["figure"], res["with"]["figure"],
                res["without"]["notes"]))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def server_version():
    res = subprocess.run(["mariadbd", "--version"], capture_output=True, text=True)
    if res.returncode != 0:
        res = subprocess.run(["/usr/sbin/mariadbd", "--version"], capture_output=True, text=True)
    words = res.stdout.split()
    return words[2].split("-")[0] if len(words) > 2 else "?"


def main(argv):
    ap = argparse.ArgumentParser(prog="cluster_lessons.py")
    ap.add_argument("command", choices=["list", "lesson", "record"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--size", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kill-only", action="store_true")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "cluster-lessons-run.md"))
    args = ap.parse_args(argv)

    def stop(signum, _frame):
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        if args.command == "list":
            for lesson in LESSONS:
                print("  %-28s %s (Galera cluster)" % (lesson["name"], lesson["title"]))
            return 0
        if args.command == "lesson":
            return cmd_lesson(args.name, args.size, kill_only=args.kill_only, seed=args.seed)
        return cmd_record(args.runs, args.out, args.size)
    except LessonError as e:
        print("cluster lessons: error: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cluster lessons: interrupted; everything it started is stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
