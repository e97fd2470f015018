// Hand-drawn SVG charts: the budget burn-down, the scree plot and the loadings heatmap.
// Inputs are API outputs only (ledger entries, DP releases); nothing here touches data.

import { el, num, when } from "/ui/format.js";

const NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#3b6fb6", "#e08a1e", "#3a9a5b", "#c0392b", "#8e5cb5", "#7f6a4d", "#d35fa6", "#5f7f8c"];

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  for (const c of children.flat()) if (c) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

const title = (text) => svg("title", {}, text);

function frame(width, height, label) {
  return svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "img",
    "aria-label": label,
    class: "chart",
  });
}

// Colour of each algorithm, stable in order of first appearance.
export function algorithmColours(names) {
  const colours = new Map();
  for (const n of names) if (!colours.has(n)) colours.set(n, PALETTE[colours.size % PALETTE.length]);
  return colours;
}

export function swatch(colour) {
  return svg("svg", { width: 12, height: 12, class: "swatch" }, svg("rect", { width: 12, height: 12, rx: 2, fill: colour }));
}

// Cumulative ρ per algorithm after each ledger entry (charges add, refunds subtract).
export function burnSteps(entries) {
  const per = new Map();
  const steps = [];
  for (const e of entries) {
    const name = e.algorithm ?? "other";
    const sign = e.entry === "refund" ? -1 : 1;
    per.set(name, (per.get(name) ?? 0) + sign * e.rho);
    steps.push({ t: Date.parse(e.created_at), entry: e, per: new Map(per) });
  }
  return steps;
}

// ρ spent over time, stacked by algorithm, under the budget's ρ ceiling.
export function burnDown(dataset, ledger, colours) {
  const W = 560, H = 230, L = 74, R = 14, T = 14, B = 40;
  const total = dataset.budget.total.rho;
  const entries = [...ledger.entries].sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at) || a.id - b.id);
  const steps = burnSteps(entries);
  const names = [...colours.keys()];
  const t0 = Date.parse(dataset.created_at);
  const last = steps.length ? steps[steps.length - 1].t : t0;
  const t1 = Math.max(Date.now(), last, t0 + 1000);
  const sumTo = (per, upto) => names.slice(0, upto).reduce((s, n) => s + Math.max(0, per.get(n) ?? 0), 0);
  const ymax = Math.max(total, ...steps.map((s) => sumTo(s.per, names.length))) * 1.08 || 1;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / ymax) * (H - T - B);
  const chart = frame(W, H, `ρ spent over time on ${dataset.name}`);
  chart.dataset.testid = "burndown";

  // Axes and ticks.
  for (const v of [0, total / 2, total]) {
    chart.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    chart.append(svg("text", { x: L - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, num(v)));
  }
  for (const [t, anchor] of [[t0, "start"], [t1, "end"]]) {
    chart.append(svg("text", { x: x(t), y: H - B + 16, class: "tick", "text-anchor": anchor }, when(new Date(t).toISOString())));
  }
  chart.append(svg("text", { x: (L + W - R) / 2, y: H - 6, class: "axis", "text-anchor": "middle" }, "time"));
  chart.append(svg("text", { x: 12, y: (T + H - B) / 2, class: "axis", "text-anchor": "middle", transform: `rotate(-90 12 ${(T + H - B) / 2})` }, "ρ spent"));

  // One stacked step band per algorithm.
  names.forEach((name, i) => {
    const upper = [], lower = [];
    steps.forEach((s, j) => {
      const next = j + 1 < steps.length ? steps[j + 1].t : t1;
      const hi = sumTo(s.per, i + 1), lo = sumTo(s.per, i);
      upper.push([x(s.t), y(hi)], [x(next), y(hi)]);
      lower.push([x(s.t), y(lo)], [x(next), y(lo)]);
    });
    if (!upper.length) return;
    const points = [...upper, ...lower.reverse()].map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(" ");
    chart.append(svg("polygon", { points, fill: colours.get(name), class: "band", "data-algorithm": name }, title(name)));
  });

  // The budget ceiling.
  chart.append(svg("line", { x1: L, x2: W - R, y1: y(total), y2: y(total), class: "ceiling" }));
  chart.append(svg("text", { x: W - R - 4, y: y(total) - 5, class: "tick ceiling-label", "text-anchor": "end" }, `budget ρ = ${num(total)}`));

  // One marker per ledger entry.
  for (const s of steps) {
    const v = sumTo(s.per, names.length);
    const e = s.entry;
    chart.append(
      svg(
        "circle",
        { cx: x(s.t), cy: y(v), r: 3.5, class: `marker ${e.entry}`, "data-entry": e.id },
        title(`${e.entry} ${e.algorithm ?? ""} ${e.entry === "refund" ? "−" : "+"}ρ ${num(e.rho)} at ${when(e.created_at)}`),
      ),
    );
  }
  return chart;
}

