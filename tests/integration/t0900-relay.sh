#!/usr/bin/env bash
# t0900-relay.sh: relay mode (--upstream). A chain origin -> r1 -> r2 ->
# agents, signed by the origin and verified by the agents (--trust), one
# of them with a subscription (its statements come from the origin through
# both relays). A relay's deltas are byte for byte the origin's, apart from
# the statement's issue. r2 restarts and its agents resume by delta; the
# origin goes down and the relays keep serving (a relay's heartbeats say
# so), then resume by delta; r2 is killed with kill -9 and its agents move
# to r3 by delta, with no snapshot. The origin lists every node with the
# relays in between.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# ---- helpers of this test ---------------------------------------------------

# metric_of URL NAME: an unlabelled metric of the plane at URL.
metric_of() {
	curl -sS "$1/metrics" | awk -v m="$2" '$1 == m {print $2}'
}
# via_of NODE: the origin's via column of NODE, comma-joined.
via_of() {
	curl -sS "$ORIGIN/v1/nodes/$1" | jq -r '.via | join(",")'
}
via_is() {
	[ "$(via_of "$1")" = "$2" ]
}
# via_in NODE VIA...: the origin's via column of NODE is one of these
via_in() {
	local v n=$1
	shift
	v=$(via_of "$n")
	for want in "$@"; do
		[ "$v" = "$want" ] && return 0
	done
	return 1
}
connected_on() {
	[ "$(curl -sS "$1/v1/nodes/$2" | jq -r .connected)" = true ]
}
# poll URL BASE SUB: the raw body of a poll at BASE with SUB, its signed
# statement left out (the relay forwards one the origin signed, maybe at
# another second).
poll() {
	curl -sS "$1/v1/config?node=probe&version=$2${3:+&sub=$3}" | sed 's/"statement":"[^"]*",//'
}
put_file() {
	curl -sS -X PUT --data-binary "{\"path\":\"$1.txt\",\"content\":\"$2\\n\"}" "$ORIGIN/v1/resources/file/$1" |
		jq -r .version
}
# snapshots_on URL: the snapshots the plane at URL has sent.
snapshots_on() {
	metric_of "$1" tether_snapshots_total
}

# ---- a chain: origin -> r1 -> r2 -------------------------------------------------

"$CTL_BIN" keygen "$WORK/sign" >/dev/null || bail "keygen failed"
start_plane origin --heartbeat 1 --signing-key "$WORK/sign"
ORIGIN=$PLANE_URL
ORIGIN_PID=$PLANE_PID
ORIGIN_PORT=$PLANE_PORT
put_file a one >/dev/null
curl -sS -X PUT --data-binary '{"endpoints":[{"address":"127.0.0.1","port":9001}]}' \
	"$ORIGIN/v1/resources/cluster/web" >/dev/null
V=$(plane_version)

start_plane r1 --upstream "$ORIGIN" --relay-id r1 --heartbeat 1
R1=$PLANE_URL
R1_LOG=$PLANE_LOG
R1_PID=$PLANE_PID
R1_PORT=$PLANE_PORT
start_plane r2 --upstream "$R1" --relay-id r2 --heartbeat 1
R2=$PLANE_URL
R2_LOG=$PLANE_LOG
R2_PORT=$PLANE_PORT
R2_PID=$PLANE_PID
# r3 knows two upstreams: r1, then the origin itself
start_plane r3 --upstream "$R1,$ORIGIN" --relay-id r3 --heartbeat 1
R3=$PLANE_URL
R3_LOG=$PLANE_LOG
PLANE_URL=$ORIGIN
check_eq "each relay starts at the origin's version" "$V $V $V" \
	"$(for u in "$R1" "$R2" "$R3"; do curl -sS "$u/healthz" | jq -r .version; done | xargs)"

