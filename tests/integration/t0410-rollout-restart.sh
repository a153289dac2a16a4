#!/usr/bin/env bash
# t0410-rollout-restart.sh: a staged rollout survives the plane's restart
# (SIGTERM, then kill -9) on the same port and data directory: it resumes
# with the same id, state, stage, members and bake start, the nodes in the
# stage keep the new version and the rest the old one; then an operator's
# abort (tetherctl rollout abort, and the HTTP endpoint) reverts it as a
# new, higher version every node converges to with the old content; an
# abort with nothing in progress is 409; a rollout resumed by a plane
# restarted with a short --bake goes on to completion; one restarted with
# other --stages goes on from the nodes it reached, through the new stages;
# GET /v1/rollouts is the history, newest first.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# ---- helpers of this test ---------------------------------------------------

# settled: the plane sees every node connected, at its target (lag 0).
settled() {
	curl -sS "$PLANE_URL/v1/nodes" | jq -e --argjson n "${#NODES[@]}" '
		[.[] | select(.connected and .lag == 0 and .acked_version == .target_version)] | length == $n' >/dev/null
}

# targets: "node:target" for every node, on one line.
targets() {
	curl -sS "$PLANE_URL/v1/nodes" | jq -r '[.[] | "\(.node):\(.target_version)"] | join(" ")'
}

# applies: how many versions each agent applied, on one line.
applies() {
	local n out=""
	for n in "${NODES[@]}"; do
		out="$out $n:$(grep -c 'applied version' "$WORK/$n.log")"
	done
	echo $out
}

# motds: the content of every node's motd.txt, distinct values.
motds() {
	local n
	for n in "${NODES[@]}"; do
		cat "$WORK/$n.out/motd.txt" 2>/dev/null || echo "(none)"
	done | sort -u | xargs
}


# restart_plane SIGNAL NAME [BAKE]: stops the plane with SIGNAL and starts
# it again as NAME (log $WORK/NAME.log) on the same port and data
# directory, with --bake BAKE (default 600) and --stages $STAGES.
STAGES=1,10,100
restart_plane() {
	stop_pid "$PLANE_PID" "$1"
	start_plane "$2" --rollout staged --stages "$STAGES" --bake "${3:-600}" --heartbeat 1 --ack-timeout 60 \
		--listen "127.0.0.1:$PORT" --data "$DATA"
	[ "$PLANE_PORT" = "$PORT" ] || bail "the plane came back on port $PLANE_PORT, not $PORT"
}

# ---- a staged plane whose stages bake for ten minutes, and ten agents ----------------------

DATA=$WORK/plane.data
start_plane p1 --rollout staged --stages 1,10,100 --bake 600 --heartbeat 1 --ack-timeout 60 --data "$DATA"
PORT=$PLANE_PORT

check_eq "before any rollout GET /v1/rollouts/current is 404" 404 "$(api_status GET /v1/rollouts/current)"
check_eq "and the history is empty" "[]" "$(curl -sS "$PLANE_URL/v1/rollouts" | jq -c .)"
put file/motd '{"path":"motd.txt","content":"motd-1\n"}' >/dev/null
V1=$(plane_version)
check "with no node connected, rollout 1 completes at once" \
	wait_until 10 ro_is '.id == 1 and .state == "completed" and .members == 0'

NODES=()
for i in $(seq -w 1 10); do
	NODES+=("m$i")
	start_agent "m$i" --labels "zone=z$((10#$i % 3))" --backoff-max 1 --stream-timeout 30
done
check "10 agents reach version $V1" wait_until 30 all_at "$V1" "${NODES[@]}"
check "the plane sees them connected and current" wait_until 20 settled

# ---- a good change waits in its first stage ---------------------------------------------------

put file/motd '{"path":"motd.txt","content":"motd-2\n"}' >/dev/null
V2=$(plane_version)
check "rollout 2 starts and its one stage-1 member ACKs" \
	wait_until 20 ro_is ".id == 2 and .state == \"in_progress\" and .stage == 1 and .reached == 1 and .acked == 1"
