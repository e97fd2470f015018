#!/usr/bin/env bash
# The gateway test: deploy/nginx.conf in front of two replicas on PostgreSQL, as processes.
#
#  - nginx from Debian's packages (installed if missing) runs a copy of deploy/nginx.conf in
#    which only the two upstream `server privpca-a:8080 …;` / `server privpca-b:8080 …;` lines
#    and the `listen` line are pointed at loopback ports: the routing is the file's own.
#  - PostgreSQL from scripts/postgres.sh and the object store from scripts/object-store.sh (a
#    real Garage server); two `privpca serve` replicas (the debug binary) share the database and
#    the store, each with its own empty data directory (its cache) and no shared filesystem, as
#    in deploy/compose.yaml.
#  - Through the gateway: the README walk-through (scripts/walkthrough-check.sh: a tenant, an
#    upload, a job, checked against the output README.md shows), then a 3-site
#    `federated_power` study whose sites know only the gateway URL. The replica coordinating it
#    (`studies.coordinator`, read with psql) is SIGKILLed mid-study, so the other must take it
#    over; the study must succeed with every site `done`, charged once, coordinated at the end by
#    the survivor, and every site process must exit 0.
#
# Usage: scripts/gateway-test.sh   (as root on a fresh Debian machine, like scripts/postgres.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
echo "== gateway: nginx + PostgreSQL + two replicas"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx > /dev/null
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

cargo build --locked -q --bin privpca
bin="$(realpath "${CARGO_TARGET_DIR:-target}/debug/privpca")"

work=$(mktemp -d)
chmod 755 "$work"
pids=()
pg_dir=""
s3_dir=""
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  if [ -f "$work/nginx/nginx.pid" ]; then kill "$(cat "$work/nginx/nginx.pid")" 2>/dev/null || true; fi
  if [ -n "$pg_dir" ]; then scripts/postgres.sh stop "$pg_dir"; fi
  if [ -n "$s3_dir" ]; then scripts/object-store.sh stop "$s3_dir" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
