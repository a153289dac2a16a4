#!/usr/bin/env bash
# bench/http_streams.sh: what a held stream costs the plane's HTTP server,
# and the same for a watch held by etcd, in one run on loopback
# (`bash bench/http_streams.sh SRCDIR BUILDDIR`).
#
# Cases, each on a fresh server:
#   before-plain, before-tls  BENCH_BEFORE (another tether-plane binary, e.g.
#                             the libmicrohttpd build; the two cases are
#                             skipped when it is unset)
#   after-plain, after-tls    BUILDDIR/tether-plane (or BENCH_PLANE)
#   etcd                      a single etcd member (Debian's etcd-server) on
#                             free loopback ports, watches through its v3
#                             JSON gateway (sse_load --etcd-watch)
# Every plane is a lab (bench/lib.sh's PLANE_LAB_FLAGS) with --heartbeat
# 3600, --threads BENCH_THREADS and --max-connections N + 100; the TLS cases
# add --tls-cert/--tls-key with a throwaway self-signed P-256 certificate for
# 127.0.0.1 (openssl), which sse_load --tls --ca-file trusts. One cluster
# resource is written first, so the streams connect at the current version
# (their first event is a heartbeat; etcd's is the watch's "created").
#
# Per case: the server's VmRSS and CPU (utime + stime, /proc/PID/stat) are
# read, BENCH_STREAMS (N, 10,000) streams are opened with bench/sse_load, and
# once every stream has its first event and 2 s have passed they are read
# again: RSS growth per stream (bytes), the CPU to open them (ms) and per
# stream (us). Then one write reaching every stream (a PUT of the cluster;
# for etcd a put under the watched prefix), and the server's CPU from just
# before it until 1 s after every stream had it. "idle" is the server's CPU
# per second over the 3 s before the streams open (it is in the figures
# above as it is: an idle plane uses none, etcd a little).
#
# Knobs (environment): BENCH_STREAMS (10000), BENCH_STREAMS_RUNS (1: each
# case once per run; the order is reversed on even runs; the table shows
# medians over the runs), BENCH_BEFORE (the "before" tether-plane),
# BENCH_PLANE (the "after" one, default BUILDDIR/tether-plane),
# BENCH_STREAMS_MODES ("plain tls"), BENCH_STREAMS_ETCD (1; 0 skips etcd),
# BENCH_THREADS (2), ETCD_BIN (etcd). Results in
# BUILDDIR/bench-http-streams.txt (also as key=value lines, streams.*); per
# case and run: figures, the load client's output (one line per stream),
# server logs in BUILDDIR/bench-out/http_streams/. The cases run copies of
# the two planes taken at the start (in bench-out/http_streams/bin/), so a
# rebuild of the tree during the run does not mix binaries; the results
# name each by its checksum and say when the original changed meanwhile.
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u

SRCDIR=${1:?usage: http_streams.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: http_streams.sh SRCDIR BUILDDIR}
BENCH_NAME=http_streams
. "$SRCDIR/bench/lib.sh"
AFTER_BIN=${BENCH_PLANE:-$BUILDDIR/tether-plane}
BEFORE_BIN=${BENCH_BEFORE:-}
LOAD_BIN=$BUILDDIR/bench/sse_load
ETCD_BIN=${ETCD_BIN:-$(command -v etcd || echo /usr/bin/etcd)}
N=${BENCH_STREAMS:-10000}
RUNS=${BENCH_STREAMS_RUNS:-1}
MODES=${BENCH_STREAMS_MODES:-plain tls}
WITH_ETCD=${BENCH_STREAMS_ETCD:-1}
THREADS=${BENCH_THREADS:-2}
OUT=$BUILDDIR/bench-out/http_streams
RESULTS=$BUILDDIR/bench-http-streams.txt
HZ=$(getconf CLK_TCK)

need "$AFTER_BIN" "$LOAD_BIN"
[ -z "$BEFORE_BIN" ] || need "$BEFORE_BIN"
[ "$WITH_ETCD" = 0 ] || need "$ETCD_BIN"
for tool in curl openssl python3; do
	command -v "$tool" >/dev/null || die "needs $tool"
done
"$LOAD_BIN" --help 2>&1 | grep -q -- --etcd-watch ||
	die "$LOAD_BIN has no --tls/--etcd-watch; rebuild it (make bench/sse_load)"
