#!/usr/bin/env python3
"""Jobs through HTTP against numpy doing the same maths, side by side in one run.

Starts a release `privpca serve` on a fresh data directory, uploads an n × d `.npy` (public
dataset, rows of norm < 1), then runs `--reps` rounds. Each round times, in this order:

- numpy noisy_power, twice: X₀ = Q(Ω); L = 4 times Y = A·V + G, V = Q(Y); SVD of the last Y
  (p = 2k = 20), the maths of a noisy_power k=10 job, with A·V applied factored as Xᵀ(X·V)
  (what privpca does at this shape) and with A = XᵀX formed first (numpy's faster way when its
  skinny products are slow); the ratio is taken against the faster of the two;
- privpca noisy_power k=10: POST /v1/jobs → poll GET /v1/jobs/{id} every 2 ms → GET result;
- numpy Gram + eigh: G = XᵀX, eigh(G) (the maths of analyze_gauss and of exact);
- privpca analyze_gauss k=10, then privpca exact k=10 (exact centres: (X − 1x̄ᵀ)ᵀ(X − 1x̄ᵀ)).

numpy holds X in memory (loaded once, as a user of numpy would); privpca maps its stored copy
per job, and reads the dataset's statistics (XᵀX, Xᵀ1, n), which the upload built while it
streamed. Prints medians, maxima and tail ratios (max / median), and the service's run_ms.

Then `--first-reps` rounds of the first job on fresh data (issue 21 §2), alternating:

- privpca: from the start of the upload of the `.npy` bytes (PUT to a new dataset) to the first
  noisy_power k=10 basis in hand (POST /v1/jobs, poll every 2 ms, GET result);
- numpy: from the same bytes in memory: np.load, then the noisy_power maths above (both ways,
  the faster is the reference), which includes forming XᵀX or two skinny products per iteration.

Usage: python3 scripts/bench_vs_numpy.py [--bin target/release/privpca] [--n 100000] [--d 500]
       [--reps 8] [--threads 0]   (needs numpy; nothing else outside the standard library)
"""

import argparse
import http.client
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ADMIN = "bench-admin-key"


class Client:
    def __init__(self, port, key):
        self.port, self.key = port, key

    def call(self, method, path, body=None, content_type="application/json", headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600, blocksize=1 << 20)
        h = {"Authorization": f"Bearer {self.key}", "Content-Type": content_type}
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        if resp.status >= 400:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:500]!r}")
        return json.loads(data) if data else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(binary, work, port, extra_env, **popen):
    """Starts `privpca serve` on `port` with its data and SQLite database in `work/data` and its
    log in `work/serve.log`; `extra_env` adds or overrides PRIVPCA_* settings."""
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    env = dict(
        os.environ,
        PRIVPCA_BIND=f"127.0.0.1:{port}",
        PRIVPCA_DATA_DIR=data,
        PRIVPCA_DATABASE_URL=f"sqlite://{data}/privpca.db",
        PRIVPCA_ADMIN_KEY=ADMIN,
        PRIVPCA_MAX_UPLOAD_BYTES=str(1 << 40),
        PRIVPCA_LOG_FORMAT="json",
    )
    env.update(extra_env)
    log = open(os.path.join(work, "serve.log"), "w")
    return subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=log, **popen)


def ready_admin(port, seconds=30):
    """Waits up to `seconds` for the service on `port` to be ready; returns its admin client."""
    admin = Client(port, ADMIN)
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            admin.call("GET", "/readyz")
            return admin
        except (OSError, RuntimeError):
            time.sleep(0.1)
    raise RuntimeError("the service did not become ready")


def bench_parser(n):
    """The options every service benchmark takes: the binary to run and the row count `--n`
    (default `n`)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "privpca"))
    ap.add_argument("--n", type=int, default=n)
    return ap


def public_dataset(port, name):
    """Waits for the service on `port` to be ready, then creates a tenant and an empty public
    records dataset (row norm bound 1), both called `name`; returns the tenant's client and the
    dataset's id."""
    admin = ready_admin(port)
    key = admin.call("POST", "/v1/tenants", {"name": name})["api_key"]
    client = Client(port, key)
    dataset = client.call(
        "POST",
        "/v1/datasets",
        {"name": name, "kind": "records", "row_norm_bound": 1.0, "public": True},
    )["id"]
    return client, dataset


