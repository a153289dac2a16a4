# bench/run.sh: `make bench` (run as `$SHELL bench/run.sh SRCDIR BUILDDIR`).
# Measures (a) bytes per node on the wire for the seed's case (1,000
# clusters, one changed, 100 nodes): snapshot, gzip snapshot and delta, and
# (b) fan-out: one plane holding N SSE streams (bench/sse_load), plane RSS
# per stream, and the time from just before a one-resource PUT until each
# stream has the push, for several writes. Every measurement runs
# BENCH_RUNS times (default 3); the summary gives the median of the runs.
# The summary is printed and written to BUILDDIR/bench-results.txt; the raw
# load-client output, per stream, stays in BUILDDIR/bench-out/.
#
# Knobs (environment): BENCH_RUNS (3), BENCH_FANOUT ("1000 10000"),
# BENCH_WRITES (5), BENCH_CLUSTERS (1000), BENCH_NODES (100),
# BENCH_THREADS (the plane's --threads, default 2), BENCH_PLANE (another
# tether-plane binary, to compare builds).

# the start times come from $EPOCHREALTIME and the writes go through
# /dev/tcp: both are bash's
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u

SRCDIR=${1:?usage: run.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: run.sh SRCDIR BUILDDIR}
PLANE_BIN=${BENCH_PLANE:-$BUILDDIR/tether-plane}
LOAD_BIN=$BUILDDIR/bench/sse_load
RUNS=${BENCH_RUNS:-3}
FANOUT=${BENCH_FANOUT:-1000 10000}
WRITES=${BENCH_WRITES:-5}
CLUSTERS=${BENCH_CLUSTERS:-1000}
NODES=${BENCH_NODES:-100}
THREADS=${BENCH_THREADS:-2}
OUT=$BUILDDIR/bench-out
RESULTS=$BUILDDIR/bench-results.txt
# goals of the plane issue, item 9
GOAL_RATIO=500
GOAL_RSS=16384
GOAL_P99_MS=1000

BENCH_NAME=bench
. "$(dirname "$0")/lib.sh"
need "$PLANE_BIN" "$LOAD_BIN"
command -v curl >/dev/null || { echo "run.sh: needs curl" >&2; exit 2; }

rm -rf "$OUT"
mkdir -p "$OUT"
NOFILE=$(ulimit -n)

# ratio A B: A / B, rounded
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", a / b }'
}

# start_plane DIR: a plane with its data in DIR; sets PLANE_PID, PORT
start_plane() {
	local dir=$1
	mkdir -p "$dir"
	# heartbeats off for the measurement (one per hour), so every byte
	# and wake-up on a stream belongs to a push
	"$PLANE_BIN" --listen 127.0.0.1:0 --data "$dir/data" --heartbeat 3600 --threads "$THREADS" \
		$PLANE_LAB_FLAGS >"$dir/plane.log" 2>&1 &
	PLANE_PID=$!
	track "$PLANE_PID"
	if ! wait_for "$dir/plane.log" 'listening on ' 10; then
		log "the plane did not start"
		cat "$dir/plane.log" >&2
		exit 1
	fi
	PORT=$(grep -o 'listening on [^ ]*' "$dir/plane.log" | tail -n 1 | sed 's/.*://')
}

# stop_plane DIR: stops the plane and drops its data (10,000 node records
# are megabytes); its log stays
stop_plane() {
	stop_pid "$PLANE_PID"
	rm -rf "$1/data"
}

# load_clusters DIR: batch-loads the clusters; prints the new version
load_clusters() {
	awk -v n="$CLUSTERS" 'BEGIN {
		printf "{\"upserts\":["
		for (i = 0; i < n; i++) {
			if (i) printf ","
			printf "{\"name\":\"cluster/c%d\",\"body\":{\"endpoints\":[{\"address\":\"10.0.%d.%d\",", \
				i, int(i / 250), i % 250
			printf "\"port\":80,\"weight\":1}],\"lb\":\"round_robin\"}}"
		}
		print "]}"
	}' >"$1/batch.json"
	curl -sS -f -X POST --data-binary "@$1/batch.json" "http://127.0.0.1:$PORT/v1/batch" |
		sed -n 's/.*"version":\([0-9]*\).*/\1/p'
}

