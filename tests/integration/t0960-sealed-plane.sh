#!/usr/bin/env bash
# t0960-sealed-plane.sh: sealed secrets on one plane (SQLite), with real
# keys, registrations and envelopes (tests/tools/sealtool, common/'s code).
# A node's key: the registration rules 1 to 5 (malformed, another node's,
# at too far ahead, first use -- also of a node with no record yet --, the
# same key, another key refused unless the stored one endorsed it and it
# is newer), an admin's revocation, the revoked key refused, a new key
# taken only with a registration newer than every one taken before (the
# high-water mark, across the revocation and a restart); /v1/nodes shows
# key_id, key_via and key_revoked, and the key outlives a restart. --sealed-secrets: plaintext refused (PUT and
# batch: one path), a malformed envelope, another recovery key, a wrap
# missing for a node the secret reaches (named), a replayed envelope; what
# nodes get is the push body (no wraps) while GET /v1/resources keeps the
# stored one; GET /v1/wraps, GET /v1/secrets, and who may call each (a
# node its own key, an admin revokes). Then a held NACK on a staged
# plane: not a NACK, the rollout stays in progress and shows it held, and
# an ACK of the version ends the hold. A revert (POST /v1/revert) that
# brings an older envelope back is no replay; a plain write of a replaced
# one stays refused.
. "$(dirname "$0")/lib.sh"

SEALTOOL=$TOP_BUILDDIR/tests/tools/sealtool
[ -x "$SEALTOOL" ] || bail "no $SEALTOOL: build it first (make check builds it)"

# key_post NODE FILE: POST FILE as NODE's registration; prints "STATUS BODY"
key_post() {
	curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST --data-binary "@$2" "$PLANE_URL/v1/nodes/$1/key"
	echo " $(cat "$WORK/answer")"
}
# reg NODE KEY [AT [PREV]]: a registration into $WORK/reg.json
reg() {
	"$SEALTOOL" reg "$@" >"$WORK/reg.json"
}
# poll NODE SUB: a poll answer (the node is recorded with its subscription)
poll() {
	curl -sS "$PLANE_URL/v1/config?node=$1&version=0&sub=$2"
}
# seal NAME RECOVERY.pub [KEY...]: a stored body of the plaintext in $WORK/plain
seal() {
	"$SEALTOOL" seal "$@" <"$WORK/plain"
}
# put_status NAME FILE: PUT a resource; prints "STATUS ERROR-or-version"
put_status() {
	local code
	code=$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X PUT --data-binary "@$2" "$PLANE_URL/v1/resources/$1")
	echo "$code $(jq -r '.error // .version' "$WORK/answer")"
}
key_id_of() {
	node_field "$1" '.key_id'
}
# key_delete NODE: DELETE its key; prints "STATUS BODY"
key_delete() {
	curl -sS -o "$WORK/answer" -w '%{http_code}' -X DELETE "$PLANE_URL/v1/nodes/$1/key"
	echo " $(cat "$WORK/answer")"
}
# starts STRING PREFIX
starts() {
	case $1 in "$2"*) return 0 ;; esac
	return 1
}
# key_events: the "key" events seen, as "node what" words
key_events() {
	grep -A2 '^event: key' "$WORK/events.sse" | grep '^data: ' | sed 's/^data: //' | jq -r '"\(.node) \(.what)"' | xargs
}

RKID=$("$SEALTOOL" recovery "$WORK/rec") || bail "sealtool recovery"
"$SEALTOOL" recovery "$WORK/other" >/dev/null || bail "sealtool recovery"
K1=$("$SEALTOOL" key "$WORK/n1.key")
K1B=$("$SEALTOOL" key "$WORK/n1b.key")
K3=$("$SEALTOOL" key "$WORK/n1c.key")
K2=$("$SEALTOOL" key "$WORK/n2.key")
K4=$("$SEALTOOL" key "$WORK/n4.key")
KG=$("$SEALTOOL" key "$WORK/ghost.key")
pem_pair tls   # a real pair: the plane parses a plaintext secret before it refuses it as plaintext
printf '{"cert":"%s","key":"%s"}' "$PAIR_CERT" "$PAIR_KEY" >"$WORK/plain"

start_plane origin --sealed-secrets "$WORK/rec.pub"
check "the plane says secrets are kept sealed, naming the recovery key" \
	grep -q "secrets are kept sealed (recovery key $RKID)" "$PLANE_LOG"
