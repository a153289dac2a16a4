#!/usr/bin/env bash
# t0975-freeze.sh: freeze windows on one plane (SQLite): `tetherctl freeze
# --until TIME --message TEXT` refuses put, rm, apply, sync and revert with
# 423 and the freeze's words; /v1/status, /metrics (tether_frozen),
# `tetherctl freeze` and /v1/events (freeze, thaw, freeze_passed) show it;
# an admin's --override passes and is recorded; --off ends it; a freeze
# ends by itself at its time (seen by polling /v1/status, not by the
# clock); it holds across a restart of the plane; bad input is refused
# (a past time, more than 30 days ahead, no message, two lines, a bad
# TIME, unknown members).
. "$(dirname "$0")/lib.sh"

need_cmd jq curl

start_plane p
ctl apply - >/dev/null <<'EOF' || bail "cannot load the initial configuration"
{"upserts":[
 {"name":"file/motd","body":{"path":"motd.txt","content":"motd-1\n"}},
 {"name":"file/app","body":{"path":"app.txt","content":"app-1\n"}}
]}
EOF
V1=$(plane_version)
check_eq "the initial configuration is version 1" 1 "$V1"
check_eq "no freeze at first: tetherctl freeze says so" "no freeze" "$(ctl freeze)"
check_eq "... /v1/status has no freeze member" "null" "$(curl -sS "$PLANE_URL/v1/status" | jq -c .freeze)"
check_eq "... tether_frozen is 0" 0 "$(metric tether_frozen)"

# the events, as tetherctl watch --json prints them
"$CTL_BIN" --plane "$PLANE_URL" watch --json >"$WORK/events.out" 2>"$WORK/watch.err" &   # $! is tetherctl: the trap stops it
WATCH=$!
track_pid $WATCH
subscribed() { [ "$(metric tether_events_subscribers)" -ge 1 ]; }
wait_until 10 subscribed || bail "tetherctl watch did not subscribe"
# has_event TYPE JQ: an event of TYPE whose data satisfies JQ came
has_event() {
	jq -e --arg t "$1" "select(.event == \$t) | .data | $2" "$WORK/events.out" 2>/dev/null | grep -q true
}

# ---- set -------------------------------------------------------------------------

out=$(ctl freeze --until 2h --message "release week: no changes" 2>&1)
check "tetherctl freeze --until 2h sets it and prints it" \
	grep -Eq '^frozen until 20[0-9-]+T[0-9:]+[+-][0-9]{2}:[0-9]{2} by anonymous: release week: no changes$' <<<"$out"
UNTIL=$(curl -sS "$PLANE_URL/v1/freeze" | jq -r .freeze.until)
NOW=$(date +%s)
check "... until is two hours from now" test $((UNTIL - NOW)) -ge 7190 -a $((UNTIL - NOW)) -le 7210
UNTIL_TEXT=$(date -u -d "@$UNTIL" +%Y-%m-%dT%H:%M:%SZ)   # the plane's words: UTC
LOCAL_TEXT=$(date -d "@$UNTIL" +%Y-%m-%dT%H:%M:%S%:z)   # tetherctl's: local time
check_eq "tetherctl freeze prints it (local time)" "frozen until $LOCAL_TEXT by anonymous: release week: no changes" "$(ctl freeze)"
check_eq "/v1/status shows it: until, message, by, at" "$UNTIL|release week: no changes|anonymous|true" \
	"$(curl -sS "$PLANE_URL/v1/status" | jq -r '.freeze | "\(.until)|\(.message)|\(.by)|\(.at > 0)"')"
check_eq "tether_frozen is 1" 1 "$(metric tether_frozen)"
check "a freeze event came" wait_until 10 has_event freeze ".until == $UNTIL and .message == \"release week: no changes\""

# ---- every write is refused: 423, with the words -----------------------------------

WORDS="frozen until $UNTIL_TEXT by anonymous: release week: no changes (an admin may pass with --override REASON)"
# refused_423 WHAT COMMAND...: tetherctl fails and says the freeze's words
refused_423() {
	local what=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc = 1 ] && grep -qF "$WORDS" <<<"$out"; then
		ok "$what is refused with the freeze's words"
	else
		not_ok "$what is refused with the freeze's words"
		diag "exit $rc: $out"
	fi
}
echo '{"path":"motd.txt","content":"motd-2\n"}' >"$WORK/motd2.json"
refused_423 "tetherctl put" ctl put file/motd "$WORK/motd2.json"
refused_423 "tetherctl rm" ctl rm file/app
refused_423 "tetherctl apply" ctl apply - <<<'{"upserts":[{"name":"file/new","body":{"path":"n.txt","content":"n\n"}}]}'
mkdir -p "$WORK/tree/file"
cp "$WORK/motd2.json" "$WORK/tree/file/motd.json"
echo '{"path":"app.txt","content":"app-1\n"}' >"$WORK/tree/file/app.json"
refused_423 "tetherctl sync" ctl sync "$WORK/tree"
refused_423 "tetherctl revert" ctl revert 1
check_eq "PUT /v1/resources answers 423" 423 \
	"$(api_status PUT /v1/resources/file/motd --data-binary @"$WORK/motd2.json")"
