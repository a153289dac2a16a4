#!/usr/bin/env bash
# t0980-approvals.sh: approvals that nodes enforce (docs/protocol.md,
# "Approvals"). A signing plane, two approver keys (A, B) and one more (C)
# that no node lists; an approving node (tetherd --trust --approvers
# --approvals 2) and a plain one. A new version goes to the plain node at
# once and is held for the approving one (GET /v1/approvals, /v1/nodes,
# tetherctl log say pending) until `tetherctl approve` with A then B, when
# the node serves it (the log says approved). A's and C's approvals: the
# plane counts two keys and pushes, the node counts one and NACKs, naming
# C's key, and keeps serving. The plane refuses a token for another
# version, another state and a broken one; tetherd refuses bad options.
# The approvals survive a restart of the plane. `tetherctl reject`
# commits the state before a version.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# wfile NAME CONTENT: the plane's file/NAME becomes NAME.txt holding CONTENT
wfile() {
	printf '{"path":"%s.txt","content":"%s\\n"}' "$1" "$2" | ctl put "file/$1" >/dev/null ||
		bail "cannot write file/$1"
}
# content NODE NAME: what NODE serves in NAME.txt
content() {
	cat "$WORK/$1.out/$2.txt" 2>/dev/null
}
# nack_has NODE TEXT: the plane's record of NODE's last verification failure says TEXT
nack_has() {
	node_field "$1" .last_verify_failure.error | grep -qF -- "$2"
}
start_node() {
	start_agent "$@" --trust "$WORK/plane.key.pub" --backoff-min 0.1 --backoff-max 0.5
}

# ---- keys, a signing plane, two nodes --------------------------------------------------
"$CTL_BIN" keygen "$WORK/plane.key" >/dev/null || bail "keygen failed"
for k in a b c; do
	out=$("$CTL_BIN" keygen --approver "$WORK/$k.key") || bail "keygen --approver failed"
done
check "keygen --approver says what the key is for" grep -q "approver key" <<<"$out"
check_eq "keygen --approver: the secret is 0600" "600" "$(stat -c %a "$WORK/a.key")"
check "keygen --approver: FILE.pub is a public key line" grep -q '^tether-ed25519 ' "$WORK/a.key.pub"
check_eq "keygen: --recovery and --approver together is a usage error" "2" \
	"$("$CTL_BIN" keygen --recovery --approver "$WORK/x.key" >/dev/null 2>&1; echo $?)"
KA=$(awk '{print $3}' "$WORK/a.key.pub")
KB=$(awk '{print $3}' "$WORK/b.key.pub")
KC=$(awk '{print $3}' "$WORK/c.key.pub")
cat "$WORK/a.key.pub" "$WORK/b.key.pub" >"$WORK/approvers"

# tetherd refuses options that cannot work
check "tetherd: --approvals without --approvers is refused" sh -c \
	"! '$AGENT_BIN' --node x --plane http://127.0.0.1:1 --trust '$WORK/plane.key.pub' --approvals 1 --check-config 2>'$WORK/o1.err'"
check "  and says they go together" grep -q "go together" "$WORK/o1.err"
check "tetherd: --approvers without --trust is refused" sh -c \
	"! '$AGENT_BIN' --node x --plane http://127.0.0.1:1 --approvers '$WORK/approvers' --approvals 1 --check-config 2>'$WORK/o2.err'"
check "  and says it needs --trust" grep -q "needs --trust" "$WORK/o2.err"
printf '[agent]\nnode = x\nplane = http://127.0.0.1:1\ntrust = %s\napprovers = %s\napprovals = 2\n' \
	"$WORK/plane.key.pub" "$WORK/approvers" >"$WORK/t.conf"
check_eq "tetherd: the config file takes approvers and approvals" "configuration OK" \
	"$("$AGENT_BIN" -c "$WORK/t.conf" --check-config 2>&1)"
"$AGENT_BIN" --node x --plane http://127.0.0.1:1 --trust "$WORK/plane.key.pub" --approvers "$WORK/approvers" \
	--approvals 3 --state-dir "$WORK/x.state" --output-dir "$WORK/x.out" 2>"$WORK/o3.err" &