logs() {
  for f in "$work"/*.log "$work"/nginx/error.log; do
    [ -f "$f" ] && { echo "---- $f"; tail -n 30 "$f"; }
  done
  return 0
}
fail() { echo "gateway test: $*"; logs; exit 1; }
free_port() { scripts/free-port.sh; }

eval "$(scripts/postgres.sh)"
pg_dir="$PRIVPCA_PG_DIR"
db_url="$PRIVPCA_TEST_POSTGRES_URL"
unset PRIVPCA_TEST_POSTGRES_URL PRIVPCA_PG_DIR
eval "$(scripts/object-store.sh)"
s3_dir="$PRIVPCA_S3_DIR"
# psql from the server's packages (scripts/postgres.sh installs them), else any on the PATH.
psql_bin=$(command -v psql || true)
for candidate in /usr/lib/postgresql/*/bin/psql; do
  if [ -x "$candidate" ]; then psql_bin="$candidate"; fi
done
[ -n "$psql_bin" ] || fail "no psql to read the study's coordinator with"

admin="gateway-admin-$RANDOM$RANDOM"
port_a=$(free_port)
port_b=$(free_port)
port_gw=$(free_port)
mkdir -p "$work/data-a" "$work/data-b"

# One replica: its id and port; the same database, object store and admin key, its own data
# directory (the replica's cache of the store).
start_replica() {
  PRIVPCA_REPLICA_ID="privpca-$1" PRIVPCA_LOG_FORMAT=json PRIVPCA_JOB_LEASE_SECS=5 \
    "$bin" serve --bind "127.0.0.1:$2" --database-url "$db_url" --data-dir "$work/data-$1" \
    --admin-key "$admin" >> "$work/replica-$1.log" 2>&1 &
  echo $!
}
wait_ready() {
  for _ in $(seq 1 200); do
    if curl -sf "$1/readyz" > /dev/null; then return 0; fi
    sleep 0.1
  done
  fail "$1 did not become ready"
}
# One ledger signing key for both, outside their data directories (a deployment mounts it as a
# secret): replica a creates it at its first start, then b starts with it.
export PRIVPCA_LEDGER_KEY_FILE="$work/ledger-signing-key"
pid_a=$(start_replica a "$port_a"); pids+=("$pid_a")
wait_ready "http://127.0.0.1:$port_a"
pid_b=$(start_replica b "$port_b"); pids+=("$pid_b")
wait_ready "http://127.0.0.1:$port_b"

# deploy/nginx.conf with its two upstream servers and its listen address on loopback ports,
# and nginx's own files in the work directory.
mkdir -p "$work/nginx"
sed -e "s|server privpca-a:8080|server 127.0.0.1:$port_a|" \
    -e "s|server privpca-b:8080|server 127.0.0.1:$port_b|" \
    -e "s|listen 8080;|listen 127.0.0.1:$port_gw;|" \
    -e "s|^http {|http {\n    client_body_temp_path $work/nginx/body;\n    proxy_temp_path $work/nginx/proxy;\n    access_log $work/nginx/access.log;|" \
    deploy/nginx.conf > "$work/nginx/nginx.conf"
[ "$(grep -c "server 127.0.0.1:" "$work/nginx/nginx.conf")" -ge 2 ] || fail "deploy/nginx.conf lost its upstream server lines"
"$nginx_bin" -t -p "$work/nginx" -c "$work/nginx/nginx.conf" -g "pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;" 2> "$work/nginx/check.log" \
  || { cat "$work/nginx/check.log"; fail "nginx refused the configuration"; }
"$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" -g "pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;"
gw="http://127.0.0.1:$port_gw"
wait_ready "$gw"

echo "== gateway: the README walk-through through the gateway"
BASE="$gw" ADMIN="$admin" scripts/walkthrough-check.sh > "$work/walkthrough.out" || { cat "$work/walkthrough.out"; fail "walk-through"; }
grep -q '"status": "succeeded"' "$work/walkthrough.out" || fail "the walk-through's job did not succeed"
for r in a b; do
  grep -q "datasets live in the object store" "$work/replica-$r.log" || fail "replica $r does not use the object store"
done

echo "== gateway: the ledger tamper check (a charge edited in PostgreSQL, both replicas restarted)"
# The child script restarts the replicas; their new process ids come back through pid files.
echo "$pid_a" > "$work/pid-a"; echo "$pid_b" > "$work/pid-b"
gw_work="$work"
export bin db_url gw_work admin port_a port_b
restart='for r in a b; do kill "$(cat "$gw_work/pid-$r")"; done
for p in $port_a $port_b; do for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$p/readyz" || break; sleep 0.1; done; done
port=$port_a; for r in a b; do
  PRIVPCA_REPLICA_ID="privpca-$r" PRIVPCA_LOG_FORMAT=json PRIVPCA_JOB_LEASE_SECS=5 \
    "$bin" serve --bind "127.0.0.1:$port" --database-url "$db_url" --data-dir "$gw_work/data-$r" --admin-key "$admin" \
    >> "$gw_work/replica-$r.log" 2>&1 &
  echo $! > "$gw_work/pid-$r"; port=$port_b
done
for p in $port_a $port_b; do for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$p/readyz" > /dev/null && break; sleep 0.1; done; done'
edit='"$psql_bin" "$db_url" -XAtq -v ON_ERROR_STOP=1 -c "ALTER TABLE ledger DISABLE TRIGGER ledger_no_update" -c'
PRIVPCA="$bin" BASE="$gw" ADMIN="$admin" LEDGER_EDIT="$edit" RESTART="$restart" psql_bin="$psql_bin" \
  scripts/ledger-tamper-check.sh > "$work/tamper.out" 2>&1 || { cat "$work/tamper.out"; fail "ledger tamper check"; }
grep "ledger tamper check: ok" "$work/tamper.out"
pid_a=$(cat "$work/pid-a"); pid_b=$(cat "$work/pid-b"); pids+=("$pid_a" "$pid_b")
"$psql_bin" "$db_url" -XAtq -v ON_ERROR_STOP=1 -c "ALTER TABLE ledger ENABLE TRIGGER ledger_no_update" > /dev/null
wait_ready "$gw"

echo "== gateway: a 3-site study through the gateway, its coordinator killed mid-study"
key=$(curl -sf -X POST "$gw/v1/tenants" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  -d '{"name": "consortium"}' | jq -r .api_key)
iterations=200   # the most federated_power allows; rounds take milliseconds, polling catches round 2
study=$(curl -s -X POST "$gw/v1/studies" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d "{
  \"name\": \"gateway\", \"algorithm\": \"federated_power\", \"n_features\": 5, \"relation\": \"replace_one\",
  \"row_norm_bound\": 1.0, \"params\": {\"k\": 2, \"iterations\": $iterations}, \"privacy\": {\"rho\": 0.5},
  \"threshold\": 3, \"sites\": [{\"name\": \"s1\"}, {\"name\": \"s2\"}, {\"name\": \"s3\"}],
  \"round_timeout_seconds\": 20}")
id=$(jq -r '.id // empty' <<< "$study")
[ -n "$id" ] || fail "creating the study: $study"
site_pids=()
for i in 0 1 2; do
  awk -v seed=$((11 + i)) 'BEGIN { srand(seed); for (r = 0; r < 2000; r++) { t = 2 * rand() - 1; printf "%.4f,%.4f,%.4f,%.4f,%.4f\n", 0.6 * t, 0.5 * t, -0.3 * t, 0.1 * rand(), 0.1 * rand() } }' > "$work/site-$i.csv"
  token=$(jq -r ".sites[$i].token" <<< "$study")
  "$bin" site --server "$gw" --token "$token" --budget-rho 1 --data "$work/site-$i.csv" \
    --ledger "$work/site-$i.ledger" > /dev/null 2> "$work/site-$i.log" &
  site_pids+=($!); pids+=($!)
done
status_of() { curl -sf "$gw/v1/studies/$id" -H "Authorization: Bearer $key"; }
# The replica coordinating the study (privpca-a or privpca-b), as the database records it; the
# API does not show it.
coordinator_of() {
  "$psql_bin" "$db_url" -XAtq -v ON_ERROR_STOP=1 -c "SELECT coordinator FROM studies WHERE id = '$id'"
}

# Kill the study's coordinator once the study is past its second round and not finished: the
# replica that created it holds it, and which one that is depends on the gateway's balancing.
killed=""
for _ in $(seq 1 3000); do
  view=$(status_of || true)
  done_rounds=$(jq -r '.progress.done // 0' <<< "${view:-{\}}")
  state=$(jq -r '.status // ""' <<< "${view:-{\}}")
  case "$state" in succeeded|failed|cancelled) fail "the study ended ($state) before its coordinator was killed: raise iterations";; esac
  if [ "$state" = running ] && [ "$done_rounds" -ge 2 ]; then
    coordinator=$(coordinator_of) || fail "reading the study's coordinator"
    case "$coordinator" in
      privpca-a) victim=a; victim_pid="$pid_a"; survivor=privpca-b ;;
      privpca-b) victim=b; victim_pid="$pid_b"; survivor=privpca-a ;;
      *) fail "the study's coordinator is '$coordinator', not a replica of this test" ;;
    esac
    kill -9 "$victim_pid"; killed="$done_rounds"; break
  fi
  sleep 0.02
