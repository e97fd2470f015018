#!/usr/bin/env python3
"""Unpack real public datasets from the CSV files that ship inside the scikit-learn wheel.

Run by scripts/real-data.sh with the experiments venv's python:

    python experiments/unpack_data.py OUT_DIR

The files are read directly from the installed package directory
(<site-packages>/sklearn/datasets/data/); no sklearn loader function is called, so nothing
can be fetched from the network. For every dataset with n >= 150 rows it writes

    OUT_DIR/<name>.csv   the preprocessed numeric feature matrix: no header, no target column,
                         one row per line, comma separated, every value printed with Python's
                         repr (shortest string that round-trips to the same f64)
    OUT_DIR/<name>.json  metadata: shape, source, preprocessing, row-norm statistics

Preprocessing (public, applied identically for every method being compared): each column is
standardised to mean 0 and population variance 1 (x - mean) / std with std = sqrt(mean((x -
mean)^2)) (ddof = 0, so the diagonal of X^T X / n is 1 up to rounding); a constant
column (std == 0) is set to 0. The data are then centred (up to rounding), so no method needs
private centring.
"""

import gzip
import hashlib
import importlib.util
import json
import os
import sys

import numpy as np

MIN_ROWS = 150
QUANTILES = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]

PREPROCESSING = (
    "drop the target column; standardise each column to mean 0 and population variance 1, "
    "(x - mean) / std with std = sqrt(mean((x - mean)^2)) (ddof = 0), computed on the full "
    "data set and treated as public preprocessing; constant columns (std == 0) are set to 0. "
    "The result is centred (column means are 0 up to rounding, |mean| < 1e-14), so every method "
    "runs without private centring."
)

# name -> (file in sklearn/datasets/data, format, expected (n, d))
#   "sklearn_csv": first line "n_samples,n_features,<target names...>", then comma-separated rows,
#                  the target is the last column
#   "headerless_csv_gz_last_target": gzipped, comma separated, no header, target last column
#   "whitespace_gz": gzipped, whitespace separated, features only (the target is in another file)
DATASETS = {
    "iris": ("iris.csv", "sklearn_csv", (150, 4)),
    "wine": ("wine_data.csv", "sklearn_csv", (178, 13)),
    "breast_cancer": ("breast_cancer.csv", "sklearn_csv", (569, 30)),
    "digits": ("digits.csv.gz", "headerless_csv_gz_last_target", (1797, 64)),
    "diabetes": ("diabetes_data_raw.csv.gz", "whitespace_gz", (442, 10)),
}

# Present in the wheel but deliberately not used:
SKIPPED = {
    "linnerud_exercise.csv": "20 rows (< 150)",
    "linnerud_physiological.csv": "20 rows (< 150)",
    "diabetes_target.csv.gz": "target only",
    "boston_house_prices.csv": "scikit-learn removed load_boston in 1.2 over an ethical problem "
    "with the data (column B); the file is a leftover and is not used",
}


def sklearn_data_dir():
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("scikit-learn is not installed in this interpreter")
    return os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data")


def sklearn_version():
    from importlib.metadata import version

    return version("scikit-learn")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def read_raw(path, fmt):
    """Return the feature matrix (float64) as stored, without the target."""
    if fmt == "sklearn_csv":
        with open(path, encoding="utf-8") as f:
            header = f.readline().strip().split(",")
            n_declared, d_declared = int(header[0]), int(header[1])
            rows = [line.strip().split(",") for line in f if line.strip()]
        data = np.array(rows, dtype=np.float64)
        if data.shape != (n_declared, d_declared + 1):
            raise ValueError(f"{path}: header says {n_declared}x{d_declared}+target, got {data.shape}")
        return data[:, :-1]
    if fmt == "headerless_csv_gz_last_target":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [line.strip().split(",") for line in f if line.strip()]
        return np.array(rows, dtype=np.float64)[:, :-1]
    if fmt == "whitespace_gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [line.split() for line in f if line.strip()]
        return np.array(rows, dtype=np.float64)
    raise ValueError(fmt)


