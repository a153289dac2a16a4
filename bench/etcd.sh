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
#       loss until all are back, and the snapshots the survivor sent;
#   (e) against nodes that watch etcd directly (as APISIX does), the same
#       load client (sse_load) in the same run, the planes of (a)-(d)
#       stopped first: BENCH_ETCD_FANOUT connections each side, one write at
#       a time (BENCH_ETCD_DIRECT_WRITES, default BENCH_WRITES):
#         plane: two fresh replicas, half the SSE streams on each, the write
#           to the first (PUT /v1/resources/...);
#         direct: as many watches of a prefix through etcd's v3 JSON
#           gateway (sse_load --etcd-watch, POST /v3/watch), spread over the
#           three members' client ports, the write a put under the prefix
#           to the first member (/v3/kv/put, the same body);
#       fan-out from just before the write until every connection has it,
#       p50/p99/max over every connection (median over the writes), and
#       memory per connection: the growth of the servers' VmRSS (both
#       replicas; the three etcd members) from before the connections
#       opened to 2 s after the last one did, divided by their number.
# BENCH_ETCD_ONLY=direct runs (e) alone.
# Results in BUILDDIR/bench-etcd.txt (the figures of (e) also as key=value
# lines, direct.*), raw output in BUILDDIR/bench-out/etcd/.
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
DWRITES=${BENCH_ETCD_DIRECT_WRITES:-$WRITES}
ONLY=${BENCH_ETCD_ONLY:-}
OUT=$BUILDDIR/bench-out/etcd
RESULTS=$BUILDDIR/bench-etcd.txt
BENCH_NAME=etcd
. "$(dirname "$0")/lib.sh"
need "$PLANE_BIN" "$LOAD_BIN" "$ETCD_BIN"
command -v jq >/dev/null && command -v python3 >/dev/null || die "etcd.sh needs jq and python3"
rm -rf "$OUT"
mkdir -p "$OUT"


# ---- etcd ------------------------------------------------------------------------
EPORTS=()
EPIDS=()
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
		EPIDS+=($!)
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

# ---- (e) against nodes that watch etcd directly --------------------------------------

# etcd_timed_put KEY VALUE STARTFILE: one put to the first etcd member's
# JSON gateway on a connection opened first; the start time, taken just
# before the request goes out, is appended to STARTFILE (as timed_put).
# Prints the revision it made.
etcd_timed_put() {
	local body reply
	body="{\"key\":\"$(printf '%s' "$1" | base64 -w0)\",\"value\":\"$(printf '%s' "$2" | base64 -w0)\"}"
	exec 3<>"/dev/tcp/127.0.0.1/${EPORTS[0]}" || return 1
	local nl=$'\r\n'
	local req="POST /v3/kv/put HTTP/1.1${nl}Host: 127.0.0.1:${EPORTS[0]}${nl}"
	req+="Content-Type: application/json${nl}Content-Length: ${#body}${nl}Connection: close${nl}${nl}$body"
	local t0=$EPOCHREALTIME
	printf '%s' "$req" >&3
	printf '%s\n' "$t0" >>"$3"
	reply=$(cat <&3)
	exec 3>&-
	case $reply in
	"HTTP/1.1 200"*) ;;
	*) log "etcd put $1 failed: $(printf '%s' "$reply" | head -n 1)"; return 1 ;;
	esac
	printf '%s' "$reply" | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p'
}

# rss_sum PID...: the sum of their VmRSS, KiB
rss_sum() {
	local p t=0
	for p in "$@"; do t=$((t + $(rss_kb "$p"))); done
	echo "$t"
}

# etcd_go: the Go runtime's view of the three members, summed: heap and
# stack in use (KiB), and goroutines (from /metrics)
etcd_go() {
	local i
	for i in 0 1 2; do
		curl -fsS "http://127.0.0.1:${EPORTS[$i]}/metrics"
	done | awk '$1 == "go_memstats_heap_inuse_bytes" || $1 == "go_memstats_stack_inuse_bytes" { b += $2 }
		$1 == "go_goroutines" { g += $2 }
		END { printf "%.0f %.0f\n", b / 1024, g }'
}

# direct_round TAG W: p50 p99 max (ms) over every connection of round W
# in the load files of TAG
direct_round() {
	local vals
	vals=$(cat "$OUT"/direct."$1".[0-9] | awk -v w="$2" '$1 ~ /^stream=/ && $3 == "round=" w {
		for (i = 1; i <= NF; i++) if ($i ~ /^latency_ms=/) { sub(/latency_ms=/, "", $i); print $i } }')
	echo "$(percentile 0.5 <<<"$vals") $(percentile 0.99 <<<"$vals") $(percentile 1 <<<"$vals")"
}

