#!/usr/bin/env python3
"""Measure two peer libraries' DP-PCA on the real datasets unpacked by scripts/real-data.sh.

Run with the experiments venv's python (scripts/real-data.sh --peers does this):

    python experiments/peers.py [--data-dir data/real] [--out experiments/results/peers.json]
                                [--reps 20] [--datasets wine,iris] [--no-opendp-class]

For each dataset, k in {2, 3} (k < d), epsilon in {0.5, 1, 2}, delta = 1e-5 (recorded; both
libraries are pure epsilon-DP and use no delta) and R repetitions, it runs

  diffprivlib  diffprivlib.models.PCA(n_components=k, epsilon=eps, data_norm=beta,
               centered=True, random_state=seed, accountant=BudgetAccountant()).fit(X)
               seeds 0..R-1
  opendp       opendp.extras.sklearn.decomposition.make_private_pca(
                   array2_domain(norm=beta, p=2, origin=zeros(d), size=n, num_columns=d, T=float),
                   symmetric_distance(), unit_epsilon=eps, norm=beta, num_components=k)
               i.e. OpenDP's PCA told that the data are centred (known origin 0: no private mean);
               the measurement's own privacy map is checked: map(2) (one replaced row) == eps.
               Not seedable (OpenDP draws from its OS-seeded CSPRNG).
  opendp-sklearn-class
               opendp.sklearn.decomposition.PCA(epsilon=eps, row_norm=beta, n_samples=n,
                   n_features=d, n_components=k, n_changes=2).fit(X)
               the scikit-learn-style class; it cannot be told the data are centred, so it spends
               1/3 of the budget on a private mean. n_changes=2 makes its map(2) == eps (with the
               default n_changes=1 its own map gives 2*eps for one replaced row). Not seedable.

beta is the dataset's maximum row norm (from <name>.json), as declared by a user who knows the
largest row norm; no row is clipped.

Metric: captured-energy ratio tr(Q^T S Q) / sum_{i<=k} lambda_i(S), S = X^T X / n of the
preprocessed matrix, Q an orthonormal basis of the k returned components (QR if the returned
components deviate from orthonormality by more than 1e-9; recorded in notes).
"""

import argparse
import json
import os
import platform
import sys
import time
import traceback
import warnings
from datetime import datetime, timezone
from importlib.metadata import version

import numpy as np

KS = [2, 3]
EPSILONS = [0.5, 1.0, 2.0]
DELTA = 1e-5
ORTHO_TOL = 1e-9
OPENDP_FEATURES = ["contrib", "idealized-numerics", "honest-but-curious"]


def load(data_dir, name):
    with open(os.path.join(data_dir, f"{name}.json"), encoding="utf-8") as f:
        meta = json.load(f)
    with open(os.path.join(data_dir, meta["csv"]), encoding="utf-8") as f:
        x = np.array([line.split(",") for line in f.read().splitlines()], dtype=np.float64)
    if x.shape != (meta["n"], meta["d"]):
        raise ValueError(f"{name}: CSV shape {x.shape} != json ({meta['n']}, {meta['d']})")
    beta = float(np.linalg.norm(x, axis=1).max())
    if beta != meta["max_row_norm"]:
        raise ValueError(f"{name}: max row norm {beta!r} != json {meta['max_row_norm']!r}")
    return meta, x


def captured_energy(components, sigma, top_k_sum, k):
    """components: (k, d) rows. Returns (ratio, orthonormality deviation, qr_applied)."""
    q = np.asarray(components, dtype=np.float64)[:k].T
    if q.shape != (sigma.shape[0], k) or not np.all(np.isfinite(q)):
        raise ValueError(f"bad components: shape {q.shape}")
    dev = float(np.abs(q.T @ q - np.eye(k)).max())
    qr = dev > ORTHO_TOL
    if qr:
        q, _ = np.linalg.qr(q)
    return float(np.trace(q.T @ sigma @ q) / top_k_sum), dev, qr