def spiked(n, d, seed):
    """10 strong directions plus isotropic noise, rows of norm below 1."""
    rng = np.random.default_rng(seed)
    scale = np.full(d, 0.3)
    scale[:10] = 3.0 / (1.0 + np.arange(10))
    return (rng.random((n, d)) - 0.5) * scale / np.sqrt(d)


def numpy_noisy_power(x, k=10, iterations=4, seed=0, form_gram=False):
    """The maths of a noisy_power job, applying A = XᵀX factored (as privpca does here) or formed."""
    rng = np.random.default_rng(seed)
    d = x.shape[1]
    p = min(d, 2 * k)
    a = x.T @ x if form_gram else None
    v, _ = np.linalg.qr(rng.standard_normal((d, p)))
    for it in range(iterations):
        av = a @ v if form_gram else x.T @ (x @ v)
        y = av + 1e-3 * rng.standard_normal((d, p))
        if it + 1 < iterations:
            v, _ = np.linalg.qr(y)
    u, s, _ = np.linalg.svd(y, full_matrices=False)
    return u[:, :k], s[:k]


def numpy_gram_eigh(x, k=10):
    g = x.T @ x
    w, v = np.linalg.eigh(g)
    return v[:, -k:], w[-k:]


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def finished_job(client, dataset, algorithm, poll):
    """Submits a job of `algorithm` with k = 10 at ρ = 1 and polls it every `poll` seconds until
    it has finished; returns its last view."""
    job = client.call(
        "POST",
        "/v1/jobs",
        {"dataset_id": dataset, "algorithm": algorithm, "params": {"k": 10}, "privacy": {"rho": 1.0}},
    )
    while True:
        view = client.call("GET", f"/v1/jobs/{job['id']}")
        if view["status"] in ("succeeded", "failed", "cancelled"):
            return view
        time.sleep(poll)


def run_job(client, dataset, algorithm):
    start = time.perf_counter()
    view = finished_job(client, dataset, algorithm, 0.002)
    if view["status"] != "succeeded":
        raise RuntimeError(f"{algorithm}: {view}")
    client.call("GET", f"/v1/jobs/{view['id']}/result")
    return time.perf_counter() - start, view.get("run_ms")


def summary(name, seconds, reference=None, run_ms=None):
    med, top = statistics.median(seconds), max(seconds)
    line = f"| {name:<28} | {med:7.3f} | {min(seconds):7.3f} | {top:7.3f} | {top / med:5.2f} |"
    line += f" {med / reference:5.2f} |" if reference else "     — |"
    if run_ms:
        line += f" {statistics.median(run_ms):6.0f} / {max(run_ms):6.0f} |"
    else:
        line += "        — |"
    print(line)


def first_job(client, npy, reps):
    """Upload start → first noisy_power basis in hand on fresh data, against numpy from the same
    bytes in memory (np.load + the same maths); prints the table and the ratio of medians."""
    with open(npy, "rb") as f:
        body = f.read()
    times = {k: [] for k in ("np_first", "np_first_gram", "upload", "first")}
    run_ms = []
    for r in range(reps):
        times["np_first"].append(timed(lambda: numpy_noisy_power(np.load(io.BytesIO(body)), seed=r)))
        times["np_first_gram"].append(
            timed(lambda: numpy_noisy_power(np.load(io.BytesIO(body)), seed=r, form_gram=True)))
        dataset = client.call(
            "POST",
            "/v1/datasets",
            {"name": f"first-{r}", "kind": "records", "row_norm_bound": 1.0, "public": True},
        )["id"]
        start = time.perf_counter()
        client.call("PUT", f"/v1/datasets/{dataset}/data", body, "application/x-npy")
        times["upload"].append(time.perf_counter() - start)
        view = finished_job(client, dataset, "noisy_power", 0.002)
        if view["status"] != "succeeded":
            raise RuntimeError(f"first noisy_power: {view}")
        client.call("GET", f"/v1/jobs/{view['id']}/result")
        times["first"].append(time.perf_counter() - start)
        run_ms.append(view.get("run_ms"))
        client.call("DELETE", f"/v1/datasets/{dataset}")
    reference = min(statistics.median(times["np_first"]), statistics.median(times["np_first_gram"]))
    print(f"\nFirst job on fresh data, {reps} rounds (load average {os.getloadavg()[0]:.1f}):\n")
    print("| what                         | median s | min s | max s | max/med | ÷ numpy | run_ms med / max |")
    print("|------------------------------|--------:|--------:|--------:|------:|------:|---------:|")
    summary("numpy load + noisy_power, factored", times["np_first"])
    summary("numpy load + noisy_power, Gram", times["np_first_gram"])
    summary("privpca upload (PUT) alone", times["upload"], reference)
    summary("privpca upload → first basis", times["first"], reference, run_ms)


