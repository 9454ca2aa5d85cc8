"""The lab's page and its small JSON API.

  GET  /                 the page (web/index.html, lab.js, lab.css)
  GET  /chart.js         Debian's Chart.js (libjs-chart.js), served from disk
  GET  /api/lessons      the table (lessons.public), the damage kinds and units,
                         and the service's table of defences (defences.py)
  GET  /api/state        the current or last run; ?run=ID&without=N&with=N asks
                         only for the ticks after the N the page already has
  GET  /api/history      ?run=ID&pass=without|with: that pass's history of client
                         operations (JSON lines, docs/lab.md), the last run only
  POST /api/runs         {"lesson": NAME, "passes": "both" | "without" | "with",
                          "seed": N (optional: the same requests as the run of
                          that seed)}
                         202 started; 409 while a run goes; 422 unknown lesson,
                         bad seed, or a cluster lesson this machine cannot run
The Galera lessons (cluster_lessons.py) run from here too: the run brings
the three nodes up on demand, and /api/state adds the nodes' states.

Errors are RFC 9457 problems. One run at a time: the run goes in its own
thread, and a second POST while it runs is refused, not queued. The lesson
name is only ever a key into lessons.BY_NAME.
"""

import json
import os
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import cluster_lessons
import lessons
import runner

WEB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web")
# Chart.js 3.9's UMD build, as the Debian package installs it.
CHART_JS = "/usr/share/javascript/chart.js/chart.min.js"
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/lab.js": ("lab.js", "text/javascript; charset=utf-8"),
    "/lab.css": ("lab.css", "text/css; charset=utf-8"),
}
MAX_BODY = 4096
PHASE_MAX = 160


class Run:
    """What the page sees of one run; the runner's sink."""

    def __init__(self, run_id, lesson, passes, seed, size, kind="lesson"):
        self.id = run_id
        self.lesson = lesson
        self.passes = passes
        self.seed = seed
        self.size = size
        self.kind = kind
        self.node_states = []
        self.status = "running"
        self.phase_text = "starting"
        self.current = None
        self.error = None
        self.lock = threading.Lock()
        self.data = {w: {"ticks": [], "faults": [], "result": None, "command": None}
                     for w in ("without", "with")}
        self.bucket_out = {}
        self.bucket_layer = {}
        self.last_t = 0.0

    # --- the sink ---------------------------------------------------------

    def phase(self, which, text):
        """which: the pass the text is about; None: the current one (a
        cluster lesson's lines)."""
        with self.lock:
            if which is not None:
                self.current = which
            # A line may carry a whole command: the header shows its start.
            self.phase_text = text if len(text) <= PHASE_MAX else text[:PHASE_MAX - 1] + "…"

    def start(self, which, command):
        with self.lock:
            self.data[which]["command"] = command
            self.bucket_out, self.bucket_layer, self.last_t = {}, {}, 0.0

    def answer(self, outcome, layer):
        with self.lock:
            self.bucket_out[outcome] = self.bucket_out.get(outcome, 0) + 1
            if layer:
                self.bucket_layer[layer] = self.bucket_layer.get(layer, 0) + 1

    def fault(self, edge, t, line):
        with self.lock:
            self.data[self.current]["faults"].append({"edge": edge, "t": round(t, 2),
                                                      "text": line})

    def tick(self, t, damage):
        with self.lock:
            span = max(t - self.last_t, 0.05)
            tick = {
                "t": round(t, 2),
                "out": {k: round(v / span, 1) for k, v in self.bucket_out.items()},
                "layer": {k: round(v / span, 1) for k, v in self.bucket_layer.items()},
                "damage": damage,
            }
            self.data[self.current]["ticks"].append(tick)
            self.bucket_out, self.bucket_layer, self.last_t = {}, {}, t

    def result(self, which, res):
        with self.lock:
            self.data[which]["result"] = res
            if res.get("command"):
                self.data[which]["command"] = res["command"]

    # --- a cluster lesson's sink, besides phase and result ------------------
    def series(self, ticks, faults):
        """A pass's chart points, made after its load (ticketd-load's time
        series, or the clients' own answers), and its faults."""
        with self.lock:
            if self.current in self.data:
                self.data[self.current]["ticks"].extend(ticks)
                self.data[self.current]["faults"].extend(faults)

    def nodes(self, states):
        with self.lock:
            self.node_states = states

    # --- what /api/state answers ---------------------------------------------

    def view(self, have):
        with self.lock:
            out = {"run": self.id, "lesson": self.lesson["name"], "passes": self.passes,
                   "status": self.status, "phase": self.phase_text, "current": self.current,
                   "error": self.error, "kind": self.kind, "seed": self.seed,
                   "repeat": (cluster_lessons.repeat_command if self.kind == "cluster"
                              else runner.repeat_command)(self.lesson["name"], self.seed,
                                                          self.size),
                   "nodes": self.node_states, "data": {}}
            for w, d in self.data.items():
                start = have.get(w, 0) if have.get("run") == self.id else 0
                out["data"][w] = {"from": start, "ticks": d["ticks"][start:],
                                  "faults": d["faults"], "result": d["result"],
                                  "command": d["command"]}
            return out


