#!/usr/bin/env bash
# t0986-gates-unjudged.sh: gates fail closed. Four nginx agents started
# with --traffic-listen off count nothing, and say so in their ACKs (the
# plane's node listing shows "counts": false and why). A rollout under
# --gate-error-rate cannot judge its canary: after the bake the stage is
# held, not passed -- the rollout stays in progress at the canary, its
# status (JSON, tetherctl rollout status) says "held: unjudged: nN does
# not count traffic (started with --traffic-listen off)", an event "gate"
# with verdict "unjudged" goes out on /v1/events, and
# tether_gate_unjudged_total counts it. When the canary's agent restarts
# counting (its defaults), the stage is judged and the rollout completes.
# Restarted with --traffic-listen off again, holding its version (no push,
# no ACK), its connection says it does not count.
# A files node says why it does not count either, also behind a relay.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
. "$(dirname "$0")/lib-gates.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node jq ss

trap 'gates_stop_proxies; cleanup' EXIT

gates_backends
start_plane p --heartbeat 1 --rollout staged --stages 25,100 --bake 2 --ack-timeout 60 \
	--gate-error-rate 0.05 --gate-min-requests 30
curl -sS -N "$PLANE_URL/v1/events" >"$WORK/events" 2>/dev/null &
track_pid $!
# subscribed: the plane's first bytes (retry and a comment) come at once
wait_until 10 test -s "$WORK/events" || bail "no event stream from the plane"

for i in $(seq 1 "$GATE_N"); do
	gates_nginx_node "$i" --traffic-listen off
done
check "four nodes connect" wait_until 15 sh -c "curl -s '$PLANE_URL/v1/nodes' | jq -e '[.[] | select(.connected)] | length == $GATE_N'"

# ---- the first state: held at the canary, and why ------------------------------------------
gates_state | ctl apply - >/dev/null || bail "cannot load the first state"
V1=$(plane_version)
check "a rollout of version $V1 starts" wait_until 20 ro_is ".to_version == $V1"
check "its canary is held after the bake: unjudged" wait_until 30 ro_is '.gate.stages[0].verdict == "unjudged" and .gate.stages[0].held == true'
CANARY=$(curl -s "$PLANE_URL/v1/nodes" | jq -r "[.[] | select(.acked_version == $V1)] | .[0].node")
REASON=$(ro '.gate.stages[0].reason')
diag "canary $CANARY; reason: $REASON"
check_eq "the reason names the node and why" \
	"held: unjudged: $CANARY does not count traffic (started with --traffic-listen off)" "$REASON"
check "the rollout is still in progress at its first stage" ro_is '.state == "in_progress" and .stage == 25'
check_eq "only the canary was touched" 1 "$(ro .touched)"
check "no agent counts: none listens on a UDP port for it" sh -c "! grep -q 'traffic: counting' '$WORK'/n[0-9].log"
check "no agent kept a counting port" sh -c "! ls '$WORK'/n[0-9].state/traffic-listen 2>/dev/null | grep -q ."
check "the rendered nginx configuration sends no access log" sh -c "! grep -q 'access_log syslog' '$WORK'/n*.out/current/tether.conf"
check "the node listing says why the canary does not count" sh -c "curl -s '$PLANE_URL/v1/nodes/$CANARY' | jq -e '.counts == false and .counts_reason == \"started with --traffic-listen off\"'"
check "an event \"gate\" says the stage became unjudged" wait_until 10 sh -c \
	"grep '^data:' '$WORK/events' | sed 's/^data: *//' | jq -s -e '[.[] | select(.verdict? == \"unjudged\") | .reason | startswith(\"held: unjudged: $CANARY\")] | any' >/dev/null"
check "/metrics counts it: tether_gate_unjudged_total 1" sh -c "curl -s '$PLANE_URL/metrics' | grep -q '^tether_gate_unjudged_total 1$'"
check "tetherctl rollout status says it is held and why" sh -c \
	"'$CTL_BIN' --plane '$PLANE_URL' rollout status | grep -qF 'held: unjudged: $CANARY does not count traffic (started with --traffic-listen off)'"
check "the plane logged it" grep -q "stage 25%: held: unjudged: $CANARY" "$PLANE_LOG"
# held, it stays: read again after three more of the plane's heartbeats on
# /v1/events (longer than the 2 s bake; the ticker stepped the rollout)
HB=$(grep -c '^event: heartbeat' "$WORK/events")
check "three more heartbeats on /v1/events" wait_until 20 sh -c "[ \$(grep -c '^event: heartbeat' '$WORK/events') -ge $((HB + 3)) ]"
check "still held, not passed, three heartbeats later" ro_is '.state == "in_progress" and .stage == 25 and .gate.stages[0].held == true'

