#!/usr/bin/env bash
# t0977-freeze-rollout.sh: a freeze holds staged rollouts (--rollout staged
# --stages 50,100, two real agents): a rollout in progress stays at its
# stage past its bake while frozen, its status says "held: frozen until
# ..." and `tetherctl rollout status` prints the freeze line; after
# --off it goes on to every node. `tetherctl rollout abort` still works
# while frozen (the revert reaches every node). A version an admin's
# override wrote during a freeze waits for the thaw: its rollout starts
# only once the freeze ended by itself. A rollout at its last stage does
# not complete while frozen.
. "$(dirname "$0")/lib.sh"

need_cmd jq curl
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

BAKE=4
start_plane p --rollout staged --stages 50,100 --bake $BAKE --heartbeat 1 --ack-timeout 30
NODES=(a1 a2)
staged_fleet_at_1 "${NODES[@]}"

# first_stage ID VERSION: rollout ID of VERSION is in progress at its first
# stage with its one member's ACK
first_stage() {
	ro_is ".id == $1 and .to_version == $2 and .state == \"in_progress\" and .stage == 50 and .acked == 1"
}
# baked_past: the current stage started more than the bake (and a second) ago
baked_past() {
	local s
	s=$(ro .stage_started_at)
	[ "$(date +%s)" -gt $((${s%.*} + BAKE + 1)) ]
}

# ---- a rollout in progress is held, and goes on after --off -----------------------

ctl put file/motd - <<<'{"path":"motd.txt","content":"motd-2\n"}' >/dev/null || bail "cannot write version 2"
check "rollout 2 reaches its first stage (one node ACKed)" wait_until 20 first_stage 2 2
ctl freeze --until 1h --message "hold the rollout" >/dev/null || not_ok "cannot freeze"
check "its status says it is held by the freeze" \
	ro_is '.frozen | test("^held: frozen until [0-9TZ:-]+ by anonymous: hold the rollout$")'
check "the bake passes" wait_until 20 baked_past
check "... and it is still at its first stage, in progress" ro_is '.id == 2 and .state == "in_progress" and .stage == 50'
check_eq "one node has version 2, the other still 1" "1 2" "$(for n in "${NODES[@]}"; do st "$n" version; done | sort | xargs)"
out=$(ctl rollout status)
check "tetherctl rollout status prints the freeze line" \
	grep -Eq '^frozen until [0-9T:+-]+ by anonymous: hold the rollout$' <<<"$out"
check_eq "tetherctl freeze --off" "freeze ended: writes and rollouts go on" "$(ctl freeze --off)"
check "after --off the rollout completes" wait_until 30 ro_is '.id == 2 and .state == "completed"'
check "both agents reach version 2" wait_until 30 all_at 2 "${NODES[@]}"
check "its status no longer says frozen" ro_is '.frozen == null'

# ---- rollout abort still works while frozen ------------------------------------------

ctl put file/motd - <<<'{"path":"motd.txt","content":"motd-3 BAD\n"}' >/dev/null || bail "cannot write version 3"
check "rollout 3 reaches its first stage" wait_until 20 first_stage 3 3
ctl freeze --until 1h --message "hold it again" >/dev/null || not_ok "cannot freeze"
out=$(ctl rollout abort 2>&1)
check "tetherctl rollout abort works while frozen" grep -q "aborted" <<<"$out"
RV=$(ro .revert_version)
check "the abort's revert is a new version" test "$RV" -gt 3
check "both agents reach the revert version $RV" wait_until 30 all_at "$RV" "${NODES[@]}"
check "no agent serves the aborted content" sh -c "! grep -rq BAD '$WORK/a1.out' '$WORK/a2.out'"
check_eq "the freeze still holds" 1 "$(metric tether_frozen)"

# ---- a version written during a freeze waits for the thaw ---------------------------

check_eq "end it, and freeze for a few seconds" "freeze ended: writes and rollouts go on" "$(ctl freeze --off)"
wait_until 20 ro_ended 3 || bail "rollout 3 did not end"
LAST=$(ro .id)
ctl freeze --until 5s --message "a short one" >/dev/null || not_ok "cannot freeze for 5 s"
V5=$(ctl put file/motd - --override "the fix must be in" <<<'{"path":"motd.txt","content":"motd-5\n"}' 2>&1 | awk '{print $2}')
check "an admin's override wrote a version during the freeze" test -n "$V5" -a "$V5" -gt "$RV"
check_eq "no rollout of it starts while frozen" "$LAST" "$(ro .id)"
check_eq "... the agents keep the revert version" "$RV $RV" "$(for n in "${NODES[@]}"; do st "$n" version; done | xargs)"
gone() { [ "$(curl -sS "$PLANE_URL/v1/status" | jq -c .freeze)" = null ]; }
check "the freeze ends by itself" wait_until 20 gone
check "then its rollout starts and completes" wait_until 40 ro_is ".id > $LAST and .to_version == $V5 and .state == \"completed\""
check "both agents reach version $V5" wait_until 30 all_at "$V5" "${NODES[@]}"

# ---- a rollout at its last stage does not complete while frozen ---------------------
# (completing releases the version to every node, those that join later too)

V6=$(ctl put file/motd - <<<'{"path":"motd.txt","content":"motd-6\n"}' 2>&1 | awk '{print $2}')
check "version 6 was written" test "$V6" = $((V5 + 1))
last_stage() { ro_is ".to_version == $V6 and .state == \"in_progress\" and .stage == 100 and .acked == 2"; }
check "its rollout reaches its last stage, both nodes ACKed" wait_until 40 last_stage
ctl freeze --until 1h --message "hold the last stage" >/dev/null || not_ok "cannot freeze"
check "the bake of the last stage passes" wait_until 20 baked_past
check "... and the rollout is still in progress, held" \
	ro_is ".to_version == $V6 and .state == \"in_progress\" and (.frozen | test(\"hold the last stage\"))"
check_eq "tetherctl freeze --off" "freeze ended: writes and rollouts go on" "$(ctl freeze --off)"
check "after --off it completes" wait_until 30 ro_is ".to_version == $V6 and .state == \"completed\""
done_testing
