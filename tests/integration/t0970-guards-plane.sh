#!/usr/bin/env bash
# t0970-guards-plane.sh: guards at the plane (docs/protocol.md "Guards").
# Each field at its limit (stored) and over it (422 naming the guard, the
# resource and the numbers, nothing stored): max_shrink, min_endpoints
# (a delete that empties a cluster too), max_bytes (files and secrets),
# max_growth; a batch crossing several (all counted); an override
# (tetherctl --override) passes and the version log records it (GET
# /v1/history, tetherctl log and show), also when it crosses nothing;
# sync and revert are guarded like writes; the record survives a restart;
# guards are in every subscription's pushes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-guards.sh"

need_cmd jq

# file_body N [PATH]: a file body whose content is N bytes
file_body() {
	echo "{\"path\":\"${2:-f.txt}\",\"content\":\"$(head -c "$1" /dev/zero | tr '\0' x)\"}"
}
# w METHOD NAME [BODY] [CURL ARGS]: the status, the answer in $WORK/answer
w() {
	local m=$1 n=$2 b=${3:-}
	shift 3 2>/dev/null || shift $#
	if [ -n "$b" ]; then
		curl -sS -o "$WORK/answer" -w '%{http_code}' -X "$m" --data-binary "$b" "$@" "$PLANE_URL/v1/resources/$n"
	else
		curl -sS -o "$WORK/answer" -w '%{http_code}' -X "$m" "$@" "$PLANE_URL/v1/resources/$n"
	fi
}
err() {
	jq -r .error "$WORK/answer"
}

start_plane p1
put guard/shrink '{"match":"cluster/web","max_shrink":0.5}' >/dev/null
put guard/min '{"match":"cluster/min-","min_endpoints":2}' >/dev/null
put guard/size '{"match":"file/","max_bytes":100,"max_growth":2}' >/dev/null
put guard/secret '{"match":"secret/","max_bytes":1200}' >/dev/null
check_eq "a guard is a resource like the rest" "0.5" "$(curl -sS "$PLANE_URL/v1/resources/guard/shrink" | jq -r .body.max_shrink)"
check_eq "a guard's field is checked (422, naming it)" "422 guard/x: max_shrink must be a number in [0,1]" \
	"$(w PUT guard/x '{"max_shrink":2}') $(err)"

# ---- max_shrink ----------------------------------------------------------------------
check_eq "cluster/web with 4 endpoints" 200 "$(w PUT cluster/web "$(eps 4)")"
check_eq "4 -> 2 loses 50%: at max_shrink, stored" 200 "$(w PUT cluster/web "$(eps 2)")"
w PUT cluster/web "$(eps 4)" >/dev/null
V=$(plane_version)
check_eq "4 -> 1 loses 75%: over max_shrink, 422" 422 "$(w PUT cluster/web "$(eps 1)")"
check_eq "... naming guard, resource, numbers" \
	"the write crosses 1 guard limit: guard/shrink: cluster/web: 4 -> 1 endpoints loses 75% (max_shrink 0.5); nothing was stored (an operator may pass with --override REASON)" \
	"$(err)"
check_eq "... and nothing was stored" "$V 4" \
	"$(plane_version) $(curl -sS "$PLANE_URL/v1/resources/cluster/web" | jq '.body.endpoints | length')"
check_eq "deleting it shrinks it to 0: 422" 422 "$(w DELETE cluster/web)"
check "... 4 -> 0 endpoints loses 100%" grep -qF "guard/shrink: cluster/web: 4 -> 0 endpoints loses 100% (max_shrink 0.5)" "$WORK/answer"
w PUT cluster/api "$(eps 4)" >/dev/null
check_eq "a cluster no guard matches shrinks freely" 200 "$(w PUT cluster/api "$(eps 1)")"

# ---- min_endpoints -----------------------------------------------------------------
check_eq "cluster/min-a with 2 endpoints: at min_endpoints" 200 "$(w PUT cluster/min-a "$(eps 2)")"
check_eq "1 endpoint: fewer than min_endpoints, 422" 422 "$(w PUT cluster/min-a "$(eps 1)")"
check "... names the numbers" grep -qF "guard/min: cluster/min-a: 1 endpoints, fewer than min_endpoints 2" "$WORK/answer"
check_eq "a new cluster under it with 1: 422" 422 "$(w PUT cluster/min-b "$(eps 1)")"
check_eq "deleting cluster/min-a: 422" 422 "$(w DELETE cluster/min-a)"
check "... a delete that empties it" grep -qF "guard/min: cluster/min-a: deleting it leaves 0 endpoints (min_endpoints 2)" "$WORK/answer"
# what a write does not change is not judged (nodes see only effective changes)
echo '{"removes":["cluster/min-gone"]}' >"$WORK/gone.json"
check "a batch removing a covered cluster that does not exist is no violation" ctl apply "$WORK/gone.json"
check_eq "cluster/min-c with 1 endpoint, under an override" 200 \
	"$(w PUT cluster/min-c "$(eps 1)" -H 'X-Tether-Override: below min on purpose')"
