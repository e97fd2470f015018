#!/usr/bin/env bash
# Issue 39's judged scenario, end to end against real services: a witness saves a dataset's
# checkpoint; a past charge's rho is then edited directly in the database (past the schema's
# append-only trigger, as someone with the database file would); the service is restarted and
# one more job runs. Then either the service reports the dataset's log as tampered (409
# ledger-log-tampered), or the consistency proof from the saved checkpoint fails the
# independent verifier (scripts/receipt_verifier.py) - and it must never happen that both pass.
# A job's receipt is also checked with the independent verifier and with `privpca verify`,
# before the edit.
#
# Standalone (`scripts/ledger-tamper-check.sh`): one service on SQLite, the edit made in its
# database file with Python's sqlite3 module. Driven by scripts/gateway-test.sh: BASE (the
# gateway), ADMIN, and two commands, LEDGER_EDIT (runs the SQL statement it is given as $1 past
# the trigger) and RESTART (restarts every replica and waits until they are ready).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${PRIVPCA:-${CARGO_TARGET_DIR:-target}/debug/privpca}")"
verifier=scripts/receipt_verifier.py
work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "ledger tamper check: $*" >&2; [ -f "$work/server.log" ] && tail -n 20 "$work/server.log" >&2; exit 1; }

if [ -z "${BASE:-}" ]; then
  [ -x "$bin" ] || { cargo build --locked -q --bin privpca; }
  ADMIN="tamper-$RANDOM$RANDOM"
  db="$work/privpca.db"
  start() {
    PRIVPCA_BIND=127.0.0.1:${port:-0} PRIVPCA_DATABASE_URL="sqlite://$db" PRIVPCA_DATA_DIR="$work/data" \
      PRIVPCA_ADMIN_KEY="$ADMIN" PRIVPCA_LOG_FORMAT=json "$bin" serve >> "$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do
      addr=$(grep -o '"address":"127\.0\.0\.1:[0-9]*"' "$work/server.log" | tail -1 | cut -d'"' -f4 || true)
      if [ -n "$addr" ] && curl -sf "http://$addr/readyz" > /dev/null; then BASE="http://$addr"; port=${addr##*:}; return 0; fi
      sleep 0.1
    done
    fail "the service did not start"
  }
  stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; : > "$work/server.log"; }
  start
  LEDGER_EDIT="python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"DROP TRIGGER IF EXISTS ledger_no_update\"); c.execute(sys.argv[2]); c.commit()' '$db'"
  RESTART="stop; start"
fi
api() { curl -s "$@" -H "Authorization: Bearer $KEY"; }

KEY=$(curl -sf -X POST "$BASE/v1/tenants" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
  -d '{"name": "witnessed"}' | jq -r .api_key)
vkey=$(curl -sf "$BASE/v1/ledger-key" | jq -r .verifier_key)
[ -n "$vkey" ] || fail "no verifier key"
DS=$(api -X POST "$BASE/v1/datasets" -H 'Content-Type: application/json' -d '{"name": "witnessed", "kind": "records",
  "relation": "replace_one", "row_norm_bound": 1.0, "budget": {"rho": 1.0, "delta": 1e-6}}' | jq -r .id)
awk 'BEGIN { srand(3); for (r = 0; r < 300; r++) { t = 2 * rand() - 1; printf "%.4f,%.4f,%.4f\n", 0.5 * t, 0.4 * t, 0.1 * rand() } }' > "$work/data.csv"
api -X PUT "$BASE/v1/datasets/$DS/data" -H 'Content-Type: text/csv' --data-binary @"$work/data.csv" | jq -e '.status == "ready"' > /dev/null \
  || fail "upload"
