#!/usr/bin/env bash
# Runs the README's "Per-site studies" section (scripts/per-site-walkthrough.sh) as a user would
# in a fresh shell: against a service started here on a free loopback port (not the default
# 8080) with a fresh data dir, BASE pointing at it, and the sites run by PRIVPCA. Fails unless
# every site exits 0 and the study's status is "succeeded". Builds nothing: PRIVPCA (default
# ${CARGO_TARGET_DIR:-target}/debug/privpca, which `cargo test` builds) must exist.
# Needs curl, jq and awk.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath -m -- "${PRIVPCA:-${CARGO_TARGET_DIR:-target}/debug/privpca}")
[ -x "$bin" ] || { echo "per-site-check: no binary at $bin (build it, or set PRIVPCA)" >&2; exit 1; }
echo "== the README's per-site studies section, against a fresh service"

work=$(mktemp -d)
admin="per-site-check-$RANDOM$RANDOM"
PRIVPCA_BIND=127.0.0.1:0 PRIVPCA_DATABASE_URL="sqlite://$work/privpca.db" PRIVPCA_DATA_DIR="$work/data" \
  PRIVPCA_ADMIN_KEY="$admin" PRIVPCA_LOG_FORMAT=json "$bin" serve > "$work/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT

# The server binds port 0; its log names the address it got.
addr=""
for _ in $(seq 1 100); do
  addr=$(grep -o '"address":"127\.0\.0\.1:[0-9]*"' "$work/server.log" | head -1 | cut -d'"' -f4 || true)
  [ -n "$addr" ] && break
  kill -0 $pid 2>/dev/null || { cat "$work/server.log"; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "per-site-check: the server did not report its address" >&2; cat "$work/server.log"; exit 1; }

start=$(date +%s)
# In its own process group, so that sites left running by a failure are stopped with it.
# TMPDIR: the script's own temporary directory (CSVs, study.json, site ledgers) goes under $work.
(unset KEY STUDY; BASE="http://$addr" ADMIN="$admin" PRIVPCA="$bin" TMPDIR="$work" \
  exec setsid timeout 300 scripts/per-site-walkthrough.sh > "$work/out.json" 2> "$work/sites.log") &
runner=$!
status=0
wait $runner || status=$?
kill -- -$runner 2>/dev/null || true
if [ $status != 0 ]; then
  echo "per-site-check: the per-site walk-through failed (exit $status); its output, the sites' and the server's logs:" >&2
  cat "$work/out.json" >&2; tail -n 40 "$work/sites.log" >&2; tail -n 40 "$work/server.log" >&2
  exit 1
fi
cat "$work/out.json"
grep -q '"status": "succeeded"' "$work/out.json" \
  || { echo "per-site-check: the study did not succeed" >&2; tail -n 40 "$work/sites.log" >&2; exit 1; }
echo "per-site-check: the study succeeded at http://$addr in $(( $(date +%s) - start )) s" >&2