// Private eigenvalue estimates as bars, one per component.
export function scree(values) {
  const W = 460, H = 230, L = 62, R = 14, T = 20, B = 40;
  const lo = Math.min(0, ...values), hi = Math.max(0, ...values);
  const span = hi - lo || 1;
  const y = (v) => T + (1 - (v - lo) / span) * (H - T - B);
  const band = (W - L - R) / values.length;
  const chart = frame(W, H, "scree plot of the private eigenvalue estimates");
  chart.dataset.testid = "scree";
  for (const v of [lo, (lo + hi) / 2, hi]) {
    chart.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    chart.append(svg("text", { x: L - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, num(v)));
  }
  values.forEach((v, i) => {
    const top = Math.min(y(v), y(0)), height = Math.max(1, Math.abs(y(v) - y(0)));
    const bx = L + i * band + band * 0.15;
    chart.append(svg("rect", { x: bx, y: top, width: band * 0.7, height, class: "bar", "data-value": v }, title(`λ̂${i + 1} = ${num(v)}`)));
    if (values.length <= 12) {
      chart.append(svg("text", { x: bx + band * 0.35, y: top - 4, class: "tick", "text-anchor": "middle" }, num(v)));
    }
    chart.append(svg("text", { x: bx + band * 0.35, y: H - B + 16, class: "tick", "text-anchor": "middle" }, `${i + 1}`));
  });
  chart.append(svg("text", { x: (L + W - R) / 2, y: H - 6, class: "axis", "text-anchor": "middle" }, "component"));
  return chart;
}

// Diverging colour for a loading in [-m, m]: blue (negative), white, red (positive).
function diverging(v, m) {
  const t = m > 0 ? Math.max(-1, Math.min(1, v / m)) : 0;
  const [r, g, b] = t >= 0 ? [178, 24, 43] : [33, 102, 172];
  const a = Math.abs(t);
  const mix = (c) => Math.round(255 + (c - 255) * a);
  return `rgb(${mix(r)},${mix(g)},${mix(b)})`;
}

// Most features a heatmap draws; beyond this, the rows with the largest loadings are kept.
export const MAX_LOADING_ROWS = 200;

// The features shown: all of them, or the MAX_LOADING_ROWS with the largest row norm of the
// (already private) basis, in feature order.
export function shownFeatures(basis) {
  const d = basis[0]?.length ?? 0;
  const rows = [...Array(d).keys()];
  if (d <= MAX_LOADING_ROWS) return rows;
  const norm = (i) => basis.reduce((s, col) => s + col[i] * col[i], 0);
  return rows.sort((a, b) => norm(b) - norm(a)).slice(0, MAX_LOADING_ROWS).sort((a, b) => a - b);
}

// The basis (k columns of d numbers) as a features × components heatmap.
export function loadings(basis) {
  const k = basis.length;
  const rows = shownFeatures(basis);
  const m = Math.max(...basis.flatMap((col) => rows.map((i) => Math.abs(col[i]))), 0);
  const L = 70, T = 24, R = 96, B = 10;
  const cw = Math.max(22, Math.min(64, 420 / k));
  const rh = Math.max(3, Math.min(20, 420 / rows.length));
  const W = L + k * cw + R, H = T + rows.length * rh + B;
  const chart = frame(W, H, "loadings of the private basis");
  chart.dataset.testid = "loadings";
  const labelEvery = Math.ceil(12 / rh);
  for (let j = 0; j < k; j++) {
    chart.append(svg("text", { x: L + j * cw + cw / 2, y: T - 8, class: "tick", "text-anchor": "middle" }, `PC${j + 1}`));
  }
  rows.forEach((i, r) => {
    if (r % labelEvery === 0) {
      chart.append(svg("text", { x: L - 6, y: T + r * rh + rh / 2 + 4, class: "tick", "text-anchor": "end" }, `feature ${i}`));
    }
    for (let j = 0; j < k; j++) {
      const v = basis[j][i];
      chart.append(
        svg(
          "rect",
          { x: L + j * cw, y: T + r * rh, width: cw - 1, height: Math.max(1, rh - 1), fill: diverging(v, m), class: "cell" },
          title(`feature ${i}, PC${j + 1}: ${num(v)}`),
        ),
      );
      if (rh >= 16 && cw >= 44) {
        const strong = m > 0 && Math.abs(v) / m > 0.6;
        chart.append(svg("text", { x: L + j * cw + cw / 2, y: T + r * rh + rh / 2 + 4, class: strong ? "cell-label strong" : "cell-label", "text-anchor": "middle" }, v.toFixed(2)));
      }
    }
  });
  // Colour key.
  const kx = L + k * cw + 18, kh = Math.min(120, rows.length * rh);
  const gradient = svg("linearGradient", { id: "loading-key", x1: 0, y1: 0, x2: 0, y2: 1 },
    svg("stop", { offset: "0%", "stop-color": diverging(m, m) }),
    svg("stop", { offset: "50%", "stop-color": "#ffffff" }),
    svg("stop", { offset: "100%", "stop-color": diverging(-m, m) }));
  chart.append(svg("defs", {}, gradient));
  chart.append(svg("rect", { x: kx, y: T, width: 10, height: kh, fill: "url(#loading-key)", class: "key" }));
  chart.append(svg("text", { x: kx + 14, y: T + 8, class: "tick" }, `+${num(m)}`));
  chart.append(svg("text", { x: kx + 14, y: T + kh, class: "tick" }, `−${num(m)}`));
  return chart;
}

// The loadings section of a result (a job's or a study's): heading, a note when only the
// strongest features are drawn, and the heatmap in a scrolling box.
export function loadingsPanel(basis, features) {
  const shown = shownFeatures(basis);
  return [
    el("h3", { text: "Loadings of the private basis" }),
    shown.length < features
      ? el("p", { class: "muted small", text: `The ${shown.length} features with the largest loadings of ${features}.` })
      : null,
    el("div", { class: "scroll" }, loadings(basis)),
  ].filter(Boolean);
}
