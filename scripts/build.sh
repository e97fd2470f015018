#!/usr/bin/env bash
# Builds the privpca binary and stages the container's root filesystem under $STAGE.
# The Dockerfile runs exactly this script (with PROFILE=release); CI runs it too (with the
# dev profile, to reuse the test build) and then starts the staged binary as the container
# would, so the container's build steps are exercised without a Docker engine.
set -euo pipefail
PROFILE="${PROFILE:-release}"
STAGE="${STAGE:-/out}"
cd "$(dirname "$0")/.."
cargo build --locked --profile "$PROFILE" --bin privpca
dir="$PROFILE"; [ "$PROFILE" = dev ] && dir=debug
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$STAGE/usr/local/bin" "$STAGE/data"
install -m 0755 "$target/$dir/privpca" "$STAGE/usr/local/bin/privpca"
"$STAGE/usr/local/bin/privpca" --version