track_pid $!
check "tetherd: --approvals 3 with 2 keys in the file does not start" wait_until 10 grep -q "approvals 3: '$WORK/approvers' holds only 2 approver keys" "$WORK/o3.err"

cat "$WORK/a.key.pub" "$WORK/plane.key.pub" >"$WORK/approvers-bad"
"$AGENT_BIN" --node x --plane http://127.0.0.1:1 --trust "$WORK/plane.key.pub" --approvers "$WORK/approvers-bad" \
	--approvals 2 --state-dir "$WORK/y.state" --output-dir "$WORK/y.out" 2>"$WORK/o4.err" &
track_pid $!
check "tetherd: the plane's statement key among the approvers does not start" wait_until 10 grep -q \
	"key $(awk '{print $3}' "$WORK/plane.key.pub") is also a statement key of --trust" "$WORK/o4.err"

start_plane p --signing-key "$WORK/plane.key" --heartbeat 0.5
wfile a a1
V1=$(plane_version)

# the approving node starts with nothing approved: it waits for an approval
start_node plain
start_node appr --approvers "$WORK/approvers" --approvals 2
# the same over long-polls
start_node apoll --approvers "$WORK/approvers" --approvals 2 --transport poll --poll-wait 2
check "the plain node serves version $V1" wait_until 10 agent_at plain "$V1"
check "the approving node says it requires 2 approvals" wait_until 10 grep -q "approvals: a version needs 2 of the 2 approver keys" "$WORK/appr.log"
check "the plane records it (/v1/nodes: approvals 2)" wait_until 10 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/appr' | jq -r .approvals)\" = 2 ]"
check_eq "status.json shows the approvals required" "2" "$(jq -r .trust.approvals_required "$WORK/appr.state/status.json" 2>/dev/null)"
check_eq "the approving node got nothing yet" "" "$(content appr a)"
check "the polling one is held too (/v1/nodes: approvals 2)" wait_until 10 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/apoll' | jq -r .approvals)\" = 2 ]"
check_eq "  and got nothing yet" "" "$(content apoll a)"

# ---- approve the first version with A and B ----------------------------------------------
check_eq "GET /v1/approvals: the approving node's subscription, no approval yet" '[""] []' \
	"$(curl -s "$PLANE_URL/v1/approvals?version=$V1" | jq -c '.subs, .approvals' | tr '\n' ' ' | sed 's/ $//')"
ctl approve "$V1" --key "$WORK/a.key" >"$WORK/ap1.out" 2>&1
check "approve $V1 with A: signed here" grep -q "signed version $V1, subscription '', digest .* as key $KA" "$WORK/ap1.out"
check "approve $V1 with A: shows the change" grep -q "added *file/a" "$WORK/ap1.out"
check "approve $V1 with A: pending approval 1/2" grep -q "pending approval 1/2" "$WORK/ap1.out"
check "the log shows $V1 pending approval 1/2" sh -c "'$CTL_BIN' --plane '$PLANE_URL' log | grep -q 'pending approval 1/2 (${KA:0:8}'"
check_eq "the approving node still has nothing" "" "$(content appr a)"
ctl approve "$V1" --key "$WORK/b.key" >"$WORK/ap2.out" 2>&1
check "approve $V1 with B: approved 2/2" grep -q "approved 2/2" "$WORK/ap2.out"
check "the approving node serves version $V1" wait_until 10 agent_at appr "$V1"
check_eq "  its content" "a1" "$(content appr a)"
check "the polling node serves version $V1 too" wait_until 10 agent_at apoll "$V1"
check "the log shows $V1 approved 2/2" sh -c "'$CTL_BIN' --plane '$PLANE_URL' log | grep -q 'approved 2/2'"
check_eq "log --json: the approvals of $V1 by kid" "$(printf '%s\n' "$KA" "$KB" | sort | tr '\n' ' ')" \
	"$(ctl log --json | jq -r ".versions[] | select(.version == $V1) | .approvals[].kid" | sort | tr '\n' ' ')"
