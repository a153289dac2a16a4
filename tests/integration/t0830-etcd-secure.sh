#!/usr/bin/env bash
# t0830-etcd-secure.sh: --store etcd against a real three-member etcd that
# speaks only TLS, wants a client certificate (--client-cert-auth, peers
# too) and runs its own authentication (a user whose role may read and
# write the plane's prefix and nothing else). Two replicas over https with
# --etcd-ca, --etcd-cert, --etcd-key and --etcd-token-file: a write on one
# reaches a node on the other (the watch over TLS). Refused at start, each
# with an error that names the problem: a CA that did not sign etcd's
# certificate, no client certificate, one from another CA, one with a
# Common Name (etcd's gateway refuses it when auth is on), a wrong
# password, no token file, a token file others may read or of a bad
# format, a user without rights on the prefix. No password in a log, an
# error or /metrics. etcd's tokens expire (--auth-token-ttl 2): a replica
# idle past the TTL authenticates again and writes on; a watch that fails
# over to a member where its token has expired (etcd cancels it)
# authenticates again and goes on.
# A permission revoked while running: a write gets a clear error, and
# works again once granted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
need_cmd jq curl openssl etcdctl timeout

P=$WORK/pki
etcd_secure_pki "$P"
ETCD_SECURE_ARGS=(--auth-token simple --auth-token-ttl 2)
etcd_secure_cluster_start 3
check "a three-member etcd over TLS with client certificates is healthy" etcd_secure_healthy 1
code=$(curl -s -o /dev/null -w '%{http_code}' -m 5 --cacert "$P/ca.pem" "https://127.0.0.1:${ETCD_CLIENT[1]}/health")
check_eq "... and refuses a client without a certificate" 000 "$code"

PREFIX=/t0830-$$/
ROOT_PW=root-$RANDOM$RANDOM$RANDOM
PW=tether-pw-$RANDOM$RANDOM$RANDOM
STRANGER_PW=stranger-$RANDOM$RANDOM$RANDOM
ROOT=(--user "root:$ROOT_PW")
{
	etcdctl_secure user add "root:$ROOT_PW" &&
		etcdctl_secure role add tether-rw &&
		etcdctl_secure role grant-permission tether-rw readwrite "$PREFIX" --prefix=true &&
		etcdctl_secure user add "tether:$PW" &&
		etcdctl_secure user grant-role tether tether-rw &&
		etcdctl_secure role add elsewhere &&
		etcdctl_secure role grant-permission elsewhere readwrite /elsewhere/ --prefix=true &&
		etcdctl_secure user add "stranger:$STRANGER_PW" &&
		etcdctl_secure user grant-role stranger elsewhere &&
		etcdctl_secure auth enable
} >"$WORK/etcdctl.out" 2>&1 || bail "cannot set up etcd's users (see $WORK/etcdctl.out)"
anon_refused() { etcdctl_secure get --prefix "$PREFIX" 2>&1 | grep -q 'permission denied\|user name is empty'; }
check "etcd's own authentication is on (no user: refused)" anon_refused

# token files: USER:PASSWORD, mode 0600
token_file() { (umask 077 && printf '%s\n' "$2" >"$WORK/$1.token"); }
token_file tether "tether:$PW"
token_file stranger "stranger:$STRANGER_PW"
token_file wrongpw "tether:not-$PW-either"
token_file nocolon "tether"
token_file nopw "tether:"
token_file twolines "tether:$PW
tether:$PW"
token_file loose "tether:$PW"
chmod 644 "$WORK/loose.token"

TLS=(--etcd-ca "$P/ca.pem" --etcd-cert "$P/client.pem" --etcd-key "$P/client.key")
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "$PREFIX" --heartbeat 1 "${TLS[@]}"
	--etcd-token-file "$WORK/tether.token")

start_plane a "${E[@]}"
A_URL=$PLANE_URL A_PID=$PLANE_PID A_LOG=$PLANE_LOG
start_plane b "${E[@]}"
B_URL=$PLANE_URL B_PID=$PLANE_PID B_LOG=$PLANE_LOG
check "replica a started over https, authenticated as etcd user 'tether'" grep -q "authenticated as etcd user 'tether'" "$A_LOG"

