// Small SVG line charts for the live graphs: no library, so the page works with no internet.
// A chart is redrawn whole at each poll (a few hundred points at most: cheap).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

// Colours per tin (bulk, best effort, video, voice, ...) and for the totals.
const TIN_COLOURS = ["#8c6d1f", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#17becf", "#e377c2", "#7f7f7f"];

function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// A "nice" upper bound for the axis: 1, 2 or 5 times a power of ten, at least `v`.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function fmtNum(v) {
  return v >= 1000 ? v.toFixed(0) : String(Number(v.toPrecision(3)));
}

// Draws `series` into `svg`: [{name, colour, dash, points: [[t_ms, value], ...]}], over the last
// `spanS` seconds ending at `nowMs`. `opts`: {unit, hline: {value, label}, minTop}: the axis
// goes at least to minTop, so an idle link draws a flat line, not noise blown up to full height.
function drawChart(svg, series, nowMs, spanS, opts) {
  const W = 360, H = 150, L = 44, R = 8, T = 18, B = 20;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  let max = opts.minTop || 0;
  for (const s of series) for (const [, v] of s.points) if (v > max) max = v;
  if (opts.hline && opts.hline.value > max) max = opts.hline.value;
  const top = niceMax(max * 1.05);
  const x = (t) => L + (W - L - R) * (1 - (nowMs - t) / (spanS * 1000));
  const y = (v) => T + (H - T - B) * (1 - Math.min(v, top) / top);

  svg.appendChild(svgEl("text", { x: 2, y: 12, class: "chart-unit" })).textContent = opts.unit;
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    svg.appendChild(svgEl("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    const label = svgEl("text", { x: L - 4, y: y(v) + 3, class: "tick", "text-anchor": "end" });
    label.textContent = fmtNum(v);
    svg.appendChild(label);
  }
  for (const [t, text, anchor] of [[nowMs - spanS * 1000, `-${spanS}s`, "start"], [nowMs, "now", "end"]]) {
    const label = svgEl("text", { x: x(t), y: H - 5, class: "tick", "text-anchor": anchor });
    label.textContent = text;
    svg.appendChild(label);
  }
  if (opts.hline) {
    svg.appendChild(svgEl("line", {
      x1: L, x2: W - R, y1: y(opts.hline.value), y2: y(opts.hline.value), class: "hline",
    }));
    const label = svgEl("text", { x: W - R - 2, y: y(opts.hline.value) - 3, class: "tick", "text-anchor": "end" });
    label.textContent = opts.hline.label;
    svg.appendChild(label);
  }
  for (const s of series) {
    const pts = s.points.filter(([t]) => nowMs - t <= spanS * 1000);
    if (pts.length < 2) continue;
    const d = pts.map(([t, v], i) => `${i ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join("");
    const path = svgEl("path", { d, stroke: s.colour, class: "line" });
    if (s.dash) path.setAttribute("stroke-dasharray", s.dash);
    const title = svgEl("title");
    title.textContent = s.name;
    path.appendChild(title);
    svg.appendChild(path);
  }
}
