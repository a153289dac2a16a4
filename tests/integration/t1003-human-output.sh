#!/usr/bin/env bash
# t1003-human-output.sh: tetherctl's output for people, under
# TZ=Asia/Kolkata and TZ=UTC: every time local ISO 8601 with its offset
# (+05:30, +00:00), durations in words ("... ago"), no raw JSON (no '{'
# or '}') and no epoch seconds, for rollout status (a rollout baking with
# a version queued behind it), nodes, log, show, token ls, secrets status,
# freeze, watch (its freeze event) and the agent's status; and --json of each is JSON that parses
# (the plane's, unchanged: compared with the API's for rollout status).
. "$(dirname "$0")/lib.sh"

need_cmd jq curl
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

echo "admin-$$-secret-token-0123456789" >"$WORK/admin.tok"
SECURE=1 start_plane p --admin-token-file "$WORK/admin.tok" --rollout staged --stages 50,100 --bake 600 \
	--heartbeat 1 --ack-timeout 60
export TETHER_TOKEN_FILE=$WORK/admin.tok
CURL_OPTS=(-H "Authorization: Bearer $(cat "$WORK/admin.tok")")
ctl token create --role reader --name rita >/dev/null || bail "cannot create a reader token"
ctl token create --node a1 >"$WORK/a1.tok" || bail "cannot create a1's token"
ctl token create --node a2 >"$WORK/a2.tok" || bail "cannot create a2's token"
ctl put file/motd - --message "first" <<<'{"path":"motd.txt","content":"motd-1\n"}' >/dev/null || bail "version 1"
wait_until 10 ro_ended 1 || bail "rollout 1 did not end"
NODES=(a1 a2)
for n in "${NODES[@]}"; do
	start_agent "$n" --token-file "$WORK/$n.tok" --backoff-max 1 --stream-timeout 30 --label zone=eu
done
check "the agents reach version 1" wait_until 30 all_at 1 "${NODES[@]}"
ctl put file/motd - --message "second" <<<'{"path":"motd.txt","content":"motd-2\n"}' >/dev/null || bail "version 2"
check "rollout 2 bakes at its first stage" wait_until 20 ro_is '.id == 2 and .state == "in_progress" and .acked == 1'
ctl put file/other - --message "queued one" <<<'{"path":"o.txt","content":"o\n"}' >/dev/null || bail "version 3"
# tetherctl watch's lines for people, under TZ=Asia/Kolkata: the freeze event's time local too
TZ=Asia/Kolkata "$CTL_BIN" --plane "$PLANE_URL" watch >"$WORK/watch.out" 2>"$WORK/watch.err" &   # $! is tetherctl
track_pid $!
subscribed() { [ "$(metric tether_events_subscribers)" -ge 1 ]; }
wait_until 10 subscribed || bail "tetherctl watch did not subscribe"
ctl freeze --until 2h --message "quiet hours" >/dev/null || bail "cannot freeze"
check "watch: the freeze's until in local time" wait_until 10 grep -Eq \
	'freeze.* until [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\+05:30 by admin token: quiet hours$' "$WORK/watch.out"
diag "$(cat "$WORK/watch.out")"
check "watch: no raw JSON, no epoch seconds, no UTC time" sh -c "! grep -Eq '[{}]|1[6-9][0-9]{8}|T[0-9:]{8}Z' '$WORK/watch.out'"

# human TZ NAME ARGS...: tetherctl ARGS under TZ, checked for raw JSON and
# epoch seconds; its output left in OUT
human() {
	local tz=$1 name=$2 body=1
	shift 2
	[ "$name" = show ] && body=0   # show prints the change's bodies (JSON resources) after its header
	OUT=$(TZ=$tz "$CTL_BIN" --plane "$PLANE_URL" "$@" 2>&1)
	check "$tz: $name exits 0" test $? = 0
	[ $body = 0 ] || check "$tz: $name: no raw JSON" sh -c "! grep -q '[{}]' <<'X'
$OUT
X"
	check "$tz: $name: no epoch seconds" sh -c "! grep -Eqw '1[6-9][0-9]{8}(\\.[0-9]+)?' <<'X'
$OUT
X"
	check "$tz: $name: no UTC time where a local one belongs" sh -c "! grep -Eq 'T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?Z' <<'X'
$OUT
X"
}
# machine ARGS...: tetherctl ARGS --json is JSON that parses
machine() {
	"$CTL_BIN" --plane "$PLANE_URL" "$@" --json >"$WORK/json" 2>&1
	check "$* --json parses" jq -e . "$WORK/json"
}

