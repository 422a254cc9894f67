// The page: the daemon's status, the interfaces with their live graphs, and the polling loops.
// The config form, runs and reports are in forms.js; the charts in chart.js.
//
// Everything the daemon sends is put in the page as text (textContent), never as HTML.
"use strict";

const SPAN_S = 120; // seconds of history the graphs show
const TOKEN_KEY = "unbloat-token";

// el("div", {class: "x"}, child, "text", ...): an element; attributes starting with "on" are
// listeners.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}

function $(sel, root) {
  return (root || document).querySelector(sel);
}

// ---- the token: from #token=... (the address the daemon's start line says how to make) or typed once; kept for the tab ----

function takeTokenFromUrl() {
  const m = location.hash.match(/token=([0-9a-fA-F]+)/);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, m[1]);
    // Out of the address bar and the history: it is a password.
    history.replaceState(null, "", location.pathname + location.search);
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function showTokenState(message) {
  const has = token() !== "";
  $("#token-state").textContent = message || (has ? "changes allowed (token set)" : "read-only: give the token to change things");
  $("#token-state").className = has ? "ok" : "warn";
  $("#token-form").hidden = has && !message;
}

async function saveToken(ev) {
  ev.preventDefault();
  const given = $("#token-input").value.trim();
  const res = await fetch("/api/token", { method: "POST", headers: { Authorization: `Bearer ${given}` } });
  if (res.status === 204) {
    sessionStorage.setItem(TOKEN_KEY, given);
    $("#token-input").value = "";
    showTokenState();
    // The config and the runs are read with the token (this answer set the runs' cookie too):
    // read them now (forms.js).
    loadConfig();
    pollRuns();
  } else {
    showTokenState("that is not this daemon's token (it is new at each start: see web-token in its run directory)");
  }
}