NOFILE=$(ulimit -n)
[ "$NOFILE" -ge $((N + 200)) ] || die "the file limit ($NOFILE) is below $N streams + 200"

rm -rf "$OUT"
mkdir -p "$OUT"

# bin_id FILE: what identifies a binary (a rebuild during the run changes it)
bin_id() {
	[ -n "$1" ] || return 0
	echo "sha256 $(sha256sum "$1" | cut -c1-16), $(stat -c '%s bytes, modified %y' "$1" | cut -d. -f1)"
}
AFTER_ID=$(bin_id "$AFTER_BIN")
BEFORE_ID=$(bin_id "$BEFORE_BIN")
# every run measures the binaries as they were at the start, even when the
# build tree is rebuilt meanwhile: the cases run copies
mkdir -p "$OUT/bin/after" "$OUT/bin/before"
cp "$AFTER_BIN" "$OUT/bin/after/tether-plane" || die "cannot copy $AFTER_BIN"
RUN_AFTER=$OUT/bin/after/tether-plane
RUN_BEFORE=""
if [ -n "$BEFORE_BIN" ]; then
	cp "$BEFORE_BIN" "$OUT/bin/before/tether-plane" || die "cannot copy $BEFORE_BIN"
	RUN_BEFORE=$OUT/bin/before/tether-plane
fi
cmp -s "$AFTER_BIN" "$RUN_AFTER" && [ "$(bin_id "$AFTER_BIN")" = "$AFTER_ID" ] ||
	die "$AFTER_BIN changed while it was copied; run again"


# ---- the certificate --------------------------------------------------------------

CERT=$OUT/tls/cert.pem
CKEY=$OUT/tls/key.pem
mkdir -p "$OUT/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$CKEY" -out "$CERT" \
	-days 2 -subj /CN=localhost -addext 'subjectAltName=IP:127.0.0.1,DNS:localhost' \
	-addext 'extendedKeyUsage=serverAuth' >"$OUT/tls/openssl.log" 2>&1 ||
	die "cannot make a certificate (see $OUT/tls/openssl.log)"

# ---- servers ----------------------------------------------------------------------

# start_plane BIN DIR FLAG...: a fresh lab plane with its data in DIR/data,
# its log in DIR/plane.log; sets SPID and PORT
start_plane() {
	local bin=$1 dir=$2
	shift 2
	"$bin" --listen 127.0.0.1:0 --data "$dir/data" --heartbeat 3600 --threads "$THREADS" \
		--max-connections $((N + 100)) $PLANE_LAB_FLAGS "$@" >"$dir/plane.log" 2>&1 &
	SPID=$!
	track "$SPID"
	wait_for "$dir/plane.log" "tether-plane\\[$SPID\\] info: listening on " 30 ||
		die "the plane did not start (see $dir/plane.log)"
	PORT=$(grep -o 'listening on [^ ]*' "$dir/plane.log" | tail -n 1 | sed 's/.*://')
}