curl -sSN "$PLANE_URL/v1/events" >"$WORK/events.sse" 2>/dev/null &
EVENTS_PID=$!
track_pid $EVENTS_PID
# subscribed: the plane's first bytes (retry and a comment) come at once
wait_until 10 test -s "$WORK/events.sse" || bail "no event stream from the plane"
poll n1 secret/ >/dev/null
poll n2 cluster/ >/dev/null

# ---- a node's key: rules 1 to 5 --------------------------------------------------------------------

echo 'not json' >"$WORK/junk"
check_eq "a registration that does not parse: 400" 400 "$(key_post n1 "$WORK/junk" | cut -d' ' -f1)"
reg n2 "$WORK/n2.key"
out=$(key_post n1 "$WORK/reg.json")
check_eq "another node's registration: 400" 400 "${out%% *}"
check "... naming the field" grep -q 'node: names another node' "$WORK/answer"
reg n1 "$WORK/n1.key" $(($(date +%s) + 700))
out=$(key_post n1 "$WORK/reg.json")
check_eq "at more than 600 s ahead: 400" 400 "${out%% *}"
check_eq "... saying what to check" "node n1: key registration: at: more than 600 s ahead of the plane's clock: check the node's clock" \
	"$(jq -r .error "$WORK/answer")"
reg ghost "$WORK/ghost.key"
check_eq "a node with no record yet (it registers before its first stream): registered" "200 registered" \
	"$(key_post ghost "$WORK/reg.json" | { read -r c b; echo "$c $(echo "$b" | jq -r .status)"; })"
check_eq "... its record made, its key direct (key_via \"\")" "$KG " "$(node_field ghost '"\(.key_id) \(.key_via)"')"
check_eq "... an admin revokes it (out of the way of the writes below)" 200 "$(api_status DELETE /v1/nodes/ghost/key)"
reg n1 "$WORK/n1.key" 1000
check_eq "first use: registered" "200 registered $K1" \
	"$(key_post n1 "$WORK/reg.json" | sed 's/^\([0-9]*\) /\1 /' | { read -r c b; echo "$c $(echo "$b" | jq -r '"\(.status) \(.key_id)"')"; })"
check_eq "/v1/nodes shows its key id, nothing revoked" "$K1 0" "$(node_field n1 '"\(.key_id) \(.key_revoked | length)"')"
reg n1 "$WORK/n1.key" 1001
check_eq "the same key again: unchanged" "200 unchanged" \
	"$(key_post n1 "$WORK/reg.json" | { read -r c b; echo "$c $(echo "$b" | jq -r .status)"; })"
reg n1 "$WORK/n1b.key" 2000
out=$(key_post n1 "$WORK/reg.json")
check_eq "another key, not endorsed: 409" 409 "${out%% *}"
check_eq "... saying what to do" "node n1 already has key $K1; a new key must be endorsed by it (tetherd --rotate-key does), or an admin revokes it first: tetherctl secrets revoke n1" \
	"$(jq -r .error "$WORK/answer")"
check_eq "... and no mark (registering again cannot help)" null "$(jq -r .key_at "$WORK/answer")"
reg n1 "$WORK/n1b.key" 2000 "$WORK/n2.key"
check_eq "another key endorsed by another key: 409" 409 "$(key_post n1 "$WORK/reg.json" | cut -d' ' -f1)"
reg n1 "$WORK/n1b.key" 1000 "$WORK/n1.key"
check_eq "endorsed, but not newer than the stored key: 409" 409 "$(key_post n1 "$WORK/reg.json" | cut -d' ' -f1)"
reg n1 "$WORK/n1b.key" 2000 "$WORK/n1.key"
check_eq "endorsed by the stored key and newer: rotated" "200 rotated" \
	"$(key_post n1 "$WORK/reg.json" | { read -r c b; echo "$c $(echo "$b" | jq -r .status)"; })"
check_eq "/v1/nodes shows the new key" "$K1B" "$(key_id_of n1)"
reg n1 "$WORK/n1.key" 3000
check_eq "the old key cannot come back" 409 "$(key_post n1 "$WORK/reg.json" | cut -d' ' -f1)"

check_eq "DELETE on a node without a key: 404" 404 "$(api_status DELETE /v1/nodes/n2/key)"
check_eq "an admin revokes n1's key" "200 revoked $K1B" \
	"$(key_delete n1 | { read -r c b; echo "$c $(echo "$b" | jq -r '"\(.status) \(.key_id)"')"; })"
