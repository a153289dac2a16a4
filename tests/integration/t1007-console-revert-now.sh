#!/usr/bin/env bash
# t1007-console-revert-now.sh: the console's revert buttons (history panel),
# in headless chromium (tests/tools/console-revert.cjs), on a staged plane
# with a ten-minute bake, version 2 baking at its first stage. The page is
# opened from a 'tetherctl ui' link (a read-only session): "revert" POSTs
# {"version":1}, "revert now" POSTs {"version":1,"now":true}; with the
# session's token both are refused (403) and the page says an operator's
# or admin's token is needed, keeping the form; an operator's token typed
# into the form reverts now: every node has the revert at once (no stage,
# no bake, while version 2 would still bake for minutes), the version log
# records an emergency, and the typed token is not kept.
#
# The plane's side of "now" is part D's (POST /v1/revert "now", issue 28):
# on a plane without it (it answers 422 "unknown field 'now'" or, to an
# operator, 403), the checks marked [D] are skipped, not failed, and the
# page must then show the plane's refusal.
# Skips without chromium or when puppeteer-core cannot be installed.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || skip_all "node is not installed"
puppeteer_dir
need_cmd jq curl
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

echo "admin-$$-revert-now-token-0123456789abcdef" >"$WORK/admin.token"
ADMIN=$(cat "$WORK/admin.token")
SECURE=1 start_plane p --admin-token-file "$WORK/admin.token" --rollout staged --stages 50,100 --bake 600 \
	--heartbeat 1 --ack-timeout 60
actl() { "$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.token" "$@"; }
CURL_OPTS=(-H "Authorization: Bearer $ADMIN")
actl token create --role operator --name oscar >"$WORK/operator.token" || bail "cannot make an operator token"
actl token create --role reader --name rita >"$WORK/reader.token" || bail "cannot make a reader token"
for n in a1 a2; do
	(umask 077 && actl token create --node "$n" >"$WORK/$n.token") || bail "cannot make $n's token"
done
actl put file/motd - <<<'{"path":"motd.txt","content":"motd-1\n"}' >/dev/null || bail "cannot write version 1"
wait_until 10 ro_ended 1 || bail "rollout 1 did not end"
NODES=(a1 a2)
for n in "${NODES[@]}"; do
	start_agent "$n" --token-file "$WORK/$n.token" --backoff-max 1
done
check "both agents run version 1" wait_until 30 all_at 1 a1 a2
actl put file/motd - <<<'{"path":"motd.txt","content":"motd-2\n"}' >/dev/null || bail "cannot write version 2"
first_stage() { ro_is '.state == "in_progress" and .to_version == 2 and .stage_counts[0].acked >= 1'; }
check "version 2 reaches its first stage and bakes (ten minutes)" wait_until 30 first_stage

# does this plane know "now" (part D)?
code=$(curl -sS -o "$WORK/probe" -w '%{http_code}' "${CURL_OPTS[@]}" -X POST --data '{"version":1,"now":"probe"}' \
	"$PLANE_URL/v1/revert")
# (a plane without it refuses the field: "unknown field ... (expected version, message)")
if LC_ALL=C grep -aq "unknown field .*(expected version, message)" "$WORK/probe"; then HAVE_D=0; else HAVE_D=1; fi
diag "the plane's answer to a probe of 'now' ($code): $(tr -cd '[:print:]' <"$WORK/probe") -> part D here: $HAVE_D"
[ $HAVE_D = 1 ] || check "without part D the refusal names the field (and the plane lives)" \
	grep -q "unknown field 'now'" "$WORK/probe"
check_eq "the probe wrote nothing" 2 "$(curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/healthz" | jq .version)"
# check_d DESC COMMAND...: a check of what part D's plane does, skipped without it
check_d() {
	if [ $HAVE_D = 1 ]; then
		check "[D] $1" "${@:2}"
	else
		ok "[D] $1 # SKIP this plane has no POST /v1/revert \"now\" (part D of issue 28)"
	fi
}

LINK=$("$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/reader.token" ui 2>/dev/null)
SESSION_ID=$(cut -d_ -f2 <<<"${LINK#*#s=}")
R=$(NODE_PATH=$PP_DIR timeout 120 node "$TOOLS/console-revert.cjs" "$LINK" "$(cat "$WORK/operator.token")" 1 \
	2>"$WORK/pp.err")
diag "console-revert: $R"
[ -n "$R" ] || bail "console-revert.cjs printed nothing: $(tail -n 5 "$WORK/pp.err")"
r() { jq -c "$1" <<<"$R"; }
check_eq "the tool drove the page" null "$(r .error)"
check_eq "no page errors" "[]" "$(r .page_errors)"

check_eq "revert asks first (staged)" '{"shown":true,"now":"false"}' "$(r '.form_revert | {shown, now}')"
check_eq "revert now asks first, saying what it does" '{"shown":true,"now":"true","button":"Revert now"}' \
	"$(r '.form_now | {shown, now, button}')"
check "... every node at once, no stages, no bakes" grep -q "every node at once (no stages, no bakes)" <<<"$(r .form_now.what)"
check_eq "revert POSTs {\"version\":1}" '{"version":1}' "$(r '.posts[0] | fromjson')"
check_eq "revert now POSTs {\"version\":1,\"now\":true}" '{"version":1,"now":true}' "$(r '.posts[1] | fromjson')"
check_eq "... with the operator's token, the same and a message" \
	'{"version":1,"now":true,"message":"console emergency"}' "$(r '.posts[2] | fromjson')"
check_eq "the session's revert is refused (403)" 403 "$(r '.steps[0].status')"
check_eq "the session's revert now is refused (403)" 403 "$(r '.steps[1].status')"
check "... the page says an operator's or admin's token is needed" \
	grep -q "a revert needs an operator or admin token" <<<"$(r '.steps[1].text')"
check_eq "... and keeps the form for one" false "$(r '.steps[1].form_hidden')"
check_eq "the typed token is not kept in the form" '""' "$(r .token_field_after)"
check_eq "... nor in the tab, which keeps its session" "\"$SESSION_ID\"" "$(r .stored_token_id)"

if [ $HAVE_D = 0 ]; then
	check "without part D the page shows the plane's refusal" grep -q '^"refused: this needs the admin role' <<<"$(r '.steps[2].text')"
fi
check_d "the operator's revert now is taken (200)" test "$(r '.steps[2].status')" = 200
RV=$(r '.steps[2].text' | grep -o 'version [0-9]*' | head -n 1 | tr -dc 0-9)
check_d "... the page says so" grep -q "sent to every node now" <<<"$(r '.steps[2].text')"
check_d "... and closes the form" test "$(r '.steps[2].form_hidden')" = true
at_revert() { [ -n "$RV" ] && all_at "$RV" a1 a2; }
# a staged revert would wait out the ten-minute bake of its first stage
check_d "every node has the revert version at once" wait_until 30 at_revert
emergency() {
	curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/history?limit=5" |
		jq -e --argjson v "${RV:-0}" '(if type == "array" then . else .versions end)[] | select(.version == $v) |
			.emergency == true'
}
check_d "the version log records it as an emergency" emergency
done_testing
