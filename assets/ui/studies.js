// Per-site studies: status, rounds, the sites with their status and charges, and a finished
// study's loadings and rounds. Everything comes from the JSON API: the study's metadata, the
// sites' public states and the study's DP release.

import * as api from "/ui/api.js";
import { loadingsPanel, scree } from "/ui/charts.js";
import { el, nFeatures, num, shortId, when } from "/ui/format.js";

export const ACTIVE_STUDY = new Set(["enrolling", "running"]);

// Rounds done of the study's total; while enrolling, how many sites have joined.
function roundsCell(s) {
  if (s.status === "enrolling") {
    const joined = s.sites.filter((x) => x.status !== "invited").length;
    return el("span", { class: "muted", text: `${joined}/${s.n_sites} joined` });
  }
  const { done, total } = s.progress;
  return el("span", { class: "progress" }, el("progress", { max: total, value: done }), ` ${done}/${total}`);
}

// One line a site: its name, its status and what its own ledger was charged.
function siteList(s) {
  return el("ul", { class: "sites" }, s.sites.map((x) =>
    el("li", { "data-site": x.name, "data-status": x.status },
      el("span", { class: "mono", text: x.name }), " ",
      el("span", { class: `badge ${x.status}`, text: x.status }),
      x.charged ? el("span", { class: "num small", "data-testid": "site-charged", text: ` ρ ${num(x.charged.rho)}` }) : null,
      x.dropped_round === null || x.dropped_round === undefined
        ? null
        : el("span", { class: "muted small", text: ` dropped in round ${x.dropped_round}` }))));
}

function studyRow(s, selected, show) {
  const action = s.status === "succeeded"
    ? el("button", { type: "button", class: "small", onclick: () => show(s.id), text: "Show result" })
    : null;
  return el("tr", { "data-study-id": s.id, "data-status": s.status, class: selected === s.id ? "selected" : null },
    el("td", { text: when(s.created_at) }),
    el("td", {}, s.name, " ", el("span", { class: "muted small mono", text: shortId(s.id) })),
    el("td", { class: "mono", text: s.algorithm }),
    el("td", {}, el("span", { class: `badge ${s.status}`, text: s.status }),
      s.error ? el("div", { class: "job-error small", text: s.error }) : null),
    el("td", {}, roundsCell(s)),
    el("td", {}, siteList(s), el("div", { class: "muted small", text: `threshold ${s.threshold} of ${s.n_sites}` })),
    el("td", { class: "num", text: num(s.cost.rho) }),
    el("td", {}, action),
  );
}

export function renderStudies(box, studies, selected, show) {
  const rows = studies.map((s) => studyRow(s, selected, show));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "No studies yet." })));
  box.replaceChildren(...rows);
}

// Rounds in which a site dropped out, and the weakest noise multiplier any round achieved.
function roundsSummary(result) {
  const rounds = result.rounds ?? [];
  const lossy = rounds.filter((r) => r.dropped.length);
  const weakest = rounds.length ? Math.min(...rounds.map((r) => r.achieved_multiplier)) : null;
  const parts = [el("p", { class: "muted small", "data-testid": "study-rounds",
    text: `${rounds.length} rounds · survivors ${result.survivors.join(", ")}` +
      (weakest === null ? "" : ` · weakest achieved noise multiplier ${num(weakest)}`) +
      (result.target_multiplier ? ` (target ${num(result.target_multiplier)})` : "") })];
  if (lossy.length) {
    parts.push(el("ul", { class: "small" }, lossy.map((r) =>
      el("li", { text: `round ${r.round}: ${r.dropped.join(", ")} dropped, multiplier ${num(r.achieved_multiplier)}` }))));
  }
  return parts;
}

// The parts of the result panel for a succeeded study.
export async function studyResult(id) {
  const [study, result] = await Promise.all([api.study(id), api.studyResult(id)]);
  const features = nFeatures(result);
  const parts = [
    el("h2", {}, `Result of study ${shortId(id)} `, el("span", { class: "muted small", text: `${study.algorithm} across ${study.n_sites} sites` })),
    el("p", { class: "muted small", text: `${result.n_components} components of ${features} features · cost ρ ${num(result.cost.rho)}, charged to every site` }),
    ...roundsSummary(result),
  ];
  if (Array.isArray(result.eigenvalues) && result.eigenvalues.length) {
    parts.push(el("h3", { text: "Scree plot: private eigenvalue estimates" }), scree(result.eigenvalues));
  }
  parts.push(...loadingsPanel(result.basis, features));
  return parts;
}

// The tenant's studies with their sites. The list leaves the sites out, so each study is read
// whole, except a finished one already read (`known`): it no longer changes.
export async function readStudies(known = []) {
  const had = new Map(known.map((s) => [s.id, s]));
  const list = await api.studies();
  return Promise.all(list.map((s) => {
    const old = had.get(s.id);
    return old && old.status === s.status && !ACTIVE_STUDY.has(s.status) ? old : api.study(s.id);
  }));
}
