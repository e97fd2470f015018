// The /ui dashboard in a real headless Chromium (Debian's package, driven by playwright-core).
// scripts/browser-test.sh starts `privpca serve` and passes BASE and ADMIN; this script sets
// up a tenant, a private dataset with data and three finished jobs through the JSON API, then
// checks what the page shows against what the API says.
//
// It also runs a 3-site `federated_power` study with real `privpca site` processes and leaves a
// second study enrolling, and checks the studies table and the study's result.
//
// The transparency log: each dataset card says whether the dataset's signed log extends the
// checkpoint this browser saved (localStorage) last: a first visit saves it, a later one
// verifies the consistency proof, and a forged saved checkpoint, another dataset's, a wrong
// proof or the service's 409 ledger-log-tampered show the red warning.
//
// Env: BASE (http://127.0.0.1:port), ADMIN (admin key), BIN (the privpca binary, for the
// sites), SHOT_DIR (where the screenshot goes), CHROMIUM (default /usr/bin/chromium).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const BASE = process.env.BASE ?? assert.fail("BASE is not set");
const ADMIN = process.env.ADMIN ?? assert.fail("ADMIN is not set");
const SHOT_DIR = process.env.SHOT_DIR ?? mkdtempSync(join(tmpdir(), "privpca-shot-"));
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const BIN = process.env.BIN ?? assert.fail("BIN is not set");
const D = 6;
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "transparency");

async function api(method, path, key, body, contentType = "application/json") {
  const response = await fetch(BASE + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { "Content-Type": contentType } : {}) },
    body: body === undefined ? undefined : contentType === "application/json" ? JSON.stringify(body) : body,
  });
  const text = await response.text();
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text);
}

// A `.npy` upload: as application/x-npy, or as application/octet-stream (sniffed by its magic)
// where the server takes binary bodies that way.
async function uploadNpy(key, id, bytes) {
  for (const type of ["application/x-npy", "application/octet-stream"]) {
    const response = await fetch(`${BASE}/v1/datasets/${id}/data`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": type },
      body: bytes,
    });
    if (response.status === 415) continue;
    assert.ok(response.ok, `upload: ${response.status} ${await response.text()}`);
    return;
  }
  assert.fail("the server accepts no .npy upload type");
}

// Rows of a seeded random matrix with a clear top direction, scaled inside the unit ball.
function csv(n, seed) {
  let s = BigInt(seed);
  const next = () => {
    s = (s * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    return Number(s >> 11n) / 2 ** 53 - 0.5;
  };
  const lines = [];
  for (let i = 0; i < n; i++) {
    const t = next();
    const row = [t, 0.8 * t, -0.5 * t, 0.3 * next(), 0.2 * next(), 0.1 * next()];
    lines.push(row.map((v) => (v * 0.9).toFixed(5)).join(","));
  }
  return lines.join("\n") + "\n";
}

// A rows×cols f64 `.npy` file of seeded values with a few strong directions, rows inside the unit ball.
function npy(rows, cols, seed) {
  let header = `{'descr': '<f8', 'fortran_order': False, 'shape': (${rows}, ${cols}), }`;
  header += " ".repeat((64 - ((10 + header.length + 1) % 64)) % 64) + "\n";
  const out = Buffer.alloc(10 + header.length + 8 * rows * cols);
  out.write("\x93NUMPY\x01\x00", 0, "latin1");
  out.writeUInt16LE(header.length, 8);
  out.write(header, 10, "latin1");
  let s = seed >>> 0;
  const next = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
  let at = 10 + header.length;
  for (let i = 0; i < rows; i++) {
    const t = [next(), next(), next()];
    for (let j = 0; j < cols; j++) {
      const v = (t[j % 3] * (3 - (j % 3))) / Math.sqrt(cols) + 0.02 * next();
      out.writeDoubleLE(v * 0.5, at);
      at += 8;
    }
  }
  return out;
}

async function finished(key, id) {
  for (let i = 0; i < 600; i++) {
    const job = await api("GET", `/v1/jobs/${id}`, key);
    if (["succeeded", "failed", "cancelled"].includes(job.status)) return job;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`job ${id} did not finish`);
}

// A study's sites: `privpca site` processes, each with its own shard, ledger and budget.
function runSite(token, dir, i) {
  const data = join(dir, `shard-${i}.csv`);
  writeFileSync(data, csv(1500, 20 + i));
  const child = spawn(BIN, ["site", "--server", BASE, "--token", token, "--budget-rho", "1",
    "--data", data, "--ledger", join(dir, `ledger-${i}.json`)], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr.on("data", (chunk) => { log += chunk; });
  return new Promise((resolve, reject) => {
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`site ${i} exited ${code}: ${log.slice(-2000)}`))));
  });
}

