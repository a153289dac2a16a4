#!/usr/bin/env bash
# t0971-guards-agent.sh: guards at the node (docs/protocol.md "Guards").
# A signing plane; n1 trusts its key (--trust), n2 does not; each behind
# an attack proxy (tests/tools/attack-proxy.mjs). An override at the plane
# reaches both (n1 by the statement's signed "overridden", n2 by the
# push's field), and nodes behind a relay (which copies the field from the
# statement it forwards). A proxy that strips a guard from a push is caught by the
# signature (digest mismatch) at n1. A proxy that shrinks a cluster in a
# push is caught by the guard at n2 (no signature to check): NACKed,
# naming the guard, the node keeps serving. A rogue plane holding the
# plane's own signing key signs a state that shrinks the cluster without
# the real plane's check: n1 verifies the signature, and the guard refuses
# it, also when a proxy adds an unsigned claim of an override (which a
# node without --trust, having nothing else, believes). A node subscribed
# to file/ (or, via the relay, to cluster/) with --trust gets the guards
# too, in the digest its statement signs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-guards.sh"
. "$(dirname "$0")/lib-attack.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd node jq

"$CTL_BIN" keygen "$WORK/plane.key" >/dev/null || bail "keygen failed"
start_plane p --signing-key "$WORK/plane.key" --heartbeat 0.5
P=$PLANE_URL
put guard/shrink '{"match":"cluster/web","max_shrink":0.5}' >/dev/null
put cluster/web "$(eps 4)" >/dev/null
put file/readme '{"path":"readme.txt","content":"hello"}' >/dev/null
V=$(plane_version)

start_tool atk1 attack-proxy.mjs --target "127.0.0.1:$PLANE_PORT"
ATK1=$TOOL_PORT
start_tool atk2 attack-proxy.mjs --target "127.0.0.1:$PLANE_PORT"
ATK2=$TOOL_PORT
TARGS=(--trust "$WORK/plane.key.pub" --metrics-file "$WORK/n1.prom" --backoff-min 0.1 --backoff-max 0.5)
start_agent n1 --plane "http://127.0.0.1:$ATK1" "${TARGS[@]}"
start_agent n2 --plane "http://127.0.0.1:$ATK2" --backoff-min 0.1 --backoff-max 0.5
# narrow subscriptions with --trust: the guards are in the state their
# statements sign, at the plane, the relay and the agent alike
start_agent n3 --sub file/ --trust "$WORK/plane.key.pub" --backoff-min 0.1 --backoff-max 0.5
# n4 (no --trust) and n5 (--trust) behind a relay
start_plane r1 --upstream "$P" --relay-id r1 --heartbeat 0.5
RELAY=$PLANE_URL
PLANE_URL=$P
start_agent n4 --plane "$RELAY" --backoff-min 0.1 --backoff-max 0.5
start_agent n5 --plane "$RELAY" --sub cluster/ --trust "$WORK/plane.key.pub" --backoff-min 0.1 --backoff-max 0.5
check "n1, n2 and n3 run version $V" wait_until 15 all_at "$V" n1 n2 n3
check "n4 and n5 (through the relay) too" wait_until 15 all_at "$V" n4 n5
check_eq "a push for file/ holds the guard too (n3's subscription)" "file/readme,guard/shrink" \
	"$(curl -sS "$P/v1/config?node=n3x&version=0&sub=file/" | jq -r '[.upserts[].name] | sort | join(",")')"
check "n3 (file/) and n5 (cluster/, via the relay) verified their statements: no digest NACK" \
	sh -c "! grep -q 'digest mismatch' '$WORK/n3.log' '$WORK/n5.log'"

# ---- an override reaches both ---------------------------------------------------
eps 1 >"$WORK/web1.json"
ctl put cluster/web "$WORK/web1.json" --override "incident 9" >/dev/null || bail "override failed"
OV=$(plane_version)
check "an overridden shrink (4 -> 1) reaches n1 (signed overridden) and n2 (the push's field)" \
	wait_until 15 all_at "$OV" n1 n2
check "n1 logs that it passed under the plane's signed override" \
	grep -q "push $OV crosses guards under the plane's override of version $OV (signed)" "$WORK/n1.log"
check "n2 too (unsigned)" grep -q "push $OV crosses guards under the plane's override of version $OV:" "$WORK/n2.log"
check "n1's metrics count it" wait_until 10 sh -c \
	"awk '\$1 == \"tetherd_guard_overrides_total\" && \$2 == 1 { f = 1 } END { exit !f }' '$WORK/n1.prom'"
check "through the relay: n4 by the field the relay copies from the statement, n5 by the statement" \
	wait_until 15 all_at "$OV" n4 n5
check "... n4 unsigned" grep -q "push $OV crosses guards under the plane's override of version $OV:" "$WORK/n4.log"
check "... n5 signed" grep -q "push $OV crosses guards under the plane's override of version $OV (signed)" "$WORK/n5.log"
put cluster/web "$(eps 3)" >/dev/null
V=$(plane_version)
check "both at version $V (3 endpoints)" wait_until 15 all_at "$V" n1 n2

