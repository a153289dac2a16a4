#!/usr/bin/env bash
# t0996-snippet-canary.sh: a snippet the node's checker refuses stops at the
# canary of a staged rollout (issue 28, 3: "the node's check decides the
# rest, at the canary"). Three tetherd nodes, each with its own real nginx
# (lib-gates.sh's fleet, without traffic gates), a rollout in stages of
# 1 % (one node: the canary) and 100 %. A cluster every node shares gets a snippet the plane
# takes and nginx -t refuses: the canary NACKs it naming
# "cluster/good: snippet.nginx: ", the rollout is rolled back at its first
# stage with one node touched, the plane's body is back to the old one,
# the other nodes never saw the version, and every node serves throughout.
# Then a good snippet (keepalive) completes on every node, in its upstream.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
GATE_N=3
. "$(dirname "$0")/lib-gates.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node jq ss curl

trap 'gates_stop_proxies; cleanup' EXIT

gates_backends
start_plane p --heartbeat 1 --rollout staged --stages 1,100 --bake 1 --ack-timeout 30
for i in 1 2 3; do
	gates_nginx_node "$i"
done
check "three nodes connect" wait_until 15 sh -c "curl -s '$PLANE_URL/v1/nodes' | jq -e '[.[] | select(.connected)] | length == 3'"
gates_state | ctl apply - >/dev/null || bail "cannot load the first state"
V1=$(plane_version)
R1=$(ro .id)
check "the first rollout completes" wait_until 40 ro_is ".to_version == $V1 and .state == \"completed\""
serves_all() {
	local i
	for i in 1 2 3; do
		[ "$(curl -s --max-time 3 "http://127.0.0.1:${GL[$i]}/x")" = "good /x" ] || return 1
	done
}
check "every node serves through its nginx" wait_until 10 serves_all

# ---- a snippet nginx -t refuses ------------------------------------------------------------------
OLD=$(ctl get cluster/good)
body=$(jq -nc --argjson p "$PGOOD" '{endpoints:[{address:"127.0.0.1", port:$p}],
	snippet:{nginx:"keepalive 4;\nkeepalive_requestz 100;"}}')
out=$(put cluster/good "$body")
VB=$(jq -r .version <<<"$out")
check "the plane takes the snippet (version $VB)" test "$VB" -gt "$V1"
check "its rollout ends" wait_until 40 ro_is ".to_version == $VB and .state != \"in_progress\""
r=$(curl -sS "$PLANE_URL/v1/rollouts/current")
check_eq "it is rolled back at its first stage, one node touched" "rolled_back 1 1" \
	"$(jq -r '"\(.state) \(.stage_index) \(.touched)"' <<<"$r")"
reason=$(jq -r .reason <<<"$r")
TB=$(sed -n 's/^node \([^:]*\): .*/\1/p' <<<"$reason")
check "the reason names the canary, the cluster's snippet and nginx's words ($reason)" \
	grep -Eq "^node $TB: NACK of version $VB: cluster/good: snippet\.nginx: .*unknown directive \"keepalive_requestz\"" <<<"$reason"
check_eq "only the canary has a NACK" "$TB:$VB" \
	"$(curl -sS "$PLANE_URL/v1/nodes" | jq -r '[.[] | select(.last_nack != null) | "\(.node):\(.last_nack.version)"] | join(" ")')"
check_eq "the plane's cluster/good is its old body again" "$OLD" "$(ctl get cluster/good)"
RB=$(jq -r .revert_version <<<"$r")
at_all() {
	local i
	for i in 1 2 3; do
		agent_at "n$i" "$1" || return 1
	done
}
check "every node ends at the revert version $RB" wait_until 30 at_all "$RB"
others=""
for i in 1 2 3; do
	[ "n$i" = "$TB" ] && continue
	grep -q "push $VB \|version $VB " "$WORK/n$i.log" && others="$others n$i"
done
check_eq "no other node saw version $VB" "" "$others"
check "every node still serves" serves_all

# ---- a good snippet completes ---------------------------------------------------------------------
body=$(jq -nc --argjson p "$PGOOD" '{endpoints:[{address:"127.0.0.1", port:$p}], snippet:{nginx:"keepalive 4;"}}')
VG=$(put cluster/good "$body" | jq -r .version)
check "the good snippet's rollout (version $VG) completes" wait_until 40 ro_is ".to_version == $VG and .state == \"completed\""
check "every node runs it" wait_until 20 at_all "$VG"
in_upstream() {
	local i
	for i in 1 2 3; do
		awk '/^upstream tether_c_good /{on=1} on{print} on && /^}/{exit}' "$WORK/n$i.out/current/tether.conf" |
			grep -q '^    keepalive 4;$' || return 1
	done
}
check "each node's upstream of cluster/good holds it" in_upstream
check "every node serves" serves_all
done_testing