# ---- (a) wire bytes ------------------------------------------------------------

# wire RUN: prints "key value" lines into $OUT/wire.RUN.txt
wire() {
	local dir=$OUT/wire.$1
	mkdir -p "$dir"
	start_plane "$dir"
	local v1
	v1=$(load_clusters "$dir")
	[ -n "$v1" ] || { log "batch load failed"; exit 1; }
	"$LOAD_BIN" -n "$NODES" --version 0 --prefix plain- --wait-push $((v1 + 1)) \
		--start-file "$dir/start" --timeout 120 "127.0.0.1:$PORT" >"$dir/plain.out" 2>"$dir/plain.err" &
	local lp=$!
	"$LOAD_BIN" -n "$NODES" --version 0 --prefix gzip- --gzip --wait-push $((v1 + 1)) \
		--start-file "$dir/start" --timeout 120 "127.0.0.1:$PORT" >"$dir/gzip.out" 2>"$dir/gzip.err" &
	local lg=$!
	track "$lp"
	track "$lg"
	wait_for "$dir/plain.out" '^ready=1' 120 && wait_for "$dir/gzip.out" '^ready=1' 120 ||
		{ log "wire: streams did not open"; exit 1; }
	timed_put cluster/c7 "$(cluster_body 7)" "$dir/start" >/dev/null || exit 1
	wait "$lp"
	wait "$lg"
	untrack "$lp"
	untrack "$lg"
	stop_plane "$dir"
	local p=$dir/plain.out g=$dir/gzip.out
	for f in "$p" "$g"; do
		[ "$(kv "$f" connect.ok)" = "$NODES" ] && [ "$(kv "$f" round.1.received)" = "$NODES" ] ||
			{ log "wire: not every stream got its pushes ($f)"; exit 1; }
	done
	{
		echo "snap_plain $(kv "$p" first.wire_bytes.mean)"
		echo "snap_plain_hdr $(kv "$p" first.wire_bytes_with_headers.mean)"
		echo "snap_sse $(kv "$p" first.sse_bytes.mean)"
		echo "snap_gzip $(kv "$g" first.wire_bytes.mean)"
		echo "snap_gzip_hdr $(kv "$g" first.wire_bytes_with_headers.mean)"
		echo "hdr_plain $(kv "$p" headers.bytes.mean)"
		echo "hdr_gzip $(kv "$g" headers.bytes.mean)"
		echo "delta_plain $(kv "$p" round.1.wire_bytes.mean)"
		echo "delta_sse $(kv "$p" round.1.sse_bytes.mean)"
		echo "delta_gzip $(kv "$g" round.1.wire_bytes.mean)"
	} >"$OUT/wire.$1.txt"
}

# ---- (b) fan-out ---------------------------------------------------------------