free_ports() {
	python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# start_etcd DIR: a fresh single member, data in DIR/etcd, log DIR/etcd.log;
# sets SPID and PORT (its client port)
start_etcd() {
	local dir=$1 cport pport
	read -r cport pport <<<"$(free_ports 2)"
	"$ETCD_BIN" --name m0 --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "m0=http://127.0.0.1:$pport" >"$dir/etcd.log" 2>&1 &
	SPID=$!
	track "$SPID"
	PORT=$cport
	wait_until 30 etcd_healthy || die "etcd did not start (see $dir/etcd.log)"
}
etcd_healthy() {
	curl -fsS -m 1 "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"health":"true"'
}

# ---- writes -------------------------------------------------------------------------

# plane_write SCHEME BODY STARTFILE: a PUT of cluster/c0; the start time
# goes to STARTFILE (plain HTTP: lib.sh's timed_put, on a connection opened
# first; HTTPS: curl, started just after the time is taken, so its
# handshake is in the latency). Prints the new version.
plane_write() {
	if [ "$1" = http ]; then
		timed_put cluster/c0 "$2" "$3"
		return
	fi
	printf '%s\n' "$EPOCHREALTIME" >>"$3"
	curl -sS -f --cacert "$CERT" -X PUT -H 'Content-Type: application/json' --data "$2" \
		"https://127.0.0.1:$PORT/v1/resources/cluster/c0" | sed -n 's/.*"version":\([0-9]*\).*/\1/p'
}

# etcd_put KEY VALUE STARTFILE: a put to the member's JSON gateway on a
# connection opened first (as bench/etcd.sh's etcd_timed_put); prints the
# revision it made
etcd_put() {
	local body reply nl=$'\r\n'
	body="{\"key\":\"$(printf '%s' "$1" | base64 -w0)\",\"value\":\"$(printf '%s' "$2" | base64 -w0)\"}"
	exec 3<>"/dev/tcp/127.0.0.1/$PORT" || return 1
	local req="POST /v3/kv/put HTTP/1.1${nl}Host: 127.0.0.1:$PORT${nl}"
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

# etcd_go: the member's Go heap + stacks in use (KiB) and goroutines
etcd_go() {
	curl -fsS "http://127.0.0.1:$PORT/metrics" |
		awk '$1 == "go_memstats_heap_inuse_bytes" || $1 == "go_memstats_stack_inuse_bytes" { b += $2 }
		$1 == "go_goroutines" { g += $2 }
		END { printf "%.0f %.0f\n", b / 1024, g }'
}

# ---- one case ------------------------------------------------------------------------

# measure CASE RUN: CASE is before-plain, before-tls, after-plain,
# after-tls or etcd; "key value" lines into $OUT/CASE.RUN.txt
measure() {
	local cname=$1 run=$2 dir=$OUT/run$2/$1 scheme=http lflags=() v target
	mkdir -p "$dir"
	: >"$dir/start"
	case $cname in
	etcd)
		start_etcd "$dir"
		etcd_put /bench-streams/r0 "$(cluster_body 0)" "$dir/seed" >/dev/null || die "$cname: seed put failed"
		v=$(curl -fsS "http://127.0.0.1:$PORT/v3/kv/range" -d "{\"key\":\"$(printf x | base64)\"}" |
			sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
		[ -n "$v" ] || die "$cname: no revision"
		lflags=(--etcd-watch /bench-streams/)
		;;
	*)
		local bin=$RUN_AFTER pflags=()
		case $cname in before-*) bin=$RUN_BEFORE ;; esac
		if [ "${cname#*-}" = tls ]; then
			scheme=https
			pflags=(--tls-cert "$CERT" --tls-key "$CKEY")
			lflags=(--ca-file "$CERT")
		fi
		start_plane "$bin" "$dir" "${pflags[@]}"
		v=$(plane_write "$scheme" "$(cluster_body 0)" "$dir/seed")
		[ -n "$v" ] || die "$cname: seed write failed (see $dir/plane.log)"
		;;
	esac
	target=$((v + 1))

	# idle: 3 s before the streams
	local ci c0 c1 c2 c3 r0 r1 r2 g0="" g1=""
	sleep 1
	ci=$(cpu_ticks "$SPID")
	sleep 3
	c0=$(cpu_ticks "$SPID")
	r0=$(rss_kb "$SPID")
	[ "$cname" = etcd ] && g0=$(etcd_go)

	"$LOAD_BIN" -n "$N" --version "$v" --wait-push "$target" --rounds 1 --start-file "$dir/start" \
		--prefix "$cname-$run-" --per-stream --linger 5 --timeout 300 "${lflags[@]}" "127.0.0.1:$PORT" \
		>"$dir/load.out" 2>"$dir/load.err" &
	local lp=$!
	track "$lp"
	wait_for "$dir/load.out" '^ready=1' 330 || die "$cname run $run: the streams did not open (see $dir/load.err)"
	local ok failed
	ok=$(kv "$dir/load.out" connect.ok)
	failed=$(kv "$dir/load.out" connect.failed)
	[ "$ok" = "$N" ] || log "$cname run $run: only $ok of $N streams opened ($failed failed; see $dir/load.err)"
	sleep 2
	c1=$(cpu_ticks "$SPID")
	r1=$(rss_kb "$SPID")
	[ "$cname" = etcd ] && g1=$(etcd_go)

	# the write
	local got
	c2=$(cpu_ticks "$SPID")
	if [ "$cname" = etcd ]; then
		got=$(etcd_put /bench-streams/r0 "$(cluster_body 1)" "$dir/start")
	else
		got=$(plane_write "$scheme" "$(cluster_body 1)" "$dir/start")
	fi
	[ "$got" = "$target" ] || log "$cname run $run: the write made ${got:-nothing}, not $target"
	wait_for "$dir/load.out" '^round\.1\.done=1' 120 || log "$cname run $run: the write did not reach every stream"
	sleep 1
	c3=$(cpu_ticks "$SPID")
	r2=$(rss_kb "$SPID")
	local rc=0
	wait "$lp" || rc=$?
	untrack "$lp"
	[ "$rc" = 0 ] || log "$cname run $run: sse_load exited with $rc (see $dir/load.err)"
	stop_pid "$SPID"
	rm -rf "$dir/data" "$dir/etcd"

	local f=$dir/load.out
	{
		echo "streams $ok"
		echo "failed $failed"
		echo "client_rc $rc"
		echo "rss_before_kb $r0"
		echo "rss_open_kb $r1"
		echo "rss_after_write_kb $r2"
		echo "rss_per_stream $(((r1 - r0) * 1024 / N))"
		echo "rss_per_stream_after_write $(((r2 - r0) * 1024 / N))"
		echo "idle_ms_per_s $(awk -v t="$((c0 - ci))" -v hz="$HZ" 'BEGIN { printf "%.1f", t * 1000 / hz / 3 }')"
		echo "open_cpu_ms $(((c1 - c0) * 1000 / HZ))"
		echo "open_cpu_us_per_stream $(awk -v t="$((c1 - c0))" -v hz="$HZ" -v n="$N" \
			'BEGIN { printf "%.1f", t * 1e6 / hz / n }')"
		echo "write_cpu_ms $(((c3 - c2) * 1000 / HZ))"
		echo "connect_ms $(kv "$f" connect.ms)"
		echo "client_open_cpu_ms $(($(kv "$f" connect.cpu_user_ms) + $(kv "$f" connect.cpu_sys_ms)))"
		echo "write_received $(kv "$f" round.1.received)"
		echo "write_p50_ms $(kv "$f" round.1.p50_ms)"
		echo "write_p99_ms $(kv "$f" round.1.p99_ms)"
		echo "write_max_ms $(kv "$f" round.1.max_ms)"
		if [ "$cname" = etcd ]; then
			local gb0 gb1 gr0 gr1
			read -r gb0 gr0 <<<"$g0"
			read -r gb1 gr1 <<<"$g1"
			echo "go_inuse_per_stream $(((gb1 - gb0) * 1024 / N))"
			echo "goroutines_per_stream $(awk -v a="$gr0" -v b="$gr1" -v n="$N" 'BEGIN { printf "%.2f", (b - a) / n }')"
		else
			# warnings and errors, but the two of --insecure at the start
			echo "log_warnings $(grep -E ' (warn|error): ' "$dir/plane.log" | grep -vc -- '--insecure')"
		fi
	} >"$OUT/$cname.$run.txt"
	log "$cname run $run: $ok/$N streams, $(awk '$1 == "rss_per_stream" { print $2 }' "$OUT/$cname.$run.txt") B/stream," \
		"open $(((c1 - c0) * 1000 / HZ)) ms cpu, write $(((c3 - c2) * 1000 / HZ)) ms cpu," \
		"write reached $(kv "$f" round.1.received)"
}

