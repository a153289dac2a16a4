# bench/etcd.sh: `make bench` (run as `$SHELL bench/etcd.sh SRCDIR BUILDDIR`).
# The etcd store against the embedded one, in the same run, on a
# three-member etcd cluster of Debian's etcd-server on loopback:
#   (a) admin write latency: BENCH_ETCD_WRITES (200) one-resource PUTs one
#       after another, p50 and p99 (curl's time_total), SQLite vs etcd;
#   (b) etcd writes per push: the etcd revisions those writes made, per
#       write, and the revisions 1,000 simulated nodes' ACKs of one push
#       made (node records batched by the keeper);
#   (c) fan-out: BENCH_ETCD_FANOUT (10000) streams, one write at a time
#       (BENCH_WRITES, 5), from just before the PUT until every stream has
#       the push: one SQLite plane holding them all, and two etcd replicas
#       holding half each (the write goes to the first; the second learns
#       it through its watch). p99 over every stream, median over writes;
#   (d) the reconnect storm: BENCH_ETCD_FANOUT streams on one replica, which
#       is killed (kill -9); every stream comes back on the other replica
#       (sse_load --failover, as tetherd --plane A,B): time from the first
#       loss until all are back, and the snapshots the survivor sent.
# Results in BUILDDIR/bench-etcd.txt, raw output in BUILDDIR/bench-out/etcd/.
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u

SRCDIR=${1:?usage: etcd.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: etcd.sh SRCDIR BUILDDIR}
PLANE_BIN=$BUILDDIR/tether-plane
LOAD_BIN=$BUILDDIR/bench/sse_load
ETCD_BIN=${ETCD_BIN:-$(command -v etcd || echo /usr/bin/etcd)}
WRITES_LAT=${BENCH_ETCD_WRITES:-200}
FAN=${BENCH_ETCD_FANOUT:-10000}
WRITES=${BENCH_WRITES:-5}
ACKERS=${BENCH_ETCD_ACKERS:-1000}
OUT=$BUILDDIR/bench-out/etcd
RESULTS=$BUILDDIR/bench-etcd.txt
BENCH_NAME=etcd
. "$(dirname "$0")/lib.sh"
need "$PLANE_BIN" "$LOAD_BIN" "$ETCD_BIN"
command -v jq >/dev/null && command -v python3 >/dev/null || die "etcd.sh needs jq and python3"
rm -rf "$OUT"
mkdir -p "$OUT"

wait_for() { wait_until "$3" grep -q -- "$2" "$1"; }

# ---- etcd ------------------------------------------------------------------------
EPORTS=()
free_ports() {
	python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}
start_etcd() {
	read -r -a EPORTS <<<"$(free_ports 6)"
	local i init="" ep=""
	for i in 0 1 2; do
		init="${init:+$init,}m$i=http://127.0.0.1:${EPORTS[$((i + 3))]}"
		ep="${ep:+$ep,}http://127.0.0.1:${EPORTS[$i]}"
	done
	for i in 0 1 2; do
		"$ETCD_BIN" --name "m$i" --data-dir "$OUT/etcd-$i" \
			--listen-client-urls "http://127.0.0.1:${EPORTS[$i]}" \
			--advertise-client-urls "http://127.0.0.1:${EPORTS[$i]}" \
			--listen-peer-urls "http://127.0.0.1:${EPORTS[$((i + 3))]}" \
			--initial-advertise-peer-urls "http://127.0.0.1:${EPORTS[$((i + 3))]}" \
			--initial-cluster "$init" --max-txn-ops 10000 >"$OUT/etcd-$i.log" 2>&1 &
		track $!
	done
	ETCD=$ep
	local ok=0
	for _ in $(seq 1 100); do
		curl -fsS -m 1 "http://127.0.0.1:${EPORTS[0]}/health" 2>/dev/null | grep -q '"health":"true"' && { ok=1; break; }
		sleep 0.2
	done
	[ $ok = 1 ] || die "etcd did not start (see $OUT/etcd-0.log)"
}
etcd_rev() {
	curl -fsS "http://127.0.0.1:${EPORTS[0]}/v3/kv/range" -d "{\"key\":\"$(printf x | base64)\"}" |
		sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p'
}

