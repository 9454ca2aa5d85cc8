// The lab's page: cards from /api/lessons, runs through POST /api/runs, and
// /api/state polled about six times a second while a run goes. The lab
// aggregates answers over 200 ms ticks; each tick adds a point to the charts.
"use strict";

const POLL_MS = 150;
const PASSES = ["without", "with"];

// One colour per outcome and per layer, the same on every chart (Okabe-Ito
// and Tol colours: distinct for colour-blind eyes and on a projector).
const OUTCOME_COLOURS = {
  "201 created": "#0072B2",
  "201 replayed": "#56B4E9",
  "200": "#009E73",
  "200 replayed": "#7fd6b8",
  "409 REQUEST_IN_PROGRESS": "#E69F00",
  "409 DUPLICATE_SUBMISSION": "#CC79A7",
  "409 ORDER_TOKEN_INVALID": "#D55E00",
  "409 SOLD_OUT": "#6b6b6b",
  "503 SERVICE_UNAVAILABLE": "#000000",
  "no answer": "#b00020",
  "token 201": "#9aa5b1",
  // the Galera lessons' series
  "refused (409, 422)": "#E69F00",
  "errors (5xx, no answer)": "#000000",
  "other answers (tokens, reads)": "#9aa5b1",
  "GET 200 found": "#009E73",
  "GET 404 ORDER_NOT_FOUND": "#D55E00",
  "p50": "#56B4E9",
  "p99": "#0072B2",
};
const LAYER_COLOURS = {
  "response-cache": "#0072B2",
  "inflight-key": "#E69F00",
  "session-lock": "#CC79A7",
  "token": "#D55E00",
  "unique-index": "#009E73",
  "check-then-insert": "#8c6d1f",
  "callback-dedup": "#56B4E9",
  "state-machine": "#000000",
  "consumer-dedup": "#882255",
};
const SPARE = ["#332288", "#44AA99", "#999933", "#AA4499", "#117733", "#661100", "#6699CC", "#888888"];

// What a run of the lesson shows, said on its card before it runs.
const EXPECT = {
  damage: "Expect: damage without the defence, 0 with it.",
  missed: "Expect: copies one after another find nothing and pass the broken code (1); " +
    "copies at once find the duplicates (0 broken code passed).",
};

let TABLE = null; // what /api/lessons said
let byName = {};
let runId = null;
let have = { without: 0, with: 0 };
let charts = {};
let spareUsed = {};

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

function colourOf(map, key) {
  if (map[key]) return map[key];
  if (key.startsWith("503")) return "#000000";
  if (!spareUsed[key]) spareUsed[key] = SPARE[Object.keys(spareUsed).length % SPARE.length];
  return spareUsed[key];
}

// Draws each fault of the pass as a dashed red line with its label.
const faultPlugin = {
  id: "faultMarks",
  afterDatasetsDraw(chart) {
    const marks = chart.options.plugins.faultMarks || [];
    const { ctx, chartArea, scales } = chart;
    marks.forEach((m, i) => {
      const x = scales.x.getPixelForValue(m.t);
      if (x < chartArea.left || x > chartArea.right) return;
      ctx.save();
      ctx.strokeStyle = "#b00020";
      ctx.lineWidth = 3;
      ctx.setLineDash([8, 5]);
      ctx.beginPath();
      ctx.moveTo(x, chartArea.top);
      ctx.lineTo(x, chartArea.bottom);
      ctx.stroke();
      ctx.fillStyle = "#b00020";
      ctx.font = "bold 14px DejaVu Sans, sans-serif";
      // each label on its own line: a flush starts and ends at once
      ctx.fillText(m.label, Math.min(x + 5, chartArea.right - 120), chartArea.top + 15 + 17 * i);
      ctx.restore();
    });
  },
};

function makeChart(canvas, title) {
  return new Chart(canvas, {
    type: "line",
    data: { datasets: [] },
    plugins: [faultPlugin],
    options: {
      animation: false,
      maintainAspectRatio: false,
      parsing: false,
      normalized: true,
      elements: { point: { radius: 0 }, line: { borderWidth: 3, tension: 0 } },
      plugins: {
        title: { display: true, text: title, font: { size: 16, weight: "bold" }, color: "#111" },
        legend: { position: "bottom", labels: { font: { size: 14 }, boxWidth: 18, color: "#111" } },
        faultMarks: [],
      },
      scales: {
        x: { type: "linear", min: 0, title: { display: true, text: "seconds since the load started",
             font: { size: 14 }, color: "#111" }, ticks: { font: { size: 13 }, color: "#111" } },
        y: { beginAtZero: true, title: { display: true, text: "answers per second", font: { size: 14 },
             color: "#111" }, ticks: { font: { size: 13 }, color: "#111" } },
      },
    },
  });
}