check_eq "/v1/nodes: approved_version $V1" "$V1" "$(node_field appr .approved_version)"

# ---- a new version: the plain node at once, the approving one held ------------------------
wfile a a2
V2=$(plane_version)
check "the plain node serves version $V2 at once" wait_until 10 agent_at plain "$V2"
check_eq "the approving node is held at $V1" "$V1 a1" "$(st appr version) $(content appr a)"
check_eq "the plane's target for it is $V1" "$V1" "$(node_field appr .target_version)"
check "show $V2: pending approval 0/2" sh -c "'$CTL_BIN' --plane '$PLANE_URL' show $V2 | grep -q 'pending approval 0/2'"
ctl approve "$V2" --key "$WORK/a.key" --json >"$WORK/ap3.json" 2>&1
check_eq "approve --json: the change, and the digest signed" "changed file/a $KA" \
	"$(jq -r '"\(.changes[0].change) \(.changes[0].name) \(.approvals[0].kid)"' "$WORK/ap3.json")"
check_eq "approve --json: the base ($V1) is the state A approved" "true" "$(jq -r .base_checked "$WORK/ap3.json")"
check_eq "  and the digest is the plane's own (it accepted it)" "1" "$(jq -r '.plane.approvals[0].kids | length' "$WORK/ap3.json")"
check_eq "one approval is not enough: still $V1" "$V1" "$(st appr version)"

# ---- the plane refuses what it cannot verify --------------------------------------------
TOK=$(curl -s "$PLANE_URL/v1/approvals?version=$V2" >/dev/null; "$CTL_BIN" --plane "$PLANE_URL" approve "$V1" --key "$WORK/c.key" --json | jq -r .approvals[0].kid)
check_eq "approve $V1 with C (the plane takes any key)" "$KC" "$TOK"
# a token of V1 posted for V2
A1TOK=$(sqlite3 "$WORK/p.data/tether.db" "SELECT token FROM approvals WHERE version=$V1 AND kid='$KA'" 2>/dev/null)
if [ -n "$A1TOK" ]; then
	out=$(api POST /v1/approvals --data "{\"version\":$V2,\"approvals\":[\"$A1TOK\"]}")
	check_eq "POST a token of version $V1 for $V2: 422" "422" "$(tail -n 1 <<<"$out")"
	check "  naming why" grep -q "signed for version $V1, not $V2" <<<"$out"
else
	ok "# SKIP a token of another version (sqlite3 is not installed)"
fi
out=$(api POST /v1/approvals --data "{\"version\":$V2,\"approvals\":[\"e30.AAAA\"]}")
check_eq "POST a broken token: 422" "422" "$(tail -n 1 <<<"$out")"
check "  naming the token" grep -q "approvals\[0\]: approval:" <<<"$out"
out=$(api POST /v1/approvals --data "{\"version\":$V2}")
check_eq "POST without tokens: 422" "422" "$(tail -n 1 <<<"$out")"
check_eq "GET /v1/approvals without ?version: 400" "400" "$(api_status GET /v1/approvals)"
check_eq "a relay-less node asking approvals=99: 400" "400" "$(api_status GET "/v1/config?node=zz&approvals=99")"

# ---- A and C: the plane counts two keys, the node only A --------------------------------
ctl approve "$V2" --key "$WORK/c.key" >"$WORK/ap4.out" 2>&1
check "A and C approved $V2 at the plane (2/2)" grep -q "approved 2/2" "$WORK/ap4.out"
check "the approving node NACKs $V2: C is not in its file" wait_until 10 nack_has appr "approvals: 1 of 2 needed for version $V2 (approver ${KC:0:8}... is not in $WORK/approvers)"
check "the polling one too (its poll answer carried the approvals)" wait_until 10 nack_has apoll "approvals: 1 of 2 needed for version $V2"
check_eq "  and keeps serving $V1" "$V1" "$(st apoll version)"
check_eq "  and keeps serving $V1" "$V1 a1" "$(st appr version) $(content appr a)"
check "  its log says so" grep -q "approvals: 1 of 2 needed" "$WORK/appr.log"
ctl approve "$V2" --key "$WORK/b.key" >/dev/null 2>&1
check "with B too, the approving node serves $V2" wait_until 10 agent_at appr "$V2"
check "  and the polling one" wait_until 10 agent_at apoll "$V2"
check_eq "  its content" "a2" "$(content appr a)"