# ---- planes ----------------------------------------------------------------------
# start_plane NAME ARGS...: sets PORT_<NAME> and PID_<NAME>
start_plane() {
	local name=$1
	shift
	"$PLANE_BIN" --listen 127.0.0.1:0 --data "$OUT/$name.data" --heartbeat 3600 $PLANE_LAB_FLAGS "$@" \
		>"$OUT/$name.log" 2>&1 &
	local pid=$!
	track "$pid"
	wait_for "$OUT/$name.log" 'listening on ' 20 || die "plane $name did not start (see $OUT/$name.log)"
	printf -v "PID_$name" '%s' "$pid"
	printf -v "PORT_$name" '%s' "$(grep -o 'listening on [^ ]*' "$OUT/$name.log" | tail -n 1 | sed 's/.*://')"
}

# latency PORT TAG: WRITES_LAT one-resource PUTs; prints p50 and p99 in ms
latency() {
	local port=$1 tag=$2 i
	: >"$OUT/lat.$tag"
	for i in $(seq 1 "$WRITES_LAT"); do
		curl -sS -o /dev/null -w '%{time_total}\n' -X PUT \
			-d "$(cluster_body "$i")" "http://127.0.0.1:$port/v1/resources/cluster/lat$((i % 10))" >>"$OUT/lat.$tag"
	done
	echo "$(awk '{print $1 * 1000}' "$OUT/lat.$tag" | percentile 0.5) $(awk '{print $1 * 1000}' "$OUT/lat.$tag" | percentile 0.99)"
}

# fanout TAG PORT[,PORT]: FAN streams split over the planes; prints the
# median over the writes of the p99 over every stream (ms)
fanout() {
	local tag=$1 ports=$2 v p k=0 nports lp=() w
	IFS=, read -r -a pl <<<"$ports"
	nports=${#pl[@]}
	v=$(curl -fsS "http://127.0.0.1:${pl[0]}/v1/resources" | jq -r .version)
	: >"$OUT/start.$tag"
	for p in "${pl[@]}"; do
		"$LOAD_BIN" -n $((FAN / nports)) --version "$v" --prefix "$tag$k-" --wait-push $((v + 1)) --rounds "$WRITES" \
			--start-file "$OUT/start.$tag" --per-stream --timeout 300 "127.0.0.1:$p" \
			>"$OUT/load.$tag.$k" 2>"$OUT/load.$tag.$k.err" &
		lp+=($!)
		track $!
		k=$((k + 1))
	done
	for k in $(seq 0 $((nports - 1))); do
		wait_for "$OUT/load.$tag.$k" '^ready=1' 300 || die "fan-out $tag: streams did not open"
	done
	sleep 2
	PORT=${pl[0]}
	for w in $(seq 1 "$WRITES"); do
		timed_put cluster/fan "$(cluster_body $((1000 + w)))" "$OUT/start.$tag" >/dev/null || die "write failed"
		for k in $(seq 0 $((nports - 1))); do
			wait_for "$OUT/load.$tag.$k" "^round\\.$w\\.done=1" 120 || die "fan-out $tag: write $w not seen by all"
		done
		sleep 1
	done
	for p in "${lp[@]}"; do wait "$p"; untrack "$p"; done
	for w in $(seq 1 "$WRITES"); do
		cat "$OUT"/load."$tag".[0-9] | awk -v w="$w" '$1 ~ /^stream=/ && $3 == "round=" w {
			for (i = 1; i <= NF; i++) if ($i ~ /^latency_ms=/) { sub(/latency_ms=/, "", $i); print $i } }' |
			percentile 0.99
	done | median
}

# ---- run ---------------------------------------------------------------------------
log "machine: $MACHINE"
start_etcd
start_plane sqlite
start_plane ea --store etcd --etcd "$ETCD" --etcd-prefix /bench/
start_plane eb --store etcd --etcd "$ETCD" --etcd-prefix /bench/