function resetCharts(kind) {
  for (const c of Object.values(charts)) c.destroy();
  charts = {};
  for (const w of PASSES) {
    charts["out-" + w] = makeChart(document.getElementById("out-" + w), "answers by outcome (HTTP status, code)");
    charts["layer-" + w] = makeChart(document.getElementById("layer-" + w), "duplicates caught, by Idempotency-Layer");
    if (kind === "cluster") {
      // A cluster pass is drawn when its load is over, from its own series.
      charts["out-" + w].options.plugins.title.text = "answers per second, over the three nodes";
      const lat = charts["layer-" + w].options;
      lat.plugins.title.text = "latency (ms): p50 and p99 of each 200 ms";
      lat.scales.y.title.text = "milliseconds";
    }
  }
}

function addPoints(chart, map, t, values) {
  const seen = new Set();
  for (const [k, v] of Object.entries(values)) {
    let ds = chart.data.datasets.find((d) => d.label === k);
    if (!ds) {
      ds = { label: k, data: [], borderColor: colourOf(map, k), backgroundColor: colourOf(map, k) };
      // a series that starts late starts from zero, not from nowhere
      if (chart.data.datasets.length && chart.data.datasets[0].data.length) ds.data.push({ x: 0, y: 0 });
      chart.data.datasets.push(ds);
    }
    ds.data.push({ x: t, y: v });
    seen.add(k);
  }
  for (const ds of chart.data.datasets) if (!seen.has(ds.label)) ds.data.push({ x: t, y: 0 });
}

// --- cards --------------------------------------------------------------

// What the pass without the defence switches off, each with the words the
// service logs for it (its table, service/model/defences.def).
function switchedOff(lesson) {
  const off = lesson.switches_off || [];
  if (!off.length) return el("p", { class: "switched-off" }, "Switched off: nothing");
  return el("p", { class: "switched-off" }, el("b", {}, "Switched off: "),
    ...off.map((d, i) => el("span", { title: d.harm }, (i ? ", " : "") + d.name)));
}

// A Galera lesson: one click runs it without, then with its defence, on
// three nodes the lab starts then; where this machine cannot, the card
// says why and how to get it.
function clusterCard(lesson) {
  const can = lesson.available || { ok: false, why: "unknown", how: "" };
  const button = el("button", { class: "both", onclick: () => start(lesson.name, "both"),
                                "data-lesson": lesson.name, "data-passes": "both" },
    "start the cluster, run without, then with");
  if (!can.ok) button.disabled = true;
  return el("div", { class: "card cluster", id: "card-" + lesson.name },
    el("h4", {}, lesson.title + " ", el("small", {}, lesson.name + " · " + lesson.articles)),
    el("p", {}, lesson.idea),
    el("p", {}, el("b", {}, "Defence: "), lesson.defence, el("b", {}, " · damage in: "), lesson.unit),
    switchedOff(lesson),
    el("p", { class: "where" }, lesson.where),
    can.ok ? el("p", { class: "expect" }, EXPECT.damage)
      : el("p", { class: "unavailable" }, el("b", {}, "Not on this machine: "), can.why + ". ",
        el("b", {}, "To get it: "), can.how + "."),
    el("div", {}, button));
}

function card(lesson) {
  if (lesson.kind === "cluster") return clusterCard(lesson);
  const buttons = [
    el("button", { class: "without", onclick: () => start(lesson.name, "without"),
                   "data-lesson": lesson.name, "data-passes": "without" }, "run without"),
    el("button", { class: "with", onclick: () => start(lesson.name, "with"),
                   "data-lesson": lesson.name, "data-passes": "with" }, "run with"),
    el("button", { class: "both", onclick: () => start(lesson.name, "both"),
                   "data-lesson": lesson.name, "data-passes": "both" }, "without, then with"),
  ];
  return el("div", { class: "card", id: "card-" + lesson.name },
    el("h4", {}, lesson.title + " ", el("small", {}, lesson.name + " · articles " + lesson.articles)),
    el("p", {}, lesson.idea),
    el("p", {}, el("b", {}, "Defence: "), lesson.defence, el("b", {}, " · damage in: "), lesson.unit),
    switchedOff(lesson),
    el("p", { class: "where" }, lesson.where),
    el("p", { class: "expect" }, EXPECT[lesson.judge === "missed" ? "missed" : lesson.expect] || ""),
    el("div", {}, ...buttons));
}