V=$(plane_version)
check_eq "written again as it is: no violation, no version" "200 $V" "$(w PUT cluster/min-c "$(eps 1)") $(plane_version)"

# ---- max_bytes, max_growth --------------------------------------------------------
check_eq "a file of 100 bytes: at max_bytes" 200 "$(w PUT file/f "$(file_body 100)")"
check_eq "101 bytes: 422" 422 "$(w PUT file/f "$(file_body 101)")"
check "... content is 101 bytes, over max_bytes 100" grep -qF "guard/size: file/f: content is 101 bytes, over max_bytes 100" "$WORK/answer"
check_eq "file/g of 30 bytes (new: no growth check)" 200 "$(w PUT file/g "$(file_body 30 g.txt)")"
check_eq "30 -> 60 bytes: 2x, at max_growth" 200 "$(w PUT file/g "$(file_body 60 g.txt)")"
w PUT file/g "$(file_body 30 g.txt)" >/dev/null
check_eq "30 -> 61 bytes: over max_growth, 422" 422 "$(w PUT file/g "$(file_body 61 g.txt)")"
check "... content grows 30 -> 61 bytes, 2.03x (max_growth 2)" \
	grep -qF "guard/size: file/g: content grows 30 -> 61 bytes, 2.03x (max_growth 2)" "$WORK/answer"
pem_pair s   # the plane parses a secret's certificate and key
PEM_C=$PAIR_CERT
PEM_K=$PAIR_KEY
check_eq "a small secret passes" 200 "$(w PUT secret/s "{\"cert\":\"$PEM_C\",\"key\":\"$PEM_K\"}")"
# a comment line after the certificate: it still parses, and the body is over 1200 bytes
BIG="\\n$(head -c 600 /dev/zero | tr '\0' A)\\n"
check_eq "a secret over max_bytes: 422" 422 "$(w PUT secret/s "{\"cert\":\"$PEM_C$BIG\",\"key\":\"$PEM_K\"}")"
check "... its body's size named, not its content" sh -c "grep -qE 'guard/secret: secret/s: body is [0-9]+ bytes, over max_bytes 1200' '$WORK/answer' && ! grep -q AAAA '$WORK/answer'"

# ---- a batch -------------------------------------------------------------------------
cat >"$WORK/batch.json" <<EOF
{"upserts":[{"name":"cluster/web","body":$(eps 1)},{"name":"file/f","body":$(file_body 500)}],
 "removes":["cluster/min-a"]}
EOF
V=$(plane_version)
out=$(ctl apply "$WORK/batch.json" 2>&1)
check_eq "a batch crossing three guards is refused whole" "1 $V" "$? $(plane_version)"
check_eq "... naming each (the count first)" \
	"tetherctl: the write crosses 4 guard limits: guard/shrink: cluster/web: 4 -> 1 endpoints loses 75% (max_shrink 0.5); guard/size: file/f: content is 500 bytes, over max_bytes 100; guard/size: file/f: content grows 100 -> 500 bytes, 5.00x (max_growth 2); guard/min: cluster/min-a: deleting it leaves 0 endpoints (min_endpoints 2); nothing was stored (an operator may pass with --override REASON)" \
	"$out"

# ---- an override ---------------------------------------------------------------------
eps 1 >"$WORK/web1.json"
check "tetherctl put --override passes the guard" ctl put cluster/web "$WORK/web1.json" --message "drain" --override "incident 42: drain web"
OV=$(plane_version)
check_eq "history records it: reason and the guards passed" '{"passed":["guard/shrink"],"reason":"incident 42: drain web"}' \
	"$(curl -sS "$PLANE_URL/v1/history" | jq -c ".versions[] | select(.version == $OV) | .override")"
check "tetherctl log shows it beside the message" sh -c "'$CTL_BIN' --plane '$PLANE_URL' log | grep -E '^$OV ' | grep -qF 'drain [override: incident 42: drain web; passed guard/shrink]'"
check_eq "tetherctl show names it" "override:    incident 42: drain web; passed guard/shrink" \
	"$(ctl show "$OV" | grep '^override:')"
