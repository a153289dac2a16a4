#!/usr/bin/env bash
# t0997-opts-snippets.sh: route options and snippets together on one
# listener, through a real nginx and a real haproxy, each with traffic
# counting on (the port bound by default) and off (--traffic-listen off).
# route/api (cluster/a) has options (timeout.read, rewrite, a response
# header, websocket) and a snippet (a response header); route/root
# (cluster/b) beside it is plain; cluster/a has health, keepalive and a
# snippet (nginx: keepalive_requests 1 in its upstream, so no upstream
# connection serves two requests; haproxy: a response header in its
# backend, which must also be in route/api's own backend tether_r_api);
# listener/web has a snippet too (nginx: what of it reaches a location, as
# tetherd(8) says).
# Each route reaches its cluster, the backend sees the rewritten path (a
# websocket too), both headers are on route/api only, haproxy's own 504
# carries the option's header, the live files pass nginx -t / haproxy -c,
# and with haproxy's runtime API an endpoint added to cluster/a reaches
# tether_r_api (with its health check) without a reload.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
. "$(dirname "$0")/lib-opts.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx haproxy node jq ss curl python3

HAP_PIDFILE=$WORK/haproxy.pid
trap 'stop_haproxy; t_cleanup' EXIT

start_tool ba opts-backend.mjs 0 a
PA=$TOOL_PORT
start_tool ba2 opts-backend.mjs 0 a2
PA2=$TOOL_PORT
start_tool bb opts-backend.mjs 0 b
PB=$TOOL_PORT
free_port LP
free_port MARK

start_plane p --heartbeat 1

ep() {
	echo "{\"address\":\"127.0.0.1\",\"port\":$1}"
}
# cluster_a ENDPOINT...: cluster/a's body with those endpoints
cluster_a() {
	local eps
	eps=$(printf '%s,' "$@")
	cat <<EOF
{"endpoints":[${eps%,}],"health":{"max_fails":3,"fail_timeout":10},"keepalive":4,
 "snippet":{"nginx":"keepalive_requests 1;","haproxy":"http-response set-header X-Cluster-Snip a"}}
EOF
}
state() {
	cat <<EOF
{"upserts":[
 {"name":"cluster/a","body":$(cluster_a "$(ep "$PA")")},
 {"name":"cluster/b","body":{"endpoints":[$(ep "$PB")]}},
 {"name":"listener/web","body":{"address":"127.0.0.1","port":$LP,"snippet":{
   "nginx":"add_header X-L on always;",
   "haproxy":"http-response set-header X-L on\nhttp-request set-header X-Listener 1"}}},
 {"name":"route/root","body":{"listener":"web","path":"/","cluster":"b"}},
 {"name":"route/api","body":{"listener":"web","path":"/api","cluster":"a","timeout":{"read":0.5},
   "rewrite":"/v1","headers":{"response":{"set":{"X-Opt":"api"}}},"websocket":true,
   "snippet":{"nginx":"add_header X-Snip 1 always;","haproxy":"http-response set-header X-Snip 1"}}}
]}
EOF
}
# header NAME PATH [CURL ARGS]: the value of response header NAME (lower case) for PATH
header() {
	local name=$1 path=$2
	shift 2
	curl -s --max-time 5 -D - -o /dev/null "$@" "http://127.0.0.1:$LP$path" |
		tr -d '\r' | awk -v h="$name:" 'tolower($1) == h {sub(/^[^:]*: */, ""); print}'
}
live_version() {
	agent_at "$NODE" "$1" && marker_is_current
}

