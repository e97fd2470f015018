#!/usr/bin/env bash
# The contract check: the committed openapi/openapi.json against a live `privpca serve`.
#  1. openapi-python-client (pinned) generates a Python SDK from the committed document; every
#     operation must be generated, and a walk-through runs through the generated functions
#     (create a dataset, upload .npy, submit a job, poll it, fetch the basis).
#  2. schemathesis (pinned) runs every check but `use_after_free` against the live server with a
#     tenant key, and must report no failure. `use_after_free` is left out because a deleted
#     dataset's ledger stays readable by design (GET /v1/datasets/{id}/ledger after DELETE is 200).
# Needs python3 through pyenv with 3.12 (schemathesis needs Python >= 3.12) and PyPI access.
# Usage: scripts/contract-check.sh   (CONTRACT_MAX_EXAMPLES sets schemathesis' examples per operation)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
# Where cargo puts what it builds: CARGO_TARGET_DIR if set (relative to the repository, as
# cargo reads it here), else target/; absolute, since the steps below run in other directories.
target=$(realpath -m -- "${CARGO_TARGET_DIR:-target}")
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== contract: build"
cargo build --locked -q
bin="$target/debug/privpca"

echo "== contract: Python tools (pinned in tests/contract/requirements.txt)"
venv="${CONTRACT_VENV:-$target/contract-venv}"
if [ ! -x "$venv/bin/python" ]; then
  PYENV_VERSION="${PYENV_VERSION:-3.12.1}" python3 -m venv "$venv"
fi
"$venv/bin/python" -c 'import sys; assert sys.version_info >= (3, 12), "schemathesis needs Python >= 3.12"'
"$venv/bin/pip" install -q --disable-pip-version-check -r tests/contract/requirements.txt

echo "== contract: start privpca serve"
port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
admin="contract-admin-$RANDOM$RANDOM"
# Rate limits off: schemathesis sends hundreds of submissions, and a 429 for most of them would
# hide the checks of everything behind the limiter (429 itself is documented and unit-tested).
PRIVPCA_JOB_RATE_PER_MINUTE=0 PRIVPCA_UPLOAD_RATE_PER_MINUTE=0 PRIVPCA_LOG_FORMAT=json "$bin" serve --bind "127.0.0.1:$port" --data-dir "$work/data" \
  --database-url "sqlite://$work/data/privpca.db" --admin-key "$admin" > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  if curl -sf "$base/readyz" > /dev/null; then break; fi
  sleep 0.1
done
curl -sf "$base/readyz" > /dev/null || { cat "$work/server.log"; echo "server did not start"; exit 1; }
key=$(curl -sf -X POST "$base/v1/tenants" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  -d '{"name": "contract"}' | "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["api_key"])')

echo "== contract: generate the Python SDK"
( cd "$work" && PATH="$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate --path "$repo/openapi/openapi.json" \
    --output-path sdk --meta none 2>&1 ) | tee "$work/generate.log"
if grep -Eqi 'warning|unsupported|could not|error' "$work/generate.log"; then
  echo "the generator skipped or warned about part of the contract"; exit 1
fi
"$venv/bin/python" tests/contract/generated_endpoints.py "$repo/openapi/openapi.json" "$work/sdk"

echo "== contract: walk-through with the generated SDK"
PYTHONPATH="$work" "$venv/bin/python" tests/contract/walkthrough.py "$base" "$key"

echo "== contract: schemathesis"
( cd "$work" && "$venv/bin/schemathesis" --config-file "$repo/schemathesis.toml" run "$repo/openapi/openapi.json" --url "$base" \
    -H "Authorization: Bearer $key" \
    --checks all --exclude-checks use_after_free \
    --max-examples "${CONTRACT_MAX_EXAMPLES:-40}" --seed 1 \
    --phases examples,coverage,fuzzing,stateful --workers 2 --no-color )
echo "== contract: ok"