# fanout N RUN: writes "key value" lines into $OUT/fanout.N.RUN.txt
fanout() {
	local n=$1 run=$2 dir=$OUT/fanout.$1.$2
	mkdir -p "$dir"
	start_plane "$dir"
	local v1
	v1=$(load_clusters "$dir")
	[ -n "$v1" ] || { log "batch load failed"; exit 1; }
	sleep 1   # let the write-behind of the batch settle
	local rss0 rss1 rss2 t0 t1 c0 c1
	rss0=$(rss_kb "$PLANE_PID")
	: >"$dir/start"
	# streams at the current version: their first event is a heartbeat
	"$LOAD_BIN" -n "$n" --version "$v1" --prefix "n$n-" --wait-push $((v1 + 1)) --rounds "$WRITES" \
		--start-file "$dir/start" --per-stream --linger 4 --timeout 300 "127.0.0.1:$PORT" \
		>"$dir/load.out" 2>"$dir/load.err" &
	local lp=$!
	track "$lp"
	wait_for "$dir/load.out" '^ready=1' 300 || { log "fan-out $n: streams did not open"; exit 1; }
	sleep 1   # node records written behind, connections settled
	rss1=$(rss_kb "$PLANE_PID")
	c0=$(cpu_ticks "$PLANE_PID")
	local w v=$v1
	for w in $(seq 1 "$WRITES"); do
		v=$(timed_put cluster/c7 "$(cluster_body $((run * 100 + w)))" "$dir/start") || exit 1
		if ! wait_for "$dir/load.out" "^round\\.$w\\.done=1" 120; then
			log "fan-out $n: write $w not seen by all"
			break
		fi
		sleep 1   # one write at a time: the node-record flush of the last one is done
	done
	c1=$(cpu_ticks "$PLANE_PID")
	wait_for "$dir/load.out" '^lingering=1' 60
	rss2=$(rss_kb "$PLANE_PID")
	wait "$lp"
	untrack "$lp"
	stop_plane "$dir"
	local f=$dir/load.out hz
	hz=$(getconf CLK_TCK)
	{
		echo "streams $(kv "$f" connect.ok)"
		echo "failed $(kv "$f" connect.failed)"
		echo "connect_ms $(kv "$f" connect.ms)"
		echo "rss0_kb $rss0"
		echo "rss1_kb $rss1"
		echo "rss2_kb $rss2"
		echo "rss_per_stream $(((rss1 - rss0) * 1024 / n))"
		echo "rss_per_stream_after $(((rss2 - rss0) * 1024 / n))"
		echo "cpu_ms_per_write $(((c1 - c0) * 1000 / hz / WRITES))"
		for w in $(seq 1 "$WRITES"); do
			echo "w$w.received $(kv "$f" "round.$w.received")"
			echo "w$w.p50 $(kv "$f" "round.$w.p50_ms")"
			echo "w$w.p99 $(kv "$f" "round.$w.p99_ms")"
			echo "w$w.max $(kv "$f" "round.$w.max_ms")"
			echo "w$w.wire $(kv "$f" "round.$w.wire_bytes.mean")"
		done
	} >"$OUT/fanout.$n.$run.txt"
}

# med FILEPATTERN KEY: the median over runs of one figure
med() {
	local f
	for f in $OUT/$1; do
		awk -v k="$2" '$1 == k { print $2 }' "$f"
	done | median
}

# ---- run ------------------------------------------------------------------------

log "machine: $MACHINE; open files $NOFILE"
for run in $(seq 1 "$RUNS"); do
	log "run $run/$RUNS: wire bytes ($CLUSTERS clusters, $NODES nodes)"
	wire "$run"
	for n in $FANOUT; do
		log "run $run/$RUNS: fan-out to $n streams, $WRITES writes"
		fanout "$n" "$run"
	done
done

