#!/usr/bin/env bash
# t0908-relay-malicious.sh: relays nodes need not trust, on a secure
# origin. A relay follows with a relay token (--upstream-token-file); it
# admits the tokens the origin issued (their records come down the relay
# stream) and nothing else. The malicious relay is a real relay whose
# output goes through tests/tools/attack-proxy.mjs: it changes a body,
# drops a resource and replays an old state. The node (--trust) refuses
# each, keeps serving what it had, and the origin sees the refusals in its
# record of the node (verify_failures, last_verify_failure) through the
# relay. A token revoked at the origin closes the node's stream on the
# relay. A relay without a credential, or with a node's, is refused. A
# relay may also follow by client certificate (mutual TLS; --cert-roles and
# OU=tether-relay on the origin).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-attack.sh"
. "$(dirname "$0")/lib-tls.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd node

# ---- helpers of this test ---------------------------------------------------

ADMIN=$WORK/admin.token
actl() {
	"$CTL_BIN" --plane "$ORIGIN" --token-file "$ADMIN" "$@"
}
wfile() {
	printf '{"path":"%s.txt","content":"%s\\n"}' "$1" "$2" | actl put "file/$1" >/dev/null ||
		bail "cannot write file/$1"
	V=$(curl -sS "$ORIGIN/healthz" | jq -r .version)
}
# converge WHAT: the proxy passes again and a new write reaches n1
converge() {
	mode "$ATK" pass
	wfile conv "after $1"
	check "$1: after the relay behaves again n1 converges to version $V" wait_until 15 agent_at n1 "$V"
	check "$1: the origin has n1's ACK of version $V (through the relay)" wait_until 10 node_acked n1 "$V"
}

# ---- a secure origin, a relay token, a node token ----------------------------------

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$ADMIN"
chmod 600 "$ADMIN"
CURL_OPTS=(-H "Authorization: Bearer $(cat "$ADMIN")")
"$CTL_BIN" keygen "$WORK/sign" >/dev/null || bail "keygen failed"
SECURE=1 start_plane origin --admin-token-file "$ADMIN" --signing-key "$WORK/sign" --heartbeat 0.5
ORIGIN=$PLANE_URL
actl token create --role relay --name edge-relay >"$WORK/relay.token" || bail "cannot make a relay token"
actl token create --node n1 >"$WORK/n1.token" || bail "cannot make n1's token"
check_eq "a relay token is listed with its role" "relay edge-relay" \
	"$(actl token ls --json 2>/dev/null | jq -r '.[] | select(.role == "relay") | "\(.role) \(.name)"' ||
		curl -sS "${CURL_OPTS[@]}" "$ORIGIN/v1/tokens" | jq -r '.[] | select(.role == "relay") | "\(.role) \(.name)"')"
wfile a a1
wfile b b1

# a relay with no credential, or a node's, is refused at start
"$PLANE_BIN" --upstream "$ORIGIN" --relay-id nocred --listen 127.0.0.1:0 >"$WORK/nocred.log" 2>&1
check_eq "a relay with no token does not start" 1 "$?"
check "... and says the origin refused it (401)" grep -q "the upstream answered 401" "$WORK/nocred.log"
"$PLANE_BIN" --upstream "$ORIGIN" --upstream-token-file "$WORK/n1.token" --relay-id nodecred \
	--listen 127.0.0.1:0 >"$WORK/nodecred.log" 2>&1
check "a relay with a node's token is refused (403, the relay role)" grep -q "the upstream answered 403.*relay role" \
	"$WORK/nodecred.log"
check "no token appears in their logs" sh -c "! grep -qF '$(cat "$WORK/n1.token")' '$WORK/nocred.log' '$WORK/nodecred.log'"

SECURE=1 start_plane relay --upstream "$ORIGIN" --upstream-token-file "$WORK/relay.token" --relay-id edge \
	--heartbeat 0.5
RELAY=$PLANE_URL
RELAY_PORT=$PLANE_PORT
PLANE_URL=$ORIGIN
check_eq "an anonymous client is refused by the relay" 401 \
	"$(curl -sS -o /dev/null -w '%{http_code}' "$RELAY/v1/stream?node=n1&version=0")"
