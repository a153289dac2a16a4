#!/usr/bin/env bash
# t0983-approvals-relay.sh: approvals through a relay. The origin signs;
# a relay (--upstream) serves an approving node (tetherd --approvers
# --approvals 2) and a plain one. The relay takes the origin's approvals
# over its stream (the "approvals" event), holds its approving node at the
# newest approved version (while the plain node gets every version at
# once), pushes the approvals with the version, and its node keeps fresh
# statements of the version it is held at; a chained relay does the same.
# The relay refuses POST /v1/approvals (421: they go to the origin).
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

wfile() {
	printf '{"path":"%s.txt","content":"%s\\n"}' "$1" "$2" | ctl put "file/$1" >/dev/null ||
		bail "cannot write file/$1"
}
content() {
	cat "$WORK/$1.out/$2.txt" 2>/dev/null
}
relay_approvals() {
	[ "$(curl -s "$1/v1/approvals?version=$2" | jq -r '[.approvals[].kids[]] | length')" = "$3" ]
}

"$CTL_BIN" keygen "$WORK/plane.key" >/dev/null || bail "keygen failed"
for k in a b; do
	"$CTL_BIN" keygen --approver "$WORK/$k.key" >/dev/null || bail "keygen --approver failed"
done
cat "$WORK/a.key.pub" "$WORK/b.key.pub" >"$WORK/approvers"
start_plane o --signing-key "$WORK/plane.key" --heartbeat 0.5
O_URL=$PLANE_URL
wfile a a1
V1=$(plane_version)
ctl approve "$V1" --key "$WORK/a.key" >/dev/null 2>&1 || bail "approve failed"
ctl approve "$V1" --key "$WORK/b.key" >/dev/null 2>&1 || bail "approve failed"
start_plane r1 --upstream "$O_URL" --relay-id r1 --heartbeat 0.5
R1=$PLANE_URL
start_plane r2 --upstream "$R1" --relay-id r2 --heartbeat 0.5
R2=$PLANE_URL
PLANE_URL=$O_URL

NODE=(--trust "$WORK/plane.key.pub" --backoff-min 0.1 --backoff-max 0.5)
APPR=(--approvers "$WORK/approvers" --approvals 2)
start_agent n1 --plane "$R1" "${NODE[@]}" "${APPR[@]}"
start_agent p1 --plane "$R1" "${NODE[@]}"
start_agent n2 --plane "$R2" "${NODE[@]}" "${APPR[@]}"
check "the relay has the origin's approvals of $V1" wait_until 10 relay_approvals "$R1" "$V1" 2
check "the approving node behind the relay serves $V1" wait_until 10 agent_at n1 "$V1"
check "the one behind the chained relay too" wait_until 10 agent_at n2 "$V1"
check "the plain node serves $V1" wait_until 10 agent_at p1 "$V1"
check_eq "the relay lists n1 with approvals 2" "2" "$(curl -s "$R1/v1/nodes/n1" | jq -r .approvals)"

wfile a a2
V2=$(plane_version)
check "the plain node gets $V2 at once" wait_until 10 agent_at p1 "$V2"
check_eq "the approving nodes stay at $V1" "$V1 $V1 a1" "$(st n1 version) $(st n2 version) $(content n1 a)"
ctl approve "$V2" --key "$WORK/a.key" >/dev/null 2>&1 || bail "approve failed"
check "the relay has A's approval of $V2" wait_until 10 relay_approvals "$R1" "$V2" 1
check_eq "one approval: still $V1" "$V1 $V1" "$(st n1 version) $(st n2 version)"
# held below the newest, n1 keeps hearing fresh statements of $V1 (the
# relay fetches them from the origin, which keeps the state of $V1)
check "n1 is not stale while held" sh -c "[ \"\$(jq -r .trust.stale '$WORK/n1.state/status.json')\" = false ]"
ctl approve "$V2" --key "$WORK/b.key" >/dev/null 2>&1 || bail "approve failed"
check "with the second approval n1 serves $V2" wait_until 10 agent_at n1 "$V2"
check "and n2, behind the chained relay" wait_until 10 agent_at n2 "$V2"
check_eq "  serving a2" "a2" "$(content n1 a)"
check_eq "no verification failure at n1" "0" "$(curl -s "$R1/v1/nodes/n1" | jq -r .verify_failures)"

out=$(curl -sS -w '\n%{http_code}' -X POST --data "{\"version\":$V2,\"approvals\":[\"x\"]}" "$R1/v1/approvals")
check_eq "a relay refuses POST /v1/approvals (421, as every write)" "421" "$(tail -n 1 <<<"$out")"
check "  saying where they go" grep -q "this plane is a relay of .*: write to the origin" <<<"$out"

done_testing
