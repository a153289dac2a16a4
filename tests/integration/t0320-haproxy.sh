#!/usr/bin/env bash
# t0320-haproxy.sh: tetherd driving a real haproxy (master-worker mode,
# SIGUSR2 reloads, the marker frontend to confirm them) in front of two
# real backends: traffic follows each change (a route's cluster, a
# cluster's endpoints, exact and wildcard host ACLs, path ACLs, host and
# path together, a removed route answering 404 from tether_not_found), the
# lb policies are rendered, a TLS frontend is served from a secret (one
# .pem, 0600). Then, with a client loop running: a push haproxy -c refuses
# (a 1024-bit key OpenSSL finds too weak) is NACKed naming the secret and
# the field, then haproxy's message, and no request fails; a "certificate"
# that is not one is refused by the agent's own check, naming the secret; a reload that fails after the switch (a listener on a port
# another process holds: haproxy -c passes, the new workers cannot bind)
# is reverted and NACKed; a failed --health probe is reverted, NACKed and
# the plane shows healthy:false; a later good push applies.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd haproxy node openssl ss

# ---- helpers of this test ---------------------------------------------------

HAP_PIDFILE=$WORK/haproxy.pid
# stop_haproxy (lib-proxy.sh): the master from the pidfile, waited for.
trap 'stop_haproxy; cleanup' EXIT