check_eq "DELETE /v1/resources answers 423" 423 "$(api_status DELETE /v1/resources/file/app)"
check_eq "POST /v1/batch answers 423" 423 \
	"$(api_status POST /v1/batch --data-binary '{"removes":["file/app"]}')"
check_eq "... its error names the freeze" "$WORDS; nothing was stored" \
	"$(curl -sS -X DELETE "$PLANE_URL/v1/resources/file/app" | jq -r .error)"
check_eq "nothing was stored: still version 1" 1 "$(plane_version)"
check_eq "tether_writes_total did not move" 1 "$(metric tether_writes_total)"

# ---- an admin's override passes, and is recorded -------------------------------------
# (an --insecure plane without --admin-token-file: the caller is an admin)

out=$(ctl put file/motd "$WORK/motd2.json" --override "incident 42: motd fix" --message "motd fix" 2>&1)
check_eq "an admin's put --override passes the freeze" "version 2" "$out"
check "the event freeze_passed records it (version, by, reason)" wait_until 10 has_event freeze_passed \
	'.version == 2 and .by == "anonymous" and .reason == "incident 42: motd fix" and .freeze.message == "release week: no changes"'
check "the plane's log records it" grep -q "freeze: version 2 by anonymous passed the freeze with an admin's override: incident 42: motd fix" "$PLANE_LOG"
check_eq "the version log has the version" "motd fix" "$(curl -sS "$PLANE_URL/v1/history/2" | jq -r .message)"
check_eq "... and its override record" 'incident 42: motd fix ["freeze"]' "$(curl -sS "$PLANE_URL/v1/history/2" | jq -c -r '"\(.override.reason) \(.override.passed)"')"
check_eq "an override of revert passes too" "version 3" "$(ctl revert 1 --override "undo the fix" 2>&1)"
check_eq "the freeze still holds after them" "frozen until $LOCAL_TEXT by anonymous: release week: no changes" \
	"$(ctl freeze)"

# ---- bad input -------------------------------------------------------------------

put_freeze() { api_status PUT /v1/freeze --data-binary "$1"; }
now=$(date +%s)
check_eq "a time in the past: 422" 422 "$(put_freeze "{\"until\":$((now - 10)),\"message\":\"m\"}")"
check_eq "more than 30 days ahead: 422" 422 "$(put_freeze "{\"until\":$((now + 31 * 86400)),\"message\":\"m\"}")"
check_eq "no message: 422" 422 "$(put_freeze "{\"until\":$((now + 600))}")"
check_eq "an empty message: 422" 422 "$(put_freeze "{\"until\":$((now + 600)),\"message\":\"\"}")"
check_eq "a message of two lines: 422" 422 "$(put_freeze "{\"until\":$((now + 600)),\"message\":\"a\\nb\"}")"
big=$(head -c 1025 /dev/zero | tr '\0' a)
check_eq "a message over 1024 bytes: 422" 422 "$(put_freeze "{\"until\":$((now + 600)),\"message\":\"$big\"}")"
check_eq "an unknown member: 422" 422 "$(put_freeze "{\"until\":$((now + 600)),\"message\":\"m\",\"by\":\"eve\"}")"
check_eq "until as text: 422" 422 "$(put_freeze '{"until":"tomorrow","message":"m"}')"
check_eq "... its error names the field" "freeze: until 2020-01-01T00:00:00Z is not in the future: give a later time" \
	"$(curl -sS -X PUT --data-binary '{"until":1577836800,"message":"m"}' "$PLANE_URL/v1/freeze" | jq -r .error)"
out=$(ctl freeze --until 2020-01-01T00:00:00Z --message m 2>&1)
check "tetherctl: a past time is refused by the plane (exit 1)" \
	grep -q "is not in the future" <<<"$out"