# ---------------------------------------------------------------- library runners
# Each runner: prepare(meta, x, k, eps) -> (run(rep) -> components (k, d), info dict)


def diffprivlib_runner(meta, x, k, eps):
    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.models import PCA

    beta = meta["max_row_norm"]

    def run(seed):
        model = PCA(
            n_components=k,
            epsilon=eps,
            data_norm=beta,
            centered=True,
            random_state=seed,
            accountant=BudgetAccountant(),
        )
        model.fit(x.copy())
        return model.components_

    call = (
        f"diffprivlib.models.PCA(n_components={k}, epsilon={eps}, data_norm={beta!r}, centered=True, "
        "random_state=seed, accountant=BudgetAccountant()).fit(X)"
    )
    return run, {
        "call": call,
        "seeded": True,
        "claimed_epsilon_replace_one": eps,
        "privacy": "pure eps-DP (BudgetAccountant spends (eps, 0)); eps split evenly over k+1 parts: "
        "Laplace on all d eigenvalues + k Bingham-mechanism eigenvector draws",
    }


def opendp_runner(meta, x, k, eps):
    import opendp.prelude as dp
    from opendp.extras.sklearn.decomposition import make_private_pca

    n, d, beta = meta["n"], meta["d"], meta["max_row_norm"]
    domain = dp.numpy.array2_domain(norm=beta, p=2, origin=np.zeros(d), size=n, num_columns=d, T=float)
    meas = make_private_pca(domain, dp.symmetric_distance(), unit_epsilon=eps, norm=beta, num_components=k)
    eps_replace = float(meas.map(2))
    eps_d1 = float(meas.map(1))
    if not (eps_replace <= eps and eps_replace > eps * (1 - 1e-9)):
        raise RuntimeError(f"opendp map(2) = {eps_replace} != eps = {eps}")
    if str(meas.output_measure) != "MaxDivergence":
        raise RuntimeError(f"unexpected output measure {meas.output_measure}")

    def run(_seed):
        return meas(x).Vt

    call = (
        f"make_private_pca(dp.numpy.array2_domain(norm={beta!r}, p=2, origin=np.zeros({d}), size={n}, "
        f"num_columns={d}, T=float), dp.symmetric_distance(), unit_epsilon={eps}, norm={beta!r}, "
        f"num_components={k})(X).Vt"
    )
    return run, {
        "call": call,
        "seeded": False,
        "claimed_epsilon_replace_one": eps_replace,
        "privacy": f"pure eps-DP (output measure {meas.output_measure}); map(2)={eps_replace!r} "
        f"(one replaced row = symmetric distance 2), map(1)={eps_d1!r}; eps/2 on Laplace eigenvalues, "
        f"eps/2 split evenly over {min(k, d - 1)} eigenvector draws; known origin 0, no private mean",
    }


def opendp_class_runner(meta, x, k, eps):
    import opendp.prelude as dp

    n, d, beta = meta["n"], meta["d"], meta["max_row_norm"]
    kwargs = dict(epsilon=eps, row_norm=beta, n_samples=n, n_features=d, n_components=k, n_changes=2)
    meas = dp.sklearn.decomposition.PCA(**kwargs).measurement()
    eps_replace = float(meas.map(2))
    eps_default = float(dp.sklearn.decomposition.PCA(**{**kwargs, "n_changes": 1}).measurement().map(2))
    if not (eps_replace <= eps and eps_replace > eps * (1 - 1e-9)):
        raise RuntimeError(f"opendp class map(2) = {eps_replace} != eps = {eps}")

    def run(_seed):
        model = dp.sklearn.decomposition.PCA(**kwargs)
        model.fit(x)
        return model.components_

    call = (
        f"dp.sklearn.decomposition.PCA(epsilon={eps}, row_norm={beta!r}, n_samples={n}, n_features={d}, "
        f"n_components={k}, n_changes=2).fit(X)"
    )
    return run, {
        "call": call,
        "seeded": False,
        "claimed_epsilon_replace_one": eps_replace,
        "privacy": f"pure eps-DP ({meas.output_measure}); map(2)={eps_replace!r}; with the default "
        f"n_changes=1 map(2) would be {eps_default!r}; eps/3 on a private mean (Laplace, rows clamped to "
        "L1 norm beta), eps/3 on eigenvalues, eps/3 over eigenvectors; the class has no way to declare "
        "centred data",
    }