for tz in Asia/Kolkata UTC; do
	case $tz in
	Asia/Kolkata) OFF='\+05:30' ;;
	UTC) OFF='\+00:00' ;;
	esac
	ISO="[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$OFF"
	human "$tz" "rollout status" rollout status
	diag "$OUT"
	check "$tz: rollout status: started in local time, and how long ago" \
		grep -Eq "^started: +$ISO \\((just now|[0-9]+ (s|min) ago)\\)$" <<<"$OUT"
	check "$tz: rollout status: the nodes as counts in words" grep -Eq '^nodes: +1 of 1 ACKed, 0 NACKed' <<<"$OUT"
	check "$tz: rollout status: the queue in words" grep -Eq '^queued: +version 3 \(admin token, (just now|[0-9]+ (s|min) ago)\): "queued one"$' <<<"$OUT"
	check "$tz: rollout status: the freeze line in local time" grep -Eq "^frozen until $ISO by " <<<"$OUT"
	human "$tz" "nodes" nodes
	check "$tz: nodes lists both" grep -q '^a2 ' <<<"$OUT"
	human "$tz" "log" log
	check "$tz: log: local times" grep -Eq "^2 +$ISO +admin token +second" <<<"$OUT"
	human "$tz" "show" show 2
	# (its header: what follows the blank line is the change, the resource's own JSON body)
	OUT=$(sed '/^$/q' <<<"$OUT")
	check "$tz: show's header: no raw JSON" sh -c "! grep -q '[{}]' <<'X'
$OUT
X"
	check "$tz: show: its time, local, and how long ago" grep -Eq "^time: +$ISO \\(" <<<"$OUT"
	human "$tz" "token ls" token ls
	check "$tz: token ls: local times" grep -Eq "$ISO" <<<"$OUT"
	human "$tz" "secrets status" secrets status
	human "$tz" "freeze" freeze
	check "$tz: freeze: local time" grep -Eq "^frozen until $ISO by admin token: quiet hours$" <<<"$OUT"
	human "$tz" "status" status --state-dir "$WORK/a1.state"
	check "$tz: status: the last sync in local time, how long ago" grep -Eq "^last sync: +$ISO \\(" <<<"$OUT"
done

# ---- --json: the plane's JSON, unchanged ----------------------------------------------------

machine rollout status
check_eq "rollout status --json is GET /v1/rollouts/current's (its queue too)" \
	"$(curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/rollouts/current" | jq -c '{id, state, to_version, queue: [.queue[].version]}')" \
	"$(jq -c '{id, state, to_version, queue: [.queue[].version]}' "$WORK/json")"
machine nodes
machine log
machine show 2
machine token ls
machine secrets status
machine freeze
machine status --state-dir "$WORK/a1.state"
ctl freeze --off >/dev/null || not_ok "freeze --off"
out=$(ctl put file/x - --json <<<'{"path":"x.txt","content":"x\n"}')
check "put --json: the plane's answer, its rollout member too" jq -e '.version == 4 and .rollout.state == "queued"' <<<"$out"
out=$(ctl rm file/x --json)
check "rm --json" jq -e '.version == 5' <<<"$out"
echo '{"upserts":[{"name":"file/y","body":{"path":"y.txt","content":"y\n"}}]}' >"$WORK/b.json"
out=$(ctl apply "$WORK/b.json" --json)
check "apply --json" jq -e '.version == 6 and .changed' <<<"$out"
out=$(ctl revert 5 --json)
check "revert --json" jq -e '.version == 7' <<<"$out"
ctl export "$WORK/tree" >/dev/null || not_ok "export"
echo '{"path":"z.txt","content":"z\n"}' >"$WORK/tree/file/z.json"
out=$(ctl sync "$WORK/tree" --dry-run --json)
check_eq "sync --dry-run --json: exit 3 (it would change)" 3 "$?"
check "... and only the plane's dry run answer" jq -e '.dry_run == true and .changes == [{"name":"file/z","change":"create"}]' <<<"$out"
out=$(ctl sync "$WORK/tree" --json)
check "sync --json: the plane's answer to the batch" jq -e '.version == 8 and .changed and .rollout.state == "queued"' <<<"$out"
out=$(ctl sync "$WORK/tree" --json)
check_eq "sync --json with nothing to do: what a batch changing nothing answers" '{"version":8,"changed":false}' "$out"
out=$(ctl rollout abort --json)
# (the writes queued behind rollout 2 go on as rollout 3, the revert with them: the current one)
check "rollout abort --json: the current rollout as the plane says" jq -e '(.id == 2 and .state == "aborted") or .parent == 2' <<<"$out"
done_testing