class Lab:
    def __init__(self, args, stack):
        self.args = args
        self.stack = stack
        self.lock = threading.Lock()
        self.run = None
        self.runs = 0
        self.n = lessons.scaler(args.size)

    def start(self, name, passes, seed=None):
        """Returns (status, body) for POST /api/runs."""
        lesson = lessons.BY_NAME.get(name) if isinstance(name, str) else None
        kind = "lesson"
        if lesson is None and isinstance(name, str) and name in cluster_lessons.BY_NAME:
            lesson, kind = cluster_lessons.BY_NAME[name], "cluster"
            can = cluster_lessons.availability(name)
            if not can["ok"]:
                return 422, problem(422, "This machine cannot run a cluster",
                                    "%s; %s" % (can["why"], can["how"]))
        if seed is None:
            seed = runner.new_seed()
        elif isinstance(seed, bool) or not isinstance(seed, int) or not 1 <= seed <= 1 << 52:
            return 422, problem(422, "Bad seed", "seed is a whole number from 1 to 2^52")
        if lesson is None:
            return 422, problem(422, "Unknown lesson",
                                "no lesson is named %s; GET /api/lessons lists them"
                                % json.dumps(name)[:80])
        if passes not in ("both", "without", "with"):
            return 422, problem(422, "Unknown passes",
                                "passes is one of both, without, with")
        with self.lock:
            if self.run is not None and self.run.status == "running":
                return 409, problem(409, "A run is going",
                                    "lesson %s is running (%s); one run at a time: wait "
                                    "for it to end" % (self.run.lesson["name"],
                                                       self.run.current or "starting"))
            self.runs += 1
            self.run = Run(self.runs, lesson, passes, seed, self.args.size, kind)
            run = self.run
        threading.Thread(target=self.go, args=(run,), daemon=True).start()
        return 202, {"run": run.id, "lesson": name, "passes": passes, "seed": seed}

    def go(self, run):
        which = ("without", "with") if run.passes == "both" else (run.passes,)
        try:
            if run.kind == "cluster":
                cluster_lessons.run_for_page(run, run.lesson["name"], run.passes, run.seed,
                                             self.args.size)
            for w in which if run.kind == "lesson" else ():
                res = runner.run_pass(self.stack, run.lesson, w, self.n, run,
                                      "%s-%s" % (run.lesson["name"], w), run.seed,
                                      self.args.size)
                run.result(w, res)
            run.status = "done"
            run.phase_text = "done"
        except Exception as e:  # the page must hear of any failure
            traceback.print_exc()
            run.error = str(e)
            run.status = "error"
            run.phase_text = "failed: %s" % e
        finally:
            try:
                self.stack.stop_instances()
            except Exception:
                traceback.print_exc()


def problem(status, title, detail):
    return {"type": "about:blank", "title": title, "status": status, "detail": detail}


