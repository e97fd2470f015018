// The budget dashboard: datasets with their budget burn-down, jobs with live progress,
// per-site studies with their sites, and a succeeded job's or study's private eigenvalues and
// loadings. Everything comes from the JSON API.

import * as api from "/ui/api.js";
import { algorithmColours, burnDown, loadingsPanel, scree, swatch } from "/ui/charts.js";
import { delta, duration, el, nFeatures, nSamples, num, shortId, when } from "/ui/format.js";
import { ACTIVE_STUDY, readStudies, renderStudies, studyResult } from "/ui/studies.js";

const $ = (id) => document.getElementById(id);
const ACTIVE = new Set(["queued", "running"]);
const LIVE_MS = 1000;
const IDLE_MS = 5000;

const state = { datasets: [], ledgers: new Map(), logs: new Map(), checking: new Set(), jobs: [], studies: [], selected: null, timer: null };

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

function signedIn(on) {
  $("signin").hidden = on;
  $("session").hidden = !on;
  $("dashboard").hidden = !on;
}

// ---- datasets ----------------------------------------------------------------------------

// One row of the budget table: ρ, and that ρ as ε at the dataset's δ by the API's conversion
// (the same conversion on every row, so the rows compare).
function amountLine(label, amount, testid) {
  return el("tr", {},
    el("th", { text: label }),
    el("td", { class: "num" }, el("span", { "data-testid": testid ? `${testid}-rho` : null, text: num(amount.rho) })),
    el("td", { class: "num" }, el("span", { "data-testid": testid ? `${testid}-epsilon` : null, text: num(amount.epsilon) })),
    el("td", { class: "num", text: delta(amount.epsilon_at_delta) }),
  );
}

function budgetTable(budget) {
  return el("table", { class: "budget" },
    el("thead", {}, el("tr", {}, el("th"), el("th", { text: "ρ (zCDP)" }), el("th", { text: "ε" }), el("th", { text: "at δ" }))),
    el("tbody", {},
      amountLine("Budget", budget.total, "total"),
      amountLine("Spent", budget.spent, "spent"),
      amountLine("Remaining", budget.remaining, "remaining"),
    ),
  );
}

// The budget as its owner stated it: {"rho": …} or {"epsilon": …, "delta": …}.
function statedBudget(stated) {
  const parts = [];
  if (stated?.rho !== undefined) parts.push(`ρ = ${num(stated.rho)}`);
  if (stated?.epsilon !== undefined) parts.push(`ε = ${num(stated.epsilon)}`);
  if (stated?.delta !== undefined) parts.push(`δ = ${delta(stated.delta)}`);
  return parts.length ? `stated budget: ${parts.join(", ")}` : null;
}

function legend(ledger, colours) {
  const totals = new Map();
  for (const e of ledger.entries) {
    const name = e.algorithm ?? "other";
    totals.set(name, (totals.get(name) ?? 0) + (e.entry === "refund" ? -e.rho : e.rho));
  }
  if (!totals.size) return el("p", { class: "muted small", text: "No charges yet: the whole budget is left." });
  return el("ul", { class: "legend" },
    [...colours.keys()].map((name) => el("li", {}, swatch(colours.get(name)), ` ${name}: ρ ${num(totals.get(name))}`)));
}

// ---- the transparency log -----------------------------------------------------------------

// What this browser, as a witness, found when it last checked the dataset's log (api.witness).
function logStatus(id) {
  const seen = state.logs.get(id) ?? { state: "checking" };
  const saved = "the checkpoint this browser saw last";
  const [cls, text] = {
    checking: ["pending", "Checking the dataset's transparency log…"],
    verified: ["ok", `Log verified: extends ${saved} (size ${seen.from} → ${seen.to}).`],
    first: ["first", `First visit: checkpoint saved (size ${seen.to}); later visits check that the log only grew.`],
    rewritten: ["bad", `Log rewritten or tampered: ${seen.reason}.`],
    unchecked: ["unchecked", `Log not checked: ${seen.reason}.`],
  }[seen.state];
  return el("p", {
    class: `log-status ${cls}`,
    "data-testid": "log-status",
    "data-state": seen.state,
    role: seen.state === "rewritten" ? "alert" : null,
    title: "Every charge and refund is a leaf of an append-only Merkle log whose head the service signs. " +
      "This browser keeps the last signed head it verified (localStorage) and checks that the current log extends it.",
    text,
  });
}

// What a dataset's log should hold, as far as this page knows: it is checked again only when
// that changed (a charge, a refund, a deletion) or the last check gave no verdict, so that a
// refresh does not ask for every dataset's checkpoint. A reload checks every log.
const logVersion = (d) => `${d.status}:${state.ledgers.get(d.id)?.entries?.length ?? "-"}`;