async function start(name, passes, seed) {
  const msg = document.getElementById("message");
  msg.textContent = "";
  const body = { lesson: name, passes: passes };
  if (seed) body.seed = seed;
  const r = await fetch("/api/runs", { method: "POST", headers: { "Content-Type": "application/json" },
                                       body: JSON.stringify(body) });
  if (!r.ok) {
    const p = await r.json().catch(() => ({}));
    msg.textContent = (p.title || r.status) + ": " + (p.detail || "");
    msg.dataset.status = String(r.status);
  }
}

// --- the run --------------------------------------------------------------

function showLesson(name, passes) {
  const l = byName[name];
  document.querySelectorAll(".card.active").forEach((c) => c.classList.remove("active"));
  const c = document.getElementById("card-" + name);
  if (c) c.classList.add("active");
  document.getElementById("run-title").textContent = l.title + " (" + l.name + ")";
  document.getElementById("run-idea").textContent = l.idea;
  for (const w of PASSES) {
    const p = document.getElementById("pass-" + w);
    p.querySelector(".defence").textContent = l.defence;
    p.querySelector(".unit").textContent = l.unit;
    p.querySelector(".source").textContent = passes === "both" || passes === w ? "waiting" : "not run";
    const n = document.getElementById("figure-" + w);
    n.textContent = "–";
    n.className = "num";
    n.dataset.final = "0";
    p.querySelector(".command").textContent = "";
    document.getElementById("layer-" + w).parentElement.hidden = false;
    document.getElementById("notes-" + w).textContent = "";
    document.getElementById("chips-" + w).replaceChildren();
    document.getElementById("witnesses-" + w).replaceChildren();
  }
  document.getElementById("compare").replaceChildren();
  document.getElementById("checks").replaceChildren();
}

function unitOf(kind) {
  const d = TABLE.damage.find((x) => x[0] === kind);
  return d ? d[1] : kind;
}

function setFigure(w, lesson, value, final) {
  const n = document.getElementById("figure-" + w);
  const p = document.getElementById("pass-" + w);
  n.textContent = value === null ? "…" : String(value);
  n.className = "num" + (value === null ? "" : value > 0 ? " bad" : " zero");
  n.dataset.final = final ? "1" : "0";
  p.querySelector(".source").textContent = final ? (lesson.kind === "cluster" ? "counted by the lesson against the three nodes"
    : "the verdict of ticketd-load (its JSON report)")
    : value === null ? "counted by the verdict at the end of the run" : "live, from the database";
}

function chips(w, damage) {
  const box = document.getElementById("chips-" + w);
  // Only what was found: a row of zeros would hide the one that is not.
  const found = TABLE.damage.filter(([k]) => damage[k] > 0);
  box.replaceChildren(...(found.length ? found.map(([k, unit]) => el("span", { class: "bad" }, damage[k] + " " + unit))
    : [el("span", {}, "no damage of any kind")]));
}

// The checker's witnesses of a finished pass (lab/checker.py): each the
// requests that broke a rule, as a short timeline, with their answers and
// layers and the defence that was off; and the pass's history to download.
function witnesses(w, lesson, res) {
  const box = document.getElementById("witnesses-" + w);
  if (box.dataset.run === String(runId)) return; // drawn once per pass
  box.dataset.run = String(runId);
  const c = res.checker || {};
  const kids = [];
  if (c.error) kids.push(el("p", { class: "none" }, "the checker could not judge the history: " + c.error));
  else if ((!c.witnesses || !c.witnesses.length) && c.no_rule && res.figure > 0) {
    kids.push(el("p", { class: "none" }, c.no_rule + "."));
  } else if (!c.witnesses || !c.witnesses.length) {
    kids.push(el("p", { class: "none" }, "checker: no request broke a rule (" + (c.ops || 0) +
      " operations; " + (c.unknown || 0) + " unknown outcomes, " + (c.unknown_resolved || 0) +
      " resolved by a later retry)"));
  } else {
    const total = Object.values(c.violations).reduce((a, b) => a + b, 0);
    kids.push(el("h5", {}, "Witnesses: the requests that did it (" + c.witnesses.length + " of " + total + ")"));
    for (const wit of c.witnesses) kids.push(witnessBox(wit, c.off));
  }
  if (res.history) {
    kids.push(el("a", { class: "history", href: "/api/history?run=" + runId + "&pass=" + w,
                        download: res.history },
      "download this run's history (" + (c.ops || 0) + " operations, JSON lines; its first line: the seed and the command that repeats it)"));
  }
  box.replaceChildren(...kids);
}

