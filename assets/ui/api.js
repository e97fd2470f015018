// The JSON API, called with the key from sessionStorage as a Bearer header.

const KEY = "privpca.apiKey";

export const session = {
  key: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  forget: () => sessionStorage.removeItem(KEY),
};

// An API error carrying the problem document's detail (RFC 9457) when there is one.
export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
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
    try {
      const problem = await response.json();
      if (problem.detail) detail = `${problem.title ?? response.status}: ${problem.detail}`;
    } catch {
      // not a problem document; keep the status line
    }
    throw new ApiError(response.status, detail);
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
