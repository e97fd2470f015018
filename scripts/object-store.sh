#!/usr/bin/env bash
# Starts a throwaway S3 object store (Garage) for the object-store-backed tests and prints its
# settings as `export` lines.
#
#   eval "$(scripts/object-store.sh)"        # exports PRIVPCA_STORAGE_URL, AWS_ENDPOINT_URL,
#                                            # AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
#                                            # AWS_ALLOW_HTTP, PRIVPCA_S3_PID and PRIVPCA_S3_DIR
#   scripts/object-store.sh start DIR        # restarts the stopped or killed server of DIR on the
#                                            # same data and ports; prints the same exports
#   scripts/object-store.sh stop DIR         # stops the server of DIR and removes DIR
#
# One Garage node on loopback ports only (S3 API and RPC, from scripts/free-port.sh), its
# configuration, metadata (sqlite), data blocks, log and pid in a fresh temporary directory,
# a single-node layout, one bucket (`privpca`) and one access key allowed read, write and owner
# on it. Every run gets its own key prefix (s3://privpca/test-<random>). Only the export lines go
# to stdout; progress goes to stderr. The server outlives this script (like postgres.sh's).
#
# The garage binary: `garage` on PATH; else $PRIVPCA_GARAGE_BIN; else the cached build in
# ${PRIVPCA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/privpca}/garage-2.5.0/bin/garage; else
# that cache is filled with `cargo install` first (a long build: keep the cache between runs).
set -euo pipefail

GARAGE_VERSION=2.5.0
BUCKET=privpca
REGION=garage
here="$(cd "$(dirname "$0")" && pwd)"
# Garage reads these over its configuration file (the server and the CLI alike): a
# GARAGE_RPC_HOST, say, left in the caller's environment (deploy/compose.yaml has them exported)
# would send the set-up commands to another node.
unset GARAGE_CONFIG_FILE GARAGE_RPC_HOST GARAGE_RPC_SECRET GARAGE_RPC_SECRET_FILE \
    GARAGE_ADMIN_TOKEN GARAGE_ADMIN_TOKEN_FILE GARAGE_METRICS_TOKEN GARAGE_METRICS_TOKEN_FILE \
    GARAGE_ALLOW_WORLD_READABLE_SECRETS

log() { echo "object-store.sh: $*" >&2; }
die() { log "$*"; exit 1; }
hex() { od -An -vtx1 -N"$1" /dev/urandom | tr -d ' \n'; }

cache_root() {
    echo "${PRIVPCA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/privpca}/garage-$GARAGE_VERSION"
}

# Builds garage into the cache, with the build tree in a temporary directory removed afterwards.
build_garage() {
    local root
    root="$(cache_root)"
    command -v cargo >/dev/null || die "no garage binary found and no cargo to build one"
    mkdir -p "$root"
    (
        # Two runs at once (CI jobs sharing a cache) build once: the second waits for the first.
        if command -v flock >/dev/null; then
            exec 9>"$root/.build-lock"
            flock 9
        fi
        [[ -x "$root/bin/garage" ]] && exit 0
        target="$(mktemp -d "${TMPDIR:-/tmp}/privpca-garage-build.XXXXXX")"
        trap 'rm -rf "$target"' EXIT
        log "building garage $GARAGE_VERSION into $root (this takes a long while; the result is cached)"
        CARGO_TARGET_DIR="$target" CARGO_PROFILE_RELEASE_LTO=false \
            CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_DEBUG=0 \
            CARGO_PROFILE_RELEASE_OPT_LEVEL=2 \
            cargo install garage --version "$GARAGE_VERSION" --locked --no-default-features \
            --features bundled-libs,sqlite --root "$root" >&2
        log "built $root/bin/garage"
    )
    [[ -x "$root/bin/garage" ]] || die "building garage failed"
}

find_garage() {
    local cached
    cached="$(cache_root)/bin/garage"
    if command -v garage >/dev/null; then
        command -v garage
    elif [[ -n "${PRIVPCA_GARAGE_BIN:-}" ]]; then
        [[ -x "$PRIVPCA_GARAGE_BIN" ]] || die "PRIVPCA_GARAGE_BIN=$PRIVPCA_GARAGE_BIN is not executable"
        echo "$PRIVPCA_GARAGE_BIN"
    elif [[ -x "$cached" ]]; then
        echo "$cached"
    else
        build_garage
        echo "$cached"
    fi
}

