#!/usr/bin/env bash
# t0956-gates-haproxy.sh: traffic-aware gates end to end with four tetherd
# nodes, each driving its own real haproxy (master-worker, SIGUSR2
# reloads); the agents read haproxy's counters over its stats socket
# (--traffic-socket: per cluster, the latency haproxy's mean), and a load
# generator sends to every node. The first
# rollout, with no traffic, passes each stage after the bake, flagged. A
# good change under traffic completes. A change that sends /api to a
# cluster answering 500 passes validation, nginx -t and the reload, and is
# caught at the first stage: reverted, the canary alone touched, the
# reason naming the cluster the route went to and the rates. A change toward a cluster ten
# times slower is caught on p99. The nodes and /metrics show the traffic.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
. "$(dirname "$0")/lib-gates.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd haproxy node jq ss

trap 'gates_stop_proxies; cleanup' EXIT

gates_backends
BAKE=4
start_plane p --heartbeat 1 --rollout staged --stages 25,100 --bake $BAKE --ack-timeout 30 \
	--gate-error-rate 0.05 --gate-latency-p99 20 --gate-min-requests 30

for i in $(seq 1 "$GATE_N"); do
	gates_haproxy_node "$i" --traffic-socket "$WORK/hx$i/stats.sock"
done
check "four nodes connect" wait_until 15 sh -c "curl -s '$PLANE_URL/v1/nodes' | jq -e '[.[] | select(.connected)] | length == $GATE_N'"

# ---- too little traffic: the first rollout passes each stage after the bake, flagged ----
gates_state | ctl apply - >/dev/null || bail "cannot load the first state"
V1=$(plane_version)
check "the first rollout (no traffic) completes after its bakes" wait_until 40 ro_is ".to_version == $V1 and .state == \"completed\""
check "its stages passed flagged: too little traffic" ro_is '[.gate.stages[] | select(.verdict == "low_traffic")] | length >= 1'
check "every node serves /api through its haproxy" wait_until 10 sh -c "
	for p in ${GL[*]}; do [ \"\$(curl -s -m 2 http://127.0.0.1:\$p/api/x)\" = 'good /api/x' ] || exit 1; done"

# ---- a good change under traffic completes -------------------------------------------
gates_load 40
check "the load generator's requests are answered" wait_until 10 sh -c "[ \"\$(jq '[.targets[].answered] | add' '$WORK/load.json')\" -gt 100 ]"
gates_reroute web good2
V2=$(plane_version)
check "while its rollout runs, the nodes report haproxy's counters: n1's cluster/good counts requests" wait_until 15 sh -c \
	"curl -s '$PLANE_URL/v1/nodes/n1' | jq -e '.traffic.routes | map(select(.route == \"cluster/good\")) | .[0].requests > 0'"
check "a good change (/ to cluster good2) completes under traffic" wait_until 40 ro_is ".to_version == $V2 and .state == \"completed\""
check "its first stage passed on traffic (a verdict of pass)" ro_is '.gate.stages[0].verdict == "pass"'
diag "its gate: $(ro '.gate.stages[0] | tostring')"
check "the comparison shows cluster/good on both sides (canary and baseline served it)" \
	ro_is 'any(.gate.stages[0].routes[]; .route == "cluster/good" and .canary.requests > 0 and .baseline.requests > 0)'
check_eq "no 5xx so far" 0 "$(load_errors)"
check "/metrics shows the nodes' traffic" sh -c "curl -s '$PLANE_URL/metrics' | grep -q '^tether_node_traffic_requests{node=\"n1\"} [1-9]'"

# ---- a bad change that passes validation is caught at the canary ---------------------
gates_reroute api bad
V3=$(plane_version)
check "a rollout of the bad change starts" wait_until 10 ro_is ".to_version == $V3"
ID2=$(ro .id)
check "it is rolled back" wait_until 30 ro_is ".id == $ID2 and .state == \"rolled_back\""
check_eq "only the canary was touched" 1 "$(ro .touched)"
REASON=$(ro .reason)
diag "reason: $REASON"
check "the reason names where the route went (cluster/bad)" sh -c "echo \"\$1\" | grep -q 'cluster/bad'" _ "$REASON"
check "the reason gives the rates of both sides" sh -c "echo \"\$1\" | grep -q 'error rate' && echo \"\$1\" | grep -q baseline" _ "$REASON"
check "the stage's verdict is fail" ro_is '[.gate.stages[] | select(.verdict == "fail")] | length == 1'
FIRST=$(load_first_5xx)
FIN=$(ro '.finished_at * 1000 | floor')
diag "first 5xx seen by the load generator at $FIRST ms, revert recorded at $FIN ms: $((FIN - FIRST)) ms (bake $BAKE s, min-requests 30)"
check "every node serves /api from cluster good again" wait_until 15 sh -c "
	for p in ${GL[*]}; do [ \"\$(curl -s -m 2 http://127.0.0.1:\$p/api/x)\" = 'good /api/x' ] || exit 1; done"
# (requests the canary's old workers were still finishing may answer 5xx
# for a moment after the revert: counted from 2 s on)
sleep 2
E1=$(load_errors)
sleep 3
check_eq "no 5xx once reverted" "$E1" "$(load_errors)"

# ---- a slower cluster (40 ms against about 1 ms) is caught (haproxy's mean) ---------
gates_reroute api slow
V4=$(plane_version)
check "a rollout toward the slow cluster starts" wait_until 10 ro_is ".to_version == $V4"
ID3=$(ro .id)
check "it is rolled back" wait_until 30 ro_is ".id == $ID3 and .state == \"rolled_back\""
check_eq "only the canary was touched" 1 "$(ro .touched)"
diag "reason: $(ro .reason)"
check "the reason names p99 and cluster/slow" sh -c "ro_reason=\$(curl -s '$PLANE_URL/v1/rollouts/current' | jq -r .reason); echo \"\$ro_reason\" | grep -q p99 && echo \"\$ro_reason\" | grep -q 'cluster/slow'"

# ---- tetherctl shows the comparison --------------------------------------------------
check "tetherctl rollout status shows the gate's comparison" sh -c "'$CTL_BIN' --plane '$PLANE_URL' rollout status | grep -qi 'baseline'"

gates_load_stop
done_testing
