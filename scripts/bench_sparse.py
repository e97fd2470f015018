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
   poll → GET the result (as `.npy`, `Accept: application/x-npy`);
3. privpca `noisy_power` k on the same dataset, public, no privacy target (default parameters,
   then `--iterations`);
4. the refusals: `analyze_gauss` on the sparse dataset (422), and a file with an index out of
   range (4xx naming the line; the dataset stays `empty`);
5. the service's peak resident set (VmHWM from /proc), against the 8·n² bytes of a dense copy.

Captured energy of a basis V is Σᵢ vᵢᵀMvᵢ; reported as the fraction of eigsh's.

With `--nnz 1e6,4e6,8e6` it sweeps sizes instead (issue 41: 1 to 8 million nonzeros at
n = 100 000): per size the expected degree is nnz/n − 1, split between inside and across in the
ratio of `--degree-in` to `--degree-out`. For each size and each binary (`--bin`, then every
`--compare` build, alternated; `--rounds` repeats the alternation), in turn: eigsh timed again,
a fresh service, upload → `exact` basis, and `noisy_power` at its defaults (public, no privacy
target); one line each, then a table, all with the load average (/proc/loadavg) at the time.

Usage: python3 scripts/bench_sparse.py [--bin target/release/privpca] [--n 100000] [--k 10]
       python3 scripts/bench_sparse.py --nnz 1e6,4e6,8e6 [--compare B] [--rounds 2]
       (needs numpy and scipy, e.g. in a venv: python3 -m venv v && v/bin/pip install numpy scipy)
"""

import argparse
import http.client
import io
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import scipy
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as spla

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_vs_numpy  # noqa: E402  (the same HTTP client and service start)
from bench_vs_numpy import Client, bench_parser, free_port, ready_admin  # noqa: E402


def start_service(binary, work):
    """`privpca serve` on a free loopback port with a fresh data directory; (process, admin client)."""
    port = free_port()
    process = bench_vs_numpy.start_service(binary, work, port, {})
    return process, ready_admin(port, seconds=60)


def refused(call):
    """The error a call that must fail raised (`Client.call` raises with the status and body)."""
    try:
        call()
    except RuntimeError as e:
        return str(e)
    raise RuntimeError("the call was not refused")


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


def npy_result(client, job):
    """The basis of a succeeded job as n × k, fetched as `.npy` (`Accept: application/x-npy`)."""
    conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=3600, blocksize=1 << 20)
    conn.request("GET", f"/v1/jobs/{job}/result",
                 headers={"Authorization": f"Bearer {client.key}", "Accept": "application/x-npy"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    if resp.status != 200:
        raise RuntimeError(f"GET result: {resp.status} {data[:500]!r}")
    return np.load(io.BytesIO(data))


def run_job(client, body):
    """Submits, polls every 2 ms until the job ends; (view, basis as n × k)."""
    job = client.call("POST", "/v1/jobs", body)["id"]
    view = client.call("GET", f"/v1/jobs/{job}")
    while view["status"] in ("queued", "running"):
        time.sleep(0.002)
        view = client.call("GET", f"/v1/jobs/{job}")
    assert view["status"] == "succeeded", view
    return view, npy_result(client, job)


def load_average():
    """The 1-minute load average, as /proc/loadavg reports it."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def timed_eigsh(m, k):
    """(seconds, eigenvalues decreasing, eigenvectors, captured energy) of `eigsh(m, k)`."""
    t = time.perf_counter()
    values, vectors = spla.eigsh(m, k=k)
    seconds = time.perf_counter() - t
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    return seconds, values, vectors, energy(m, vectors)


