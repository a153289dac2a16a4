# lib-gates.sh: the fleet of the traffic-aware gate tests, sourced after
# lib.sh and lib-proxy.sh: GATE_N nodes, each a tetherd driving its own
# real nginx or haproxy (its own listener, routes and marker, chosen by
# --sub, since one host cannot bind one port twice), clusters every node
# shares (good, good2, bad: every answer a 500, slow: 500 ms), a load
# generator sending to every node, and the checks on the rollout's gate.

GATE_N=${GATE_N:-4}
declare -a GL GM GU   # per node: listener port, marker port, traffic (UDP) port

# free_udp_port VAR: like free_port, for a UDP port.
free_udp_port() {
	local try=0
	while [ $try -lt 200 ]; do
		try=$((try + 1))
		free_port GATE_UDP_TRY   # (a global: free_port's own locals would hide a local here)
		if [ -z "$(ss -Huan "( sport = :$GATE_UDP_TRY )" 2>/dev/null)" ]; then
			printf -v "$1" '%s' "$GATE_UDP_TRY"
			return 0
		fi
	done
	bail "no free UDP port found"
}

# gates_backends: the shared clusters' backends.
gates_backends() {
	start_tool good backend.mjs 0 good
	PGOOD=$TOOL_PORT
	start_tool good2 backend.mjs 0 good2
	PGOOD2=$TOOL_PORT
	start_tool bad backend.mjs 0 bad 127.0.0.1 --status 500
	PBAD=$TOOL_PORT
	start_tool slow backend.mjs 0 slow 127.0.0.1 --delay 500
	PSLOW=$TOOL_PORT
	local i
	for i in $(seq 1 "$GATE_N"); do
		free_port "GL[$i]"
		free_port "GM[$i]"
		free_udp_port "GU[$i]"
	done
}

# gates_state: every cluster, and per node nI a listener and two routes
# (/api and the rest), all on cluster good; as a batch on stdin of ctl.
# (The listener is nI-l: a subscription's names are prefixes, and
# listener/n1 would take n10's too.)
gates_state() {
	local i sep=""
	printf '{"upserts":['
	for c in "good:$PGOOD" "good2:$PGOOD2" "bad:$PBAD" "slow:$PSLOW"; do
		printf '%s{"name":"cluster/%s","body":{"endpoints":[{"address":"127.0.0.1","port":%s}]}}' \
			"$sep" "${c%%:*}" "${c#*:}"
		sep=,
	done
	for i in $(seq 1 "$GATE_N"); do
		printf ',{"name":"listener/n%s-l","body":{"address":"127.0.0.1","port":%s}}' "$i" "${GL[$i]}"
		printf ',{"name":"route/n%s-api","body":{"listener":"n%s-l","host":"*","path":"/api","cluster":"good"}}' "$i" "$i"
		printf ',{"name":"route/n%s-web","body":{"listener":"n%s-l","host":"*","path":"/","cluster":"good"}}' "$i" "$i"
	done
	printf ']}\n'
}

# gates_reroute ROUTE CLUSTER: one batch pointing every node's ROUTE (api
# or web) at CLUSTER: one version, one rollout.
gates_reroute() {
	local i sep="" path=/
	[ "$1" = api ] && path=/api
	{
		printf '{"upserts":['
		for i in $(seq 1 "$GATE_N"); do
			printf '%s{"name":"route/n%s-%s","body":{"listener":"n%s-l","host":"*","path":"%s","cluster":"%s"}}' \
				"$sep" "$i" "$1" "$i" "$path" "$2"
			sep=,
		done
		printf ']}\n'
	} | ctl apply - >/dev/null
}