OUT=$WORK/h.out
cur_gen() {
	readlink "$OUT/current" 2>/dev/null | sed 's/^gen-//'
}
marker() {
	curl -s -m 2 "http://127.0.0.1:$MP/tether-generation"
}
marker_is() {
	[ "$(marker)" = "$1" ]
}
# serves PATH EXPECTED [CURL ARGS...]: the HTTP listener answers PATH with EXPECTED
serves() {
	local path=$1 want=$2
	shift 2
	[ "$(curl -s -m 2 "$@" "http://127.0.0.1:$LP$path")" = "$want" ]
}
# serves_n N PATH EXPECTED [CURL ARGS...]: N requests in a row all answered so
serves_n() {
	local n=$1 i
	shift
	for i in $(seq 1 "$n"); do
		serves "$@" || return 1
	done
}
# check_serves DESCRIPTION PATH EXPECTED [CURL ARGS...]: becomes true, then stays
check_serves() {
	local desc=$1
	shift
	if wait_until 5 serves "$@" && serves_n 5 "$@"; then
		ok "$desc"
	else
		not_ok "$desc"
		diag "GET $1 ${*:3}: '$(curl -s -m 2 "${@:3}" "http://127.0.0.1:$LP$1")' (expected '$2')"
	fi
}
status_of() {
	curl -s -m 2 -o /dev/null -w '%{http_code}' "$@"
}
# applied VERSION: the agent runs VERSION and the marker serves its generation
applied() {
	agent_at h "$1" && [ -n "$(cur_gen)" ] && marker_is "$(cur_gen)"
}
# push_and_wait DESCRIPTION: the plane's version now reached the agent and haproxy
push_and_wait() {
	V=$(plane_version)
	if wait_until 15 applied "$V"; then
		ok "$1 (version $V applied, haproxy serves generation $(cur_gen))"
	else
		not_ok "$1 (version $V applied, haproxy serves its generation)"
		diag "status: $(cat "$WORK/h.state/status.json" 2>&1)"
		diag "current: $(cur_gen); marker: $(marker)"
	fi
}
# backend_of NAME: the backend section NAME of the live tether.cfg
backend_of() {
	awk -v want="backend $1" '$0 == want {on = 1; print; next} /^[a-z]/ {on = 0} on' "$OUT/current/tether.cfg"
}
fingerprint_served() {
	openssl s_client -connect "127.0.0.1:$TP" -servername localhost </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 2>/dev/null
}
fingerprint_of() {
	openssl x509 -in "$1" -noout -fingerprint -sha256
}
ngens() {
	find "$OUT" -maxdepth 1 -type d -name 'gen-*' | wc -l
}
secret_body() {
	jq -n -c --rawfile c "$1" --rawfile k "$2" '{cert: $c, key: $k}'
}

# ---- two backends, ports, the base configuration -------------------------------
start_tool b1 backend.mjs 0 b1
B1=$TOOL_PORT
start_tool b2 backend.mjs 0 b2
B2=$TOOL_PORT
free_port LP   # the HTTP listener
free_port TP   # the TLS listener
free_port MP   # the marker
free_port XP   # held by another process: the listener haproxy cannot bind
free_port DP   # nothing listens here: a dead endpoint
diag "ports: backends $B1 $B2, listener $LP, tls $TP, marker $MP, held $XP, dead $DP"

cat >"$WORK/base.cfg" <<'EOF'
global
    log stderr format raw local0
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
EOF

openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 \
	-keyout "$WORK/key1.pem" -out "$WORK/cert1.pem" >/dev/null 2>&1 || bail "openssl cannot make a certificate"
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 \
	-keyout "$WORK/key2.pem" -out "$WORK/cert2.pem" >/dev/null 2>&1 || bail "openssl cannot make a certificate"

# ---- the plane, the agent, then haproxy on the agent's first generation ----------
start_plane p --heartbeat 1
start_agent h --consumer haproxy --pidfile "$HAP_PIDFILE" --marker "127.0.0.1:$MP" \
	--base-config "$WORK/base.cfg" --reload-timeout 2 --health "http://127.0.0.1:$LP/health" \
	--health-timeout 1 --health-retries 2 --backoff-max 1
wait_until 10 test -f "$OUT/current/tether.cfg" || bail "the agent made no first generation"
check "the first generation (no resources yet) passes haproxy -c" \
	haproxy -c -q -f "$WORK/base.cfg" -f "$OUT/current/tether.cfg"
haproxy -W -p "$HAP_PIDFILE" -f "$WORK/base.cfg" -f "$OUT/current/" >>"$WORK/haproxy.log" 2>&1 &
HAP_PID=$!
track_pid "$HAP_PID"
wait_until 10 marker_is "$(cur_gen)" || bail "haproxy does not serve the marker"
ok "haproxy (master-worker) serves the agent's generation on the marker"

# ---- traffic follows each change -------------------------------------------------
ctl apply - >/dev/null <<EOF || bail "cannot load the initial configuration"
{"upserts":[
 {"name":"cluster/a","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":$B1}]}},
 {"name":"cluster/b","body":{"endpoints":[{"address":"127.0.0.1","port":$B2}]}},
 {"name":"listener/web","body":{"address":"127.0.0.1","port":$LP}},
 {"name":"route/all","body":{"listener":"web","host":"*","path":"/","cluster":"a"}},
 {"name":"route/health","body":{"listener":"web","host":"*","path":"/health","cluster":"a"}},
 {"name":"route/loop","body":{"listener":"web","host":"*","path":"/loop","cluster":"b"}}
]}
EOF
push_and_wait "the first configuration goes live"
G1=$(cur_gen)
check_serves "/x goes to cluster a (b1)" /x "b1 /x"
check_serves "/loop goes to cluster b (b2)" /loop "b2 /loop"
check "the plane records the node ACKed and healthy" \
	wait_until 5 sh -c "curl -s '$PLANE_URL/v1/nodes/h' | jq -e '.acked_version == $V and .healthy == true'"
check_eq "status.json says synced" synced "$(st h state)"
check "the live tether.cfg passes haproxy -c with the base configuration" \
	haproxy -c -q -f "$WORK/base.cfg" -f "$OUT/current/tether.cfg"
check "the master logged no reload failure" sh -c "! grep -q 'Loading failure' '$WORK/haproxy.log'"

put route/all '{"listener":"web","host":"*","path":"/","cluster":"b"}' >/dev/null
push_and_wait "a route switched to cluster b"
check "a new generation went live" test "$(cur_gen)" != "$G1"
check_serves "/x now goes to cluster b (b2)" /x "b2 /x"