# ---- the canary counts again: judged, the rollout goes on -----------------------------------
N=${CANARY#n}
stop_pid "${APID[$CANARY]}" TERM
start_agent "$CANARY" --consumer nginx --pidfile "$WORK/nx$N/nginx.pid" --marker "127.0.0.1:${GM[$N]}" \
	--sub "cluster/,listener/$CANARY-l,route/$CANARY-" --reload-timeout 5 --backoff-min 0.1 --backoff-max 1
check "restarted with its defaults, the canary counts" wait_until 20 grep -q 'traffic: counting the access log' "$WORK/$CANARY.log"
check "the node listing says it counts" wait_until 20 sh -c "curl -s '$PLANE_URL/v1/nodes/$CANARY' | jq -e '.counts == true'"
check "the stage is judged (low_traffic: it counts, few requests) and the rollout goes on" \
	wait_until 30 ro_is "(.gate.stages[0].verdict == \"low_traffic\") and (.stage == 100 or .state != \"in_progress\")"
# the last stage's members do not count: held again, naming them
check "the last stage is held: the three others do not count" wait_until 30 ro_is \
	'.gate.stages[1].held == true and (.gate.stages[1].reason | test("^held: unjudged: n[0-9], n[0-9], n[0-9] do not count traffic \\(started with --traffic-listen off\\)$"))'
diag "last stage: $(ro '.gate.stages[1].reason')"
check "/metrics: two stages unjudged" sh -c "curl -s '$PLANE_URL/metrics' | grep -q '^tether_gate_unjudged_total 2$'"
check "tetherctl rollout abort ends it" sh -c "'$CTL_BIN' --plane '$PLANE_URL' rollout abort >/dev/null"
check "aborted" wait_until 10 ro_is '.state == "aborted"'

# ---- it stops counting while it holds its version: its connection says so ------------------
# (no push, so no ACK to carry it: the stream's counts=0 and counts_reason)
check "the canary holds the newest version" wait_until 20 sh -c \
	"curl -s '$PLANE_URL/v1/nodes/$CANARY' | jq -e '.acked_version == $(plane_version) and .counts == true'"
ACKS=$(curl -s "$PLANE_URL/v1/nodes/$CANARY" | jq .acks)
stop_pid "${APID[$CANARY]}" TERM
start_agent "$CANARY" --consumer nginx --pidfile "$WORK/nx$N/nginx.pid" --marker "127.0.0.1:${GM[$N]}" \
	--sub "cluster/,listener/$CANARY-l,route/$CANARY-" --reload-timeout 5 --backoff-min 0.1 --backoff-max 1 \
	--traffic-listen off
check "restarted with --traffic-listen off, its connection says it does not count, and why" wait_until 20 sh -c \
	"curl -s '$PLANE_URL/v1/nodes/$CANARY' | jq -e '.connected and .counts == false and .counts_reason == \"started with --traffic-listen off\"'"
check_eq "... without an ACK (it held its version)" "$ACKS" "$(curl -s "$PLANE_URL/v1/nodes/$CANARY" | jq .acks)"

# ---- a files node says why it does not count ---------------------------------------------
start_agent f1 --consumer files --sub "cluster/good"
check "a files node: counts false, consumer files does not count traffic" wait_until 20 sh -c \
	"curl -s '$PLANE_URL/v1/nodes/f1' | jq -e '.counts == false and .counts_reason == \"consumer files does not count traffic\"'"

# ---- through a relay: the origin learns why (a 'u' line) -----------------------------------
ORIGIN=$PLANE_URL
start_plane r --upstream "$ORIGIN" --relay-id r --heartbeat 1
start_agent f2 --consumer files --sub "cluster/good"
PLANE_URL=$ORIGIN
check "a files node behind a relay: the origin shows counts false and why, via r" wait_until 20 sh -c \
	"curl -s '$ORIGIN/v1/nodes/f2' | jq -e '.via[0] == \"r\" and .counts == false and .counts_reason == \"consumer files does not count traffic\"'"

# ---- --gate-unjudged: bad values refused --------------------------------------------------
check "--gate-unjudged ignore is refused, naming the option" sh -c \
	"'$PLANE_BIN' --listen 127.0.0.1:0 --data '$WORK/x.data' --insecure --rollout staged --gate-error-rate 0.05 --gate-unjudged ignore 2>&1 | grep -q -- \"--gate-unjudged: 'ignore' is not pass, hold or revert\""
check "--gate-unjudged without a gate is refused" sh -c \
	"'$PLANE_BIN' --listen 127.0.0.1:0 --data '$WORK/y.data' --insecure --gate-unjudged hold 2>&1 | grep -q -- '--gate-unjudged needs a gate'"
done_testing
