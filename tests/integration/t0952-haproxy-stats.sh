#!/usr/bin/env bash
# t0952-haproxy-stats.sh: haproxy's side of traffic stats (issue 13), with
# a real haproxy (master-worker, SIGUSR2 reloads) in front of a backend
# that answers 200 and one that answers 500 (after 40 ms). The
# configuration is rendered by the haproxy renderer with the stats socket
# and the access log on (tests/tools/hapstats, the renderer's and
# haproxy_stats_read's handle until tetherd carries them): haproxy -c
# accepts it after a base configuration with or without its own logging;
# the counters read over the socket (show info + show stat) are the
# requests sent, per cluster, with the 5xx and the latency of the slow
# backend, named after the worker that answered; the access log reaches a
# UDP listener as one datagram per request in docs/gates.md's format
# (route, "-" for a 404, the generation's id; the marker does not log);
# after a reload the new worker's counters start from zero under its pid;
# a stopped (SIGSTOP) worker costs the reader its timeout, not more; a
# gone haproxy is a clear error. The socket is level user: no admin command.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

HAPSTATS=$TOP_BUILDDIR/tests/tools/hapstats
[ -x "$HAPSTATS" ] || bail "no $HAPSTATS: build first (make check builds it)"
need_cmd haproxy node curl jq python3 ss

HAP_PIDFILE=$WORK/haproxy.pid
HAP_PID=""
stop_haproxy() {
	local pid i=0
	pid=$(cat "$HAP_PIDFILE" 2>/dev/null)
	[ -n "$pid" ] || return 0
	kill -CONT $(pgrep -P "$pid") 2>/dev/null
	kill -TERM "$pid" 2>/dev/null
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	kill -KILL "$pid" 2>/dev/null
	return 0
}
trap 'stop_haproxy; cleanup' EXIT

SOCK=$WORK/stats.sock
DGRAMS=$WORK/dgrams
OUT=$WORK/out
mkdir -p "$OUT"