before=$(curl -sS "$PLANE_URL/v1/rollouts/current")
diag "before the restart: $(echo "$before" | jq -c .)"
check_eq "it goes from $V1 to $V2 over 10 members" "$V1 $V2 10 1" \
	"$(echo "$before" | jq -r '"\(.from_version) \(.to_version) \(.members) \(.touched)"')"
MEMBER=$(curl -sS "$PLANE_URL/v1/nodes" | jq -r --argjson v "$V2" '[.[] | select(.target_version == $v) | .node] | join(" ")')
check "exactly one node targets version $V2 ($MEMBER)" test "$(echo $MEMBER | wc -w)" = 1
check "the member applies version $V2" wait_until 10 agent_at "$MEMBER" "$V2"
check "the plane sees every node at its target" wait_until 20 settled
T_BEFORE=$(targets)
V_BEFORE=$(versions)
expect=$(for n in "${NODES[@]}"; do [ "$n" = "$MEMBER" ] && echo "$n:$V2" || echo "$n:$V1"; done | xargs)
check_eq "the member runs $V2, the other nine $V1" "$expect" "$V_BEFORE"

# ---- SIGTERM and kill -9: the rollout resumes -------------------------------------------------

for sig in TERM KILL; do
	A_BEFORE=$(applies)
	restart_plane "$sig" "p-$sig"
	check "SIG$sig: the plane says it resumed rollout 2 at stage 1%" \
		grep -q "rollout 2: resumed at stage 1% (1 of 10 nodes), version $V1 -> $V2" "$PLANE_LOG"
	after=$(curl -sS "$PLANE_URL/v1/rollouts/current")
	check_eq "SIG$sig: same id, state, stage, versions, members and stage start" \
		"$(echo "$before" | jq -c '[.id, .state, .stage, .stage_index, .from_version, .to_version, .members, .reached, .stage_started_at, .started_at]')" \
		"$(echo "$after" | jq -c '[.id, .state, .stage, .stage_index, .from_version, .to_version, .members, .reached, .stage_started_at, .started_at]')"
	check_eq "SIG$sig: the member still counts as touched" 1 "$(echo "$after" | jq .touched)"
	check_eq "SIG$sig: the message sent before the restart still counts (messages 1)" 1 \
		"$(echo "$after" | jq .messages)"
	check "SIG$sig: every agent reconnects and the plane sees each at its target" wait_until 30 settled
	check_eq "SIG$sig: the member's ACK is remembered (acked 1 in stage)" 1 "$(ro .acked)"
	check_eq "SIG$sig: the targets are the same (member $V2, the rest $V1)" "$T_BEFORE" "$(targets)"
	check_eq "SIG$sig: the agents still run what they ran" "$V_BEFORE" "$(versions)"
	check_eq "SIG$sig: no agent applied anything on reconnecting" "$A_BEFORE" "$(applies)"
	check_eq "SIG$sig: still in progress at stage 1 (the bake goes on)" "in_progress 1" "$(ro '"\(.state) \(.stage)"')"
	check_eq "SIG$sig: tether_rollout_state 1, tether_released_version $V1" "1 $V1" \
		"$(metric tether_rollout_state) $(metric tether_released_version)"
done
check_eq "the member holds the new content, the rest the old" "motd-1 motd-2" "$(motds)"

# ---- abort: revert as a new version ---------------------------------------------------------------

out=$(TETHER_PLANE=$PLANE_URL "$CTL_BIN" rollout abort 2>&1)
rc=$?
check_eq "tetherctl rollout abort (TETHER_PLANE) exits 0" 0 "$rc"
check "and prints the aborted rollout" grep -Eq '^rollout: +[0-9]+ \(aborted\)' <<<"$out"
r=$(curl -sS "$PLANE_URL/v1/rollouts/current")
diag "after the abort: $(echo "$r" | jq -c .)"
RV=$(echo "$r" | jq .revert_version)
check_eq "rollout 2 is aborted by the operator" "2 aborted aborted by the operator" \
	"$(echo "$r" | jq -r '"\(.id) \(.state) \(.reason)"')"
