#!/usr/bin/env bash
# t0950-traffic-agent.sh: tetherd counts the live generation's traffic
# (traffic-aware gates, docs/gates.md) from a real nginx's access log over
# local syslog: --traffic-listen refuses a non-loopback address; the
# rendered configuration passes nginx -t and names the live generation;
# the agent's /metrics count requests per route, a 5xx backend's errors and
# unrouted requests ("-"), not the marker's probes; lines of another
# generation are counted apart; junk and oversized datagrams are dropped
# and counted by reason, and a flood of them does not stop the agent from
# applying a push; a new generation starts from zero; the real plane's
# node listing shows the traffic the last ACK carried. Then, against the
# scripted stand-in plane (heartbeats timed exactly): the ACK carries the live generation's traffic, and heartbeats saying
# "report":S make reports arrive every S seconds, until they stop saying so
# or stop coming (the request lapses after three heartbeat intervals).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node ss pgrep

trap t_cleanup EXIT

# free_udp_port VAR: a loopback UDP port no socket holds
free_udp_port() {
	local p i
	for i in $(seq 1 500); do
		p=$((10000 + RANDOM % 20000))
		[ -z "${T_PORTS_TAKEN[$p]:-}" ] || continue
		if [ -z "$(ss -Huan "( sport = :$p )" 2>/dev/null)" ]; then
			T_PORTS_TAKEN[$p]=1
			printf -v "$1" '%s' "$p"
			return 0
		fi
	done
	bail "no free UDP port found"
}

# udp PORT COUNT SIZE|TEXT: COUNT datagrams to 127.0.0.1:PORT, each TEXT
# (or SIZE bytes of 'x' when it is a number), sent as fast as they go.
cat >"$WORK/udp.mjs" <<'EOF'
import dgram from 'node:dgram';
const [port, count, what] = process.argv.slice(2);
const msg = /^[0-9]+$/.test(what) ? Buffer.alloc(Number(what), 'x') : Buffer.from(what);
const s = dgram.createSocket('udp4');
let left = Number(count), pending = Number(count);
const sent = () => {
	if (--pending === 0)
		s.close();
};
function more() {
	for (let k = 0; k < 256 && left > 0; k++, left--)
		s.send(msg, Number(port), '127.0.0.1', sent);
	if (left > 0)
		setImmediate(more);
}
more();
EOF
udp() {
	node "$WORK/udp.mjs" "$@"
}

# am NAME: a series of the agent's /metrics ('name{label="v"}' whole)
am() {
	curl -s --max-time 3 "http://127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
am_is() {
	[ "$(am "$1")" = "$2" ]
}
am_ge() {
	local v
	v=$(am "$1")
	[ -n "$v" ] && [ "$v" -ge "$2" ]
}

# ---- options ---------------------------------------------------------------------------
out=$("$AGENT_BIN" --plane http://127.0.0.1:1 --consumer nginx --reload true --output-dir "$WORK/x" \
	--traffic-listen 10.0.0.1:5514 --check-config 2>&1)
check "--traffic-listen refuses a non-loopback address ($out)" \
	grep -q "traffic-listen: '10.0.0.1:5514' is not a loopback address: only 127.0.0.0/8 or \[::1\]" <<<"$out"
out=$("$AGENT_BIN" --plane http://127.0.0.1:1 --consumer nginx --reload true --output-dir "$WORK/x" \
	--traffic-listen localhost:5514 --check-config 2>&1)
check "--traffic-listen wants a numeric address ($out)" grep -q "the address must be numeric" <<<"$out"
out=$("$AGENT_BIN" --plane http://127.0.0.1:1 --traffic-listen 127.0.0.1:5514 --check-config 2>&1)
check "--traffic-listen needs a consumer that serves traffic ($out)" grep -q "files consumer serves no traffic" <<<"$out"
out=$("$AGENT_BIN" --plane http://127.0.0.1:1 --consumer nginx --reload true --output-dir "$WORK/x" \
	--traffic-socket /run/h.sock --check-config 2>&1)
check "--traffic-socket is haproxy's ($out)" grep -q "needs --consumer haproxy" <<<"$out"

# ---- a real plane, a real nginx ------------------------------------------------------------
start_tool ba backend.mjs 0 A
PA=$TOOL_PORT
free_port LMAIN
free_port MARK
free_udp_port TPORT
OUT=$WORK/ng.out

# --allow-unknown-fields: route/api's x-note below changes the route and not its rendering
start_plane p --heartbeat 1 --allow-unknown-fields
write_nginx_conf "$OUT"
start_nginx
ctl apply - >/dev/null <<EOF || bail "cannot load the initial configuration"
{"upserts":[
 {"name":"cluster/a","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":$PA}]}},
 {"name":"cluster/broken","body":{"lb":"round_robin","endpoints":[]}},
 {"name":"listener/main","body":{"address":"127.0.0.1","port":$LMAIN}},
 {"name":"route/api","body":{"listener":"main","host":"*","path":"/api","cluster":"a"}},
 {"name":"route/fail","body":{"listener":"main","host":"*","path":"/fail","cluster":"broken"}}
]}
EOF
V1=$(plane_version)
start_agent ng --consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" --reload-timeout 5 \
	--traffic-listen "127.0.0.1:$TPORT" --metrics-listen 127.0.0.1:0 --backoff-min 0.1 --backoff-max 1
