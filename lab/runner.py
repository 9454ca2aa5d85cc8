"""The lab's private stack and the one runner of a lesson's passes.

Stack starts and stops what the lab needs: a private Redis and MariaDB
(scripts/services.sh, under the lab's own state folder and ports), the two
databases (one migrated as usual, one without the unique keys on orders),
and two `ticketd serve` instances per pass. Every child is started with an
argv list, never through a shell; the only shell commands are the
--after-load and --fault strings of ticketd-load, which the runner builds
from the fixed table and the lab's own ports.

run_pass() empties the database and Redis, restarts the instances with the
pass's defences, binary and settings, runs ticketd-load with -v (each
answer a line on stderr) and reports to a sink while it runs: answers by
outcome and by Idempotency-Layer, the damage the database shows, the
fault's moment. At the end it reads ticketd-load's JSON report, which is
the verdict: the live counters only show the damage as it appears.
"""

import datetime
import json
import os
import shlex
import signal
import subprocess
import threading
import time
import urllib.request

import checker
import defences
import lessons

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICES = os.path.join(ROOT, "scripts", "services.sh")
TICKETD = os.path.join(ROOT, "build", "release", "ticketd")
TICKETD_FAULTS = os.path.join(ROOT, "build", "faults", "ticketd")
LOAD = os.path.join(ROOT, "build", "loadtest", "ticketd-load")

DB_NAMES = {"main": "ticketd", "noindex": "ticketd_lab_noindex"}
TICK_S = 0.2
LOAD_TIMEOUT_S = 300
STALL_MAX_S = 60
WITNESSES_KEPT = 5  # the page shows up to five

# What a database shows while a run goes, in the units of the verdict. The
# verdict (ticketd-load's JSON) is what counts; this only makes the damage
# visible as it happens. One row, a column per counter, in this order.
LIVE_DAMAGE = [
    "duplicate_orders",
    "oversold_seats",
    "refunded_applied_payments",
    "double_applied_payments",
    "paid_cancelled_orders",
    "double_credited_points",
    "missing_points",
]
_PAID = "('PAID', 'TICKETED', 'COMPLETED')"
_POINTS = (
    "SELECT COALESCE(e.points, 0) AS want, COALESCE(p.points, 0) AS have "
    "FROM (SELECT user_id FROM orders WHERE status IN " + _PAID + " UNION "
    "SELECT user_id FROM user_points) u "
    "LEFT JOIN (SELECT user_id, SUM(amount_cents DIV 100) AS points FROM orders "
    "WHERE status IN " + _PAID + " GROUP BY user_id) e ON e.user_id = u.user_id "
    "LEFT JOIN user_points p ON p.user_id = u.user_id"
)
LIVE_SQL = (
    "SELECT "
    "(SELECT COUNT(*) - COUNT(DISTINCT user_id, session_id, request_id) FROM orders), "
    "(SELECT COALESCE(SUM(GREATEST(COALESCE(h.held, 0) - s.capacity, 0)), 0) FROM sessions s "
    " LEFT JOIN (SELECT session_id, SUM(quantity) AS held FROM orders "
    " WHERE status <> 'CANCELLED' GROUP BY session_id) h ON h.session_id = s.id), "
    "(SELECT COUNT(*) FROM outbox e JOIN payments p ON p.txn_id = e.biz_key "
    " WHERE e.event_type = 'payment.refund_required' AND p.outcome = 'APPLIED'), "
    "(SELECT COUNT(*) FROM (SELECT order_id FROM payments WHERE outcome = 'APPLIED' "
    " GROUP BY order_id HAVING COUNT(*) > 1) d), "
    "(SELECT COUNT(DISTINCT o.id) FROM orders o JOIN payments p ON p.order_id = o.id "
    " AND p.outcome = 'APPLIED' WHERE o.status = 'CANCELLED'), "
    "(SELECT COALESCE(SUM(GREATEST(have - want, 0)), 0) FROM (" + _POINTS + ") x), "
    "(SELECT COALESCE(SUM(GREATEST(want - have, 0)), 0) FROM (" + _POINTS + ") y);\n"
    "SELECT 'lab-end';\n"
)


class LabError(Exception):
    """The lab could not do what was asked (a server did not start, ...)."""


