// Formatting helpers and the field names that are changing in the API.

// Fields renamed d → n_features and n → n_samples: read either.
export const nFeatures = (x) => x?.n_features ?? x?.d ?? null;
export const nSamples = (x) => x?.n_samples ?? x?.n ?? null;

// A privacy amount or eigenvalue, four significant digits (plain or exponent form).
export function num(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1e-3 && a < 1e5) return String(Number(x.toPrecision(4)));
  return x.toExponential(3).replace(/\.?0+e/, "e");
}

// δ values are tiny: always exponent form.
export function delta(x) {
  if (!x) return "0";
  return x.toExponential(2).replace(/\.?0+e/, "e");
}

export function when(iso) {
  if (!iso) return "–";
  const t = new Date(iso);
  const today = new Date().toDateString() === t.toDateString();
  return today ? t.toLocaleTimeString() : t.toLocaleString();
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60000)} min`;
}

export const shortId = (id) => String(id).slice(0, 8);

// An element with text content (never HTML: names come from users).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
