// The JSON API, called with the key from sessionStorage as a Bearer header; and the checks
// of the transparency log's signed checkpoints (a witness kept in this browser).

const KEY = "privpca.apiKey";

export const session = {
  key: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  forget: () => sessionStorage.removeItem(KEY),
};

// An API error carrying the problem document's detail and type (RFC 9457) when there is one.
export class ApiError extends Error {
  constructor(status, detail, type = null) {
    super(detail);
    this.status = status;
    this.type = type;
  }
}

export async function get(path) {
  const key = session.key();
  if (!key) throw new ApiError(401, "no API key");
  const response = await fetch(path, {
    headers: { Authorization: `Bearer ${key}`, Accept: "application/json" },
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  if (!response.ok) {
    let detail = `${response.status} ${response.statusText}`;
    let type = null;
    try {
      const problem = await response.json();
      if (problem.detail) detail = `${problem.title ?? response.status}: ${problem.detail}`;
      if (typeof problem.type === "string") type = problem.type;
    } catch {
      // not a problem document; keep the status line
    }
    throw new ApiError(response.status, detail, type);
  }
  return response.json();
}

export const datasets = () => get("/v1/datasets");
export const ledger = (id) => get(`/v1/datasets/${encodeURIComponent(id)}/ledger`);
export const jobs = () => get("/v1/jobs");
export const job = (id) => get(`/v1/jobs/${encodeURIComponent(id)}`);
export const result = (id) => get(`/v1/jobs/${encodeURIComponent(id)}/result`);
export const studies = () => get("/v1/studies");
export const study = (id) => get(`/v1/studies/${encodeURIComponent(id)}`);
export const studyResult = (id) => get(`/v1/studies/${encodeURIComponent(id)}/result`);
export const ledgerKey = () => get("/v1/ledger-key");
export const checkpoint = (id) => get(`/v1/datasets/${encodeURIComponent(id)}/ledger/checkpoint`);
export const consistency = (id, from, to) =>
  get(`/v1/datasets/${encodeURIComponent(id)}/ledger/consistency?from=${from}&to=${to}`);

// ---- the transparency log ------------------------------------------------------------------
//
// Each dataset's ledger events are the leaves of an append-only Merkle log whose head (a
// checkpoint) the service signs with Ed25519 (docs/design/ledger.md, "The transparency log").
// This page is a witness: it keeps the last checkpoint it verified for each dataset in
// localStorage and checks that the log's current head extends it. Everything follows the
// published formats, with WebCrypto: RFC 6962 tree hashing, RFC 9162 §2.1.4.2 consistency
// proofs, C2SP signed notes (Ed25519; key ID = SHA-256(name ‖ 0x0A ‖ 0x01 ‖ key)[:4]) and C2SP
// tlog checkpoints (origin, decimal size, base64 root).

// A check that failed: the signature, the checkpoint's form, or the consistency proof.
export class LogError extends Error {}

const utf8 = new TextEncoder();

function bytes(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const sha256 = async (...parts) => new Uint8Array(await crypto.subtle.digest("SHA-256", bytes(...parts)));
const nodeHash = (left, right) => sha256(Uint8Array.of(1), left, right);

// Standard base64 with padding, canonical (RFC 4648 §4).
function base64(text, what) {
  if (typeof text !== "string" || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) {
    throw new LogError(`${what} is not standard base64`);
  }
  const binary = atob(text);
  if (btoa(binary) !== text) throw new LogError(`${what} is not canonical base64`);
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

const validName = (name) => name !== "" && !name.includes("+") && !/\s/.test(name);

// "<name>+<8 hex key ID>+<base64(0x01 ‖ Ed25519 key)>" → { name, keyId, key (a CryptoKey) }.
export async function verifierKey(text) {
  // The base64 key may hold "+" too: split at the first two only.
  const m = typeof text === "string" ? /^([^+]*)\+([^+]*)\+(.*)$/s.exec(text.trim()) : null;
  if (!m) throw new LogError("the verifier key is not <name>+<key ID>+<key>");
  const [, name, idHex, key64] = m;
  if (!validName(name) || !/^[0-9a-fA-F]{8}$/.test(idHex)) throw new LogError("the verifier key is malformed");
  const data = base64(key64, "the verifier key");
  if (data.length !== 33 || data[0] !== 1) throw new LogError("the verifier key is not an Ed25519 key");
  const id = (await sha256(utf8.encode(name), Uint8Array.of(0x0a), data)).slice(0, 4);
  if (!equal(id, Uint8Array.from(idHex.match(/../g), (h) => parseInt(h, 16)))) {
    throw new LogError("the verifier key's ID does not match its name and key");
  }
  // Throws NotSupportedError where the browser has no Ed25519: not a verdict on the log.
  const key = await crypto.subtle.importKey("raw", data.slice(1), { name: "Ed25519" }, false, ["verify"]);
  return { name, keyId: id, key, text: `${name}+${idHex.toLowerCase()}` };
}

// The text of a signed note that `vkey` signed (C2SP signed-note); other keys' lines are skipped.
async function openNote(note, vkey) {
  if (typeof note !== "string") throw new LogError("the checkpoint is not a string");
  if (/[\u0000-\u0009\u000b-\u001f]/.test(note)) throw new LogError("the checkpoint contains a control character");
  const split = note.lastIndexOf("\n\n");
  if (split < 0) throw new LogError("the checkpoint has no signature");
  const text = note.slice(0, split + 1);
  const signatures = note.slice(split + 2);
  if (!signatures.endsWith("\n")) throw new LogError("the checkpoint's signature line is malformed");
  let verified = false;
  for (const line of signatures.slice(0, -1).split("\n")) {
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m || !validName(m[1])) throw new LogError("a signature line of the checkpoint is malformed");
    const sig = base64(m[2], "a signature");
    if (sig.length < 5) throw new LogError("a signature is too short");
    if (m[1] !== vkey.name || !equal(sig.slice(0, 4), vkey.keyId)) continue;
    if (!(await crypto.subtle.verify({ name: "Ed25519" }, vkey.key, sig.slice(4), utf8.encode(text)))) {
      throw new LogError(`the checkpoint's signature by ${vkey.text} does not verify`);
    }
    verified = true;
  }
  if (!verified) throw new LogError(`the checkpoint carries no signature by ${vkey.text}`);
  return text;
}

// A signed checkpoint → { origin, size (a BigInt), root, note }, or LogError.
export async function openCheckpoint(note, vkey) {
  const text = await openNote(note, vkey);
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3 || lines[0] === "" || lines.slice(3).includes("")) throw new LogError("the checkpoint is malformed");
  if (!/^(0|[1-9][0-9]*)$/.test(lines[1])) throw new LogError("the checkpoint's tree size is not a decimal number");
  const root = base64(lines[2], "the checkpoint's root hash");
  if (root.length !== 32) throw new LogError("the checkpoint's root hash is not 32 bytes");
  return { origin: lines[0], size: BigInt(lines[1]), root, note };
}

// RFC 9162 §2.1.4.2: the tree `second` extends the tree `first` (sizes, roots) by `proof`.
export async function verifyConsistency(first, second, proofB64) {
  const proof = proofB64.map((h) => base64(h, "a proof hash"));
  if (proof.some((h) => h.length !== 32)) throw new LogError("a proof hash is not 32 bytes");
  if (first.size > second.size) throw new LogError(`the log shrank from size ${first.size} to ${second.size}`);
  if (first.size === second.size || first.size === 0n) {
    if (proof.length) throw new LogError("the consistency proof should be empty");
    if (first.size === second.size && !equal(first.root, second.root)) {
      throw new LogError(`two checkpoints of size ${first.size} have different root hashes`);
    }
    return;
  }
  if (!proof.length) throw new LogError("the consistency proof is empty");
  const path = (first.size & (first.size - 1n)) === 0n ? [first.root, ...proof] : proof;
  let fn = first.size - 1n;
  let sn = second.size - 1n;
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0n) throw new LogError("the consistency proof is too long");
    if ((fn & 1n) === 1n || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      if ((fn & 1n) === 0n) {
        while ((fn & 1n) === 0n && fn !== 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new LogError("the consistency proof is too short");
  if (!equal(fr, first.root)) throw new LogError("the consistency proof does not lead to the saved checkpoint's root");
  if (!equal(sr, second.root)) throw new LogError("the consistency proof does not lead to the new checkpoint's root");
}

// The service's verifier key, fetched once per page load.
let serviceKey = null;

const SAVED = (id) => `privpca.checkpoint.datasets/${id}`;
const tampered = (e) => e instanceof ApiError && e.status === 409 && (e.type ?? "").endsWith("ledger-log-tampered");

// Witnesses a dataset's log. Resolves to one of
//   { state: "verified", from, to }  the log extends the checkpoint this browser saved (sizes);
//   { state: "first", to }           nothing saved before: this checkpoint is now saved;
//   { state: "rewritten", reason }   a signature, the saved checkpoint or the proof failed, or
//                                    the service answered 409 ledger-log-tampered;
//   { state: "unchecked", reason }   the log could not be checked (no WebCrypto Ed25519 here,
//                                    or the request failed): no verdict.
// The new checkpoint is saved only after it verified, and never over a larger saved one.
export async function witness(datasetId, storage = localStorage) {
  if (!globalThis.crypto?.subtle) {
    return { state: "unchecked", reason: "this page is not a secure context (HTTPS or localhost), so it has no WebCrypto" };
  }
  let vkey;
  try {
    serviceKey ??= ledgerKey().then((k) => verifierKey(k.verifier_key));
    vkey = await serviceKey;
  } catch (e) {
    serviceKey = null;
    if (e instanceof LogError) return { state: "rewritten", reason: `the service's verifier key: ${e.message}` };
    if (e?.name === "NotSupportedError") return { state: "unchecked", reason: "this browser cannot check Ed25519 signatures" };
    return { state: "unchecked", reason: e.message };
  }
  try {
    const current = await openCheckpoint((await checkpoint(datasetId)).checkpoint, vkey);
    if (!current.origin.endsWith(`/datasets/${datasetId}`)) {
      throw new LogError(`the service signed a checkpoint of ${current.origin} for this dataset`);
    }
    const savedNote = storage.getItem(SAVED(datasetId));
    if (savedNote === null) {
      storage.setItem(SAVED(datasetId), current.note);
      return { state: "first", to: current.size };
    }
    let saved;
    try {
      saved = await openCheckpoint(savedNote, vkey);
    } catch (e) {
      throw new LogError(`the checkpoint this browser saved does not verify with the service's key (${e.message})`);
    }
    if (saved.origin !== current.origin) {
      throw new LogError(`the log's origin changed from ${saved.origin} to ${current.origin}`);
    }
    if (current.size < saved.size) throw new LogError(`the log shrank from size ${saved.size} to ${current.size}`);
    const proof = current.size > saved.size ? (await consistency(datasetId, saved.size, current.size)).proof : [];
    if (!Array.isArray(proof)) throw new LogError("the consistency proof is not a list");
    await verifyConsistency(saved, current, proof);
    const now = storage.getItem(SAVED(datasetId));
    let keep = false;
    if (now !== null && now !== savedNote) {
      try {
        keep = (await openCheckpoint(now, vkey)).size > current.size; // a later check saved a larger head
      } catch {
        keep = false;
      }
    }
    if (!keep) storage.setItem(SAVED(datasetId), current.note);
    return { state: "verified", from: saved.size, to: current.size };
  } catch (e) {
    if (e instanceof LogError) return { state: "rewritten", reason: e.message };
    if (tampered(e)) return { state: "rewritten", reason: `the service reports this dataset's log as tampered (${e.message})` };
    return { state: "unchecked", reason: e.message };
  }
}
