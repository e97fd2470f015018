#!/usr/bin/env bash
# The README's curl walk-through, verbatim (tests/readme.rs checks that every command line
# below appears in README.md; scripts/walkthrough-check.sh runs it and checks that it prints
# the sample output README.md shows). Needs a running service, curl and jq.
set -euo pipefail
BASE="${BASE:-http://127.0.0.1:8080}"
ADMIN="${ADMIN:-change-me}"
cd "$(mktemp -d)"

# 1. The admin creates a tenant; its API key is shown once.
KEY=$(curl -s -X POST "$BASE/v1/tenants" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d '{"name": "demo"}' | jq -r .api_key)

# 2. The data owner creates a dataset: one row per person, rows clipped to L2 norm 1, budget (ε=1, δ=1e-6).
DS=$(curl -s -X POST "$BASE/v1/datasets" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"name": "survey", "kind": "records", "relation": "replace_one", "row_norm_bound": 1.0, "budget": {"epsilon": 1.0, "delta": 1e-6}}' | jq -r .id)

# 3. Upload the data (CSV here; JSON rows and .npy work too).
awk 'BEGIN { srand(7); for (i = 0; i < 5000; i++) { t = 2 * rand() - 1; printf "%.4f,%.4f,%.4f,%.4f,%.4f\n", t, 0.8 * t, -0.5 * t, 0.1 * rand(), 0.1 * rand() } }' > survey.csv
curl -s -X PUT "$BASE/v1/datasets/$DS/data" -H "Authorization: Bearer $KEY" -H 'Content-Type: text/csv' --data-binary @survey.csv | jq '{status, n_samples, n_features, budget: .budget.total}'

# 4. The analyst submits a private PCA job that spends ρ = 0.005 of the budget.
JOB=$(curl -s -X POST "$BASE/v1/jobs" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "{\"dataset_id\": \"$DS\", \"algorithm\": \"noisy_power\", \"params\": {\"k\": 2}, \"privacy\": {\"rho\": 0.005}}" | jq -r .id)

# 5. Watch it run.
until curl -s "$BASE/v1/jobs/$JOB" -H "Authorization: Bearer $KEY" | jq -e '.status | test("succeeded|failed|cancelled")' > /dev/null; do sleep 0.2; done
curl -s "$BASE/v1/jobs/$JOB" -H "Authorization: Bearer $KEY" | jq '{status, progress, cost, run_ms}'

# 6. Fetch the orthonormal basis: JSON (k columns of d numbers) or .npy.
curl -s "$BASE/v1/jobs/$JOB/result" -H "Authorization: Bearer $KEY" | jq '{n_features, n_components, basis}'
curl -s "$BASE/v1/jobs/$JOB/result" -H "Authorization: Bearer $KEY" -H 'Accept: application/x-npy' -o basis.npy

# 7. The ledger shows the charge; the budget went down.
curl -s "$BASE/v1/datasets/$DS/ledger" -H "Authorization: Bearer $KEY" | jq '{entries: [.entries[] | {entry, algorithm, rho}], remaining: .budget.remaining}'

# 8. A job that would overspend is refused with 409 and a problem document.
curl -s -X POST "$BASE/v1/jobs" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "{\"dataset_id\": \"$DS\", \"algorithm\": \"noisy_power\", \"params\": {\"k\": 2}, \"privacy\": {\"rho\": 0.05}}" | jq
