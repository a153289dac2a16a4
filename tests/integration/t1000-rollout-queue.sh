#!/usr/bin/env bash
# t1000-rollout-queue.sh: a write made while a staged rollout bakes says
# it is queued, and where (--rollout staged --stages 50,100, a long bake,
# two real agents): the answer's "rollout" member ({"state":"queued",
# "behind","stage","stages","queue"}), tetherctl put/rm/apply/sync/revert
# printing "version N: queued behind rollout R (stage S of T)", GET
# /v1/rollouts/current listing the queue (version, author, message,
# since) and `tetherctl rollout status` printing it in words. A write
# that starts a rollout says "started" in JSON and prints "version N" as
# it always did.
. "$(dirname "$0")/lib.sh"

need_cmd jq curl
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

start_plane p --rollout staged --stages 50,100 --bake 600 --heartbeat 1 --ack-timeout 60
NODES=(a1 a2)
staged_fleet_at_1 "${NODES[@]}"

# ---- the write that starts a rollout -------------------------------------------

ans=$(curl -sS -X PUT --data-binary '{"path":"motd.txt","content":"motd-2\n"}' "$PLANE_URL/v1/resources/file/motd")
check_eq "version 2's answer says its rollout started" '{"state":"started","id":2,"stages":2}' \
	"$(jq -c .rollout <<<"$ans")"
first_stage() { ro_is '.id == 2 and .state == "in_progress" and .stage_index == 1 and .acked == 1'; }
check "rollout 2 reaches its first stage (one node ACKed), and bakes" wait_until 20 first_stage
check_eq "nothing is queued behind it" '[] 0' "$(ro '"\(.queue) \(.queued)"' | sed 's/\[\]/[]/')"

# ---- writes made while it bakes are queued, and say so -----------------------------

out=$(ctl put file/motd - --message "the fix" <<<'{"path":"motd.txt","content":"motd-3\n"}')
check_eq "put: queued behind rollout 2 (stage 1 of 2)" "version 3: queued behind rollout 2 (stage 1 of 2)" "$out"
ans=$(curl -sS -X PUT -H 'X-Tether-Message: another' --data-binary '{"path":"b.txt","content":"b\n"}' \
	"$PLANE_URL/v1/resources/file/b")
check_eq "the answer's rollout member: behind 2, stage 1 of 2, second in the queue" \
	'{"state":"queued","behind":2,"behind_version":2,"stage":1,"stages":2,"queue":2}' "$(jq -c .rollout <<<"$ans")"
out=$(ctl rm file/b)
check_eq "rm: queued, third" "version 5: queued behind rollout 2 (stage 1 of 2), 3 versions waiting with this one" "$out"
cat >"$WORK/batch.json" <<'JSON'
{"upserts":[{"name":"file/c","body":{"path":"c.txt","content":"c\n"}}]}
JSON
out=$(ctl apply "$WORK/batch.json")
check "apply: queued" grep -q "^version 6: queued behind rollout 2 (stage 1 of 2)" <<<"$out"
mkdir -p "$WORK/tree/file"
ctl export "$WORK/tree" --force >/dev/null || not_ok "export"
echo '{"path":"d.txt","content":"d\n"}' >"$WORK/tree/file/d.json"
out=$(ctl sync "$WORK/tree")
check "sync: queued" grep -q "^version 7: 1 created, 0 changed, 0 deleted; queued behind rollout 2 (stage 1 of 2)" \
	<<<"$out"
out=$(ctl revert 6)
check "revert: queued" grep -q "^version 8: queued behind rollout 2 (stage 1 of 2)" <<<"$out"
json=$(ctl revert 7 --json)
check "revert --json gives the plane's JSON, its queue place" jq -e '.version == 9 and .rollout.queue == 7' <<<"$json"

# ---- the queue in /v1/rollouts/current and rollout status ---------------------------

check_eq "the queue lists versions 3..9, oldest first" "3 4 5 6 7 8 9" "$(ro '[.queue[].version] | map(tostring) | join(" ")')"
check_eq "... and counts them" 7 "$(ro .queued)"
check_eq "version 3 in it: its author and message" "anonymous|the fix" "$(ro '.queue[0] | "\(.author)|\(.message)"')"
check "... and since when (epoch seconds, now-ish)" ro_is "(.queue[0].since - $(date +%s)) | fabs < 60"
out=$(ctl rollout status)
diag "$out"
check "rollout status: rollout 2 in progress, 2 -> ... in words" grep -q "^rollout: *2 (in progress): version 1 -> 2$" <<<"$out"
check "rollout status: the stage in words" grep -q "^stage: *1 of 2 (50%): 1 of 2 nodes reached$" <<<"$out"
check "rollout status: nodes as counts in words" grep -q "^nodes: *1 of 1 ACKed, 0 NACKed, 0 unhealthy, 0 pending$" <<<"$out"
check "rollout status: each stage in words" grep -q "^stages: *50%: 1 node, 1 ACKed; 100%: 1 node, not reached yet$" <<<"$out"
check "rollout status: the queue, with author, age and message" \
	grep -Eq '^queued: *version 3 \(anonymous, (just now|[0-9]+ s ago)\): "the fix"$' <<<"$out"
check_eq "rollout status: one queued line a version" 7 "$(grep -c '^queued: *version' <<<"$out")"
check "rollout status: no raw JSON" sh -c "! grep -q '[{}]' <<'OUT'
$out
OUT"
check "rollout status: no epoch seconds" sh -c "! grep -Eq '[0-9]{9,}' <<'OUT'
$out
OUT"
check "rollout status: local ISO 8601 times" grep -Eq '^started: *[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{2}:[0-9]{2} \(' <<<"$out"
check "rollout status --json is the plane's JSON" sh -c "ctl() { \"$CTL_BIN\" --plane '$PLANE_URL' \"\$@\"; }; ctl rollout status --json | jq -e '.queued == 7' >/dev/null"

# ---- an abort: the queue goes on as the next rollout ---------------------------------

ctl rollout abort >/dev/null || not_ok "abort"
check "after the abort, the later writes go on as rollout 3 (the revert with them)" \
	wait_until 20 ro_is '.id == 3 and .state == "in_progress" and .parent == 2'
check_eq "... which nothing is queued behind" 0 "$(ro .queued)"
done_testing