def clean_env(extra=None):
    """The environment for services.sh: it must see only the lab's servers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKETD_")}
    env.update(extra or {})
    return env


def random_hex():
    return os.urandom(32).hex()


class Stack:
    def __init__(self, state, redis_port, mysql_port, http_ports, log_dir, log=print):
        self.state = os.path.abspath(state)
        self.redis_port = redis_port
        self.mysql_port = mysql_port
        self.http_ports = list(http_ports)
        self.log_dir = log_dir
        self.log = log
        self.pids = []
        self.procs = []
        self.up_done = False
        self.jwt_secret = random_hex()
        self.pay_secret = random_hex()
        self.load_proc = None
        self.closed = False
        # The file whose appearance ends a pass's database stall (Stall).
        self.release_path = os.path.join(os.path.abspath(log_dir), "stall.release")
        os.makedirs(log_dir, exist_ok=True)

    # --- servers -------------------------------------------------------------

    def services(self, *args, db=None, check=True):
        extra = {"TICKETD_MYSQL_DB": DB_NAMES[db]} if db else {}
        with open(os.path.join(self.log_dir, "services.log"), "ab") as out:
            rc = subprocess.call([SERVICES, *args], env=clean_env(extra), stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if check and rc != 0:
            raise LabError("scripts/services.sh %s failed (see %s/services.log)"
                           % (" ".join(args), self.log_dir))
        return rc

    def up(self):
        for bin_ in (TICKETD, TICKETD_FAULTS, LOAD):
            if not os.access(bin_, os.X_OK):
                raise LabError("%s is missing: run 'make lab' (it builds it)"
                               % os.path.relpath(bin_, ROOT))
        for p in self.http_ports:
            if port_busy(p):
                raise LabError("127.0.0.1:%d is taken; is another lab running?" % p)
        self.log("lab: starting the private stack under %s (Redis :%d, MariaDB :%d)"
                 % (os.path.relpath(self.state, ROOT), self.redis_port, self.mysql_port))
        self.up_done = True
        ports = (str(self.redis_port), str(self.mysql_port))
        self.services("up", self.state, *ports, db="main")
        self.services("migrate", self.state, db="main")
        # up again reuses the servers and creates the second database.
        self.services("up", self.state, *ports, db="noindex")
        self.services("migrate", self.state, db="noindex")
        self.sql("noindex", "ALTER TABLE orders DROP INDEX IF EXISTS uq_orders_request, "
                 "DROP INDEX IF EXISTS uq_orders_user_request")

    def sql(self, db, statement):
        cmd = self.mariadb_argv(db) + ["-e", statement]
        res = subprocess.run(cmd, env=self.mariadb_env(), capture_output=True, text=True)
        if res.returncode != 0:
            raise LabError("SQL on %s failed: %s" % (DB_NAMES[db], res.stderr.strip()))
        return res.stdout

    def mariadb_argv(self, db):
        return ["mariadb", "--no-defaults", "--protocol=TCP", "-h", "127.0.0.1", "-P",
                str(self.mysql_port), "-u", "ticketd", "-D", DB_NAMES[db], "--batch",
                "--skip-column-names", "--connect-timeout=2"]

    def mariadb_env(self):
        return clean_env({"MYSQL_PWD": "ticketd"})

    def reset(self, db):
        self.services("reset", self.state, db=db)

    def down(self):
        # A run's thread may be between two steps: it must not start
        # instances once the stack is going down.
        self.closed = True
        proc = self.load_proc
        if proc is not None and proc.poll() is None:
            proc.terminate()  # it stops starting requests and prints its verdict
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.stop_instances()
        if self.up_done:
            self.services("down", self.state, check=False)
            self.up_done = False
            self.log("lab: stopped the private stack")

    # --- instances -----------------------------------------------------------

    def instance_env(self, p, port):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/"),
            "TICKETD_ENV": "demo",
            "TICKETD_DEFENSES": defences.setting(p["off"]),
            "TICKETD_BIND": "127.0.0.1",
            "TICKETD_PORT": str(port),
            "TICKETD_REDIS_HOST": "127.0.0.1",
            "TICKETD_REDIS_PORT": str(self.redis_port),
            "TICKETD_MYSQL_HOST": "127.0.0.1",
            "TICKETD_MYSQL_PORT": str(self.mysql_port),
            "TICKETD_MYSQL_USER": "ticketd",
            "TICKETD_MYSQL_PASSWORD": "ticketd",
            "TICKETD_MYSQL_DB": DB_NAMES[p["db"]],
            "TICKETD_JWT_SECRET": self.jwt_secret,
            "TICKETD_PAY_SECRET": self.pay_secret,
            "TICKETD_ACCESS_LOG": "0",
            "TICKETD_CONSUMER_BLOCK_MS": "100",
        }
        for kv in p["env"]:
            k, v = kv.split("=", 1)
            env[k] = v
        return env

    def start_instances(self, p, tag):
        if self.closed:
            raise LabError("the lab is stopping")
        binary = TICKETD_FAULTS if p["faults"] else TICKETD
        logs = []
        for port in self.http_ports:
            path = os.path.join(self.log_dir, "%s-%d.log" % (tag, port))
            logs.append(path)
            with open(path, "wb") as out:
                proc = subprocess.Popen([binary, "serve"], env=self.instance_env(p, port),
                                        stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
            self.procs.append(proc)
        for port in self.http_ports:
            self.wait_ready(port)
        # ticketd says loudly what is off; the lab claims only what it said.
        text = open(logs[0], encoding="utf-8", errors="replace").read()
        for d in defences.names_of(p["off"]):
            if "DEFENCE SWITCHED OFF: %s " % d not in text:
                raise LabError("ticketd did not report %s as switched off (%s)" % (d, logs[0]))

    def wait_ready(self, port):
        for _ in range(200):
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=1):
                    return
            except OSError:
                pass
            if any(proc.poll() is not None for proc in self.procs):
                raise LabError("ticketd exited at start (logs in %s)" % self.log_dir)
            time.sleep(0.1)
        raise LabError("ticketd on :%d not ready after 20 s" % port)

    def stop_instances(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a frozen instance must hear SIGTERM
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []

    # --- the load's words ----------------------------------------------------

    def expand(self, words):
        """The table's @words as ticketd-load arguments, with the lab's ports."""
        redis = "redis-cli -h 127.0.0.1 -p %d FLUSHALL" % self.redis_port
        svc = "env -u TICKETD_REDIS_HOST -u TICKETD_MYSQL_HOST -u TICKETD_MYSQL_SOCKET " \
              "-u TICKETD_CONFIG scripts/services.sh"
        state = shlex.quote(self.state)  # ticketd-load runs --fault with /bin/sh
        mysql = "%s stop-mysql %s && %s start-mysql %s" % (svc, state, svc, state)
        out = []
        for w in words:
            if w == "@redeliver":
                out += ["--after-load", "loadtest/redeliver.sh --port %d --wait 20"
                        % self.redis_port]
            elif w == "@late-redeliver":
                out += ["--after-load", "%s && loadtest/redeliver.sh --port %d --wait 20"
                        % (self.late_partitions(), self.redis_port)]
            elif w == "@midway-flush":
                out += ["--midway", redis]
            elif w == "@flush":
                out += ["--fault", redis]
            elif w == "@kill2":
                out += ["--fault", "kill -9 %d" % self.procs[1].pid]
            elif w == "@stop2":
                out += ["--fault", "kill -STOP %d" % self.procs[1].pid]
            elif w == "@release":
                out += ["--fault", "touch %s" % shlex.quote(self.release_path)]
            elif w == "@end-release":
                out += ["--fault-end", "touch %s" % shlex.quote(self.release_path)]
            elif w == "@end-release-cont2":
                out += ["--fault-end", "touch %s && kill -CONT %d"
                        % (shlex.quote(self.release_path), self.procs[1].pid)]
            elif w == "@mysql-restart":
                out += ["--fault", mysql]
            else:
                out.append(w)
        return out


    def late_partitions(self):
        """`ticketd partitions` twelve days ahead (TICKETD_RETENTION_TODAY,
        demo only) on the main database: every day partition of today is
        past its 7 days and dropped, as if the run were that old."""
        day = (datetime.datetime.now(datetime.timezone.utc).date()
               + datetime.timedelta(days=12)).isoformat()
        env = ["TICKETD_ENV=demo", "TICKETD_RETENTION_TODAY=" + day,
               "TICKETD_MYSQL_HOST=127.0.0.1", "TICKETD_MYSQL_PORT=%d" % self.mysql_port,
               "TICKETD_MYSQL_USER=ticketd", "TICKETD_MYSQL_PASSWORD=ticketd",
               "TICKETD_MYSQL_DB=" + DB_NAMES["main"], "TICKETD_REDIS_HOST=127.0.0.1",
               "TICKETD_REDIS_PORT=%d" % self.redis_port, "TICKETD_JWT_SECRET=" + self.jwt_secret,
               "TICKETD_PAY_SECRET=" + self.pay_secret]
        return "env -i PATH=/usr/bin:/bin %s %s partitions" % (" ".join(env), shlex.quote(TICKETD))


class Stall:
    """A long transaction that holds the orders table while a pass runs:
    `SELECT id FROM orders FOR UPDATE` takes every row and every gap, so
    each order's INSERT waits, after its transaction looked for the key and
    found nothing. The database is slower than every TTL in front of it.
    It ends (ROLLBACK) when the release file appears, which the load's
    --fault or --fault-end command creates after a number of answers (the
    load's progress), or after STALL_MAX_S at the latest."""

    def __init__(self, stack, db):
        self.stack = stack
        self.release = stack.release_path
        if os.path.exists(self.release):
            os.unlink(self.release)
        self.proc = subprocess.Popen(stack.mariadb_argv(db) + ["--unbuffered"],
                                     env=stack.mariadb_env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.proc.stdin.write("SET SESSION innodb_lock_wait_timeout = 120; BEGIN; "
                              "SELECT COUNT(*) FROM (SELECT id FROM orders FOR UPDATE) t; "
                              "SELECT 'stall-locked';\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.strip() == "stall-locked":
                break
        else:
            raise LabError("the database stall could not take its locks")
        self.thread = threading.Thread(target=self._hold, daemon=True)
        self.thread.start()

    def _hold(self):
        deadline = time.monotonic() + STALL_MAX_S
        while not os.path.exists(self.release) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.end()

    def end(self):
        try:
            self.proc.stdin.write("ROLLBACK;\n")
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def close(self):
        with open(self.release, "a"):
            pass
        self.thread.join(timeout=15)


def port_busy(port):
    import socket

    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class LiveDamage:
    """One mariadb client kept open for the run, asked LIVE_SQL each tick."""

    def __init__(self, stack, db):
        self.stack = stack
        self.db = db
        self.proc = None
        self.next_try = 0.0

    def read(self):
        now = time.monotonic()
        if self.proc is None or self.proc.poll() is not None:
            if now < self.next_try:
                return None
            self.next_try = now + 1.0  # MariaDB may be down on purpose
            self.proc = subprocess.Popen(self.stack.mariadb_argv(self.db) + ["--unbuffered"],
                                         env=self.stack.mariadb_env(), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True)
        try:
            self.proc.stdin.write(LIVE_SQL)
            self.proc.stdin.flush()
            row = self.proc.stdout.readline().split()
            end = self.proc.stdout.readline().strip()
        except (OSError, ValueError):
            self.close()
            return None
        if end != "lab-end" or len(row) != len(LIVE_DAMAGE):
            self.close()
            return None
        return {k: int(float(v)) for k, v in zip(LIVE_DAMAGE, row)}

    def close(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


def outcome_of(line):
    """(outcome, layer) of a `ticketd-load -v` answer line, else None.

    The line reads "METHOD PATH -> STATUS CODE LAYER[ replayed] (N ms)"; an
    empty CODE or LAYER leaves two spaces."""
    if " -> " not in line:
        return None
    head, _, rest = line.partition(" -> ")
    if "/api/" not in head:
        return None
    parts = rest.split(" ")
    if len(parts) < 2 or not parts[0].isdigit():
        return None
    status, code = int(parts[0]), parts[1]
    if "/tokens" in head:
        return ("token %d" % status if status else "token: no answer"), ""
    layer = parts[2] if len(parts) > 3 and not parts[2].startswith("(") else ""
    replayed = "replayed" in parts[3:5]
    if status == 0:
        return "no answer", layer
    if status < 300:
        if replayed:
            return "%d replayed" % status, layer
        return ("201 created" if status == 201 else "%d" % status), layer
    return ("%d %s" % (status, code)).strip(), layer


def new_seed():
    """A run's seed, as ticketd-load draws its own: 10^5 a second of wall
    time, so that runs a moment apart never share a user (the seed is the
    first user id) and ids stay far below 2^53."""
    return int(time.time() * 100000)


def write_history_head(path, head):
    """Puts the run's own line first in its history: the seed and the
    command that repeats the load. The checker reads only lines with an
    "op", so it skips this one."""
    try:
        with open(path, "rb") as f:
            body = f.read()
    except OSError:
        return
    with open(path + ".tmp", "wb") as f:
        f.write((json.dumps(dict(head, type="run"), sort_keys=True) + "\n").encode())
        f.write(body)
    os.replace(path + ".tmp", path)


def run_pass(stack, lesson, which, size_n, sink, tag, seed=None, size=1.0):
    """Runs one pass ("without" or "with") of a lesson; returns its result.
    seed: ticketd-load's --seed (the same for both passes of a run: the
    same requests, without and with the defence); None draws one. size:
    the lesson's --size (size_n's factor), for the command that repeats it."""
    seed = new_seed() if seed is None else seed
    p = lesson[which](size_n)
    sink.phase(which, "emptying the database and Redis, starting two instances")
    stack.stop_instances()
    stack.reset(p["db"])
    for statement in p.get("sql", []):
        stack.sql(p["db"], statement)
    stack.start_instances(p, tag)
    json_path = os.path.join(stack.log_dir, "%s.json" % tag)
    if os.path.exists(json_path):
        os.unlink(json_path)
    argv = [LOAD] + stack.expand(p["load"])
    for port in stack.http_ports:
        argv += ["--target", "http://127.0.0.1:%d" % port]
    history_path = os.path.join(stack.log_dir, "%s.history.jsonl" % tag)
    argv += ["--seed", str(seed), "--interval", "200", "--json", json_path, "--history",
             history_path, "-v"]
    env = dict(os.environ)
    env.update({"TICKETD_JWT_SECRET": stack.jwt_secret, "TICKETD_PAY_SECRET": stack.pay_secret})
    sink.phase(which, "running: " + " ".join(p["load"]))
    sink.start(which, shown_command(p, seed))
    stall = Stall(stack, p["db"]) if p.get("stall") else None
    try:
        with open(os.path.join(stack.log_dir, "%s.txt" % tag), "wb") as out:
            proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL)
            stack.load_proc = proc
            watch(proc, stack, p["db"], sink, os.path.join(stack.log_dir, "%s.answers" % tag),
                  has_end="--fault-end" in argv, which=which)
    finally:
        if stall is not None:
            stall.close()
    res = read_result(lesson, json_path, proc.returncode, p, seed)
    res["repeat"] = repeat_command(lesson["name"], seed, size)
    res["history"] = os.path.basename(history_path)
    write_history_head(history_path, {"lesson": lesson["name"], "pass": which, "seed": seed,
                                      "load": res["command"], "repeat": res["repeat"]})
    res["checker"] = judge_history(stack, p, history_path, lesson)
    return res


def judge_history(stack, p, history_path, lesson):
    """The checker's verdict on the pass's history and database: the
    violations by kind and the first witnesses (checker.py)."""
    try:
        ops = checker.read_history(history_path)
        snap = checker.read_database(stack.mariadb_argv(p["db"]), stack.mariadb_env())
    except (checker.CheckError, KeyError, OSError) as e:
        # A pass on another stack (a cluster) may have no database here:
        # its figures stand; only the witnesses are missing, and said so.
        return {"error": str(e), "violations": {}, "witnesses": []}
    out = checker.check(ops, snap, limit=WITNESSES_KEPT)
    # The lesson's own kinds of violation first: its damage, named.
    prefer = [k for d in lesson["figure"] for k in lessons.WITNESS_KINDS.get(d, [])]
    out["witnesses"] = sorted(out["witnesses"], key=lambda w: (
        prefer.index(w["kind"]) if w["kind"] in prefer else len(prefer)))[:WITNESSES_KEPT]
    out["off"] = p["off"] or "nothing"
    out["summary"] = checker.summary_line(out)
    if not prefer:
        # Damage the checker has no rule for (a lock bypassed, a cart
        # item bought twice under fresh keys, a cost): said, not hidden.
        out["no_rule"] = "the checker names no requests for %s: ticketd-load's verdict counts " \
                         "them from the database" % lesson["unit"]
    return out


def watch(proc, stack, db, sink, answers_path, has_end=False, which=None):
    """Feeds the sink from the load's answer lines and the database, every
    TICK_S, until the load exits (bounded by LOAD_TIMEOUT_S)."""
    t0 = time.monotonic()
    done = threading.Event()

    def reader():
        with open(answers_path, "w") as keep:
            for raw in proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                got = outcome_of(line)
                if got is not None:
                    sink.answer(*got)
                    continue
                keep.write(line + "\n")
                if line.startswith("ticketd-load: settling:") and which is not None:
                    sink.phase(which, line[len("ticketd-load: "):])
                # The fault is over when its command exited, or, with a
                # --fault-end, when that ran (a stall released, an
                # instance woken).
                if line.startswith("ticketd-load: fault end at") or (
                        line.startswith("ticketd-load: fault exited") and not has_end):
                    sink.fault("end", time.monotonic() - t0, line)
                elif line.startswith("ticketd-load: fault at"):
                    sink.fault("start", time.monotonic() - t0, line)
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    live = LiveDamage(stack, db)
    try:
        while not done.is_set():
            if time.monotonic() - t0 > LOAD_TIMEOUT_S:
                proc.kill()
            done.wait(TICK_S)
            sink.tick(time.monotonic() - t0, live.read())
        proc.wait()
        sink.tick(time.monotonic() - t0, live.read())
    finally:
        live.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def shown_command(p, seed):
    words = ["TICKETD_DEFENSES=" + defences.setting(p["off"])]
    words += p["env"]
    words.append("build/faults/ticketd" if p["faults"] else "build/release/ticketd")
    return " ".join(words) + " (db %s); ticketd-load %s --seed %d" % (
        DB_NAMES[p["db"]], " ".join(p["load"]), seed)


def repeat_command(name, seed, size=1.0):
    """The command that runs a lesson again with the same requests (the
    same --size too: it sets the counts)."""
    return "make lesson L=%s LAB_ARGS='--seed %d%s'" % (
        name, seed, "" if size == 1.0 else " --size %g" % size)


def read_result(lesson, json_path, rc, p, seed):
    try:
        with open(json_path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        raise LabError("ticketd-load exited %s without its JSON report (%s)" % (rc, json_path))
    damage = report.get("damage", {})
    figures = report.get("figures", {})
    audit = report.get("audit", {})
    # A damage kind, or one of the scenario's figures (a cost, such as
    # refusal-storm's database look-ups).
    found = sum(int(damage.get(k, figures.get(k, 0))) for k in lesson["figure"])
    return {
        # A lesson about a test ("judge": "missed") counts a test that found
        # nothing in broken code; what it found is "found".
        "figure": (1 if found == 0 else 0) if lesson.get("judge") == "missed" else found,
        "found": found,
        "damage": damage,
        "checks": audit.get("checks", []) if isinstance(audit, dict) else [],
        "verdict": report.get("verdict"),
        "exit_code": report.get("exit_code", rc),
        "orders_created": report.get("orders_created", 0),
        "requests": report.get("requests", {}).get("total", 0),
        "elapsed_s": report.get("elapsed_s", 0),
        "p99_ms": report.get("latency_ms", {}).get("p99", 0),
        "replays": report.get("replays", {}).get("by_layer", {}),
        "errors": msgs(report.get("errors")),
        "details": msgs(report.get("damage_details")),
        "fault": report.get("fault"),
        "command": shown_command(p, seed),
        "seed": seed,
        "repeat": repeat_command(lesson["name"], seed),
    }


def msgs(block):
    """The first messages of a ticketd-load message list ({count, first})."""
    if isinstance(block, dict):
        return list(block.get("first", []))[:5]
    return []
