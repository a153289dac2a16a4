#!/usr/bin/env bash
# t0959-gates-replicas.sh: traffic-aware gates with two plane replicas
# over --store etcd (a 3-member etcd cluster), one of them elected the
# rollout controller, and four tetherd nodes, each driving its own real
# nginx, all connected to the replica that is NOT the controller (so the
# canary is there, and the baseline too). A node's report sent to the
# follower reaches the controller through the node's record in etcd: the
# controller's /v1/nodes shows the traffic, and its gates judge the
# follower's nodes. Under load a good change completes with its first
# stage judged on traffic (a verdict of pass); a change sending /api to a
# cluster answering 500 is caught at the canary, reverted, the reason
# naming the route and the error rate; every node serves the good
# cluster again. A files node on the follower: the controller's listing
# says it does not count and why (the node's record in etcd).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"
. "$(dirname "$0")/lib-gates.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node jq ss curl

trap 'gates_stop_proxies; cleanup' EXIT

# ---- etcd, two replicas with every gate on ----------------------------------------------

gates_backends
etcd_cluster_start 3
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix /t0959/ --lease-ttl 3 --heartbeat 1 --rollout staged
	--stages 25,100 --bake "$BAKE" --ack-timeout 30 --gate-error-rate 0.05 --gate-latency-p99 300
	--gate-min-requests 30)
start_plane a "${E[@]}"
A_URL=$PLANE_URL
start_plane b "${E[@]}"
B_URL=$PLANE_URL

ctl_of() { curl -fsS "$1/metrics" | awk '$1 == "tether_rollout_controller" {print $2}'; }
controllers() { echo $(( $(ctl_of "$A_URL" || echo 0) + $(ctl_of "$B_URL" || echo 0) )); }
one_controller() { [ "$(controllers)" = 1 ]; }
check "one replica is elected the rollout controller" wait_until 20 one_controller
if [ "$(ctl_of "$A_URL")" = 1 ]; then
	C=a C_URL=$A_URL F=b F_URL=$B_URL
else
	C=b C_URL=$B_URL F=a F_URL=$A_URL
fi
diag "the controller is $C; the nodes connect to $F"

# the nodes connect to the follower (start_agent takes $PLANE_URL)
PLANE_URL=$F_URL
for i in $(seq 1 "$GATE_N"); do
	gates_nginx_node "$i" --traffic-listen "127.0.0.1:${GU[$i]}"
done
# writes, rollouts and gates: the controller's view
PLANE_URL=$C_URL

# connected_on URL: URL's replica counts the GATE_N nodes connected
connected_on() {
	curl -fsS "$1/v1/nodes" | jq -e --argjson n "$GATE_N" '[.[] | select(.connected)] | length == $n' >/dev/null
}
check "the four nodes connect to the follower ($F)" wait_until 30 connected_on "$F_URL"
check "the controller ($C) sees them connected too (one fleet view)" wait_until 20 connected_on "$C_URL"
streams_of() { curl -fsS "$1/metrics" | awk '$1 == "tether_streams" {print $2}'; }
check_eq "the follower holds their $GATE_N streams, the controller none" "$GATE_N 0" \
	"$(streams_of "$F_URL") $(streams_of "$C_URL")"

# ---- the story: reports reach the controller; a good change passes on them, a bad one is caught ----

# n1_traffic_seen: the controller's record of n1 counts /api's requests
n1_traffic_seen() {
	curl -fsS "$C_URL/v1/nodes/n1" |
		jq -e '.traffic.routes | map(select(.route == "route/n1-api")) | .[0].requests > 0' >/dev/null
}
gates_fleet_scenario "on the follower"

check_eq "the controller did not change meanwhile" 1 "$(ctl_of "$C_URL")"

# ---- a node of the follower that does not count: the controller knows why (its record) ----
PLANE_URL=$F_URL
start_agent f1 --consumer files --sub "cluster/good"
PLANE_URL=$C_URL
check "a files node on the follower: the controller's listing says it does not count, and why" wait_until 20 \
	sh -c "curl -fsS '$C_URL/v1/nodes/f1' | jq -e '.counts == false and .counts_reason == \"consumer files does not count traffic\"'"
done_testing
