#!/usr/bin/env bash
# t0400-rollout.sh: staged rollouts (--rollout staged --stages 1,10,100)
# with 100 real tetherd agents, 10 of them --strict, every one with a
# --check that refuses rendered files holding BAD: a good change reaches
# 100 % stage by stage with one message per node; a change every node
# rejects stops at the first stage (one node, one message) and is reverted
# as a new, higher version; a change only the strict nodes reject is caught
# by the 10 % stage at the latest and reverted; every node ends at the same
# version with content that never carried a bad change; tetherctl rollout
# status and tetherctl nodes show it.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# ---- helpers of this test ---------------------------------------------------

# connected_is N: the plane sees N nodes connected.
connected_is() {
	curl -sS "$PLANE_URL/v1/nodes" | jq -e --argjson n "$1" '[.[] | select(.connected)] | length == $n' >/dev/null
}

# plane_acked_all VERSION: every one of the fleet's records has acked
# VERSION and targets it (lag 0).
plane_acked_all() {
	curl -sS "$PLANE_URL/v1/nodes" | jq -e --argjson v "$1" --argjson n "${#NODES[@]}" '
		[.[] | select(.node | test("^n[0-9]{3}$")) | select(.acked_version == $v and .target_version == $v and .lag == 0)]
		| length == $n' >/dev/null
}

# counters: "node acks nacks" for every node of the fleet, one per line.
counters() {
	curl -sS "$PLANE_URL/v1/nodes" | jq -r '.[] | select(.node | test("^n[0-9]{3}$")) | "\(.node) \(.acks) \(.nacks)"'
}

# logs_mentioning VERSION: the agents whose log shows a push of VERSION
# (applied or refused), on one line.
logs_mentioning() {
	(cd "$WORK/agents" && grep -l -E "(applied version|push) $1 " -- *.log 2>/dev/null | sed 's/\.log$//' | xargs)
}

# in_list WORD LIST...: WORD is one of the LIST.
in_list() {
	local w=$1 x
	shift
	for x in "$@"; do
		[ "$x" = "$w" ] && return 0
	done
	return 1
}

# ---- a staged plane and 100 agents -----------------------------------------

# signed: every push and heartbeat of the rollout -- to a stage's new
# version, to the released one, a revert, a version-only move -- carries a
# statement the agents verify (--trust), digests of older versions included
"$CTL_BIN" keygen "$WORK/sign" >/dev/null || bail "keygen failed"
# --allow-unknown-fields: cluster/web's newfield below reaches the strict node, whose NACK fails the stage
start_plane p --rollout staged --stages 1,10,100 --bake 1 --heartbeat 1 --ack-timeout 20 --signing-key "$WORK/sign" \
	--allow-unknown-fields