// fetch with the token (changes need it, and so do reads of the config and the runs); the
// answer's status and JSON (or text).
async function api(method, url, body) {
  const headers = {};
  // The config and the runs are read with the token too; the rest is read without one.
  if (method !== "GET" || token()) headers.Authorization = `Bearer ${token()}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    return { status: 0, json: { error: `the daemon does not answer (${e.message})` } };
  }
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch (_) {
    json = { error: text };
  }
  if (res.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenState(json.error || "the token was refused");
  }
  return { status: res.status, json };
}

// ---- status ----

function ago(unix) {
  const s = Math.max(0, Math.round(Date.now() / 1000 - unix));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}

let lastStatus = { daemon: null, interfaces: [] };

async function pollStatus() {
  await refreshStatus();
  setTimeout(pollStatus, 5000);
}

async function refreshStatus() {
  const { status, json } = await api("GET", "/api/status");
  if (status === 200) {
    lastStatus = json;
    // A build without tune (the router's small one): the run form offers test only.
    if (json.tune === false) document.querySelector('#run-kind option[value="tune"]')?.remove();
    const d = json.daemon;
    $("#daemon").textContent = d
      ? `pid ${d.pid} · up ${ago(d.started_unix)} · ${d.config} · ${d.reapplies} re-applies, ${d.failures} failures, ${d.link_events} link events`
      : "the daemon is busy (applying a change) or ending";
    renderHealth();
  } else {
    $("#daemon").textContent = json.error || `status: HTTP ${status}`;
  }
}

// ---- interfaces and their live graphs ----

// Per "iface/direction": the samples of the last SPAN_S seconds.
const samples = new Map();

function card(iface) {
  let c = document.querySelector(`.iface-card[data-iface="${CSS.escape(iface)}"]`);
  if (c) return c;
  c = el("article", { class: "card iface-card", "data-iface": iface },
    el("header", {}, el("h3", {}, iface), el("span", { class: "health" })),
    el("ul", { class: "summary" }),
    el("p", { class: "network" }),
    el("p", { class: "health-detail" }),
    el("p", { class: "read-error" }),
    el("div", { class: "sides" }));
  $("#interfaces").appendChild(c);
  return c;
}

function renderHealth() {
  const health = new Map((lastStatus.daemon ? lastStatus.daemon.interfaces : []).map(([n, h]) => [n, h]));
  for (const i of lastStatus.interfaces) {
    const c = card(i.iface);
    const ul = $(".summary", c);
    ul.replaceChildren(...i.summary.map((s) => el("li", {}, s)),
      i.fairness ? el("li", { class: "muted" }, i.fairness) : null,
      el("li", { class: "muted" }, `applied ${ago(i.applied_unix)} ago`));
  }
  // The network each interface is on, where the config has [network.NAME] tables (a full
  // build's daemon; the router's has none): which one, and why.
  const networks = (lastStatus.daemon && lastStatus.daemon.networks) || {};
  const unknown = { interface: "an unknown network: its own table", none: "an unknown network: not shaped" };
  for (const [name, h] of health) {
    const c = card(name);
    const n = networks[name];
    $(".network", c).textContent = n ? `on ${n.network ? `network ${n.network}` : unknown[n.shaping] || "an unknown network"} (${n.why})` : "";
    const badge = $(".health", c);
    const words = { shaped: "shaped", waiting: "waiting for the device", failed: "FAILED", held: "left to another process" };
    badge.textContent = words[h.state] || h.state;
    badge.className = `health ${h.state}`;
    // Why it failed, or who moves its rates meanwhile (a tune, an autorate run by hand).
    const detail = $(".health-detail", c);
    detail.textContent = h.state === "failed" ? h.detail : h.state === "held" ? `${h.detail} moves its rates; checked again once it is done` : "";
    detail.className = `health-detail ${h.state}`;
  }
}

function sideBox(c, side) {
  let box = $(`.side[data-direction="${side.direction}"]`, c);
  if (box) return box;
  const key = `${c.dataset.iface}/${side.direction}`;
  const title = side.direction === "up" ? "Upload (egress)" : "Download (ingress, via IFB)";
  box = el("section", { class: "side", "data-direction": side.direction },
    el("h4", {}, title, el("span", { class: "dev" })),
    el("div", { class: "charts" },
      ...["delay", "rate", "drops"].map((kind) => el("figure", {},
        el("figcaption", {}, { delay: "Delay per tin (avg —, peak - -, base ···)", rate: "Throughput: sent (black), offered per tin (- -)", drops: "Drops per tin" }[kind]),
        svgChart(`${key}/${kind}`)))),
    el("table", { class: "tins" }));
  $(".sides", c).appendChild(box);
  return box;
}

function svgChart(name) {
  const s = document.createElementNS(SVG_NS, "svg");
  s.setAttribute("data-chart", name);
  s.setAttribute("class", "chart");
  return s;
}

function renderLive(live) {
  for (const i of live.interfaces) {
    const c = card(i.iface);
    $(".read-error", c).textContent = i.error ? `cannot read it now: ${i.error}` : "";
    for (const side of i.sides) {
      const key = `${i.iface}/${side.direction}`;
      const h = samples.get(key) || [];
      h.push({ t: i.unix_ms, side });
      while (h.length && i.unix_ms - h[0].t > (SPAN_S + 2) * 1000) h.shift();
      samples.set(key, h);
      drawSide(sideBox(c, side), h, i.unix_ms);
    }
  }
}

// Rates from two samples: bits per second and drops per second, per tin (or the qdisc's total).
function deltas(h, pick) {
  const out = [];
  for (let k = 1; k < h.length; k++) {
    const dt = (h[k].t - h[k - 1].t) / 1000;
    const a = pick(h[k - 1].side), b = pick(h[k].side);
    if (!a || !b || dt <= 0) continue;
    // A counter that went down: the qdisc was replaced (a re-apply); no point for that step.
    if (b.sent < a.sent || b.drops < a.drops) continue;
    out.push([h[k].t, (b.sent - a.sent) * 8 / dt, (b.drops - a.drops) / dt]);
  }
  return out;
}

function drawSide(box, h, now) {
  const side = h[h.length - 1].side;
  // The time axis grows with the history, from 30 s to SPAN_S: a page just opened fills its graphs.
  const span = Math.min(SPAN_S, Math.max(30, Math.ceil((now - h[0].t) / 1000)));
  $(".dev", box).textContent = ` ${side.dev} · ${side.qdisc}${side.rate_bps ? ` · ${fmtRate(side.rate_bps)}` : ""}`;
  const charts = (kind) => $(`svg[data-chart$="/${kind}"]`, box);
  const tins = side.tins.length ? side.tins.map((t, i) => ({ name: t.name, i })) : [{ name: "total", i: -1 }];
  const pickTin = (i) => (s) => {
    if (i < 0) return { sent: s.sent_bytes, drops: s.drops };
    const t = s.tins[i];
    return t && { sent: t.sent_bytes, drops: t.drops };
  };
  const colour = (i) => TIN_COLOURS[Math.max(i, 0) % TIN_COLOURS.length];
  // What left the qdisc; a cake tin counts what entered it (sch_cake.c, cake_enqueue), so a
  // tin's line is the offered load and the gap to the black line is what was dropped.
  const sent = deltas(h, pickTin(-1));
  const rateSeries = [{ name: "sent", colour: "#1d2330", points: sent.map(([ts, bps]) => [ts, bps / 1e6]) }];
  const dropSeries = [], delaySeries = [];
  for (const t of tins) {
    const d = deltas(h, pickTin(t.i));
    if (t.i >= 0) rateSeries.push({ name: `${t.name} offered`, colour: colour(t.i), dash: "4 3", points: d.map(([ts, bps]) => [ts, bps / 1e6]) });
    dropSeries.push({ name: t.name, colour: colour(t.i), points: d.map(([ts, , dps]) => [ts, dps]) });
    if (t.i >= 0) {
      for (const [field, dash, what] of [["avg_delay_us", null, "avg"], ["peak_delay_us", "5 3", "peak"], ["base_delay_us", "1 3", "base"]]) {
        delaySeries.push({
          name: `${t.name} ${what}`, colour: colour(t.i), dash,
          points: h.filter((s) => s.side.tins[t.i]).map((s) => [s.t, s.side.tins[t.i][field] / 1000]),
        });
      }
    }
  }
  drawChart(charts("rate"), rateSeries, now, span, {
    unit: "Mbit/s",
    hline: side.rate_bps ? { value: side.rate_bps / 1e6, label: "shaper" } : null,
  });
  drawChart(charts("drops"), dropSeries, now, span, { unit: "drops/s", minTop: 1 });
  drawChart(charts("delay"), delaySeries, now, span, { unit: side.tins.length ? "ms" : "ms (cake only)", minTop: 1 });
  drawTinTable($(".tins", box), side);
  box.dataset.samples = String(h.length);
}

function drawTinTable(table, side) {
  const rows = side.tins.map((t, i) => el("tr", {},
    el("td", {}, el("span", { class: `swatch c${i % TIN_COLOURS.length}` }), t.name),
    el("td", {}, (t.avg_delay_us / 1000).toFixed(1)),
    el("td", {}, (t.peak_delay_us / 1000).toFixed(1)),
    el("td", {}, (t.base_delay_us / 1000).toFixed(1)),
    el("td", {}, String(t.drops)),
    el("td", {}, String(t.ecn_marks)),
    el("td", {}, fmtBytes(t.backlog_bytes))));
  table.replaceChildren(
    el("tr", {}, ...["tin", "avg ms", "peak ms", "base ms", "drops", "ECN marks", "backlog"].map((h) => el("th", {}, h))),
    ...rows,
    el("tr", { class: "total" }, el("td", {}, "qdisc"), el("td", {}), el("td", {}), el("td", {}),
      el("td", {}, String(side.drops)), el("td", {}), el("td", {}, fmtBytes(side.backlog_bytes))));
}

function fmtRate(bps) {
  if (bps >= 1e9) return `${(bps / 1e9).toFixed(2)} Gbit/s`;
  if (bps >= 1e6) return `${(bps / 1e6).toFixed(2)} Mbit/s`;
  return `${(bps / 1e3).toFixed(0)} kbit/s`;
}

function fmtBytes(b) {
  if (b >= 1 << 20) return `${(b / (1 << 20)).toFixed(1)} MiB`;
  if (b >= 1 << 10) return `${(b / (1 << 10)).toFixed(1)} KiB`;
  return `${b} B`;
}

async function pollLive() {
  const started = Date.now();
  const { status, json } = await api("GET", "/api/live");
  if (status === 200) {
    renderLive(json);
    $("#live-state").textContent = `live: read ${new Date(json.unix_ms).toLocaleTimeString()}`;
  } else {
    $("#live-state").textContent = `live: ${json.error || `HTTP ${status}`}`;
  }
  // Once a second, however long the read took.
  setTimeout(pollLive, Math.max(100, 1000 - (Date.now() - started)));
}

// The runs' files are read with the token too, and their links and images cannot send it: the
// daemon answers this post with a cookie for /runs/ alone (HttpOnly, SameSite=Strict).
async function sendTokenCookie() {
  if (!token()) return;
  try {
    await fetch("/api/token", { method: "POST", headers: { Authorization: `Bearer ${token()}` } });
  } catch (_) {
    // The daemon does not answer: the status poll says so.
  }
}

window.addEventListener("DOMContentLoaded", async () => {
  takeTokenFromUrl();
  showTokenState();
  await sendTokenCookie();
  $("#token-form").addEventListener("submit", saveToken);
  pollStatus();
  pollLive();
  startForms(); // forms.js
});
