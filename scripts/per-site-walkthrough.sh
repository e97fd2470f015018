#!/usr/bin/env bash
# The README's "Per-site studies" walk-through, verbatim: tests/readme.rs checks that every line
# from "# 1." on appears in README.md, and scripts/per-site-check.sh (run by CI) runs it against
# a fresh service. Needs a running service (BASE, ADMIN as for walkthrough.sh), the privpca
# binary (PRIVPCA; a relative path is taken from the current directory), curl, jq and awk.
# Exits non-zero unless all three sites exit 0, which they do only when the study succeeds.
set -euo pipefail
if [ -n "${PRIVPCA:-}" ]; then PRIVPCA="$(realpath -m -- "$PRIVPCA")"; fi

# 1. Where the service is, and the binary the sites run (`cargo build --release` builds it; so does `cargo run --release` above).
BASE="${BASE:-http://127.0.0.1:8080}"
ADMIN="${ADMIN:-change-me}"
PRIVPCA="${PRIVPCA:-$PWD/target/release/privpca}"
cd "$(mktemp -d)"

# 2. Each site's records: synthetic data with 5 columns, 1500 rows for north, 1000 for south, 500 for east.
awk 'BEGIN { srand(11); for (i = 0; i < 3000; i++) { t = 2 * rand() - 1; f = (i < 1500) ? "north.csv" : (i < 2500) ? "south.csv" : "east.csv"; printf "%.4f,%.4f,%.4f,%.4f,%.4f\n", t, 0.8 * t, -0.5 * t, 0.1 * rand(), 0.1 * rand() > f } }'

# 3. The admin creates a tenant; the tenant creates the study and gets one token per site (kept in study.json).
KEY=$(curl -s -X POST "$BASE/v1/tenants" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d '{"name": "consortium"}' | jq -r .api_key)
curl -s -X POST "$BASE/v1/studies" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"name": "three hospitals", "algorithm": "federated_power", "n_features": 5, "relation": "replace_one", "row_norm_bound": 1.0, "params": {"k": 2, "iterations": 10}, "privacy": {"rho": 0.5}, "threshold": 2, "sites": [{"name": "north"}, {"name": "south"}, {"name": "east"}]}' > study.json
jq '{id, status, sites: [.sites[].name]}' study.json
STUDY=$(jq -r .id study.json)

# 4. Each site runs `privpca site` on its own CSV, with its own ledger and budget (here all three in the background of this shell).
"$PRIVPCA" site --server "$BASE" --token "$(jq -r '.sites[0].token' study.json)" --data north.csv --budget-rho 1 --ledger north-ledger.db & NORTH=$!
"$PRIVPCA" site --server "$BASE" --token "$(jq -r '.sites[1].token' study.json)" --data south.csv --budget-rho 1 --ledger south-ledger.db & SOUTH=$!
"$PRIVPCA" site --server "$BASE" --token "$(jq -r '.sites[2].token' study.json)" --data east.csv --budget-rho 1 --ledger east-ledger.db & EAST=$!
wait $NORTH && wait $SOUTH && wait $EAST && echo "all three sites exited 0: the study succeeded" || { echo "a site failed: see its messages above" >&2; false; }

# 5. The study's status and its result.
curl -s "$BASE/v1/studies/$STUDY" -H "Authorization: Bearer $KEY" | jq '{status, progress, sites: [.sites[] | {name, status}]}'
curl -s "$BASE/v1/studies/$STUDY/result" -H "Authorization: Bearer $KEY" | jq '{n_features, n_components, survivors, achieved_multiplier, basis}'
