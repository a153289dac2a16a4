#!/bin/bash
# t0527-tls-handshake-slots.sh: an HTTP thread of the plane has at most
# 128 TLS handshakes under way (what a storm of them allocates at once
# fragments the heap: docs/BENCHMARKS.md, "Trust" (4)). Past that a
# connection is accepted and its handshake waits (counted in
# tether_tls_handshakes_waited_total); a handshake that stalls gives up its
# slot after 200 ms, so a burst of real TLS clients behind 180
# connections that never say hello is served long before the header
# timeout closes those; with slots free a new connection does not wait.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-tls.sh"
need_cmd openssl python3

PKI=$WORK/pki
make_pki "$PKI" n1
CURL_OPTS=(--cacert "$PKI/ca.pem")
WAITED=tether_tls_handshakes_waited_total

# one HTTP thread: every connection is its
start_plane p --tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key" --threads 1 --header-timeout 60
check_eq "nothing has waited for a handshake slot yet" 0 "$(metric "$WAITED")"

# 180 connections that never send their ClientHello (128 hold the slots,
# 52 wait), and right behind them a burst of 40 real TLS clients at once:
# they are served when the silent ones have held their slots 200 ms (not
# at --header-timeout, when the plane closes them); under
# --max-pending-per-address's 256
python3 -c '
import os, socket, ssl, sys, threading, time
port, ca, held, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(180)]
open(held, "w").write("%d\n" % len(socks))
ctx = ssl.create_default_context(cafile=ca)
ok = []
def one():
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                t.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                data = b""
                while True:
                    b = t.recv(4096)
                    if not b:
                        break
                    data += b
                if data.startswith(b"HTTP/1.1 200"):
                    ok.append(1)
    except Exception as e:
        print("client:", e, file=sys.stderr)
ts = [threading.Thread(target=one) for _ in range(40)]
[t.start() for t in ts]
[t.join() for t in ts]
print(len(ok), flush=True)
while not os.path.exists(stop):
    time.sleep(0.05)
' "$PLANE_PORT" "$PKI/ca.pem" "$WORK/held" "$WORK/stop" >"$WORK/burst.out" 2>"$WORK/burst.err" &
HOLDER=$!
track_pid "$HOLDER"
check "180 silent connections are open" wait_until 10 test -s "$WORK/held"
check "the burst is over" wait_until 25 test -s "$WORK/burst.out"
check_eq "every client of the burst is served behind the stalled handshakes" 40 "$(cat "$WORK/burst.out")"
waited_ge() { [ "$(metric "$WAITED")" -ge "$1" ]; }
check "the connections past 128 handshakes waited" waited_ge 52

# the silent ones go: a new connection begins its handshake at once
touch "$WORK/stop"
check "the silent connections close" wait_until 10 bash -c "! kill -0 $HOLDER 2>/dev/null"
untrack_pid "$HOLDER"
conns_le() { [ "$(metric tether_http_connections)" -le "$1" ]; }
check "the plane sees them closed" wait_until 10 conns_le 1
BEFORE=$(metric "$WAITED")
check "a new TLS request is served" curl -fsS "${CURL_OPTS[@]}" "$PLANE_URL/healthz"
check_eq "with slots free nothing waits" "$BEFORE" "$(metric "$WAITED")"
check "the plane still runs" kill -0 "$PLANE_PID"

done_testing