function witnessBox(wit, off) {
  const ops = wit.ops || [];
  const t0 = Math.min(...ops.map((o) => o.sent || 0));
  const t1 = Math.max(...ops.map((o) => (o.done === null || o.done === undefined ? o.sent || 0 : o.done)));
  const span = Math.max(t1 - t0, 0.001);
  const rows = ops.map((o) => {
    const left = (((o.sent || 0) - t0) / span) * 100;
    const end = o.done === null || o.done === undefined ? t1 : o.done;
    const width = Math.max(((end - (o.sent || 0)) / span) * 100, 1);
    const cls = o.type === "ok" ? (o.replayed ? "replayed" : "ok") : o.type;
    const label = "op " + o.op + " " + o.f + (o.key ? " " + o.key : "") + " → " + o.answer +
      (o.layer ? "" : " (no layer)") + (o.order_no ? " · order " + o.order_no : "") +
      " · " + (o.sent || 0).toFixed(2) + "–" +
      (o.done === null || o.done === undefined ? "?" : o.done.toFixed(2)) + " s";
    return el("div", { class: "wop", title: label + " (sent " + (o.sent || 0).toFixed(3) + " s, answered " +
                       (o.done === null || o.done === undefined ? "never" : o.done.toFixed(3) + " s") + ")" },
      el("span", { class: "label" }, label),
      el("span", { class: "lane" }, el("span", { class: "bar " + cls,
                                                 style: "left:" + left.toFixed(1) + "%;width:" + Math.min(width, 100 - left).toFixed(1) + "%" })));
  });
  return el("div", { class: "witness", "data-kind": wit.kind },
    el("div", { class: "rule" }, wit.rule),
    el("div", { class: "off" }, "defence off: " + (off || "nothing") + " · " + t0.toFixed(2) + "–" + t1.toFixed(2) + " s"),
    ...rows,
    el("div", { class: "text" }, wit.text));
}

function updatePass(w, lesson, d) {
  const p = document.getElementById("pass-" + w);
  if (d.command) p.querySelector(".command").textContent = d.command;
  for (const t of d.ticks) {
    addPoints(charts["out-" + w], OUTCOME_COLOURS, t.t, t.out);
    addPoints(charts["layer-" + w], lesson.kind === "cluster" ? OUTCOME_COLOURS : LAYER_COLOURS, t.t, t.layer);
  }
  const marks = d.faults.map((f) => ({ t: f.t, label: (f.label ? f.label + " at " : f.edge === "start" ? "fault at " : "fault over at ") + f.t.toFixed(1) + " s" }));
  for (const kind of ["out-", "layer-"]) {
    charts[kind + w].options.plugins.faultMarks = marks;
    charts[kind + w].update("none");
  }
  have[w] = d.from + d.ticks.length;
  if (d.result && lesson.kind === "cluster") {
    setFigure(w, lesson, d.result.figure, true);
    document.getElementById("chips-" + w).replaceChildren(d.result.figure > 0
      ? el("span", { class: "bad" }, d.result.figure + " " + lesson.unit) : el("span", {}, "no damage"));
    document.getElementById("notes-" + w).textContent = d.result.notes || "";
    witnesses(w, lesson, d.result);
    // A pass without a latency series (the read-your-writes clients) has
    // no second chart.
    document.getElementById("layer-" + w).parentElement.hidden = !charts["layer-" + w].data.datasets.length;
  } else if (d.result) {
    setFigure(w, lesson, d.result.figure, true);
    const dmg = {};
    for (const [k] of TABLE.damage) dmg[k] = d.result.damage[k] || 0;
    chips(w, dmg);
    if (lesson.judge === "missed") {
      document.getElementById("chips-" + w).prepend(el("span", { class: "found" },
        "the test found " + d.result.found + " duplicate orders"));
    }
    witnesses(w, lesson, d.result);
  } else if (lesson.kind === "cluster") {
    // counted against the nodes once the pass is over, drawn then too
    if (!d.ticks.length) p.querySelector(".source").textContent = "waiting: the figure and the charts come when this pass is over";
  } else if (d.ticks.length) {
    const live = d.ticks[d.ticks.length - 1].damage;
    if (live && lesson.judge === "missed") {
      // what the test finds so far; whether it missed is known at the end
      setFigure(w, lesson, null, false);
      document.getElementById("chips-" + w).replaceChildren(
        el("span", { class: "found" }, "found so far: " + (live.duplicate_orders || 0) + " duplicate orders"));
    } else if (live) {
      const kinds = lesson.figure.filter((k) => TABLE.live.includes(k));
      setFigure(w, lesson, kinds.length ? kinds.reduce((s, k) => s + (live[k] || 0), 0) : null, false);
      chips(w, live);
    }
  }
}

