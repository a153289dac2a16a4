#!/usr/bin/env bash
# t0955-gates-nginx.sh: traffic-aware gates end to end with four tetherd
# nodes, each driving its own real nginx (the access log over local syslog
# to the agent), and a load generator sending to every node (lib-gates.sh's
# gates_scenario, as t0956 with haproxy). The first
# rollout, with no traffic, passes each stage after the bake, flagged. A
# good change under traffic completes. A change that sends /api to a
# cluster answering 500 passes validation, nginx -t and the reload, and is
# caught at the first stage: reverted, the canary alone touched, the
# reason naming the route and the rates. A change toward a cluster ten
# times slower is caught on p99. The nodes and /metrics show the traffic.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
. "$(dirname "$0")/lib-gates.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node jq ss

trap 'gates_stop_proxies; cleanup' EXIT

gates_backends
gates_plane

for i in $(seq 1 "$GATE_N"); do
	gates_nginx_node "$i" --traffic-listen "127.0.0.1:${GU[$i]}"
done
G_PROXY=nginx
G_REPORT_KEY=route/n1-api
G_BAD_KEY='route/n[0-9]-api'
G_SLOW_KEY='route/n[0-9]-api'
G_COMPARE_DESC="the canary's requests per route, beside the baseline"
G_COMPARE_JQ='any(.gate.stages[0].routes[]; .canary.requests > 0 and .canary.nodes == 1 and .baseline.nodes >= 1)'
gates_scenario
done_testing
