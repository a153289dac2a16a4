#!/usr/bin/env bash
# t0981-approvals-attacks.sh: a compromised plane key is not enough for a
# node that requires approvals (tetherd --approvers --approvals 2). A
# hostile middle box (tests/tools/attack-proxy.mjs) between the node and
# a signing plane:
#   - strips approvals=2 from the node's stream request, so the plane
#     pushes its newest version, signed with the plane's own key and
#     approved by nobody: NACK "approvals: 0 of 2", the node keeps serving;
#   - signs a state itself with the plane's key (a stolen key: version
#     2^50, a digest that matches) and injects it: NACK "approvals: 0 of 2";
#   - puts one approver's token in twice: NACK "counted once";
#   - replays the approvals of an older version: NACK "signed version V1,
#     not V2";
#   - empties the plane's /v1/diff answers, hiding what a version changed:
#     tetherctl approve refuses, the base state it rebuilds is not the one
#     its key approved.
# Each refusal is counted (tetherd_verify_failures_total{reason=
# "approvals"}), recorded by the plane, and nothing goes live; once the
# proxy passes again the node takes the approved version. A restart boots
# from last-good without approvals again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-attack.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
command -v node >/dev/null 2>&1 || skip_all "node is not installed (tests/tools need it)"

wfile() {
	printf '{"path":"%s.txt","content":"%s\\n"}' "$1" "$2" | ctl put "file/$1" >/dev/null ||
		bail "cannot write file/$1"
}
vf_error_has() {
	node_field "$1" .last_verify_failure.error | grep -qF -- "$2"
}
# served NODE: NODE's version and a.txt
served() {
	echo "$(st "$1" version) $(cat "$WORK/$1.out/a.txt" 2>/dev/null)"
}

"$CTL_BIN" keygen "$WORK/plane.key" >/dev/null || bail "keygen failed"
for k in a b; do
	"$CTL_BIN" keygen --approver "$WORK/$k.key" >/dev/null || bail "keygen --approver failed"
done
KA=$(awk '{print $3}' "$WORK/a.key.pub")
PLANE_KID=$(awk '{print $3}' "$WORK/plane.key.pub")
BIG=1125899906842624   # 2^50
cat "$WORK/a.key.pub" "$WORK/b.key.pub" >"$WORK/approvers"
start_plane p --signing-key "$WORK/plane.key" --heartbeat 0.5
wfile a a1
V1=$(plane_version)
ctl approve "$V1" --key "$WORK/a.key" >/dev/null 2>&1 || bail "approve $V1 (a) failed"
ctl approve "$V1" --key "$WORK/b.key" >/dev/null 2>&1 || bail "approve $V1 (b) failed"

# the proxy holds the plane's own signing key: it could sign what it likes
start_tool atk attack-proxy.mjs --target "127.0.0.1:$PLANE_PORT" --key "$WORK/plane.key"
ATK=$TOOL_PORT
NARGS=(--plane "http://127.0.0.1:$ATK" --trust "$WORK/plane.key.pub" --approvers "$WORK/approvers" --approvals 2
	--metrics-file "$WORK/n1.prom" --backoff-min 0.1 --backoff-max 0.5)
start_agent n1 "${NARGS[@]}"
check "n1 serves the approved version $V1 through the proxy" wait_until 10 agent_at n1 "$V1"
check_eq "no refusal so far" "0" "$(reason n1 approvals)"

# ---- the plane's key alone ---------------------------------------------------------------
wfile a a2
V2=$(plane_version)
check_eq "version $V2 is pending: n1 held at $V1" "$V1 a1" "$(served n1)"
mode "$ATK" approvals-strip
check "strip: the proxy forwards n1's stream without approvals=2" wait_until 10 grep -q "approvals-strip: .*node=n1.* forwarded as" "$WORK/atk.log"
check "strip: the plane, not holding n1 any more, pushes $V2 signed with its key" wait_until 10 grep -q "push $V2 .*forwarded" "$WORK/atk.log"
check "strip: n1 refuses it (reason approvals)" wait_until 10 reason_above n1 approvals 0
check "strip: n1 says 0 of 2, the plane's signature alone" grep -q "push $V2 refused: approvals: 0 of 2 needed for version $V2 (no approval came with version $V2: the plane's signature alone)" "$WORK/n1.log"
check "strip: the plane records why" wait_until 10 vf_error_has n1 "approvals: 0 of 2 needed for version $V2"
check_eq "strip: n1 keeps serving $V1" "$V1 a1" "$(served n1)"
check_eq "strip: n1's verified version stays $V1" "$V1" "$(jq -r .trust.verified_version "$WORK/n1.state/status.json")"
# the proxy signs itself, with the plane's key: version 2^50, the state of
# version V1 (the digest is right), no approval
mode "$ATK" approvals-forge
check "forge: the proxy signed and injected version $BIG with the plane's key" wait_until 10 grep -q "approvals-forge: push $BIG injected: the state of version $V1, its statement re-signed by key $PLANE_KID" "$WORK/atk.log"
check "forge: n1 refuses it: 0 of 2" wait_until 10 grep -q "push $BIG refused: approvals: 0 of 2 needed for version $BIG" "$WORK/n1.log"
check_eq "forge: n1 keeps serving $V1" "$V1 a1" "$(served n1)"
check_eq "forge: n1's verified version stays $V1" "$V1" "$(jq -r .trust.verified_version "$WORK/n1.state/status.json")"
mode "$ATK" pass
check "pass: n1 reconnects with approvals=2 (the plane holds it again)" wait_until 10 sh -c \
	"[ \"\$(grep -c 'approvals: node n1 requires 2 approvals' '$PLANE_LOG')\" -ge 2 ]"

