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

# ---- the story: reports cross the relay; a good change passes on them, a bad one is caught ----

# n1_traffic_seen: the origin's record of n1 (via r) counts /api's requests
n1_traffic_seen() {
	curl -sS "$ORIGIN/v1/nodes/n1" |
		jq -e '.via[0] == "r" and (.traffic.routes | map(select(.route == "route/n1-api")) | .[0].requests > 0)' >/dev/null
}
gates_fleet_scenario "behind the relay"
check "the relay took n1's reports (n1 logged them delivered)" grep -q 'traffic: report delivered' "$WORK/n1.log"

# (the planes run --insecure, as lib.sh starts them: an anonymous report is
# not refused here; t0957 covers the credentials of POST /v1/report)
done_testing
