#!/usr/bin/env bash
# t0979-freeze-console.sh: the console (GET /ui/) in a real browser (Debian's
# chromium, headless, puppeteer-core: tests/tools/freeze-banner.cjs) shows
# a freeze window: a banner with its message from the first load, gone
# with no reload once the freeze is turned off, back when a new one is set
# and gone again when that one ends by its time. Skips without chromium or
# when puppeteer-core cannot be installed.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || skip_all "node is not installed"
puppeteer_dir
need_cmd jq curl

start_plane p --heartbeat 1
ctl put file/motd - <<<'{"path":"motd.txt","content":"motd-1\n"}' >/dev/null || bail "cannot write"
ctl freeze --until 1h --message "console freeze check" >/dev/null || bail "cannot freeze"

R=$(NODE_PATH=$PP_DIR timeout 120 node "$TOOLS/freeze-banner.cjs" "$PLANE_URL" "console freeze check" 2>"$WORK/pp.err")
diag "freeze-banner: $R"
[ -n "$R" ] || bail "freeze-banner.cjs printed nothing: $(tail -n 5 "$WORK/pp.err")"
check_eq "the tool drove the page" "null" "$(jq -c .error <<<"$R")"
check "the banner shows the freeze at load, with who and why" \
	jq -e '.shown_at_load | test("^Frozen until [0-9TZ:-]+ by anonymous: console freeze check\\.")' <<<"$R"
check_eq "--off from the page: 200" 200 "$(jq -r .delete_status <<<"$R")"
check "the banner goes with no reload (thaw)" jq -e '.hidden_after_off == true' <<<"$R"
check_eq "a new freeze: 200" 200 "$(jq -r .put_status <<<"$R")"
check "the banner comes back with no reload (freeze)" jq -e '.shown_after_put | test("three seconds")' <<<"$R"
check "and goes when it ends by its time" jq -e '.hidden_after_time == true' <<<"$R"
check "the event log lists the freeze and the thaws" \
	jq -e '[.log[] | select(test("frozen until|ended \\((off|time)\\)"))] | length >= 3' <<<"$R"
check_eq "no page errors" "[]" "$(jq -c .page_errors <<<"$R")"
done_testing
