#!/usr/bin/env bash
# t1006-console-layout.sh: the console opened from a 'tetherctl ui' link, in
# Debian's chromium, headless. A secure plane and two agents, one (picky)
# refusing content that holds BAD. chromium --headless --screenshot of
# the link shows the fleet, not the login bar (its DOM, dumped the same
# way, holds the nodes); puppeteer (tests/tools/console-layout.cjs) finds
# the fragment gone from the address bar, the counts equal to the node
# table and the NACK panel while picky's NACK stands and once it ACKed a
# good version, and measures the layout at 1400x900 (panels side by side)
# and 390x844 (one column), neither scrolling sideways, nothing over the
# header. A page open when its session ends brings the login bar back
# with no reload, saying it expired (tests/tools/console-expiry.cjs), and so
# does a link whose session has ended. PNGs: $WORK/console-*.png, kept in $TOP_BUILDDIR/t1006-*.png.
# Skips without chromium or when puppeteer-core cannot be installed.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || skip_all "node is not installed"
puppeteer_dir
need_cmd jq curl
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

echo "admin-$$-layout-token-0123456789abcdef" >"$WORK/admin.token"
ADMIN=$(cat "$WORK/admin.token")
SECURE=1 start_plane p --heartbeat 1 --admin-token-file "$WORK/admin.token"
actl() { "$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.token" "$@"; }
actl put file/motd - <<<'{"path":"motd.txt","content":"hello\n"}' >/dev/null || bail "cannot write"
bad_check "$WORK/check.sh"
for n in good picky; do
	(umask 077 && actl token create --node "$n" >"$WORK/$n.token") || bail "cannot make $n's token"
done
start_agent good --labels zone=a --token-file "$WORK/good.token" --backoff-max 1
start_agent picky --labels zone=b --token-file "$WORK/picky.token" --backoff-max 1 --check "sh $WORK/check.sh"
check "both agents run version 1" wait_until 20 all_at 1 good picky
V2=$(actl put file/motd - <<<'{"path":"motd.txt","content":"BAD\n"}' | grep -o '[0-9]*' | head -n 1)
CURL_OPTS=(-H "Authorization: Bearer $ADMIN")
check "picky NACKs version $V2" wait_until 20 has_nack picky "$V2"

actl token create --role reader --name layout >"$WORK/reader.token" || bail "cannot make a reader token"
# a session of one minute, opened at the end, once it has expired
OLD_LINK=$("$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/reader.token" ui --ttl 60 2>/dev/null)
NODE_PATH=$PP_DIR timeout 150 node "$TOOLS/console-expiry.cjs" "$OLD_LINK" >"$WORK/expiry.json" 2>"$WORK/expiry.err" &
EXPIRY_PID=$!
track_pid $EXPIRY_PID
LINK=$("$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/reader.token" ui 2>/dev/null)
check "tetherctl ui gives a link" grep -q "^$PLANE_URL/ui/#s=tt1_" <<<"$LINK"

# ---- chromium's own headless screenshot of the link -----------------------------
# (the budget of virtual time lets the page's requests answer; the event
# stream never ends, so the budget, not the load, ends the run)
HEADLESS=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --hide-scrollbars
	--window-size=1400,900 --virtual-time-budget=5000 --user-data-dir="$WORK/chromium")
