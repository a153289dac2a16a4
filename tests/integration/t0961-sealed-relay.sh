#!/usr/bin/env bash
# t0961-sealed-relay.sh: sealed secrets through a relay, with real keys and
# envelopes (tests/tools/sealtool). A node behind relay r1 registers its key
# there: r1 answers 202 and sends it up as a 'k' line, and the origin
# applies its rules (a key for a node that has one, not endorsed, is
# refused up there, and the origin keeps the old one); a node that
# registers before its first stream reached r1 gets a record at r1 and at
# the origin, behind r1; key_via names the relays a key came through; the old JSON record
# path (POST /v1/relay/nodes) cannot set a key; a relay answers DELETE with
# 403; a relay below a relay passes a 'k' line on. A sealed secret: r1
# answers GET /v1/wraps from its replicated stored bodies, the push body a
# node gets is byte for byte the origin's, and the state digest of r1's
# answer is the one the origin signed. A held NACK at r1 goes up as an 'h'
# line. Last, with etcd: a key registered at one replica is seen at the
# other, and a revocation too (skipped without etcd).
. "$(dirname "$0")/lib.sh"

SEALTOOL=$TOP_BUILDDIR/tests/tools/sealtool
[ -x "$SEALTOOL" ] || bail "no $SEALTOOL: build it first (make check builds it)"

# key_post URL NODE FILE: POST FILE as NODE's registration; prints the status
key_post() {
	curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST --data-binary "@$3" "$1/v1/nodes/$2/key"
}
reg() {
	"$SEALTOOL" reg "$@" >"$WORK/reg.json"
}
poll_on() {
	curl -sS "$1/v1/config?node=$2&version=0&sub=${3:-}"
}
field_on() {
	curl -sS "$1/v1/nodes/$2" | jq -r "$3"
}
field_is() {
	[ "$(field_on "$1" "$2" "$3")" = "$4" ]
}
refusals() {
	grep -c 'key registration refused' "$WORK/origin.log"
}

"$CTL_BIN" keygen "$WORK/sign" >/dev/null || bail "keygen failed"
RKID=$("$SEALTOOL" recovery "$WORK/rec") || bail "sealtool recovery"
K1=$("$SEALTOOL" key "$WORK/n1.key")
K1B=$("$SEALTOOL" key "$WORK/n1b.key")
K1C=$("$SEALTOOL" key "$WORK/n1c.key")
KG=$("$SEALTOOL" key "$WORK/ghost.key")
printf '{"cert":"-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n","key":"-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----\\n"}' >"$WORK/plain"

start_plane origin --heartbeat 1 --signing-key "$WORK/sign" --sealed-secrets "$WORK/rec.pub"
ORIGIN=$PLANE_URL
start_plane r1 --upstream "$ORIGIN" --relay-id r1 --heartbeat 1
R1=$PLANE_URL
check "r1 follows the origin" wait_until 10 grep -q "relay r1: following" "$WORK/origin.log"

poll_on "$R1" n1 secret/ >/dev/null
check "the origin lists n1 behind r1" wait_until 10 field_is "$ORIGIN" n1 '.via | join(",")' r1

# ---- a key through the relay: the 'k' line -----------------------------------------------------

reg n1 "$WORK/n1.key" 1000
check_eq "r1 takes the registration: 202" 202 "$(key_post "$R1" n1 "$WORK/reg.json")"
check_eq "... forwarded" forwarded "$(jq -r .status "$WORK/answer")"
check "the origin registers it from r1's 'k' line" wait_until 10 field_is "$ORIGIN" n1 .key_id "$K1"
check "... and says so" grep -q "node n1: key $K1 registered through relay r1" "$WORK/origin.log"
check_eq "... its key_via: r1" r1 "$(field_on "$ORIGIN" n1 .key_via)"
check_eq "... in GET /v1/secrets too" r1 "$(curl -sS "$ORIGIN/v1/secrets" | jq -r '.nodes[] | select(.node == "n1") | .key_via')"
echo 'junk' >"$WORK/junk"
check_eq "r1 refuses a registration that does not parse (400)" 400 "$(key_post "$R1" n1 "$WORK/junk")"
reg ghost "$WORK/ghost.key" 1000
check_eq "a node r1 has not seen yet registers (202)" 202 "$(key_post "$R1" ghost "$WORK/reg.json")"
check "the origin, which has not seen it either, registers it behind r1" \
	wait_until 10 field_is "$ORIGIN" ghost '"\(.key_id) \(.key_via) \(.via | join(","))"' "$KG r1 r1"
