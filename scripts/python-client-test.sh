#!/usr/bin/env bash
# Tests of the Python client (clients/python) against live `privpca serve`s.
#  1. A venv under ${CARGO_TARGET_DIR:-target}/python-client-venv gets the pinned packages of
#     clients/python/requirements-test.txt and `./clients/python[sklearn,pandas,examples]`; the
#     package must be `mypy --strict` clean.
#  2. Two services start on free ports, each with a fresh data dir: one with the rate limits
#     off, one with a job rate of 30 a minute in bursts of 1 (a second submission gets 429
#     with Retry-After: 2) for the retry test.
#  3. pytest runs clients/python/tests against them, then the issue's judged scenario
#     (tests/test_judged.py) runs again in a fresh venv made with exactly
#     `pip install ./clients/python numpy scikit-learn` (plus pytest), so it needs no extra.
# Needs python3 >= 3.10 and PyPI access (or a pip cache).
# Usage: scripts/python-client-test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
target="${CARGO_TARGET_DIR:-$repo/target}"
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "== python client: build"
cargo build --locked -q
bin="$target/debug/privpca"

echo "== python client: venv (pinned in clients/python/requirements-test.txt)"
venv="$target/python-client-venv"
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
"$venv/bin/python" -c 'import sys; assert sys.version_info >= (3, 10), "the client needs Python >= 3.10"'
pins="$repo/clients/python/requirements-test.txt"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$pins"
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "./clients/python[sklearn,pandas,examples]"
"$venv/bin/pip" install -q --disable-pip-version-check -c "$pins" "./clients/python[sklearn,pandas,examples]"

echo "== python client: mypy --strict"
( cd clients/python && "$venv/bin/mypy" --strict src/privpca )

admin="py-admin-$RANDOM$RANDOM"
# start NAME [VAR=value...]: serves on a free port with a fresh data dir; sets $url.
start() {
  local name=$1; shift
  local port
  port=$(scripts/free-port.sh)
  mkdir -p "$work/$name"
  env "$@" "$bin" serve --bind "127.0.0.1:$port" --data-dir "$work/$name" \
    --database-url "sqlite://$work/$name/privpca.db" --admin-key "$admin" > "$work/$name.log" 2>&1 &
  pids+=($!)
  url="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    if curl -sf "$url/readyz" > /dev/null; then return 0; fi
    sleep 0.1
  done
  cat "$work/$name.log"; echo "$name did not start"; exit 1
}

echo "== python client: start privpca serve (twice)"
start main PRIVPCA_JOB_RATE_PER_MINUTE=0 PRIVPCA_UPLOAD_RATE_PER_MINUTE=0
main_url=$url
start limited PRIVPCA_JOB_RATE_PER_MINUTE=30 PRIVPCA_JOB_BURST=1 PRIVPCA_UPLOAD_RATE_PER_MINUTE=0
limited_url=$url
# PRIVPCA_BIN: for the tests that run a study's sites (`privpca site`).
export PRIVPCA_BASE_URL=$main_url PRIVPCA_LIMITED_BASE_URL=$limited_url PRIVPCA_ADMIN_KEY=$admin PRIVPCA_BIN=$bin

echo "== python client: pytest"
"$venv/bin/python" -m pytest -q -p no:cacheprovider clients/python/tests "$@"

echo "== python client: the judged scenario in a fresh venv (pip install ./clients/python numpy scikit-learn)"
fresh="$work/fresh-venv"
python3 -m venv "$fresh"
"$fresh/bin/pip" install -q --disable-pip-version-check -c "$pins" ./clients/python numpy scikit-learn pytest
"$fresh/bin/python" -c 'import importlib.util; assert importlib.util.find_spec("pandas") is None, "pandas came along"'
"$fresh/bin/python" -m pytest -q -p no:cacheprovider clients/python/tests/test_judged.py
echo "== python client: ok"