put cluster/b "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$B1}]}" >/dev/null
push_and_wait "cluster b's endpoint switched to b1"
check_serves "/x follows the endpoint (b1)" /x "b1 /x"
check_serves "/loop follows the endpoint too (b1)" /loop "b1 /loop"
ctl apply - >/dev/null <<EOF
{"upserts":[
 {"name":"cluster/b","body":{"endpoints":[{"address":"127.0.0.1","port":$B2}]}},
 {"name":"route/all","body":{"listener":"web","host":"*","path":"/","cluster":"a"}}
]}
EOF
push_and_wait "cluster b back on b2, the route back on cluster a (one batch)"
check_serves "/x: b1 again" /x "b1 /x"
check_serves "/loop: b2 again" /loop "b2 /loop"

# host ACLs: exact, then a wildcard, then both (the exact one wins)
put route/api '{"listener":"web","host":"api.example.com","path":"/","cluster":"b"}' >/dev/null
push_and_wait "an exact host route"
check_serves "Host: api.example.com goes to cluster b" /x "b2 /x" -H 'Host: api.example.com'
check_serves "Host: API.Example.COM:port matches too (case, port)" /x "b2 /x" -H "Host: API.Example.COM:$LP"
check_serves "another host goes to the catch-all (b1)" /x "b1 /x" -H 'Host: www.example.com'

ctl apply - >/dev/null <<'EOF'
{"upserts":[{"name":"route/wild","body":{"listener":"web","host":"*.example.com","path":"/","cluster":"b"}}],
 "removes":["route/api"]}
EOF
push_and_wait "a wildcard host route instead of the exact one"
check_serves "Host: x.example.com goes to cluster b (wildcard)" /x "b2 /x" -H 'Host: x.example.com'
check_serves "Host: a.b.example.com goes to cluster b (wildcard)" /x "b2 /x" -H 'Host: a.b.example.com'
check_serves "Host: example.com is not under *.example.com (catch-all)" /x "b1 /x" -H 'Host: example.com'
check_serves "Host: x.example.org is not under *.example.com (catch-all)" /x "b1 /x" -H 'Host: x.example.org'
check_serves "Host: xexample.com is not under *.example.com (catch-all)" /x "b1 /x" -H 'Host: xexample.com'

put route/api '{"listener":"web","host":"api.example.com","path":"/","cluster":"a"}' >/dev/null
push_and_wait "an exact host route beside the wildcard"
check_serves "the exact host wins over the wildcard (api.example.com: cluster a)" /x "b1 /x" -H 'Host: api.example.com'
check_serves "the wildcard still takes x.example.com" /x "b2 /x" -H 'Host: x.example.com'

# path ACLs, alone and with a host
ctl apply - >/dev/null <<'EOF'
{"upserts":[
 {"name":"route/static","body":{"listener":"web","host":"*","path":"/static","cluster":"b"}},
 {"name":"route/api-v2","body":{"listener":"web","host":"api.example.com","path":"/v2","cluster":"b"}}
]}
EOF
push_and_wait "path routes"
check_serves "/static/app.js goes to cluster b" /static/app.js "b2 /static/app.js"
check_serves "/other stays on the catch-all" /other "b1 /other"
check_serves "api.example.com/v2/x goes to cluster b (host and path)" /v2/x "b2 /v2/x" -H 'Host: api.example.com'
check_serves "api.example.com/v1/x stays on cluster a" /v1/x "b1 /v1/x" -H 'Host: api.example.com'
check_serves "/v2/x on another host is not api-v2's (catch-all)" /v2/x "b1 /v2/x" -H 'Host: other.test'

ctl rm route/all >/dev/null
push_and_wait "the catch-all route removed"
if wait_until 5 test "$(status_of "http://127.0.0.1:$LP/x")" = 404; then
	ok "/x now gets 404"
else
	not_ok "/x now gets 404"
	diag "status $(status_of "http://127.0.0.1:$LP/x")"