check_eq "... an admin revokes it at the origin (out of the way of the writes below)" 200 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$ORIGIN/v1/nodes/ghost/key")"

before=$(refusals)
reg n1 "$WORK/n1b.key" 2000
check_eq "another key, not endorsed: r1 passes it on (202)" 202 "$(key_post "$R1" n1 "$WORK/reg.json")"
check "... the origin refuses r1's 'k' line" wait_until 10 sh -c "[ \$(grep -c 'key registration refused' '$WORK/origin.log') -gt $before ]"
check "... saying why" grep -q "node n1: key registration refused: node n1 already has key $K1; a new key must be endorsed" "$WORK/origin.log"
check "... a refusal of the key alone: r1 is not told to send n1's record again" \
	sh -c "! grep -q 'the upstream refused' '$WORK/r1.log'"
check_eq "... and keeps n1's key" "$K1" "$(field_on "$ORIGIN" n1 .key_id)"
reg n1 "$WORK/n1b.key" 2000 "$WORK/n1.key"
key_post "$R1" n1 "$WORK/reg.json" >/dev/null
check "an endorsed rotation through r1 is taken" wait_until 10 field_is "$ORIGIN" n1 .key_id "$K1B"

# the old JSON record path cannot set or change a key
rec=$(jq -cn --arg k "$(jq -r .key "$WORK/reg.json")" \
	'{relay:"r1",nodes:[{id:"n1",labels:"{}",transport:"poll",key:$k,key_id:"00000000000000aa",key_at:"99999",revoked:"'"$K1B"'"}]}')
check_eq "POST /v1/relay/nodes with key fields: 200" 200 \
	"$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST --data-binary "$rec" "$ORIGIN/v1/relay/nodes")"
check_eq "... the key and the revoked list untouched" "$K1B 0" "$(field_on "$ORIGIN" n1 '"\(.key_id) \(.key_revoked | length)"')"

check_eq "DELETE at a relay: 403" 403 "$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X DELETE "$R1/v1/nodes/n1/key")"
check "... saying to revoke at the origin" grep -q "a relay never revokes a key" "$WORK/answer"
check_eq "the key is still n1's" "$K1B" "$(field_on "$ORIGIN" n1 .key_id)"

# a relay below a relay: r1 passes r2's 'k' line on, the origin judges it
start_plane r2 --upstream "$R1" --relay-id r2 --heartbeat 1
R2=$PLANE_URL
check "r2 follows r1" wait_until 10 grep -q "relay r2: following" "$WORK/r1.log"
poll_on "$R2" n5 secret/ >/dev/null
check "the origin lists n5 behind r1, r2" wait_until 10 field_is "$ORIGIN" n5 '.via | join(",")' r1,r2
reg n5 "$WORK/n1c.key" 100
check_eq "n5 registers at r2 (202)" 202 "$(key_post "$R2" n5 "$WORK/reg.json")"
check "the origin registers it through r1 and r2" wait_until 10 field_is "$ORIGIN" n5 .key_id "$K1C"
check_eq "... its key_via: r1,r2" r1,r2 "$(field_on "$ORIGIN" n5 .key_via)"

# ---- a sealed secret through the relay -------------------------------------------------------------

