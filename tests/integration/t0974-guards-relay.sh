#!/usr/bin/env bash
# t0974-guards-relay.sh: overrides through relays of an unsigned plane
# (docs/protocol.md "Guards", "Relays"). No statement to copy the
# override from: a relay learns the overridden versions from its
# upstream's state events and its pushes carry the unsigned "overridden".
# r1 follows the plane, r2 follows r1; n1 on r1 and n2 on r2 (no --trust)
# take an overridden shrink. A relay started afterwards (a snapshot of
# r1) knows it too. A shrink made without an override (a proxy between
# the relay and n1) is still refused by the guard.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-guards.sh"
. "$(dirname "$0")/lib-attack.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd node jq

start_plane p --heartbeat 0.5
P=$PLANE_URL
put guard/shrink '{"match":"cluster/web","max_shrink":0.5}' >/dev/null
put cluster/web "$(eps 4)" >/dev/null
V=$(plane_version)
start_plane r1 --upstream "$P" --relay-id r1 --heartbeat 0.5
R1=$PLANE_URL
start_plane r2 --upstream "$R1" --relay-id r2 --heartbeat 0.5
R2=$PLANE_URL
PLANE_URL=$P
start_agent n1 --plane "$R1" --backoff-min 0.1 --backoff-max 0.5
start_agent n2 --plane "$R2" --backoff-min 0.1 --backoff-max 0.5
check "n1 (on r1) and n2 (on r2, behind r1) run version $V" wait_until 15 all_at "$V" n1 n2

eps 1 >"$WORK/web1.json"
ctl put cluster/web "$WORK/web1.json" --override "incident 11" >/dev/null || bail "override failed"
OV=$(plane_version)
check "the overridden shrink (4 -> 1) reaches n1 and n2 through unsigned relays" wait_until 15 all_at "$OV" n1 n2
check "n1 took it under the override r1's push carries" \
	grep -q "push $OV crosses guards under the plane's override of version $OV:" "$WORK/n1.log"
check "n2 under the one r2 learned from r1" \
	grep -q "push $OV crosses guards under the plane's override of version $OV:" "$WORK/n2.log"

start_plane r3 --upstream "$R1" --relay-id r3 --heartbeat 0.5
R3=$PLANE_URL
PLANE_URL=$P
check_eq "a relay started afterwards learns it from r1's snapshot" "$OV" \
	"$(curl -sS "$R3/v1/config?node=n9&version=$V" | jq -r '.overridden // "none"')"

# a shrink with no override behind it, made by a proxy between r1 and n3:
# the relay's field names only the older override, so the guard refuses it
put cluster/web "$(eps 4)" >/dev/null
V2=$(plane_version)
start_tool atk attack-proxy.mjs --target "${R1#http://}"
ATK=$TOOL_PORT
start_agent n3 --plane "http://127.0.0.1:$ATK" --backoff-min 0.1 --backoff-max 0.5
check "n1 and n3 (on r1, n3 through a proxy) run version $V2" wait_until 15 all_at "$V2" n1 n3
mode "$ATK" tamper-body cluster/web 'endpoints=[{"address":"10.0.0.9","port":80}]'
put cluster/web "$(eps 3)" >/dev/null
V3=$(plane_version)
check "n3 refuses the shrunk push of version $V3 by the guard" wait_until 15 \
	grep -q "push $V3 refused: .*guard/shrink: cluster/web: 4 -> 1 endpoints loses 75% (max_shrink 0.5).*no override since version $V2" \
	"$WORK/n3.log"
check "... and keeps serving version $V2" agent_at n3 "$V2"
check "n1 (no proxy) runs version $V3" wait_until 15 agent_at n1 "$V3"

done_testing
