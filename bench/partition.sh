#!/usr/bin/env bash
# bench/partition.sh: how long a write takes to reach every node of a plane
# cut off from its source, with the defaults (`bash bench/partition.sh
# SRCDIR BUILDDIR`; docs/BENCHMARKS.md, "Partitions"). Needs root and
# nftables (tests/integration/lib-partition.sh makes the partitions).
#
# Replicas: a 3-member etcd on loopback, replicas a and b (default
# --lease-ttl 10 and --heartbeat 10), BENCH_PART_NODES (20) tetherd agents
# listing both. Each round cuts the replica every node is on from etcd
# (both ways, established connections included), writes on the other, and
# times the write until the last node holds it (they move by delta); then
# heals and waits until the cut replica is current again. Rounds alternate
# between a and b, so every node moves every round. Relays: an origin
# (defaults), relays r1 and r2, the same agents listing both; the same
# rounds, cutting a relay from the origin. Flapping: the nodes on a, then a
# cut until it says stale and healed until it says current, five times in
# a row; the moves each node made.
#
# Prints key=value results (also in BUILDDIR/bench-partition.txt): the
# median and the largest write-to-last-node time per kind, the moves per
# node while flapping. Knobs: BENCH_PART_ROUNDS (6), BENCH_PART_NODES (20).
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=$(cd "${1:?usage: partition.sh SRCDIR BUILDDIR}" && pwd)
BUILDDIR=$(cd "${2:?usage: partition.sh SRCDIR BUILDDIR}" && pwd)
ROUNDS=${BENCH_PART_ROUNDS:-6}
NNODES=${BENCH_PART_NODES:-20}
RESULTS=$BUILDDIR/bench-partition.txt

export TOP_SRCDIR=$SRCDIR TOP_BUILDDIR=$BUILDDIR
mkdir -p "$BUILDDIR/bench-out"
export TMPDIR=$BUILDDIR/bench-out
KEEP_WORK=1   # the logs and the rounds' times stay for a look
. "$SRCDIR/tests/integration/lib.sh"
. "$SRCDIR/tests/integration/lib-etcd.sh"
. "$SRCDIR/tests/integration/lib-partition.sh"
[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (scripts/deps installs etcd-server)"
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
part_init

say() {
	echo "# bench-partition: $*" >&2
}
now_ms() {
	echo $(($(date +%s%N) / 1000000))
}
put_on() {
	curl -sS -X PUT --data-binary "{\"path\":\"app.txt\",\"content\":\"$2\\n\"}" "$1/v1/resources/file/app" |
		jq -r .version
}
# stats: "median max" of the numbers on stdin
stats() {
	sort -n | awk '{ v[NR] = $1 } END { if (!NR) { print "- -"; exit } print v[int((NR + 1) / 2)], v[NR] }'
}
lines_of() {
	grep -c "$2" "$1" 2>/dev/null
}
# wait_line FILE PATTERN BEFORE: FILE has more lines with PATTERN than BEFORE
wait_line() {
	wait_until 60 sh -c "[ \$(grep -c '$2' '$1') -gt $3 ]"
}
start_nodes() {
	local n
	NODES=()
	for n in $(seq 1 "$NNODES"); do
		NODES+=("n$n")
		start_agent "n$n" --plane "$1" --metrics-file "$WORK/n$n.prom"
	done
}
stop_nodes() {
	local n
	for n in "${NODES[@]}"; do
		stop_pid "${APID[$n]}"
		rm -rf "$WORK/$n.state" "$WORK/$n.out" "$WORK/$n.prom"
	done
}
moves_of() {
	awk '$1 == "tetherd_stale_moves_total" { print $2 }' "$WORK/$1.prom" 2>/dev/null
}

# rounds KIND URL1 LOG1 ALIAS1 URL2 LOG2 ALIAS2 WRITE_URL_FN: cut the side
# the nodes are on, write, time until every node has it
rounds() {
	local kind=$1 i side t0 v before
	local -a url=("$2" "$5") log=("$3" "$6") alias=("$4" "$7")
	: >"$WORK/$kind.ms"
	side=0
	for i in $(seq 1 "$ROUNDS"); do
		before=$(lines_of "${log[$side]}" 'stale no more')
		part_cut "${alias[$side]}"
		v=$(put_on "$(write_url "$kind" $((1 - side)))" "$kind-$i")
		t0=$(now_ms)
		if wait_until 120 fleet_at "$v"; then
			echo $(($(now_ms) - t0)) >>"$WORK/$kind.ms"
		else
			say "$kind round $i: not every node reached $v in 120 s: $(nodes_not_at "$v")"
			echo 120000 >>"$WORK/$kind.ms"
		fi
		part_heal "${alias[$side]}"
		wait_line "${log[$side]}" 'stale no more' "$before" || say "$kind round $i: the cut side did not come back"
		side=$((1 - side))
	done
}

# ---- replicas over etcd ----------------------------------------------------------
etcd_cluster_start 3
part_alias A_ETCD "${ETCD_CLIENT[1]}" "${ETCD_CLIENT[2]}" "${ETCD_CLIENT[3]}"
part_alias B_ETCD "${ETCD_CLIENT[1]}" "${ETCD_CLIENT[2]}" "${ETCD_CLIENT[3]}"
via() {
	echo "http://$1:${ETCD_CLIENT[1]},http://$1:${ETCD_CLIENT[2]},http://$1:${ETCD_CLIENT[3]}"
}
start_plane a --store etcd --etcd-prefix /bench-part/ --etcd "$(via "$A_ETCD")"
A_URL=$PLANE_URL A_LOG=$PLANE_LOG
start_plane b --store etcd --etcd-prefix /bench-part/ --etcd "$(via "$B_ETCD")"
B_URL=$PLANE_URL B_LOG=$PLANE_LOG
write_url() {
	case $1 in
	replica) [ "$2" = 0 ] && echo "$A_URL" || echo "$B_URL" ;;
	relay) echo "$ORIGIN" ;;
	esac
}
v=$(put_on "$A_URL" start)
start_nodes "$A_URL,$B_URL"
wait_until 60 fleet_at "$v" || bail "the agents did not start"
say "replicas: $ROUNDS rounds, $NNODES nodes"
rounds replica "$A_URL" "$A_LOG" "$A_ETCD" "$B_URL" "$B_LOG" "$B_ETCD"