timeout 60 "$CHROMIUM" "${HEADLESS[@]}" --screenshot="$WORK/headless.png" "$LINK" >"$WORK/headless.log" 2>&1
check "chromium --headless --screenshot of the link writes a PNG" test -s "$WORK/headless.png"
timeout 60 "$CHROMIUM" "${HEADLESS[@]}" --dump-dom "$LINK" >"$WORK/headless.html" 2>>"$WORK/headless.log"
check "... of the fleet: the app shown" grep -q '<main id="app">' "$WORK/headless.html"
check "... not the login bar" grep -q '<form id="login" hidden' "$WORK/headless.html"
check "... with both nodes in the table" grep -q 'data-node="picky" data-state="nacked"' "$WORK/headless.html"
check "... and picky's NACK in the panel" grep -q 'class="nack" data-node="picky"' "$WORK/headless.html"
check_eq "the token never reached the plane's log" 0 "$(grep -c "${LINK##*_}" "$WORK/p.log")"

# ---- tetherctl ui --open, with chromium as $BROWSER: the private page it
# is handed moves on to the console, which shows the fleet
{
	echo '#!/bin/sh'
	printf 'exec timeout 60 %q' "$CHROMIUM"
	printf ' %q' "${HEADLESS[@]}"
	printf ' --dump-dom "$1" >%q 2>>%q\n' "$WORK/opened.html" "$WORK/headless.log"
} >"$WORK/chromium-open.sh"
chmod +x "$WORK/chromium-open.sh"
BROWSER=$WORK/chromium-open.sh "$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/reader.token" ui --open \
	>"$WORK/open.link" 2>/dev/null
check_eq "tetherctl ui --open with chromium: exit 0" 0 $?
check "... the page it opened moved on to the console: the app shown" grep -q '<main id="app">' "$WORK/opened.html"
check "... with the fleet" grep -q 'data-node="picky" data-state="nacked"' "$WORK/opened.html"
check "... not the login bar" grep -q '<form id="login" hidden' "$WORK/opened.html"

# ---- measured in the page (puppeteer) ----------------------------------------------
LINK=$("$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/reader.token" ui 2>/dev/null)
R=$(NODE_PATH=$PP_DIR timeout 120 node "$TOOLS/console-layout.cjs" "$LINK" "$ADMIN" picky "$WORK" 2>"$WORK/pp.err")
diag "console-layout: $R"
[ -n "$R" ] || bail "console-layout.cjs printed nothing: $(tail -n 5 "$WORK/pp.err")"
r() { jq -c "$1" <<<"$R"; }
check_eq "the tool drove the page" null "$(r .error)"
check_eq "the link opens the fleet: no login bar" true "$(r .login_hidden)"
check_eq "the fragment is gone from the address bar" '""' "$(r .hash_after)"
check_eq "... and the token with it" false "$(r .url_has_token)"
check_eq "the session is kept for the tab" true "$(r .token_kept)"

check_eq "NACK standing: counts" '{"synced":1,"lagging":0,"nacked":1,"offline":0,"stale":0}' "$(r .nacked.counts)"
check_eq "NACK standing: the counts are the node table's states" "$(r .nacked.counts)" "$(r .nacked.rows)"
check_eq "NACK standing: the NACK panel lists what the count counts" "[\"picky@$V2\"]" "$(r .nacked.nacks)"
check_eq "picky ACKed a good version: counts" '{"synced":2,"lagging":0,"nacked":0,"offline":0,"stale":0}' "$(r .acked.counts)"
check_eq "... the counts are the node table's states" "$(r .acked.counts)" "$(r .acked.rows)"
check_eq "... no NACK listed as standing (the count is 0)" "[] true" "$(r .acked.nacks) $(r .acked.nacks_none)"
check_eq "... picky's NACK is listed as an earlier one" "[\"picky@$V2\"]" "$(r .acked.before)"

check_eq "1400x900: no horizontal scroll" false "$(r .wide.horizontal_scroll)"
check "1400x900: at least two panels side by side" jq -e '.wide.side_by_side_pairs >= 2 and .wide.columns >= 2' <<<"$R"
check_eq "1400x900: nothing over the header" "[]" "$(r .wide.overlapping)"
check_eq "390x844: the page is 390 wide" 390 "$(r .phone.width)"
check_eq "390x844: no horizontal scroll" false "$(r .phone.horizontal_scroll)"
check_eq "390x844: one column" 1 "$(r .phone.columns)"
check_eq "390x844: nothing over the header" "[]" "$(r .phone.overlapping)"
check_eq "no page errors" "[]" "$(r .page_errors)"
# ---- an expired link -----------------------------------------------------------------
expired() { curl -sS -H "Authorization: Bearer ${OLD_LINK#*#s=}" "$PLANE_URL/v1/status" | grep -q 'expired at'; }
check "the one-minute session ends" wait_until 90 expired
wait "$EXPIRY_PID"
untrack_pid "$EXPIRY_PID"
E=$(cat "$WORK/expiry.json")
diag "console-expiry: $E"
check_eq "a page open at the session's end: the tool drove it" null "$(jq -c .error <<<"$E")"
check "... it brings the login bar back, saying the session expired" \
	jq -e '.login_error | test("this console session has expired: run .tetherctl ui. for a new link")' <<<"$E"
check_eq "... with no reload, no page error" "true []" "$(jq -c .same_page <<<"$E") $(jq -c .page_errors <<<"$E")"
timeout 60 "$CHROMIUM" "${HEADLESS[@]}" --dump-dom "$OLD_LINK" >"$WORK/expired.html" 2>>"$WORK/headless.log"
check "an expired link shows the login bar" grep -q '<form id="login">' "$WORK/expired.html"
check "... saying the session expired and how to get a new one" \
	grep -q 'id="login-error"[^>]*>this console session has expired: run .tetherctl ui. for a new link' "$WORK/expired.html"
check "... and nothing of the fleet" grep -q '<main id="app" hidden' "$WORK/expired.html"

for w in 1400 390; do
	check "the ${w} screenshot is a PNG" sh -c "file '$WORK/console-$w.png' | grep -q 'PNG image data'"
	cp "$WORK/console-$w.png" "$TOP_BUILDDIR/t1006-console-$w.png" 2>/dev/null
done
cp "$WORK/headless.png" "$TOP_BUILDDIR/t1006-headless.png" 2>/dev/null
done_testing
