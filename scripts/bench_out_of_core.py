#!/usr/bin/env python3
"""A dataset larger than the memory cap: upload and noisy_power through HTTP, under a cgroup.

Writes an n × d float64 `.npy` (default 1 000 000 × 1 000, 8 GB) in chunks, starts a release
`privpca serve` inside a memory cgroup capped at `--cap` (cgroup v1 `memory.limit_in_bytes`,
or v2 `memory.max`, under this process's own cgroup), streams the file to
`PUT /v1/datasets/{id}/data`, runs one k=10 job of each of `--algorithms` (default noisy_power:
L = 4, p = 20, the factored path, four streaming passes over the stored file), and reports wall times, the server's peak RSS
(VmHWM, and the peaks of RssAnon and RssFile sampled every 50 ms) and the cgroup's peak charge
(which includes page cache). Deletes every file it wrote.

Usage (as root, or with a delegated cgroup):
  python3 scripts/bench_out_of_core.py [--bin target/release/privpca] [--n 1000000] [--d 1000]
      [--cap 4G] [--dir target/ooc-bench] [--algorithms noisy_power,analyze_gauss,exact]
      [--drop-cache]   # with PRIVPCA_STORAGE_URL and the AWS_* variables set (object store)
"""

import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_numpy import bench_parser, finished_job, free_port, public_dataset, start_service  # noqa: E402


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def own_cgroup():
    """(version, directory) of this process's memory cgroup."""
    for line in open("/proc/self/cgroup"):
        hier, controllers, path = line.rstrip("\n").split(":", 2)
        if "memory" in controllers.split(","):
            return 1, f"/sys/fs/cgroup/memory{path}"
    for line in open("/proc/self/cgroup"):
        if line.startswith("0::"):
            path = line.rstrip("\n").split(":", 2)[2]
            base = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"
            return 2, f"{base}{path}"
    raise SystemExit("no memory cgroup found")


class Cap:
    """A child memory cgroup with a hard limit."""

    def __init__(self, limit):
        self.version, parent = own_cgroup()
        self.dir = os.path.join(parent, f"privpca-ooc-{os.getpid()}")
        os.mkdir(self.dir)
        limit_file = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        with open(os.path.join(self.dir, limit_file), "w") as f:
            f.write(str(limit))

    def add(self, pid):
        with open(os.path.join(self.dir, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def peak(self):
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int(open(os.path.join(self.dir, name)).read())
        except OSError:
            return None

    def events(self):
        name = "memory.failcnt" if self.version == 1 else "memory.events"
        try:
            return open(os.path.join(self.dir, name)).read().strip().replace("\n", ", ")
        except OSError:
            return "?"

    def remove(self):
        try:
            os.rmdir(self.dir)
        except OSError as e:
            print(f"could not remove {self.dir}: {e}")


def status(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) * 1024
    return out


class Sampler(threading.Thread):
    """Peaks of RssAnon and RssFile of a process, every 50 ms."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.stop, self.peaks = pid, False, {"RssAnon": 0, "RssFile": 0, "VmRSS": 0}

    def run(self):
        while not self.stop:
            try:
                s = status(self.pid)
            except OSError:
                return
            for k in self.peaks:
                self.peaks[k] = max(self.peaks[k], s.get(k, 0))
            time.sleep(0.05)


def write_npy(path, n, d, chunk_rows=50_000):
    """A spiked (n, d) float64 array, written chunk by chunk (rows of norm below 1)."""
    rng = np.random.default_rng(1)
    scale = np.full(d, 0.3)
    scale[:10] = 3.0 / (1.0 + np.arange(10))
    scale /= np.sqrt(d)
    out = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(n, d))
    for start in range(0, n, chunk_rows):
        stop = min(n, start + chunk_rows)
        out[start:stop] = (rng.random((stop - start, d)) - 0.5) * scale
        out.flush()
    del out


def gib(x):
    return f"{x / (1 << 30):.2f} GiB" if x is not None else "?"


def main():
    ap = bench_parser(1_000_000)
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--cap", default="4G")
    ap.add_argument("--dir", default="target/ooc-bench")
    ap.add_argument("--algorithms", default="noisy_power", help="comma-separated, run in order")
    ap.add_argument("--drop-cache", action="store_true",
                    help="with PRIVPCA_STORAGE_URL set (datasets in an object store): remove the "
                         "uploaded copy from the service's cache, so the first job fetches it from "
                         "the store under the cap")
    args = ap.parse_args()
    limit = parse_size(args.cap)

    os.makedirs(args.dir, exist_ok=True)
    work = os.path.abspath(args.dir)
    npy = os.path.join(work, "x.npy")
    server, cap = None, None
    try:
        start = time.perf_counter()
        write_npy(npy, args.n, args.d)
        size = os.path.getsize(npy)
        print(f"wrote {npy}: {size / 1e9:.2f} GB in {time.perf_counter() - start:.1f} s")

        cap = Cap(limit)
        port = free_port()
        # The child joins the cgroup before it runs the service.
        server = start_service(
            args.bin,
            work,
            port,
            {"PRIVPCA_MAX_ROWS": str(max(args.n, 10_000_000))},
            preexec_fn=lambda: cap.add(os.getpid()),
        )
        sampler = Sampler(server.pid)
        sampler.start()
        client, dataset = public_dataset(port, "ooc")

        start = time.perf_counter()
        with open(npy, "rb") as f:
            client.call(
                "PUT",
                f"/v1/datasets/{dataset}/data",
                f,
                "application/x-npy",
                headers={"Content-Length": str(size)},
            )
        upload = time.perf_counter() - start
        after_upload = status(server.pid)
        print(f"upload through HTTP: {upload:.1f} s ({size / 1e6 / upload:.0f} MB/s); "
              f"server VmHWM {gib(after_upload['VmHWM'])}, cgroup peak {gib(cap.peak())}")
        os.remove(npy)  # only the stored copy from here on
        if args.drop_cache:
            cached = os.path.join(work, "data", "datasets")
            for name in os.listdir(cached):
                if name.startswith(dataset):
                    os.remove(os.path.join(cached, name))
            print("dropped the cached copy: the first job fetches the dataset from the object store")

        for algorithm in args.algorithms.split(","):
            start = time.perf_counter()
            view = finished_job(client, dataset, algorithm, 0.05)
            elapsed = time.perf_counter() - start
            ok = view["status"] == "succeeded"
            result = client.call("GET", f"/v1/jobs/{view['id']}/result") if ok else view.get("error")
            print(f"{algorithm} k=10 on {args.n} × {args.d}: {view['status']} in {elapsed:.1f} s "
                  f"(run_ms {view.get('run_ms')}), {(result['n_features'], result['n_components']) if ok else result}")
        end = status(server.pid)
        sampler.stop = True
        sampler.join()
        print(f"server peak RSS (VmHWM) {gib(end['VmHWM'])}; sampled peaks RssAnon "
              f"{gib(sampler.peaks['RssAnon'])}, RssFile {gib(sampler.peaks['RssFile'])}")
        print(f"cgroup cap {args.cap} (cgroup v{cap.version}); peak charge incl. page cache "
              f"{gib(cap.peak())}; limit hits: {cap.events()}")
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
        if cap is not None:
            cap.remove()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
