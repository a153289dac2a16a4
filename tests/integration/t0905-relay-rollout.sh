#!/usr/bin/env bash
# t0905-relay-rollout.sh: t0400's staged rollouts with the agents spread
# over two relays (origin --rollout staged --stages 20,100; 10 agents, 5 on
# each relay, 2 of them --strict; every one with a --check that refuses
# BAD and --trust in the origin's key). Membership is per node, not per
# relay: while the first stage bakes, the canaries behind a relay have the
# new version and their neighbours behind the same relay keep the
# baseline. A good change completes; a change every node rejects stops at
# the first stage and is reverted; a change only the strict nodes reject
# is reverted. The origin's /v1/nodes lists all 10 with their relay in
# "via" and the NACKs with their errors; each relay lists its own 5 only.
# A write to a relay is refused, naming the origin.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# ---- helpers of this test ---------------------------------------------------

ro_started() {
	curl -sS "$ORIGIN/v1/rollouts/current" | jq -e --argjson v "$1" '.to_version == $v' >/dev/null
}
ro_of_ended() {
	curl -sS "$ORIGIN/v1/rollouts/current" |
		jq -e --argjson v "$1" '.to_version == $v and .state != "in_progress"' >/dev/null
}
# origin_sees N: the origin counts N of the fleet connected.
origin_sees() {
	curl -sS "$ORIGIN/v1/nodes" | jq -e --argjson n "$1" '[.[] | select(.connected)] | length == $n' >/dev/null
}
origin_acked_all() {
	curl -sS "$ORIGIN/v1/nodes" | jq -e --argjson v "$1" --argjson n "${#NODES[@]}" \
		'[.[] | select(.acked_version == $v and .lag == 0)] | length == $n' >/dev/null
}
# batch JSON: one batch on the origin; prints the version it made.
batch() {
	curl -sS -X POST --data-binary "$1" "$ORIGIN/v1/batch" | jq -r .version
}
# ---- an origin and two relays ---------------------------------------------------

"$CTL_BIN" keygen "$WORK/sign" >/dev/null || bail "keygen failed"
# --allow-unknown-fields: file/motd's owner (V4) reaches the strict nodes through the relays
start_plane origin --rollout staged --stages 20,100 --bake 4 --ack-timeout 30 --heartbeat 1 \
	--signing-key "$WORK/sign" --allow-unknown-fields
ORIGIN=$PLANE_URL
ctl apply - >/dev/null <<'EOF'
{"upserts":[{"name":"file/app","body":{"path":"app.txt","content":"app-1\n"}}]}
EOF
V1=$(plane_version)
check "the first rollout, with no node, completes" wait_until 10 ro_ended 1

start_plane ra --upstream "$ORIGIN" --relay-id ra --heartbeat 1
RA=$PLANE_URL
RA_LOG=$PLANE_LOG
start_plane rb --upstream "$ORIGIN" --relay-id rb --heartbeat 1
RB=$PLANE_URL
PLANE_URL=$ORIGIN
check "relay ra says it follows the origin" grep -q "relay: this plane is relay ra of $ORIGIN" "$RA_LOG"