# ---- the approvals survive a restart of the plane ---------------------------------------
stop_pid "$PLANE_PID"
start_plane p --signing-key "$WORK/plane.key" --heartbeat 0.5 --listen "127.0.0.1:$PLANE_PORT"
check_eq "after a restart the plane still has A, B and C for $V2" "$(printf '%s\n' "$KA" "$KB" "$KC" | sort | tr '\n' ' ')" \
	"$(curl -s "$PLANE_URL/v1/approvals?version=$V2" | jq -r '.approvals[0].kids[]' | sort | tr '\n' ' ')"
wfile a a3
V3=$(plane_version)
check "the plain node gets $V3" wait_until 15 agent_at plain "$V3"
check "the approving node reconnected (approvals 2 on record)" wait_until 15 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/appr' | jq -r .approvals)\" = 2 ]"
check_eq "the approving node stays at $V2" "$V2" "$(st appr version)"

# ---- reject: the state before V3, as a new version -----------------------------------------
ctl reject "$V3" --message "not this one" >"$WORK/rej.out" 2>&1
V4=$(plane_version)
check_eq "reject $V3 commits version $V4" "version $V4" "$(cat "$WORK/rej.out")"
check "  whose message names it (a revert's, with reject's words)" sh -c \
	"'$CTL_BIN' --plane '$PLANE_URL' log --json | jq -r '.versions[] | select(.version == $V4) | .message' | grep -qF 'reject $V3: not this one'"
check "the plain node serves a2 again" wait_until 10 sh -c "[ \"\$(cat '$WORK/plain.out/a.txt')\" = a2 ]"
ctl approve "$V4" --key "$WORK/a.key" >/dev/null 2>&1
ctl approve "$V4" --key "$WORK/b.key" >"$WORK/ap5.out" 2>&1
check "approve $V4: the change against the last approved ($V2) is none" grep -q "(no change)" "$WORK/ap5.out"
check "the approving node takes $V4" wait_until 10 agent_at appr "$V4"
check_eq "  serving a2" "a2" "$(content appr a)"

# ---- SIGHUP: an approver key never becomes a statement key too ----------------------------
cp "$WORK/plane.key.pub" "$WORK/trust-h"
cp "$WORK/approvers" "$WORK/approvers-h"
start_agent hup --trust "$WORK/trust-h" --approvers "$WORK/approvers-h" --approvals 2 --backoff-min 0.1 --backoff-max 0.5
check "hup: serves $V4" wait_until 10 agent_at hup "$V4"
cat "$WORK/plane.key.pub" >>"$WORK/approvers-h"
kill -HUP "${APID[hup]}"
check "hup: approvers that bring the plane's key are refused, the old ones kept" wait_until 10 grep -q \
	"SIGHUP: .*is also a statement key of --trust .*(keeping the approver keys)" "$WORK/hup.log"
cp "$WORK/approvers" "$WORK/approvers-h"
cat "$WORK/a.key.pub" >>"$WORK/trust-h"
kill -HUP "${APID[hup]}"
check "hup: a --trust that brings an approver's key is refused, the old keys kept" wait_until 10 grep -q \
	"SIGHUP: .*key $KA is also a statement key of --trust .*(keeping the trusted keys)" "$WORK/hup.log"
stop_pid "${APID[hup]}"

# ---- roles: a reader reads approvals, an operator posts them ----------------------------
stop_pid "$PLANE_PID"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/admin.tok"
chmod 600 "$WORK/admin.tok"
SECURE=1 start_plane s --admin-token-file "$WORK/admin.tok" --signing-key "$WORK/plane.key"
"$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.tok" token create --role reader >"$WORK/reader.tok" ||
	bail "cannot make a reader's token"