fi
check_eq "the 404 comes from tether_not_found" "no route" "$(curl -s -m 2 "http://127.0.0.1:$LP/x")"
check_serves "/static still goes to cluster b" /static/y "b2 /static/y"
check_serves "/health still goes to cluster a" /health "b1 /health"
check_serves "the wildcard route still works" /x "b2 /x" -H 'Host: x.example.com'

# lb policies
put cluster/pool "{\"lb\":\"round_robin\",\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$B1,\"weight\":1},{\"address\":\"127.0.0.1\",\"port\":$B2,\"weight\":3}]}" >/dev/null
put route/pool '{"listener":"web","host":"*","path":"/pool","cluster":"pool"}' >/dev/null
push_and_wait "a cluster of two endpoints (round_robin, weights 1 and 3)"
sec=$(backend_of tether_c_pool)
check "round_robin is rendered as balance roundrobin" grep -q '^ *balance roundrobin$' <<<"$sec"
check "the first endpoint is rendered with weight 1" grep -q "server e0 127.0.0.1:$B1 weight 1\$" <<<"$sec"
check "the second endpoint is rendered with weight 3" grep -q "server e1 127.0.0.1:$B2 weight 3\$" <<<"$sec"
seen=$(for i in $(seq 1 8); do curl -s -m 2 "http://127.0.0.1:$LP/pool"; done | sort | uniq -c | awk '{print $2 "=" $1}' | xargs)
check_eq "8 requests are spread 1:3 over both endpoints" "b1=2 b2=6" "$seen"
put cluster/pool "{\"lb\":\"least_conn\",\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$B1},{\"address\":\"127.0.0.1\",\"port\":$B2}]}" >/dev/null
push_and_wait "lb least_conn"
check "least_conn is rendered as balance leastconn" grep -q '^ *balance leastconn$' <<<"$(backend_of tether_c_pool)"
seen=$(for i in $(seq 1 6); do curl -s -m 2 "http://127.0.0.1:$LP/pool"; done | awk '{print $1}' | sort -u | xargs)
check_eq "least_conn uses both endpoints (sequential requests)" "b1 b2" "$seen"
put cluster/pool "{\"lb\":\"random\",\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$B1},{\"address\":\"127.0.0.1\",\"port\":$B2}]}" >/dev/null
push_and_wait "lb random"
check "random is rendered as balance random" grep -q '^ *balance random$' <<<"$(backend_of tether_c_pool)"
check "a cluster without lb is round robin" grep -q '^ *balance roundrobin$' <<<"$(backend_of tether_c_b)"
seen=$(for i in $(seq 1 10); do curl -s -m 2 "http://127.0.0.1:$LP/pool"; done | sort -u | xargs)
check "random: every answer is from b1 or b2 (got: $seen)" grep -qE '^b[12] /pool( b[12] /pool)?$' <<<"$seen"

# ---- TLS from a secret ---------------------------------------------------------
jq -n -c --arg s "$(secret_body "$WORK/cert1.pem" "$WORK/key1.pem")" --argjson tp "$TP" '{upserts: [
 {name: "secret/site", body: ($s | fromjson)},
 {name: "listener/tls", body: {address: "127.0.0.1", port: $tp, tls: {secret: "site"}}},
 {name: "route/tls", body: {listener: "tls", host: "*", path: "/", cluster: "a"}}]}' >"$WORK/tls.json"
ctl apply "$WORK/tls.json" >/dev/null
push_and_wait "a TLS listener with a secret"
check_eq "curl -k over TLS reaches cluster a" "b1 /s" "$(curl -sk -m 2 "https://127.0.0.1:$TP/s")"
check_eq "the served certificate is the secret's (verified with it as the CA)" "b1 /s" \
	"$(curl -s -m 2 --cacert "$WORK/cert1.pem" --resolve "localhost:$TP:127.0.0.1" "https://localhost:$TP/s")"