# ---- one key twice -----------------------------------------------------------------------
R0=$(reason n1 approvals)
mode "$ATK" approvals-dup
ctl approve "$V2" --key "$WORK/a.key" >/dev/null 2>&1 || bail "approve $V2 (a) failed"
ctl approve "$V2" --key "$WORK/b.key" >/dev/null 2>&1 || bail "approve $V2 (b) failed"
check "dup: the proxy sends A's approval twice" wait_until 10 grep -q "push $V2 .*approvals-dup: approvals: the first token twice" "$WORK/atk.log"
check "dup: n1 refuses it" wait_until 10 reason_above n1 approvals "$R0"
check "dup: n1 counts the key once" wait_until 5 grep -q "push $V2 refused: approvals: 1 of 2 needed for version $V2 (.*counted once)" "$WORK/n1.log"
check_eq "dup: n1 keeps serving $V1" "$V1 a1" "$(served n1)"

# ---- an approval replayed from another version --------------------------------------------
R1=$(reason n1 approvals)
mode "$ATK" approvals-replay
check "replay: the proxy puts version $V1's approvals into push $V2" wait_until 15 grep -q "push $V2 .*approvals-replay: approvals of version $V1 replayed" "$WORK/atk.log"
check "replay: n1 refuses it" wait_until 10 reason_above n1 approvals "$R1"
check "replay: n1 says they signed version $V1" wait_until 5 grep -q "push $V2 refused: approvals: 0 of 2 needed for version $V2 (${KA:0:8}... signed version $V1, not $V2" "$WORK/n1.log"
check_eq "replay: n1 keeps serving $V1" "$V1 a1" "$(served n1)"

# ---- the proxy passes: the approved version goes live --------------------------------------
mode "$ATK" pass
check "pass: n1 takes the approved version $V2" wait_until 20 agent_at n1 "$V2"
check_eq "pass: serving a2" "$V2 a2" "$(served n1)"
check "pass: the plane has n1's ACK of $V2" wait_until 10 node_acked n1 "$V2"

# ---- a plane that lies about what a version changed ----------------------------------------
# tetherctl approve rebuilds the base state (the last approved, V2) from
# what the plane says changed since; A approved V2, so a base that is not
# the state A signed is caught before anything is signed
wfile a a3
V3=$(plane_version)
mode "$ATK" diff-empty
check_eq "diff-empty: approve $V3 through a proxy that hides what changed: refused (exit 1)" "1" \
	"$("$CTL_BIN" --plane "http://127.0.0.1:$ATK" approve "$V3" --key "$WORK/a.key" >"$WORK/lie.out" 2>&1; echo $?)"
check "diff-empty: the proxy emptied the plane's diff" grep -q "diff-empty: /v1/diff" "$WORK/atk.log"
check "diff-empty: the state shown for $V2 is not the one A approved" grep -q \
	"the state the plane shows for version $V2 is not the one key $KA approved" "$WORK/lie.out"
check_eq "diff-empty: nothing was posted for $V3" "0" \
	"$(curl -s "$PLANE_URL/v1/approvals?version=$V3" | jq '.approvals | length')"
mode "$ATK" pass
"$CTL_BIN" --plane "http://127.0.0.1:$ATK" approve "$V3" --key "$WORK/a.key" >"$WORK/true.out" 2>&1
check "pass: approve $V3 shows the change against $V2" grep -q "changed *file/a" "$WORK/true.out"
check "pass: and takes the base as A's own (no warning)" sh -c "! grep -q 'did not approve' '$WORK/true.out'"
check_eq "n1 stays at $V2 ($V3 has one approval)" "$V2 a2" "$(served n1)"

# ---- a restart boots from last-good, no approvals needed again -----------------------------
mode "$ATK" withhold
stop_pid "${APID[n1]}"
start_agent n1 "${NARGS[@]}"
check "restart: n1 boots at $V2 from last-good, the plane's pushes withheld" wait_until 10 sh -c "[ \"\$(grep -c 'node n1 at version $V2' '$WORK/n1.log')\" -ge 1 ]"
check_eq "restart: serving a2" "$V2 a2" "$(served n1)"
mode "$ATK" pass

done_testing