"$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.tok" token create --role operator >"$WORK/operator.tok" ||
	bail "cannot make an operator's token"
printf '{"path":"a.txt","content":"s1\\n"}' | "$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.tok" put file/a >/dev/null ||
	bail "cannot write on the secure plane"
auth() { echo "Authorization: Bearer $(cat "$WORK/$1.tok")"; }
check_eq "secure: GET /v1/approvals without a token: 401" "401" "$(api_status GET "/v1/approvals?version=1")"
check_eq "secure: a reader reads them" "200" "$(api_status GET "/v1/approvals?version=1" -H "$(auth reader)")"
check_eq "secure: a reader may not post" "403" \
	"$(api_status POST /v1/approvals -H "$(auth reader)" --data '{"version":1,"approvals":["x"]}')"
check_eq "secure: an operator may (a broken token: 422, past the role check)" "422" \
	"$(api_status POST /v1/approvals -H "$(auth operator)" --data '{"version":1,"approvals":["x"]}')"
"$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/operator.tok" approve 1 --key "$WORK/a.key" >"$WORK/op.out" 2>&1
check "secure: tetherctl approve with an operator's token" grep -q "version 1: pending approval\|version 1: approved" "$WORK/op.out"
pem_pair p
printf '{"cert":"%s","key":"%s"}' "$PAIR_CERT" "$PAIR_KEY" |
	"$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.tok" put secret/p >/dev/null || bail "cannot write a plaintext secret"
check_eq "secure: an operator approving a plaintext secret's state: refused (exit 1)" "1" \
	"$("$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/operator.tok" approve 2 --key "$WORK/a.key" >"$WORK/op2.out" 2>&1; echo $?)"
check "  saying its body is redacted and an admin's token is needed" grep -q \
	"secret/p: its body reads \[redacted\] .*approve with an admin's token" "$WORK/op2.out"
"$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.tok" approve 2 --key "$WORK/a.key" >"$WORK/op3.out" 2>&1
check "secure: an admin approves it" grep -q "version 2: pending approval\|version 2: approved" "$WORK/op3.out"

# ---- a sealed secret: tetherctl digests its push form, as the plane does -----------------
stop_pid "$PLANE_PID"
if command -v openssl >/dev/null 2>&1; then
	"$CTL_BIN" keygen --recovery "$WORK/rec" >/dev/null || bail "keygen --recovery failed"
	openssl req -x509 -newkey rsa:2048 -nodes -subj "/CN=t0980" -days 1 -keyout "$WORK/k.pem" \
		-out "$WORK/c.pem" >/dev/null 2>&1 || bail "openssl failed"
	printf '{"cert":%s,"key":%s}\n' "$(jq -Rs . <"$WORK/c.pem")" "$(jq -Rs . <"$WORK/k.pem")" >"$WORK/s.json"
	start_plane z --signing-key "$WORK/plane.key" --sealed-secrets "$WORK/rec.pub"
	ctl put secret/s "$WORK/s.json" --seal >/dev/null 2>&1 || bail "put --seal failed"
	ctl put secret/s "$WORK/s.json" --seal >/dev/null 2>&1 || bail "put --seal failed"
	ctl approve 2 --key "$WORK/a.key" >"$WORK/z2.out" 2>&1
	check "sealed: the plane takes tetherctl's digest of a state with a sealed secret" grep -q "version 2: approved 1/1" "$WORK/z2.out"
	# no approving node holds version 1: the plane kept no state of it
	check_eq "an older version nobody holds: refused (exit 1)" "1" \
		"$(ctl approve 1 --key "$WORK/a.key" >"$WORK/z1.out" 2>&1; echo $?)"
	check "  saying the plane no longer keeps its state" grep -q "the plane no longer keeps the state of version 1" "$WORK/z1.out"
else
	ok "# SKIP sealed secrets' digest (openssl is not installed)"
fi

done_testing