# ---- a proxy strips a guard: the signature catches it (n1) ------------------------------
mode "$ATK1" drop-upsert guard/tight
put guard/tight '{"match":"cluster/","min_endpoints":2}' >/dev/null
VT=$(plane_version)
check "n1 refuses the push without guard/tight (digest mismatch)" wait_until 15 reason_above n1 digest 0
check "... naming it" grep -q "push $VT refused: state digest mismatch" "$WORK/n1.log"
check "... and keeps serving version $V" agent_at n1 "$V"
check "n2 (its proxy passes) gets it" wait_until 15 agent_at n2 "$VT"
mode "$ATK1" pass
check "n1 converges once the proxy passes again" wait_until 20 agent_at n1 "$VT"

# ---- a proxy shrinks a cluster: the guard catches it (n2, no --trust) ----------------------
mode "$ATK2" tamper-body cluster/web 'endpoints=[{"address":"10.0.0.9","port":80}]'
put cluster/web '{"endpoints":[{"address":"10.0.0.1","port":80},{"address":"10.0.0.2","port":80},{"address":"10.0.0.3","port":81}]}' >/dev/null
VS=$(plane_version)
check "n2 NACKs the shrunk push of version $VS by the guard" wait_until 15 nack_has n2 \
	"guard/shrink: cluster/web: 3 -> 1 endpoints loses 67% (max_shrink 0.5)"
check "... and by guard/tight" nack_has n2 "guard/tight: cluster/web: 1 endpoints, fewer than min_endpoints 2"
check "... saying no override happened since what it serves, and what lets it through" nack_has n2 \
	"no override since version $VT, the version served (a write with tetherctl --override lets it through)"
check "... and keeps serving version $VT" agent_at n2 "$VT"
check "n1 (its proxy passes) gets version $VS" wait_until 15 agent_at n1 "$VS"
mode "$ATK2" pass
put cluster/web "$(eps 3)" >/dev/null
V=$(plane_version)
check "n2 converges once the proxy passes again" wait_until 20 agent_at n2 "$V"

# ---- a rogue plane with the plane's own key: the guard catches it (n1, --trust) -------------
# its state: the same guards, cluster/web with 1 endpoint, made by writes
# that never crossed a guard there; its version past n1's
start_plane rogue --signing-key "$WORK/plane.key" --heartbeat 0.5
R=$PLANE_URL
PLANE_URL=$P
curl -sS -X PUT --data-binary "$(eps 1)" "$R/v1/resources/cluster/web" >/dev/null
curl -sS -X PUT --data-binary "$(eps 2)" "$R/v1/resources/cluster/two" >/dev/null
curl -sS -X PUT --data-binary '{"match":"cluster/web","max_shrink":0.5}' "$R/v1/resources/guard/shrink" >/dev/null
curl -sS -X PUT --data-binary '{"match":"cluster/","min_endpoints":1}' "$R/v1/resources/guard/tight" >/dev/null
i=0
while [ "$(on "$R" plane_version)" -le "$((V + 2))" ] && [ $i -lt 100 ]; do
	curl -sS -X PUT --data-binary "{\"path\":\"pad.txt\",\"content\":\"$i\"}" "$R/v1/resources/file/pad" >/dev/null
	i=$((i + 1))
done
RV=$(on "$R" plane_version)
stop_pid "${APID[n1]}"
ALOG=n1-rogue start_agent n1 --plane "$R" "${TARGS[@]}"
check "n1 verifies the rogue plane's statements (the plane's key) and refuses version $RV by the guard" \
	wait_until 20 on "$R" nack_has n1 "guard/shrink: cluster/web: 3 -> 1 endpoints loses 67% (max_shrink 0.5)"
check "... and keeps serving version $V" agent_at n1 "$V"
check "its metrics count the refusal" wait_until 10 sh -c \
	"awk '\$1 == \"tetherd_guard_refusals_total\" && \$2 > 0 { f = 1 } END { exit !f }' '$WORK/n1.prom'"
check_eq "its status says why" "true" \
	"$(jq -r '.last_error | contains("guard/shrink: cluster/web")' "$WORK/n1.state/status.json")"

# an unsigned claim of an override (the push's field) is not enough with
# --trust; a node without --trust believes it (that is all it has)
start_tool atk3 attack-proxy.mjs --target "127.0.0.1:${R##*:}" --mode "push-field overridden=$RV"
ATK3=$TOOL_PORT
stop_pid "${APID[n1]}"
ALOG=n1-claim start_agent n1 --plane "http://127.0.0.1:$ATK3" "${TARGS[@]}"
check "the proxy claims an override in n1's pushes" wait_until 15 grep -q "push-field: overridden set to $RV" "$WORK/atk3.log"
check "n1 (--trust) still refuses by the guard" wait_until 15 grep -q "push $RV refused: .*guard/shrink: cluster/web: 3 -> 1" "$WORK/n1-claim.log"
check "... and keeps serving version $V" agent_at n1 "$V"
stop_pid "${APID[n2]}"
ALOG=n2-claim start_agent n2 --plane "http://127.0.0.1:$ATK3" --backoff-min 0.1 --backoff-max 0.5
check "n2 (no --trust) takes the claimed override: version $RV" wait_until 20 agent_at n2 "$RV"

done_testing