check_eq "its fingerprint is the secret's" "$(fingerprint_of "$WORK/cert1.pem")" "$(fingerprint_served)"
pems=$(cd "$OUT/secrets" && ls)
check_eq "one .pem in OUTPUT_DIR/secrets" 1 "$(echo "$pems" | grep -c '\.pem$')"
PEM1=$OUT/secrets/$(echo "$pems" | grep '\.pem$' | head -n 1)
check_eq "the .pem is 0600" 600 "$(stat -c %a "$PEM1")"
check_eq "the secrets directory is 0700" 700 "$(stat -c %a "$OUT/secrets")"
check "the .pem holds the certificate and then the key" sh -c "
	grep -q 'BEGIN CERTIFICATE' '$PEM1' && grep -q 'PRIVATE KEY' '$PEM1' &&
	[ \"\$(grep -n 'BEGIN CERTIFICATE' '$PEM1' | head -n1 | cut -d: -f1)\" -lt \"\$(grep -n 'PRIVATE KEY' '$PEM1' | head -n1 | cut -d: -f1)\" ]"
check "tether.cfg binds the TLS port with that .pem" grep -q "bind 127.0.0.1:$TP ssl crt $PEM1\$" "$OUT/current/tether.cfg"
check "no key material in the generation directory" sh -c "! grep -rlq 'PRIVATE KEY' '$OUT/current/'"
check_eq "plain HTTP on the HTTP listener still works" "b2 /loop" "$(curl -s -m 2 "http://127.0.0.1:$LP/loop")"

# ---- failures, with a client loop running -------------------------------------
CLIENT=$WORK/client.txt
: >"$CLIENT"
(
	while :; do
		r=$(curl -s -m 2 "http://127.0.0.1:$LP/loop")
		[ "$r" = "b2 /loop" ] && echo ok || echo "fail http '$r'"
		r=$(curl -sk -m 2 "https://127.0.0.1:$TP/loop")
		[ "$r" = "b1 /loop" ] && echo ok || echo "fail https '$r'"
		sleep 0.02
	done >>"$CLIENT" 2>/dev/null
) &
CLIENT_PID=$!
track_pid "$CLIENT_PID"
lines() {
	wc -l <"$CLIENT"
}
lines_ge() {
	[ "$(lines)" -ge "$1" ]
}
# more N: waits until the client made N more requests
more() {
	wait_until 20 lines_ge $(($(lines) + $1))
}
# fails FROM TO: failed requests among lines FROM+1..TO
fails() {
	sed -n "$(($1 + 1)),$2p" "$CLIENT" | grep -c '^fail'
}
more 10 || bail "the client loop does not run"
check_eq "the client loop sees no failure before the first bad push" 0 "$(fails 0 "$(lines)")"

# a push haproxy -c refuses: a certificate too weak for OpenSSL (1024-bit RSA)
weak_pair weak
VGOOD=$(st h version)
GGOOD=$(cur_gen)
PEMGOOD=$(cat "$PEM1")
NGENS=$(ngens)
RELOADS0=$(grep -c 'Reloading HAProxy' "$WORK/haproxy.log")
L0=$(lines)
put secret/site "$(secret_body "$WORK/weak.crt" "$WORK/weak.key")" >/dev/null
VBAD=$(plane_version)
check "the bad certificate (version $VBAD) is NACKed" wait_until 15 has_nack h "$VBAD"
err=$(node_field h '.last_nack.error')
check "the NACK names the secret and the field first" grep -q "^secret/site: cert: " <<<"$err"
check "the NACK says haproxy refused it" grep -q "haproxy refused the new configuration" <<<"$err"
check "the NACK carries haproxy's own message (unable to load SSL certificate)" \
	grep -q "unable to load SSL certificate" <<<"$err"
diag "NACK: $err"
more 20
L1=$(lines)
check_eq "no client request failed from the bad push until 20 requests after its NACK ($((L1 - L0)) requests)" \
	0 "$(fails "$L0" "$L1")"
check_eq "the agent stays at version $VGOOD" "$VGOOD" "$(st h version)"
check_eq "status.json says degraded" degraded "$(st h state)"
check "status.json's last_error names the version" grep -q "version $VBAD refused" <<<"$(st h last_error)"
check_eq "current still points at the good generation" "$GGOOD" "$(cur_gen)"
check_eq "the marker still answers the good generation" "$GGOOD" "$(marker)"
check_eq "the refused generation was not kept" "$NGENS" "$(ngens)"
check_eq "the live .pem is unchanged" "$PEMGOOD" "$(cat "$PEM1" 2>/dev/null)"
check_eq "TLS still serves the good certificate" "$(fingerprint_of "$WORK/cert1.pem")" "$(fingerprint_served)"
check_eq "the haproxy master was not reloaded" "$RELOADS0" "$(grep -c 'Reloading HAProxy' "$WORK/haproxy.log")"
# a "certificate" that is not one: the plane refuses it before anything is
# stored (the agent runs the same check on what it renders, for sealed
# secrets the plane cannot read: test_pemcheck, fuzz_pemcheck)
V0=$(plane_version)
out=$(put secret/site "$(jq -n -c '{cert: "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
	key: "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"}')")
check "a certificate that is not one is refused by the plane, naming the secret and the field ($out)" \
	sh -c 'echo "$1" | grep -q "secret/site: cert: "' _ "$out"
check_eq "... nothing was stored" "$V0" "$(plane_version)"
check_eq "... the agent stays at version $VGOOD" "$VGOOD" "$(st h version)"

# a listener on a port another process holds: haproxy -c does not bind, and
# a reload that cannot bind makes haproxy's old workers pause their
# listeners while it retries; the agent tries the bind first and refuses it
# before anything goes live (the revert after a failed reload is exercised
# by the health probe below and by t0310)
start_tool holder backend.mjs "$XP" holder
HOLDER_PID=$TOOL_PID
jq -n -c --arg s "$(secret_body "$WORK/cert1.pem" "$WORK/key1.pem")" --argjson xp "$XP" '{upserts: [
 {name: "secret/site", body: ($s | fromjson)},
 {name: "listener/blocked", body: {address: "127.0.0.1", port: $xp}},
 {name: "route/blocked", body: {listener: "blocked", host: "*", path: "/", cluster: "a"}}]}' >"$WORK/blocked.json"