def one_size(binary, work, m, mtx, k, best):
    """A fresh service on `binary`: upload → `exact` basis, then `noisy_power` at its defaults;
    a dict of the times and captured energies (fractions of eigsh's `best`)."""
    server, admin = start_service(binary, work)
    try:
        client = Client(admin.port, admin.call("POST", "/v1/tenants", {"name": "bench"})["api_key"])
        t = time.perf_counter()
        ds = client.call("POST", "/v1/datasets", {"name": "graph", "kind": "matrix", "public": True})
        client.call("PUT", f"/v1/datasets/{ds['id']}/data", mtx, "application/x-matrix-market")
        upload = time.perf_counter() - t
        job_view, basis = run_job(client, {"dataset_id": ds["id"], "algorithm": "exact", "params": {"k": k}})
        to_basis = time.perf_counter() - t
        exact = energy(m, basis) / best
        t = time.perf_counter()
        power_view, basis = run_job(client, {"dataset_id": ds["id"], "algorithm": "noisy_power", "params": {"k": k}})
        power = time.perf_counter() - t
        # Outside the timing: how many iterations the run to convergence took (from the JSON result).
        released = client.call("GET", f"/v1/jobs/{power_view['id']}/result").get("released") or {}
        return {
            "upload": upload, "job_ms": job_view.get("run_ms"), "to_basis": to_basis, "exact": exact,
            "power": power, "power_energy": energy(m, basis) / best,
            "power_ran": released.get("iterations_run"),
            "power_config": power_view["config"],
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


def sweep(args, work):
    """The `--nnz` sweep: per size and binary, eigsh then the service, alternating."""
    sizes = [float(x) for x in args.nnz.split(",")]
    binaries = [args.bin] + args.compare
    print(f"numpy {np.__version__}, scipy {scipy.__version__}; n = {args.n}, k = {args.k}, binaries: {binaries}")
    rows = []
    share_in = args.degree_in / (args.degree_in + args.degree_out)
    for target in sizes:
        degree = target / args.n - 1
        t = time.perf_counter()
        m = lazy_normalised(planted_partition(args.n, args.communities, degree * share_in,
                                              degree * (1 - share_in), args.seed))
        path = os.path.join(work, "graph.mtx")
        scipy.io.mmwrite(path, m)
        with open(path, "rb") as f:
            mtx = f.read()
        os.remove(path)
        print(f"\nnnz ≈ {target:.0e}: n = {args.n}, nnz = {m.nnz} ({m.nnz / args.n:.1f} per row), "
              f"{len(mtx) / 2**20:.1f} MiB as Matrix Market; generated in {time.perf_counter() - t:.1f} s", flush=True)
        for r in range(args.rounds):
            for binary in binaries:
                load = load_average()
                eigsh_s, _, _, best = timed_eigsh(m, args.k)
                run = one_size(binary, work, m, mtx, args.k, best)
                load_after = load_average()
                row = {"nnz": m.nnz, "round": r + 1, "bin": binary, "eigsh": eigsh_s, "load": (load, load_after), **run}
                rows.append(row)
                converged = run["power_config"].get("until_converged", False)
                print(f"  [{os.path.basename(os.path.dirname(os.path.dirname(binary)))}/{os.path.basename(binary)} "
                      f"round {r + 1}] load {load:.2f} → {load_after:.2f}; eigsh {eigsh_s:.2f} s; upload "
                      f"{run['upload']:.2f} s; exact job {run['job_ms']} ms; upload → basis {run['to_basis']:.2f} s "
                      f"= {run['to_basis'] / eigsh_s:.2f}× eigsh (energy {run['exact']:.6f}); noisy_power defaults "
                      f"{run['power']:.2f} s = {run['power'] / eigsh_s:.2f}× eigsh (energy {run['power_energy']:.6f}, "
                      f"until_converged = {converged}, iterations run {run['power_ran']})", flush=True)
    print("\n| nnz | binary | round | load | eigsh | upload | exact job | upload → basis | ÷ eigsh | exact energy "
          "| noisy_power | ÷ eigsh | noisy_power energy |")
    print("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['nnz']} | {row['bin']} | {row['round']} | {row['load'][0]:.2f} → {row['load'][1]:.2f} "
              f"| {row['eigsh']:.2f} s | {row['upload']:.2f} s | {row['job_ms']} ms | {row['to_basis']:.2f} s "
              f"| {row['to_basis'] / row['eigsh']:.2f}× | {row['exact']:.6f} | {row['power']:.2f} s "
              f"| {row['power'] / row['eigsh']:.2f}× | {row['power_energy']:.6f} |")


def main():
    ap = bench_parser(100_000)
    ap.add_argument("--communities", type=int, default=10)
    ap.add_argument("--degree-in", type=float, default=15.0)
    ap.add_argument("--degree-out", type=float, default=4.0)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=20, help="noisy_power's L in the second run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--nnz", help="sweep these sizes instead (comma-separated stored entries, e.g. 1e6,4e6,8e6)")
    ap.add_argument("--compare", action="append", default=[], metavar="BIN",
                    help="with --nnz: another build to alternate with --bin (may be repeated)")
    ap.add_argument("--rounds", type=int, default=1, help="with --nnz: how many times each binary runs per size")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sparse-bench-")
    server = None
    if args.nnz:
        try:
            sweep(args, work)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        return
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

        server, admin = start_service(args.bin, work)
        client = Client(admin.port, admin.call("POST", "/v1/tenants", {"name": "bench"})["api_key"])
        rss_before = peak_rss_mib(server.pid)

        t = time.perf_counter()
        ds = client.call("POST", "/v1/datasets", {"name": "graph", "kind": "matrix", "public": True})
        view = client.call("PUT", f"/v1/datasets/{ds['id']}/data", mtx, "application/x-matrix-market")
        uploaded_s = time.perf_counter() - t
        job_view, basis = run_job(client, {"dataset_id": ds["id"], "algorithm": "exact", "params": {"k": args.k}})
        to_basis_s = time.perf_counter() - t
        exact_energy = energy(m, basis) / best
        print(f"privpca upload: {uploaded_s:.2f} s (stored nnz = {view['nnz']}); upload to exact basis: "
              f"{to_basis_s:.2f} s = {to_basis_s / eigsh_s:.2f}× eigsh; job run {job_view.get('run_ms')} ms")
        print(f"exact k={args.k}: captured energy {exact_energy:.6f} of eigsh's")

        for params in ({"k": args.k}, {"k": args.k, "iterations": args.iterations}):
            t = time.perf_counter()
            job_view, basis = run_job(client, {"dataset_id": ds["id"], "algorithm": "noisy_power", "params": params})
            s = time.perf_counter() - t
            ran = job_view["config"].get("iterations")
            orth = np.abs(basis.T @ basis - np.eye(args.k)).max()
            print(f"noisy_power {params} (public, no privacy target): captured energy "
                  f"{energy(m, basis) / best:.6f} of eigsh's; {s:.2f} s (config: L ≤ {ran}, until_converged = "
                  f"{job_view['config'].get('until_converged', False)}); max |VᵀV − I| = {orth:.1e}")

        gauss = {"dataset_id": ds["id"], "algorithm": "analyze_gauss", "params": {"k": args.k}}
        print(f"analyze_gauss on the sparse dataset: {refused(lambda: client.call('POST', '/v1/jobs', gauss))}")
        bad = client.call("POST", "/v1/datasets", {"name": "bad", "kind": "matrix", "public": True})
        # The last entry points past the side (the whole body is sent before the refusal).
        lines = mtx.rstrip(b"\n").split(b"\n")
        last = len(lines) - 1
        lines[last] = f"{args.n + 1} 1 0.5".encode()
        body = b"\n".join(lines) + b"\n"
        error = refused(lambda: client.call("PUT", f"/v1/datasets/{bad['id']}/data", body, "application/x-matrix-market"))
        after = client.call("GET", f"/v1/datasets/{bad['id']}")["status"]
        print(f"index out of range on line {last + 1}: {error}; dataset {after}")

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
