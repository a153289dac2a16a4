#!/usr/bin/env bash
# t0125-plane-crash-ack.sh: a plane killed right after it pushed a version
# (before its write-behind saved the push's nonce) still ends up with the
# node's ACK of that version: the agent applies the push while the plane is
# down, its ACK of the lost nonce is stale to the restarted plane, and when
# it reconnects holding the version the plane has no ACK of, the plane sends
# it one version-only push to ACK. A clean restart sends nothing.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# ---- helpers of this test ---------------------------------------------------

DATA=$WORK/plane.data
MARK=$WORK/checking

# restart NAME SIGNAL: stops the plane with SIGNAL, starts it again on the
# same port and data directory
restart() {
	stop_pid "$PLANE_PID" "$2"
	start_plane "$1" --heartbeat 1 --listen "127.0.0.1:$PORT" --data "$DATA"
	[ "$PLANE_PORT" = "$PORT" ] || bail "the plane came back on port $PLANE_PORT, not $PORT"
}

# acked NODE VERSION: the plane's record says NODE acked VERSION, lag 0
acked() {
	node_acked "$1" "$2" && [ "$(node_field "$1" .lag)" = 0 ]
}

# wait_mark: spins (no sleep: the plane must die within its 200 ms
# write-behind) until the agent's check has started, 10 s at most
wait_mark() {
	local deadline=$(($(date +%s) + 10))
	while [ ! -e "$MARK" ]; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
	done
}

applies() {
	grep -c 'applied version' "$WORK/a1.log"
}

# ---- a plane and one agent whose check takes a second -----------------------------

start_plane p1 --heartbeat 1 --data "$DATA"
PORT=$PLANE_PORT
put file/a '{"path":"a.txt","content":"v1\n"}' >/dev/null
V1=$(plane_version)
start_agent a1 --backoff-min 0.1 --backoff-max 0.5 --check "touch '$MARK'; sleep 1"
check "the agent applies version $V1" wait_until 20 agent_at a1 "$V1"
check "the plane has its ACK" wait_until 10 acked a1 "$V1"

# ---- kill -9 right after a push, three times ------------------------------------------

for round in 1 2 3; do
	rm -f "$MARK"
	put file/a "{\"path\":\"a.txt\",\"content\":\"v$((round + 1))\\n\"}" >/dev/null
	V=$(plane_version)
	check "round $round: the push of version $V reaches the agent (its check runs)" wait_mark
	restart "p-kill$round" KILL
	check "round $round: the agent applies version $V" wait_until 20 agent_at a1 "$V"
	check "round $round: the restarted plane records its ACK of version $V (lag 0)" wait_until 20 acked a1 "$V"
	diag "round $round: stale ACKs of a1: $(node_field a1 .stale_acks)"
done
check_eq "the agent's file holds the last content" "v4" "$(cat "$WORK/a1.out/a.txt" 2>/dev/null)"

# ---- a clean restart: the records were saved, nothing is pushed ---------------------------

A_BEFORE=$(applies)
restart p-term TERM
check "the agent reconnects" wait_until 20 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/a1' | jq -r .connected)\" = true ]"
check "the plane still has its ACK" acked a1 "$(plane_version)"
# three heartbeats on the new stream: a push would have come before them
check "three heartbeats later" wait_until 10 sh -c "[ \$(curl -s '$PLANE_URL/metrics' | awk '\$1 == \"tether_heartbeats_total\" {print \$2}') -ge 3 ]"
check_eq "the restarted plane pushed nothing" 0 "$(metric tether_pushes_total)"
check_eq "the agent applied nothing on reconnecting" "$A_BEFORE" "$(applies)"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
