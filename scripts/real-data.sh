#!/usr/bin/env bash
# Unpack real public datasets from the scikit-learn wheel and (with --peers) measure the DP-PCA of
# two peer libraries (OpenDP, IBM diffprivlib) on them. See experiments/README.md.
#
# usage: scripts/real-data.sh [--peers] [OUT_DIR]
#   OUT_DIR          default data/real (relative to the repository root; gitignored)
#   --peers          afterwards run experiments/peers.py on OUT_DIR
#                    (writes experiments/results/peers.json and peers_meta.json)
# environment:
#   PRIVPCA_VENV     venv directory (default target/experiments-venv, under the ignored target/)
#   PYTHON           interpreter used to create the venv (default python3; needs >= 3.10)
#   PEERS_REPS       repetitions for --peers (default 20)
#   PEERS_ARGS       extra arguments for peers.py, e.g. "--datasets wine,iris --no-opendp-class"
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

RUN_PEERS=0
OUT_DIR=""
for arg in "$@"; do
  case "$arg" in
    --peers) RUN_PEERS=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "unknown option: $arg" >&2; exit 2 ;;
    *)
      if [[ -n "$OUT_DIR" ]]; then echo "only one OUT_DIR" >&2; exit 2; fi
      OUT_DIR="$arg" ;;
  esac
done
OUT_DIR="${OUT_DIR:-data/real}"
VENV="${PRIVPCA_VENV:-target/experiments-venv}"
PYTHON="${PYTHON:-python3}"
REQS="experiments/requirements.txt"

# 1. venv with the exact pins (reinstalled only when requirements.txt changes)
stamp="$VENV/.requirements.sha256"
want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "== creating venv $VENV"
  "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' \
    || { echo "need Python >= 3.10 (set PYTHON=...)" >&2; exit 1; }
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$REQS"
  "$VENV/bin/python" -m pip check --disable-pip-version-check
  echo "$want" > "$stamp"
else
  echo "== venv $VENV is up to date"
fi
PY="$VENV/bin/python"

# 2. unpack the datasets that ship inside the installed scikit-learn wheel
echo "== unpacking datasets into $OUT_DIR"
"$PY" experiments/unpack_data.py "$OUT_DIR"

# 3. peers
if [[ "$RUN_PEERS" == 1 ]]; then
  echo "== running experiments/peers.py (reps ${PEERS_REPS:-20})"
  # shellcheck disable=SC2086
  "$PY" experiments/peers.py --data-dir "$OUT_DIR" --reps "${PEERS_REPS:-20}" ${PEERS_ARGS:-}
fi