check_eq "/v1/nodes: no live key, the revoked one listed" "null $K1B" "$(node_field n1 '"\(.key_id) \(.key_revoked | join(","))"')"
reg n1 "$WORK/n1b.key" 4000
out=$(key_post n1 "$WORK/reg.json")
check_eq "the revoked key registered again: 403" 403 "${out%% *}"
check_eq "... saying to make a new one" "node n1: key $K1B was revoked; make a new one: tetherd --rotate-key" \
	"$(jq -r .error "$WORK/answer")"
reg n1 "$WORK/n1c.key" 2000
out=$(key_post n1 "$WORK/reg.json")
check_eq "a new key after the revocation, no newer than a registration taken before: 409" 409 "${out%% *}"
check_eq "... saying why" "node n1: key registration: at: 2000 is not after the newest registration taken for this node (2000): an old registration is never taken again; the node makes a new one (tetherd does once its clock is past it)" \
	"$(jq -r .error "$WORK/answer")"
check_eq "... and giving the mark its next registration must pass (key_at)" 2000 "$(jq -r .key_at "$WORK/answer")"
reg n1 "$WORK/n1c.key" 2001
check_eq "a new key after the revocation, newer: registered" "200 registered" \
	"$(key_post n1 "$WORK/reg.json" | { read -r c b; echo "$c $(echo "$b" | jq -r .status)"; })"
reg n2 "$WORK/n2.key"
key_post n2 "$WORK/reg.json" >/dev/null
check_eq "n2 has its key" "$K2" "$(key_id_of n2)"

want="ghost registered ghost revoked n1 registered n1 rotated n1 revoked n1 registered n2 registered"
wait_until 10 sh -c "[ \"\$(grep -c '^event: key' '$WORK/events.sse')\" -ge 7 ]"
check_eq "event key for each registration, rotation and revocation" "$want" "$(key_events)"
stop_pid $EVENTS_PID

# a relay cannot claim a node by its record: POST /v1/relay/nodes needs the
# relay's own stream here, as a changes batch does
code=$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST \
	--data '{"relay":"rX","nodes":[{"id":"n1","labels":{},"transport":"sse","streaming":true}]}' "$PLANE_URL/v1/relay/nodes")
check_eq "POST /v1/relay/nodes naming a relay that holds no stream here: 403" 403 "$code"
check_eq "... n1 is not moved behind it" 0 "$(node_field n1 '.via | length')"

# ---- writes with --sealed-secrets ------------------------------------------------------------------

check_eq "a plaintext secret is refused (422)" \
	"422 secret/tls: plaintext refused: this plane keeps secrets sealed (--sealed-secrets); write it with tetherctl put secret/tls --seal" \
	"$(put_status secret/tls "$WORK/plain")"
jq -cn --slurpfile b "$WORK/plain" '{upserts:[{name:"secret/tls",body:$b[0]}]}' >"$WORK/batch.json"
code=$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST --data-binary "@$WORK/batch.json" "$PLANE_URL/v1/batch")
check_eq "... in a batch too (one path)" "422 plaintext refused" "$code $(jq -r .error "$WORK/answer" | grep -o 'plaintext refused')"
echo '{"sealed":{"v":1},"wraps":{}}' >"$WORK/bad"
out=$(put_status secret/tls "$WORK/bad")
check "a malformed envelope is refused, naming the field" starts "$out" "422 secret/tls: sealed."
seal secret/tls "$WORK/other.pub" "$WORK/n1c.key" >"$WORK/other.json"
out=$(put_status secret/tls "$WORK/other.json")
check "an envelope sealed to another recovery key is refused" starts "$out" "422 secret/tls: sealed.rk: sealed to recovery key"
seal secret/tls "$WORK/rec.pub" >"$WORK/nowrap.json"
check_eq "a missing wrap is refused, naming the node and its key" \
	"422 secret/tls: no wrap for nodes n1 (keys $K3): seal to them (tetherctl put --seal) or run tetherctl secrets reseal" \
	"$(put_status secret/tls "$WORK/nowrap.json")"