{
	bench_header "tether bench results"
	echo "plane: $PLANE_BIN --threads $THREADS --heartbeat 3600 $PLANE_LAB_FLAGS; medians of $RUNS runs"
	echo
	echo "(a) bytes per node on the wire: $CLUSTERS clusters, one changed, $NODES nodes"
	echo "    (HTTP chunk framing, SSE fields, gzip framing included; response headers"
	echo "    counted once per connection and shown separately; TCP/IP headers not counted)"
	sp=$(med 'wire.*.txt' snap_plain)
	sph=$(med 'wire.*.txt' snap_plain_hdr)
	sg=$(med 'wire.*.txt' snap_gzip)
	sgh=$(med 'wire.*.txt' snap_gzip_hdr)
	dp=$(med 'wire.*.txt' delta_plain)
	dg=$(med 'wire.*.txt' delta_gzip)
	printf '    %-34s %12s %12s\n' "" "per node" "x $NODES nodes"
	for row in "response headers:$(med 'wire.*.txt' hdr_plain)" \
		"response headers, gzip:$(med 'wire.*.txt' hdr_gzip)" \
		"snapshot:$sp" "snapshot + headers:$sph" "gzip snapshot:$sg" "gzip snapshot + headers:$sgh" \
		"delta (one cluster):$dp" "delta, gzip stream:$dg"; do
		printf '    %-34s %12.0f %12.0f\n' "${row%%:*}" "${row##*:}" \
			"$(awk -v a="${row##*:}" -v n="$NODES" 'BEGIN { print a * n }')"
	done
	r_plain=$(ratio "$sp" "$dp")
	echo "    ratio snapshot / delta:                   ${r_plain}x" \
		"((snapshot + headers) / delta: $(ratio "$sph" "$dp")x)"
	echo "    ratio gzip snapshot / delta:              $(ratio "$sg" "$dp")x" \
		"(gzip snapshot / gzip delta: $(ratio "$sg" "$dg")x)"
	echo "    SSE text: snapshot $(med 'wire.*.txt' snap_sse) B, delta $(med 'wire.*.txt' delta_sse) B"
	if awk -v r="$r_plain" -v g="$GOAL_RATIO" 'BEGIN { exit !(r >= g) }'; then
		echo "    goal >= ${GOAL_RATIO}x including framing: MET"
	else
		echo "    goal >= ${GOAL_RATIO}x including framing: MISSED"
	fi
	echo
	echo "(b) fan-out: one plane, N streams, one-resource PUT; time from just before"
	echo "    the PUT to each stream having the push (ms); RSS = plane VmRSS growth / N"
	printf '    %6s %7s %10s %10s %10s %9s' "N" "open" "connect_ms" "RSS/strm" "after wr" "cpu/wr"
	for w in $(seq 1 "$WRITES"); do
		printf ' %20s' "write $w p50/p99/max"
	done
	echo
	for n in $FANOUT; do
		pat="fanout.$n.*.txt"
		printf '    %6s %7s %10s %10s %10s %9s' "$n" "$(med "$pat" streams)" "$(med "$pat" connect_ms)" \
			"$(med "$pat" rss_per_stream)" "$(med "$pat" rss_per_stream_after)" "$(med "$pat" cpu_ms_per_write)ms"
		for w in $(seq 1 "$WRITES"); do
			printf ' %20s' "$(med "$pat" "w$w.p50")/$(med "$pat" "w$w.p99")/$(med "$pat" "w$w.max")"
		done
		echo
	done
	echo
	for n in $FANOUT; do
		echo "    N=$n per run (RSS/stream B; p99 ms of each write):"
		for run in $(seq 1 "$RUNS"); do
			f=$OUT/fanout.$n.$run.txt
			printf '      run %d: RSS/stream %s (after writes %s), p99' "$run" \
				"$(awk '$1 == "rss_per_stream" { print $2 }' "$f")" \
				"$(awk '$1 == "rss_per_stream_after" { print $2 }' "$f")"
			for w in $(seq 1 "$WRITES"); do
				printf ' %s' "$(awk -v k="w$w.p99" '$1 == k { print $2 }' "$f")"
			done
			echo
		done
	done
	echo
	big=$(echo $FANOUT | tr ' ' '\n' | sort -n | tail -n 1)
	rss=$(med "fanout.$big.*.txt" rss_per_stream)
	worst=$(for w in $(seq 1 "$WRITES"); do med "fanout.$big.*.txt" "w$w.p99"; done | sort -g | tail -n 1)
	opened=$(med "fanout.$big.*.txt" streams)
	if [ "$opened" = "$big" ] && [ "$rss" -le "$GOAL_RSS" ]; then
		echo "    goal $big streams at <= $GOAL_RSS B RSS each: MET ($rss B)"
	else
		echo "    goal $big streams at <= $GOAL_RSS B RSS each: MISSED ($opened streams, $rss B)"
	fi
	verdict=MISSED
	awk -v a="$worst" -v g="$GOAL_P99_MS" 'BEGIN { exit !(a <= g) }' && verdict=MET
	echo "    goal one write on all $big within ${GOAL_P99_MS} ms at p99: $verdict" \
		"(worst write's median p99 $worst ms)"
	echo
	echo "raw load-client output, per stream: $OUT"
} >"$RESULTS"
cat "$RESULTS"