check "its revert is a new, higher version ($RV > $V2)" test "$RV" -gt "$V2"
check_eq "that is the plane's version" "$RV" "$(plane_version)"
check_eq "the plane's resource is back to the old content" "motd-1" "$(ctl get file/motd | jq -r .content | tr -d '\n')"
check "every agent converges to $RV" wait_until 30 all_at "$RV" "${NODES[@]}"
check_eq "every node holds the old content" "motd-1" "$(motds)"
check "the plane sees every node at $RV" wait_until 20 sh -c "curl -sS '$PLANE_URL/v1/nodes' | jq -e 'all(.[]; .acked_version == $RV and .target_version == $RV)'"
check "the member applied the restoring content (1 change)" grep -q "applied version $RV (delta, 1 changes" "$WORK/$MEMBER.log"
others=$(for n in "${NODES[@]}"; do [ "$n" = "$MEMBER" ] && continue
	grep -q "applied version $RV (delta, 0 changes" "$WORK/$n.log" || echo "$n"; done | xargs)
check_eq "the others only moved their version (0 changes)" "" "$others"
r=$(curl -sS "$PLANE_URL/v1/rollouts/current")
check_eq "the revert went out once per node" 10 "$(echo "$r" | jq '.revert_messages + .version_only_messages')"
check_eq "tether_rollout_state 4 (aborted), tether_rollouts_total{aborted} 1" "4 1" \
	"$(metric tether_rollout_state) $(metric 'tether_rollouts_total{result="aborted"}')"

# ---- nothing in progress: 409 --------------------------------------------------------------------

out=$(api POST /v1/rollouts/current/abort)
check_eq "an abort with nothing in progress is 409" 409 "${out##*$'\n'}"
check_eq "with a JSON error" "no rollout in progress" "$(echo "${out%$'\n'*}" | jq -r .error)"
out=$(ctl rollout abort 2>&1)
check_eq "tetherctl rollout abort then exits 1" 1 "$?"
check "and says why" grep -q "no rollout in progress" <<<"$out"
check_eq "the aborted rollout stays the current one" "2 aborted" "$(ro '"\(.id) \(.state)"')"

# ---- an abort over HTTP, and the history -----------------------------------------------------------

put file/motd '{"path":"motd.txt","content":"motd-3\n"}' >/dev/null
V3=$(plane_version)
check "rollout 3 starts for version $V3 and its stage-1 member ACKs" \
	wait_until 20 ro_is ".id == 3 and .state == \"in_progress\" and .from_version == $RV and .to_version == $V3 and .acked == 1"
out=$(api POST /v1/rollouts/current/abort)
check_eq "POST /v1/rollouts/current/abort is 200" 200 "${out##*$'\n'}"
body=${out%$'\n'*}
RV3=$(echo "$body" | jq .revert_version)
check_eq "and answers the aborted rollout" "3 aborted" "$(echo "$body" | jq -r '"\(.id) \(.state)"')"
check "its revert is a new, higher version ($RV3 > $V3)" test "$RV3" -gt "$V3"
check "every agent converges to $RV3" wait_until 30 all_at "$RV3" "${NODES[@]}"
check_eq "every node holds the content of before the rollout" "motd-1" "$(motds)"

# ---- a resumed rollout goes on to completion -------------------------------------------------------

put file/motd '{"path":"motd.txt","content":"motd-4\n"}' >/dev/null
V4=$(plane_version)
check "rollout 4 starts for version $V4 and its stage-1 member ACKs" \
	wait_until 20 ro_is ".id == 4 and .state == \"in_progress\" and .to_version == $V4 and .stage == 1 and .acked == 1"