def main():
    ap = bench_parser(100_000)
    ap.add_argument("--d", type=int, default=500)
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0, help="PRIVPCA_THREADS (0: one per core)")
    ap.add_argument("--first-reps", type=int, default=5, help="rounds of the first job on fresh data")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="privpca-bench-")
    port = free_port()
    server = None
    try:
        x = spiked(args.n, args.d, 1)
        npy = os.path.join(work, "x.npy")
        np.save(npy, x)
        server = start_service(args.bin, work, port, {"PRIVPCA_THREADS": str(args.threads)})
        client, dataset = public_dataset(port, "bench")
        with open(npy, "rb") as f:
            body = f.read()
        upload = timed(lambda: client.call("PUT", f"/v1/datasets/{dataset}/data", body, "application/x-npy"))
        del body
        threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
        print(f"numpy {np.__version__} (OPENBLAS_NUM_THREADS {threads}); {args.n} × {args.d}; "
              f"upload {upload:.2f} s; {args.reps} rounds; load average {os.getloadavg()[0]:.1f}\n")

        times = {k: [] for k in ("np_power", "np_power_gram", "np_gram", "noisy_power", "analyze_gauss", "exact")}
        run_ms = {k: [] for k in ("noisy_power", "analyze_gauss", "exact")}
        # One untimed warm-up of each, so that neither side pays first-touch costs in the table.
        numpy_noisy_power(x)
        numpy_noisy_power(x, form_gram=True)
        numpy_gram_eigh(x)
        # The upload built and kept the dataset's statistics (XᵀX, Xᵀ1, n) while it streamed;
        # every job reads them. The first jobs' times are reported too.
        first = {algorithm: run_job(client, dataset, algorithm) for algorithm in run_ms}
        for r in range(args.reps):
            times["np_power"].append(timed(lambda: numpy_noisy_power(x, seed=r)))
            times["np_power_gram"].append(timed(lambda: numpy_noisy_power(x, seed=r, form_gram=True)))
            for algorithm in ("noisy_power",):
                t, ms = run_job(client, dataset, algorithm)
                times[algorithm].append(t)
                run_ms[algorithm].append(ms)
            times["np_gram"].append(timed(lambda: numpy_gram_eigh(x)))
            for algorithm in ("analyze_gauss", "exact"):
                t, ms = run_job(client, dataset, algorithm)
                times[algorithm].append(t)
                run_ms[algorithm].append(ms)

        print("| what                         | median s | min s | max s | max/med | ÷ numpy | run_ms med / max |")
        print("|------------------------------|--------:|--------:|--------:|------:|------:|---------:|")
        np_power = min(statistics.median(times["np_power"]), statistics.median(times["np_power_gram"]))
        np_gram = statistics.median(times["np_gram"])
        summary("numpy noisy_power, factored", times["np_power"])
        summary("numpy noisy_power, Gram", times["np_power_gram"])
        summary("privpca noisy_power k=10", times["noisy_power"], np_power, run_ms["noisy_power"])
        summary("numpy Gram + eigh", times["np_gram"])
        summary("privpca analyze_gauss k=10", times["analyze_gauss"], np_gram, run_ms["analyze_gauss"])
        summary("privpca exact k=10", times["exact"], np_gram, run_ms["exact"])
        print("\nFirst jobs on the dataset after its upload (untimed warm-up above), in submission order: "
              + ", ".join(f"{algorithm} {t:.3f} s (run_ms {ms})" for algorithm, (t, ms) in first.items()))
        del x
        first_job(client, npy, args.first_reps)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
