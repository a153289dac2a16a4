#!/usr/bin/env bash
# t0963-sealed-relay.sh: sealed secrets behind a relay, with --trust. An
# origin with --sealed-secrets and a signing key, a relay r1, and a node
# behind it (files consumer, --trust): the node's key registration goes
# through the relay (202, forwarded) and the origin holds the key; a
# secret sealed to it reaches the node through the relay, whose
# GET /v1/wraps gives the node its wrap: the statement's digest over the
# sealed body verifies, the node opens it and ACKs. The relay's copy of
# the push is the sealed body alone (no wraps, no plaintext). A secret
# sealed without the node's key (its key revoked at the origin) holds the
# node, and the origin hears of it through the relay; the version sealed
# to the node's rotated key applies, and node.key.old goes once the relay
# served a wrap for the new key (its 202 says nothing of the origin). A
# rotation the origin took but that no wrap confirmed yet, then
# --rotate-key again: a new key anyway, endorsed by the unconfirmed one,
# which the origin takes; the version sealed to it applies. last-good and
# wraps.json keep no plaintext, and a boot with both planes down opens
# last-good.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
SEALTOOL=$TOP_BUILDDIR/tests/tools/sealtool
[ -x "$SEALTOOL" ] || bail "no $SEALTOOL: build first (make check builds it)"
need_cmd node

# sealed TEXT [NODEKEY...]: the stored body of a secret/tls whose key is
# TEXT, sealed to the recovery key and wrapped for each node key file
sealed() {
	local text=$1
	shift
	jq -cn --arg k "$text" '{cert:"-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n",
		key:("-----BEGIN PRIVATE KEY-----\n" + $k + "\n-----END PRIVATE KEY-----\n")}' |
		"$SEALTOOL" seal secret/tls "$WORK/recovery.pub" "$@"
}
put_secret() {
	curl -sS -X PUT --data-binary "@$1" "$ORIGIN/v1/resources/secret/tls" | jq -r .version
}
# next_second: waits for the clock's next second (a registration's "at" is
# in seconds and must be after the last one the origin took)
next_second() {
	local t
	t=$(date +%s)
	wait_until 3 sh -c "[ \$(date +%s) -gt $t ]"
}
origin_node() {
	curl -sS "$ORIGIN/v1/nodes/n1" | jq -r "$1"
}

"$CTL_BIN" keygen "$WORK/sign" >/dev/null || bail "keygen failed"
"$SEALTOOL" recovery "$WORK/recovery" >/dev/null || bail "sealtool cannot make a recovery key"
start_plane origin --heartbeat 1 --signing-key "$WORK/sign" --sealed-secrets "$WORK/recovery.pub"
ORIGIN=$PLANE_URL
ORIGIN_PID=$PLANE_PID
start_plane r1 --upstream "$ORIGIN" --relay-id r1 --heartbeat 1
R1=$PLANE_URL
R1_PID=$PLANE_PID
PLANE_URL=$ORIGIN
STATE=$WORK/n1.state
V0=$(curl -sS -X PUT --data-binary '{"path":"a.txt","content":"one\n"}' "$ORIGIN/v1/resources/file/a" | jq -r .version)

start_agent n1 --plane "$R1" --trust "$WORK/sign.pub" --backoff-min 0.1 --backoff-max 1
check "the node applies version $V0 through the relay" wait_until 20 agent_at n1 "$V0"
KID1=$("$SEALTOOL" key "$STATE/node.key")
check "the relay forwards the node's key registration (202)" \
	wait_until 10 grep -qF "key: node key $KID1 forwarded by $R1 to its upstream" "$WORK/n1.log"
check "the origin holds the node's key" wait_until 10 sh -c "[ \"\$(curl -sS '$ORIGIN/v1/nodes/n1' | jq -r .key_id)\" = '$KID1' ]"

# ---- a secret sealed to the node, through the relay ------------------------------------------
sealed MIIEfirstsecretkeytext "$STATE/node.key" >"$WORK/s1.json" || bail "sealtool cannot seal"
ID1=$(jq -r .sealed.id "$WORK/s1.json")
V1=$(put_secret "$WORK/s1.json")
check "the origin takes the sealed secret ($V1)" test "$V1" -gt "$V0"
check "the node verifies, opens and applies it through the relay" wait_until 20 agent_at n1 "$V1"
check "its ACK reaches the origin" wait_until 10 sh -c "curl -sS '$ORIGIN/v1/nodes/n1' | jq -e '.acked_version == $V1' >/dev/null"
check_eq "the node's status is synced and trusted" "synced $V1" "$(st n1 state) $(st n1 trust.verified_version)"
check_eq "the relay's push holds the sealed body alone" '["sealed"]' \
	"$(curl -sS "$R1/v1/config?node=probe&version=0" | jq -c '[.upserts[] | select(.name == "secret/tls") | .body | keys[]]')"
check_eq "the relay gives the node's wrap (GET /v1/wraps)" "$ID1" \
	"$(curl -sS "$R1/v1/wraps?kid=$KID1&names=secret/tls" | jq -r '.wraps["secret/tls"].id')"
check_eq "wraps.json holds it" "$ID1" "$(jq -r '.wraps["secret/tls"].id' "$STATE/wraps.json")"

# ---- held through the relay, then a rotated key -------------------------------------------------
check_eq "the origin revokes the node's key" 200 "$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$ORIGIN/v1/nodes/n1/key")"
sealed MIIEsecondsecretkeytext >"$WORK/s2.json"
V2=$(put_secret "$WORK/s2.json")
check "the node is held at $V2, and the origin hears of it through the relay" \
	wait_until 20 sh -c "[ \"\$(curl -sS '$ORIGIN/v1/nodes/n1' | jq -r .held.version)\" = '$V2' ]"