on() { local PLANE_URL=$1; shift; "$@"; }
version_on() { curl -fsS "$1/v1/resources" | jq -r '.version'; }
version_is() { [ "$(version_on "$1")" = "$2" ]; }

check_eq "a fresh store is at version 0" 0 "$(version_on "$A_URL")"
on "$A_URL" put file/one '{"path":"one.txt","content":"1\n"}' >/dev/null
check_eq "a write on a makes version 1" 1 "$(version_on "$A_URL")"
check "... and reaches b over the watch" wait_until 10 version_is "$B_URL" 1
check "... b's log says it came from another replica" grep -q 'version 1 from another replica' "$B_LOG"
start_agent n1 --plane "$B_URL" --consumer files
check "an agent on b syncs to version 1" wait_until 10 agent_at n1 1
on "$A_URL" put file/two '{"path":"two.txt","content":"2\n"}' >/dev/null
check "a write on a reaches the node on b" wait_until 10 agent_at n1 2
check_eq "... with its content" "2" "$(cat "$WORK/n1.out/two.txt" 2>/dev/null)"
# (its record, not its last ACK: nodes_merge takes an ACK only when its
# second is newer, so two ACKs in one second may leave a at the first)
a_knows_n1() { curl -fsS "$A_URL/v1/nodes" | jq -e '.[] | select(.node == "n1") | .acked_version >= 1' >/dev/null; }
check "the node's record on b, with an ACK, reaches a's /v1/nodes (node records in etcd)" wait_until 10 a_knows_n1
root_sees_version() { [ "$(etcdctl_secure "${ROOT[@]}" get "${PREFIX}version" --print-value-only)" = 2 ]; }
check "the keys are in etcd under the prefix (read as root)" root_sees_version

# ---- refused at start, each saying why -------------------------------------------------
# refused NAME ARGS...: a plane with ARGS; prints its exit code (its log is $WORK/NAME.log)
refused() {
	local name=$1
	shift
	timeout 40 "$PLANE_BIN" --insecure --listen 127.0.0.1:0 --data "$WORK/$name.data" --store etcd \
		--etcd "$ETCD_ENDPOINTS" --etcd-prefix "$PREFIX" "$@" >"$WORK/$name.log" 2>&1
	echo $?
}
says() { grep -qi -- "$1" "$WORK/$2.log"; }
show() { diag "$(grep -i 'error\|fatal\|etcd' "$WORK/$1.log" | tail -n 2)"; }

rc=$(refused x-ca --etcd-ca "$P/other-ca.pem" --etcd-cert "$P/client.pem" --etcd-key "$P/client.key" \
	--etcd-token-file "$WORK/tether.token")
check_eq "a CA that did not sign etcd's certificate: exits 1 at start" 1 "$rc"
check "... saying etcd's certificate is not trusted, and naming --etcd-ca" sh -c \
	"grep -q 'certificate is not trusted' '$WORK/x-ca.log' && grep -q -- '--etcd-ca' '$WORK/x-ca.log'"
show x-ca

rc=$(refused x-nocert --etcd-ca "$P/ca.pem" --etcd-token-file "$WORK/tether.token")
check_eq "no client certificate: exits 1" 1 "$rc"
check "... saying etcd wants one (--etcd-cert)" sh -c \
	"grep -q 'client certificate' '$WORK/x-nocert.log' && grep -q -- '--etcd-cert' '$WORK/x-nocert.log'"
show x-nocert

rc=$(refused x-rogue --etcd-ca "$P/ca.pem" --etcd-cert "$P/rogue.pem" --etcd-key "$P/rogue.key" \
	--etcd-token-file "$WORK/tether.token")
check_eq "a client certificate from a CA etcd does not trust: exits 1" 1 "$rc"
check "... saying etcd refused the client certificate" says "refuse.* the client certificate --etcd-cert '.*rogue.pem'" x-rogue
show x-rogue