seal secret/tls "$WORK/rec.pub" "$WORK/n1c.key" >"$WORK/a.json"
IDA=$(jq -r .sealed.id "$WORK/a.json")
out=$(put_status secret/tls "$WORK/a.json")
check "sealed to n1 (n2's subscription does not reach it): taken" test "${out%% *}" = 200
VA=${out#* }
seal secret/tls "$WORK/rec.pub" "$WORK/n1c.key" >"$WORK/b.json"
jq -c '. + {superseded: ["00000000000000000000000000000000"]}' "$WORK/b.json" >"$WORK/b2.json"
IDB=$(jq -r .sealed.id "$WORK/b.json")
out=$(put_status secret/tls "$WORK/b2.json")
check "a new envelope replaces it" test "${out%% *}" = 200
stored=$(curl -sS "$PLANE_URL/v1/resources/secret/tls")
check_eq "the plane keeps its own superseded list (the client's ignored)" "[\"$IDA\"]" "$(echo "$stored" | jq -c .body.superseded)"
check_eq "GET /v1/resources shows the stored body, wraps and all" "$K3" "$(echo "$stored" | jq -r '.body.wraps | keys | join(",")')"
check_eq "the first envelope again is a replay, refused" \
	"422 secret/tls: envelope $IDA was replaced before: a replayed envelope" "$(put_status secret/tls "$WORK/a.json")"
"$SEALTOOL" push <"$WORK/b.json" >"$WORK/pushform.json"
out=$(put_status secret/tls "$WORK/pushform.json")
check "a write of the push form (no wraps) is refused, naming wraps (RES_V_STORED)" starts "$out" "422 secret/tls: wraps"

# what nodes get: the push body, at the origin's digest
pushed=$(poll n1 secret/ | jq -c '.upserts[] | select(.name == "secret/tls") | .body')
check_eq "a node's poll gets the push body: only sealed" '["sealed"]' "$(echo "$pushed" | jq -c keys)"
check_eq "... byte for byte envelope_push_body of the stored one" "$("$SEALTOOL" push <"$WORK/b.json")" "$pushed"

# ---- GET /v1/wraps -------------------------------------------------------------------------------

w=$(curl -sS "$PLANE_URL/v1/wraps?kid=$K3&names=secret/tls,secret/none")
check_eq "/v1/wraps: the envelope id and n1's wrap, a name without one left out" "$IDB secret/tls" \
	"$(echo "$w" | jq -r '"\(.wraps["secret/tls"].id) \(.wraps | keys | join(","))"')"
check_eq "... a wrap that opens the push body with n1's key" "$(cat "$WORK/plain")" \
	"$(echo "$pushed" | "$SEALTOOL" open secret/tls "$WORK/n1c.key" "$(echo "$w" | jq -r '.wraps["secret/tls"].wrap')")"
check_eq "/v1/wraps for another key: none" '{}' "$(curl -sS "$PLANE_URL/v1/wraps?kid=$K2&names=secret/tls" | jq -c .wraps)"
check_eq "/v1/wraps with a bad kid: 400" 400 "$(api_status GET "/v1/wraps?kid=XYZ&names=secret/tls")"
check_eq "/v1/wraps with a bad name: 400" 400 "$(api_status GET "/v1/wraps?kid=$K3&names=cluster/web")"

# ---- GET /v1/secrets ---------------------------------------------------------------------------

poll n4 "" >/dev/null
reg n4 "$WORK/n4.key"
key_post n4 "$WORK/reg.json" >/dev/null
s=$(curl -sS "$PLANE_URL/v1/secrets")
check_eq "/v1/secrets: sealed, the recovery key" "true $RKID" "$(echo "$s" | jq -r '"\(.sealed_secrets) \(.recovery.key_id)"')"
check_eq "... the live keys with their subscriptions and where they came from (direct)" \
	"n1:$K3:secret/: n2:$K2:cluster/: n4:$K4::" \
	"$(echo "$s" | jq -r '[.nodes[] | "\(.node):\(.key_id):\(.sub):\(.key_via)"] | sort | join(" ")')"
check_eq "... secret/tls sealed, its id, n4 (every name) missing" "secret/tls true $IDB n4" \
	"$(echo "$s" | jq -r '.secrets[] | "\(.name) \(.sealed) \(.id) \(.missing | join(","))"')"
check_eq "?names= lists only those secrets" "secret/tls|" \
	"$(curl -sS "$PLANE_URL/v1/secrets?names=secret/tls" | jq -r '[.secrets[].name] | join(",")')|$(curl -sS "$PLANE_URL/v1/secrets?names=secret/none" | jq -r '[.secrets[].name] | join(",")')"
check_eq "... a name that is not a secret's: 400" 400 "$(api_status GET "/v1/secrets?names=file/a")"
seal secret/tls "$WORK/rec.pub" "$WORK/n1c.key" >"$WORK/c.json"
out=$(put_status secret/tls "$WORK/c.json")
check "a write now misses n4, named" starts "$out" "422 secret/tls: no wrap for nodes n4 (keys $K4)"

# a revert that brings the first envelope back is no replay (nor refused
# for n4, which came since: n4 is held until a reseal)
out=$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST --data "{\"version\":$VA}" "$PLANE_URL/v1/revert")
check_eq "a revert to the first envelope's version: 200" 200 "$out"
stored=$(curl -sS "$PLANE_URL/v1/resources/secret/tls")
check_eq "... it is back, the one it replaced listed as superseded (the live one not)" "$IDA [\"$IDB\"]" \
	"$(echo "$stored" | jq -c -r '"\(.body.sealed.id) \(.body.superseded)"')"