# flapping: every node on a (restarted), a flaps five times
stop_nodes
start_nodes "$A_URL,$B_URL"
wait_until 60 fleet_at "$(put_on "$B_URL" flap-start)" || say "the agents did not come back on a"
say "flapping: a cut until stale, healed until current, five times"
for i in 1 2 3 4 5; do
	s=$(lines_of "$A_LOG" 'stale: this plane cannot vouch')
	f=$(lines_of "$A_LOG" 'stale no more')
	part_cut "$A_ETCD"
	wait_line "$A_LOG" 'stale: this plane cannot vouch' "$s" || say "flap $i: a did not go stale"
	part_heal "$A_ETCD"
	wait_line "$A_LOG" 'stale no more' "$f" || say "flap $i: a did not come back"
done
v=$(put_on "$B_URL" flap-end)
wait_until 60 fleet_at "$v" || say "after flapping not every node has $v: $(nodes_not_at "$v")"
for n in "${NODES[@]}"; do moves_of "$n"; done >"$WORK/flap.moves"
stop_nodes

# ---- relays ------------------------------------------------------------------------
start_plane origin
ORIGIN=$PLANE_URL ORIGIN_PORT=$PLANE_PORT
part_alias O1 "$ORIGIN_PORT"
part_alias O2 "$ORIGIN_PORT"
start_plane r1 --upstream "http://$O1:$ORIGIN_PORT" --relay-id r1
R1=$PLANE_URL R1_LOG=$PLANE_LOG
start_plane r2 --upstream "http://$O2:$ORIGIN_PORT" --relay-id r2
R2=$PLANE_URL R2_LOG=$PLANE_LOG
v=$(put_on "$ORIGIN" relay-start)
start_nodes "$R1,$R2"
wait_until 60 fleet_at "$v" || bail "the agents did not start on the relays"
say "relays: $ROUNDS rounds, $NNODES nodes"
rounds relay "$R1" "$R1_LOG" "$O1" "$R2" "$R2_LOG" "$O2"

read -r rep_med rep_max < <(stats <"$WORK/replica.ms")
read -r rel_med rel_max < <(stats <"$WORK/relay.ms")
read -r mv_med mv_max < <(stats <"$WORK/flap.moves")
{
	echo "# bench/partition.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "nodes=$NNODES rounds=$ROUNDS"
	echo "replica_cut_write_to_last_node_ms_median=$rep_med"
	echo "replica_cut_write_to_last_node_ms_max=$rep_max"
	echo "replica_rounds_ms=$(paste -sd, "$WORK/replica.ms")"
	echo "relay_cut_write_to_last_node_ms_median=$rel_med"
	echo "relay_cut_write_to_last_node_ms_max=$rel_max"
	echo "relay_rounds_ms=$(paste -sd, "$WORK/relay.ms")"
	echo "flapping_moves_per_node_median=$mv_med"
	echo "flapping_moves_per_node_max=$mv_max"
} | tee "$RESULTS"
