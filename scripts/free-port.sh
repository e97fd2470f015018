#!/usr/bin/env bash
# Print a free loopback TCP port for a server a script starts later.
#
# The port comes from below the kernel's ephemeral range (ip_local_port_range), not from
# bind(0): bind(0) hands out a port from that very range, so between the pick and the server's
# own bind an outbound connection (a replica's PostgreSQL pool, say) can be given the same local
# port, and the server fails with "Address already in use" (CI, session 27: nginx). Below the
# range only another listener can take it, and the pick checks that none has.
set -euo pipefail
python3 - <<'PY'
import random, socket
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
except OSError:
    low = 32768
low = max(low, 12000)
for _ in range(200):
    port = random.randrange(10000, low)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("free-port: no free port below the ephemeral range")
PY