check_eq "a plain write of the replaced envelope is a replay" \
	"422 secret/tls: envelope $IDB was replaced before: a replayed envelope" "$(put_status secret/tls "$WORK/b.json")"
seal secret/tls "$WORK/rec.pub" "$WORK/n1c.key" "$WORK/n4.key" >"$WORK/d.json"
out=$(put_status secret/tls "$WORK/d.json")
check "a new envelope for n1 and n4 replaces it" test "${out%% *}" = 200
check_eq "a plain re-PUT of the first envelope is still a replay (422)" \
	"422 secret/tls: envelope $IDA was replaced before: a replayed envelope" "$(put_status secret/tls "$WORK/a.json")"

# the keys outlive a restart (SQLite)
stop_pid "$PLANE_PID"
start_plane again --data "$WORK/origin.data" --sealed-secrets "$WORK/rec.pub"
check_eq "after a restart n1's key and revoked key are known" "$K3 $K1B" "$(node_field n1 '"\(.key_id) \(.key_revoked | join(","))"')"
reg n1 "$WORK/n1b.key" 5000
check_eq "... and the revoked key is still refused" 403 "$(key_post n1 "$WORK/reg.json" | cut -d' ' -f1)"
reg ghost "$WORK/n4.key" 1
check_eq "... and ghost's mark: a first key after its revocation needs a newer at (409)" 409 \
	"$(key_post ghost "$WORK/reg.json" | cut -d' ' -f1)"
stop_pid "$PLANE_PID"

# ---- who may: a node its own key, writers /v1/secrets, anyone known /v1/wraps -----------------------

head -c 32 /dev/urandom | base64 | tr -d '/+=' >"$WORK/admin.tok"
ADMIN=$(cat "$WORK/admin.tok")
SECURE=1 start_plane secure --data "$WORK/origin.data" --admin-token-file "$WORK/admin.tok" \
	--sealed-secrets "$WORK/rec.pub"
token() { # token JSON: a new token's secret
	curl -sS -X POST -H "Authorization: Bearer $ADMIN" --data "$1" "$PLANE_URL/v1/tokens" | jq -r .token
}
code() { # code TOKEN METHOD PATH [CURL ARGS...]
	local t=$1 m=$2 p=$3
	shift 3
	curl -sS -o /dev/null -w '%{http_code}' -X "$m" ${t:+-H "Authorization: Bearer $t"} "$@" "$PLANE_URL$p"
}
T1=$(token '{"node":"n1"}')
T2=$(token '{"node":"n2"}')
TR=$(token '{"role":"reader"}')
reg n1 "$WORK/n1c.key" 6000
check_eq "n1's own token registers n1's key" 200 "$(code "$T1" POST /v1/nodes/n1/key --data-binary "@$WORK/reg.json")"
check_eq "n2's token cannot register n1's key (403)" 403 "$(code "$T2" POST /v1/nodes/n1/key --data-binary "@$WORK/reg.json")"
check_eq "no credential: 401" 401 "$(code "" POST /v1/nodes/n1/key --data-binary "@$WORK/reg.json")"
check_eq "an admin may" 200 "$(code "$ADMIN" POST /v1/nodes/n1/key --data-binary "@$WORK/reg.json")"
check_eq "a node cannot revoke (403)" 403 "$(code "$T1" DELETE /v1/nodes/n1/key)"
check_eq "a reader reads /v1/secrets" 200 "$(code "$TR" GET /v1/secrets)"
check_eq "a node does not (403)" 403 "$(code "$T1" GET /v1/secrets)"
check_eq "nor does anyone without a credential (401)" 401 "$(code "" GET /v1/secrets)"
check_eq "a node asks for its wraps" 200 "$(code "$T1" GET "/v1/wraps?kid=$K3&names=secret/tls")"
check_eq "... a reader too" 200 "$(code "$TR" GET "/v1/wraps?kid=$K3&names=secret/tls")"
check_eq "... not without a credential (401)" 401 "$(code "" GET "/v1/wraps?kid=$K3&names=secret/tls")"
stop_pid "$PLANE_PID"

