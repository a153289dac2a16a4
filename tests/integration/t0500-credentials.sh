#!/bin/bash
# t0500-credentials.sh: TLS, mutual TLS and the plane's credentials: a
# secure plane (no --insecure) refuses anonymous callers (401), a node's
# token or certificate admits that node only (403 for another), roles
# (reader: secrets redacted, no writes; operator: abort; admin: all),
# revocation closes open streams at once, agents and tetherctl over
# HTTPS, an agent that does not trust the plane's CA keeps serving
# last-good, SIGHUP loads a new certificate while open streams keep
# theirs, the warnings at start, and no secret in a log or a metric.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-tls.sh"
need_cmd openssl

PKI=$WORK/pki
make_pki "$PKI" n1 n2
head -c 32 /dev/urandom | base64 | tr -d '/+=' >"$WORK/admin.tok"
ADMIN=$(cat "$WORK/admin.tok")

# ---- a secure plane cannot start without an admin credential --------------
rc=0
timeout 20 "$PLANE_BIN" --listen 127.0.0.1:0 --data "$WORK/noadmin.data" >"$WORK/noadmin.log" 2>&1 || rc=$?
check_eq "a secure plane without an admin credential does not start" 1 "$rc"
check "it says what to give" grep -q "no admin credential: give --admin-token-file" "$WORK/noadmin.log"

SECURE=1 start_plane p --admin-token-file "$WORK/admin.tok" --tls-cert "$PKI/server.pem" \
	--tls-key "$PKI/server.key" --client-ca "$PKI/ca.pem" --heartbeat 0.5
check "the plane serves HTTPS and asks for client certificates" grep -q "HTTPS, client certificates" "$PLANE_LOG"
check "a TLS plane on loopback gives no clear-text warning" bash -c "! grep -q 'TLS is off' '$PLANE_LOG'"
export TETHER_CA_FILE=$PKI/ca.pem
CA=(--cacert "$PKI/ca.pem")
CURL_OPTS=("${CA[@]}" -H "Authorization: Bearer $ADMIN")
code() { # code [CURL ARGS...] URL-PATH: the HTTP status
	local path=${*: -1}
	curl -sS -o /dev/null -w '%{http_code}' "${CA[@]}" "${@:1:$#-1}" "$PLANE_URL$path"
}
bearer() { printf 'Authorization: Bearer %s' "$1"; }

# ---- anonymous callers --------------------------------------------------------
check_eq "/healthz needs no credential" 200 "$(code /healthz)"
check_eq "an anonymous read is 401" 401 "$(code /v1/resources)"
check_eq "anonymous metrics are 401" 401 "$(code /metrics)"
check_eq "an anonymous node list is 401" 401 "$(code /v1/nodes)"
check_eq "an anonymous stream is 401" 401 "$(code '/v1/stream?node=anything&version=0')"
check_eq "an anonymous poll is 401" 401 "$(code '/v1/config?node=anything&version=0')"
check_eq "an anonymous ACK is 401" 401 "$(code -X POST --data '{"node":"n1","version":1,"nonce":"x","status":"ack"}' /v1/ack)"
hdr=$(curl -sS "${CA[@]}" -o /dev/null -D - "$PLANE_URL/v1/resources" | tr -d '\r')
check "a 401 carries WWW-Authenticate: Bearer" grep -q '^WWW-Authenticate: Bearer' <<<"$hdr"
check_eq "an unknown token is 401" 401 "$(code -H "$(bearer tt1_000000000000_nope)" /v1/resources)"
check_eq "a Basic credential is 401" 401 "$(code -H "Authorization: Basic $ADMIN" /v1/resources)"
head -c 8000000 /dev/zero | tr '\0' 'x' >"$WORK/big.body"
check_eq "an anonymous upload is refused on its headers (401, not read)" 401 \
	"$(code -X POST --data-binary "@$WORK/big.body" /v1/batch)"
check_eq "plain HTTP to the TLS port gets no answer" 000 \
	"$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$PLANE_PORT/healthz")"
check "a client that does not trust the plane's CA refuses it" bash -c \
	"! curl -sS --cacert '$PKI/other-ca.pem' '$PLANE_URL/healthz' >/dev/null 2>&1"

