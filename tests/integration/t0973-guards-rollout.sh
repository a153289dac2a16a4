#!/usr/bin/env bash
# t0973-guards-rollout.sh: a rollout's own revert is never stopped by a
# guard. Staged rollouts (--stages 50,100, a long bake), two nodes with
# --trust, guard/shrink over cluster/web: a growth (2 -> 6 endpoints) goes
# to the first stage; aborting the rollout reverts to 2 endpoints, which
# crosses max_shrink (6 -> 2 loses 67%): the plane commits it anyway,
# records it as an override ("rollout revert") and signs it, so the node
# that took the growth takes the revert, and the other keeps what it had.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-guards.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd jq

"$CTL_BIN" keygen "$WORK/plane.key" >/dev/null || bail "keygen failed"
start_plane p --rollout staged --stages 50,100 --bake 600 --heartbeat 0.5 --ack-timeout 60 \
	--signing-key "$WORK/plane.key"
put guard/shrink '{"match":"cluster/web","max_shrink":0.5}' >/dev/null
put cluster/web "$(eps 2)" >/dev/null
V=$(plane_version)
check "with no node, the rollouts end" wait_until 10 ro_is '.state != "running"'
for n in n1 n2; do
	start_agent "$n" --trust "$WORK/plane.key.pub" --backoff-min 0.1 --backoff-max 0.5
done
check "n1 and n2 run version $V" wait_until 15 all_at "$V" n1 n2

put cluster/web "$(eps 6)" >/dev/null
G=$(plane_version)
check "the growth (2 -> 6) reaches the first stage" wait_until 15 sh -c \
	"[ \"\$(jq -r .version '$WORK/n1.state/status.json')\" = $G ] || [ \"\$(jq -r .version '$WORK/n2.state/status.json')\" = $G ]"
if agent_at n1 "$G"; then CANARY=n1 OTHER=n2; else CANARY=n2 OTHER=n1; fi
check "... and stops there (the bake)" agent_at "$OTHER" "$V"
check "abort the rollout" ctl rollout abort
check "the revert is committed" wait_until 15 sh -c "[ \"\$(curl -sS '$PLANE_URL/healthz' | jq -r .version)\" -gt $G ]"
R=$(plane_version)
check_eq "its record: an override by the rollout, the guard it passed" '{"passed":["guard/shrink"],"reason":"rollout revert"}' \
	"$(curl -sS "$PLANE_URL/v1/history" | jq -c ".versions[] | select(.version == $R) | .override")"
check "$CANARY (which took 6 endpoints) takes the revert to 2 (6 -> 2 crosses the guard)" wait_until 20 agent_at "$CANARY" "$R"
check "... under the plane's signed override" \
	grep -q "push $R crosses guards under the plane's override of version $R (signed)" "$WORK/$CANARY.log"
check "$OTHER gets version $R too" wait_until 20 agent_at "$OTHER" "$R"
check_eq "no NACK" "null null" "$(node_field n1 .last_nack) $(node_field n2 .last_nack)"

done_testing