rc=$(refused x-cn --etcd-ca "$P/ca.pem" --etcd-cert "$P/client-cn.pem" --etcd-key "$P/client-cn.key" \
	--etcd-token-file "$WORK/tether.token")
check_eq "a client certificate with a Common Name (etcd's gateway refuses it with auth on): exits 1" 1 "$rc"
check "... saying so" says "common name" x-cn
show x-cn

rc=$(refused x-key --etcd-ca "$P/ca.pem" --etcd-cert "$P/client.pem" --etcd-key "$P/rogue.key" \
	--etcd-token-file "$WORK/tether.token")
check_eq "a key that is not the certificate's: exits 1" 1 "$rc"
check "... naming --etcd-cert/--etcd-key" says "etcd-key" x-key
show x-key

rc=$(refused x-nofile --etcd-ca "$WORK/nope.pem" --etcd-cert "$P/client.pem" --etcd-key "$P/client.key" \
	--etcd-token-file "$WORK/tether.token")
check_eq "an --etcd-ca that does not exist: exits 1" 1 "$rc"
check "... naming it" says "nope.pem" x-nofile

rc=$(refused x-pw "${TLS[@]}" --etcd-token-file "$WORK/wrongpw.token")
check_eq "a wrong password: exits 1" 1 "$rc"
check "... saying authentication as 'tether' failed" says "authentication as etcd user 'tether' failed" x-pw
check "... without the password in the log" sh -c "! grep -qF 'not-$PW-either' '$WORK/x-pw.log'"
show x-pw

rc=$(refused x-notoken "${TLS[@]}")
check_eq "no token file while etcd's auth is on: exits 1" 1 "$rc"
check "... saying --etcd-token-file is needed" says "etcd-token-file" x-notoken
show x-notoken

rc=$(refused x-loose "${TLS[@]}" --etcd-token-file "$WORK/loose.token")
check_eq "a token file others may read: exits 1" 1 "$rc"
check "... saying so (mode 0644)" sh -c "grep -q 'accessible by group or others (mode 0644)' '$WORK/x-loose.log'"
for f in nocolon nopw twolines; do
	rc=$(refused "x-$f" "${TLS[@]}" --etcd-token-file "$WORK/$f.token")
	check_eq "a token file of a bad format ($f): exits 1" 1 "$rc"
	check "... saying it must hold one line USER:PASSWORD" says "must hold one line USER:PASSWORD" "x-$f"
done
check "... and none of them shows the password" sh -c "! grep -qF -- '$PW' '$WORK'/x-*.log"

rc=$(refused x-stranger "${TLS[@]}" --etcd-token-file "$WORK/stranger.token")
check_eq "a user without rights on the prefix: exits 1" 1 "$rc"
check "... saying user 'stranger' is not permitted" says "etcd user 'stranger' is not permitted" x-stranger
show x-stranger

# ---- auth tokens expire (--auth-token-ttl 2) -------------------------------------------------------
kill -STOP "$A_PID"
sleep 5   # a's token expires unused (etcd checks every second)
kill -CONT "$A_PID"
on "$A_URL" put file/three '{"path":"three.txt","content":"3\n"}' >"$WORK/three.out"
check_eq "a, idle past the token's TTL, writes version 3" '{"version":3,"changed":true}' "$(cat "$WORK/three.out")"
check "... having authenticated again (its log says the token expired)" grep -q "auth token was refused.*authenticating again" "$A_LOG"
check "... and it reaches the node on b" wait_until 10 agent_at n1 3

# a watch reopened with an expired token: etcd counts a simple token's TTL
# per member, and b2 uses its token on member 1 only; member 1 killed, b2's
# watch reopens on member 2, where the token has expired: etcd cancels the
# watch (invalid auth token) and b2 must authenticate again
start_plane b2 --store etcd --etcd "https://127.0.0.1:${ETCD_CLIENT[1]},https://127.0.0.1:${ETCD_CLIENT[2]}" \
	--etcd-prefix "$PREFIX" --heartbeat 1 "${TLS[@]}" --etcd-token-file "$WORK/tether.token"