# ---- a held NACK on a staged plane ----------------------------------------------------------------

# push_data FILE N: the data of the N-th push event in an SSE capture.
push_data() {
	awk -v n="$2" '/^event: push/ {p = 1; next} p && /^data: / {c++; if (c == n) {sub(/^data: /, ""); print}; p = 0}' "$1"
}
has_pushes() {
	[ "$(grep -c '^event: push' "$1" 2>/dev/null)" -ge "$2" ] && [ -n "$(push_data "$1" "$2")" ]
}
start_plane staged --rollout staged --stages 100 --bake 1 --heartbeat 1 --ack-timeout 300
put file/a '{"path":"a.txt","content":"1\n"}' >/dev/null
curl -sSN "$PLANE_URL/v1/stream?node=h1&version=0" >"$WORK/h1.sse" 2>/dev/null &
track_pid $!
wait_until 10 has_pushes "$WORK/h1.sse" 1 || bail "no push to h1"
d=$(push_data "$WORK/h1.sse" 1)
curl -sS -X POST --data-binary "{\"node\":\"h1\",\"version\":$(echo "$d" | jq .version),\"nonce\":\"$(echo "$d" | jq -r .nonce)\",\"status\":\"ack\"}" \
	"$PLANE_URL/v1/ack" >/dev/null
wait_until 10 ro_ended 1 || bail "the first rollout did not end"
V2=$(put file/a '{"path":"a.txt","content":"2\n"}' | jq -r .version)
check "h1 gets version $V2" wait_until 15 has_pushes "$WORK/h1.sse" 2
d=$(push_data "$WORK/h1.sse" 2)
NONCE=$(echo "$d" | jq -r .nonce)
out=$(curl -sS -X POST --data-binary "{\"node\":\"h1\",\"version\":$V2,\"nonce\":\"$NONCE\",\"status\":\"nack\",\"held\":true,\"current_version\":1,\"error\":\"secret/tls: no wrap for this node's key $K3: the plane holds this node until a writer seals to it (tetherctl secrets reseal)\"}" \
	"$PLANE_URL/v1/ack")
check_eq "a held NACK is accepted" accepted "$(echo "$out" | jq -r .result)"
check_eq "the node shows it held, not NACKed" "$V2 null 0" "$(node_field h1 '"\(.held.version) \(.last_nack) \(.nacks)"')"
check_eq "it is counted as held" 1 "$(metric 'tether_held_total{node="h1"}')"
check_eq "the rollout stays in progress, h1 held with its reason" \
	"in_progress h1 held: secret/tls: no wrap for this node's key $K3: the plane holds this node until a writer seals to it (tetherctl secrets reseal)" \
	"$(ro '"\(.state) \(.held[0].node) \(.held[0].reason)"')"
check "no NACK counted, no failure" ro_is '.reason == null and (.stage_counts[0].nacked == 0)'
curl -sS -X POST --data-binary "{\"node\":\"h1\",\"version\":$V2,\"nonce\":\"$NONCE\",\"status\":\"ack\"}" "$PLANE_URL/v1/ack" >/dev/null
check "an ACK of the version ends the hold" wait_until 10 sh -c "[ \"\$(curl -sS '$PLANE_URL/v1/nodes/h1' | jq -r .held)\" = null ]"
check "... and the rollout completes" wait_until 15 ro_ended 2
check_eq "... completed" completed "$(ro .state)"