# the checks of both proxies ($1: nginx or haproxy, $2: on or off)
scenario() {
	local px=$1 mode=$2 out
	check_eq "$px/$mode: route/root reaches cluster/b, path as sent" "b /x?q=1" "$(seen '/x?q=1' '.name + " " + .url')"
	check_eq "$px/$mode: route/api reaches cluster/a, rewritten (/api/x?q=1 -> /v1/x?q=1)" "a /v1/x?q=1" \
		"$(seen '/api/x?q=1' '.name + " " + .url')"
	check_eq "$px/$mode: /api goes up as /v1" "/v1" "$(seen /api .url)"
	check_eq "$px/$mode: the option's header on route/api" api "$(header x-opt /api/x)"
	check_eq "$px/$mode: the snippet's header on route/api" 1 "$(header x-snip /api/x)"
	check_eq "$px/$mode: no option header on route/root" "" "$(header x-opt /x)"
	check_eq "$px/$mode: no snippet header on route/root" "" "$(header x-snip /x)"
	check_eq "$px/$mode: timeout.read 0.5: a 2 s answer on route/api is a 504" 504 "$(code '/api/x?sleep=2000')"
	check_eq "$px/$mode: ... with the option's header (always)" api "$(header x-opt '/api/x?sleep=2000')"
	check_eq "$px/$mode: route/root waits 2 s for its backend" 200 "$(code '/x?sleep=2000')"
	# the listener's snippet
	check_eq "$px/$mode: the listener's header on route/root" on "$(header x-l /x)"
	if [ "$px" = nginx ]; then
		# nginx inherits add_header, proxy_set_header only into a block
		# with none of its own (tetherd(8), SNIPPETS)
		check_eq "nginx/$mode: not on route/api, whose location adds its own" "" "$(header x-l /api/x)"
		# a proxy_set_header there would reach no location: refused
		out=$(ctl put listener/web - 2>&1 <<<"{\"address\":\"127.0.0.1\",\"port\":$LP,\"snippet\":{\"nginx\":\"proxy_set_header X-Listener 1;\"}}")
		check "nginx/$mode: a listener's proxy_set_header is refused, naming where to put it ($out)" \
			grep -q "listener/web: snippet.nginx: line 1: 'proxy_set_header' in a listener's snippet never reaches a route.*headers.request.set" <<<"$out"
	else
		check_eq "haproxy/$mode: ... and on route/api" on "$(header x-l /api/x)"
		check_eq "haproxy/$mode: the listener's request header reaches both routes' backends" "1 1" \
			"$(seen /x '.headers["x-listener"]') $(seen /api/x '.headers["x-listener"]')"
	fi
	out=$(node "$TOOLS/ws-roundtrip.mjs" "http://127.0.0.1:$LP/api/chat" 2>&1)
	check "$px/$mode: websocket on route/api: upgraded, rewritten to /v1/chat, echoed ($out)" \
		test "${out#upgraded /v1/chat echoed }" != "$out"
}

# ---- nginx -------------------------------------------------------------------------------------
run_nginx() {
	local mode=$1 extra=() conf
	[ "$mode" = off ] && extra=(--traffic-listen off)
	NODE=ng$mode
	OUT=$WORK/$NODE.out
	ctl apply - >/dev/null <<<"$(state)" || bail "cannot load the configuration"
	V=$(plane_version)
	write_nginx_conf "$OUT"
	start_agent "$NODE" --consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" \
		--reload-timeout 5 --backoff-min 0.1 --backoff-max 1 "${extra[@]}"
	# the proxy starts on the applied version (the agent reloads none before)
	wait_until 20 agent_at "$NODE" "$V" || bail "nginx/$mode: the agent did not apply version $V"
	start_nginx
	check "nginx/$mode: version $V is live" wait_until 20 live_version "$V"
	conf=$OUT/current/tether.conf
	check "nginx/$mode: nginx -t passes with the live configuration" \
		nginx -t -q -p "$WORK" -c "$WORK/nginx.conf"
	if [ "$mode" = on ]; then
		check "nginx/on: the access log goes to the agent" grep -q 'access_log syslog:server=127.0.0.1:' "$conf"
	else
		check "nginx/off: no access log to the agent" sh -c "! grep -q 'syslog:server=' '$conf'"
	fi
	scenario nginx "$mode"
	check_eq "nginx/$mode: the cluster's snippet (keepalive_requests 1): 4 requests on route/api, 4 connections" \
		4 "$(ports 4 /api/x)"
	check "nginx/$mode: route/api's location: options, then the snippet" grep -Pzq \
		'rewrite "\(\?s\)\^/api\(/\(\.\*\)\)\?\$" /v1\$1 break;\n        #tether-snippet route/api snippet.nginx\n        add_header X-Snip 1 always;\n' "$conf"
	stop_pid "${APID[$NODE]}"
	stop_nginx
}

# ---- haproxy -----------------------------------------------------------------------------------
# ready_ports BACKEND: the ports of BACKEND's servers that are ready (not in maintenance)
ready_ports() {
	python3 "$TOOLS/hcli.py" "$SOCK" "show servers state $1" | awk '
		NR == 2 { for (i = 2; i <= NF; i++) col[$i] = i - 1 }
		NR > 2 && NF { a = $col["srv_admin_state"] + 0
			if (a % 2 == 0 && int(a / 2) % 2 == 0 && int(a / 32) % 2 == 0) print $col["srv_port"] }' | sort -n | xargs
}
reloads() {
	grep -c 'Reloading HAProxy' "$WORK/haproxy-$NODE.log"
}
# names N PATH: the distinct backend names N requests in a row reached
names() {
	local i
	for i in $(seq 1 "$1"); do seen "$2" .name; done | sort -u | xargs
}