B2_URL=$PLANE_URL B2_LOG=$PLANE_LOG
check_eq "b2 (members 1 and 2) loads version 3" 3 "$(version_on "$B2_URL")"
sleep 4   # b2's token expires on members 2 and 3
kill -KILL "${ETCD_PID[1]}"
untrack_pid "${ETCD_PID[1]}"
# (killing the leader, a write may be told to try again meanwhile: 503)
put_four() { on "$A_URL" put file/four '{"path":"four.txt","content":"4\n"}' | grep -q '"version":4'; }
check "member 1 killed, a writes version 4 (on another member)" wait_until 30 put_four
check "b2's watch reopens on member 2 and gets version 4" wait_until 30 version_is "$B2_URL" 4
# whichever meets the expired token first signs in again: the watch
# (etcd cancels it) or the replica's lease keep-alive (persist/etcd/lease.c), which
# then hands the watch a fresh token
check "... b2 having authenticated again on member 2" grep -Eq \
	"etcd refused the auth token; authenticating again|auth token was refused.*authenticating again" "$B2_LOG"
if grep -q "cancelled the watch: .*invalid auth token" "$B2_LOG"; then
	diag "the watch met the expired token first: etcd cancelled it"
	check "... and the watch signed in again itself" grep -q \
		"etcd watch: etcd refused the auth token; authenticating again" "$B2_LOG"
else
	diag "the lease's keep-alive met the expired token first"
fi
on "$A_URL" put file/five '{"path":"five.txt","content":"5\n"}' >/dev/null
check "b2 goes on: version 5" wait_until 15 version_is "$B2_URL" 5
check "the node on b is at 5" wait_until 15 agent_at n1 5
etcd_secure_member_start 1 existing
check "member 1 comes back" wait_until 30 etcd_secure_healthy 1

# ---- a permission revoked while running ---------------------------------------------------------
etcdctl_secure "${ROOT[@]}" role revoke-permission tether-rw "$PREFIX" --prefix=true >>"$WORK/etcdctl.out" 2>&1
out=$(on "$A_URL" api PUT /v1/resources/file/six --data-binary '{"path":"six.txt","content":"6\n"}')
code=$(echo "$out" | tail -n 1)
check "with its permission revoked, a write on a fails (HTTP $code)" test "$code" -ge 500
check "... saying etcd user 'tether' is not permitted" grep -q "etcd user 'tether' is not permitted" <<<"$out"
diag "$(echo "$out" | head -n 1)"
check_eq "... and nothing was stored" 5 "$(version_on "$A_URL")"
etcdctl_secure "${ROOT[@]}" role grant-permission tether-rw readwrite "$PREFIX" --prefix=true >>"$WORK/etcdctl.out" 2>&1
check "granted again, writes resume (version 6)" wait_until 20 sh -c \
	"curl -fsS -X PUT -d '{\"path\":\"six.txt\",\"content\":\"6\\n\"}' '$A_URL/v1/resources/file/six' | grep -q '\"version\":6'"
check "... and reach the node on b" wait_until 20 agent_at n1 6

# ---- no secret anywhere ---------------------------------------------------------------------------
for u in "$A_URL" "$B_URL" "$B2_URL"; do curl -fsS "$u/metrics"; done >"$WORK/metrics.txt"
check "/metrics of the replicas has the etcd figures" grep -q '^tether_etcd_watch_opens_total' "$WORK/metrics.txt"
check "... and no password" sh -c "! grep -qF -- '$PW' '$WORK/metrics.txt'"
# not_in TEXT FILE...: no file holds TEXT
not_in() { local t=$1; shift; ! grep -lF -- "$t" "$@"; }
logs=$(ls "$WORK"/*.log | grep -v '/etcd-[0-9]*\.log$')
# shellcheck disable=SC2086
check "no password in any log of a plane or an agent" not_in "$PW" $logs
# shellcheck disable=SC2086
check "... nor an Authorization header" not_in "Authorization:" $logs
# shellcheck disable=SC2086
check "... nor the stranger's password, nor the wrong one" sh -c "! grep -qF -- '$STRANGER_PW' $(echo $logs) && ! grep -qF -- 'not-$PW-either' $(echo $logs)"

done_testing