start_agent a1 --plane "$R2,$R3" --trust "$WORK/sign.pub" --backoff-max 1 --stream-timeout 3
start_agent a2 --plane "$R2,$R3" --trust "$WORK/sign.pub" --backoff-max 1 --stream-timeout 3 --sub file/
start_agent b1 --plane "$R1" --trust "$WORK/sign.pub" --backoff-max 1 --stream-timeout 3
check "the three agents verify and apply version $V through the relays" wait_until 20 all_at "$V" a1 a2 b1
check_eq "a1 holds the file" "one" "$(cat "$WORK/a1.out/a.txt")"
check_eq "a2, subscribed to file/ only, holds the file" "one" "$(cat "$WORK/a2.out/a.txt")"
check_eq "every agent is synced" "synced synced synced" "$(st a1 state) $(st a2 state) $(st b1 state)"
check "the origin lists a1 behind r1 and r2" wait_until 10 via_is a1 r1,r2
check "... and b1 behind r1" wait_until 10 via_is b1 r1
check "... a1 connected" wait_until 10 connected_on "$ORIGIN" a1
check_eq "r1 lists its own node only" "b1" "$(curl -sS "$R1/v1/nodes" | jq -r '[.[].node] | join(" ")')"

V2=$(put_file a two)
check "a change at the origin reaches the agents behind two relays" wait_until 10 all_at "$V2" a1 a2 b1
check_eq "... content and all" "two two" "$(cat "$WORK/a1.out/a.txt") $(cat "$WORK/a2.out/a.txt")"
check "their ACKs reach the origin" wait_until 10 sh -c \
	"curl -sS '$ORIGIN/v1/nodes/a2' | jq -e '.acked_version == $V2' >/dev/null"
curl -sS -X DELETE "$ORIGIN/v1/resources/file/a" >/dev/null
V3=$(put_file b three)
check "a removal and an upsert reach them" wait_until 10 all_at "$V3" a1 a2 b1
check "the removed file is gone behind the relays" test ! -e "$WORK/a1.out/a.txt"

# ---- a relay's deltas are the origin's -------------------------------------------

same=0
total=0
for base in 0 1 2 "$V2" "$((V3 - 1))" "$V3"; do
	for sub in "" file/ cluster/; do
		total=$((total + 1))
		o=$(poll "$ORIGIN" "$base" "$sub")
		r=$(poll "$R2" "$base" "$sub")
		if [ "$o" = "$r" ] && [ -n "$o" ]; then
			same=$((same + 1))
		else
			diag "base $base sub '$sub': origin $o"
			diag "base $base sub '$sub': r2     $r"
		fi
	done
done
check_eq "r2's pushes are byte for byte the origin's ($total bases and subscriptions)" "$total" "$same"
check_eq "r2 signed nothing: what it forwards is the origin's (and a2 verified it)" 0 \
	"$(metric_of "$R2" tether_statements_signed_total)"
check "r2 asked r1 for the statements of a2's subscription" test "$(metric_of "$R2" tether_statements_fetched_total)" -ge 1

# ---- r1 restarts: the relays and the agent below it resume by delta ----------------

stop_pid "$R1_PID"
snaps=$(snapshots_on "$R2")
start_plane r1b --upstream "$ORIGIN" --relay-id r1 --heartbeat 1 --listen "127.0.0.1:$R1_PORT"
R1_PID=$PLANE_PID
R1_LOG=$PLANE_LOG
PLANE_URL=$ORIGIN
check "the restarted r1 took the origin's state" grep -q "relay r1: following from version 0" "$WORK/origin.log"
check "r2 follows it again from its own version ($V3)" wait_until 20 grep -q "relay r2: following from version $V3" "$R1_LOG"
# r3 may have moved to its second upstream, the origin, meanwhile
check "so does r3 (on r1 or on the origin)" wait_until 20 sh -c \
	"grep -q 'relay r3: following from version $V3' '$R1_LOG' '$WORK/origin.log'"
check "b1 is back on r1 at its version" wait_until 20 grep -q "stream: node b1 connected at version $V3" "$R1_LOG"
V4=$(put_file c four)
check "a change after the restart reaches every agent" wait_until 15 all_at "$V4" a1 a2 b1
check_eq "the restarted r1 sent no snapshot (to b1, or in a state to r2 or r3)" "0 $snaps" \
	"$(snapshots_on "$R1") $(snapshots_on "$R2")"

