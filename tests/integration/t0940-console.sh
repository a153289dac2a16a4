#!/usr/bin/env bash
# t0940-console.sh: the fleet console (GET /ui/) in a real browser: Debian's
# chromium, headless, driven by puppeteer-core (tests/tools/console-check.cjs).
# A secure staged plane (--stages 50,100 --bake 5) with three agents, one
# of which (picky, the only zone=b, so the first stage's) refuses content
# holding BAD. The page asks for a token, takes a reader's, shows the
# three nodes synced, filters by labels; then a change written from the
# page is NACKed by picky, and within 2 s of the write, with no reload,
# the page shows picky's NACK with its error and the rollout of the new
# version with its stages; an agent stopped shows offline soon after.
# Screenshot: $TOP_BUILDDIR/console.png.
# Skips (77) without chromium or when puppeteer-core cannot be installed.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || skip_all "node is not installed"
# puppeteer-core: $NODE_PATH, the build's or the tree's node_modules, or
# installed (pinned) into the build directory by scripts/npm-deps, once
puppeteer_dir
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
diag "puppeteer-core $(jq -r .version "$PP_DIR/puppeteer-core/package.json") from $PP_DIR, $("$CHROMIUM" --version 2>/dev/null | head -n 1)"

# ---- a secure staged plane and three agents -------------------------------------

echo "admin-$$-console-token-0123456789abcdef" >"$WORK/admin.token"
SECURE=1 start_plane p --rollout staged --stages 50,100 --bake 5 --heartbeat 1 --ack-timeout 20 \
	--admin-token-file "$WORK/admin.token"
actl() { "$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.token" "$@"; }
READER=$(actl token create --role reader --name console) || bail "cannot make a reader token"
CURL_OPTS=(-H "Authorization: Bearer $READER")

check_eq "the console needs no credential (static files)" 200 "$(curl -sS -o /dev/null -w '%{http_code}' "$PLANE_URL/ui/")"
hdrs=$(curl -sS -D - -o /dev/null "$PLANE_URL/ui/")
check "its HTML is text/html" grep -qi '^content-type: text/html' <<<"$hdrs"
check "no-cache" grep -qi '^cache-control: no-cache' <<<"$hdrs"
check "a strict Content-Security-Policy: default-src 'self', no inline script" \
	grep -qi "^content-security-policy: default-src 'self'; script-src 'self';" <<<"$hdrs"
check_eq "app.js is JavaScript" "text/javascript; charset=utf-8" \
	"$(curl -sS -o /dev/null -w '%{content_type}' "$PLANE_URL/ui/app.js")"
check_eq "app.css is CSS" "text/css; charset=utf-8" "$(curl -sS -o /dev/null -w '%{content_type}' "$PLANE_URL/ui/app.css")"
check_eq "the page holds no inline script" 0 "$(curl -sS "$PLANE_URL/ui/" | grep -c '<script>')"
check_eq "... and fetches nothing from elsewhere" 0 "$(curl -sS "$PLANE_URL/ui/" | grep -c 'https\?://')"
check_eq "an unknown file is 404" 404 "$(curl -sS -o /dev/null -w '%{http_code}' "$PLANE_URL/ui/nope.js")"
check_eq "the events stream wants a credential" 401 "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 2 "$PLANE_URL/v1/events")"

V1=$(curl -sS -X PUT -H "Authorization: Bearer $(cat "$WORK/admin.token")" \
	--data-binary '{"path":"motd.txt","content":"hello\n"}' "$PLANE_URL/v1/resources/file/motd" | json .version)
check_eq "the first version" 1 "$V1"

bad_check "$WORK/check.sh"
for n in good1 good2 picky; do
	(umask 077 && actl token create --node "$n" >"$WORK/$n.token") || bail "cannot make $n's token"
done
start_agent good1 --labels zone=a --token-file "$WORK/good1.token" --backoff-max 1
start_agent good2 --labels zone=a --token-file "$WORK/good2.token" --backoff-max 1
start_agent picky --labels zone=b --token-file "$WORK/picky.token" --backoff-max 1 --check "sh $WORK/check.sh"
check "the three agents run version $V1" wait_until 20 all_at "$V1" good1 good2 picky
fleet_acked() {
	curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/nodes" | jq -e --argjson v "$V1" \
		'[.[] | select(.connected and .acked_version == $v)] | length == 3' >/dev/null
}
check "the plane has their ACKs" wait_until 20 fleet_acked

