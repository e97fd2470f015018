#!/usr/bin/env python3
"""Load test of replicas on one PostgreSQL: status reads and job submissions per second.

Starts `--replicas` (default two) `privpca serve` processes on a fresh database of the
PostgreSQL server named by `--database-url` (default: $PRIVPCA_TEST_POSTGRES_URL, as
`scripts/postgres.sh` prints it), with one admin key and one data directory, per-tenant rate
limits off. Creates a tenant and a small public dataset (n × d `.npy`), runs one job, then,
for `--seconds` each:

0. the client's ceiling: the same client reads GET /healthz (no database, no key check);
1. status reads: the client, on keep-alive connections spread over the replicas, reads
   GET /v1/jobs/{id} as fast as it can;
2. submissions: `--clients` Python threads POST /v1/jobs (noisy_power k=2 on the public
   dataset, so no budget runs out) and count what was admitted (202) and what was refused (by
   status code). `--no-submissions` skips this phase.

The client of phases 0 and 1 is `--clients` Python threads, or with `--loadgen PATH` the Rust
load generator (`cargo build --release --example http_load`; one thread, `--connections`
connections), which costs the shared cores far less per request. Phases 0 and 1 run
`--rounds` times in turn, so each status-read figure has a /healthz figure of the same moment.

Prints throughput and latency percentiles per phase, and at the end how many of the admitted
jobs succeeded (the replicas' workers drain the queue while the test runs).

The client runs on the same machine as the replicas and PostgreSQL, so the figures are a
lower bound of what the replicas serve on their own cores.

Usage: eval "$(scripts/postgres.sh)"; python3 scripts/bench_replicas.py [--bin target/release/privpca]
       [--replicas 2] [--seconds 10] [--clients 8] [--n 2000] [--d 20]
       [--loadgen target/release/examples/http_load] [--connections 16] [--rounds 1]
       [--key-cache-ms MS] [--no-submissions]
       scripts/postgres.sh stop "$PRIVPCA_PG_DIR"
"""

import argparse
import glob
import http.client
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ADMIN = "bench-replicas-admin-key"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Connection:
    """One keep-alive HTTP connection with a bearer key."""

    def __init__(self, port, key):
        self.port, self.key = port, key
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method, path, body=None, content_type="application/json"):
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": content_type}
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        try:
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
            data = resp.read()
        except (http.client.HTTPException, OSError) as e:
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            # A keep-alive connection the server closed while it sat idle: a GET is safe to
            # send again, once, on the new connection.
            if method == "GET" and isinstance(e, http.client.RemoteDisconnected):
                return self.call(method, path, body, content_type)
            raise
        return resp.status, (json.loads(data) if data else None)


def checked(status_body, want):
    status, body = status_body
    if status != want:
        raise RuntimeError(f"expected {want}, got {status}: {body}")
    return body


def npy(n, d):
    """A C-order little-endian f64 .npy of rows with norm < 1 (deterministic)."""
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (n, d)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    values = [((i * 7919 + j * 104729) % 1000) / 1000.0 / (2 * d) for i in range(n) for j in range(d)]
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack(f"<{n * d}d", *values)


def fresh_database(url):
    psql = sorted(glob.glob("/usr/lib/postgresql/*/bin/psql")) or [shutil.which("psql")]
    if not psql or not psql[-1]:
        sys.exit("bench_replicas: psql not found")
    name = f"privpca_bench_{uuid.uuid4().hex[:12]}"
    subprocess.run([psql[-1], url, "-qc", f"CREATE DATABASE {name}"], check=True)
    return url.rsplit("/", 1)[0] + "/" + name