# ---- tokens -------------------------------------------------------------------
export TETHER_TOKEN_FILE=$WORK/admin.tok
ctl token create --role reader --name alice >"$WORK/reader.tok"
check_eq "token create prints one line" 1 "$(wc -l <"$WORK/reader.tok")"
ctl token create --role operator --name bob >"$WORK/operator.tok"
ctl token create --node n2 >"$WORK/n2.tok"
ctl token create --node n3 >"$WORK/n3.tok"
READER=$(cat "$WORK/reader.tok") OPERATOR=$(cat "$WORK/operator.tok") N2=$(cat "$WORK/n2.tok")
check "tokens are long random strings" bash -c "[[ '$READER' =~ ^tt1_[0-9a-f]{12}_[A-Za-z0-9_-]{43}\$ ]]"
check "two tokens differ" test "$READER" != "$OPERATOR"
ls_json=$(ctl token ls --json)
check_eq "token ls lists four" 4 "$(jq length <<<"$ls_json")"
check_eq "token ls says what each is for" "reader operator node node" "$(jq -r '[.[].role] | join(" ")' <<<"$ls_json")"
check "token ls never shows a token" bash -c "! grep -qF -e '${READER#tt1_????????????_}' -e '${N2#tt1_????????????_}' <<<'$ls_json'"
check "token ls shows the names" grep -q alice <<<"$(ctl token ls)"
check_eq "a token needs --node or --role" 2 "$(ctl token create >/dev/null 2>&1; echo $?)"
check_eq "a bad role is a usage error" 2 "$(ctl token create --role root >/dev/null 2>&1; echo $?)"
check_eq "a reader cannot make tokens" 403 "$(code -X POST -H "$(bearer "$READER")" --data '{"role":"admin"}' /v1/tokens)"
check_eq "a node cannot list tokens" 403 "$(code -H "$(bearer "$N2")" /v1/tokens)"
check_eq "a token request with an unknown field is 422" 422 \
	"$(code -X POST -H "$(bearer "$ADMIN")" --data '{"role":"reader","x":1}' /v1/tokens)"
check_eq "a token for a bad node id is 422" 422 \
	"$(code -X POST -H "$(bearer "$ADMIN")" --data '{"node":"a b"}' /v1/tokens)"
head -c 5000 /dev/zero | tr '\0' 'x' >"$WORK/5k.body"
check_eq "a token request has its own small body cap (413)" 413 \
	"$(code -X POST -H "$(bearer "$ADMIN")" --data-binary "@$WORK/5k.body" /v1/tokens)"
check_eq "so has an ACK (64 KiB)" 413 \
	"$(code -X POST -H "$(bearer "$N2")" --data-binary "@$WORK/big.body" /v1/ack)"
check_eq "an ACK under a credential that is not a node's is refused on its headers (403)" 403 \
	"$(code -X POST -H "$(bearer "$ADMIN")" --data-binary "@$WORK/big.body" /v1/ack)"
check_eq "revoking an unknown id is 404" 404 "$(code -X DELETE -H "$(bearer "$ADMIN")" /v1/tokens/000000000000)"
check_eq "a malformed id is 400" 400 "$(code -X DELETE -H "$(bearer "$ADMIN")" /v1/tokens/NOT-AN-ID)"