# sealed to n1 and n5 (both reached by secret/)
"$SEALTOOL" seal secret/tls "$WORK/rec.pub" "$WORK/n1b.key" "$WORK/n1c.key" <"$WORK/plain" >"$WORK/a.json"
ID=$(jq -r .sealed.id "$WORK/a.json")
V=$(curl -sS -X PUT --data-binary "@$WORK/a.json" "$ORIGIN/v1/resources/secret/tls" | jq -r .version)
check "the origin takes the sealed secret" test "$V" -ge 1
check "r1 reaches version $V" wait_until 10 sh -c "[ \"\$(curl -sS '$R1/healthz' | jq -r .version)\" = $V ]"
w_origin=$(curl -sS "$ORIGIN/v1/wraps?kid=$K1B&names=secret/tls")
w_r1=$(curl -sS "$R1/v1/wraps?kid=$K1B&names=secret/tls")
check_eq "r1 answers /v1/wraps from its stored bodies" "$ID" "$(echo "$w_r1" | jq -r '.wraps["secret/tls"].id')"
check_eq "... the origin's answer" "$w_origin" "$w_r1"
check_eq "r1 keeps the stored body (wraps) as the origin does" \
	"$(curl -sS "$ORIGIN/v1/resources/secret/tls" | jq -c .body)" "$(curl -sS "$R1/v1/resources/secret/tls" | jq -c .body)"
poll_on "$ORIGIN" n9 secret/ >"$WORK/poll-origin.json"
# r1 fetches the origin's statement of a version once asked: poll until it has it
signed_poll() {
	poll_on "$R1" n1 secret/ >"$WORK/poll-r1.json" && jq -e '.statement | length > 0' "$WORK/poll-r1.json"
}
check "r1's poll answer carries the origin's statement" wait_until 10 signed_poll
b_origin=$(jq -c '.upserts[] | select(.name == "secret/tls") | .body' "$WORK/poll-origin.json")
b_r1=$(jq -c '.upserts[] | select(.name == "secret/tls") | .body' "$WORK/poll-r1.json")
check_eq "the push body is only the envelope" '["sealed"]' "$(echo "$b_r1" | jq -c keys)"
check_eq "... and the same at the origin and at r1" "$b_origin" "$b_r1"
read -r mine signed < <("$SEALTOOL" digest <"$WORK/poll-r1.json")
check_eq "the digest of r1's answer is the one the origin signed" "$signed" "$mine"
check_eq "... a wrap from r1 opens it with n1's key" "$(cat "$WORK/plain")" \
	"$(echo "$b_r1" | "$SEALTOOL" open secret/tls "$WORK/n1b.key" "$(echo "$w_r1" | jq -r '.wraps["secret/tls"].wrap')")"

# ---- a held NACK through the relay: the 'h' line ---------------------------------------------------

nonce=$(jq -r .nonce "$WORK/poll-r1.json")
out=$(curl -sS -X POST --data-binary "{\"node\":\"n1\",\"version\":$V,\"nonce\":\"$nonce\",\"status\":\"nack\",\"held\":true,\"error\":\"secret/tls: no wrap for this node's key $K1C\"}" "$R1/v1/ack")
check_eq "r1 takes a held NACK" accepted "$(echo "$out" | jq -r .result)"
check "the origin hears it: n1 held at version $V" wait_until 10 field_is "$ORIGIN" n1 .held.version "$V"
check_eq "... with its reason, not as a NACK" "secret/tls: no wrap for this node's key $K1C null" \
	"$(field_on "$ORIGIN" n1 '"\(.held.reason) \(.last_nack)"')"
PLANE_URL=$ORIGIN
check_eq "... counted as held at the origin" 1 "$(metric 'tether_held_total{node="n1"}')"

# ---- --approve-relay-keys: a relay's first key for a node waits for an admin ---------------------

start_plane o2 --heartbeat 1 --sealed-secrets "$WORK/rec.pub" --approve-relay-keys
O2=$PLANE_URL
start_plane r3 --upstream "$O2" --relay-id r3 --heartbeat 1
R3=$PLANE_URL
check "r3 follows o2" wait_until 10 grep -q "relay r3: following" "$WORK/o2.log"
poll_on "$R3" p1 secret/ >/dev/null
check "o2 lists p1 behind r3" wait_until 10 field_is "$O2" p1 '.via | join(",")' r3
reg p1 "$WORK/n1.key" 5000
check_eq "p1 registers at r3 (202)" 202 "$(key_post "$R3" p1 "$WORK/reg.json")"
check "o2 keeps it pending: key_pending, no key_id" wait_until 10 field_is "$O2" p1 '"\(.key_pending) \(.key_id)"' "$K1 null"
s=$(curl -sS "$O2/v1/secrets")
check_eq "/v1/secrets lists it as pending, not among the nodes to seal to" "p1:$K1:r3 0" \
	"$(echo "$s" | jq -r '"\(.pending | map("\(.node):\(.key_pending):\(.key_via)") | join(" ")) \(.nodes | length)"')"