check_eq "the relay admits n1's own token (the origin issued it)" 200 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$WORK/n1.token")" \
		"$RELAY/v1/config?node=n1&version=0")"
check_eq "... for n1 only" 403 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$WORK/n1.token")" \
		"$RELAY/v1/config?node=n2&version=0")"
check_eq "the relay token cannot write through the origin" 403 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $(cat "$WORK/relay.token")" \
		--data-binary '{"path":"x.txt","content":"x"}' "$ORIGIN/v1/resources/file/x")"

# a batch of node changes names its relay: taken only from the credential
# that holds that relay's stream at the origin
actl token create --role relay --name other-relay >"$WORK/other.token" || bail "cannot make a second relay token"
printf 'tether-changes 1 edge 1\nend 0\n' >"$WORK/forged"
changes_as() {
	curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST -H "Authorization: Bearer $(cat "$1")" \
		--data-binary "@$WORK/forged" "$ORIGIN/v1/relay/changes"
}
check "the relay edge follows the origin" wait_until 10 grep -q "relay edge: following" "$WORK/origin.log"
check_eq "a batch naming relay edge sent with another relay's token is refused (403)" 403 \
	"$(changes_as "$WORK/other.token")"
check "... saying so" grep -q "relay edge holds no stream here (GET /v1/relay/stream) opened with this credential" \
	"$WORK/answer"
check_eq "with edge's own token it is taken (200)" 200 "$(changes_as "$WORK/relay.token")"

# the malicious relay: the real relay, its output rewritten
start_tool atk attack-proxy.mjs --target "127.0.0.1:$RELAY_PORT"
ATK=$TOOL_PORT
start_agent n1 --plane "http://127.0.0.1:$ATK" --trust "$WORK/sign.pub" --token-file "$WORK/n1.token" \
	--metrics-file "$WORK/n1.prom" --backoff-min 0.1 --backoff-max 0.5
check "n1 syncs to version $V through the relay" wait_until 15 agent_at n1 "$V"
check "the origin has n1's ACK, behind relay edge" wait_until 10 sh -c \
	"curl -sS -H 'Authorization: Bearer $(cat "$ADMIN")' '$ORIGIN/v1/nodes/n1' | jq -e '.acked_version == $V and .via == [\"edge\"]' >/dev/null"
check_eq "no verification failure so far" 0 "$(vf n1)"

# ---- a body changed ------------------------------------------------------------------
VF0=$(vf n1)
D0=$(reason n1 digest)
before=$(contents n1)
mode "$ATK" tamper-body file/a
wfile a a2
check "tamper: the relay's push $V had file/a changed" wait_until 5 grep -q "push $V .*tamper-body" "$WORK/atk.log"
check "tamper: n1 refuses it as a digest mismatch" wait_until 10 reason_above n1 digest "$D0"
check "tamper: the origin records the refusal, through the relay" wait_until 10 vf_above n1 "$VF0"
check "tamper: the origin's last verification failure says digest" sh -c \
	"curl -sS -H 'Authorization: Bearer $(cat "$ADMIN")' '$ORIGIN/v1/nodes/n1' | jq -e '.last_verify_failure.error | test(\"digest\")' >/dev/null"
check_eq "tamper: n1 serves what it had" "$before" "$(contents n1)"
converge tamper
check_eq "tamper: a.txt holds the origin's a2" a2 "$(cat "$WORK/n1.out/a.txt")"

# ---- a resource dropped ----------------------------------------------------------------
VF0=$(vf n1)
D0=$(reason n1 digest)
before=$(contents n1)
mode "$ATK" drop-upsert file/b
printf '{"upserts":[{"name":"file/a","body":{"path":"a.txt","content":"a3\\n"}},{"name":"file/b","body":{"path":"b.txt","content":"b3\\n"}}]}' |
	actl apply - >/dev/null || bail "cannot apply"