S4=$(ro .stage_started_at)
# the stage started over a second ago by now; with --bake 1 the resumed
# rollout is due to advance at once
check "its first stage has baked for more than 1 s" \
	wait_until 10 sh -c "[ \$(date +%s) -gt \$(( ${S4%.*} + 1 )) ]"
restart_plane KILL p-resume 1
check "SIGKILL, restarted with --bake 1: the plane resumes rollout 4" \
	grep -q "rollout 4: resumed at stage 1% (1 of 10 nodes)" "$PLANE_LOG"
check "it completes" wait_until 30 ro_is '.id == 4 and .state == "completed" and .stage == 100'
check "every agent reaches version $V4" wait_until 30 all_at "$V4" "${NODES[@]}"
check_eq "with its content" "motd-4" "$(motds)"
check "the plane logged the later stages" grep -q "rollout 4: stage 100% (10 of 10 nodes)" "$PLANE_LOG"
check_eq "tether_released_version is $V4" "$V4" "$(metric tether_released_version)"

# ---- --stages changed across a restart: the run goes on, never all at once ---------------------------

put file/motd '{"path":"motd.txt","content":"motd-5\n"}' >/dev/null
V5=$(plane_version)
check "rollout 5 starts for version $V5 and its stage-1 member ACKs" \
	wait_until 20 ro_is ".id == 5 and .state == \"in_progress\" and .to_version == $V5 and .stage == 1 and .acked == 1"
STAGES=50,100
restart_plane KILL p-stages
check "restarted with --stages 50,100: the plane says the stages changed and keeps the one node reached" \
	grep -q "rollout 5: --stages changed: 1 of 10 nodes reached, resuming at stage 50%" "$PLANE_LOG"
check "every agent reconnects" wait_until 30 settled
check_eq "rollout 5 is still in progress with 1 node reached (not ended, not sent to all)" "in_progress 1 1" \
	"$(ro '"\(.state) \(.reached) \(.acked)"')"
check_eq "one node targets $V5, nine stay at $V4" "1 9" \
	"$(curl -sS "$PLANE_URL/v1/nodes" | jq -r --argjson v "$V5" --argjson o "$V4" \
		'"\([.[] | select(.target_version == $v)] | length) \([.[] | select(.target_version == $o)] | length)"')"
check_eq "the agents run what they ran" "motd-4 motd-5" "$(motds)"
restart_plane TERM p-stages2 1
check "restarted with --bake 1, rollout 5 completes" wait_until 30 ro_is '.id == 5 and .state == "completed" and .stage == 100'
check "through the new 50% stage first" grep -q "rollout 5: stage 50% (5 of 10 nodes)" "$PLANE_LOG"
check "and then 100%" grep -q "rollout 5: stage 100% (10 of 10 nodes)" "$PLANE_LOG"
check "every agent reaches version $V5" wait_until 30 all_at "$V5" "${NODES[@]}"

# ---- the history --------------------------------------------------------------------------------------

hist=$(curl -sS "$PLANE_URL/v1/rollouts")
check_eq "GET /v1/rollouts lists the history, newest first" "5:completed 4:completed 3:aborted 2:aborted 1:completed" \
	"$(echo "$hist" | jq -r '[.[] | "\(.id):\(.state)"] | join(" ")')"
check_eq "each with its versions" "$V5/0 $V4/0 $V3/$RV3 $V2/$RV $V1/0" \
	"$(echo "$hist" | jq -r '[.[] | "\(.to_version)/\(.revert_version)"] | join(" ")')"
check_eq "?limit=1 gives the newest only" "5" "$(curl -sS "$PLANE_URL/v1/rollouts?limit=1" | jq -r '[.[].id] | join(" ")')"
check_eq "?limit=0 is 400" 400 "$(api_status GET '/v1/rollouts?limit=0')"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