done
[ -n "$killed" ] || fail "the study never reached round 2"
echo "replica $victim (the study's coordinator) SIGKILLed after round $killed of $iterations"

for i in 0 1 2; do
  wait "${site_pids[$i]}" || fail "site $i exited non-zero"
done
final=$(status_of) || fail "reading the study"
jq -e '.status == "succeeded"' <<< "$final" > /dev/null || fail "study: $(jq -c '{status, error}' <<< "$final")"
jq -e '[.sites[] | select(.status == "done")] | length == 3' <<< "$final" > /dev/null || fail "not every site is done: $(jq -c .sites <<< "$final")"
jq -e '.cost.rho as $c | [.sites[] | select(.charged.rho == $c)] | length == 3' <<< "$final" > /dev/null \
  || fail "every site must be charged the study's cost once: $(jq -c '{cost, sites}' <<< "$final")"
curl -sf "$gw/v1/studies/$id/result" -H "Authorization: Bearer $key" \
  | jq -e '.basis | length == 2 and (.[0] | length) == 5' > /dev/null || fail "the study's result"
coordinator=$(coordinator_of) || fail "reading the study's coordinator"
[ "$coordinator" = "$survivor" ] || fail "the study ended coordinated by '$coordinator', not taken over by $survivor"
echo "gateway test: ok (coordinator $victim killed after round $killed, $survivor took over; study $id succeeded through $gw)"