log "write latency: $WRITES_LAT writes each"
read -r s50 s99 <<<"$(latency "$PORT_sqlite" sqlite)"
r0=$(etcd_rev)
read -r e50 e99 <<<"$(latency "$PORT_ea" etcd)"
r1=$(etcd_rev)
per_write=$(awk -v a="$r0" -v b="$r1" -v n="$WRITES_LAT" 'BEGIN {printf "%.2f", (b - a) / n}')

log "etcd load of ACKs: $ACKERS simulated nodes ACK one push"
"$LOAD_BIN" -n "$ACKERS" --version 0 --prefix ack- --ack --wait-push 1 --rounds 1 --timeout 120 \
	"127.0.0.1:$PORT_ea" >"$OUT/ack.out" 2>"$OUT/ack.err" &
ap=$!
track "$ap"
wait_for "$OUT/ack.out" '^ready=1' 120 || die "the ACKing nodes did not connect"
sleep 2   # their first ACKs and records written
ra=$(etcd_rev)
curl -fsS -o /dev/null -X PUT -d "$(cluster_body 7)" "http://127.0.0.1:$PORT_ea/v1/resources/cluster/ack"
wait_for "$OUT/ack.out" '^round\.1\.done=1' 60 || die "the ACKs were not all accepted"
sleep 2   # the keeper flushes the records
rb=$(etcd_rev)
wait "$ap"
untrack "$ap"
acks_revs=$((rb - ra - 1))

log "fan-out: $FAN streams, $WRITES writes: one SQLite plane"
fs=$(fanout sq "$PORT_sqlite")
log "fan-out: $FAN streams over two etcd replicas"
fe=$(fanout et "$PORT_ea,$PORT_eb")

log "reconnect storm: $FAN streams on a replica that is killed"
start_plane sa --store etcd --etcd "$ETCD" --etcd-prefix /bench/
start_plane sb --store etcd --etcd "$ETCD" --etcd-prefix /bench/
vs=$(curl -fsS "http://127.0.0.1:$PORT_sa/v1/resources" | jq -r .version)
"$LOAD_BIN" -n "$FAN" --version "$vs" --prefix storm- --failover "127.0.0.1:$PORT_sb" --timeout 300 \
	"127.0.0.1:$PORT_sa" >"$OUT/storm.out" 2>"$OUT/storm.err" &
sp=$!
track "$sp"
wait_for "$OUT/storm.out" '^ready=1' 300 || die "storm: streams did not open"
sleep 2
snap0=$(curl -fsS "http://127.0.0.1:$PORT_sb/metrics" | awk '$1 == "tether_snapshots_total" {print $2}')
kill -KILL "$PID_sa"
untrack "$PID_sa"
wait_for "$OUT/storm.out" '^reconnect\.done=1' 300 || die "storm: not every stream came back"
wait "$sp"
untrack "$sp"
snap1=$(curl -fsS "http://127.0.0.1:$PORT_sb/metrics" | awk '$1 == "tether_snapshots_total" {print $2}')
storm_ms=$(kv "$OUT/storm.out" reconnect.all_back_ms)
storm_back=$(kv "$OUT/storm.out" reconnect.back)

{
	bench_header "tether etcd store benchmark"
	echo
	echo "(a) admin write latency, $WRITES_LAT one-resource PUTs one after another (curl time_total):"
	echo "    SQLite (--data, fsync per commit):       p50 ${s50} ms, p99 ${s99} ms"
	echo "    etcd (3 members on loopback, one txn):   p50 ${e50} ms, p99 ${e99} ms"
	echo "(b) etcd revisions per write: $per_write (one transaction each)"
	echo "    etcd revisions for $ACKERS nodes' ACKs of one push: $acks_revs (node records batched, up to 100 per txn)"
	echo "(c) fan-out, $FAN streams, one write at a time, p99 over every stream (median of $WRITES writes):"
	echo "    one SQLite plane:                        ${fs} ms"
	echo "    two etcd replicas, $((FAN / 2)) streams each:   ${fe} ms (goal < 1000 ms)"
	echo "(d) reconnect storm: $FAN streams on a replica killed with kill -9:"
	echo "    $storm_back back on the other replica, all within ${storm_ms} ms of the first loss (goal < 10 s);"
	echo "    snapshots the survivor sent: $((snap1 - snap0)) (goal 0)"
} | tee "$RESULTS"