# "STATE STARTTIME" of process $1 from /proc/$1/stat (fields 3 and 22; the name in field 2 is
# skipped whole, it could hold spaces).
proc_state() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    # shellcheck disable=SC2086
    set -- $stat
    echo "$1 ${20}"
}

# The pid of DIR's server if it is running: the pid file's process, started when the pid file
# says (so not another process that got the pid later), and not yet exited (a killed server
# whose parent does not reap it lingers as a zombie, with its ports already closed).
running_pid() {
    local dir="$1" pid state start
    [[ -s "$dir/garage.pid" && -s "$dir/garage.start" ]] || return 1
    pid="$(cat "$dir/garage.pid")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    read -r state start < <(proc_state "$pid") || return 1
    [[ "$state" != Z && "$start" == "$(cat "$dir/garage.start")" ]] || return 1
    echo "$pid"
}

garage_cli() { "$GARAGE" -c "$dir/garage.toml" "$@"; }

# Starts the server of $dir in the background, detached from this script (own session, no
# terminal, output to garage.log), and records its pid.
spawn_server() {
    echo "==== $(date -u +%FT%TZ) object-store.sh: starting garage" >>"$dir/garage.log"
    # setsid execs directly (same pid) since this background child is no process group leader.
    RUST_LOG=garage=info setsid nohup "$GARAGE" -c "$dir/garage.toml" server \
        </dev/null >>"$dir/garage.log" 2>&1 &
    echo $! >"$dir/garage.pid"
    # A process keeps its start time across exec: this is the server's already.
    proc_state $! | cut -d' ' -f2 >"$dir/garage.start" || true
}

fail_start() {
    log "$1; the end of its log ($dir/garage.log):"
    tail -n 200 "$dir/garage.log" >&2 || true
    local pid
    if pid="$(running_pid "$dir")"; then kill -9 "$pid" 2>/dev/null || true; fi
    if [[ "${2:-}" == cleanup ]]; then rm -rf "$dir"; fi
    exit 1
}

# Waits (up to 60 s) until `cmd...` succeeds while the server stays alive.
wait_for() {
    local what="$1" cleanup="$2"
    shift 2
    for _ in $(seq 1 300); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        running_pid "$dir" >/dev/null || fail_start "garage exited while waiting for $what" "$cleanup"
        sleep 0.2
    done
    fail_start "timed out waiting for $what" "$cleanup"
}

# SHA-256 of the empty payload. Garage refuses a signed request without x-amz-content-sha256,
# which curl before 8.x does not send by itself.
EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

# A signed HEAD on the bucket: 200 once the S3 API serves the bucket with the key.
bucket_answers() {
    local code
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -I \
        -H "x-amz-content-sha256: $EMPTY_SHA256" \
        --aws-sigv4 "aws:amz:$REGION:s3" --user "$key_id:$secret_key" \
        "http://127.0.0.1:$s3_port/$BUCKET")" || return 1
    [[ "$code" == 200 ]]
}

print_exports() {
    printf 'export %s=%q\n' \
        PRIVPCA_STORAGE_URL "s3://$BUCKET/$prefix" \
        AWS_ENDPOINT_URL "http://127.0.0.1:$s3_port" \
        AWS_ACCESS_KEY_ID "$key_id" \
        AWS_SECRET_ACCESS_KEY "$secret_key" \
        AWS_REGION "$REGION" \
        AWS_ALLOW_HTTP true \
        PRIVPCA_S3_PID "$1" \
        PRIVPCA_S3_DIR "$dir"
}

# Resolves DIR to an absolute path of an existing store directory, and loads its state.
load_dir() {
    [[ -d "$1" ]] || die "$1: no such directory"
    dir="$(cd "$1" && pwd)"
    [[ -f "$dir/garage.toml" && -f "$dir/state" ]] || die "$dir: not a directory made by object-store.sh"
    # shellcheck source=/dev/null
    source "$dir/state"
}

case "${1:-}" in
stop)
    [[ -n "${2:-}" ]] || die "usage: object-store.sh stop DIR"
    [[ -e "$2" ]] || exit 0
    load_dir "$2"
    if pid="$(running_pid "$dir")"; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            running_pid "$dir" >/dev/null || break
            sleep 0.1
        done
        if pid="$(running_pid "$dir")"; then
            log "garage (pid $pid) ignored SIGTERM for 10 s: killing it"
            kill -KILL "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do
                running_pid "$dir" >/dev/null || break
                sleep 0.1
            done
        fi
    fi
    rm -rf "$dir"
    exit 0
    ;;
