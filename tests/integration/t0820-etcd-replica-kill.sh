#!/usr/bin/env bash
# t0820-etcd-replica-kill.sh: kill -9 of a plane replica holding 1,000
# simulated nodes (bench/sse_load, each a stream that comes back on the
# other replica, as tetherd --plane A,B does): every node is on the
# survivor within 10 s, resumed by delta from the version it held -- zero
# snapshots -- including the write made while they moved. (The client
# lingers: the plane sees a closed stream at once, and the count is read
# while they are held.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
LOAD=$TOP_BUILDDIR/bench/sse_load
[ -x "$LOAD" ] || bail "no $LOAD: build it (make check builds it)"
need_cmd jq curl
N=1000

etcd_cluster_start 3
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix /t0820/ --heartbeat 1)
start_plane a "${E[@]}"
A_URL=$PLANE_URL A_PID=$PLANE_PID A_PORT=$PLANE_PORT
start_plane b "${E[@]}"
B_URL=$PLANE_URL B_PORT=$PLANE_PORT
PLANE_URL=$A_URL put file/one '{"path":"one.txt","content":"1\n"}' >/dev/null
check_eq "version 1 is written" 1 "$(curl -fsS "$A_URL/v1/resources" | jq -r .version)"
check "b has it" wait_until 10 sh -c "[ \"\$(curl -fsS '$B_URL/v1/resources' | jq -r .version)\" = 1 ]"

"$LOAD" -n "$N" --version 1 --prefix sim- --failover "127.0.0.1:$B_PORT" --timeout 60 --linger 120 \
	"127.0.0.1:$A_PORT" >"$WORK/load.out" 2>"$WORK/load.err" &
LP=$!
track_pid "$LP"
check "$N simulated nodes hold streams on a" wait_until 60 grep -q '^ready=1' "$WORK/load.out"
kv() { sed -n "s/^$1=//p" "$WORK/load.out" | tail -n 1; }
check_eq "... all $N of them" "$N" "$(kv connect.ok)"
snap0=$(curl -fsS "$B_URL/metrics" | awk '$1 == "tether_snapshots_total" {print $2}')
push0=$(curl -fsS "$B_URL/metrics" | awk '$1 == "tether_pushes_total" {print $2}')

kill -KILL "$A_PID"
untrack_pid "$A_PID"
# a write while they move: each node comes back at 1 and needs 1 -> 2
PLANE_URL=$B_URL put file/two '{"path":"two.txt","content":"2\n"}' >/dev/null
check "every node comes back (on b)" wait_until 30 grep -q '^reconnect\.done=1' "$WORK/load.out"
check_eq "... all $N" "$N" "$(kv reconnect.back)"
ms=$(kv reconnect.all_back_ms)
diag "all back $ms ms after the first loss"
check "... within 10 s of the kill ($ms ms)" awk -v m="$ms" 'BEGIN {exit !(m > 0 && m < 10000)}'
check_eq "b sent no snapshot: every node resumed by delta" "$snap0" \
	"$(curl -fsS "$B_URL/metrics" | awk '$1 == "tether_snapshots_total" {print $2}')"
check "b sent each of them a push (the delta 1 -> 2)" wait_until 10 sh -c \
	"[ \$((\$(curl -fsS '$B_URL/metrics' | awk '\$1 == \"tether_pushes_total\" {print \$2}') - $push0)) -ge $N ]"
check "b counts the nodes connected" wait_until 10 sh -c \
	"[ \"\$(curl -fsS '$B_URL/metrics' | awk '\$1 == \"tether_streams\" {print \$2}')\" -ge $N ]"
wait "$LP"
untrack_pid "$LP"

done_testing
