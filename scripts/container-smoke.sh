#!/usr/bin/env bash
# Without a Docker engine: build and stage the container's root filesystem with the same
# script the Dockerfile runs, start the staged binary with the container's environment, check
# its health the way the container's HEALTHCHECK does, run the README walk-through against it
# (checking that it prints what README.md shows),
# and stop it with SIGTERM as `docker stop` would.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
PROFILE="${PROFILE:-dev}" STAGE="$work/root" scripts/build.sh
port=$((20000 + RANDOM % 20000))
export PRIVPCA_BIND="127.0.0.1:$port" PRIVPCA_DATABASE_URL="sqlite://$work/root/data/privpca.db" \
       PRIVPCA_DATA_DIR="$work/root/data" PRIVPCA_LOG_FORMAT=json PRIVPCA_ADMIN_KEY=change-me \
       PRIVPCA_HEALTHCHECK_ADDR="127.0.0.1:$port"
"$work/root/usr/local/bin/privpca" serve > "$work/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  "$work/root/usr/local/bin/privpca" healthcheck 2>/dev/null && break
  sleep 0.1
done
"$work/root/usr/local/bin/privpca" healthcheck
BASE="http://127.0.0.1:$port" ADMIN=change-me scripts/walkthrough-check.sh > "$work/walkthrough.out"
grep -q '"status": "succeeded"' "$work/walkthrough.out"
grep -q 'urn:privpca:problem:over-budget' "$work/walkthrough.out"
test -s "$work/root/data/privpca.db"
kill -TERM $pid
wait $pid
trap - EXIT
grep -q '"shutting down"' "$work/server.log" || { cat "$work/server.log"; exit 1; }
echo "container smoke test: ok (walk-through output in $work/walkthrough.out)"
