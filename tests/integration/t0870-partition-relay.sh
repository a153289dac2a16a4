#!/usr/bin/env bash
# t0870-partition-relay.sh: a relay cut off from its origin says it is
# stale and its nodes move to a relay that is not (issue 22). An origin
# (defaults), two relays that each dial it through an alias address
# nftables can cut (lib-partition.sh), four agents: n1, n2 list r1 first,
# n3, n4 list r2 first. Cases:
#   - r1 cut from the origin (both ways): r1 is stale within three of the
#     origin's relay heartbeats; a write on the origin reaches n1, n2 on
#     r2, by delta;
#   - a one-way cut (the origin's answers to r2 dropped): the same;
#   - both relays cut: the nodes stay, marked stale;
#   - healing: no snapshots, nothing lost, everyone converges.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-partition.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
part_init

metric_of() {
	curl -sS "$1/metrics" | awk -v m="$2" '$1 == m {print $2}'
}
put_file() {
	curl -sS -X PUT --data-binary "{\"path\":\"$1.txt\",\"content\":\"$2\\n\"}" "$ORIGIN/v1/resources/file/$1" |
		jq -r .version
}
agent_metric() {
	awk -v m="$2" '$1 == m {print $2}' "$WORK/$1.prom" 2>/dev/null
}
on_plane() {
	[ "$(st "$1" plane)" = "$2" ]
}
now_ms() {
	echo $(($(date +%s%N) / 1000000))
}
all_state() {
	local want=$1 n
	for n in "${NODES[@]}"; do
		[ "$(st "$n" state)" = "$want" ] || return 1
	done
}

start_plane origin
ORIGIN=$PLANE_URL ORIGIN_PORT=$PLANE_PORT
part_alias O1 "$ORIGIN_PORT"
part_alias O2 "$ORIGIN_PORT"
start_plane r1 --upstream "http://$O1:$ORIGIN_PORT" --relay-id r1
R1=$PLANE_URL R1_LOG=$PLANE_LOG
start_plane r2 --upstream "http://$O2:$ORIGIN_PORT" --relay-id r2
R2=$PLANE_URL R2_LOG=$PLANE_LOG

V1=$(put_file app one)
NODES=(n1 n2 n3 n4)
for n in n1 n2; do
	start_agent "$n" --plane "$R1,$R2" --metrics-file "$WORK/$n.prom" --log-level debug
done
for n in n3 n4; do
	start_agent "$n" --plane "$R2,$R1" --metrics-file "$WORK/$n.prom" --log-level debug
done
check "the four agents reach version $V1 through the relays" wait_until 30 fleet_at "$V1"
check_eq "the origin's heartbeats to relays come every 2 s at most" 2 \
	"$(curl -sS -N -m 4 "$ORIGIN/v1/relay/stream?relay=probe&version=$V1" | grep -m1 -A1 'event: heartbeat' |
		sed -n 's/^data: //p' | jq -r .interval)"
snaps_r1=$(metric_of "$R1" tether_snapshots_total)
snaps_r2=$(metric_of "$R2" tether_snapshots_total)

# ---- r1 cut from the origin ----------------------------------------------------

part_cut "$O1"
V2=$(put_file app two)
t_write=$(now_ms)
check "r1 says it is stale" wait_until 30 grep -q "stale: this plane cannot vouch that it is current" "$R1_LOG"
check "n1 and n2 have $V2 (they moved to r2)" wait_until 40 fleet_at "$V2"
t_all=$(now_ms)
diag "the write reached every node of the cut relay in $((t_all - t_write)) ms"
echo "$((t_all - t_write))" >"$WORK/bound.ms"
check "n1 is on r2" on_plane n1 "$R2"
check "n2 is on r2" on_plane n2 "$R2"
check_eq "r2 sent no snapshot: the moves were deltas" "$snaps_r2" "$(metric_of "$R2" tether_snapshots_total)"
check_eq "r1's /healthz answers 503" 503 "$(curl -s -o "$WORK/hz.json" -w '%{http_code}' "$R1/healthz")"
check "... saying it cannot follow its upstream" jq -e '.status == "stale" and (.stale.why | test("upstream"))' \
	"$WORK/hz.json"
check_eq "r1's tether_stale is 1" 1 "$(metric_of "$R1" tether_stale)"
check_eq "r2's is 0" 0 "$(metric_of "$R2" tether_stale)"
check_eq "n1 counts one move off a stale plane" 1 "$(agent_metric n1 tetherd_stale_moves_total)"

# ---- healed, then a one-way cut of r2: the origin's answers lost -----------------------

part_heal "$O1"
check "r1 is current again" wait_until 30 grep -q "stale no more" "$R1_LOG"
V3=$(put_file app three)
check "healed: $V3 reaches every node" wait_until 30 fleet_at "$V3"
part_cut "$O2" back
V4=$(put_file app four)
check "r2 says it is stale (the origin's bytes never come)" wait_until 30 \
	grep -q "stale: this plane cannot vouch that it is current" "$R2_LOG"
check "every node has $V4 (r2's moved to r1)" wait_until 40 fleet_at "$V4"
check "n3 is on r1" on_plane n3 "$R1"
part_heal "$O2"
check "r2 is current again" wait_until 30 grep -q "stale no more" "$R2_LOG"

# ---- both relays cut: the nodes stay, marked stale -----------------------------------

# (the relays notice a moment apart: a node may move once to the other
# before it says stale too; then nobody moves)
moves_of_all() {
	local n
	for n in "${NODES[@]}"; do
		echo "$n $(agent_metric "$n" tetherd_stale_moves_total)"
	done
}
moves_before=$(moves_of_all)
part_cut "$O1"
part_cut "$O2"
V5=$(put_file app five)
check "every node reports itself stale" wait_until 40 all_state stale
all_said() {
	local n
	for n in "${NODES[@]}"; do
		grep -q "every plane listed is stale" "$WORK/$n.log" || return 1
	done
}
check "every node says every plane is stale, and stays" wait_until 30 all_said
moves_mid=$(moves_of_all)
at_most_one_more() {
	join <(echo "$moves_before") <(echo "$moves_mid") | awk '$3 - $2 > 1 { bad = 1 } END { exit bad }'
}
check "no node moved more than once while both were cut off" at_most_one_more
check "... and serves $V4 (what the relays hold)" fleet_at "$V4"
# a round of looking for a current plane later (each node asks again every
# heartbeat interval), still nobody moved
probes=$(grep -c "fresh: probing" "$WORK/n1.log")
check "n1 looked for a current plane again" wait_until 60 sh -c "[ \$(grep -c 'fresh: probing' '$WORK/n1.log') -gt $probes ]"
check_eq "... and nobody moved" "$moves_mid" "$(moves_of_all)"
part_heal "$O1"
part_heal "$O2"
check "healed: $V5 (written during the cut) reaches every node" wait_until 40 fleet_at "$V5"
check "every node is synced again" wait_until 30 all_state synced
check_eq "nothing lost: each node's file holds the last write" "" "$(wrong_content app.txt five)"
check_eq "no relay sent a snapshot after the first sync" "$snaps_r2 $snaps_r1" \
	"$(metric_of "$R2" tether_snapshots_total) $(metric_of "$R1" tether_snapshots_total)"
sanitizer_check
done_testing