const studyBody = (name, sites) => ({
  name, algorithm: "federated_power", n_features: D, relation: "replace_one", row_norm_bound: 1.0,
  params: { k: 2, iterations: 20 }, privacy: { rho: 0.2 }, threshold: sites,
  sites: Array.from({ length: sites }, (_, i) => ({ name: `hospital-${i + 1}` })), round_timeout_seconds: 60,
});

// One study run to the end by three sites, and one left enrolling (nobody joins it).
async function studies(key) {
  const dir = mkdtempSync(join(tmpdir(), "privpca-sites-"));
  try {
    const created = await api("POST", "/v1/studies", key, studyBody("consortium", 3));
    await Promise.all(created.sites.map((site, i) => runSite(site.token, dir, i)));
    let study;
    for (let i = 0; i < 600; i++) {
      study = await api("GET", `/v1/studies/${created.id}`, key);
      if (!["enrolling", "running"].includes(study.status)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(study.status, "succeeded", `study: ${study.error}`);
    const waiting = await api("POST", "/v1/studies", key, { ...studyBody("waiting room", 2), join_timeout_seconds: 3600 });
    return { done: study, waiting: waiting.study };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function setUp() {
  const { api_key: key } = await api("POST", "/v1/tenants", ADMIN, { name: "dashboard" });
  const dataset = await api("POST", "/v1/datasets", key, {
    name: "survey", kind: "records", relation: "replace_one", row_norm_bound: 1.0,
    budget: { epsilon: 2.0, delta: 1e-6 },
  });
  await api("PUT", `/v1/datasets/${dataset.id}/data`, key, csv(3000, 7), "text/csv");
  const submit = (algorithm, params, rho) =>
    api("POST", "/v1/jobs", key, { dataset_id: dataset.id, algorithm, params, privacy: { rho } });
  const jobs = {};
  for (const [name, algorithm, params, rho] of [
    ["gauss", "analyze_gauss", { k: 3 }, 0.02],
    ["power", "noisy_power", { k: 2 }, 0.01],
    ["oja", "dp_oja", { k: 2 }, 0.01],
  ]) {
    const job = await finished(key, (await submit(algorithm, params, rho)).id);
    assert.equal(job.status, "succeeded", `${algorithm}: ${job.error}`);
    jobs[name] = job;
  }
  return { key, dataset, jobs, studies: await studies(key) };
}

const close = (a, b, rel = 2e-3) => Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b), 1e-12);

async function main() {
  const { key, dataset, jobs, studies } = await setUp();
  const ledger = await api("GET", `/v1/datasets/${dataset.id}/ledger`, key);
  const remaining = ledger.budget.remaining;
  assert.ok(remaining.rho < ledger.budget.total.rho, "the jobs were charged");

  const profile = mkdtempSync(join(tmpdir(), "privpca-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1320, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const problems = [];
  const foreign = [];
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("request", (r) => { if (!r.url().startsWith(BASE + "/")) foreign.push(r.url()); });

    // Sign in: the key goes to sessionStorage only.
    await page.goto(`${BASE}/ui`);
    await page.locator("#key").fill(key);
    await page.getByRole("button", { name: "Open dashboard" }).click();
    const card = page.locator(`[data-dataset-id="${dataset.id}"]`);
    await card.waitFor();
    assert.ok(!page.url().includes(key), "the key is not in the URL");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("privpca.apiKey")), key);
    assert.deepEqual(await context.cookies(), [], "no cookies");

    // The transparency log, first visit: the dataset's signed checkpoint verified and saved.
    const saved = `privpca.checkpoint.datasets/${dataset.id}`;
    const logStatus = card.locator('[data-testid="log-status"]');
    await card.locator('[data-testid="log-status"][data-state="first"]').waitFor();
    const head = (await api("GET", `/v1/datasets/${dataset.id}/ledger/checkpoint`, key)).checkpoint;
    const headSize = Number(head.split("\n")[1]);
    assert.equal(headSize, ledger.entries.length + 1, "the budget, then each charge");
    assert.equal(await logStatus.textContent(), `First visit: checkpoint saved (size ${headSize}); later visits check that the log only grew.`);
    assert.equal(await page.evaluate((k) => localStorage.getItem(k), saved), head);
    const firstNote = head;

    // The remaining budget shown is the API's, as ρ and as ε at the dataset's δ.
    const shownRho = Number(await card.locator('[data-testid="remaining-rho"]').textContent());
    const shownEps = Number(await card.locator('[data-testid="remaining-epsilon"]').textContent());
    assert.ok(close(shownRho, remaining.rho), `remaining ρ shown ${shownRho}, API ${remaining.rho}`);
    assert.ok(close(shownEps, remaining.epsilon), `remaining ε shown ${shownEps}, API ${remaining.epsilon}`);
    const totalRho = Number(await card.locator('[data-testid="total-rho"]').textContent());
    assert.ok(close(totalRho, ledger.budget.total.rho), `total ρ shown ${totalRho}, API ${ledger.budget.total.rho}`);
    const spentRho = Number(await card.locator('[data-testid="spent-rho"]').textContent());
    assert.ok(close(spentRho, ledger.budget.spent.rho), `spent ρ shown ${spentRho}, API ${ledger.budget.spent.rho}`);

    // The burn-down: one marker per ledger entry, one band per algorithm.
    const burn = card.locator('svg[data-testid="burndown"]');
    assert.equal(await burn.locator("circle.marker").count(), ledger.entries.length);
    const algorithms = new Set(ledger.entries.map((e) => e.algorithm));
    assert.equal(await burn.locator("polygon.band").count(), algorithms.size);

    // Jobs with their status and final progress.
    for (const job of Object.values(jobs)) {
      const row = page.locator(`tr[data-job-id="${job.id}"]`);
      assert.equal(await row.getAttribute("data-status"), "succeeded");
      if (job.progress) {
        assert.match(await row.locator(".progress").textContent(), new RegExp(`${job.progress.done}/${job.progress.total}`));
      }
    }

    // analyze_gauss releases private eigenvalues: k bars, and d×k loading cells.
    const gauss = await api("GET", `/v1/jobs/${jobs.gauss.id}/result`, key);
    assert.equal(gauss.eigenvalues.length, 3);
    await page.locator(`tr[data-job-id="${jobs.gauss.id}"] button`).click();
    const screePlot = page.locator('#result svg[data-testid="scree"]');
    await screePlot.waitFor();
    assert.equal(await screePlot.locator("rect.bar").count(), gauss.eigenvalues.length);
    const bars = await screePlot.locator("rect.bar").evaluateAll((rs) => rs.map((r) => Number(r.dataset.value)));
    assert.deepEqual(bars, gauss.eigenvalues);
    assert.match(await page.locator("#result").textContent(), new RegExp(`${gauss.n_components} components of ${D} features`));
    assert.equal(await page.locator('#result svg[data-testid="loadings"] rect.cell').count(), D * 3);

    // Studies: status, rounds, every site with its status and its own ledger's charge; the
    // finished study's result shows its rounds and its loadings.
    const studyRow = page.locator(`tr[data-study-id="${studies.done.id}"]`);
    assert.equal(await studyRow.getAttribute("data-status"), "succeeded");
    const { done, total } = studies.done.progress;
    assert.match(await studyRow.locator(".progress").textContent(), new RegExp(`${done}/${total}`));
    assert.equal(studies.done.sites.length, 3);
    for (const site of studies.done.sites) {
      const item = studyRow.locator(`li[data-site="${site.name}"]`);
      assert.equal(await item.getAttribute("data-status"), "done");
      const charged = Number((await item.locator('[data-testid="site-charged"]').textContent()).replace("ρ", ""));
      assert.ok(close(charged, site.charged.rho), `${site.name} charged ${charged}, API ${site.charged.rho}`);
    }
    const waitingRow = page.locator(`tr[data-study-id="${studies.waiting.id}"]`);
    assert.equal(await waitingRow.getAttribute("data-status"), "enrolling");
    assert.match(await waitingRow.textContent(), /0\/2 joined/);
    assert.equal(await waitingRow.locator('li[data-status="invited"]').count(), 2);
    assert.equal(await waitingRow.locator("button").count(), 0, "no result to show yet");
    const studyResult = await api("GET", `/v1/studies/${studies.done.id}/result`, key);
    await studyRow.locator("button").click();
    await page.locator('#result [data-testid="study-rounds"]', { hasText: `${studyResult.rounds.length} rounds` }).waitFor();
    assert.equal(await page.locator('#result svg[data-testid="loadings"] rect.cell').count(), D * studyResult.basis.length);
    assert.match(await page.locator("#result").textContent(), new RegExp(`${studyResult.n_components} components of ${D} features`));

    // dp_oja releases none: the page says so and draws no scree plot.
    const oja = await api("GET", `/v1/jobs/${jobs.oja.id}/result`, key);
    assert.equal(oja.eigenvalues ?? null, null, "dp_oja releases no eigenvalues by default");
    await page.locator(`tr[data-job-id="${jobs.oja.id}"] button`).click();
    await page.locator('#result [data-testid="no-eigenvalues"]').waitFor();
    assert.equal(await page.locator('#result svg[data-testid="scree"]').count(), 0);
    assert.equal(await page.locator('#result svg[data-testid="loadings"] rect.cell').count(), D * 2);

    // Live progress. With one worker (scripts/browser-test.sh), a long job on a second dataset
    // runs while a short one on the first waits behind it. Both are submitted after the page
    // loaded; the page follows the long job's progress every second, and both finish without a
    // reload, the budget shown following the ledger.
    const big = await api("POST", "/v1/datasets", key, {
      name: "sensor log", kind: "records", relation: "add_remove", row_norm_bound: 1.0, budget: { rho: 1.0 },
    });
    await uploadNpy(key, big.id, npy(80000, 200, 11));
    await page.locator(`tr[data-job-id="${jobs.gauss.id}"] button`).click();
    await screePlot.waitFor();
    const long = await api("POST", "/v1/jobs", key, {
      dataset_id: big.id, algorithm: "noisy_power", params: { k: 16, iterations: 1000 }, privacy: { rho: 0.05 },
    });
    const late = await api("POST", "/v1/jobs", key, {
      dataset_id: dataset.id, algorithm: "noisy_power", params: { k: 1 }, privacy: { rho: 0.005 },
    });
    // A third job, queued behind those, is cancelled at once: refunded, a refund in the ledger.
    const withdrawn = await api("POST", "/v1/jobs", key, {
      dataset_id: dataset.id, algorithm: "dp_oja", params: { k: 1 }, privacy: { rho: 0.01 },
    });
    const cancel = await fetch(`${BASE}/v1/jobs/${withdrawn.id}`, { method: "DELETE", headers: { Authorization: `Bearer ${key}` } });
    assert.equal(cancel.status, 200, "a queued job is cancelled and refunded");
    // The idle poll (every 5 s) may miss a job this short; Refresh starts the live poll now.
    await page.getByRole("button", { name: "Refresh" }).click();
    const running = await page.waitForFunction(
      ([a, b]) => {
        const bar = document.querySelector(`tr[data-job-id="${a}"][data-status="running"] progress`);
        const other = document.querySelector(`tr[data-job-id="${b}"]`);
        return bar && { done: Number(bar.value), total: Number(bar.max), late: other?.dataset.status };
      },
      [long.id, late.id],
      { timeout: 30000, polling: 100 },
    );
    await page.screenshot({ path: join(SHOT_DIR, "dashboard.png"), fullPage: true });
    const seen = await running.jsonValue();
    assert.equal(seen.total, 1000);
    assert.equal(seen.late, "queued", "one worker: the short job waits");
    await page.waitForFunction(
      ([a, done]) => Number(document.querySelector(`tr[data-job-id="${a}"] progress`)?.value) > done,
      [long.id, seen.done],
      { timeout: 60000, polling: 100 },
    );
    for (const id of [long.id, late.id]) {
      assert.equal((await finished(key, id)).status, "succeeded");
      await page.locator(`tr[data-job-id="${id}"][data-status="succeeded"]`).waitFor({ timeout: 20000 });
    }
    const after = (await api("GET", `/v1/datasets/${dataset.id}`, key)).budget.remaining;
    assert.ok(after.rho < remaining.rho);
    await page.waitForFunction(
      ([id, want]) => {
        const shown = document.querySelector(`[data-dataset-id="${id}"] [data-testid="remaining-rho"]`);
        return shown && Math.abs(Number(shown.textContent) - want) <= 2e-3 * want;
      },
      [dataset.id, after.rho],
      { timeout: 10000 },
    );
    // The log grew by B's charge and C's charge and refund; the page checked that it extends
    // the checkpoint it saved, and saved the new one.
    const grown = (await api("GET", `/v1/datasets/${dataset.id}/ledger/checkpoint`, key)).checkpoint;
    const grownSize = Number(grown.split("\n")[1]);
    assert.equal(grownSize, headSize + 3);
    await page.waitForFunction(
      ([id, n]) => {
        const shown = document.querySelector(`[data-dataset-id="${id}"] [data-testid="log-status"][data-state="verified"]`);
        return shown && shown.textContent.includes(`→ ${n})`);
      },
      [dataset.id, grownSize],
      { timeout: 20000 },
    );
    assert.match(await logStatus.textContent(), /^Log verified: extends the checkpoint this browser saw last \(size \d+ → \d+\)\.$/);
    assert.equal(await page.evaluate((k) => localStorage.getItem(k), saved), grown);

    const withdrawnRow = page.locator(`tr[data-job-id="${withdrawn.id}"]`);
    assert.equal(await withdrawnRow.getAttribute("data-status"), "cancelled");
    assert.match(await withdrawnRow.textContent(), /refunded/);
    assert.equal(await burn.locator("circle.marker").count(), ledger.entries.length + 3, "B, C and C's refund");
    assert.equal(await burn.locator("circle.marker.refund").count(), 1);

    // Beyond 200 features the heatmap keeps the rows with the largest loadings, in order.
    const kept = await page.evaluate(async () => {
      const { shownFeatures, MAX_LOADING_ROWS } = await import("/ui/charts.js");
      const d = 300;
      const basis = [0, 1].map((j) => Array.from({ length: d }, (_, i) => (i % 3 === 0 ? 1 : 0.01) * (j + 1)));
      return { rows: shownFeatures(basis), max: MAX_LOADING_ROWS };
    });
    assert.equal(kept.rows.length, kept.max);
    assert.ok(Array.from({ length: 100 }, (_, i) => 3 * i).every((r) => kept.rows.includes(r)), "every strong row is kept");
    assert.ok(kept.rows.every((r, i) => i === 0 || r > kept.rows[i - 1]));

    // The log checks in this browser's WebCrypto against the committed fixtures of
    // crates/core/src/transparency (also checked by scripts/receipt_verifier.py): the consistency proof
    // from size 3 to 7 verifies; one changed byte in it, or in a signature, is refused.
    const fixtures = {
      key: readFileSync(join(FIXTURES, "verifier_key.txt"), "utf8").trim(),
      old: readFileSync(join(FIXTURES, "checkpoint_3.txt"), "utf8"),
      new: readFileSync(join(FIXTURES, "checkpoint_7.txt"), "utf8"),
      proof: JSON.parse(readFileSync(join(FIXTURES, "consistency_3_7.json"), "utf8")).proof,
    };
    const verdicts = await page.evaluate(async (f) => {
      const log = await import("/ui/api.js");
      const vkey = await log.verifierKey(f.key);
      const verdict = async (run) => { try { await run(); return "ok"; } catch (e) { return e instanceof log.LogError ? "refused" : `error ${e}`; } };
      const flip = (b64, at) => {
        const b = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        b[at % b.length] ^= 1;
        return btoa(String.fromCharCode(...b));
      };
      const [a, b] = [await log.openCheckpoint(f.old, vkey), await log.openCheckpoint(f.new, vkey)];
      const out = { valid: await verdict(() => log.verifyConsistency(a, b, f.proof)), reversed: await verdict(() => log.verifyConsistency(b, a, f.proof)) };
      out.changed = await Promise.all(f.proof.map((_, i) => verdict(() => log.verifyConsistency(a, b, f.proof.map((h, j) => (i === j ? flip(h, 7) : h))))));
      const [text, line] = [f.new.slice(0, f.new.lastIndexOf("\n\n")), f.new.slice(f.new.lastIndexOf("\n\n") + 2)];
      const [dash, name, sig] = line.trim().split(" ");
      out.signature = await verdict(() => log.openCheckpoint(`${text}\n\n${dash} ${name} ${flip(sig, 20)}\n`, vkey));
      out.text = await verdict(() => log.openCheckpoint(f.new.replace("\n7\n", "\n8\n"), vkey));
      return out;
    }, fixtures);
    assert.deepEqual(verdicts, { valid: "ok", reversed: "refused", changed: fixtures.proof.map(() => "refused"), signature: "refused", text: "refused" });

    // A saved checkpoint from before the last jobs: the page asks for the consistency proof
    // from it and verifies it.
    const reloadWith = async (note) => {
      await page.evaluate(([k, v]) => localStorage.setItem(k, v), [saved, note]);
      await page.reload();
      await card.waitFor();
      await card.locator('[data-testid="log-status"]:not([data-state="checking"])').waitFor();
      return { state: await logStatus.getAttribute("data-state"), text: await logStatus.textContent() };
    };
    assert.deepEqual(await reloadWith(firstNote), {
      state: "verified", text: `Log verified: extends the checkpoint this browser saw last (size ${headSize} → ${grownSize}).`,
    });
    assert.equal(await page.evaluate((k) => localStorage.getItem(k), saved), grown);

    // Forged saved checkpoints: its root edited (the signature no longer verifies), or another
    // dataset's checkpoint. Red, and the saved one is left as it was.
    const lines = grown.split("\n");
    lines[2] = Buffer.alloc(32, 7).toString("base64");
    const forged = lines.join("\n");
    let verdict = await reloadWith(forged);
    assert.equal(verdict.state, "rewritten");
    assert.match(verdict.text, /^Log rewritten or tampered: the checkpoint this browser saved does not verify with the service's key/);
    assert.ok(await card.locator(".log-status.bad").isVisible());
    assert.equal(await page.evaluate((k) => localStorage.getItem(k), saved), forged, "nothing saved over it");
    const other = (await api("GET", `/v1/datasets/${big.id}/ledger/checkpoint`, key)).checkpoint;
    verdict = await reloadWith(other);
    assert.equal(verdict.state, "rewritten");
    assert.match(verdict.text, /origin changed/);

    // A consistency proof that does not join the saved checkpoint to the new one (the page's
    // requests answered here instead of by the service), and the service's own 409.
    const proofPath = `**/v1/datasets/${dataset.id}/ledger/consistency*`;
    await page.route(proofPath, async (route) => {
      const real = await (await route.fetch()).json();
      real.proof[0] = Buffer.alloc(32, 1).toString("base64");
      await route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify(real) });
    });
    verdict = await reloadWith(firstNote);
    assert.equal(verdict.state, "rewritten");
    assert.match(verdict.text, /consistency proof does not lead/);
    assert.equal(await page.evaluate((k) => localStorage.getItem(k), saved), firstNote);
    await page.unroute(proofPath);
    const checkpointPath = `**/v1/datasets/${dataset.id}/ledger/checkpoint`;
    await page.route(checkpointPath, (route) => route.fulfill({
      status: 409,
      contentType: "application/problem+json",
      body: JSON.stringify({
        type: "urn:privpca:problem:ledger-log-tampered", title: "Ledger log tampered", status: 409,
        detail: "the ledger and its log differ", log: `datasets/${dataset.id}`,
      }),
    }));
    const before409 = problems.length;
    verdict = await reloadWith(grown);
    assert.equal(verdict.state, "rewritten");
    assert.match(verdict.text, /reports this dataset's log as tampered/);
    await page.unroute(checkpointPath);
    // The refused checkpoint request is logged by the browser as a failed load; that one only.
    const logged = problems.splice(before409);
    assert.ok(logged.every((p) => /status of 409/.test(p)), logged.join("\n"));
    await page.screenshot({ path: join(SHOT_DIR, "log-warning.png"), fullPage: true });
    verdict = await reloadWith(grown);
    assert.equal(verdict.state, "verified");

    // The key survives a reload of the tab, and "Forget key" removes it.
    await page.reload();
    await card.waitFor();
    await page.getByRole("button", { name: "Forget key" }).click();
    await page.locator("#signin").waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem("privpca.apiKey")), null);

    // A wrong key is refused with the service's message and not kept.
    await page.locator("#key").fill("not-a-key");
    await page.getByRole("button", { name: "Open dashboard" }).click();
    await page.locator("#error", { hasText: "refused" }).waitFor();
    await page.screenshot({ path: join(SHOT_DIR, "signin.png") });
    assert.equal(await page.evaluate(() => sessionStorage.getItem("privpca.apiKey")), null);

    // The refused key's 401 is the only expected console error.
    const unexpected = problems.filter((p) => !/status of 401/.test(p));
    assert.deepEqual(unexpected, [], "no script errors or CSP violations");
    assert.deepEqual(foreign, [], "every request stays on the service's origin");
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
  console.log(`dashboard browser test: ok (screenshot ${join(SHOT_DIR, "dashboard.png")})`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