def make_handler(lab):
    class Handler(BaseHTTPRequestHandler):
        server_version = "ticketd-lab"

        def log_message(self, fmt, *a):
            pass  # six polls a second would drown the terminal

        def send(self, status, body, ctype="application/json"):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            if ctype == "application/json" and status >= 400:
                ctype = "application/problem+json"
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urlparse(self.path)
            if url.path in STATIC:
                name, ctype = STATIC[url.path]
                with open(os.path.join(WEB, name), "rb") as f:
                    return self.send(200, f.read(), ctype)
            if url.path == "/chart.js":
                if not os.path.exists(CHART_JS):
                    return self.send(404, problem(404, "Chart.js is not installed",
                                                  "scripts/deps.sh installs libjs-chart.js"))
                with open(CHART_JS, "rb") as f:
                    return self.send(200, f.read(), "text/javascript; charset=utf-8")
            if url.path == "/api/lessons":
                return self.send(200, {"lessons": [lessons.public(x) for x in lessons.LESSONS] +
                                       [cluster_lessons.public(x)
                                        for x in cluster_lessons.LESSONS],
                                       "damage": lessons.DAMAGE,
                                       "defences": lessons.defences.DEFENCES,
                                       "live": runner.LIVE_DAMAGE,
                                       "tick_s": runner.TICK_S})
            if url.path == "/api/state":
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                have = {}
                for k in ("run", "without", "with"):
                    if q.get(k, "").isdigit():
                        have[k] = int(q[k])
                run = lab.run
                return self.send(200, run.view(have) if run else {"status": "idle"})
            if url.path == "/api/history":
                return self.history(parse_qs(url.query))
            return self.send(404, problem(404, "Not found", "no such page: %s" % url.path))

        def history(self, q):
            """The last run's history of one pass, as a download. The file
            name comes from the run's own result, never from the query."""
            run = lab.run
            which = (q.get("pass") or [""])[0]
            res = None
            if run is not None and (q.get("run") or [""])[0] == str(run.id) \
                    and which in ("without", "with"):
                res = run.data[which]["result"]
            path = None
            if res and res.get("history"):
                path = os.path.join(res.get("history_dir") or lab.stack.log_dir, res["history"])
            if path is None or not os.path.exists(path):
                return self.send(404, problem(404, "No such history",
                                              "only the last run's finished passes have one"))
            with open(path, "rb") as f:
                data = f.read()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Content-Disposition", "attachment; filename=\"%s\""
                             % os.path.basename(path))
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)
            return None

        def do_POST(self):
            if urlparse(self.path).path != "/api/runs":
                return self.send(404, problem(404, "Not found", "POST /api/runs only"))
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 < length <= MAX_BODY:
                return self.send(400, problem(400, "Bad body",
                                              "a JSON body of at most %d bytes" % MAX_BODY))
            try:
                body = json.loads(self.rfile.read(length))
                if not isinstance(body, dict):
                    raise ValueError
            except ValueError:
                return self.send(400, problem(400, "Bad body", "the body is not a JSON object"))
            status, out = lab.start(body.get("lesson"), body.get("passes", "both"),
                                    body.get("seed"))
            return self.send(status, out)

    return Handler


def serve(args, stack):
    lab = Lab(args, stack)
    try:
        stack.up()
        try:
            httpd = ThreadingHTTPServer((args.bind, args.port), make_handler(lab))
        except OSError as e:
            raise runner.LabError("cannot serve on %s:%d: %s" % (args.bind, args.port, e))
        httpd.daemon_threads = True
        print("ticketd-lab: serving http://%s:%d/ (Ctrl-C stops it and everything it started)"
              % (args.bind, args.port), file=sys.stderr, flush=True)
        httpd.serve_forever(poll_interval=0.2)
    finally:
        stop_run(lab)
        stack.down()
    return 0


def stop_run(lab):
    """Ctrl-C during a run: the runner's children go with the stack."""
    run = lab.run
    if run is not None and run.status == "running":
        run.status = "error"
        run.error = "the lab was stopped"
        if run.kind == "cluster":
            cluster_lessons.stop_for_page()
    time.sleep(0.1)