function row(cells, head) {
  return el("tr", {}, ...cells.map((c) => {
    const td = el(head ? "th" : "td", typeof c === "object" && c !== null ? { class: c.cls } : {},
      typeof c === "object" && c !== null ? c.text : String(c));
    return td;
  }));
}

// A cluster lesson's end: its figure both ways, and the audit of each
// node (GET /api/v1/admin/audit through the instance on that node).
function clusterTables(lesson, res) {
  const cmp = document.getElementById("compare");
  cmp.replaceChildren(el("caption", {}, "The two runs side by side"),
    row(["", "without " + lesson.defence, "with it"], true),
    row([lesson.unit + " (the lesson's figure)", ...res.map((r) => (r ? { text: String(r.figure), cls: "n" + (r.figure > 0 ? " bad" : " ok") } : "–"))]),
    row(["seed", ...res.map((r) => (r ? String(r.seed) : "–"))]));
  const nodes = [];
  for (const r of res) if (r && r.audit) for (const n of Object.keys(r.audit)) if (!nodes.includes(n)) nodes.push(n);
  const names = [];
  for (const r of res) if (r && r.audit) for (const n of nodes) for (const c of r.audit[n] || []) if (!names.includes(c.name)) names.push(c.name);
  const mark = (r, n, name) => {
    const c = r && r.audit && (r.audit[n] || []).find((x) => x.name === name);
    return c ? { text: c.ok ? "ok" : "FAILED", cls: c.ok ? "ok" : "bad" } : "–";
  };
  const head = ["check"];
  for (const w of PASSES) for (const n of nodes) head.push(w + ", " + n);
  const chk = document.getElementById("checks");
  chk.replaceChildren(el("caption", {}, "The audit of each node (GET /api/v1/admin/audit)"),
    row(head, true), ...names.map((name) => {
      const cells = [name];
      res.forEach((r) => { for (const n of nodes) cells.push(mark(r, n, name)); });
      return row(cells);
    }));
}

function endTables(lesson, data) {
  const res = PASSES.map((w) => data[w].result);
  if (!res[0] && !res[1]) return;
  if (lesson.kind === "cluster") return clusterTables(lesson, res);
  const val = (r, f) => (r ? f(r) : "–");
  const dmgCell = (r, k) => (r ? { text: String(r.damage[k] || 0), cls: "n" + ((r.damage[k] || 0) > 0 ? " bad" : "") } : "–");
  const cmp = document.getElementById("compare");
  cmp.replaceChildren(el("caption", {}, "The two runs side by side"),
    row(["", "without " + lesson.defence, "with it"], true),
    row([lesson.unit + " (the lesson's figure)", ...res.map((r) => (r ? { text: String(r.figure), cls: "n" + (r.figure > 0 ? " bad" : " ok") } : "–"))]),
    // the lesson's own kind is the row above when it is a single kind
    ...TABLE.damage.filter(([k]) => !(lesson.figure.length === 1 && lesson.figure[0] === k))
      .map(([k, unit]) => row([unit, ...res.map((r) => dmgCell(r, k))])),
    row(["orders created", ...res.map((r) => val(r, (x) => x.orders_created))]),
    row(["requests", ...res.map((r) => val(r, (x) => x.requests))]),
    row(["p99 latency (ms)", ...res.map((r) => val(r, (x) => x.p99_ms.toFixed(1)))]),
    row(["load time (s)", ...res.map((r) => val(r, (x) => x.elapsed_s.toFixed(1)))]),
    row(["verdict (exit code)", ...res.map((r) => val(r, (x) => x.verdict + " (" + x.exit_code + ")"))]));
  const names = [];
  for (const r of res) if (r) for (const c of r.checks) if (!names.includes(c.name)) names.push(c.name);
  const mark = (r, n) => {
    if (!r) return "–";
    const c = r.checks.find((x) => x.name === n);
    return c ? { text: c.ok ? "ok" : "FAILED", cls: c.ok ? "ok" : "bad" } : "–";
  };
  const chk = document.getElementById("checks");
  chk.replaceChildren(el("caption", {}, "The audit's checks (GET /api/v1/admin/audit)"),
    row(["check", "without", "with"], true), ...names.map((n) => row([n, mark(res[0], n), mark(res[1], n)])));
}