# ---- roles ----------------------------------------------------------------------
# a real pair (the plane parses and matches them); KEY_MATERIAL: 16 characters
# of the private scalar (after the P-256 key's fixed header), which must never leak
pem_pair web
KEY_MATERIAL=$(sed -n 2p "$WORK/web.key" | cut -c 49-)
[ ${#KEY_MATERIAL} -ge 12 ] || bail "unexpected test key layout"
ctl put secret/web - >/dev/null <<EOF
{"cert":"$PAIR_CERT","key":"$PAIR_KEY"}
EOF
ctl put file/motd - >/dev/null <<<'{"path":"motd.txt","content":"hello\n"}'
check_eq "the admin token writes" 2 "$(plane_version)"
rd=$(curl -sS "${CA[@]}" -H "$(bearer "$READER")" "$PLANE_URL/v1/resources/secret/web")
check_eq "a reader reads a secret's certificate" "-----BEGIN CERTIFICATE-----" "$(jq -r '.body.cert' <<<"$rd" | head -n 1)"
check_eq "a reader gets the key redacted" "[redacted]" "$(jq -r '.body.key' <<<"$rd")"
lst=$(curl -sS "${CA[@]}" -H "$(bearer "$READER")" "$PLANE_URL/v1/resources?prefix=secret/")
check_eq "a reader's list is redacted too" "[redacted]" "$(jq -r '.resources[0].body.key' <<<"$lst")"
check "an operator does not see the key either" bash -c "! curl -sS --cacert '$PKI/ca.pem' -H 'Authorization: Bearer $OPERATOR' \
	'$PLANE_URL/v1/resources/secret/web' | grep -q '$KEY_MATERIAL'"
check "an admin reads the key" grep -q "$KEY_MATERIAL" <<<"$(ctl get secret/web)"
check "tetherctl get as a reader shows the redaction" grep -q redacted <<<"$(TETHER_TOKEN_FILE=$WORK/reader.tok ctl get secret/web)"
check_eq "a reader writing is 403" 403 \
	"$(code -X PUT -H "$(bearer "$READER")" --data '{"path":"x","content":"y"}' /v1/resources/file/x)"
check_eq "tetherctl as a reader writing exits 1" 1 \
	"$(TETHER_TOKEN_FILE=$WORK/reader.tok ctl put file/x - >/dev/null 2>&1 <<<'{"path":"x","content":"y"}'; echo $?)"
check_eq "a reader's batch is 403" 403 "$(code -X POST -H "$(bearer "$READER")" --data '{"removes":["file/motd"]}' /v1/batch)"
check_eq "a reader deleting is 403" 403 "$(code -X DELETE -H "$(bearer "$READER")" /v1/resources/file/motd)"
check_eq "a reader reads nodes" 200 "$(code -H "$(bearer "$READER")" /v1/nodes)"
check_eq "a reader reads metrics" 200 "$(code -H "$(bearer "$READER")" /metrics)"
check_eq "a reader cannot abort a rollout" 403 "$(code -X POST -H "$(bearer "$READER")" /v1/rollouts/current/abort)"
check_eq "an operator may abort (none runs: 409, not 403)" 409 \
	"$(code -X POST -H "$(bearer "$OPERATOR")" /v1/rollouts/current/abort)"
check_eq "an operator cannot write" 403 \
	"$(code -X PUT -H "$(bearer "$OPERATOR")" --data '{"path":"x","content":"y"}' /v1/resources/file/x)"
check_eq "a node token cannot read resources" 403 "$(code -H "$(bearer "$N2")" /v1/resources)"
check_eq "nothing was written by the refused writes" 2 "$(plane_version)"

# ---- node credentials: tokens -------------------------------------------------------
check_eq "n2's token polls as n2" 200 "$(code -H "$(bearer "$N2")" '/v1/config?node=n2&version=0')"
check_eq "n2's token cannot poll as n1" 403 "$(code -H "$(bearer "$N2")" '/v1/config?node=n1&version=0')"
check_eq "n2's token cannot stream as n1" 403 "$(code -H "$(bearer "$N2")" '/v1/stream?node=n1&version=0')"
check_eq "n2's token cannot ACK as n1" 403 \
	"$(code -X POST -H "$(bearer "$N2")" --data '{"node":"n1","version":1,"nonce":"x","status":"nack","error":"no"}' /v1/ack)"
check_eq "an admin token is no node credential" 403 "$(code -H "$(bearer "$ADMIN")" '/v1/config?node=n2&version=0')"
poll=$(curl -sS "${CA[@]}" -H "$(bearer "$N2")" "$PLANE_URL/v1/config?node=n2&version=0")
check "a node gets the secret's key in its push" grep -q "$KEY_MATERIAL" <<<"$poll"
cc=$(curl -sS -o /dev/null -D - "${CA[@]}" -H "$(bearer "$N2")" "$PLANE_URL/v1/config?node=n2&version=0" | tr -d '\r' |
	sed -n 's/^Cache-Control: //p')
check_eq "an answer to a credential is private to it (no shared cache keeps secrets)" \
	"private, max-age=1, stale-if-error=86400" "$cc"

# ---- node credentials: certificates --------------------------------------------------
C1=(--cert "$PKI/n1.pem" --key "$PKI/n1.key")
check_eq "n1's certificate polls as n1" 200 "$(code "${C1[@]}" '/v1/config?node=n1&version=0')"
check_eq "n1's certificate cannot poll as n2" 403 "$(code "${C1[@]}" '/v1/config?node=n2&version=0')"
check_eq "a certificate another CA signed is 401" 401 \
	"$(code --cert "$PKI/rogue.pem" --key "$PKI/rogue.key" '/v1/config?node=n1&version=0')"
check_eq "a node certificate cannot read resources" 403 "$(code "${C1[@]}" /v1/resources)"
( cd "$PKI" && pki_cert badcn "bad node" "extendedKeyUsage=clientAuth" ca ) >>"$PKI/pki.log" 2>&1
check_eq "a certificate whose CN is no node id is 401" 401 \
	"$(code --cert "$PKI/badcn.pem" --key "$PKI/badcn.key" '/v1/config?node=bad&version=0')"

# ---- refusals are counted -------------------------------------------------------------
M=(-H "$(bearer "$READER")")
refused() { curl -sS "${CA[@]}" "${M[@]}" "$PLANE_URL/metrics" | awk -v m="tether_auth_refused_total{reason=\"$1\"}" '$1 == m {print $2}'; }
check "401s without a credential are counted" test "$(refused no_credential)" -ge 7
check "bad tokens are counted" test "$(refused bad_token)" -ge 2
check "wrong nodes are counted" test "$(refused wrong_node)" -ge 4
check "refused roles are counted" test "$(refused role)" -ge 8
check "bad certificates are counted" test "$(refused bad_certificate)" -ge 1

# ---- agents over TLS: certificate and token ---------------------------------------------
start_agent n1 --plane "$PLANE_URL" --ca-file "$PKI/ca.pem" --cert "$PKI/n1.pem" --key "$PKI/n1.key"
start_agent n3 --plane "$PLANE_URL" --ca-file "$PKI/ca.pem" --token-file "$WORK/n3.tok"
check "an agent with a client certificate syncs over TLS" wait_until 10 agent_at n1 2
check "an agent with a token syncs over TLS" wait_until 10 agent_at n3 2
check_eq "n1 wrote the file" "hello" "$(cat "$WORK/n1.out/motd.txt")"
check "the plane shows n1's ACK" wait_until 10 node_acked n1 2
check "the plane shows n3's ACK" wait_until 10 node_acked n3 2

# ---- revocation: at once, and the open stream closes ---------------------------------------
curl -sS -N "${CA[@]}" -H "$(bearer "$N2")" "$PLANE_URL/v1/stream?node=n2&version=2" >"$WORK/n2.stream" 2>&1 &
SPID=$!
track_pid $SPID
check "n2's stream is open" wait_until 10 grep -q 'event: heartbeat' "$WORK/n2.stream"
N2ID=$(cut -d_ -f2 <<<"$N2")
check "token revoke succeeds" ctl token revoke "$N2ID"
check "n2's open stream closes at once" wait_until 5 bash -c "! kill -0 $SPID 2>/dev/null"
check_eq "the revoked token is 401 now" 401 "$(code -H "$(bearer "$N2")" '/v1/config?node=n2&version=0')"
check "the refusal says revoked" grep -q revoked <<<"$(curl -sS "${CA[@]}" -H "$(bearer "$N2")" "$PLANE_URL/v1/config?node=n2&version=0")"
check_eq "token ls shows it revoked" 1 "$(ctl token ls --json | jq "[.[] | select(.id == \"$N2ID\" and .revoked > 0)] | length")"
check "revoking twice is fine" ctl token revoke "$N2ID"
ctl put file/motd - >/dev/null <<<'{"path":"motd.txt","content":"hello 2\n"}'
check "n3 takes the change" wait_until 10 agent_at n3 3
check "n1 takes the change" wait_until 10 agent_at n1 3

# ---- SIGHUP: a new certificate for new connections; open streams stay --------------------------
old_serial=$(served_serial "$PLANE_PORT")
( cd "$PKI" && pki_cert server2 localhost "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth" ca ) >>"$PKI/pki.log" 2>&1
cp "$PKI/server2.pem" "$PKI/server.pem"
cp "$PKI/server2.key" "$PKI/server.key"
opened=$(metric tether_streams_opened_total)
kill -HUP "$PLANE_PID"
check "the plane reloads its certificate" wait_until 5 grep -q "TLS certificate and key reloaded" "$PLANE_LOG"
new_serial=$(served_serial "$PLANE_PORT")
check "a new connection is shown the new certificate" test -n "$new_serial" -a "$new_serial" != "$old_serial"
ctl put file/motd - >/dev/null <<<'{"path":"motd.txt","content":"hello 3\n"}'
check "n1's stream from before the reload carries the change" wait_until 10 agent_at n1 4
check_eq "no stream was reopened for it" "$opened" "$(metric tether_streams_opened_total)"
check "a bad certificate file on SIGHUP keeps the old one" bash -c "echo junk >'$PKI/server.pem'; kill -HUP $PLANE_PID; \
	for i in \$(seq 100); do grep -q 'new connections keep the old certificate' '$PLANE_LOG' && exit 0; sleep 0.05; done; exit 1"
check_eq "and it still serves TLS" 200 "$(code /healthz)"

# ---- an agent that does not trust the plane's CA keeps serving last-good ------------------------
stop_pid "${APID[n1]}"
before=$(cat "$WORK/n1.out/motd.txt")
ALOG=n1-wrongca start_agent n1 --plane "$PLANE_URL" --ca-file "$PKI/other-ca.pem" --cert "$PKI/n1.pem" --key "$PKI/n1.key"
check "the agent refuses the plane's certificate" wait_until 10 grep -q "SSL certificate problem" "$WORK/n1-wrongca.log"
check_eq "it says offline" offline "$(st n1 state)"
check_eq "it keeps serving last-good" "$before" "$(cat "$WORK/n1.out/motd.txt")"
check_eq "at its version" 4 "$(st n1 version)"

# ---- tetherctl's environment and options --------------------------------------------------------
check "tetherctl reads TETHER_CA_FILE and TETHER_TOKEN_FILE" ctl ls
check_eq "tetherctl without the CA fails" 1 "$(TETHER_CA_FILE= "$CTL_BIN" --plane "$PLANE_URL" ls >/dev/null 2>&1; echo $?)"
check "tetherctl --ca-file works too" bash -c "TETHER_CA_FILE= '$CTL_BIN' --plane '$PLANE_URL' --ca-file '$PKI/ca.pem' ls >/dev/null"
check_eq "--cert without --key is refused" 1 "$("$CTL_BIN" --plane "$PLANE_URL" --cert "$PKI/n1.pem" ls >/dev/null 2>&1; echo $?)"

# ---- no secret in a log line or a metric ---------------------------------------------------------
all_logs=$(cat "$WORK"/*.log)
check "no log line holds the secret's key" bash -c "! grep -q '$KEY_MATERIAL' <<<\"\$0\"" "$all_logs"
for t in "$ADMIN" "$READER" "$OPERATOR" "$N2" "$(cat "$WORK/n3.tok")"; do
	secret_part=${t#tt1_????????????_}   # base64url: it may hold '_' itself
	if grep -qF -- "$secret_part" <<<"$all_logs"; then
		not_ok "no log line holds a token (${t:0:16}...)"
	else
		ok "no log line holds a token (${t:0:16}...)"
	fi
done
check "no metric holds the key or a token" bash -c "! curl -sS --cacert '$PKI/ca.pem' -H 'Authorization: Bearer $READER' \
	'$PLANE_URL/metrics' | grep -q -e '$KEY_MATERIAL' -e '${ADMIN}'"

# ---- warnings at start -------------------------------------------------------------------------
"$PLANE_BIN" --listen 0.0.0.0:0 --data "$WORK/open.data" --insecure >"$WORK/open.log" 2>&1 &
OPID=$!
track_pid $OPID
check "a plane on a public address says it is clear text" wait_until 10 grep -q "WARNING: .* not a loopback address and TLS is off" "$WORK/open.log"
check "--insecure says what it opens" grep -q -- "--insecure: reads are open" "$WORK/open.log"
stop_pid $OPID

done_testing