# gates_load RATE: the load generator, RATE requests a second to each node,
# /api and / in turn; its counts in $WORK/load.json.
LOAD_PID=""
gates_load() {
	local targets="" i
	for i in $(seq 1 "$GATE_N"); do
		targets+="${targets:+,}http://127.0.0.1:${GL[$i]}"
	done
	start_tool load loadgen.mjs "$WORK/load.json" --targets "$targets" --paths /api/x,/web --rate "$1"
	LOAD_PID=$TOOL_PID
}
gates_load_stop() {
	[ -n "$LOAD_PID" ] && stop_pid "$LOAD_PID"
	LOAD_PID=""
}
# load_errors: the 5xx answers the load generator saw so far
load_errors() {
	jq '[.targets[].errors] | add' "$WORK/load.json"
}
# load_first_5xx: the wall time (ms) of the first 5xx it saw (null: none)
load_first_5xx() {
	jq '[.targets[].first_5xx_ms | select(. != null)] | min' "$WORK/load.json"
}

# gates_nginx_node I [AGENT ARGS...]: node nI: its own real nginx (the
# operator's nginx.conf has no access log of its own) and its tetherd,
# subscribed to the shared clusters and its own listener and routes.
declare -a NPID
gates_nginx_node() {
	local i=$1
	shift
	mkdir -p "$WORK/nx$i"
	printf '%s\n' "pid $WORK/nx$i/nginx.pid;" "error_log $WORK/nx$i/error.log notice;" \
		"worker_processes 1;" "events { worker_connections 512; }" "http {" "    access_log off;" \
		"    include $WORK/n$i.out/current/*.conf;" "}" >"$WORK/nx$i/nginx.conf"
	nginx -p "$WORK/nx$i" -c "$WORK/nx$i/nginx.conf" -g 'daemon off;' >>"$WORK/nx$i/run.log" 2>&1 &
	NPID[$i]=$!
	track_pid "${NPID[$i]}"
	wait_until 10 sh -c "[ \"\$(cat '$WORK/nx$i/nginx.pid' 2>/dev/null)\" = ${NPID[$i]} ]" ||
		bail "nginx of n$i did not start"
	start_agent "n$i" --consumer nginx --pidfile "$WORK/nx$i/nginx.pid" --marker "127.0.0.1:${GM[$i]}" \
		--sub "cluster/,listener/n$i-l,route/n$i-" --reload-timeout 5 --backoff-min 0.1 --backoff-max 1 "$@"
}

# gates_haproxy_node I [AGENT ARGS...]: node nI with its own real haproxy
# (master-worker, started on the agent's first generation) and its tetherd.
gates_haproxy_node() {
	local i=$1
	shift
	mkdir -p "$WORK/hx$i"
	[ -f "$WORK/base.cfg" ] || printf '%s\n' global "    log stderr format raw local0" defaults \
		"    mode http" "    timeout connect 5s" "    timeout client 30s" "    timeout server 30s" \
		>"$WORK/base.cfg"
	start_agent "n$i" --consumer haproxy --pidfile "$WORK/hx$i/haproxy.pid" --marker "127.0.0.1:${GM[$i]}" \
		--base-config "$WORK/base.cfg" --sub "cluster/,listener/n$i-l,route/n$i-" --reload-timeout 5 \
		--backoff-min 0.1 --backoff-max 1 "$@"
	wait_until 10 test -f "$WORK/n$i.out/current/tether.cfg" || bail "n$i made no first generation"
	haproxy -W -p "$WORK/hx$i/haproxy.pid" -f "$WORK/base.cfg" -f "$WORK/n$i.out/current/" \
		>>"$WORK/hx$i/run.log" 2>&1 &
	track_pid $!
	wait_until 10 sh -c "curl -s -m 1 http://127.0.0.1:${GM[$i]}/tether-generation | grep -q ." ||
		bail "haproxy of n$i does not serve the marker"
}