V=$(curl -sS "$ORIGIN/healthz" | jq -r .version)
check "drop: the relay's push $V lost file/b" wait_until 5 grep -q "push $V .*drop-upsert: file/b dropped" "$WORK/atk.log"
check "drop: n1 refuses it as a digest mismatch" wait_until 10 reason_above n1 digest "$D0"
check "drop: the origin records the refusal" wait_until 10 vf_above n1 "$VF0"
check_eq "drop: n1 serves what it had" "$before" "$(contents n1)"
converge drop
check_eq "drop: b.txt holds the origin's b3" b3 "$(cat "$WORK/n1.out/b.txt")"

# ---- an old state replayed -----------------------------------------------------------------
wfile a a8
VOLD=$V
check "replay: n1 applies version $VOLD" wait_until 10 agent_at n1 "$VOLD"
wfile a a9
VNEW=$V
check "replay: then version $VNEW" wait_until 10 agent_at n1 "$VNEW"
VF0=$(vf n1)
R0=$(reason n1 rollback)
mode "$ATK" replay "$VOLD"
check "replay: the relay sends push $VOLD again" wait_until 5 grep -q "replay: push $VOLD .* sent again" "$WORK/atk.log"
check "replay: n1 refuses it as a rollback" wait_until 10 reason_above n1 rollback "$R0"
check "replay: the origin records the refusal" wait_until 10 vf_above n1 "$VF0"
check_eq "replay: a.txt keeps a9" a9 "$(cat "$WORK/n1.out/a.txt")"
check_eq "replay: the origin still has n1 at $VNEW" "$VNEW" "$(node_field n1 .acked_version)"
converge replay

# ---- a revocation at the origin reaches the relay --------------------------------------------
id=$(curl -sS "${CURL_OPTS[@]}" "$ORIGIN/v1/tokens" | jq -r '.[] | select(.node == "n1") | .id')
actl token revoke "$id" >/dev/null || bail "cannot revoke"
check "the relay closes n1's stream" wait_until 10 grep -q "token $id revoked on another replica; 1 streams closed here" \
	"$WORK/relay.log"
check_eq "and refuses the token from then on" 401 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$WORK/n1.token")" \
		"$RELAY/v1/config?node=n1&version=0")"
check "no token appears in the relay's log" sh -c \
	"! grep -qF -e '$(cat "$WORK/n1.token")' -e '$(cat "$WORK/relay.token")' '$WORK/relay.log'"

# ---- a relay by client certificate ------------------------------------------------------
PKI=$WORK/pki
make_pki "$PKI" n9
(cd "$PKI" && pki_cert edge "edge/OU=tether-relay" "extendedKeyUsage=clientAuth" ca) >>"$PKI/pki.log" 2>&1 ||
	bail "cannot make the relay's certificate"
SECURE=1 start_plane tlsorigin --admin-token-file "$ADMIN" --tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key" \
	--client-ca "$PKI/ca.pem" --cert-roles
TLS_ORIGIN=$PLANE_URL
curl -sS --cacert "$PKI/ca.pem" -H "Authorization: Bearer $(cat "$ADMIN")" -X PUT \
	--data-binary '{"path":"t.txt","content":"t\n"}' "$TLS_ORIGIN/v1/resources/file/t" >/dev/null
"$PLANE_BIN" --upstream "$TLS_ORIGIN" --upstream-ca "$PKI/ca.pem" --upstream-cert "$PKI/n9.pem" \
	--upstream-key "$PKI/n9.key" --relay-id nodecert --listen 127.0.0.1:0 >"$WORK/nodecert-tls.log" 2>&1
check "a relay with a node's certificate is refused (403, the relay role)" \
	grep -q "the upstream answered 403.*relay role" "$WORK/nodecert-tls.log"
SECURE=1 start_plane certrelay --upstream "$TLS_ORIGIN" --upstream-ca "$PKI/ca.pem" --upstream-cert "$PKI/edge.pem" \
	--upstream-key "$PKI/edge.key" --relay-id edge-cert
check_eq "a relay with a certificate of OU=tether-relay follows the origin over mutual TLS" "1 true" \
	"$(curl -sS "$PLANE_URL/healthz" | jq -r '"\(.version) \(.upstream_up)"')"
PLANE_URL=$ORIGIN

done_testing
