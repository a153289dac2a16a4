#!/usr/bin/env bash
# t0906-relay-replicas.sh: a relay in front of plane replicas over etcd
# (--store etcd, --rollout staged): the relay follows replica a or b
# (--upstream A,B), its agents' records reach both replicas' fleet view
# with the relay in "via", a staged rollout through it completes on the
# records the relay sends up, and when the replica it follows is killed
# the relay moves to the other by delta and a NACK from behind it still
# reverts a rollout there.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

etcd_cluster_start 3
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix /t0906/ --heartbeat 1 --rollout staged
	--stages 50,100 --bake 2 --ack-timeout 30 --lease-ttl 3)
start_plane a "${E[@]}"
A_URL=$PLANE_URL A_PID=$PLANE_PID
start_plane b "${E[@]}"
B_URL=$PLANE_URL B_PID=$PLANE_PID
PLANE_URL=$A_URL put file/app '{"path":"app.txt","content":"app-1\n"}' >/dev/null

start_plane relay --upstream "$A_URL,$B_URL" --relay-id edge --heartbeat 1
R_URL=$PLANE_URL
R_LOG=$PLANE_LOG

bad_check "$WORK/check.sh"
NODES=(n1 n2 n3 n4)
for n in "${NODES[@]}"; do
	start_agent "$n" --plane "$R_URL" --backoff-max 1 --stream-timeout 3 --check "sh $WORK/check.sh"
done
V1=$(curl -sS "$A_URL/healthz" | jq -r .version)
check "the 4 agents reach version $V1 through the relay" wait_until 20 fleet_at "$V1"

# seen_on URL: all 4 connected there, behind the relay
seen_on() {
	curl -sS "$1/v1/nodes" | jq -e '[.[] | select(.connected and .via == ["edge"])] | length == 4' >/dev/null
}
check "replica a sees the 4 connected, behind edge" wait_until 20 seen_on "$A_URL"
check "replica b too (one fleet view through etcd)" wait_until 20 seen_on "$B_URL"

# ro_on URL JQ: the current rollout on the replica at URL
ro_on() {
	curl -sS "$1/v1/rollouts/current" | jq -r "$2"
}
ended_on() {
	[ "$(ro_on "$1" '"\(.to_version) \(.state)"')" = "$2 $3" ]
}
V2=$(curl -sS -X PUT --data-binary '{"path":"app.txt","content":"app-2\n"}' "$B_URL/v1/resources/file/app" |
	jq -r .version)
check "a rollout of $V2 through the relay completes" wait_until 40 ended_on "$A_URL" "$V2" completed
check_eq "with the 4 nodes behind the relay as members, all touched" "4 4" "$(ro_on "$A_URL" '"\(.members) \(.touched)"')"
check "every agent has $V2" wait_until 20 fleet_at "$V2"

# the relay's upstream dies: it moves to the other replica by delta
up=$(curl -sS "$R_URL/healthz" | jq -r .upstream)
if [ "$up" = "$A_URL" ]; then
	DEAD=a DEAD_PID=$A_PID LIVE_URL=$B_URL LIVE=b
else
	DEAD=b DEAD_PID=$B_PID LIVE_URL=$A_URL LIVE=a
fi
diag "the relay follows $DEAD; killing it"
stop_pid "$DEAD_PID" KILL
check "the relay follows $LIVE from its own version ($V2)" wait_until 20 grep -q "relay edge: following from version $V2" \
	"$WORK/$LIVE.log"
on_live() {
	[ "$(curl -sS "$R_URL/healthz" | jq -r '"\(.upstream) \(.upstream_up)"')" = "$LIVE_URL true" ]
}
check "its healthz says so" wait_until 10 on_live
V3=$(curl -sS -X PUT --data-binary '{"path":"app.txt","content":"app-3 BAD\n"}' "$LIVE_URL/v1/resources/file/app" |
	jq -r .version)
check "a bad change ($V3) is reverted by $LIVE, the controller now" wait_until 40 ended_on "$LIVE_URL" "$V3" rolled_back
reason=$(ro_on "$LIVE_URL" .reason)
diag "reason: $reason"
check "its reason is a NACK from behind the relay" grep -Eq "^node n[1-4]: NACK of version $V3: .*BAD content refused" <<<"$reason"
R3=$(ro_on "$LIVE_URL" .revert_version)
check "every agent ends at the revert ($R3)" wait_until 30 fleet_at "$R3"
check_eq "every node holds app-2" "" "$(wrong_content app.txt app-2)"

done_testing