bad_check "$WORK/check.sh"
NODES=()
for i in 01 02 03 04 05 06 07 08 09 10; do
	n=n$i
	NODES+=("$n")
	relay=$RA
	[ $((10#$i % 2)) = 0 ] && relay=$RB
	extra=(--labels "profile=default")
	case $n in n03|n04) extra=(--strict --labels "profile=strict") ;; esac
	start_agent "$n" --plane "$relay" "${extra[@]}" --backoff-max 1 --stream-timeout 10 \
		--trust "$WORK/sign.pub" --check "sh $WORK/check.sh"
done
check "the 10 agents reach version $V1 through the relays" wait_until 30 fleet_at "$V1"
check "the origin sees all 10 connected" wait_until 20 origin_sees 10
check "the origin sees all 10 acked at $V1" wait_until 20 origin_acked_all "$V1"
check_eq "the origin names the relay of each node (n01 via ra, n02 via rb)" "ra rb" \
	"$(curl -sS "$ORIGIN/v1/nodes" | jq -r '[.[] | select(.node == "n01" or .node == "n02") | .via[0]] | join(" ")')"
check_eq "relay ra lists its own 5 nodes only" "n01 n03 n05 n07 n09" \
	"$(curl -sS "$RA/v1/nodes" | jq -r '[.[].node] | join(" ")')"
check_eq "... with no via" "[]" "$(curl -sS "$RA/v1/nodes" | jq -c '[.[] | select(.via != [])]')"

# ---- (a) a good change: per-node stages behind the relays, then 100 % --------------

V2=$(batch '{"upserts":[{"name":"file/motd","body":{"path":"motd.txt","content":"motd-2 good\n"}}]}')
check "the good change's rollout starts" wait_until 10 ro_started "$V2"
check_eq "it is at stage 20 % with 2 of the 10 nodes" "20 2 10" "$(ro '"\(.stage) \(.reached) \(.members)"')"
# the members in the first stage: the origin's records that target V2 now
canaries=$(curl -sS "$ORIGIN/v1/nodes" | jq -r --argjson v "$V2" '[.[] | select(.target_version == $v) | .node] | sort | join(" ")')
diag "first-stage members: $canaries"
check_eq "two canaries target $V2" 2 "$(wc -w <<<"$canaries")"
c1=${canaries%% *}
c2=${canaries##* }
check "the canary $c1 applies $V2 through its relay" wait_until 10 agent_at "$c1" "$V2"
check "the canary $c2 too" wait_until 10 agent_at "$c2" "$V2"
others=0
held=0
for n in "${NODES[@]}"; do
	case " $canaries " in *" $n "*) continue ;; esac
	others=$((others + 1))
	[ "$(st "$n" version)" = "$V1" ] && held=$((held + 1))
done
check_eq "while stage 1 bakes, the 8 others (neighbours behind the same relays) keep $V1" "8 8" "$others $held"
check_eq "relay ra serves its nodes the targets the origin says" \
	"$(curl -sS "$ORIGIN/v1/nodes" | jq -c '[.[] | select(.via[0] == "ra") | {node, target_version}] | sort_by(.node)')" \
	"$(curl -sS "$RA/v1/nodes" | jq -c '[.[] | {node, target_version}] | sort_by(.node)')"
check "the good change's rollout (2) ends" wait_until 60 ro_ended 2
check_eq "rollout 2 completed at 100 %, 10 members, all touched" "completed 100 10 10" \
	"$(ro '"\(.state) \(.stage) \(.members) \(.touched)"')"
check "every agent applies $V2" wait_until 20 fleet_at "$V2"
check_eq "every node holds the new content" "" "$(wrong_content motd.txt "motd-2 good")"
check "the origin sees all 10 acked at $V2" wait_until 20 origin_acked_all "$V2"

# ---- (b) a change every node rejects stops at the first stage -------------------------

V3=$(batch '{"upserts":[{"name":"file/motd","body":{"path":"motd.txt","content":"motd-3 BAD\n"}}]}')
check "the bad change's rollout ends" wait_until 60 ro_of_ended "$V3"
check_eq "it is rolled back at the first stage (20 %)" "rolled_back 20" "$(ro '"\(.state) \(.stage)"')"
check "... touching at most the 2 first-stage nodes" test "$(ro .touched)" -le 2
reason=$(ro .reason)
diag "reason: $reason"
check "... its reason names a node and the check's error" grep -q "NACK of version $V3: .*BAD content refused" <<<"$reason"
R3=$(ro .revert_version)
check "the revert is a new, higher version" test "$R3" -gt "$V3"
check "every agent ends at the revert ($R3)" wait_until 30 fleet_at "$R3"
check_eq "every node holds the good content" "" "$(wrong_content motd.txt "motd-2 good")"
nacker=$(sed -n 's/^node \([^:]*\): NACK.*/\1/p' <<<"$reason")
nack_via() {
	[ "$(curl -sS "$ORIGIN/v1/nodes/$1" | jq -r '"\(.last_nack.version) \(.via | length)"')" = "$2 1" ]
}
check "the origin's record of $nacker holds the NACK, with its relay" wait_until 10 nack_via "$nacker" "$V3"

# ---- (c) a change only the strict nodes reject -----------------------------------

V4=$(batch '{"upserts":[{"name":"file/motd","body":{"path":"motd.txt","content":"motd-4\n","owner":"ops"}}]}')
check "the strict-only change's rollout ends" wait_until 60 ro_of_ended "$V4"
check_eq "it is rolled back" "rolled_back" "$(ro .state)"
reason=$(ro .reason)
diag "reason: $reason"
check "its reason names a strict node and the unknown field" grep -Eq "node n0[34]: NACK of version $V4: .*owner" <<<"$reason"
R4=$(ro .revert_version)
check "every agent ends at the revert ($R4)" wait_until 30 fleet_at "$R4"
check_eq "every node holds the good content" "" "$(wrong_content motd.txt "motd-2 good")"
diag "versions: $(versions)"

# ---- writes go to the origin -----------------------------------------------------------

status=$(curl -sS -o "$WORK/refused" -w '%{http_code}' -X PUT --data-binary '{"path":"x","content":"x"}' \
	"$RA/v1/resources/file/x")
check_eq "a write to a relay is refused (421), naming the origin" \
	"421 this plane is a relay of $ORIGIN: write to the origin" "$status $(jq -r .error "$WORK/refused")"

done_testing