L0=$(lines)
RELOADS0=$(grep -c 'Reloading HAProxy' "$WORK/haproxy.log")
ctl apply "$WORK/blocked.json" >/dev/null
VBLK=$(plane_version)
check "the listener on a held port (version $VBLK) is NACKed" wait_until 20 has_nack h "$VBLK"
err=$(node_field h '.last_nack.error')
check "the NACK names the listener and the address in use" \
	grep -q "listener/blocked: 127.0.0.1:$XP is already in use by another process" <<<"$err"
diag "NACK: $err"
check_eq "haproxy was not reloaded" "$RELOADS0" "$(grep -c 'Reloading HAProxy' "$WORK/haproxy.log")"
check_eq "current still points at the good generation" "$GGOOD" "$(cur_gen)"
check "the marker answers the good generation" wait_until 10 marker_is "$GGOOD"
check "the haproxy master is still running" kill -0 "$HAP_PID"
check_eq "the agent stays at version $VGOOD" "$VGOOD" "$(st h version)"
check_eq "the other process still holds port $XP" "holder /" "$(curl -s -m 2 "http://127.0.0.1:$XP/")"
check_serves "traffic flows" /loop "b2 /loop"
check_eq "TLS serves" "b1 /s" "$(curl -sk -m 2 "https://127.0.0.1:$TP/s")"
check_eq "the refused generation was not kept" "$NGENS" "$(ngens)"
more 10
L1=$(lines)
check_eq "the client loop saw no failure meanwhile" 0 "$(fails "$L0" "$L1")"
stop_pid "$HOLDER_PID"