# gates_stop_proxies: every node's nginx (QUIT) and haproxy master (from
# its pidfile: it stops its workers); for the trap.
gates_stop_proxies() {
	local i pid
	for i in $(seq 1 "$GATE_N"); do
		[ -n "${NPID[$i]:-}" ] && kill -QUIT "${NPID[$i]}" 2>/dev/null
		pid=$(cat "$WORK/hx$i/haproxy.pid" 2>/dev/null)
		[ -n "$pid" ] || continue
		kill -TERM "$pid" 2>/dev/null
		sleep 0.2
		kill -KILL "$pid" 2>/dev/null
		pkill -KILL -P "$pid" 2>/dev/null
	done
	return 0
}

# ro_done ID: rollout ID has ended (completed, rolled back or aborted)
ro_done() {
	ro_is ".id == $1 and .state != \"in_progress\""
}
# ro_started_after ID: a rollout after ID exists
ro_started_after() {
	ro_is ".id > $1"
}

# all_serve_good: every node serves /api from cluster good.
all_serve_good() {
	local p
	for p in ${GL[*]}; do
		[ "$(curl -s -m 2 "http://127.0.0.1:$p/api/x")" = 'good /api/x' ] || return 1
	done
}

# caught_at_canary WHAT: the rollout of the plane's newest version (WHAT
# it brings) starts and is rolled back, the canary alone touched; its
# reason into REASON.
caught_at_canary() {
	local v id
	v=$(plane_version)
	check "a rollout of $1 starts" wait_until 30 ro_is ".to_version == $v"
	id=$(ro .id)
	check "it is rolled back" wait_until 30 ro_is ".id == $id and .state == \"rolled_back\""
	check_eq "only the canary was touched" 1 "$(ro .touched)"
	REASON=$(ro .reason)
	diag "reason: $REASON"
}

# gates_first_5xx_to_revert: says how long from the first 5xx the load
# generator saw to the revert of the rollout just rolled back.
gates_first_5xx_to_revert() {
	local first fin
	first=$(load_first_5xx)
	fin=$(ro '.finished_at * 1000 | floor')
	diag "first 5xx seen by the load generator at $first ms, revert recorded at $fin ms: $((fin - first)) ms (bake $BAKE s, min-requests 30)"
}

# gates_plane: the plane of gates_scenario (a short bake, every gate on).
# Each node's routes are its own (route/nI-...), so a route has no
# baseline and the absolute forms compare with 0: the latency limit
# stands well above a good route's p99 on a loaded machine (54 ms seen in
# CI's sanitizer run; with 30 requests, p99 is nearly the slowest one)
# and well below the slow cluster's 500 ms.
BAKE=4
gates_plane() {
	start_plane p --heartbeat 1 --rollout staged --stages 25,100 --bake $BAKE --ack-timeout 30 \
		--gate-error-rate 0.05 --gate-latency-p99 300 --gate-min-requests 30
}

# gates_scenario: the end-to-end story t0955 (nginx) and t0956 (haproxy)
# tell, on the GATE_N nodes their test started, under gates_plane. The
# test sets what differs:
# G_PROXY (its name), G_REPORT_KEY (what n1 reports /api's requests
# under), G_BAD_KEY and G_SLOW_KEY (what the two reasons must name,
# extended regular expressions), G_COMPARE_DESC and G_COMPARE_JQ (the good
# change's comparison, a jq condition on the rollout), G_SHARED_CLUSTERS=1
# when canary and baseline count per cluster (a change of cluster/good's
# endpoints is then judged against a baseline that served it too).
gates_scenario() {
	check "four nodes connect" wait_until 15 sh -c "curl -s '$PLANE_URL/v1/nodes' | jq -e '[.[] | select(.connected)] | length == $GATE_N'"

	# ---- too little traffic: the first rollout passes each stage after the bake, flagged ----
	gates_state | ctl apply - >/dev/null || bail "cannot load the first state"
	V1=$(plane_version)
	check "the first rollout (no traffic) completes after its bakes" wait_until 40 ro_is ".to_version == $V1 and .state == \"completed\""
	check "its stages passed flagged: too little traffic" ro_is '[.gate.stages[] | select(.verdict == "low_traffic")] | length >= 1'
	check "every node serves /api through its $G_PROXY" wait_until 10 all_serve_good

	# ---- a good change under traffic completes -------------------------------------------
	gates_load 40
	check "the load generator's requests are answered" wait_until 10 sh -c "[ \"\$(jq '[.targets[].answered] | add' '$WORK/load.json')\" -gt 100 ]"
	check "once the first rollout ended, the plane's heartbeats stopped asking for reports" \
		grep -q 'the plane no longer asks for reports' "$WORK/n1.log"
	gates_reroute web good2
	V2=$(plane_version)
	check "while its rollout runs, the nodes report their traffic: n1's $G_REPORT_KEY counts requests" wait_until 15 sh -c \
		"curl -s '$PLANE_URL/v1/nodes/n1' | jq -e '.traffic.routes | map(select(.route == \"$G_REPORT_KEY\")) | .[0].requests > 0'"
	check "a good change (/ to cluster good2) completes under traffic" wait_until 40 ro_is ".to_version == $V2 and .state == \"completed\""
	check "its first stage passed on traffic (a verdict of pass)" ro_is '.gate.stages[0].verdict == "pass"'
	diag "its gate: $(ro '.gate.stages[0] | tostring')"
	check "the comparison shows $G_COMPARE_DESC" ro_is "$G_COMPARE_JQ"
	check_eq "no 5xx so far" 0 "$(load_errors)"
	check "/metrics shows the nodes' traffic" sh -c "curl -s '$PLANE_URL/metrics' | grep -q '^tether_node_traffic_requests{node=\"n1\"} [1-9]'"

	# ---- a bad change that passes validation is caught at the canary ---------------------
	gates_reroute api bad
	caught_at_canary "the bad change"
	check "the reason names $G_BAD_KEY" sh -c "echo \"\$1\" | grep -Eq \"\$2\"" _ "$REASON" "$G_BAD_KEY"
	check "the reason gives the rates of both sides" sh -c "echo \"\$1\" | grep -q 'error rate' && echo \"\$1\" | grep -q baseline" _ "$REASON"
	check "the stage's verdict is fail" ro_is '[.gate.stages[] | select(.verdict == "fail")] | length == 1'
	gates_first_5xx_to_revert
	check "every node serves /api from cluster good again" wait_until 15 all_serve_good
	# (requests the canary's old workers were still finishing may answer 5xx
	# for a moment after the revert: counted from 2 s on)
	sleep 2
	E1=$(load_errors)
	sleep 3
	check_eq "no 5xx once reverted" "$E1" "$(load_errors)"

	# ---- a backend list that drops the healthy endpoints, judged against the baseline ----
	# (only where canary and baseline name their traffic alike: haproxy's
	# counters are per cluster, and every node serves cluster/good)
	if [ "${G_SHARED_CLUSTERS:-0}" = 1 ]; then
		wait_until 30 ro_is '.state != "in_progress"' || diag "a rollout still runs: $(ro '. | tostring')"
		echo "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$PBAD}]}" | ctl put cluster/good >/dev/null ||
			diag "tetherctl put cluster/good failed"
		caught_at_canary "cluster/good's new endpoints"
		check "the reason names cluster/good, compared with a baseline that served it" \
			sh -c "echo \"\$1\" | grep -q 'gate: cluster/good' && ! echo \"\$1\" | grep -q 'too little traffic'" _ "$REASON"
		check "every node serves /api from cluster good again" wait_until 15 all_serve_good
	fi

	# ---- a slower cluster (500 ms against a few ms) is caught on p99 ----
	gates_reroute api slow
	caught_at_canary "the change toward the slow cluster"
	check "the reason names p99 and $G_SLOW_KEY" sh -c "echo \"\$1\" | grep -q p99 && echo \"\$1\" | grep -Eq \"\$2\"" _ "$REASON" "$G_SLOW_KEY"

	# ---- tetherctl shows the comparison --------------------------------------------------
	check "tetherctl rollout status shows the gate's comparison" sh -c "'$CTL_BIN' --plane '$PLANE_URL' rollout status | grep -qi 'baseline'"

	gates_load_stop
}

# gates_fleet_scenario WHERE: the story of t0958 (nodes behind a relay)
# and t0959 (nodes on the replica that is not the controller), with the
# GATE_N nginx nodes the test started WHERE, and $PLANE_URL the plane that
# judges. The test defines n1_traffic_seen: that plane shows n1's traffic.
# The first rollout, with no traffic, passes flagged, every node having
# been asked for reports; under load a good change passes on the traffic
# that came WHERE (a verdict of pass, not low_traffic); a change sending
# /api to the 500ing cluster is caught at the canary.
gates_fleet_scenario() {
	local where=$1 i asked=0
	gates_state | ctl apply - >/dev/null || bail "cannot load the first state"
	V1=$(plane_version)
	check "the first rollout (no traffic) completes after its bakes" \
		wait_until 60 ro_is ".to_version == $V1 and .state == \"completed\""
	check "its stages passed flagged: too little traffic" ro_is '[.gate.stages[] | select(.verdict == "low_traffic")] | length >= 1'
	check "every node serves /api through its nginx" wait_until 20 all_serve_good
	for i in $(seq 1 "$GATE_N"); do
		grep -q 'traffic: the plane asks for a report every' "$WORK/n$i.log" && asked=$((asked + 1))
	done
	check_eq "while it ran, every node $where was asked for reports" "$GATE_N" "$asked"

	gates_load 40
	check "the load generator's requests are answered" \
		wait_until 15 sh -c "[ \"\$(jq '[.targets[].answered] | add' '$WORK/load.json')\" -gt 100 ]"
	check "once the first rollout ended, n1 was no longer asked for reports" \
		wait_until 15 grep -q 'traffic: the plane no longer asks for reports' "$WORK/n1.log"
	gates_reroute web good2
	V2=$(plane_version)
	check "while its rollout runs, the judging plane shows n1's traffic, reported $where" wait_until 25 n1_traffic_seen
	check "no node had a report refused or undelivered" sh -c \
		"! grep -E 'refused the report|report was not delivered' '$WORK'/n[0-9].log"
	check "a good change (/ to cluster good2) completes under traffic" \
		wait_until 60 ro_is ".to_version == $V2 and .state == \"completed\""
	check "its first stage passed on traffic: a verdict of pass, not low_traffic" ro_is '.gate.stages[0].verdict == "pass"'
	diag "its first stage: $(ro '.gate.stages[0] | {verdict, reason, routes: [.routes[] | select(.canary.requests > 0 or .baseline.requests > 0) | {route, canary: .canary.requests, baseline: .baseline.requests, cn: .canary.nodes, bn: .baseline.nodes}]} | tostring')"
	check "the comparison shows the canary's requests per route, beside a baseline of nodes $where too" \
		ro_is 'any(.gate.stages[0].routes[]; .canary.requests > 0 and .canary.nodes == 1) and any(.gate.stages[0].routes[]; .baseline.requests > 0 and .baseline.nodes >= 1)'
	check_eq "no 5xx so far" 0 "$(load_errors)"

	gates_reroute api bad
	caught_at_canary "the bad change"
	check "the reason names route/nN-api and the error rate" sh -c \
		"echo \"\$1\" | grep -Eq 'route/n[0-9]-api' && echo \"\$1\" | grep -q 'error rate'" _ "$REASON"
	check "the stage's verdict is fail" ro_is '[.gate.stages[] | select(.verdict == "fail")] | length == 1'
	gates_first_5xx_to_revert
	check "every node serves /api from cluster good again" wait_until 20 all_serve_good
	gates_load_stop
}