// Witnesses each dataset's log (one check at a time per dataset) and updates its card.
function checkLogs() {
  for (const d of state.datasets) {
    const version = logVersion(d);
    const last = state.logs.get(d.id);
    if (state.checking.has(d.id) || (last && last.version === version && last.state !== "unchecked")) continue;
    state.checking.add(d.id);
    api.witness(d.id)
      .then((seen) => state.logs.set(d.id, { ...seen, version }))
      .catch((e) => state.logs.set(d.id, { state: "unchecked", reason: e.message, version }))
      .finally(() => {
        state.checking.delete(d.id);
        const shown = document.querySelector(`[data-dataset-id="${CSS.escape(d.id)}"] [data-testid="log-status"]`);
        if (shown) shown.replaceWith(logStatus(d.id));
        // The ledger moved on while this check ran: check again.
        const now = state.datasets.find((x) => x.id === d.id);
        if (now && logVersion(now) !== version) checkLogs();
      });
  }
}

function datasetCard(d) {
  const ledger = state.ledgers.get(d.id);
  const features = nFeatures(d), samples = nSamples(d);
  const facts = [d.kind, d.relation.replace("_", " "), d.status];
  if (features !== null) facts.push(`${features} ${d.kind === "matrix" ? "× " + features : "features"}`);
  if (samples !== null) facts.push(`${samples} rows`);
  const card = el("article", { class: `card dataset status-${d.status}`, "data-dataset-id": d.id },
    el("h3", {}, d.name, " ", el("span", { class: "muted small mono", text: shortId(d.id) })),
    el("p", { class: "muted small", text: facts.join(" · ") }),
  );
  if (!d.budget) {
    card.append(el("p", { text: "Public dataset: no privacy budget." }), logStatus(d.id));
    return card;
  }
  const b = d.budget;
  card.append(budgetTable(b));
  card.append(el("p", { class: "muted small", text: "ε: each row's ρ converted at δ (the tighter of Bun–Steinke 2016 and CKS 2020); conversions do not add up across rows." }));
  const notes = [statedBudget(b.stated), `admission rule: ${b.rule}`].filter(Boolean);
  if (b.remaining.delta > 0) notes.push(`approximate-DP δ left: ${delta(b.remaining.delta)}`);
  if (b.spent_other_rho > 0) notes.push(`ρ ${num(b.spent_other_rho)} of the spending is not Gaussian`);
  card.append(el("p", { class: "muted small", text: notes.join(" · ") }));
  if (ledger) {
    const colours = algorithmColours(ledger.entries.map((e) => e.algorithm ?? "other"));
    card.append(burnDown(d, ledger, colours), legend(ledger, colours));
  }
  card.append(logStatus(d.id));
  return card;
}

function renderDatasets() {
  const box = $("datasets");
  box.replaceChildren(...state.datasets.map(datasetCard));
  if (!state.datasets.length) box.append(el("p", { class: "muted", text: "This tenant has no datasets yet." }));
}

// ---- jobs --------------------------------------------------------------------------------

function progressCell(j) {
  if (j.status === "queued") return el("span", { class: "muted", text: "waiting" });
  if (!j.progress) return el("span", { class: "muted", text: "–" });
  if (!(j.progress.total > 0)) return el("span", { class: "muted", text: "starting" });
  const { done, total } = j.progress;
  return el("span", { class: "progress" },
    el("progress", { max: total, value: done }), ` ${done}/${total}`);
}

// A job cancelled before it started got its charge back: no noise was drawn for it. The API
// says so (`refunded`); `started_at` cannot tell, it is withheld on add_remove datasets.
const refunded = (j) => j.refunded === true;

function jobRow(j) {
  const dataset = state.datasets.find((d) => d.id === j.dataset_id);
  const action = j.status === "succeeded"
    ? el("button", { type: "button", class: "small", onclick: () => select(j.id), text: "Show result" })
    : null;
  return el("tr", { "data-job-id": j.id, "data-status": j.status, class: state.selected === j.id ? "selected" : null },
    el("td", { text: when(j.created_at) }),
    el("td", { text: dataset ? dataset.name : shortId(j.dataset_id) }),
    el("td", { class: "mono", text: j.algorithm }),
    el("td", {}, el("span", { class: `badge ${j.status}`, text: j.status }),
      j.error ? el("div", { class: "job-error small", text: j.error.length > 160 ? `${j.error.slice(0, 160)}…` : j.error, title: j.error }) : null),
    el("td", {}, progressCell(j)),
    el("td", { class: "num", text: refunded(j) ? `${num(j.cost.rho)} refunded` : num(j.cost.rho) }),
    el("td", { class: "num", text: duration(j.run_ms) }),
    el("td", {}, action),
  );
}

function renderJobs() {
  const rows = state.jobs.map(jobRow);
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "No jobs yet." })));
  $("jobs").replaceChildren(...rows);
  const live = state.jobs.some((j) => ACTIVE.has(j.status));
  $("polling").textContent = live ? "· live: refreshing every second while jobs run" : "";
}

// ---- a job's result ----------------------------------------------------------------------

function releasedList(released) {
  if (!released || typeof released !== "object") return null;
  const items = Object.entries(released).map(([k, v]) =>
    el("li", {}, el("span", { class: "mono", text: k }), ": ",
      typeof v === "number" ? num(v) : JSON.stringify(v).slice(0, 200)));
  return items.length ? el("div", {}, el("h3", { text: "Other private releases" }), el("ul", {}, items)) : null;
}