start)
    [[ -n "${2:-}" ]] || die "usage: object-store.sh start DIR"
    load_dir "$2"
    if pid="$(running_pid "$dir")"; then
        log "garage is already running in $dir (pid $pid)"
    else
        if [[ -x "${garage_bin:-}" ]]; then GARAGE="$garage_bin"; else GARAGE="$(find_garage)"; fi
        spawn_server
        wait_for "the S3 API on port $s3_port" keep bucket_answers
        pid="$(running_pid "$dir")" || fail_start "garage exited after starting" keep
        log "garage restarted in $dir (pid $pid, S3 API on 127.0.0.1:$s3_port)"
    fi
    print_exports "$pid"
    exit 0
    ;;
"") ;;
*) die "usage: object-store.sh [start DIR | stop DIR]" ;;
esac

GARAGE="$(find_garage)"
log "using $GARAGE ($("$GARAGE" --version 2>/dev/null | head -n 1))"

dir="$(mktemp -d "${TMPDIR:-/tmp}/privpca-s3.XXXXXX")"
chmod 700 "$dir"
mkdir "$dir/meta" "$dir/data"
# Interrupted before the exports are printed, nobody could stop the server: do it here.
trap 'trap - INT TERM; fail_start "interrupted" cleanup' INT TERM

# Distinct free loopback ports (each is bound and released by free-port.sh; two picks can
# coincide, so retry).
s3_port="$("$here/free-port.sh")"
rpc_port="$("$here/free-port.sh")"
while [[ "$rpc_port" == "$s3_port" ]]; do rpc_port="$("$here/free-port.sh")"; done

key_id="GK$(hex 12)"
secret_key="$(hex 32)"
prefix="test-$(hex 6)"

# Everything a later `start DIR` needs goes into DIR: the configuration (ports included, so a
# restart binds the same ones) and this state file.
(
    umask 077
    cat >"$dir/garage.toml" <<EOF
# scripts/object-store.sh: a throwaway single-node Garage on loopback.
metadata_dir = "$dir/meta"
data_dir = "$dir/data"
db_engine = "sqlite"
replication_factor = 1
# Throughput over disk space: blocks are stored as they come.
compression_level = "none"
# Large datasets: fewer, larger blocks (as deploy/garage.toml).
block_size = "8M"
metadata_fsync = false
data_fsync = false

rpc_bind_addr = "127.0.0.1:$rpc_port"
rpc_public_addr = "127.0.0.1:$rpc_port"
rpc_secret = "$(hex 32)"

[s3_api]
s3_region = "$REGION"
api_bind_addr = "127.0.0.1:$s3_port"
EOF
    cat >"$dir/state" <<EOF
s3_port=$s3_port
rpc_port=$rpc_port
key_id=$key_id
secret_key=$secret_key
prefix=$prefix
garage_bin=$(printf '%q' "$GARAGE")
EOF
)

spawn_server
wait_for "garage's RPC on port $rpc_port" cleanup garage_cli status

node_id="$(garage_cli node id -q 2>/dev/null | head -n 1)" || true
node_id="${node_id%%@*}"
[[ "$node_id" =~ ^[0-9a-f]{16,}$ ]] || fail_start "could not read the node id (got '$node_id')" cleanup
{
    garage_cli layout assign -z dc1 -c 1G "$node_id" &&
        garage_cli layout apply --version 1 &&
        garage_cli bucket create "$BUCKET" &&
        garage_cli key import --yes -n privpca "$key_id" "$secret_key" &&
        garage_cli bucket allow --read --write --owner "$BUCKET" --key "$key_id"
} >>"$dir/garage-setup.log" 2>&1 || {
    cat "$dir/garage-setup.log" >&2
    fail_start "setting up the layout, bucket and key failed" cleanup
}
wait_for "the S3 API on port $s3_port" cleanup bucket_answers

pid="$(running_pid "$dir")" || fail_start "garage exited after starting" cleanup
trap - INT TERM
log "garage running in $dir (pid $pid, S3 API on 127.0.0.1:$s3_port, bucket $BUCKET)"
print_exports "$pid"