check "the held reason names the secret" sh -c "curl -sS '$ORIGIN/v1/nodes/n1' | jq -r .held.reason | grep -qF 'secret/tls: no wrap for this node'"
check "the node still runs $V1" agent_at n1 "$V1"
stop_pid "${APID[n1]}" TERM
next_second
start_agent n1 --plane "$R1" --trust "$WORK/sign.pub" --backoff-min 0.1 --backoff-max 1 --rotate-key
KID2=""
check "the restarted node makes a new key" wait_until 10 grep -q "rotate-key: node key [0-9a-f]* made to replace $KID1" "$WORK/n1.log"
KID2=$("$SEALTOOL" key "$STATE/node.key")
check "the origin takes the new key through the relay" \
	wait_until 10 sh -c "[ \"\$(curl -sS '$ORIGIN/v1/nodes/n1' | jq -r .key_id)\" = '$KID2' ]"
check "node.key.old stays: a relay's 202 is not the plane's 200" test -f "$STATE/node.key.old"
sealed MIIEthirdsecretkeytext "$STATE/node.key" >"$WORK/s3.json"
V3=$(put_secret "$WORK/s3.json")
check "the version sealed to the new key applies ($V3)" wait_until 20 agent_at n1 "$V3"
check "the ACK of $V3 clears the hold at the origin" \
	wait_until 10 sh -c "curl -sS '$ORIGIN/v1/nodes/n1' | jq -e '.held == null and .acked_version == $V3' >/dev/null"
check "node.key.old goes once the relay served a wrap for the new key" wait_until 10 test ! -e "$STATE/node.key.old"
check "the log says the rotation is done" grep -qF "key: the rotation from $KID1 to $KID2 is done" "$WORK/n1.log"
ID3=$(jq -r .sealed.id "$WORK/s3.json")

# ---- --rotate-key twice behind the relay, the first unconfirmed ----------------------------------
stop_pid "${APID[n1]}" TERM
next_second
start_agent n1 --plane "$R1" --trust "$WORK/sign.pub" --backoff-min 0.1 --backoff-max 1 --rotate-key
check "a new key replaces $KID2" wait_until 10 grep -q "rotate-key: node key [0-9a-f]* made to replace $KID2" "$WORK/n1.log"
KID3=$("$SEALTOOL" key "$STATE/node.key")
check "the origin takes $KID3 through the relay" \
	wait_until 10 sh -c "[ \"\$(curl -sS '$ORIGIN/v1/nodes/n1' | jq -r .key_id)\" = '$KID3' ]"
check "node.key.old stays: no wrap for $KID3 yet, and last-good's are for $KID2" test -f "$STATE/node.key.old"
stop_pid "${APID[n1]}" TERM
next_second
start_agent n1 --plane "$R1" --trust "$WORK/sign.pub" --backoff-min 0.1 --backoff-max 1 --rotate-key
check "--rotate-key again makes a new key anyway, saying the rotation was unconfirmed" \
	wait_until 10 grep -qF "rotate-key: the rotation from $KID2 to $KID3 was not confirmed by the plane" "$WORK/n1.log"
check "$KID2, which last-good's wrap is for, stays in node.key.older" test -f "$STATE/node.key.older"
check "and last-good ($V3) still opened at that start" sh -c "! grep -q 'cannot be rendered here' '$WORK/n1.log'"
KID4=$("$SEALTOOL" key "$STATE/node.key")
check "a fourth key ($KID4)" test -n "$KID4" -a "$KID4" != "$KID3" -a "$KID4" != "$KID2"
check "the origin takes $KID4 (endorsed by $KID3)" \
	wait_until 10 sh -c "[ \"\$(curl -sS '$ORIGIN/v1/nodes/n1' | jq -r .key_id)\" = '$KID4' ]"
sealed MIIEfourthsecretkeytext "$STATE/node.key" >"$WORK/s4.json"
V4=$(put_secret "$WORK/s4.json")
check "the version sealed to $KID4 applies ($V4)" wait_until 20 agent_at n1 "$V4"
check "node.key.old and node.key.older go" wait_until 10 sh -c "test ! -e '$STATE/node.key.old' && test ! -e '$STATE/node.key.older'"
V3=$V4

# ---- no plaintext on disk; a boot with both planes down ------------------------------------------
inflated "$STATE"/lastgood-* >"$WORK/lastgood.txt"
check "last-good holds the sealed body of $V4" grep -qF "$(jq -r .sealed.id "$WORK/s4.json")" "$WORK/lastgood.txt"
leaks=$(grep -rlF -e MIIEfirstsecret -e MIIEsecondsecret -e MIIEthirdsecret -e MIIEfourthsecret "$STATE" "$WORK/lastgood.txt" \
	"$WORK/n1.log" "$WORK/n1.out" "$WORK/origin.log" "$WORK/r1.log" 2>/dev/null | xargs)
check_eq "no key text in the node's state (last-good inflated), output, logs or the planes' logs" "" "$leaks"
stop_pid "${APID[n1]}" TERM
stop_pid "$R1_PID" TERM
stop_pid "$ORIGIN_PID" TERM
start_agent n1 --plane "$R1" --trust "$WORK/sign.pub" --backoff-min 0.1 --backoff-max 1
check "the node boots on last-good with both planes down" \
	wait_until 10 sh -c "[ \"\$(jq -r '.state + \" \" + (.version|tostring)' '$STATE/status.json')\" = 'offline $V3' ]"
check "no sealed secret failed to open at boot" sh -c "! grep -q 'cannot be rendered here' '$WORK/n1.log'"
stop_pid "${APID[n1]}" TERM
check_eq "SIGTERM: the agent exits 0" 0 "$?"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