def standardise(x):
    mean = x.mean(axis=0)
    std = np.sqrt(((x - mean) ** 2).mean(axis=0))
    constant = std == 0
    z = np.zeros_like(x)
    z[:, ~constant] = (x[:, ~constant] - mean[~constant]) / std[~constant]
    return z, [int(j) for j in np.flatnonzero(constant)]


def write_csv(path, x):
    with open(path, "w", encoding="utf-8") as f:
        for row in x:
            f.write(",".join(repr(float(v)) for v in row))
            f.write("\n")


def read_back(path):
    with open(path, encoding="utf-8") as f:
        return np.array([line.split(",") for line in f.read().splitlines()], dtype=np.float64)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: unpack_data.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    data_dir = sklearn_data_dir()
    skl_version = sklearn_version()
    present = sorted(os.listdir(data_dir))
    print(f"scikit-learn {skl_version}: {data_dir}")
    print("  files: " + ", ".join(p for p in present if not p.startswith("__")))

    written = []
    for name, (fname, fmt, expected) in DATASETS.items():
        path = os.path.join(data_dir, fname)
        if not os.path.exists(path):
            print(f"  {name}: {fname} not in this wheel, skipped")
            continue
        raw = read_raw(path, fmt)
        if raw.shape != expected:
            raise ValueError(f"{name}: expected shape {expected}, got {raw.shape}")
        if not np.all(np.isfinite(raw)):
            raise ValueError(f"{name}: non-finite values")
        n, d = raw.shape
        if n < MIN_ROWS:
            print(f"  {name}: n = {n} < {MIN_ROWS}, skipped")
            continue
        x, constant_cols = standardise(raw)
        csv_path = os.path.join(out_dir, f"{name}.csv")
        write_csv(csv_path, x)
        # Statistics are computed on the values as parsed back from the CSV, i.e. on exactly the
        # f64 matrix every consumer (Python peers, Rust) will read.
        xb = read_back(csv_path)
        if xb.shape != (n, d) or not np.array_equal(xb, x):
            raise ValueError(f"{name}: CSV round trip is not exact")
        norms = np.linalg.norm(xb, axis=1)
        meta = {
            "name": name,
            "n": n,
            "d": d,
            "source": {
                "package": "scikit-learn",
                "version": skl_version,
                "file": f"sklearn/datasets/data/{fname}",
                "sha256": sha256(path),
                "format": fmt,
                "target_dropped": fmt != "whitespace_gz",
            },
            "csv": f"{name}.csv",
            "csv_format": "no header, comma separated, n lines of d values, Python repr of f64",
            "preprocessing": PREPROCESSING,
            "constant_columns_zeroed": constant_cols,
            "column_mean_abs_max": float(np.abs(xb.mean(axis=0)).max()),
            "max_row_norm": float(norms.max()),
            "median_row_norm": float(np.median(norms)),
            "row_norm_quantiles": {f"{q:.1f}": float(np.quantile(norms, q)) for q in QUANTILES},
            "row_norm_quantile_method": "numpy.quantile, method='linear'",
            "frobenius_norm_sq_over_n": float((norms ** 2).mean()),
        }
        with open(os.path.join(out_dir, f"{name}.json"), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2)
            f.write("\n")
        written.append(name)
        extra = f", {len(constant_cols)} constant columns zeroed" if constant_cols else ""
        print(f"  {name}: {n} x {d}, max row norm {norms.max():.4f}, median {np.median(norms):.4f}{extra}")
    for fname, why in SKIPPED.items():
        if fname in present:
            print(f"  (not used: {fname}: {why})")
    with open(os.path.join(out_dir, "index.json"), "w", encoding="utf-8") as f:
        json.dump({"datasets": written, "sklearn_version": skl_version, "not_used": SKIPPED}, f, indent=2)
        f.write("\n")
    print(f"wrote {len(written)} datasets to {out_dir}")


if __name__ == "__main__":
    main()