check "the agent applies version $V1" wait_until 20 agent_at ng "$V1"
check "it listens for the access log on udp 127.0.0.1:$TPORT" \
	wait_until 5 sh -c "ss -Huan '( sport = :$TPORT )' | grep -q 127.0.0.1:$TPORT"
wait_until 5 grep -q 'metrics: serving http://127.0.0.1:[0-9]*/metrics' "$WORK/ng.log" || bail "no metrics listener"
MPORT=$(grep -o 'metrics: serving http://127.0.0.1:[0-9]*' "$WORK/ng.log" | tail -n 1 | sed 's/.*://')
check "traffic through nginx reaches backend A" wait_until 10 answers "A /api/x" "$LMAIN" /api/x
G1=$(current)
G1=${G1#gen-}
check "the live generation passes nginx -t" nginx -t -q -p "$OUT/current" -e stderr -c "$OUT/current/check.nginx"
check "its log format names the live generation ($G1)" \
	grep -qF "log_format tether_traffic escape=none 'tether1 $G1 \$status \${request_time}s \$tether_route';" \
	"$OUT/current/tether.conf"
check "the marker answers the same id" marker_is_current

# ---- counting -------------------------------------------------------------------------------
for i in $(seq 1 19); do get "$LMAIN" /api/x >/dev/null; done
for i in $(seq 1 5); do code_is 502 "$LMAIN" /fail/y || diag "/fail/y did not answer 502"; done
for i in $(seq 1 3); do code_is 404 "$LMAIN" /nothing || diag "/nothing did not answer 404"; done
check "20 requests counted for route/api" wait_until 10 am_is 'tetherd_traffic_requests_total{route="route/api"}' 20
check_eq "no errors on route/api" 0 "$(am 'tetherd_traffic_errors_total{route="route/api"}')"
check "5 requests on route/fail (a cluster without endpoints)" \
	wait_until 5 am_is 'tetherd_traffic_requests_total{route="route/fail"}' 5
check_eq "all 5 of them errors (502)" 5 "$(am 'tetherd_traffic_errors_total{route="route/fail"}')"
check "3 unrouted requests (404) as route \"-\", none of the marker's probes" \
	wait_until 5 am_is 'tetherd_traffic_requests_total{route="-"}' 3
check "route/api's p50 and p99 latency are reported" \
	sh -c "curl -s http://127.0.0.1:$MPORT/metrics | grep -Eq '^tetherd_traffic_latency_p99_ms\\{route=\"route/api\"\\} [0-9.]+\$'"
check_eq "nothing dropped" "0 0 0" "$(am 'tetherd_traffic_dropped_total{reason="malformed"}') $(am 'tetherd_traffic_dropped_total{reason="too_long"}') $(am 'tetherd_traffic_dropped_total{reason="full"}')"

# a line of another generation is not the live one's
udp "$TPORT" 1 "<190>Dec  2 03:30:00 tether: tether1 0000000000000000 200 0.001s route/api"
check "a line of another generation is counted apart" wait_until 5 am_is tetherd_traffic_other_generation_total 1
check_eq "and not as route/api's" 20 "$(am 'tetherd_traffic_requests_total{route="route/api"}')"

# junk and oversized datagrams
udp "$TPORT" 3 "junk"
udp "$TPORT" 2 3000
check "3 junk datagrams dropped as malformed" wait_until 5 am_is 'tetherd_traffic_dropped_total{reason="malformed"}' 3
check "2 oversized datagrams dropped as too_long" wait_until 5 am_is 'tetherd_traffic_dropped_total{reason="too_long"}' 2
check_eq "the counts did not move" "20 5 3" "$(am 'tetherd_traffic_requests_total{route="route/api"}') $(am 'tetherd_traffic_requests_total{route="route/fail"}') $(am 'tetherd_traffic_requests_total{route="-"}')"

# ---- a flood while a push applies; the new generation starts from zero -----------------------
udp "$TPORT" 200000 "<190>Dec  2 03:30:00 tether: not our format at all" &
FLOOD=$!
track_pid "$FLOOD"
put route/api "{\"listener\":\"main\",\"host\":\"*\",\"path\":\"/api\",\"cluster\":\"a\",\"x-note\":\"v2\"}" >/dev/null
put cluster/a "{\"lb\":\"least_conn\",\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$PA}]}" >/dev/null
V2=$(plane_version)
check "under a flood of junk datagrams the agent applies version $V2" wait_until 20 agent_at ng "$V2"
check "the flood is dropped and counted" wait_until 10 am_ge 'tetherd_traffic_dropped_total{reason="malformed"}' 1000
check "metrics still answer during the flood" am_ge 'tetherd_traffic_dropped_total{reason="too_long"}' 2
wait "$FLOOD" 2>/dev/null
untrack_pid "$FLOOD"
# the agent has read what the flood left in its socket: until then the
# kernel drops nginx's lines for a full buffer (a slow or loaded machine
# drains it later)
recvq_empty() { [ "$(ss -Huan "( sport = :$TPORT )" | awk '{ print $2 }' | head -n 1)" = 0 ]; }
check "the agent has drained the flood from its socket" wait_until 20 recvq_empty
G2=$(current)
G2=${G2#gen-}
check "a new generation is live ($G1 -> $G2)" test -n "$G2" -a "$G2" != "$G1"
check "the marker answers it" wait_until 5 marker_is_current
# (the two puts made two reloads: a worker of the generation between,
# shutting down, may still take a request; counted exactly once it left)
one_worker() { [ "$(pgrep -c -P "$(cat "$WORK/nginx.pid")")" = 1 ]; }
check "the older generations' nginx workers have left" wait_until 10 one_worker
check_eq "the new generation starts from zero (no route counted)" "" \
	"$(am 'tetherd_traffic_requests_total{route="route/api"}')"
for i in $(seq 1 4); do get "$LMAIN" /api/z >/dev/null; done
check "4 requests counted for route/api in the new generation" \
	wait_until 10 am_is 'tetherd_traffic_requests_total{route="route/api"}' 4
check_eq "route/fail not seen in it yet" "" "$(am 'tetherd_traffic_requests_total{route="route/fail"}')"
udp "$TPORT" 1 "<190>Dec  2 03:30:00 tether: tether1 $G1 200 0.001s route/api"
check "a late line of the old generation is counted apart" wait_until 5 am_is tetherd_traffic_other_generation_total 2
check_eq "and not as the new one's" 4 "$(am 'tetherd_traffic_requests_total{route="route/api"}')"
check "the agent logged nothing at error level about traffic" sh -c "! grep -E 'error.*traffic' '$WORK/ng.log'"

# hosts, a wildcard host and an IPv6 syslog address: nginx -t takes the
# render (the nginx consumer's own check, in an agent run with --once,
# once nginx let go of the listener's address)
put route/host '{"listener":"main","host":"h.test","path":"/","cluster":"a"}' >/dev/null
put route/wild '{"listener":"main","host":"*.w.test","path":"/v","cluster":"broken"}' >/dev/null
V3=$(plane_version)
check "the agent applies version $V3 (nginx took it)" wait_until 20 agent_at ng "$V3"
G3=$(current)
G3=${G3#gen-}
check "the plane's node listing shows the traffic of the generation its last ACK made live" \
	wait_until 5 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.traffic.gen == \"$G3\" and .traffic.version == $V3'"
# (the listener's address is nginx's: the new agent would refuse to bind it)
stop_nginx
check "an agent rendering version $V3 with --traffic-listen [::1]:PORT passes nginx -t (--once)" \
	"$AGENT_BIN" --node v6 --state-dir "$WORK/v6.state" --output-dir "$WORK/v6.out" --plane "$PLANE_URL" --once \
	--consumer nginx --reload true --marker off --traffic-listen "[::1]:$TPORT"
check_eq "its servers log to [::1]: one access_log per server (h.test, *.w.test, any host)" 3 \
	"$(grep -c "^    access_log syslog:server=\[::1\]:$TPORT,facility=local7,tag=tether,severity=info,nohostname tether_traffic;\$" "$WORK/v6.out/current/tether.conf")"
check_eq "and each route's location names its route" "route/api route/fail route/host route/wild" \
	"$(grep -o 'set \$tether_route route/[a-z]*' "$WORK/v6.out/current/tether.conf" | awk '{print $3}' | sort | xargs)"

# ---- ACKs and reports, against the scripted stand-in --------------------------------------------
# The real plane asks for reports only while a gated rollout runs (t0955
# and t0956 check that end to end); to check the cadence exactly, the
# scripted stand-in plays heartbeats (every 0.2 s) that ask for a
# report every 0.3 s for 2 s, then none for 1.5 s (the request lapses after
# three intervals), then asking ones again for 1 s, then ones that do not
# ask. (--stream-timeout keeps the quiet stream alive meanwhile.)
free_port LREP
hb_on='{"event":"heartbeat","data":{"version":1,"time":0,"interval":0.2,"report":0.3},"delay_ms":200}'
hb_off='{"event":"heartbeat","data":{"version":1,"time":0,"interval":0.2},"delay_ms":200}'
{
	echo '['
	echo " {\"event\":\"push\",\"id\":\"1\",\"data\":{\"version\":1,\"base\":0,\"full\":true,\"nonce\":\"r.1\",\"removed\":[],\"upserts\":["
	echo "  {\"name\":\"cluster/a\",\"version\":1,\"body\":{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$PA}]}},"
	echo "  {\"name\":\"listener/l\",\"version\":1,\"body\":{\"address\":\"127.0.0.1\",\"port\":$LREP}},"
	echo "  {\"name\":\"route/r\",\"version\":1,\"body\":{\"listener\":\"l\",\"host\":\"*\",\"path\":\"/\",\"cluster\":\"a\"}}]}},"
	echo ' {"wait_acks":1,"timeout_ms":10000},'
	for i in $(seq 1 10); do echo " $hb_on,"; done
	echo ' {"delay_ms":1500},'
	for i in $(seq 1 5); do echo " $hb_on,"; done
	for i in $(seq 1 40); do echo " $hb_off,"; done
	echo ' {"delay_ms":1}]'
} >"$WORK/rp.json"
jq -e . "$WORK/rp.json" >/dev/null || bail "the script rp.json is not JSON"
start_tool rp sse-server.mjs --script "$WORK/rp.json" --acks "$WORK/rp.acks" --requests "$WORK/rp.requests"
RP=$TOOL_PORT
free_udp_port TPORT2
start_agent rp --plane "http://127.0.0.1:$RP" --consumer nginx --reload true --check true --marker off \
	--traffic-listen "127.0.0.1:$TPORT2" --stream-timeout 10 --backoff-min 0.1 --backoff-max 1 --log-level debug
check "the agent ACKs the stand-in's push" wait_until 15 count_ge 1 '"nonce":"r.1"' "$WORK/rp.acks"
RG=$(readlink "$WORK/rp.out/current")
RG=${RG#gen-}
check_eq "the ACK carries the live generation's traffic (version 1, generation $RG, no route yet)" \
	"1 $RG 0 true" "$(jq -r 'select(.nonce == "r.1") | "\(.traffic.version) \(.traffic.gen) \(.traffic.routes | length) \(.traffic.since <= .traffic.until)"' "$WORK/rp.acks" | head -n 1)"
reports() {
	grep -c '"method":"POST","path":"/v1/report"' "$WORK/rp.requests"
}
check "heartbeats with \"report\":0.3 make reports arrive (POST /v1/report)" \
	wait_until 10 count_ge 3 '"method":"POST","path":"/v1/report"' "$WORK/rp.requests"
check "without heartbeats the request lapses" \
	wait_until 10 grep -q 'traffic: no heartbeat renewed the request for reports' "$WORK/rp.log"
n=$(reports)
check "about one report per 0.3 s over the 2 s they were asked for ($n)" test "$n" -ge 4 -a "$n" -le 10
check "asking heartbeats start them again" wait_until 10 count_ge 2 'traffic: the plane asks for a report every 0.3s' "$WORK/rp.log"
# (counted as the agent sends them: the answer to one sent before the
# lapse may come after it)
check_eq "no report went out between the lapse and the new request" 0 \
	"$(awk '/no heartbeat renewed the request/ {on = 1} on && /asks for a report every/ {exit} on && /sending a report/ {n++} END {print n + 0}' "$WORK/rp.log")"
check "the agent stops when the heartbeats no longer ask" \
	wait_until 10 grep -q 'traffic: the plane no longer asks for reports' "$WORK/rp.log"
n2=$(reports)
check "reports came again while asked ($n -> $n2)" test "$n2" -gt "$n"
# (the absence of something can only be seen over a while)
sleep 1
check_eq "no report after that" "$n2" "$(reports)"
check "reports are posted as JSON" \
	grep -q '"path":"/v1/report".*"content-type":"application/json"' "$WORK/rp.requests"
check "the stand-in's 404 for /v1/report is no warning (debug only)" \
	sh -c "grep -q 'traffic: the plane refused the report (404)' '$WORK/rp.log' && ! grep -q 'report was not delivered' '$WORK/rp.log'"

done_testing