# a rollout's automatic revert that brings an older envelope back: no
# replay, and the superseded list kept (the replaced id in, the live out)
# push_ack N: ACK (or, with nack, NACK) h1's N-th push
push_ack() {
	local d
	d=$(push_data "$WORK/h1.sse" "$1")
	curl -sS -X POST --data-binary "{\"node\":\"h1\",\"version\":$(echo "$d" | jq .version),\"nonce\":\"$(echo "$d" | jq -r .nonce)\",\"status\":\"${2:-ack}\",\"error\":\"x\"}" \
		"$PLANE_URL/v1/ack" >/dev/null
}
seal secret/s "$WORK/rec.pub" >"$WORK/ra.json"
seal secret/s "$WORK/rec.pub" >"$WORK/rb.json"
RA=$(jq -r .sealed.id "$WORK/ra.json")
RB=$(jq -r .sealed.id "$WORK/rb.json")
n=$(grep -c '^event: push' "$WORK/h1.sse")
check_eq "envelope A of secret/s: taken" 200 "$(put_status secret/s "$WORK/ra.json" | cut -d' ' -f1)"
check "h1 gets it" wait_until 15 has_pushes "$WORK/h1.sse" $((n + 1))
push_ack $((n + 1))
check "... its rollout completes" wait_until 15 ro_ended 3
check_eq "envelope B replaces it" 200 "$(put_status secret/s "$WORK/rb.json" | cut -d' ' -f1)"
check "h1 gets B" wait_until 15 has_pushes "$WORK/h1.sse" $((n + 2))
push_ack $((n + 2)) nack
check "h1's NACK ends B's rollout" wait_until 20 ro_ended 4
check_eq "... rolled back" rolled_back "$(ro .state)"
stored=$(curl -sS "$PLANE_URL/v1/resources/secret/s")
check_eq "the revert brought A back, B listed as superseded (A, live, not)" "$RA [\"$RB\"]" \
	"$(echo "$stored" | jq -c -r '"\(.body.sealed.id) \(.body.superseded)"')"
check_eq "a plain write of B is a replay" "422 secret/s: envelope $RB was replaced before: a replayed envelope" \
	"$(put_status secret/s "$WORK/rb.json")"

# ---- a held member never times out (--ack-timeout 2) ---------------------------------------------

# a1 is held, b2 says nothing: the ack timeout reverts for b2 alone -- not
# for a1, whatever the members' order
stop_pid "$PLANE_PID"
start_plane heldto --rollout staged --stages 100 --bake 1 --heartbeat 1 --ack-timeout 2
curl -sSN "$PLANE_URL/v1/stream?node=a1&version=0" >"$WORK/a1.sse" 2>/dev/null &
track_pid $!
curl -sSN "$PLANE_URL/v1/stream?node=b2&version=0" >"$WORK/b2.sse" 2>/dev/null &
track_pid $!
wait_until 10 sh -c "[ \"\$(curl -sS '$PLANE_URL/v1/nodes' | jq '[.[] | select(.connected)] | length')\" = 2 ]" ||
	bail "a1 and b2 did not connect"
V3=$(put file/a '{"path":"a.txt","content":"3\n"}' | jq -r .version)
# push_of FILE VERSION: the data of the push of VERSION in an SSE capture
push_of() {
	grep '^data: ' "$1" | sed 's/^data: //' | jq -c --argjson v "$2" 'select(.version? == $v)' 2>/dev/null | head -n 1 | grep .
}
check "a1 gets version $V3" wait_until 15 push_of "$WORK/a1.sse" "$V3"
check "b2 gets version $V3" wait_until 15 push_of "$WORK/b2.sse" "$V3"
d=$(push_of "$WORK/a1.sse" "$V3")
out=$(curl -sS -X POST --data-binary "{\"node\":\"a1\",\"version\":$V3,\"nonce\":\"$(echo "$d" | jq -r .nonce)\",\"status\":\"nack\",\"held\":true,\"current_version\":0,\"error\":\"secret/tls: no wrap for this node's key $K3\"}" \
	"$PLANE_URL/v1/ack")
check_eq "a1's held NACK is accepted" accepted "$(echo "$out" | jq -r .result)"
check "the ack timeout ends the rollout (b2 never answers)" wait_until 20 sh -c "curl -sS '$PLANE_URL/v1/rollouts/current' | jq -e '.state != \"in_progress\"'"
check_eq "... rolled back for b2, the silent one: the held a1 never fails it" \
	"rolled_back node b2: no ACK of version $V3 within 2s" "$(ro '"\(.state) \(.reason)"')"

done_testing