// ---- studies -----------------------------------------------------------------------------

function showStudies() {
  renderStudies($("studies"), state.studies, state.selected, (id) => showResult(id, studyResult));
}

// ---- the result panel --------------------------------------------------------------------

// Marks `id` selected and fills the result panel with what `parts(id)` resolves to.
async function showResult(id, parts) {
  state.selected = id;
  renderJobs();
  showStudies();
  const box = $("result");
  box.hidden = false;
  box.replaceChildren(el("p", { class: "muted", text: "Loading the result…" }));
  try {
    box.replaceChildren(...(await parts(id)));
  } catch (e) {
    box.replaceChildren(el("p", { class: "error", text: `Could not load the result: ${e.message}` }));
  }
}

const select = (id) => showResult(id, jobResult);

async function jobResult(id) {
  const [job, result] = await Promise.all([api.job(id), api.result(id)]);
  const dataset = state.datasets.find((d) => d.id === job.dataset_id);
  const features = nFeatures(result);
  const parts = [
    el("h2", {}, `Result of job ${shortId(id)} `, el("span", { class: "muted small", text: `${job.algorithm} on ${dataset ? dataset.name : shortId(job.dataset_id)}` })),
    el("p", { class: "muted small", text: `${result.n_components} components of ${features} features · cost ρ ${num(result.cost.rho)} (ε ${num(result.cost.epsilon)} at δ ${delta(result.cost.epsilon_at_delta)})` }),
    el("h3", { text: "Scree plot: private eigenvalue estimates" }),
  ];
  if (Array.isArray(result.eigenvalues) && result.eigenvalues.length) {
    parts.push(scree(result.eigenvalues));
  } else {
    parts.push(el("p", { class: "notice", "data-testid": "no-eigenvalues",
      text: `This job released no private eigenvalues: ${job.algorithm} does not release them unless asked. ` +
        "Nothing is computed from your data here, so there is no scree plot. Submit the job with " +
        "\"with_eigenvalues\": true in params to buy estimates with a share of its ρ." }));
  }
  parts.push(...loadingsPanel(result.basis, features));
  const released = releasedList(result.released);
  if (released) parts.push(released);
  return parts;
}

// ---- loading and polling -----------------------------------------------------------------

async function refreshAll() {
  const [datasets, jobs, studies] = await Promise.all([api.datasets(), api.jobs(), readStudies(state.studies)]);
  const ledgers = await Promise.all(
    datasets.map((d) => (d.budget ? api.ledger(d.id).catch(() => null) : Promise.resolve(null))));
  state.datasets = datasets;
  state.jobs = jobs;
  state.studies = studies;
  state.ledgers = new Map(datasets.map((d, i) => [d.id, ledgers[i]]));
  renderDatasets();
  renderJobs();
  showStudies();
  checkLogs();
}

const statusChanged = (before, after) => {
  const was = new Map(before.map((x) => [x.id, x.status]));
  return after.length !== was.size || after.some((x) => was.get(x.id) !== x.status);
};

// Poll the job and study lists every second while a job or study is active, every five
// seconds otherwise (to notice new submissions); a new job or study or a change of status
// (a charge may have been refunded, a result appeared) reloads the datasets too.
async function poll() {
  try {
    const [jobs, studies] = await Promise.all([api.jobs(), readStudies(state.studies)]);
    if (statusChanged(state.jobs, jobs) || statusChanged(state.studies, studies)) await refreshAll();
    else {
      state.jobs = jobs;
      state.studies = studies;
      renderJobs();
      showStudies();
    }
    showError("");
  } catch (e) {
    if (!handleAuth(e)) showError(e.message);
  }
  schedule();
}

function schedule() {
  clearTimeout(state.timer);
  if (!api.session.key()) return;
  const live = state.jobs.some((j) => ACTIVE.has(j.status)) || state.studies.some((s) => ACTIVE_STUDY.has(s.status));
  state.timer = setTimeout(poll, live ? LIVE_MS : IDLE_MS);
}

function handleAuth(e) {
  if (e.status !== 401) return false;
  forget();
  showError("The service refused this API key. Paste a tenant's key.");
  return true;
}

async function start() {
  signedIn(true);
  try {
    await refreshAll();
    showError("");
  } catch (e) {
    if (!handleAuth(e)) showError(e.message);
  }
  schedule();
}

function forget() {
  api.session.forget();
  clearTimeout(state.timer);
  Object.assign(state, { datasets: [], ledgers: new Map(), logs: new Map(), jobs: [], studies: [], selected: null });
  $("datasets").replaceChildren();
  $("jobs").replaceChildren();
  $("studies").replaceChildren();
  $("result").replaceChildren();
  $("result").hidden = true;
  signedIn(false);
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("key");
  const key = input.value.trim();
  input.value = "";
  if (!key) return;
  api.session.set(key);
  start();
});
$("forget").addEventListener("click", () => {
  forget();
  showError("");
});
$("refresh").addEventListener("click", () => start());

if (api.session.key()) start();
else signedIn(false);