# med CASE KEY: the median over the runs of one figure
med() {
	local f
	for f in "$OUT/$1".*.txt; do
		awk -v k="$2" '$1 == k { print $2 }' "$f"
	done | median | awk '{ x = $1; if (x ~ /\./) { sub(/0+$/, "", x); sub(/\.$/, "", x) } print x }'
}

# ---- run -------------------------------------------------------------------------------

CASES=""
for m in $MODES; do
	[ -z "$BEFORE_BIN" ] || CASES="$CASES before-$m"
done
for m in $MODES; do
	CASES="$CASES after-$m"
done
[ "$WITH_ETCD" = 0 ] || CASES="$CASES etcd"
[ -n "$BEFORE_BIN" ] || log "BENCH_BEFORE is not set: no 'before' cases"
log "machine: $MACHINE; open files $NOFILE; $N streams; $RUNS run(s); cases:$CASES"

for run in $(seq 1 "$RUNS"); do
	order=$CASES
	[ $((run % 2)) = 0 ] && order=$(echo $CASES | tr ' ' '\n' | tac | tr '\n' ' ')
	for c in $order; do
		log "run $run/$RUNS: $c, $N streams"
		measure "$c" "$run"
	done
done

{
	bench_header "tether: plane memory and CPU per held stream, and etcd's per watch"
	echo "before: ${BEFORE_BIN:-(none)}${BEFORE_ID:+ ($BEFORE_ID)}"
	echo "after:  $AFTER_BIN ($AFTER_ID)"
	for b in AFTER BEFORE; do
		eval "bin=\$${b}_BIN id=\$${b}_ID"
		[ "$(bin_id "$bin")" = "$id" ] ||
			echo "        ($bin was rebuilt during the run, now $(bin_id "$bin"); every run measured" \
				"the copy taken at the start, in $OUT/bin/)"
	done
	echo "planes: --threads $THREADS --heartbeat 3600 --max-connections $((N + 100)) $PLANE_LAB_FLAGS" \
		"(TLS: a self-signed P-256 certificate)"
	[ "$WITH_ETCD" = 0 ] || echo "etcd:   $ETCD_BIN ($("$ETCD_BIN" --version 2>/dev/null | head -n 1)), one member," \
		"watches through the v3 JSON gateway"
	echo "$N streams per case, loopback, bench/sse_load (one process, 256 connecting at once);" \
		"median of $RUNS run(s)"
	echo
	printf '%-13s %9s %10s %11s %10s %11s %8s %11s %10s %11s %10s\n' case streams "RSS B/str" "open cpu ms" \
		"us/stream" "write cpu" "idle" "connect ms" "write p99" "client cpu" "after wr"
	for c in $CASES; do
		printf '%-13s %9s %10s %11s %10s %9sms %5sms/s %11s %8sms %9sms %10s\n' "$c" \
			"$(med "$c" streams)/$N" "$(med "$c" rss_per_stream)" "$(med "$c" open_cpu_ms)" \
			"$(med "$c" open_cpu_us_per_stream)" "$(med "$c" write_cpu_ms)" "$(med "$c" idle_ms_per_s)" \
			"$(med "$c" connect_ms)" "$(med "$c" write_p99_ms)" "$(med "$c" client_open_cpu_ms)" \
			"$(med "$c" rss_per_stream_after_write)"
	done
	echo
	echo "RSS B/str = (VmRSS 2 s after the last stream had its first event - VmRSS before) / N;"
	echo "open cpu = the server's utime + stime over the same span (us/stream = that / N); write cpu ="
	echo "the server's CPU from just before the one write until 1 s after every stream had it; idle ="
	echo "the server's CPU per second before the streams (already inside the figures); connect = the"
	echo "client's time to open all and see every first event; write p99 = from just before the write"
	echo "until the stream had it (with TLS curl's start and handshake are in it); client cpu ="
	echo "sse_load's CPU to open them; after wr = RSS per stream 1 s after the write. Clock ticks"
	echo "are $((1000 / HZ)) ms."
	if [ "$WITH_ETCD" != 0 ]; then
		echo "etcd, Go runtime: heap + stacks in use per watch $(med etcd go_inuse_per_stream) B," \
			"goroutines per watch $(med etcd goroutines_per_stream)"
	fi
	echo "per run (RSS B/stream, open cpu ms, write cpu ms, streams opened, failed, write reached,"
	echo "plane log warnings/errors):"
	for run in $(seq 1 "$RUNS"); do
		for c in $CASES; do
			printf '  run %d %-13s' "$run" "$c"
			for k in rss_per_stream open_cpu_ms write_cpu_ms streams failed write_received log_warnings; do
				printf ' %s' "$(awk -v k="$k" '$1 == k { print $2 }' "$OUT/$c.$run.txt")"
			done
			echo
		done
	done
	for c in $CASES; do
		for k in streams rss_per_stream open_cpu_ms open_cpu_us_per_stream write_cpu_ms idle_ms_per_s connect_ms \
			write_p99_ms rss_per_stream_after_write; do
			echo "streams.$c.$k=$(med "$c" "$k")"
		done
	done
	echo "raw output: $OUT"
} >"$RESULTS"
cat "$RESULTS"