ctl apply - >/dev/null <<'EOF' || bail "cannot load the initial configuration"
{"upserts":[
 {"name":"cluster/web","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9001}]}},
 {"name":"file/motd","body":{"path":"motd.txt","content":"motd-1\n"}},
 {"name":"file/app","body":{"path":"app.txt","content":"app-1\n"}}
]}
EOF
V1=$(plane_version)
check_eq "the initial configuration is version 1" 1 "$V1"
check "with no node connected, the first rollout completes at once" wait_until 10 ro_ended 1
check_eq "... with no members" "completed 0" "$(ro '"\(.state) \(.members)"')"

# the check refuses any rendered file holding BAD; the reload hook, run
# after every swap, records any live output that holds BAD (it never should)
bad_check "$WORK/check.sh"
cat >"$WORK/reload.sh" <<EOF
if grep -rq --exclude-dir=.tether-work BAD "\$TETHER_OUTPUT"; then
	echo "\$TETHER_OUTPUT \$TETHER_VERSION" >>"$WORK/bad-live"
fi
exit 0
EOF

mkdir -p "$WORK/agents"
NODES=()
STRICT=()
# zones a, b and c, and a small one, edge, of two default nodes: the
# rarest label value goes first, so the 1 % stage is an edge node (not a
# strict one) and the strict nodes first come in at the 10 % stage.
# --stream-timeout 30: a busy machine must not make a quiet stream look
# dead, since a reconnect would add a message to the counts checked below.
zones=(a b c)
for i in $(seq -w 1 100); do
	n=n$i
	NODES+=("$n")
	zone=${zones[$((10#$i % 3))]}
	case $n in n001|n002) zone=edge ;; esac
	if [ $((10#$i % 10)) = 3 ]; then
		STRICT+=("$n")
		ALOG=agents/$n start_agent "$n" --strict --labels "profile=strict,zone=$zone" --backoff-max 1 --stream-timeout 30 \
			--trust "$WORK/sign.pub" \
			--check "sh $WORK/check.sh" --reload "sh $WORK/reload.sh"
	else
		ALOG=agents/$n start_agent "$n" --labels "profile=default,zone=$zone" --backoff-max 1 --stream-timeout 30 \
			--trust "$WORK/sign.pub" \
			--check "sh $WORK/check.sh" --reload "sh $WORK/reload.sh"
	fi
done
check_eq "10 of the 100 agents are strict" 10 "${#STRICT[@]}"
if wait_until 60 fleet_at "$V1"; then
	ok "100 agents reach version $V1"
else
	not_ok "100 agents reach version $V1"
	diag "not there: $(nodes_not_at "$V1")"
fi
check "the plane sees all 100 connected" wait_until 20 connected_is 100
check "the plane sees all 100 acked at $V1" wait_until 20 plane_acked_all "$V1"
check_eq "every node holds the initial files" "" "$(wrong_content app.txt app-1)"
table=$(ctl nodes)
check_eq "tetherctl nodes lists the 100 nodes at version $V1 with lag 0, connected" 100 \
	"$(echo "$table" | awk 'NR > 1 && $1 ~ /^n[0-9][0-9][0-9]$/ && $2 == '"$V1"' && $3 == '"$V1"' && $4 == 0 && $5 == "yes"' | wc -l)"
check "tetherctl nodes shows the labels" grep -Eq '^n003 .*profile=strict' <<<"$table"

# ---- (a) a good change reaches 100 % ------------------------------------------------

ctl apply - >/dev/null <<'EOF'
{"upserts":[
 {"name":"cluster/web","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9002}]}},
 {"name":"file/motd","body":{"path":"motd.txt","content":"motd-2 good\n"}}
]}
EOF
V2=$(plane_version)
check_eq "the good change is version 2" 2 "$V2"
check "the good change's rollout starts" wait_until 10 ro_is '.id == 2'
check "the good change's rollout (2) ends" wait_until 60 ro_ended 2
r=$(curl -sS "$PLANE_URL/v1/rollouts/current")
diag "rollout 2: $(echo "$r" | jq -c .)"
check_eq "rollout 2: completed at stage 100 %, stage 3 of 3" "completed 100 3 [1,10,100]" \
	"$(echo "$r" | jq -r '"\(.state) \(.stage) \(.stage_index) \(.stages | tojson)"')"
check_eq "rollout 2: from $V1 to $V2, no revert, no reason" "$V1 $V2 0 null" \
	"$(echo "$r" | jq -r '"\(.from_version) \(.to_version) \(.revert_version) \(.reason)"')"
check_eq "rollout 2: 100 members, all reached and touched" "100 100 100" \
	"$(echo "$r" | jq -r '"\(.members) \(.reached) \(.touched)"')"
check_eq "rollout 2: per stage (the console's bars), members and ACKs: 1, 9, 90, none pending" \
	'[[1,1,0],[9,9,0],[90,90,0]]' "$(echo "$r" | jq -c '[.stage_counts[] | [.members, .acked, .pending]]')"
check_eq "rollout 2: one message per node (100), nothing reverted" "100 0 0" \
	"$(echo "$r" | jq -r '"\(.messages) \(.revert_messages) \(.version_only_messages)"')"
check "rollout 2 baked each of its three stages (at least 3 s from start to end)" \
	test "$(echo "$r" | jq '(.finished_at - .started_at) >= 3')" = true
check "the plane went through the 10 % stage (10 of 100 nodes)" \
	grep -q "rollout 2: stage 10% (10 of 100 nodes)" "$PLANE_LOG"
check "and the 100 % stage" grep -q "rollout 2: stage 100% (100 of 100 nodes)" "$PLANE_LOG"
check "every agent applies version $V2" wait_until 30 fleet_at "$V2"
check_eq "every node holds the new content" "" "$(wrong_content motd.txt "motd-2 good")"
check "the plane sees all 100 acked at $V2 with lag 0" wait_until 20 plane_acked_all "$V2"
check_eq "tether_released_version is $V2" "$V2" "$(metric tether_released_version)"
check_eq "tether_rollout_state is 2 (completed)" 2 "$(metric tether_rollout_state)"
check "tetherctl rollout status shows rollout 2 completed" grep -Eq '^rollout: +2 \(completed\): version [0-9]+ -> 2$' \
	<<<"$(ctl rollout status)"

# ---- (b) a change every node rejects stops at 1 % ------------------------------------

counters | sort >"$WORK/counters.before-b"
MOTD2=$(ctl get file/motd)
out=$(put file/motd '{"path":"motd.txt","content":"BAD\n"}')
VB=$(echo "$out" | json .version)
check_eq "the bad change is version 3" 3 "$VB"
check "the bad change's rollout (3) ends" wait_until 40 ro_ended 3
r=$(curl -sS "$PLANE_URL/v1/rollouts/current")
diag "rollout 3: $(echo "$r" | jq -c .)"
RB=$(echo "$r" | jq -r .revert_version)
check_eq "rollout 3 is rolled back at the first stage (1 %, stage 1, 1 node reached)" "rolled_back 1 1 1" \
	"$(echo "$r" | jq -r '"\(.state) \(.stage) \(.stage_index) \(.reached)"')"
check_eq "rollout 3: one node touched, one message for the bad version" "1 1" \
	"$(echo "$r" | jq -r '"\(.touched) \(.messages)"')"
check_eq "rollout 3: its first stage shows the NACK; the others were not reached" \
	'[{"members":1,"reached":true,"acked":0,"unhealthy":0,"nacked":1,"pending":0},false,false]' \
	"$(echo "$r" | jq -c '[.stage_counts[0], .stage_counts[1].reached, .stage_counts[2].reached]')"
check "rollout 3: the revert is a new, higher version ($RB > $VB)" test "$RB" -gt "$VB"
check_eq "the revert is the plane's newest version" "$RB" "$(plane_version)"
reason=$(echo "$r" | jq -r .reason)
TB=$(echo "$reason" | sed -n 's/^node \([^:]*\): .*/\1/p')
check "the 1 % stage was an edge node, the rarest label value ($TB)" test "$TB" = n001 -o "$TB" = n002
check "the reason names the node and the check's failure ($reason)" \
	grep -Eq "^node $TB: NACK of version $VB: .*BAD content refused" <<<"$reason"
check_eq "the plane's resource is back to its old body" "$MOTD2" "$(ctl get file/motd)"
check "every agent ends at the revert version $RB" wait_until 30 fleet_at "$RB"
check "the plane sees all 100 acked at $RB" wait_until 20 plane_acked_all "$RB"
check_eq "every node holds the good content" "" "$(wrong_content motd.txt "motd-2 good")"
check_eq "only the touched node ($TB) ever saw version $VB (agent logs)" "$TB" "$(logs_mentioning "$VB")"
check_eq "the touched node refused it once and applied the revert once" "1 1" \
	"$(grep -c "push $VB refused" "$WORK/agents/$TB.log") $(grep -c "applied version $RB " "$WORK/agents/$TB.log")"
check_eq "only the touched node has a NACK on the plane" "$TB:$VB" \
	"$(curl -sS "$PLANE_URL/v1/nodes" | jq -r '[.[] | select(.last_nack != null) | "\(.node):\(.last_nack.version)"] | join(" ")')"
# One push for the bad version and one after, per touched node: the plane
# counts pushes of the revert version (with content or version-only) per
# rollout; every agent applied the revert, so each got at least one, and
# 100 in all means exactly one each. The per-node ACK counters agree: one
# NACK plus one ACK for the touched node, one ACK for every other node.
sum=$(curl -sS "$PLANE_URL/v1/rollouts/current" | jq '.revert_messages + .version_only_messages')
check_eq "the revert went out once per node (revert + version-only messages = 100)" 100 "$sum"
counters | sort >"$WORK/counters.after-b"
moved=$(join "$WORK/counters.before-b" "$WORK/counters.after-b" |
	awk -v t="$TB" '{d = ($4 - $2) " " ($5 - $3); want = ($1 == t) ? "1 1" : "1 0"; if (d != want) print $1 "=" d}' | xargs)
check_eq "per node: the touched one NACKed once and ACKed once, the others ACKed once" "" "$moved"
check "tetherctl rollout status says rolled back" grep -Eq '^rollout: +[0-9]+ \(rolled back\)' \
	<<<"$(ctl rollout status)"
check_eq "tether_rollout_state is 3 (rolled back)" 3 "$(metric tether_rollout_state)"
check_eq "tether_released_version is the revert" "$RB" "$(metric tether_released_version)"

# ---- (c) a change only the strict nodes reject is caught by 10 % -------------------------

ctl apply - >/dev/null <<'EOF'
{"upserts":[
 {"name":"cluster/web","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9003}],"newfield":1}},
 {"name":"file/app","body":{"path":"app.txt","content":"app-3 strict-only\n"}}
]}
EOF
VS=$(plane_version)
check_eq "the strict-only change is version $((RB + 1))" "$((RB + 1))" "$VS"
check "its rollout ends" wait_until 60 ro_is ".to_version == $VS and .state != \"in_progress\""
r=$(curl -sS "$PLANE_URL/v1/rollouts/current")
diag "rollout $(echo "$r" | jq -r .id): $(echo "$r" | jq -c .)"
RS=$(echo "$r" | jq -r .revert_version)
check_eq "it is rolled back" rolled_back "$(echo "$r" | jq -r .state)"
check "no later than the 10 % stage (stage $(echo "$r" | jq .stage) %)" test "$(echo "$r" | jq .stage)" -le 10
check_eq "at the 10 % stage: the edge node of the 1 % stage took it, a strict node of the 10 % refused it" \
	"10 2 10" "$(echo "$r" | jq -r '"\(.stage) \(.stage_index) \(.reached)"')"
check "with at most 10 nodes touched ($(echo "$r" | jq .touched))" test "$(echo "$r" | jq .touched)" -le 10
check "and at least one" test "$(echo "$r" | jq .touched)" -ge 1
check_eq "one message per touched node" "$(echo "$r" | jq .touched)" "$(echo "$r" | jq .messages)"
reason=$(echo "$r" | jq -r .reason)
TS=$(echo "$reason" | sed -n 's/^node \([^:]*\): .*/\1/p')
check "the reason names a strict node ($TS)" in_list "$TS" "${STRICT[@]}"
check "and the unknown field ($reason)" grep -Eq "^node $TS: NACK of version $VS: .*newfield" <<<"$reason"
check "the revert is a new, higher version ($RS > $VS)" test "$RS" -gt "$VS"
check "every agent ends at the revert version $RS" wait_until 30 fleet_at "$RS"
check "the plane sees all 100 acked at $RS" wait_until 20 plane_acked_all "$RS"
check_eq "no node holds the strict-only change's file content" "" "$(wrong_content app.txt app-1)"
# the nodes that applied the strict-only version get the old content back
# in the revert; the rest (never applied it) a version-only push
took=$(cd "$WORK/agents" && grep -l "applied version $VS " -- *.log | sed 's/\.log$//' | xargs)
ntook=$(echo $took | wc -w)
check "the edge node of the 1 % stage applied version $VS ($took)" in_list "$TB" $took
bad=$(for n in $took; do in_list "$n" "${STRICT[@]}" && echo "$n"; done | xargs)
check_eq "no strict node applied it" "" "$bad"
check "at most 10 nodes applied it ($ntook)" test "$ntook" -le 10
# One push of the revert per node, plus one per node whose refusal
# crossed the revert on the wire: the plane pushed it the revert on top of
# the version it had sent, the agent (still at the version before) answers
# "applies on version ..., not on ours: resyncing" and gets it again.
resynced=$(cd "$WORK/agents" && grep -l "push $RS applies on version $VS, not on ours" -- *.log | sed 's/\.log$//' | xargs)
nres=$(echo $resynced | wc -w)
diag "resynced on the revert: ${resynced:-none}"
r=$(curl -sS "$PLANE_URL/v1/rollouts/current")
diag "revert pushes: $(echo "$r" | jq -c '{revert_messages, version_only_messages}')"
check_eq "the revert went out once per node (+ $nres resync): revert + version-only messages" \
	"$((100 + nres))" "$(echo "$r" | jq '.revert_messages + .version_only_messages')"
check "a node that applied the strict-only version got content back: revert messages >= $ntook" \
	test "$(echo "$r" | jq .revert_messages)" -ge "$ntook"
check_eq "every agent applied the revert exactly once" 100 \
	"$(cat "$WORK"/agents/*.log | grep -c "applied version $RS ")"
reverted=$(for n in $took; do grep -q "applied version $RS (delta, 2 changes" "$WORK/agents/$n.log" || echo "$n"; done | xargs)
check_eq "each of them applied the revert as two changes (file and cluster back)" "" "$reverted"
others=$(for n in "${NODES[@]}"; do in_list "$n" $took && continue
	grep -Eq "applied version $RS \(delta, ([0-9]+ pushes merged, )?0 changes" "$WORK/agents/$n.log" || echo "$n"; done | xargs)
check_eq "every other node applied it as a version bump (0 changes)" "" "$others"
check_eq "the plane's cluster/web lacks the new field and has the old endpoint" "false 9002" \
	"$(ctl get cluster/web | jq -r '"\(has("newfield")) \(.endpoints[0].port)"')"
check_eq "the plane's file/app is back to app-1" "app-1" "$(ctl get file/app | jq -r .content | tr -d '\n')"
nacked=$(curl -sS "$PLANE_URL/v1/nodes" | jq -r --argjson v "$VS" '[.[] | select(.last_nack.version == $v) | .node] | join(" ")')
notstrict=$(for n in $nacked; do in_list "$n" "${STRICT[@]}" || echo "$n"; done | xargs)
check_eq "only strict nodes NACKed version $VS ($nacked)" "" "$notstrict"

# ---- the end: one version everywhere, no bad content ever live -----------------------------

check_eq "every node is at the same, highest version $RS" "" "$(nodes_not_at "$RS")"
check_eq "that is the plane's version" "$RS" "$(plane_version)"
check_eq "every node keeps the good change" "" "$(wrong_content motd.txt "motd-2 good")"
check "no node ever had BAD live (reload hook record)" test ! -e "$WORK/bad-live"
left=$(grep -rl --exclude-dir=.tether-work BAD "$WORK"/n*.out 2>/dev/null | xargs)
check_eq "no node's output holds BAD" "" "$left"
hist=$(curl -sS "$PLANE_URL/v1/rollouts?limit=10")
check_eq "the history lists the rollouts newest first" \
	"$(ro .id) rolled_back,rolled_back,completed,completed" \
	"$(echo "$hist" | jq -r '"\(.[0].id) \([.[].state] | join(","))"')"
check_eq "tether_rollouts_total: 4 started, 2 completed, 2 rolled back" "4 2 2" \
	"$(metric 'tether_rollouts_total{result="started"}') $(metric 'tether_rollouts_total{result="completed"}') $(metric 'tether_rollouts_total{result="rolled_back"}')"
check "no sanitizer report in any log" sh -c "! grep -rl -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log '$WORK/agents'"

done_testing