# ---- the browser -------------------------------------------------------------------

SHOT=$TOP_BUILDDIR/console.png
rm -f "$SHOT"
NODE_PATH=$PP_DIR timeout 120 node "$TOOLS/console-check.cjs" "$PLANE_URL" "$READER" "$(cat "$WORK/admin.token")" picky \
	"$SHOT" "${APID[good2]}" good2 >"$WORK/console.json" 2>"$WORK/console.err"
rc=$?
R=$(tail -n 1 "$WORK/console.json")
diag "console-check: $R"
[ -s "$WORK/console.err" ] && diag "stderr: $(head -c 2000 "$WORK/console.err")"
[ $rc = 0 ] || bail "the browser script failed (exit $rc): $(echo "$R" | json '.failure // empty' | head -n 5)"
r() { echo "$R" | jq -r "$1"; }

check_eq "the page loads (200)" 200 "$(r .status)"
check_eq "the page asks for a token first, showing nothing else" "true true" "$(r '"\(.login_shown) \(.app_hidden_before_login)"')"
check_eq "the token is kept in the session, no cookie" "true 0" "$(r '"\(.token_in_session) \(.cookies)"')"
check_eq "it shows the three nodes, synced" "good1:synced good2:synced picky:synced" "$(r '.nodes_before | join(" ")')"
check_eq "the summary counts them" 3 "$(r .synced_count)"
check_eq "the label filter zone=b keeps picky only" picky "$(r '.filtered | join(" ")')"
V2=$(r .version)
check_eq "the change is written from the page (version $((V1 + 1)))" "200 $((V1 + 1))" "$(r '"\(.put_status) \(.version)"')"
nack_ms=$(r .nack_ms)
ro_ms=$(r .rollout_ms)
diag "measured in the page, from the write: NACK shown after ${nack_ms} ms, rollout after ${ro_ms} ms"
check "picky's NACK appears within 2 s of the write" awk -v t="$nack_ms" 'BEGIN { exit !(t != "null" && t + 0 < 2000) }'
check "the rollout of version $V2 appears within 2 s" awk -v t="$ro_ms" 'BEGIN { exit !(t != "null" && t + 0 < 2000) }'
check "the NACK shows its error" grep -q "BAD content refused" <<<"$(r .nack_text)"
check_eq "the rollout shown is of version $V2, at the 50 % stage" "$V2 50" "$(r '"\(.rollout.to) \(.rollout.stage)"')"
check_eq "with its two stages as bars" "2" "$(r '.rollout.stages | length')"
# NACKed until it ACKs the revert, which may already have happened
check "picky's row shows its last NACK (state $(r .node_row.state))" grep -q "^v$V2: .*BAD content refused" <<<"$(r .node_row.last_nack)"
check_eq "no reload: the same page, one navigation" "true 1" "$(r '"\(.same_page) \(.navigations)"')"
check_eq "no Content-Security-Policy violation" 0 "$(r '.csp_violations | length')"
check_eq "no script error" 0 "$(r '.page_errors | length')"
check_eq "the rollout ends rolled back on the page" rolled_back "$(r .rollout_final)"
R3=$((V2 + 1))
check_eq "then every node is synced again at the revert, acked/target $R3/$R3" \
	"good1:synced@$R3/$R3 good2:synced@$R3/$R3 picky:synced@$R3/$R3" "$(r '.nodes_after | join(" ")')"
check_eq "and the version shown is the revert's, $((V2 + 1))" "$((V2 + 1))" "$(r .version_shown)"
check "the history panel lists version $V2 (no /v1/history here: from the stream)" \
	grep -q "version $V2" <<<"$(r '.history | join("\n")')"
check "a screenshot is saved" test -s "$SHOT"
check_eq "... a PNG" "PNG" "$(head -c 4 "$SHOT" | tail -c 3)"
diag "screenshot: $SHOT"
diag "good2 stopped: shown offline after $(r .offline_ms) ms"
# the plane sees a quiet stream's end when it next writes to it: at the
# next heartbeat (1 s here)
check "an agent stopped shows offline on the page within 5 s" awk -v t="$(r .offline_ms)" 'BEGIN { exit !(t != "null" && t + 0 < 5000) }'
check_eq "the summary counts it" 1 "$(r .offline_count)"
check_eq "and it stays offline once the records are read again" offline "$(r .offline_after_refresh)"
done_testing
