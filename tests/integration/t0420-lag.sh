#!/usr/bin/env bash
# t0420-lag.sh: per-node lag and the lagging flag (--lag-alert) with real
# agents: a --strict agent that refuses a change trails its target and is
# flagged lagging after --lag-alert seconds in /v1/nodes, /metrics and
# tetherctl nodes while a normal agent is not; a fix clears the flag; an
# agent that is killed while a write happens becomes lagging too, and
# clears once it is back.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# ---- helpers of this test ---------------------------------------------------

# nodef NODE FILTER: a jq filter over the plane's record of NODE.
nodef() {
	curl -sS "$PLANE_URL/v1/nodes/$1" | jq -r "$2"
}

# node_is NODE JQ-CONDITION
node_is() {
	curl -sS "$PLANE_URL/v1/nodes/$1" | jq -e "$2" >/dev/null
}

metric_is() {
	[ "$(metric "$1")" = "$2" ]
}

# not_grep ERE: standard input has no line matching ERE.
not_grep() {
	! grep -Eq "$1"
}

# ---- a plane that flags a node one second behind, two agents ------------------------------

# --allow-unknown-fields: cluster/web's newfield below reaches the strict node, which lags NACKing it
start_plane p --rollout immediate --lag-alert 1 --heartbeat 1 --allow-unknown-fields
put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9001}]}' >/dev/null
put file/motd '{"path":"motd.txt","content":"motd-1\n"}' >/dev/null
V1=$(plane_version)

start_agent ok1 --backoff-max 1
start_agent st1 --strict --backoff-max 1
check "both agents reach version $V1" wait_until 20 all_at "$V1" ok1 st1
check "the plane sees both acked at $V1" wait_until 10 sh -c \
	"curl -sS '$PLANE_URL/v1/nodes' | jq -e 'all(.[]; .acked_version == $V1 and .lag == 0)'"
check_eq "nobody lags: lagging false, lag 0, no behind_seconds" "false 0 null false 0 null" \
	"$(nodef ok1 '"\(.lagging) \(.lag) \(.behind_seconds)"') $(nodef st1 '"\(.lagging) \(.lag) \(.behind_seconds)"')"
check_eq "tether_nodes_lagging 0" 0 "$(metric tether_nodes_lagging)"

# ---- a change the strict agent refuses -------------------------------------------------------

put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9002}],"newfield":1}' >/dev/null
V2=$(plane_version)
check "the normal agent applies version $V2" wait_until 10 agent_at ok1 "$V2"
check "the strict agent NACKs it" wait_until 10 has_nack st1 "$V2"
check "after --lag-alert (1 s) the strict node is flagged lagging" wait_until 10 node_is st1 .lagging
rec=$(curl -sS "$PLANE_URL/v1/nodes/st1")
diag "st1: $(echo "$rec" | jq -c '{target_version, acked_version, lag, lagging, behind_seconds}')"
check_eq "its target is $V2, its acked version $V1, its lag 1" "$V2 $V1 1" \
	"$(echo "$rec" | jq -r '"\(.target_version) \(.acked_version) \(.lag)"')"
check "it has been behind for at least 1 s (behind_seconds $(echo "$rec" | jq .behind_seconds))" \
	test "$(echo "$rec" | jq '.behind_seconds >= 1')" = true
check_eq "the strict agent still runs $V1" "$V1" "$(st st1 version)"
check "the normal node is current and not lagging" wait_until 10 node_is ok1 \
	".lagging == false and .lag == 0 and .acked_version == $V2 and .target_version == $V2"
m=$(curl -sS "$PLANE_URL/metrics")
get() { awk -v k="$1" '$1 == k {print $2}' <<<"$m"; }
check_eq 'tether_node_lagging{node="st1"} 1, {node="ok1"} 0' "1 0" \
	"$(get 'tether_node_lagging{node="st1"}') $(get 'tether_node_lagging{node="ok1"}')"
check_eq "tether_nodes_lagging 1" 1 "$(get tether_nodes_lagging)"
check_eq "tether_node_lag: st1 1, ok1 0" "1 0" "$(get 'tether_node_lag{node="st1"}') $(get 'tether_node_lag{node="ok1"}')"
check_eq "tether_node_target_version: $V2 for both" "$V2 $V2" \
	"$(get 'tether_node_target_version{node="st1"}') $(get 'tether_node_target_version{node="ok1"}')"
check "the metrics describe the lagging gauge" grep -q '^# TYPE tether_node_lagging gauge' <<<"$m"
table=$(ctl nodes)
check "tetherctl nodes flags st1 lagging, for how long in words" grep -Eq '^st1 .* [(]lagging for [0-9]+ (s|min)[)]' <<<"$table"
check "and not ok1" not_grep '^ok1 .*lagging' <<<"$table"

# ---- the fix clears it -------------------------------------------------------------------------------

put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9002}]}' >/dev/null
V3=$(plane_version)
check "the strict agent applies the fix, version $V3" wait_until 10 agent_at st1 "$V3"
check "and the normal one" wait_until 10 agent_at ok1 "$V3"
check "the strict node is no longer lagging" wait_until 10 node_is st1 \
	".lagging == false and .lag == 0 and .acked_version == $V3 and (has(\"behind_seconds\") | not)"
check "tether_nodes_lagging is back to 0" wait_until 10 metric_is tether_nodes_lagging 0
check_eq 'tether_node_lagging{node="st1"} 0' 0 "$(metric 'tether_node_lagging{node="st1"}')"
check "tetherctl nodes flags nobody" not_grep lagging <<<"$(ctl nodes)"

# ---- a stopped agent misses a write and lags ---------------------------------------------------------

stop_pid "${APID[ok1]}" KILL
check "the plane sees ok1 disconnected" wait_until 10 node_is ok1 '.connected == false'
put file/motd '{"path":"motd.txt","content":"motd-4\n"}' >/dev/null
V4=$(plane_version)
check "the running agent applies version $V4" wait_until 10 agent_at st1 "$V4"
check "the stopped one is flagged lagging after 1 s" wait_until 10 node_is ok1 \
	".lagging and .lag == 1 and .target_version == $V4 and .acked_version == $V3"
check "the running one is not" node_is st1 ".lagging == false and .lag == 0"
check_eq "tether_nodes_lagging 1" 1 "$(metric tether_nodes_lagging)"
check_eq 'tether_node_lagging{node="ok1"} 1' 1 "$(metric 'tether_node_lagging{node="ok1"}')"
put file/motd '{"path":"motd.txt","content":"motd-5\n"}' >/dev/null
V5=$(plane_version)
check "a second write makes its lag 2" wait_until 10 node_is ok1 ".lagging and .lag == 2 and .target_version == $V5"
start_agent ok1 --backoff-max 1
check "restarted, it catches up to $V5" wait_until 20 agent_at ok1 "$V5"
check_eq "with the newest content" motd-5 "$(cat "$WORK/ok1.out/motd.txt")"
check "and is no longer lagging" wait_until 10 node_is ok1 ".lagging == false and .lag == 0 and .connected"
check "tether_nodes_lagging is 0 again" wait_until 10 metric_is tether_nodes_lagging 0
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