ctl freeze --until soon --message m >/dev/null 2>"$WORK/err"
check_eq "tetherctl: a bad TIME is a usage error (exit 2)" 2 "$?"
check "... naming the forms it takes" grep -q "'soon' is not a duration: give digits and a unit s, m, h or d" "$WORK/err"
ctl freeze --until 2026-13-01T00:00:00Z --message m >/dev/null 2>"$WORK/err"
check_eq "tetherctl: a bad date is a usage error" 2 "$?"
ctl freeze --until 1h >/dev/null 2>"$WORK/err"
check_eq "tetherctl: --until without --message is a usage error" 2 "$?"
check "... saying what is missing" grep -q -- "--message TEXT is missing" "$WORK/err"
ctl freeze --off --until 1h --message m >/dev/null 2>&1
check_eq "tetherctl: --off with --until is a usage error" 2 "$?"
check_eq "the freeze in place did not change" "$UNTIL" "$(curl -sS "$PLANE_URL/v1/freeze" | jq -r .freeze.until)"

# ---- a new freeze replaces it ---------------------------------------------------------

ctl freeze --until 3h --message "extended: release slipped" >/dev/null || not_ok "cannot replace the freeze"
OLD=$UNTIL
UNTIL=$(curl -sS "$PLANE_URL/v1/freeze" | jq -r .freeze.until)
UNTIL_TEXT=$(date -u -d "@$UNTIL" +%Y-%m-%dT%H:%M:%SZ)
check "setting it again replaces it: a later until" test "$UNTIL" -gt "$OLD"
check "the old one's thaw says replaced" wait_until 10 has_event thaw ".until == $OLD and .ended == \"replaced\""
check "the new one's freeze event came" wait_until 10 has_event freeze \
	".until == $UNTIL and .message == \"extended: release slipped\""

# ---- it holds across a restart ----------------------------------------------------

stop_pid "$WATCH"
stop_pid "$PLANE_PID"
start_plane p
LOCAL_TEXT=$(date -d "@$UNTIL" +%Y-%m-%dT%H:%M:%S%:z)
check_eq "after a restart the freeze holds" "frozen until $LOCAL_TEXT by anonymous: extended: release slipped" \
	"$(ctl freeze)"
check_eq "... writes are still refused: 423" 423 \
	"$(api_status PUT /v1/resources/file/motd --data-binary @"$WORK/motd2.json")"
check_eq "... tether_frozen is 1" 1 "$(metric tether_frozen)"
: >"$WORK/events.out"
"$CTL_BIN" --plane "$PLANE_URL" watch --json >"$WORK/events.out" 2>"$WORK/watch.err" &   # $! is tetherctl: the trap stops it
WATCH=$!
track_pid $WATCH
wait_until 10 subscribed || bail "tetherctl watch did not subscribe again"

# ---- --off ends it ------------------------------------------------------------------

check_eq "tetherctl freeze --off ends it" "freeze ended: writes and rollouts go on" "$(ctl freeze --off)"
check "a thaw event came (ended: off, by whom)" wait_until 10 has_event thaw \
	".until == $UNTIL and .ended == \"off\" and .ended_by == \"anonymous\""
check_eq "no freeze now" "no freeze" "$(ctl freeze)"
check_eq "... tether_frozen is 0" 0 "$(metric tether_frozen)"
check_eq "a write goes again" "version 4" "$(ctl put file/app - <<<'{"path":"app.txt","content":"app-2\n"}' 2>&1)"
check_eq "--off with no freeze says so" "no freeze" "$(ctl freeze --off)"

# ---- it ends by itself at its time ----------------------------------------------------

ctl freeze --until 2s --message "a short one" >/dev/null || not_ok "cannot set a 2 s freeze"
SHORT=$(curl -sS "$PLANE_URL/v1/freeze" | jq -r .freeze.until)
check_eq "a write during it is refused" 423 \
	"$(api_status PUT /v1/resources/file/motd --data-binary '{"path":"motd.txt","content":"motd-3\n"}')"
gone() { [ "$(curl -sS "$PLANE_URL/v1/status" | jq -c .freeze)" = null ]; }
check "it leaves /v1/status by itself once its time came" wait_until 15 gone
check "a thaw event says it ended by time" wait_until 10 has_event thaw ".until == $SHORT and .ended == \"time\""
check_eq "a write goes then" "version 5" \
	"$(ctl put file/motd - <<<'{"path":"motd.txt","content":"motd-3\n"}' 2>&1)"
check_eq "tetherctl freeze says no freeze" "no freeze" "$(ctl freeze)"

stop_pid "$WATCH"
done_testing