run_job() {
  local job
  job=$(api -X POST "$BASE/v1/jobs" -H 'Content-Type: application/json' \
    -d "{\"dataset_id\": \"$DS\", \"algorithm\": \"noisy_power\", \"params\": {\"k\": 1}, \"privacy\": {\"rho\": $1}}" | jq -r .id)
  for _ in $(seq 1 300); do
    # A job view whose dataset's log is refused is a 409 problem document: no status to wait for.
    api "$BASE/v1/jobs/$job" | jq -e '((.type // "") | endswith("ledger-log-tampered")) or (.status | tostring | test("succeeded|failed|cancelled"))' \
      > /dev/null && { echo "$job"; return 0; }
    sleep 0.1
  done
  fail "job $job did not finish"
}
job=$(run_job 0.1)
run_job 0.1 > /dev/null

# A receipt verifies with the independent verifier and with privpca verify; one changed byte does not.
api "$BASE/v1/jobs/$job/result" | jq .receipt > "$work/receipt.json"
python3 "$verifier" receipt --key "$vkey" "$work/receipt.json" > /dev/null || fail "the independent verifier refused a receipt"
"$bin" verify --key "$vkey" "$work/receipt.json" > /dev/null || fail "privpca verify refused a receipt"
jq '.leaf |= (.[0:20] + (if .[20:21] == "A" then "B" else "A" end) + .[21:])' "$work/receipt.json" > "$work/forged.json"
if python3 "$verifier" receipt --key "$vkey" "$work/forged.json" 2> /dev/null; then fail "a forged leaf verified"; fi
if "$bin" verify --key "$vkey" "$work/forged.json" 2> /dev/null; then fail "privpca verify took a forged leaf"; fi

# The witness saves the checkpoint; an honest next job passes it; then the first charge's rho is
# edited; restart; one more job.
api "$BASE/v1/datasets/$DS/ledger/checkpoint" | jq -r .checkpoint > "$work/saved.txt"
run_job 0.1 > /dev/null
PRIVPCA_API_KEY="$KEY" "$bin" verify --key "$vkey" --checkpoint "$work/saved.txt" --server "$BASE" > /dev/null \
  || fail "the witness refused an honest log"
eval "$LEDGER_EDIT" "'UPDATE ledger SET rho_units = 1 WHERE id = (SELECT MIN(id) FROM ledger WHERE dataset_id = '\''$DS'\'')'" \
  || fail "editing the ledger"
eval "$RESTART"
run_job 0.1 > /dev/null || true

now=$(api -w '\n%{http_code}' "$BASE/v1/datasets/$DS/ledger/checkpoint")
code=$(tail -n 1 <<< "$now")
service_passes=yes
if [ "$code" = 409 ]; then
  head -n -1 <<< "$now" | jq -e '.type | endswith("ledger-log-tampered")' > /dev/null || fail "409 but not ledger-log-tampered: $now"
  service_passes=no
  echo "the service reports the dataset's log as tampered (409 ledger-log-tampered)"
fi
witness_passes=no
if [ "$service_passes" = yes ]; then
  head -n -1 <<< "$now" | jq -r .checkpoint > "$work/new.txt"
  old_size=$(sed -n 2p "$work/saved.txt"); new_size=$(sed -n 2p "$work/new.txt")
  api "$BASE/v1/datasets/$DS/ledger/consistency?from=$old_size&to=$new_size" > "$work/proof.json"
  if python3 "$verifier" consistency --key "$vkey" "$work/saved.txt" "$work/new.txt" "$work/proof.json" 2> /dev/null; then
    witness_passes=yes
  else
    echo "the witness's consistency proof fails the independent verifier"
  fi
fi
# privpca verify, as a witness with the saved checkpoint, must not pass either.
if PRIVPCA_API_KEY="$KEY" "$bin" verify --key "$vkey" --checkpoint "$work/saved.txt" --server "$BASE" 2> "$work/verify.err"; then
  [ "$service_passes" = no ] && fail "privpca verify passed a log the service reports as tampered"
else
  echo "privpca verify (witness): $(head -c 200 "$work/verify.err")"
fi
[ "$service_passes" = yes ] && [ "$witness_passes" = yes ] && fail "the edit went unnoticed: the service serves the log and the witness's proof verifies"
echo "ledger tamper check: ok (service passes: $service_passes, witness passes: $witness_passes)"