run_haproxy() {
	local mode=$1 extra=() cfg R0
	[ "$mode" = off ] && extra=(--traffic-listen off)
	NODE=h$mode
	OUT=$WORK/$NODE.out
	SOCK=$WORK/$NODE.sock
	ctl apply - >/dev/null <<<"$(state)" || bail "cannot load the configuration"
	V=$(plane_version)
	write_haproxy_base "$WORK/base.cfg"
	start_agent "$NODE" --consumer haproxy --pidfile "$HAP_PIDFILE" --marker "127.0.0.1:$MARK" \
		--base-config "$WORK/base.cfg" --runtime-api "$SOCK" --reload-timeout 5 --backoff-max 1 "${extra[@]}"
	wait_until 20 agent_at "$NODE" "$V" || bail "haproxy/$mode: the agent did not apply version $V"
	haproxy -W -p "$HAP_PIDFILE" -f "$WORK/base.cfg" -f "$OUT/current/" >>"$WORK/haproxy-$NODE.log" 2>&1 &
	track_pid $!
	check "haproxy/$mode: version $V is live" wait_until 20 live_version "$V"
	cfg=$OUT/current/tether.cfg
	check "haproxy/$mode: haproxy -c passes with the live configuration" \
		haproxy -c -q -f "$WORK/base.cfg" -f "$cfg"
	if [ "$mode" = on ]; then
		check "haproxy/on: the access log goes to the agent" grep -q '^    log 127.0.0.1:' "$cfg"
	else
		check "haproxy/off: no access log to the agent" sh -c "! grep -q '^    log-format' '$cfg'"
	fi
	scenario haproxy "$mode"
	check_eq "haproxy/$mode: the cluster's snippet in route/api's own backend (tether_r_api)" a \
		"$(header x-cluster-snip /api/x)"
	check_eq "haproxy/$mode: ... and not on route/root (cluster/b)" "" "$(header x-cluster-snip /x)"
	check_eq "haproxy/$mode: the cluster's snippet in tether_c_a and in tether_r_api" 2 \
		"$(grep -c '^    http-response set-header X-Cluster-Snip a$' "$cfg")"

	# the runtime API: an endpoint added to cluster/a reaches route/api's own backend
	check "haproxy/$mode: the admin socket is there" wait_until 10 test -S "$SOCK"
	check_eq "haproxy/$mode: tether_r_api holds cluster/a's endpoint" "$PA" "$(ready_ports tether_r_api)"
	R0=$(reloads)
	put cluster/a "$(cluster_a "$(ep "$PA")" "$(ep "$PA2")")" >/dev/null
	V=$(plane_version)
	check "haproxy/$mode: an endpoint added: version $V is ACKed" \
		wait_until 15 sh -c "curl -s '$PLANE_URL/v1/nodes/$NODE' | jq -e '.acked_version == $V' >/dev/null"
	check "haproxy/$mode: it went over the runtime API" grep -q "applied version $V (.*; over the runtime API)" \
		"$WORK/$NODE.log"
	check_eq "haproxy/$mode: haproxy was not reloaded" "$R0" "$(reloads)"
	check_eq "haproxy/$mode: tether_r_api holds both endpoints" "$(printf '%s\n' "$PA" "$PA2" | sort -n | xargs)" \
		"$(ready_ports tether_r_api)"
	check "haproxy/$mode: route/api reaches the new endpoint (its health check lets it in)" \
		wait_until 5 sh -c "for i in 1 2 3 4; do curl -s -m 3 'http://127.0.0.1:$LP/api/x' | jq -r .name; done | grep -qx a2"
	check_eq "haproxy/$mode: ... with the cluster's snippet and route/api's headers" "a api 1" \
		"$(header x-cluster-snip /api/x) $(header x-opt /api/x) $(header x-snip /api/x)"
	check "haproxy/$mode: the master logged no reload failure" sh -c "! grep -q 'Loading failure' '$WORK/haproxy-$NODE.log'"
	stop_pid "${APID[$NODE]}"
	stop_haproxy
	rm -f "$HAP_PIDFILE"
}

for mode in on off; do
	run_nginx "$mode"
	run_haproxy "$mode"
done
done_testing