def start_replica(binary, name, database_url, data_dir, log, key_cache_ms=None):
    port = free_port()
    env = dict(os.environ)
    env.update(
        PRIVPCA_BIND=f"127.0.0.1:{port}",
        PRIVPCA_DATABASE_URL=database_url,
        PRIVPCA_DATA_DIR=data_dir,
        PRIVPCA_ADMIN_KEY=ADMIN,
        PRIVPCA_REPLICA_ID=name,
        PRIVPCA_JOB_RATE_PER_MINUTE="0",
        PRIVPCA_UPLOAD_RATE_PER_MINUTE="0",
        PRIVPCA_LOG_FORMAT="json",
        RUST_LOG="warn",
    )
    if key_cache_ms is not None:
        env["PRIVPCA_API_KEY_CACHE_MS"] = str(key_cache_ms)
    proc = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        if proc.poll() is not None:
            sys.exit(f"bench_replicas: replica {name} exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"bench_replicas: replica {name} did not become ready")


def hammer(ports, key, clients, seconds, request):
    """Runs `request(conn, i)` in `clients` threads for `seconds`; returns (latencies, codes)."""
    latencies, codes, lock = [], {}, threading.Lock()
    deadline = time.perf_counter() + seconds

    def worker(i):
        conn = Connection(ports[i % len(ports)], key)
        mine, my_codes, j = [], {}, 0
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            try:
                status = request(conn, j)
            except (http.client.HTTPException, OSError):
                status = "error"
            mine.append(time.perf_counter() - t)
            my_codes[status] = my_codes.get(status, 0) + 1
            j += 1
        with lock:
            latencies.extend(mine)
            for k, v in my_codes.items():
                codes[k] = codes.get(k, 0) + v

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, codes


def loadgen(binary, ports, key, path, connections, seconds):
    """Runs the Rust load generator (examples/http_load.rs) on `path`; returns its JSON report."""
    cmd = [binary, "--path", path, "--key", key, "--connections", str(connections), "--seconds", str(seconds)]
    for port in ports:
        cmd += ["--addr", f"127.0.0.1:{port}"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def read_phase(args, ports, key, name, path):
    """One read phase on `path` with the chosen client; prints it and returns answers 200 per second."""
    if args.loadgen:
        r = loadgen(args.loadgen, ports, key, path, args.connections, args.seconds)
        ok = r["codes"].get("200", 0) / r["seconds"]
        print(
            f"{name:<12} {ok:8.0f}/s  p50 {r['p50_ms']:6.1f} ms  p99 {r['p99_ms']:6.1f} ms  "
            f"answers {r['codes']}"
        )
        return ok
    lat, codes = hammer(ports, key, args.clients, args.seconds, lambda c, j: c.call("GET", path)[0])
    return report(name, lat, codes, args.seconds, {200})


def report(name, latencies, codes, seconds, counted):
    ok = sum(v for k, v in codes.items() if k in counted)
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0] * 99
    print(
        f"{name:<12} {ok / seconds:8.0f}/s  p50 {q[49] * 1e3:6.1f} ms  p99 {q[98] * 1e3:6.1f} ms  "
        f"answers {dict(sorted(codes.items(), key=str))}"
    )
    return ok / seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "privpca"))
    ap.add_argument("--database-url", default=os.environ.get("PRIVPCA_TEST_POSTGRES_URL"))
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--d", type=int, default=20)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--loadgen", help="the Rust load generator's binary (examples/http_load.rs) for phases 0 and 1")
    ap.add_argument("--connections", type=int, default=16, help="the load generator's connections")
    ap.add_argument("--rounds", type=int, default=1, help="times phases 0 and 1 run, in turn")
    ap.add_argument("--key-cache-ms", type=int, help="PRIVPCA_API_KEY_CACHE_MS for the replicas")
    ap.add_argument("--no-submissions", action="store_true", help="skip phase 2")
    args = ap.parse_args()
    if not args.database_url:
        sys.exit("bench_replicas: give --database-url or run eval \"$(scripts/postgres.sh)\" first")
    database_url = fresh_database(args.database_url)
    work = tempfile.mkdtemp(prefix="privpca-bench-replicas-")
    data_dir = os.path.join(work, "data")
    os.makedirs(data_dir)
    procs = []
    try:
        ports = []
        for name in "abcdefgh"[: args.replicas]:
            log = open(os.path.join(work, f"{name}.log"), "wb")
            proc, port = start_replica(args.bin, name, database_url, data_dir, log, args.key_cache_ms)
            procs.append(proc)
            ports.append(port)
        admin = Connection(ports[0], ADMIN)
        key = checked(admin.call("POST", "/v1/tenants", {"name": "bench"}), 201)["api_key"]
        a = Connection(ports[0], key)
        ds = checked(
            a.call(
                "POST",
                "/v1/datasets",
                {"name": "bench", "kind": "records", "relation": "replace_one", "row_norm_bound": 1.0, "public": True},
            ),
            201,
        )["id"]
        checked(a.call("PUT", f"/v1/datasets/{ds}/data", npy(args.n, args.d), "application/octet-stream"), 200)
        submission = {"dataset_id": ds, "algorithm": "noisy_power", "params": {"k": 2}}
        job = checked(a.call("POST", "/v1/jobs", submission), 202)["id"]
        while checked(a.call("GET", f"/v1/jobs/{job}"), 200)["status"] not in ("succeeded", "failed"):
            time.sleep(0.05)
        client = (
            f"load generator {args.loadgen}, {args.connections} connections"
            if args.loadgen
            else f"{args.clients} client threads"
        )
        print(
            f"{args.replicas} replica(s) on PostgreSQL, {client}, {args.seconds:.0f} s per phase, "
            f"{os.cpu_count()} cores shared by client, replicas and database; binary {args.bin}; "
            f"key cache {'default' if args.key_cache_ms is None else f'{args.key_cache_ms} ms'}; "
            f"load average {open('/proc/loadavg').read().split()[0]}"
        )
        for _ in range(args.rounds):
            # The client's own ceiling: an answer that touches neither the database nor the key.
            healthz = read_phase(args, ports, key, "/healthz", "/healthz")
            reads = read_phase(args, ports, key, "status reads", f"/v1/jobs/{job}")
            print(f"{'':<12} status reads / healthz = {reads / healthz:.2f}")
        if args.no_submissions:
            return
        admitted = []
        lock = threading.Lock()

        def submit(c, j):
            status, body = c.call("POST", "/v1/jobs", submission)
            if status == 202:
                with lock:
                    admitted.append(body["id"])
            return status

        lat, codes = hammer(ports, key, args.clients, args.seconds, submit)
        report("submissions", lat, codes, args.seconds, {202})
        drain_start = time.perf_counter()
        statuses = {}
        for jid in admitted:
            while True:
                s = checked(a.call("GET", f"/v1/jobs/{jid}"), 200)["status"]
                if s in ("succeeded", "failed", "cancelled"):
                    statuses[s] = statuses.get(s, 0) + 1
                    break
                time.sleep(0.02)
        print(
            f"admitted jobs: {len(admitted)}, final statuses {statuses}, "
            f"queue drained {time.perf_counter() - drain_start:.1f} s after the phase ended"
        )
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
