#!/usr/bin/env bash
# t0958-gates-relay.sh: traffic-aware gates for nodes behind a relay. An
# origin with every gate on (gates_plane's options), one relay (r) and
# four tetherd nodes, each driving its own real nginx, all connected to
# the relay, none to the origin. The relay carries the origin's request
# for reports in its heartbeats, takes the nodes' POST /v1/report and
# forwards each node's last report up with its node records: the origin's
# /v1/nodes shows the traffic of the nodes behind the relay (via r), and
# its gates judge them. The first rollout, with no traffic, passes flagged
# low_traffic; under load a good change completes with a first stage
# judged on traffic (a verdict of pass, not low_traffic: the reports
# crossed the relay); a change sending /api to a cluster answering 500 is
# caught at the canary, reverted, the reason naming the route and the
# error rate; every node serves the good cluster again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
. "$(dirname "$0")/lib-gates.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node jq ss

trap 'gates_stop_proxies; cleanup' EXIT

# ---- the origin (every gate on), one relay ------------------------------------------------

gates_backends
gates_plane
ORIGIN=$PLANE_URL
start_plane r --upstream "$ORIGIN" --relay-id r --heartbeat 1
RELAY=$PLANE_URL
RELAY_LOG=$PLANE_LOG
check "the relay says it follows the origin" grep -q "relay: this plane is relay r of $ORIGIN" "$RELAY_LOG"

# the nodes connect to the relay (start_agent takes $PLANE_URL); n1 logs
# at debug, to show each report the relay took
PLANE_URL=$RELAY
for i in $(seq 1 "$GATE_N"); do
	extra=()
	[ "$i" = 1 ] && extra=(--log-level debug)
	gates_nginx_node "$i" --traffic-listen "127.0.0.1:${GU[$i]}" "${extra[@]}"
done
# writes, rollouts and gates are the origin's
PLANE_URL=$ORIGIN

# origin_via_r N: the origin counts N nodes connected, every one via r
origin_via_r() {
	curl -sS "$ORIGIN/v1/nodes" |
		jq -e --argjson n "$1" '[.[] | select(.connected and .via[0] == "r")] | length == $n' >/dev/null
}
check "the four nodes connect through the relay: the origin shows them, via r" wait_until 30 origin_via_r "$GATE_N"
check_eq "the relay lists its own four" "n1 n2 n3 n4" "$(curl -sS "$RELAY/v1/nodes" | jq -r '[.[].node] | sort | join(" ")')"

# ---- too little traffic: the first rollout passes each stage after the bake, flagged ----

gates_state | ctl apply - >/dev/null || bail "cannot load the first state"
V1=$(plane_version)
check "the first rollout (no traffic) completes after its bakes" \
	wait_until 60 ro_is ".to_version == $V1 and .state == \"completed\""
check "its stages passed flagged: too little traffic" ro_is '[.gate.stages[] | select(.verdict == "low_traffic")] | length >= 1'
check "every node serves /api through its nginx" wait_until 20 all_serve_good
asked=0
for i in $(seq 1 "$GATE_N"); do
	grep -q 'traffic: the plane asks for a report every' "$WORK/n$i.log" && asked=$((asked + 1))
done
check_eq "while it ran, the relay's heartbeats asked every node for reports" "$GATE_N" "$asked"

# ---- a good change under traffic completes, judged on the traffic the relay forwarded ----

gates_load 40
check "the load generator's requests are answered" \
	wait_until 15 sh -c "[ \"\$(jq '[.targets[].answered] | add' '$WORK/load.json')\" -gt 100 ]"
check "once the first rollout ended, the relay's heartbeats stopped asking for reports" \
	wait_until 15 grep -q 'traffic: the plane no longer asks for reports' "$WORK/n1.log"
gates_reroute web good2
V2=$(plane_version)
# n1_traffic_at_origin: the origin's record of n1 (via r) counts /api's requests
n1_traffic_at_origin() {
	curl -sS "$ORIGIN/v1/nodes/n1" |
		jq -e '.via[0] == "r" and (.traffic.routes | map(select(.route == "route/n1-api")) | .[0].requests > 0)' >/dev/null
}
check "while its rollout runs, the origin's /v1/nodes shows n1's traffic (via r): route/n1-api counts requests" \
	wait_until 25 n1_traffic_at_origin
check "a good change (/ to cluster good2) completes under traffic" \
	wait_until 60 ro_is ".to_version == $V2 and .state == \"completed\""
check "its first stage passed on traffic: a verdict of pass, not low_traffic (reports crossed the relay)" \
	ro_is '.gate.stages[0].verdict == "pass"'
diag "its first stage: $(ro '.gate.stages[0] | {verdict, reason, routes: [.routes[] | select(.canary.requests > 0 or .baseline.requests > 0) | {route, canary: .canary.requests, baseline: .baseline.requests, cn: .canary.nodes, bn: .baseline.nodes}]} | tostring')"
check "the comparison shows the canary's requests per route, beside a baseline of nodes behind the relay too" \
	ro_is 'any(.gate.stages[0].routes[]; .canary.requests > 0 and .canary.nodes == 1) and any(.gate.stages[0].routes[]; .baseline.requests > 0 and .baseline.nodes >= 1)'
check_eq "no 5xx so far" 0 "$(load_errors)"
check "the relay took n1's reports (n1 logged them delivered)" grep -q 'traffic: report delivered' "$WORK/n1.log"
check "no node had a report refused or undelivered" sh -c \
	"! grep -E 'refused the report|report was not delivered' '$WORK'/n[0-9].log"

# ---- a bad change that passes validation is caught at the canary ---------------------

gates_reroute api bad
caught_at_canary "the bad change"
check "the reason names route/nN-api and the error rate" sh -c \
	"echo \"\$1\" | grep -Eq 'route/n[0-9]-api' && echo \"\$1\" | grep -q 'error rate'" _ "$REASON"
check "the stage's verdict is fail" ro_is '[.gate.stages[] | select(.verdict == "fail")] | length == 1'
check "every node serves /api from cluster good again" wait_until 20 all_serve_good

# (the planes run --insecure, as lib.sh starts them: an anonymous report is
# not refused here; t0957 covers the credentials of POST /v1/report)

gates_load_stop
done_testing
