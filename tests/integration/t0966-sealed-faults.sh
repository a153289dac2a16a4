#!/usr/bin/env bash
# t0966-sealed-faults.sh: a node's sealed secrets when its plane fails for
# a moment. A poller (files consumer) dials the plane through a small
# proxy that answers 503 to what the test says: its key registration
# refused with a 503 is tried again after a backoff on the same healthy
# poll connection (no reconnect needed), and the plane gets the key once
# the proxy lets it through; a push whose GET /v1/wraps answers 503 is no
# NACK (the node waits, status.json says why, the plane records nothing
# against it), and applies once the wraps come, without a new version.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
SEALTOOL=$TOP_BUILDDIR/tests/tools/sealtool
[ -x "$SEALTOOL" ] || bail "no $SEALTOOL: build first (make check builds it)"
need_cmd node

# the proxy: forwards everything to the plane, except that while
# $WORK/fail-key exists POST /v1/nodes/*/key gets a 503, and while
# $WORK/fail-wraps exists GET /v1/wraps gets one; each 503 is a line of
# $WORK/flaky.trail
cat >"$WORK/flaky.mjs" <<'EOF'
import http from "node:http";
import fs from "node:fs";
const [target, work] = process.argv.slice(2);
const [thost, tport] = target.split(":");
const srv = http.createServer((req, res) => {
	const key = req.method === "POST" && /^\/v1\/nodes\/[^/]+\/key$/.test(req.url);
	const wraps = req.method === "GET" && req.url.startsWith("/v1/wraps?");
	if ((key && fs.existsSync(work + "/fail-key")) || (wraps && fs.existsSync(work + "/fail-wraps"))) {
		fs.appendFileSync(work + "/flaky.trail", (key ? "key" : "wraps") + " 503\n");
		req.resume();
		res.writeHead(503, { "content-type": "application/json" });
		res.end('{"error":"flaky: unavailable"}');
		return;
	}
	const up = http.request({ host: thost, port: tport, method: req.method, path: req.url, headers: req.headers },
		(ur) => { res.writeHead(ur.statusCode, ur.headers); ur.pipe(res); });
	up.on("error", () => { res.writeHead(502); res.end(); });
	req.pipe(up);
});
srv.listen(0, "127.0.0.1", () => console.log("listening " + srv.address().port));
EOF

"$SEALTOOL" recovery "$WORK/recovery" >/dev/null || bail "sealtool cannot make a recovery key"
start_plane p --heartbeat 1 --sealed-secrets "$WORK/recovery.pub"
node "$WORK/flaky.mjs" "127.0.0.1:$PLANE_PORT" "$WORK" >"$WORK/flaky.log" 2>&1 &
FLAKY_PID=$!
track_pid "$FLAKY_PID"
wait_until 10 grep -q '^listening ' "$WORK/flaky.log" || bail "the proxy did not start"
PROXY=http://127.0.0.1:$(sed -n 's/^listening //p' "$WORK/flaky.log")
STATE=$WORK/np.state
V0=$(curl -sS -X PUT --data-binary '{"path":"a.txt","content":"one\n"}' "$PLANE_URL/v1/resources/file/a" | jq -r .version)

# ---- the registration answered 503: tried again on the same connection ----------------------
touch "$WORK/fail-key"
start_agent np --plane "$PROXY" --transport poll --backoff-min 0.2 --backoff-max 1
check "the poller applies version $V0" wait_until 20 agent_at np "$V0"
KID=$("$SEALTOOL" key "$STATE/node.key")
check "the proxy refused its registration (503)" wait_until 10 grep -q '^key 503' "$WORK/flaky.trail"
check "the agent says it tries again after a backoff" \
	wait_until 10 grep -qF "did not take node key $KID (HTTP 503: flaky: unavailable); trying again after a backoff" "$WORK/np.log"
check "it tried more than once while the plane refused" wait_until 10 sh -c "[ \"\$(grep -c '^key 503' '$WORK/flaky.trail')\" -ge 2 ]"
check_eq "the plane has no key for it yet" null "$(node_field np .key_id)"
rm -f "$WORK/fail-key"
check "once the plane takes it, the plane has the key (no reconnect of the poller)" \
	wait_until 10 sh -c "[ \"\$(curl -sS '$PLANE_URL/v1/nodes/np' | jq -r .key_id)\" = '$KID' ]"
check "the agent logs the registration" wait_until 5 grep -qF "key: node key $KID registered at $PROXY" "$WORK/np.log"
check_eq "the poller never lost its connection meanwhile" "" "$(grep -F 'offline' "$WORK/np.log" | head -n 1)"

# ---- GET /v1/wraps answered 503: no NACK, the node waits and applies after --------------------
touch "$WORK/fail-wraps"
jq -cn '{cert:"-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n",
	key:"-----BEGIN PRIVATE KEY-----\nMIIEfaultsecretkeytext\n-----END PRIVATE KEY-----\n"}' |
	"$SEALTOOL" seal secret/tls "$WORK/recovery.pub" "$STATE/node.key" >"$WORK/s1.json" || bail "sealtool cannot seal"
V1=$(curl -sS -X PUT --data-binary "@$WORK/s1.json" "$PLANE_URL/v1/resources/secret/tls" | jq -r .version)
check "the plane takes the sealed secret ($V1)" test "$V1" -gt "$V0"
check "the node's wraps fetch gets a 503" wait_until 20 grep -q '^wraps 503' "$WORK/flaky.trail"
check "the agent says the push waits for its wraps" wait_until 10 grep -qF "push $V1 waits for its wraps" "$WORK/np.log"
check "status.json says so" wait_until 10 sh -c "jq -r .last_error '$STATE/status.json' | grep -qF 'version $V1 waits for its wraps'"
check "it asks again after a backoff (the poll in flight started again)" wait_until 10 sh -c "[ \"\$(grep -c '^wraps 503' '$WORK/flaky.trail')\" -ge 2 ]"
check "the node still runs $V0" agent_at np "$V0"
check_eq "the plane has no NACK from it" "" "$(node_field np '.last_nack.version // empty')"
check_eq "nor a hold" null "$(node_field np .held)"
rm -f "$WORK/fail-wraps"
check "once the wraps come, the node applies $V1" wait_until 20 agent_at np "$V1"
check "and the plane has its ACK" wait_until 10 node_acked np "$V1"
check_eq "still no NACK" "" "$(node_field np '.last_nack.version // empty')"
check_eq "wraps.json holds its wrap" "$(jq -r .sealed.id "$WORK/s1.json")" "$(jq -r '.wraps["secret/tls"].id' "$STATE/wraps.json")"
check "the key's text is in no log" sh -c "! grep -qF MIIEfaultsecretkeytext '$WORK/np.log' '$WORK/p.log'"

stop_pid "${APID[np]}" TERM
check_eq "SIGTERM: the agent exits 0" 0 "$?"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
