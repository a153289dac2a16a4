#!/usr/bin/env bash
# t0956-gates-haproxy.sh: traffic-aware gates end to end with four tetherd
# nodes, each driving its own real haproxy (master-worker, SIGUSR2
# reloads); the agents read haproxy's counters over its stats socket
# (--traffic-socket: per cluster, the latency haproxy's mean), and a load
# generator sends to every node (lib-gates.sh's gates_scenario, as t0955
# with nginx). The first rollout, with no traffic, passes each stage after
# the bake, flagged. A good change under traffic completes, its stage
# comparing cluster/good on the canary and the baseline. A change that
# sends /api to a cluster answering 500 passes validation, haproxy -c and
# the reload, and is caught at the first stage: reverted, the canary alone
# touched, the reason naming the cluster the route went to and the rates.
# A change of cluster/good's endpoints to the 500ing backend (a backend
# list that drops the healthy endpoints) is caught against a baseline
# that served cluster/good too. A change toward a cluster ten times slower
# is caught on its latency.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
. "$(dirname "$0")/lib-gates.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd haproxy node jq ss

trap 'gates_stop_proxies; cleanup' EXIT

gates_backends
gates_plane

for i in $(seq 1 "$GATE_N"); do
	gates_haproxy_node "$i" --traffic-socket "$WORK/hx$i/stats.sock"
done
G_PROXY=haproxy
G_REPORT_KEY=cluster/good
G_BAD_KEY=cluster/bad
G_SLOW_KEY=cluster/slow
G_COMPARE_DESC="cluster/good on both sides (canary and baseline served it)"
G_COMPARE_JQ='any(.gate.stages[0].routes[]; .route == "cluster/good" and .canary.requests > 0 and .baseline.requests > 0)'
G_SHARED_CLUSTERS=1
gates_scenario
done_testing