# ---- the origin goes down: the relays serve what they hold ------------------------

stop_pid "$ORIGIN_PID"
check "r1 notices it lost its upstream" wait_until 10 grep -q "relay: lost upstream $ORIGIN" "$R1_LOG"
hb=$(curl -sS -N -m 3 "$R1/v1/stream?node=probe2&version=$V4" | grep -m1 -A1 'event: heartbeat' | sed -n 's/^data: //p')
check "r1's heartbeats say the upstream is down" jq -e '.upstream_down == true' <<<"$hb"
check_eq "r1's healthz still answers, saying the upstream is down" "$V4 false" \
	"$(curl -sS "$R1/healthz" | jq -r '"\(.version) \(.upstream_up)"')"
check_eq "... and so does its metric" 0 "$(metric_of "$R1" tether_relay_upstream_up)"
check "the agents keep their files and version" all_at "$V4" a1 a2 b1
check_eq "... b1's file is there" "four" "$(cat "$WORK/b1.out/c.txt")"
check "a write to a relay is refused meanwhile" test "$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$R1/v1/resources/file/c")" = 421

start_plane origin2 --heartbeat 1 --signing-key "$WORK/sign" --data "$WORK/origin.data" \
	--listen "127.0.0.1:$ORIGIN_PORT"
PLANE_URL=$ORIGIN
check "r1 follows the origin again from its own version (a delta)" wait_until 20 \
	grep -q "relay r1: following from version $V4" "$WORK/origin2.log"
V5=$(put_file d five)
check "a change after the outage reaches every agent" wait_until 15 all_at "$V5" a1 a2 b1
check_eq "no relay took a snapshot: r1 followed from $V4" "0" "$(grep -c 'relay r1: following from version 0' "$WORK/origin2.log")"

# ---- r2 is killed: its agents move to r3 by delta --------------------------------------

snap_before=$(snapshots_on "$R3")
stop_pid "$R2_PID" KILL
check "a1 moves to r3" wait_until 20 sh -c "[ \"\$(jq -r .plane '$WORK/a1.state/status.json')\" = '$R3' ]"
check "a2 moves to r3" wait_until 20 sh -c "[ \"\$(jq -r .plane '$WORK/a2.state/status.json')\" = '$R3' ]"
# (they may be there already: agents move off a stale relay, and r2 was
# stale while the origin was down)
check "r3 took them at their version (by delta, never from 0)" wait_until 10 \
	grep -Eq "stream: node a1 connected at version [1-9]" "$WORK/r3.log"
check_eq "r3 sent no snapshot" "$snap_before" "$(snapshots_on "$R3")"
V6=$(put_file e six)
check "a change reaches them on r3" wait_until 15 all_at "$V6" a1 a2
check "the origin lists a1 behind r3 now (and r1, unless r3 moved to the origin)" wait_until 10 via_in a1 r1,r3 r3
diag "a1 via $(via_of a1)"

# ---- r1 is killed: r3 moves to its second upstream, the origin, by delta ----------------

# (r3 may be there already: it moves off an upstream that says it is
# stale, as r1 did while the origin was down)
stop_pid "$R1_PID" KILL
check "r3 follows the origin now, by delta (from version $V6, or earlier if it moved off a stale r1)" \
	wait_until 20 grep -Eq "relay r3: following from version [1-9]" "$WORK/origin2.log"
check_eq "... never from version 0" 0 "$(grep -c 'relay r3: following from version 0' "$WORK/origin2.log")"
check "r3 says where it is" wait_until 10 sh -c \
	"curl -sS '$R3/healthz' | jq -e '.upstream == \"$ORIGIN\" and .upstream_up' >/dev/null"
V7=$(put_file f seven)
check "a change reaches a1 and a2 through r3 from the origin" wait_until 15 all_at "$V7" a1 a2
check "the origin lists a1 behind r3 alone" wait_until 10 via_is a1 r3
check_eq "r3 sent its nodes no snapshot through all of it" "$snap_before" "$(snapshots_on "$R3")"

done_testing