"$SEALTOOL" seal secret/p "$WORK/rec.pub" <"$WORK/plain" >"$WORK/p.json"
check_eq "a secret without p1's wrap is taken (p1 is no target yet)" 200 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -X PUT --data-binary "@$WORK/p.json" "$O2/v1/resources/secret/p")"
approve() { # approve NODE KID: prints the status
	curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST --data "{\"key_id\":\"$2\"}" "$O2/v1/nodes/$1/key/approve"
}
check_eq "approving another key id: 409" 409 "$(approve p1 "$K1B")"
check "... naming the pending one" grep -q "the key waiting for approval is $K1, not $K1B" "$WORK/answer"
check_eq "approving at a relay: 403" 403 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -X POST --data "{\"key_id\":\"$K1\"}" "$R3/v1/nodes/p1/key/approve")"
check_eq "a bad key_id: 400" 400 "$(approve p1 xyz)"
check_eq "an admin approves it: 200 approved" "200 approved" "$(approve p1 "$K1") $(jq -r .status "$WORK/answer")"
check_eq "... now live" "$K1 null" "$(field_on "$O2" p1 '"\(.key_id) \(.key_pending)"')"
"$SEALTOOL" seal secret/p "$WORK/rec.pub" <"$WORK/plain" >"$WORK/p2.json"
check_eq "... and a write without its wrap is refused" 422 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -X PUT --data-binary "@$WORK/p2.json" "$O2/v1/resources/secret/p")"
check_eq "nothing waits now: 409" 409 "$(approve p1 "$K1")"
reg p1 "$WORK/n1b.key" 6000 "$WORK/n1.key"
key_post "$R3" p1 "$WORK/reg.json" >/dev/null
check "an endorsed rotation through r3 needs no approval" wait_until 10 field_is "$O2" p1 .key_id "$K1B"
curl -sS -o /dev/null -X DELETE "$O2/v1/nodes/p1/key"
reg p1 "$WORK/n1c.key" 7000
key_post "$R3" p1 "$WORK/reg.json" >/dev/null
check "after a revoke, the next key through r3 waits again" wait_until 10 field_is "$O2" p1 .key_pending "$K1C"
stop_pid "$PLANE_PID"

# ---- replicas (etcd): a key registered at one is seen at the other ----------------------------------

. "$(dirname "$0")/lib-etcd.sh"
if [ -x "${ETCD_BIN:-}" ]; then
	etcd_cluster_start 1
	E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "/t0961-$$/" --heartbeat 1)
	start_plane a "${E[@]}"
	A=$PLANE_URL
	start_plane b "${E[@]}"
	B=$PLANE_URL
	poll_on "$A" e1 secret/ >/dev/null
	check "b learns of e1" wait_until 10 field_is "$B" e1 .node e1
	reg e1 "$WORK/n1c.key" 100
	check_eq "e1 registers its key at a" 200 "$(key_post "$A" e1 "$WORK/reg.json")"
	check "b sees e1's key" wait_until 10 field_is "$B" e1 .key_id "$K1C"
	reg e1 "$WORK/n1.key" 200
	check_eq "b refuses another key for e1 (not endorsed): 409" 409 "$(key_post "$B" e1 "$WORK/reg.json")"
	check_eq "a revocation at b" 200 "$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$B/v1/nodes/e1/key")"
	check "... reaches a" wait_until 10 field_is "$A" e1 '.key_revoked | join(",")' "$K1C"
	reg e1 "$WORK/n1c.key" 300
	check_eq "... where the revoked key is refused (403)" 403 "$(key_post "$A" e1 "$WORK/reg.json")"
	reg e1 "$WORK/ghost.key" 100
	check_eq "b holds a's high-water mark: a first key after the revocation, no newer than a's, is refused (409)" \
		409 "$(key_post "$B" e1 "$WORK/reg.json")"
	check "... saying why" grep -q "at: 100 is not after the newest registration taken for this node (100)" "$WORK/answer"
else
	ok "# SKIP replicas: etcd is not installed (Debian's etcd-server)"
fi

done_testing