# a failed health probe: the reload takes, /health answers 503, the agent
# puts the old generation back
L0=$(lines)
RELOADS0=$(grep -c 'Reloading HAProxy' "$WORK/haproxy.log")
ctl apply - >/dev/null <<EOF
{"upserts":[
 {"name":"cluster/dead","body":{"endpoints":[{"address":"127.0.0.1","port":$DP}]}},
 {"name":"route/health","body":{"listener":"web","host":"*","path":"/health","cluster":"dead"}}],
 "removes":["route/blocked","listener/blocked"]}
EOF
VHLT=$(plane_version)
check "the push that breaks /health (version $VHLT) is NACKed" wait_until 20 has_nack h "$VHLT"
err=$(node_field h '.last_nack.error')
check "the NACK names the health probe" grep -q "health probe http://127.0.0.1:$LP/health failed" <<<"$err"
diag "NACK: $err"
check_eq "the plane shows the node unhealthy" false "$(node_field h .healthy)"
check_eq "current points at the good generation again" "$GGOOD" "$(cur_gen)"
check "the marker answers the good generation again" wait_until 10 marker_is "$GGOOD"
check_serves "/health answers from cluster a again" /health "b1 /health"
check_eq "the agent stays at version $VGOOD" "$VGOOD" "$(st h version)"
reloads_ge() {
	[ "$(grep -c 'Reloading HAProxy' "$WORK/haproxy.log")" -ge "$1" ]
}
check "haproxy was reloaded twice (the bad generation, then back)" wait_until 5 reloads_ge $((RELOADS0 + 2))
more 20
L1=$(lines)
check_eq "no client request failed across both reloads ($((L1 - L0)) requests)" 0 "$(fails "$L0" "$L1")"

# a later good push applies (and rotates the certificate)
jq -n -c --arg s "$(secret_body "$WORK/cert2.pem" "$WORK/key2.pem")" '{upserts: [
 {name: "secret/site", body: ($s | fromjson)},
 {name: "route/health", body: {listener: "web", host: "*", path: "/health", cluster: "a"}}],
 removes: ["cluster/dead"]}' >"$WORK/good.json"
L0=$(lines)
ctl apply "$WORK/good.json" >/dev/null
push_and_wait "a later good push applies"
VLAST=$V
check "the plane sees it ACKed and healthy" \
	wait_until 5 sh -c "curl -s '$PLANE_URL/v1/nodes/h' | jq -e '.acked_version == $VLAST and .lag == 0 and .healthy == true'"
check_eq "status.json says synced again" synced "$(st h state)"
check_eq "status.json's last_error is cleared" "" "$(st h last_error)"
check "TLS serves the new certificate" wait_until 5 sh -c \
	"[ \"\$(openssl s_client -connect 127.0.0.1:$TP </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 2>/dev/null)\" = '$(fingerprint_of "$WORK/cert2.pem")' ]"
check_serves "/health answers" /health "b1 /health"
check "a new .pem went live, 0600" sh -c "f=\$(grep -o 'ssl crt [^ ]*' '$OUT/current/tether.cfg' | cut -d' ' -f3) &&
	[ \"\$f\" != '$PEM1' ] && [ \"\$(stat -c %a \"\$f\")\" = 600 ] && grep -q \"\$(sed -n 2p '$WORK/cert2.pem')\" \"\$f\""
check "no secret is world- or group-readable" sh -c "[ -z \"\$(find '$OUT/secrets' -type f -perm /077)\" ]"
more 20
L1=$(lines)
check_eq "no client request failed across the good push ($((L1 - L0)) requests)" 0 "$(fails "$L0" "$L1")"
stop_pid "$CLIENT_PID"
L1=$(lines)
check_eq "no client request failed in the whole run ($L1 requests)" 0 "$(fails 0 "$L1")"

# ---- the end -------------------------------------------------------------------
stop_pid "${APID[h]}" TERM
check_eq "the agent exits 0 on SIGTERM" 0 "$?"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
