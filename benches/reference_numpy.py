#!/usr/bin/env python3
"""Same-machine reference for benches/linalg.rs: the same shapes in numpy (OpenBLAS/LAPACK).

Run with `python3 benches/reference_numpy.py` (needs `pip install numpy`). Best of 3, each run
repeating the operation for at least 0.2 s, like the Rust bench. Records are rows here (X is
n×d, C order), which is the memory layout of the Rust side's Xᵀ (d×n, column-major).
"""

import time

import numpy as np

MIN_RUN = 0.2


def best_of_3(op):
    start = time.perf_counter()
    op()
    once = max(time.perf_counter() - start, 1e-9)
    calls = max(1, int(np.ceil(MIN_RUN / once)))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            op()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def row(name, seconds):
    print(f"| {name:<38} | {seconds * 1e3:>10.2f} |")


def main():
    rng = np.random.default_rng(1)
    info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    print(f"numpy {np.__version__}, {info.get('name')} {info.get('version')}, best of 3\n")
    print("| kernel                                 | numpy (ms) |")
    print("|----------------------------------------|-----------:|")

    x = rng.standard_normal((20_000, 1000))
    row("Gram XᵀX, n=20000 d=1000", best_of_3(lambda: x.T @ x))

    a = x.T @ x
    v = rng.standard_normal((1000, 20))
    row("A·V formed A, d=1000 p=20", best_of_3(lambda: a @ v))
    row("Xᵀ(X·V) unformed, n=20000 d=1000 p=20", best_of_3(lambda: x.T @ (x @ v)))
    del x

    y = rng.standard_normal((1000, 20))
    row("thin QR Q, 1000×20", best_of_3(lambda: np.linalg.qr(y, mode="reduced")[0]))

    for d in (500, 1500):
        g = rng.standard_normal((d, d))
        s = (g + g.T) / 2
        row(f"eigh d={d}", best_of_3(lambda: np.linalg.eigh(s)))

    y = rng.standard_normal((500, 500))
    row("thin SVD 500×500", best_of_3(lambda: np.linalg.svd(y, full_matrices=False)))


if __name__ == "__main__":
    main()