# ---- backends, the syslog listener, ports ------------------------------------------
start_tool ok backend.mjs 0 ok
B_OK=$TOOL_PORT
cat >"$WORK/bad.mjs" <<'EOF'
import http from 'node:http';
const server = http.createServer((req, res) => {
	setTimeout(() => { res.statusCode = 500; res.end('bad\n'); }, 40);
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
process.on('SIGTERM', () => process.exit(0));
EOF
node "$WORK/bad.mjs" >"$WORK/bad.port" 2>>"$WORK/bad.log" &
track_pid $!
wait_until 10 grep -q '^listening ' "$WORK/bad.port" || bail "the 500 backend did not start"
B_BAD=$(awk '/^listening /{print $2; exit}' "$WORK/bad.port")

# one line per datagram, JSON-quoted (the trailing newline shows as \n)
cat >"$WORK/udp.py" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('127.0.0.1', 0))
print('listening', s.getsockname()[1], flush=True)
with open(sys.argv[1], 'a') as f:
    while True:
        d, _ = s.recvfrom(65536)
        f.write(json.dumps(d.decode('latin-1')) + '\n')
        f.flush()
EOF
python3 "$WORK/udp.py" "$DGRAMS" >"$WORK/udp.port" 2>>"$WORK/udp.log" &
track_pid $!
wait_until 10 grep -q '^listening ' "$WORK/udp.port" || bail "the syslog listener did not start"
SP=$(awk '/^listening /{print $2; exit}' "$WORK/udp.port")
free_port LP
free_port MP
diag "backends $B_OK (200) $B_BAD (500), listener $LP, marker $MP, syslog udp $SP"

write_haproxy_base "$WORK/base.cfg"
# an operator's base that logs every proxy itself
cat >"$WORK/base-logs.cfg" <<'EOF'
global
    log stderr format raw local0
defaults
    mode http
    log global
    option httplog
    timeout connect 5s
    timeout client 30s
    timeout server 30s
EOF
cat >"$WORK/push.json" <<EOF
{"version":1,"base":0,"full":true,"nonce":"n1","removed":[],"upserts":[
 {"name":"cluster/ok","version":1,"body":{"endpoints":[{"address":"127.0.0.1","port":$B_OK}]}},
 {"name":"cluster/bad","version":1,"body":{"endpoints":[{"address":"127.0.0.1","port":$B_BAD}]}},
 {"name":"listener/web","version":1,"body":{"address":"127.0.0.1","port":$LP}},
 {"name":"route/all","version":1,"body":{"listener":"web","host":"*","path":"/","cluster":"ok"}},
 {"name":"route/bad","version":1,"body":{"listener":"web","host":"*","path":"/bad","cluster":"bad"}},
 {"name":"route/api","version":1,"body":{"listener":"web","host":"api.example.com","path":"/v1","cluster":"ok"}}
]}
EOF
render() {
	"$HAPSTATS" render "$WORK/push.json" "$OUT/tether.cfg" --stats-socket "$SOCK" \
		--syslog "127.0.0.1:$SP" --marker "127.0.0.1:$MP" --gen "$1"
}
render gen-one || bail "the renderer refused the configuration"

# ---- haproxy -c ----------------------------------------------------------------------
for b in base.cfg base-logs.cfg; do
	if out=$(haproxy -c -f "$WORK/$b" -f "$OUT/" 2>&1) && ! grep -q -e WARNING -e ALERT <<<"$out"; then
		ok "haproxy -c accepts the rendered file (stats socket, access log) after $b, with no warning"
	else
		not_ok "haproxy -c accepts the rendered file after $b, with no warning"
		diag "$out"
	fi
done
check "the base configuration does not declare the socket" sh -c "! '$HAPSTATS' declared '$WORK/base.cfg' '$SOCK'"
printf 'global\n    stats socket %s mode 600 level admin # the operator'"'"'s\n' "$SOCK" >"$WORK/base-sock.cfg"
check "a base configuration that does is seen" "$HAPSTATS" declared "$WORK/base-sock.cfg" "$SOCK"

# ---- haproxy, master-worker ------------------------------------------------------------
marker() {
	curl -s -m 2 "http://127.0.0.1:$MP/tether-generation"
}
marker_is() {
	[ "$(marker)" = "$1" ]
}
worker() {
	pgrep -P "$(cat "$HAP_PIDFILE" 2>/dev/null)" haproxy | head -n 1
}
haproxy -W -p "$HAP_PIDFILE" -f "$WORK/base.cfg" -f "$OUT/" >>"$WORK/haproxy.log" 2>&1 &
HAP_PID=$!
wait_until 10 marker_is gen-one || bail "haproxy does not serve the marker"
ok "haproxy (master-worker) serves the rendered file"
check "the stats socket is 0600" test "$(stat -c %a "$SOCK")" = 600

# read SOCKET [TIMEOUT]: the counters as JSON into $WORK/t.json
read_stats() {
	"$HAPSTATS" read "$SOCK" "${1:-2}" >"$WORK/t.json" 2>"$WORK/t.err"
}
# route NAME FIELD: a field of a route of the last read
route() {
	jq -r --arg r "$1" ".routes[] | select(.route == \$r) | .$2" "$WORK/t.json"
}
read_stats
check_eq "before any request: cluster/ok counted 0" 0 "$(route cluster/ok requests)"
W1=$(worker)
check_eq "the counters are named after the worker that answered" "pid$W1" "$(jq -r .gen "$WORK/t.json")"

# ---- traffic ---------------------------------------------------------------------------
codes=""
for i in $(seq 1 10); do codes="$codes$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$LP/x$i") "; done
for i in $(seq 1 4); do codes="$codes$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$LP/bad/$i") "; done
for i in $(seq 1 2); do codes="$codes$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: api.example.com' "http://127.0.0.1:$LP/v1/$i") "; done
for i in $(seq 1 3); do codes="$codes$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: api.example.com' "http://127.0.0.1:$LP/other") "; done
check_eq "the requests were answered 10x200, 4x500, 2x200, 3x404" \
	"200 200 200 200 200 200 200 200 200 200 500 500 500 500 200 200 404 404 404 " "$codes"
marker >/dev/null

if read_stats; then
	ok "haproxy_stats_read reads the counters"
else
	not_ok "haproxy_stats_read reads the counters"
	diag "$(cat "$WORK/t.err")"
fi
diag "$(cat "$WORK/t.json")"
check_eq "cluster/ok: 12 requests (10 of route/all, 2 of route/api)" 12 "$(route cluster/ok requests)"
check_eq "cluster/ok: no 5xx" 0 "$(route cluster/ok errors)"
check_eq "cluster/bad: 4 requests" 4 "$(route cluster/bad requests)"
check_eq "cluster/bad: 4 errors (5xx)" 4 "$(route cluster/bad errors)"
P50=$(route cluster/bad p50)
check "cluster/bad's latency (haproxy's mean ttime, one bucket) is about its 40 ms: p50 $P50 ms" \
	jq -e --arg r cluster/bad '.routes[] | select(.route == $r) | .p50 >= 28 and .p50 <= 80' "$WORK/t.json"
check_eq "cluster/bad's histogram: its 4 requests in one bucket" "1 4" \
	"$(jq -r '.routes[] | select(.route == "cluster/bad") | "\(.hist | length) \(.hist[0][1])"' "$WORK/t.json")"
