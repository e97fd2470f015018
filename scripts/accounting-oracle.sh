#!/usr/bin/env bash
# The independent accounting oracle (docs/design/privacy.md §2.6): random sequences of
# Gaussian, Laplace, exponential-mechanism and approximate (ε, δ) charges are admitted by the
# ledger's own rule (examples/admission_oracle.rs calls privpca::privacy::admission::admit)
# and every admitted sequence is composed by Google's dp-accounting PLD accountant; its ε at
# the dataset's δ must stay within the dataset's ε. Runs standalone from the repository root:
#
#   bash scripts/accounting-oracle.sh
#
# It creates a Python venv under target/ (python3 ≥ 3.9 with venv and pip, and PyPI reachable)
# with a pinned dp-accounting, builds the example and runs scripts/accounting_oracle.py.
set -euo pipefail

DP_ACCOUNTING_VERSION="0.6.0"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
target="${CARGO_TARGET_DIR:-$repo/target}"
venv="$target/accounting-oracle-venv"

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import dp_accounting" 2>/dev/null; then
  mkdir -p "$target"
  if ! python3 -m venv "$venv"; then
    echo "accounting-oracle: could not create a Python venv at $venv (is python3-venv installed?)" >&2
    exit 2
  fi
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check "dp-accounting==$DP_ACCOUNTING_VERSION"; then
    echo "accounting-oracle: pip could not install dp-accounting==$DP_ACCOUNTING_VERSION into $venv (is PyPI reachable?)" >&2
    exit 2
  fi
fi

cargo build --quiet --example admission_oracle
"$venv/bin/python" scripts/accounting_oracle.py "$target/debug/examples/admission_oracle"
