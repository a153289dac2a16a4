#!/usr/bin/env bash
# t0982-approvals-etcd.sh: approvals with replicas (--store etcd). An
# approving node (tetherd --approvers --approvals 2) streams from replica
# b; the approvals are posted to replica a. b reads them from etcd (its
# keeper, every second) and releases the node; a replica started later
# loads them.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd jq curl

etcd_cluster_start 1
check "an etcd member is healthy" etcd_healthy 1
"$CTL_BIN" keygen "$WORK/plane.key" >/dev/null || bail "keygen failed"
for k in a b; do
	"$CTL_BIN" keygen --approver "$WORK/$k.key" >/dev/null || bail "keygen --approver failed"
done
KA=$(awk '{print $3}' "$WORK/a.key.pub")
KB=$(awk '{print $3}' "$WORK/b.key.pub")
cat "$WORK/a.key.pub" "$WORK/b.key.pub" >"$WORK/approvers"
PREFIX=/t0982-$$/
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "$PREFIX" --heartbeat 0.5 --signing-key "$WORK/plane.key")
start_plane a "${E[@]}"
A_URL=$PLANE_URL
start_plane b "${E[@]}"
B_URL=$PLANE_URL
on() { local PLANE_URL=$1; shift; "$@"; }

printf '{"path":"a.txt","content":"a1\\n"}' | on "$A_URL" ctl put file/a >/dev/null || bail "put failed"
check "b follows to version 1" wait_until 10 sh -c "[ \"\$(curl -fsS '$B_URL/healthz' | jq -r .version)\" = 1 ]"
start_agent n1 --plane "$B_URL" --trust "$WORK/plane.key.pub" --approvers "$WORK/approvers" --approvals 2 \
	--backoff-min 0.1 --backoff-max 0.5
check "b holds n1 for approvals" wait_until 10 sh -c "[ \"\$(curl -s '$B_URL/v1/nodes/n1' | jq -r .approvals)\" = 2 ]"
check_eq "n1 has nothing yet" "0" "$(st n1 version)"

on "$A_URL" ctl approve 1 --key "$WORK/a.key" >/dev/null 2>&1 || bail "approve (a) on replica a failed"
on "$A_URL" ctl approve 1 --key "$WORK/b.key" >/dev/null 2>&1 || bail "approve (b) on replica a failed"
check "b reads a's approvals from etcd and n1 serves version 1" wait_until 10 agent_at n1 1
check_eq "  its content" "a1" "$(cat "$WORK/n1.out/a.txt")"
check_eq "b's GET /v1/approvals lists both keys" "$(printf '%s\n' "$KA" "$KB" | sort | tr '\n' ' ')" \
	"$(curl -s "$B_URL/v1/approvals?version=1" | jq -r '.approvals[0].kids[]' | sort | tr '\n' ' ')"
check "b's log says approved 2/2" sh -c "'$CTL_BIN' --plane '$B_URL' log | grep -q 'approved 2/2'"

# a replica started now loads them
start_plane c "${E[@]}"
C_URL=$PLANE_URL
check_eq "replica c, started later, has both approvals" "2" \
	"$(curl -s "$C_URL/v1/approvals?version=1" | jq -r '.approvals[0].kids | length')"

done_testing
