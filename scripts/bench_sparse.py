#!/usr/bin/env python3
"""Sparse symmetric matrices at 100 000 dimensions, through the live service against scipy.

Generates the judged matrix: the lazy normalised adjacency M = (I + D^-½WD^-½)/2 of a
planted-partition graph (n nodes in `--communities` equal groups, expected degree `--degree-in`
inside the node's group and `--degree-out` across; about n·(1 + degree) stored entries), which
is symmetric positive semi-definite. Writes it with `scipy.io.mmwrite` (default arguments),
starts `privpca serve` on a fresh data directory and, in one run:

1. scipy: `scipy.sparse.linalg.eigsh(M, k)` (the reference top k), timed;
2. privpca, timed from the first byte of the upload to the basis in hand: create a public
   matrix dataset → PUT the .mtx (`application/x-matrix-market`) → POST an `exact` k job →
   poll → GET the result;
3. privpca `noisy_power` k on the same dataset, public, no privacy target (default parameters,
   then `--iterations`);
4. the refusals: `analyze_gauss` on the sparse dataset (422), and a file with an index out of
   range (4xx naming the line; the dataset stays `empty`);
5. the service's peak resident set (VmHWM from /proc), against the 8·n² bytes of a dense copy.

Captured energy of a basis V is Σᵢ vᵢᵀMvᵢ; reported as the fraction of eigsh's.

Usage: python3 scripts/bench_sparse.py [--bin target/release/privpca] [--n 100000] [--k 10]
       (needs numpy and scipy, e.g. in a venv: python3 -m venv v && v/bin/pip install numpy scipy)
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as spla

ADMIN = "bench-admin-key"


class Client:
    def __init__(self, port, key):
        self.port, self.key = port, key

    def call(self, method, path, body=None, content_type="application/json", ok=True):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600, blocksize=1 << 20)
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": content_type}
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        if ok and resp.status >= 400:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:500]!r}")
        return resp.status, (json.loads(data) if data else None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def planted_partition(n, communities, degree_in, degree_out, seed):
    """W: a planted-partition graph, node i in group i % communities; edges drawn as uniform
    random pairs (duplicates and loops dropped), so the degrees are close to Poisson."""
    rng = np.random.default_rng(seed)
    size = n // communities
    groups = np.arange(n) % communities
    members = [np.flatnonzero(groups == c) for c in range(communities)]
    rows, cols = [], []
    inside = int(n * degree_in / 2)
    c = rng.integers(0, communities, inside)
    a = rng.integers(0, size, inside)
    b = rng.integers(0, size, inside)
    index = np.stack(members)
    rows.append(index[c, a])
    cols.append(index[c, b])
    across = int(n * degree_out / 2)
    i = rng.integers(0, n, across)
    j = rng.integers(0, n, across)
    keep = groups[i] != groups[j]
    rows.append(i[keep])
    cols.append(j[keep])
    r, q = np.concatenate(rows), np.concatenate(cols)
    keep = r != q
    w = sp.coo_matrix((np.ones(keep.sum()), (r[keep], q[keep])), shape=(n, n)).tocsr()
    w = ((w + w.T) > 0).astype(np.float64)
    return w


def lazy_normalised(w):
    degree = np.asarray(w.sum(axis=1)).ravel()
    inv_sqrt = np.zeros_like(degree)
    inv_sqrt[degree > 0] = 1.0 / np.sqrt(degree[degree > 0])
    d = sp.diags(inv_sqrt)
    n = w.shape[0]
    return ((sp.identity(n, format="csr") + d @ w @ d) * 0.5).tocsr()


def energy(m, basis):
    """Σᵢ vᵢᵀ M vᵢ for the columns of basis (n × k)."""
    return float(np.sum(basis * (m @ basis)))


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_job(client, body):
    _, job = client.call("POST", "/v1/jobs", body)
    while True:
        _, view = client.call("GET", f"/v1/jobs/{job['id']}")
        if view["status"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.002)
    if view["status"] != "succeeded":
        raise RuntimeError(f"job failed: {view}")
    _, result = client.call("GET", f"/v1/jobs/{job['id']}/result")
    return view, np.array(result["basis"]).T, result.get("eigenvalues")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/privpca")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--communities", type=int, default=10)
    ap.add_argument("--degree-in", type=float, default=15.0)
    ap.add_argument("--degree-out", type=float, default=4.0)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=20, help="noisy_power's L in the second run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sparse-bench-")
    server = None
    try:
        t = time.perf_counter()
        m = lazy_normalised(planted_partition(args.n, args.communities, args.degree_in, args.degree_out, args.seed))
        path = os.path.join(work, "graph.mtx")
        scipy.io.mmwrite(path, m)
        with open(path, "rb") as f:
            mtx = f.read()
        banner = mtx.split(b"\n", 1)[0].decode()
        print(f"matrix: n = {args.n}, nnz = {m.nnz}, {len(mtx) / 2**20:.1f} MiB as Matrix Market "
              f"({banner}); generated and written in {time.perf_counter() - t:.1f} s")
        print(f"numpy {np.__version__}, scipy {scipy.__version__}")

        t = time.perf_counter()
        values, vectors = spla.eigsh(m, k=args.k)
        eigsh_s = time.perf_counter() - t
        order = np.argsort(values)[::-1]
        values, vectors = values[order], vectors[:, order]
        best = energy(m, vectors)
        print(f"eigsh k={args.k}: {eigsh_s:.2f} s; eigenvalues {np.round(values, 4).tolist()}")

        port = free_port()
        env = dict(
            os.environ,
            PRIVPCA_BIND=f"127.0.0.1:{port}",
            PRIVPCA_DATA_DIR=os.path.join(work, "data"),
            PRIVPCA_DATABASE_URL=f"sqlite://{work}/data/privpca.db",
            PRIVPCA_ADMIN_KEY=ADMIN,
            PRIVPCA_MAX_UPLOAD_BYTES=str(1 << 40),
            PRIVPCA_LOG_FORMAT="json",
        )
        os.makedirs(env["PRIVPCA_DATA_DIR"], exist_ok=True)
        log = open(os.path.join(work, "serve.log"), "w")
        server = subprocess.Popen([args.bin, "serve"], env=env, stdout=log, stderr=log)
        admin = Client(port, ADMIN)
        for _ in range(600):
            try:
                admin.call("GET", "/readyz")
                break
            except (ConnectionError, OSError, RuntimeError):
                time.sleep(0.1)
        _, tenant = admin.call("POST", "/v1/tenants", {"name": "bench"})
        client = Client(port, tenant["api_key"])
        rss_before = peak_rss_mib(server.pid)

        t = time.perf_counter()
        _, ds = client.call("POST", "/v1/datasets", {"name": "graph", "kind": "matrix", "public": True})
        _, view = client.call("PUT", f"/v1/datasets/{ds['id']}/data", mtx, "application/x-matrix-market")
        uploaded_s = time.perf_counter() - t
        job_view, basis, _ = run_job(client, {"dataset_id": ds["id"], "algorithm": "exact", "params": {"k": args.k}})
        to_basis_s = time.perf_counter() - t
        exact_energy = energy(m, basis) / best
        print(f"privpca upload: {uploaded_s:.2f} s (stored nnz = {view['nnz']}); upload to exact basis: "
              f"{to_basis_s:.2f} s = {to_basis_s / eigsh_s:.2f}× eigsh; job run {job_view.get('run_ms')} ms")
        print(f"exact k={args.k}: captured energy {exact_energy:.6f} of eigsh's")

        for params in ({"k": args.k}, {"k": args.k, "iterations": args.iterations}):
            t = time.perf_counter()
            job_view, basis, _ = run_job(client, {"dataset_id": ds["id"], "algorithm": "noisy_power", "params": params})
            s = time.perf_counter() - t
            orth = np.abs(basis.T @ basis - np.eye(args.k)).max()
            print(f"noisy_power {params} (public, no privacy target): captured energy "
                  f"{energy(m, basis) / best:.6f} of eigsh's; {s:.2f} s; max |VᵀV − I| = {orth:.1e}")

        status, doc = client.call("POST", "/v1/jobs", {"dataset_id": ds["id"], "algorithm": "analyze_gauss",
                                                       "params": {"k": args.k}}, ok=False)
        print(f"analyze_gauss on the sparse dataset: {status} {doc['detail']!r}")
        _, bad = client.call("POST", "/v1/datasets", {"name": "bad", "kind": "matrix", "public": True})
        lines = mtx.split(b"\n")
        first_entry = next(i for i, l in enumerate(lines) if i > 0 and l and not l.startswith(b"%")) + 1
        lines[first_entry] = f"{args.n + 1} 1 0.5".encode()
        status, doc = client.call("PUT", f"/v1/datasets/{bad['id']}/data", b"\n".join(lines),
                                  "application/x-matrix-market", ok=False)
        _, after = client.call("GET", f"/v1/datasets/{bad['id']}")
        print(f"index out of range on line {first_entry + 1}: {status} {doc['detail']!r}; dataset {after['status']}")

        peak = peak_rss_mib(server.pid)
        print(f"service peak RSS: {peak:.0f} MiB (at start {rss_before:.0f} MiB); "
              f"a dense f64 copy would be {8 * args.n**2 / 2**30:.1f} GiB")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
