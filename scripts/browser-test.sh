#!/usr/bin/env bash
# The /ui dashboard in a real headless Chromium: installs Debian's chromium if it is missing,
# starts the debug binary on a free loopback port with a temp data dir and admin key, and runs
# tests/browser/dashboard.test.mjs (playwright-core driving /usr/bin/chromium), which sets up
# a tenant, a dataset with data and finished jobs, and checks what the page shows against the
# API. The screenshot is left in the temp dir printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== dashboard in headless Chromium"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if [ ! -x /usr/bin/chromium ]; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi

cargo build --locked --bin privpca
bin="${CARGO_TARGET_DIR:-target}/debug/privpca"

(cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)

work=$(mktemp -d)
admin="browser-test-$RANDOM$RANDOM"
PRIVPCA_BIND=127.0.0.1:0 PRIVPCA_DATABASE_URL="sqlite://$work/privpca.db" PRIVPCA_DATA_DIR="$work/data" \
  PRIVPCA_ADMIN_KEY="$admin" PRIVPCA_WORKERS=1 PRIVPCA_LOG_FORMAT=json "$bin" serve > "$work/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$work/data" "$work"/privpca.db*' EXIT

# The server binds port 0; its log names the address it got.
addr=""
for _ in $(seq 1 100); do
  addr=$(grep -o '"address":"127\.0\.0\.1:[0-9]*"' "$work/server.log" | head -1 | cut -d'"' -f4 || true)
  [ -n "$addr" ] && break
  kill -0 $pid 2>/dev/null || { cat "$work/server.log"; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "the server did not report its address"; cat "$work/server.log"; exit 1; }

mkdir -p "$work/shots"
if ! BASE="http://$addr" ADMIN="$admin" BIN="$(realpath "$bin")" SHOT_DIR="$work/shots" node tests/browser/dashboard.test.mjs; then
  tail -n 40 "$work/server.log"
  exit 1
fi
kill -TERM $pid
wait $pid || true
