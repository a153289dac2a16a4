#!/usr/bin/env bash
# t0976-freeze-roles.sh: who may freeze and who passes one, on a plane with
# credentials: a reader sees the freeze but may not set or end it (403);
# an operator sets and ends it (its name in "by"); while frozen, an
# admin's write without --override gets 423, an operator's --override
# passes nothing (operators do not write: 403, nothing stored), and an
# admin's --override passes and is recorded (the event names its author
# and reason); anonymous callers get 401.
. "$(dirname "$0")/lib.sh"

need_cmd jq curl

echo "admin-$$-secret-token-0123456789" >"$WORK/admin.tok"
SECURE=1 start_plane p --admin-token-file "$WORK/admin.tok"
TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --role admin --name alice >"$WORK/alice.tok" ||
	bail "cannot create alice's token"
TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --role operator --name oscar >"$WORK/oscar.tok" ||
	bail "cannot create oscar's token"
TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --role reader --name rita >"$WORK/rita.tok" ||
	bail "cannot create rita's token"
as() {
	local who=$1
	shift
	TETHER_TOKEN_FILE=$WORK/$who.tok ctl "$@"
}
bearer() { echo "Authorization: Bearer $(cat "$WORK/$1.tok")"; }

as alice put file/motd - <<<'{"path":"motd.txt","content":"motd-1\n"}' >/dev/null || bail "alice cannot write"

check_eq "anonymous: 401 on GET /v1/freeze" 401 "$(api_status GET /v1/freeze)"
check_eq "anonymous: 401 on PUT /v1/freeze" 401 \
	"$(api_status PUT /v1/freeze --data-binary "{\"until\":$(($(date +%s) + 600)),\"message\":\"m\"}")"
check_eq "a reader sees that there is none" "no freeze" "$(as rita freeze)"
as rita freeze --until 1h --message "rita's freeze" >/dev/null 2>"$WORK/err"
check_eq "a reader may not set one (exit 1)" 1 "$?"
check "... the plane said 403" grep -q "403\|operator" "$WORK/err"
check_eq "... nothing was set" "no freeze" "$(as rita freeze)"

out=$(as oscar freeze --until 1h --message "quarter close")
check "an operator sets it, named in by" grep -Eq '^frozen until [0-9T:+-]+ by oscar \(operator token\): quarter close$' <<<"$out"
check_eq "a reader sees it" "$out" "$(as rita freeze)"
check_eq "... and so does /v1/status" "oscar (operator token)" \
	"$(curl -sS -H "$(bearer rita)" "$PLANE_URL/v1/status" | jq -r .freeze.by)"
as rita freeze --off >/dev/null 2>&1
check_eq "a reader may not end it" 1 "$?"

# writes while frozen
out=$(as alice put file/motd - <<<'{"path":"motd.txt","content":"motd-2\n"}' 2>&1)
check "an admin's write without --override: refused (423) with the words" \
	grep -q "frozen until .* by oscar (operator token): quarter close (an admin may pass with --override REASON)" <<<"$out"
check_eq "... 423 it is" 423 "$(api_status PUT /v1/resources/file/motd -H "$(bearer alice)" \
	--data-binary '{"path":"motd.txt","content":"motd-2\n"}')"
check_eq "an operator's write with an override passes nothing: 403 (operators do not write)" 403 \
	"$(api_status PUT /v1/resources/file/motd -H "$(bearer oscar)" -H "X-Tether-Override: urgent" \
		--data-binary '{"path":"motd.txt","content":"motd-2\n"}')"
check_eq "... nothing was stored" 1 "$(curl -sS -H "$(bearer rita)" "$PLANE_URL/healthz" | jq -r .version)"

ctl_watch() { TETHER_TOKEN_FILE=$WORK/admin.tok ctl watch --json; }
ctl_watch >"$WORK/events.out" 2>"$WORK/watch.err" &
track_pid $!
subscribed() { [ "$(curl -sS -H "$(bearer rita)" "$PLANE_URL/metrics" | awk '$1 == "tether_events_subscribers" {print $2}')" -ge 1 ]; }
wait_until 10 subscribed || bail "tetherctl watch did not subscribe"
out=$(as alice put file/motd - --override "CVE fix, approved by the CAB" --message "motd-2" \
	<<<'{"path":"motd.txt","content":"motd-2\n"}' 2>&1)
check_eq "an admin's --override passes" "version 2" "$out"
passed() {
	jq -e 'select(.event == "freeze_passed") | .data |
		.version == 2 and .by == "alice (admin token)" and .reason == "CVE fix, approved by the CAB"' \
		"$WORK/events.out" | grep -q true
}
check "the freeze_passed event names its author and reason" wait_until 10 passed
check_eq "the version log has the write, by alice" "alice (admin token) motd-2" \
	"$(curl -sS -H "$(bearer rita)" "$PLANE_URL/v1/history/2" | jq -r '"\(.author) \(.message)"')"

check_eq "the operator ends it" "freeze ended: writes and rollouts go on" "$(as oscar freeze --off)"
thawed() {
	jq -e 'select(.event == "thaw") | .data | .ended == "off" and .ended_by == "oscar (operator token)"' \
		"$WORK/events.out" | grep -q true
}
check "the thaw event names who ended it" wait_until 10 thawed
check_eq "an admin writes again without an override" "version 3" \
	"$(as alice put file/motd - <<<'{"path":"motd.txt","content":"motd-3\n"}' 2>&1)"
done_testing