LIBRARIES = {
    "diffprivlib": (diffprivlib_runner, "diffprivlib"),
    "opendp": (opendp_runner, "opendp"),
    "opendp-sklearn-class": (opendp_class_runner, "opendp"),
}


def fmt_cell(row):
    if row is None:
        return "—"
    if row["mean"] is None:
        return f"failed ({row['failures']}/{row['reps']})"
    s = f"{row['mean']:.3f} ± {row['std']:.3f}"
    if row["failures"]:
        s += f" ({row['failures']} failed)"
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap.add_argument("--data-dir", default=os.path.join(root, "data", "real"))
    ap.add_argument("--out", default=os.path.join(here, "results", "peers.json"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--datasets", default=None, help="comma-separated subset (default: all in index.json)")
    ap.add_argument("--no-opendp-class", action="store_true", help="skip the opendp sklearn-class variant")
    args = ap.parse_args()

    t_start = time.perf_counter()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")

    import opendp.prelude as dp

    dp.enable_features(*OPENDP_FEATURES)

    with open(os.path.join(args.data_dir, "index.json"), encoding="utf-8") as f:
        names = json.load(f)["datasets"]
    if args.datasets:
        wanted = args.datasets.split(",")
        names = [n for n in names if n in wanted]
    libs = [l for l in LIBRARIES if not (args.no_opendp_class and l == "opendp-sklearn-class")]
    versions = {"diffprivlib": version("diffprivlib"), "opendp": version("opendp")}

    rows, baselines = [], {}
    for name in names:
        meta, x = load(args.data_dir, name)
        n, d = x.shape
        sigma = x.T @ x / n
        eig_all, vec_all = np.linalg.eigh(sigma)
        eig = eig_all[::-1]
        for k in KS:
            if k >= d:
                continue
            top = float(eig[:k].sum())
            # self-check of the metric: the exact top-k eigenvectors capture ratio 1
            exact, _, _ = captured_energy(vec_all[:, ::-1][:, :k].T, sigma, top, k)
            if abs(exact - 1) > 1e-9:
                raise RuntimeError(f"{name} k={k}: metric self-check gave {exact}")
            # expected captured energy of a uniformly random k-dimensional subspace
            baselines[f"{name}/k={k}"] = float(k / d * np.trace(sigma) / top)
            for eps in EPSILONS:
                for lib in libs:
                    runner, pkg = LIBRARIES[lib]
                    t0 = time.perf_counter()
                    values, failures, errors, devs, qrs, warns = [], 0, [], [], 0, set()
                    info = {}
                    try:
                        run, info = runner(meta, x, k, eps)
                    except Exception as e:  # construction failed: every rep fails
                        run = None
                        errors.append(f"setup: {type(e).__name__}: {e}")
                        failures = args.reps
                    if run is not None:
                        for seed in range(args.reps):
                            try:
                                with warnings.catch_warnings(record=True) as caught:
                                    warnings.simplefilter("always")
                                    comps = run(seed)
                                for w in caught:
                                    warns.add(f"{w.category.__name__}: {str(w.message).splitlines()[0]}")
                                ratio, dev, qr = captured_energy(comps, sigma, top, k)
                                values.append(ratio)
                                devs.append(dev)
                                qrs += qr
                            except Exception as e:
                                failures += 1
                                if len(errors) < 3:
                                    errors.append(f"seed {seed}: {type(e).__name__}: {e}")
                                    traceback.print_exc(file=sys.stderr)
                    secs = time.perf_counter() - t0
                    v = np.array(values)
                    notes = []
                    if info.get("privacy"):
                        notes.append(info["privacy"])
                    notes.append(f"delta={DELTA} not used (pure eps-DP)")
                    notes.append(
                        f"seeds 0..{args.reps - 1}" if info.get("seeded", False) else "not seedable (OS CSPRNG)"
                    )
                    if devs:
                        notes.append(f"max |Q^T Q - I| = {max(devs):.1e}; QR applied in {qrs}/{len(devs)} reps")
                    notes.extend(sorted(warns))
                    notes.extend(errors)
                    rows.append({
                        "dataset": name,
                        "n": n,
                        "d": d,
                        "k": k,
                        "epsilon": eps,
                        "delta": DELTA,
                        "library": lib,
                        "version": versions[pkg],
                        "reps": args.reps,
                        "mean": float(v.mean()) if len(v) else None,
                        "std": float(v.std(ddof=1)) if len(v) > 1 else None,
                        "min": float(v.min()) if len(v) else None,
                        "max": float(v.max()) if len(v) else None,
                        "failures": failures,
                        "values": [float(a) for a in v],
                        "row_norm_bound": meta["max_row_norm"],
                        "claimed_epsilon_replace_one": info.get("claimed_epsilon_replace_one"),
                        "seconds": round(secs, 3),
                        "call": info.get("call"),
                        "notes": "; ".join(notes),
                    })
                    print(
                        f"{name:14s} k={k} eps={eps:<4} {lib:21s} {fmt_cell(rows[-1]):>24s}  {secs:6.1f}s",
                        file=sys.stderr,
                        flush=True,
                    )

    wall = time.perf_counter() - t_start
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=2)
        f.write("\n")
    meta_out = {
        "started_utc": started,
        "wall_time_s": round(wall, 1),
        "reps": args.reps,
        "ks": KS,
        "epsilons": EPSILONS,
        "delta": DELTA,
        "datasets": names,
        "libraries": libs,
        "versions": {
            **versions,
            "scikit-learn": version("scikit-learn"),
            "numpy": version("numpy"),
            "scipy": version("scipy"),
            "randomgen": version("randomgen"),
        },
        "opendp_features_enabled": OPENDP_FEATURES,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "random_subspace_expected_captured_energy": baselines,
        "metric": "tr(Q^T S Q) / sum of top-k eigenvalues of S, S = X^T X / n of the preprocessed data",
        "std": "sample standard deviation (ddof=1) over reps",
    }
    meta_path = os.path.join(os.path.dirname(os.path.abspath(args.out)), "peers_meta.json")
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta_out, f, indent=2)
        f.write("\n")

    # markdown table: mean ± std of the captured-energy ratio
    by = {(r["dataset"], r["k"], r["epsilon"], r["library"]): r for r in rows}
    head = ["dataset", "n", "d", "k", "ε"] + libs + ["random k-subspace"]
    print(f"Captured-energy ratio, mean ± std over {args.reps} reps (δ = {DELTA} unused: both pure ε-DP; "
          "ε is per replaced row)\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for name in names:
        for k in KS:
            for eps in EPSILONS:
                cells = [by.get((name, k, eps, lib)) for lib in libs]
                if all(c is None for c in cells):
                    continue
                r0 = next(c for c in cells if c is not None)
                print("| " + " | ".join(
                    [name, str(r0["n"]), str(r0["d"]), str(k), f"{eps:g}"]
                    + [fmt_cell(c) for c in cells]
                    + [f"{baselines[f'{name}/k={k}']:.3f}"]
                ) + " |")
    print(f"\nversions: diffprivlib {versions['diffprivlib']}, opendp {versions['opendp']}, "
          f"scikit-learn {version('scikit-learn')}, numpy {version('numpy')}")
    print(f"wall time: {wall:.1f} s; wrote {args.out} and {meta_path}")


if __name__ == "__main__":
    main()