function update(s) {
  const status = document.getElementById("run-status");
  status.dataset.status = s.status;
  status.textContent = s.status === "idle" ? "idle" : s.status + (s.lesson ? ": " + s.lesson : "");
  if (s.status === "idle") return;
  if (s.run !== runId) {
    runId = s.run;
    have = { without: 0, with: 0 };
    resetCharts(s.kind);
    showLesson(s.lesson, s.passes);
  }
  drawNodes(s);
  drawRepeat(s);
  document.getElementById("phase").textContent = (s.current ? s.current + ": " : "") + s.phase;
  const lesson = byName[s.lesson];
  for (const w of PASSES) updatePass(w, lesson, s.data[w]);
  endTables(lesson, s.data);
  if (s.status === "error") document.getElementById("message").textContent = "the run failed: " + s.error;
}

// The cluster's nodes, each with its state as the lesson goes: starting,
// joining, synced, killed (its process gone), stopped.
function drawNodes(s) {
  const box = document.getElementById("nodes");
  box.hidden = s.kind !== "cluster";
  if (box.hidden) return;
  const nodes = s.nodes && s.nodes.length ? s.nodes
    : [1, 2, 3].map((n) => ({ node: n, state: "down", port: "" }));
  box.replaceChildren(...nodes.map((n) => el("div", { class: "node", "data-state": n.state, "data-node": String(n.node) },
    "node " + n.node + ": " + n.state, el("small", {}, "Galera, SQL port " + n.port))));
}

// The run's seed, and a button that runs the lesson again with it.
function drawRepeat(s) {
  const box = document.getElementById("repeat");
  box.hidden = !s.seed;
  if (box.hidden || box.dataset.run === String(s.run) + s.status) return;
  box.dataset.run = String(s.run) + s.status;
  const again = el("button", { class: "again", "data-seed": String(s.seed),
                               onclick: () => start(s.lesson, s.passes, s.seed) }, "run this again");
  if (s.status === "running") again.disabled = true;
  box.replaceChildren(el("b", {}, "seed " + s.seed), again,
    el("span", {}, "or: "), el("code", {}, s.repeat),
    el("div", { class: "note" }, "The same seed sends the same requests, each client in the same order; " +
      "which request wins each race is still up to the servers, so the figures may differ."));
}

async function poll() {
  try {
    const q = runId === null ? "" : "?run=" + runId + "&without=" + have.without + "&with=" + have.with;
    const r = await fetch("/api/state" + q);
    update(await r.json());
  } catch (e) {
    document.getElementById("phase").textContent = "the lab does not answer (" + e + ")";
  }
  setTimeout(poll, POLL_MS);
}

async function main() {
  TABLE = await (await fetch("/api/lessons")).json();
  for (const l of TABLE.lessons) byName[l.name] = l;
  document.getElementById("lesson-cards").replaceChildren(...TABLE.lessons.filter((l) => l.kind === "lesson").map(card));
  document.getElementById("fault-cards").replaceChildren(...TABLE.lessons.filter((l) => l.kind === "fault").map(card));
  document.getElementById("cluster-cards").replaceChildren(...TABLE.lessons.filter((l) => l.kind === "cluster").map(card));
  resetCharts();
  // ?autorun=NAME[&passes=both] clicks a lesson's button once the page is up:
  // the browser test drives the page this way, through its own buttons.
  const q = new URLSearchParams(location.search);
  if (q.get("autorun")) {
    const b = document.querySelector('button[data-lesson="' + CSS.escape(q.get("autorun")) +
      '"][data-passes="' + CSS.escape(q.get("passes") || "both") + '"]');
    if (b) b.click();
    else document.getElementById("message").textContent = "no lesson named " + q.get("autorun");
  }
  poll();
}

main();
