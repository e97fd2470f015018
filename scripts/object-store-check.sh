#!/usr/bin/env bash
# Self-test of scripts/object-store.sh: start a throwaway Garage, put an object and get it back
# (curl's own SigV4 signing), check that a wrong secret is refused, kill -9 the server, restart it
# with `object-store.sh start DIR` on the same data and ports, get the object again, and stop it.
#
#   scripts/object-store-check.sh      # prints "object store check: ok", exits non-zero otherwise
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "object store check: FAILED: $*" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
exports="$(scripts/object-store.sh)" || fail "scripts/object-store.sh failed"
eval "$exports"
trap 'scripts/object-store.sh stop "$PRIVPCA_S3_DIR" || true; rm -rf "$work"' EXIT

for v in PRIVPCA_STORAGE_URL AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION \
         AWS_ALLOW_HTTP PRIVPCA_S3_PID PRIVPCA_S3_DIR; do
    [[ -n "${!v:-}" ]] || fail "$v was not exported"
done
[[ "$PRIVPCA_STORAGE_URL" =~ ^s3://([a-z0-9.-]+)/(.+)$ ]] || fail "bad PRIVPCA_STORAGE_URL $PRIVPCA_STORAGE_URL"
bucket="${BASH_REMATCH[1]}"
prefix="${BASH_REMATCH[2]}"
[[ -d "$PRIVPCA_S3_DIR" ]] || fail "PRIVPCA_S3_DIR $PRIVPCA_S3_DIR is not a directory"
kill -0 "$PRIVPCA_S3_PID" 2>/dev/null || fail "PRIVPCA_S3_PID $PRIVPCA_S3_PID is not running"
url="$AWS_ENDPOINT_URL/$bucket/$prefix/check.bin"

# Garage refuses a signed request without x-amz-content-sha256 (the payload's SHA-256, which it
# checks), and curl before 8.x does not send one by itself: give it, curl signs it.
empty_sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
s3() {
    local sha256="$1"
    shift
    curl -sS --fail --max-time 60 --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
        --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H "x-amz-content-sha256: $sha256" "$@"
}

# Several of Garage's 1 MiB blocks, so that a restart has to find all of them again.
head -c 3000017 /dev/urandom >"$work/put.bin"
put_sha256="$(sha256sum "$work/put.bin" | cut -d' ' -f1)"
s3 "$put_sha256" -X PUT --data-binary @"$work/put.bin" -o /dev/null "$url" || fail "PUT $url"
s3 "$empty_sha256" -o "$work/get.bin" "$url" || fail "GET $url"
cmp -s "$work/put.bin" "$work/get.bin" || fail "GET returned other bytes than were PUT"

code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
    --user "$AWS_ACCESS_KEY_ID:wrong$AWS_SECRET_ACCESS_KEY" -H "x-amz-content-sha256: $empty_sha256" \
    "$url")"
[[ "$code" == 403 ]] || fail "a wrong secret got HTTP $code, not 403"

# Kill the server outright, as a crash would, then bring it back on the same directory.
old_pid="$PRIVPCA_S3_PID"
old_url="$PRIVPCA_STORAGE_URL"
old_endpoint="$AWS_ENDPOINT_URL"
kill -9 "$old_pid"
for _ in $(seq 1 100); do
    state="$(awk '{print $3}' "/proc/$old_pid/stat" 2>/dev/null || echo gone)"
    [[ "$state" == gone || "$state" == Z ]] && break
    sleep 0.1
done
if curl -s -o /dev/null --max-time 2 "$AWS_ENDPOINT_URL/"; then
    fail "the S3 port still answers after kill -9"
fi

exports="$(scripts/object-store.sh start "$PRIVPCA_S3_DIR")" || fail "object-store.sh start failed"
eval "$exports"
[[ "$PRIVPCA_S3_PID" != "$old_pid" ]] || fail "start reported the killed pid $old_pid"
kill -0 "$PRIVPCA_S3_PID" 2>/dev/null || fail "restarted PRIVPCA_S3_PID $PRIVPCA_S3_PID is not running"
[[ "$PRIVPCA_STORAGE_URL" == "$old_url" ]] || fail "start changed PRIVPCA_STORAGE_URL"
[[ "$AWS_ENDPOINT_URL" == "$old_endpoint" ]] || fail "start changed AWS_ENDPOINT_URL"
rm -f "$work/get.bin"
s3 "$empty_sha256" -o "$work/get.bin" "$url" || fail "GET $url after the restart"
cmp -s "$work/put.bin" "$work/get.bin" || fail "the object changed across kill -9 and restart"

# `start` on a running server starts no second one.
pid_before="$PRIVPCA_S3_PID"
exports="$(scripts/object-store.sh start "$PRIVPCA_S3_DIR")" || fail "object-store.sh start failed"
eval "$exports"
[[ "$PRIVPCA_S3_PID" == "$pid_before" ]] || fail "start on a running server started another"

dir="$PRIVPCA_S3_DIR"
pid="$PRIVPCA_S3_PID"
scripts/object-store.sh stop "$dir"
trap 'rm -rf "$work"' EXIT
[[ ! -e "$dir" ]] || fail "stop left $dir behind"
state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)"
[[ "$state" == gone || "$state" == Z ]] || fail "stop left garage (pid $pid) running"

echo "object store check: ok"