check_eq "GET /v1/history/V too" '["guard/shrink"]' "$(curl -sS "$PLANE_URL/v1/history/$OV" | jq -c .override.passed)"
check_eq "a version without one has no override field" null \
	"$(curl -sS "$PLANE_URL/v1/history" | jq -c ".versions[] | select(.version == $((OV - 1))) | .override")"
eps 3 >"$WORK/web3.json"
check "an override of a write that crosses nothing" ctl put cluster/web "$WORK/web3.json" --override "just in case"
check_eq "... is recorded, with passed: []" '{"passed":[],"reason":"just in case"}' \
	"$(curl -sS "$PLANE_URL/v1/history" | jq -c '.versions[0].override')"
check_eq "an override must say why" "400" \
	"$(w PUT cluster/web "$(eps 1)" -H 'X-Tether-Override;')"
check_eq "rm --override passes min_endpoints" 0 "$(ctl rm cluster/min-a --override "retire min-a" >/dev/null 2>&1; echo $?)"
check_eq "... recorded" '{"passed":["guard/min"],"reason":"retire min-a"}' \
	"$(curl -sS "$PLANE_URL/v1/history" | jq -c '.versions[0].override')"

# ---- sync and revert ------------------------------------------------------------------
ctl export "$WORK/tree" >/dev/null || bail "export failed"
eps 1 >"$WORK/tree/cluster/web.json"
V=$(plane_version)
check_eq "sync crossing a guard: refused" "1 $V" "$(ctl sync "$WORK/tree" >"$WORK/sync.out" 2>&1; echo $?) $(plane_version)"
check "... naming it" grep -qF "guard/shrink: cluster/web: 3 -> 1 endpoints loses 67% (max_shrink 0.5)" "$WORK/sync.out"
check "sync --override passes" ctl sync "$WORK/tree" --override "sync drain"
check_eq "... recorded" '{"passed":["guard/shrink"],"reason":"sync drain"}' \
	"$(curl -sS "$PLANE_URL/v1/history" | jq -c '.versions[0].override')"
check "a guard file in the tree syncs like the rest" test -f "$WORK/tree/guard/shrink.json"
W3=$(curl -sS "$PLANE_URL/v1/history" | jq -r '[.versions[] | select(.override.reason == "just in case")][0].version')
check_eq "revert to 3 endpoints (growth: fine)" 0 "$(ctl revert "$W3" >/dev/null 2>&1; echo $?)"
W1=$(curl -sS "$PLANE_URL/v1/history" | jq -r '.versions[] | select(.override.reason == "sync drain") | .version')
V=$(plane_version)
check_eq "revert to 1 endpoint crosses the guard: refused" "1 $V" "$(ctl revert "$W1" >"$WORK/rev.out" 2>&1; echo $?) $(plane_version)"
check "... naming it" grep -qF "guard/shrink: cluster/web: 3 -> 1 endpoints" "$WORK/rev.out"
check "revert --override passes" ctl revert "$W1" --override "back to drained"
# cluster/min-a came back with the first revert; this one deletes it again
check_eq "... recorded, with every guard it passed" '{"passed":["guard/min","guard/shrink"],"reason":"back to drained"}' \
	"$(curl -sS "$PLANE_URL/v1/history" | jq -c '.versions[0].override')"

# ---- durable --------------------------------------------------------------------------
stop_pid "$PLANE_PID"
start_plane p1
check_eq "the records survive a restart" '{"passed":["guard/shrink"],"reason":"incident 42: drain web"}' \
	"$(curl -sS "$PLANE_URL/v1/history" | jq -c ".versions[] | select(.version == $OV) | .override")"
check_eq "and guards still hold" 422 "$(w DELETE cluster/web)"

# ---- the console shows overrides ------------------------------------------------------
if puppeteer_try; then
	NODE_PATH=$PP_DIR node "$TOOLS/console-history.cjs" "$PLANE_URL" 30 >"$WORK/console.json" 2>"$WORK/console.err"
	check "the console's history shows the newest override, its reason and the guards it passed" \
		grep -qF "override: back to drained (passed guard/min, guard/shrink)" <<<"$(jq -r '.overrides[]?' "$WORK/console.json")"
	check_eq "... with no script error" 0 "$(jq '.page_errors | length' "$WORK/console.json")"
else
	diag "console not checked: $PP_WHY"
fi

# ---- every subscription gets the guards -----------------------------------------------
curl -sS "$PLANE_URL/v1/config?node=n1&version=0&sub=file/" >"$WORK/push.json"
check_eq "a node subscribed to file/ gets the guards too" "file/f file/g guard/min guard/secret guard/shrink guard/size" \
	"$(jq -r '[.upserts[].name] | sort | join(" ")' "$WORK/push.json")"

done_testing