check_eq "no other route (tether_not_found, the frontends are not clusters)" 2 "$(jq '.routes | length' "$WORK/t.json")"

# ---- the access log --------------------------------------------------------------------
wait_until 5 sh -c "[ \$(wc -l <'$DGRAMS') -ge 19 ]"
sleep 0.3   # nothing more may come (the marker must not log)
check_eq "19 datagrams: one per request, none for the marker" 19 "$(wc -l <"$DGRAMS")"
diag "first datagram: $(head -n 1 "$DGRAMS")"
# "<190>Mon dd hh:mm:ss haproxy[PID]: tether1 GEN STATUS NNms ROUTE\n"
HDR='"<190>[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} haproxy\['"$W1"'\]: '
count() {
	grep -cE "^$HDR$1\\\\n\"$" "$DGRAMS"
}
check_eq "10 lines 'tether1 gen-one 200 NNms route/all'" 10 "$(count 'tether1 gen-one 200 [0-9]+ms route/all')"
check_eq "4 lines 'tether1 gen-one 500 NNms route/bad'" 4 "$(count 'tether1 gen-one 500 [0-9]+ms route/bad')"
check_eq "2 lines 'tether1 gen-one 200 NNms route/api'" 2 "$(count 'tether1 gen-one 200 [0-9]+ms route/api')"
check_eq "3 lines 'tether1 gen-one 404 NNms -' (a host's unrouted path)" 3 "$(count 'tether1 gen-one 404 [0-9]+ms -')"
check "route/bad's latencies are its backend's 40 ms or more" \
	sh -c "grep -E 'route/bad' '$DGRAMS' | sed -E 's/.* 500 ([0-9]+)ms .*/\\1/' | awk '\$1 < 40 || \$1 > 2000 {bad=1} END {exit bad}'"

# ---- the socket is level user ------------------------------------------------------------
ask() {
	python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode()+b"\n")
d=b""
while True:
    x=s.recv(65536)
    if not x: break
    d+=x
sys.stdout.write(d.decode("latin-1"))' "$SOCK" "$1"
}
ANS=$(ask "disable server tether_c_ok/e0")
check "disable server: Permission denied" grep -q "Permission denied" <<<"$ANS"
check "the server is still up" sh -c "curl -s -m 2 'http://127.0.0.1:$LP/y' | grep -q '^ok /y'"

# ---- a reload: a new worker counts from zero ---------------------------------------------
render gen-two || bail "the renderer refused the configuration"
kill -USR2 "$(cat "$HAP_PIDFILE")"
wait_until 10 marker_is gen-two || bail "haproxy did not reload"
wait_until 10 sh -c "[ -n \"\$(pgrep -P $(cat "$HAP_PIDFILE") haproxy)\" ] && ! kill -0 $W1 2>/dev/null"
W2=$(worker)
wait_until 5 read_stats
check "a new worker answers after the reload ($W1, then $W2)" test -n "$W2" -a "$W2" != "$W1"
check_eq "the counters are named after the new worker" "pid$W2" "$(jq -r .gen "$WORK/t.json")"
check_eq "the new worker's cluster/ok starts from 0" 0 "$(route cluster/ok requests)"
check_eq "the new worker's cluster/bad starts from 0" 0 "$(route cluster/bad requests)"
for i in 1 2 3; do curl -s -o /dev/null "http://127.0.0.1:$LP/bad/$i"; done
read_stats
check_eq "then counts its own requests (3 on cluster/bad, 3 errors)" "3 3" \
	"$(route cluster/bad requests) $(route cluster/bad errors)"
wait_until 5 sh -c "[ \$(grep -c 'tether1 gen-two 500' '$DGRAMS') -ge 3 ]"
check_eq "the new worker's log lines carry the new generation and its pid" 3 \
	"$(grep -cE "haproxy\\[$W2\\]: tether1 gen-two 500 [0-9]+ms route/bad" "$DGRAMS")"

# ---- a stuck haproxy, a gone one ---------------------------------------------------------
kill -STOP "$W2"
t0=$(date +%s%N)
read_stats 0.5
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
kill -CONT "$W2"
check "a stopped worker: the read fails ($(cat "$WORK/t.err"))" test $rc -ne 0
check "... within its timeout (0.5 s; took $ms ms)" test "$ms" -lt 1500
check "... saying it timed out" grep -q "timed out" "$WORK/t.err"
check "the worker answers again once continued" read_stats
stop_haproxy
wait "$HAP_PID" 2>/dev/null
read_stats 1
check "haproxy gone: a clear error ($(cat "$WORK/t.err"))" grep -qE "stats.sock: connect: (Connection refused|No such file or directory)" "$WORK/t.err"

done_testing
