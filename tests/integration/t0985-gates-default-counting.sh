#!/usr/bin/env bash
# t0985-gates-default-counting.sh: the issue's scenario, with the agents'
# defaults. A plane with --rollout staged and --gate-error-rate 0.05; ten
# nginx agents started with no --traffic-listen at all: each binds a free
# loopback UDP port itself, renders nginx's access log to it, keeps the
# port in its state directory, and says in its ACKs that it counts. The
# first rollout (no traffic) passes flagged low_traffic -- nodes that
# count, few requests -- not unjudged. Then /api is rerouted to a cluster
# that answers 500 under traffic: the change is caught at the canary and
# reverted, the other nine never touched.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
GATE_N=10
. "$(dirname "$0")/lib-gates.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node jq ss

trap 'gates_stop_proxies; cleanup' EXIT

gates_backends
# the issue's plane: one canary of ten (10%), then everyone
start_plane p --heartbeat 1 --rollout staged --stages 10,100 --bake $BAKE --ack-timeout 60 \
	--gate-error-rate 0.05 --gate-min-requests 30
for i in $(seq 1 "$GATE_N"); do
	gates_nginx_node "$i"   # no --traffic-listen: the defaults
done

check "ten nodes connect" wait_until 30 sh -c "curl -s '$PLANE_URL/v1/nodes' | jq -e '[.[] | select(.connected)] | length == $GATE_N'"
gates_state | ctl apply - >/dev/null || bail "cannot load the first state"
V1=$(plane_version)
check "every node applies version $V1" wait_until 40 sh -c "curl -s '$PLANE_URL/v1/nodes' | jq -e '[.[] | select(.acked_version >= $V1)] | length == $GATE_N'"

# ---- counting by default ----------------------------------------------------------------
PORT1=$(cat "$WORK/n1.state/traffic-listen" 2>/dev/null)
check "n1 kept the loopback port it counts on in its state directory ($PORT1)" sh -c "echo '$PORT1' | grep -Eq '^127\.0\.0\.1:[0-9]+$'"
check "n1 logs that it picked a free port" grep -q "traffic: counting the access log sent to udp $PORT1 (a free port picked" "$WORK/n1.log"
check "n1 listens on it (UDP)" sh -c "ss -Huan '( sport = :${PORT1#*:} )' | grep -q ."
check "n1's live generation sends nginx's access log there" grep -q "access_log syslog:server=$PORT1," "$WORK/n1.out/current/tether.conf"
check "every node's port is its own" sh -c "[ \"\$(cat '$WORK'/n*.state/traffic-listen | sort -u | wc -l)\" = $GATE_N ]"
check "the plane's node listing says every node counts" sh -c "curl -s '$PLANE_URL/v1/nodes' | jq -e '[.[] | select(.counts == true)] | length == $GATE_N'"
check "the first rollout (no traffic) completes" wait_until 60 ro_is ".to_version == $V1 and .state == \"completed\""
check "its stages passed flagged low_traffic (they count, few requests), none unjudged" \
	ro_is '([.gate.stages[] | select(.verdict == "low_traffic")] | length >= 1) and ([.gate.stages[] | select(.verdict == "unjudged")] | length == 0)'
check "every node serves /api through its nginx" wait_until 20 all_serve_good

# ---- a restart keeps the port: the same configuration, no reload --------------------------
GEN1=$(readlink "$WORK/n1.out/current")
stop_pid "${APID[n1]}" TERM
# the agent alone (its nginx keeps serving), as gates_nginx_node started it
start_agent n1 --consumer nginx --pidfile "$WORK/nx1/nginx.pid" --marker "127.0.0.1:${GM[1]}" \
	--sub "cluster/,listener/n1-l,route/n1-" --reload-timeout 5 --backoff-min 0.1 --backoff-max 1
check "n1, restarted, counts again" wait_until 20 sh -c "[ \"\$(grep -c 'traffic: counting the access log' '$WORK/n1.log')\" = 2 ]"
check "n1, restarted, is synced" wait_until 20 sh -c "jq -e '.state == \"synced\"' '$WORK/n1.state/status.json'"
check_eq "n1 counts on the same port after a restart" "$PORT1" "$(cat "$WORK/n1.state/traffic-listen")"
check_eq "the same generation serves (nothing to render anew)" "$GEN1" "$(readlink "$WORK/n1.out/current")"

# ---- the bad change, under traffic, caught at the canary ------------------------------------
gates_load 40
check "the load generator's requests are answered" wait_until 15 sh -c "[ \"\$(jq '[.targets[].answered] | add' '$WORK/load.json')\" -gt 200 ]"
check_eq "no 5xx so far" 0 "$(load_errors)"
gates_reroute api bad
caught_at_canary "/api rerouted to the cluster that answers 500"
check "the reason names route/nN-api and the error rate" sh -c \
	"echo \"\$1\" | grep -Eq 'route/n[0-9]+-api' && echo \"\$1\" | grep -q 'error rate'" _ "$REASON"
check "the stage's verdict is fail" ro_is '[.gate.stages[] | select(.verdict == "fail")] | length == 1'
gates_first_5xx_to_revert
check "every node serves /api from cluster good again" wait_until 20 all_serve_good
gates_load_stop

check "no agent logged an error about traffic" sh -c "! grep -E 'error: .*traffic' '$WORK'/n[0-9]*.log"
check "no nginx logged an emergency (the rendered access log always loads)" sh -c "! grep -E '\\[(emerg|alert|crit)\\]' '$WORK'/nx*/error.log"
done_testing
