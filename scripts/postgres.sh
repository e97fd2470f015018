#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the PostgreSQL-backed tests and prints its URL.
#
#   eval "$(scripts/postgres.sh)"     # exports PRIVPCA_TEST_POSTGRES_URL and PRIVPCA_PG_DIR
#   scripts/postgres.sh stop DIR      # stops the cluster started in DIR and removes DIR
#
# Run as root on a fresh Debian machine: installs Debian's server packages if the server
# binaries are missing, then initdb's a cluster as user `postgres` in a temporary directory,
# listening on a random loopback port only, trust authentication (loopback, throwaway data).
set -euo pipefail

find_bindir() {
    local d
    for d in /usr/lib/postgresql/*/bin; do
        if [[ -x "$d/initdb" && -x "$d/postgres" && -x "$d/pg_ctl" ]]; then
            echo "$d"
        fi
    done | sort -V | tail -n 1
}

if [[ "${1:-}" == "stop" ]]; then
    dir="${2:?usage: postgres.sh stop DIR}"
    bindir="$(find_bindir)"
    runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    exit 0
fi

bindir="$(find_bindir)"
if [[ -z "$bindir" ]]; then
    echo "postgres.sh: installing PostgreSQL from Debian's packages" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    bindir="$(find_bindir)"
fi
[[ -n "$bindir" ]] || { echo "postgres.sh: no PostgreSQL server binaries found" >&2; exit 1; }
id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres

dir="$(mktemp -d /tmp/privpca-pg.XXXXXX)"
chown postgres "$dir"
chmod 700 "$dir"
runuser -u postgres -- "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 >/dev/null

# A free loopback port (bound and released; the window for a race is small).
port="$(scripts/free-port.sh)"
# The settings go into the cluster's configuration, not onto pg_ctl's command line, so that a
# later plain `pg_ctl -D "$dir/data" -l "$dir/log" -w start` (the outage test restarts the
# cluster) brings it back identically, on the same port.
cat >>"$dir/data/postgresql.conf" <<EOF

# scripts/postgres.sh
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 300
fsync = off
# Every test creates its own database, which PostgreSQL 15 copies through the WAL: keep the WAL
# small so that a few hundred of them do not fill the disk.
max_wal_size = 128MB
min_wal_size = 32MB
checkpoint_timeout = 30s
EOF
runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null

url="postgres://postgres@127.0.0.1:$port/postgres"
for _ in $(seq 1 50); do
    if "$bindir/pg_isready" -h 127.0.0.1 -p "$port" -q; then break; fi
    sleep 0.2
done
echo "export PRIVPCA_TEST_POSTGRES_URL=$url"
echo "export PRIVPCA_PG_DIR=$dir"