# direct TAG TARGETS WRITE_CMD SERVER_PIDS LOAD_ARGS...: BENCH_ETCD_FANOUT
# connections split over TARGETS (comma-separated HOST:PORT), one sse_load
# each; the servers' RSS before and after they connect; DWRITES writes
# (WRITE_CMD W, which appends the start time to $OUT/direct.start.TAG);
# sets D_MEM (KiB per connection), D_MEM_AFTER (the same after the
# writes), D_P50 / D_P99 / D_MAX (medians over the writes), D_EACH (the
# p99 of each write)
direct() {
	local tag=$1 targets=$2 wcmd=$3 spids=$4 t k=0 n lp=() w r0 r1 r2
	shift 4
	IFS=, read -r -a tl <<<"$targets"
	IFS=, read -r -a sp <<<"$spids"
	: >"$OUT/direct.start.$tag"
	r0=$(rss_sum "${sp[@]}")
	[ "$tag" = etcd ] && read -r G0 R0 <<<"$(etcd_go)"
	for t in "${tl[@]}"; do
		n=$((FAN / ${#tl[@]}))
		[ $k -eq 0 ] && n=$((n + FAN % ${#tl[@]}))
		"$LOAD_BIN" -n "$n" "$@" --rounds "$DWRITES" --start-file "$OUT/direct.start.$tag" --per-stream \
			--timeout 300 --prefix "d$tag$k-" "$t" >"$OUT/direct.$tag.$k" 2>"$OUT/direct.$tag.$k.err" &
		lp+=($!)
		track $!
		k=$((k + 1))
	done
	for k in $(seq 0 $((${#tl[@]} - 1))); do
		wait_for "$OUT/direct.$tag.$k" '^ready=1' 300 || die "direct $tag: connections did not open"
		[ "$(kv "$OUT/direct.$tag.$k" connect.failed)" = 0 ] && [ "$(kv "$OUT/direct.$tag.$k" connect.complete)" = 1 ] ||
			die "direct $tag: not every connection opened (see $OUT/direct.$tag.$k*)"
	done
	sleep 2
	r1=$(rss_sum "${sp[@]}")
	[ "$tag" = etcd ] && read -r G1 R1 <<<"$(etcd_go)"
	for w in $(seq 1 "$DWRITES"); do
		$wcmd "$w" || die "direct $tag: write $w failed"
		for k in $(seq 0 $((${#tl[@]} - 1))); do
			wait_for "$OUT/direct.$tag.$k" "^round\\.$w\\.done=1" 120 || die "direct $tag: write $w not seen by all"
		done
		sleep 1
	done
	r2=$(rss_sum "${sp[@]}")
	for p in "${lp[@]}"; do wait "$p" || die "direct $tag: a load client failed (see $OUT/direct.$tag.*.err)"; untrack "$p"; done
	echo "rss_before_kb=$r0 rss_connected_kb=$r1 rss_after_writes_kb=$r2" >"$OUT/direct.rss.$tag"
	D_MEM=$(awk -v a="$r0" -v b="$r1" -v n="$FAN" 'BEGIN {printf "%.1f", (b - a) / n}')
	D_MEM_AFTER=$(awk -v a="$r0" -v b="$r2" -v n="$FAN" 'BEGIN {printf "%.1f", (b - a) / n}')
	for w in $(seq 1 "$DWRITES"); do direct_round "$tag" "$w"; done >"$OUT/direct.rounds.$tag"
	D_P50=$(awk '{print $1}' "$OUT/direct.rounds.$tag" | median)
	D_P99=$(awk '{print $2}' "$OUT/direct.rounds.$tag" | median)
	D_MAX=$(awk '{print $3}' "$OUT/direct.rounds.$tag" | median)
	D_EACH=$(awk '{print $2}' "$OUT/direct.rounds.$tag" | paste -sd,)
}

# the writes of (e): the plane's resource, and the same body under the
# watched prefix, checked to be revision ETCD_R0 + W (nothing else wrote)
direct_plane_write() {
	timed_put cluster/direct "$(cluster_body $((2000 + $1)))" "$OUT/direct.start.plane" >/dev/null
}
direct_etcd_write() {
	local rev
	rev=$(etcd_timed_put /direct/routes/r1 "$(cluster_body $((2000 + $1)))" "$OUT/direct.start.etcd") || return 1
	[ "$rev" = $((ETCD_R0 + $1)) ] || { log "etcd put $1 made revision $rev, not $((ETCD_R0 + $1))"; return 1; }
}

run_direct() {
	local p
	for p in ${PID_sqlite:-} ${PID_ea:-} ${PID_eb:-} ${PID_sb:-}; do stop_pid "$p"; done
	log "direct: $FAN SSE streams over two fresh etcd replicas, $DWRITES writes"
	start_plane da --store etcd --etcd "$ETCD" --etcd-prefix /direct-plane/
	start_plane db --store etcd --etcd "$ETCD" --etcd-prefix /direct-plane/
	PORT=$PORT_da
	timed_put cluster/direct "$(cluster_body 2000)" "$OUT/direct.seed" >/dev/null || die "direct: seed write failed"
	sleep 1   # the second replica follows the seed
	local v
	v=$(curl -fsS "http://127.0.0.1:$PORT_da/v1/resources" | jq -r .version)
	direct plane "127.0.0.1:$PORT_da,127.0.0.1:$PORT_db" direct_plane_write "$PID_da,$PID_db" \
		--version "$v" --wait-push $((v + 1))
	DP_MEM=$D_MEM DP_MEM_AFTER=$D_MEM_AFTER DP_P50=$D_P50 DP_P99=$D_P99 DP_MAX=$D_MAX DP_EACH=$D_EACH
	stop_pid "$PID_da"
	stop_pid "$PID_db"
	sleep 2

	log "direct: $FAN etcd watches over the three members, $DWRITES puts"
	etcd_timed_put /direct/routes/r1 "$(cluster_body 2000)" "$OUT/direct.seed" >/dev/null || die "direct: seed put failed"
	ETCD_R0=$(etcd_rev)
	direct etcd "127.0.0.1:${EPORTS[0]},127.0.0.1:${EPORTS[1]},127.0.0.1:${EPORTS[2]}" direct_etcd_write \
		"${EPIDS[0]},${EPIDS[1]},${EPIDS[2]}" --etcd-watch /direct/ --version "$ETCD_R0" --wait-push $((ETCD_R0 + 1))
	DE_MEM=$D_MEM DE_MEM_AFTER=$D_MEM_AFTER DE_P50=$D_P50 DE_P99=$D_P99 DE_MAX=$D_MAX DE_EACH=$D_EACH
	echo "go_inuse_before_kb=$G0 go_inuse_connected_kb=$G1 goroutines_before=$R0 goroutines_connected=$R1" \
		>>"$OUT/direct.rss.etcd"
	DE_GO=$(awk -v a="$G0" -v b="$G1" -v n="$FAN" 'BEGIN {printf "%.1f", (b - a) / n}')
	DE_GR=$(awk -v a="$R0" -v b="$R1" -v n="$FAN" 'BEGIN {printf "%.1f", (b - a) / n}')
}

direct_results() {
	echo "(e) against nodes that watch etcd directly: $FAN connections each, the same load client,"
	echo "    one write at a time, from just before it until every connection has it (median of $DWRITES writes);"
	echo "    memory = servers' VmRSS growth from before the connections to 2 s after, per connection:"
	echo "    two plane replicas, $((FAN / 2)) SSE streams each:   ${DP_MEM} KiB per stream, p50 ${DP_P50} / p99 ${DP_P99} / max ${DP_MAX} ms"
	echo "    three etcd members, JSON-gateway watches:  ${DE_MEM} KiB per watch,  p50 ${DE_P50} / p99 ${DE_P99} / max ${DE_MAX} ms"
	echo "direct.connections=$FAN"
	echo "direct.writes=$DWRITES"
	echo "direct.plane.mem_per_conn_kib=$DP_MEM"
	echo "direct.plane.mem_per_conn_after_writes_kib=$DP_MEM_AFTER"
	echo "direct.plane.p50_ms=$DP_P50"
	echo "direct.plane.p99_ms=$DP_P99"
	echo "direct.plane.max_ms=$DP_MAX"
	echo "direct.plane.p99_ms.each=$DP_EACH"
	echo "direct.etcd.mem_per_conn_kib=$DE_MEM"
	echo "direct.etcd.mem_per_conn_after_writes_kib=$DE_MEM_AFTER"
	echo "direct.etcd.go_heap_stack_inuse_per_conn_kib=$DE_GO"
	echo "direct.etcd.goroutines_per_conn=$DE_GR"
	echo "direct.etcd.p50_ms=$DE_P50"
	echo "direct.etcd.p99_ms=$DE_P99"
	echo "direct.etcd.max_ms=$DE_MAX"
	echo "direct.etcd.p99_ms.each=$DE_EACH"
}

# ---- run ---------------------------------------------------------------------------
log "machine: $MACHINE"
start_etcd
if [ "$ONLY" = direct ]; then
	run_direct
	{
		bench_header "tether etcd store benchmark, (e) alone"
		echo
		direct_results
	} | tee "$RESULTS"
	exit 0
fi
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

run_direct

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
	direct_results
} | tee "$RESULTS"
