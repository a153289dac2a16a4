#!/usr/bin/env bash
# bench/trust.sh: what signed state and TLS cost (`bash bench/trust.sh SRCDIR
# BUILDDIR`; docs/BENCHMARKS.md, "Trust"). Three parts, each one a value of
# BENCH_TRUST_PARTS:
#
#   fanout  one plane holding N streams (default 10,000), one-resource
#           writes, time from just before the PUT until each stream has the
#           push, and plane RSS per stream: unsigned and with --signing-key,
#           in interleaved runs on the same build (u s, s u, u s, ...)
#   agent   tetherd's CPU per one-resource push at 1,000 and 100,000
#           resources: an unsigned plane and an agent without --trust
#           (bench/agent.sh's case), then a signing plane and --trust: the
#           CPU the agent logs for an apply (decode to persist; the digest
#           of the candidate is in it), and the whole process's CPU per push
#           (reading the stream, the signature check, the ACK included);
#           also the boot from last-good and the first sync; and
#           bench/trust_micro: the checks one by one (sign, verify, the
#           digest of a one-resource candidate) in microseconds
#   storm   N streams (plain HTTP, TLS resuming sessions, TLS with full
#           handshakes; interleaved) to a plane that is killed
#           (BENCH_TRUST_SIGNAL, SIGKILL) and restarted on the same port and
#           data: the time until every stream is back with the first event
#           of a new connection, from the kill and from the new plane's
#           readiness, and when the plane handled each request (its log);
#           the plane's and the clients' CPU meanwhile; the handshakes the
#           new plane resumed; plane RSS per stream in each mode at the
#           same N. The streams are spread over BENCH_TRUST_CLIENTS sse_load
#           processes (the same number in every mode); "all back" is the
#           latest of them, the clients' CPU their sum
#   failover  the same with two replicas on one etcd member: the streams'
#           replica is killed and they come back on the other (sse_load
#           --failover), which holds the same ticket keys
#
# Every plane is a lab on loopback (bench/lib.sh's PLANE_LAB_FLAGS), with
# --heartbeat 3600 and --threads BENCH_THREADS. Results go to
# BUILDDIR/bench-trust.txt; per-run figures, per-stream client output and
# plane logs to BUILDDIR/bench-out/trust/.
#
# Knobs (environment): BENCH_TRUST_PARTS ("fanout agent storm failover"),
# BENCH_TRUST_FANOUT_RUNS (5: runs of each mode in fanout),
# BENCH_TRUST_STORM_RUNS (3: runs of each mode in storm),
# BENCH_TRUST_CLIENTS (2, the cores of the machine it was written on: the
# load processes of storm and failover; 1 is how it ran before: one
# single-threaded client paying every stream's handshake),
# BENCH_TRUST_STREAMS (10000), BENCH_WRITES (5), BENCH_CLUSTERS (1000),
# BENCH_THREADS (2), BENCH_AGENT_SIZES ("1000 100000"), BENCH_PUSHES (100),
# BENCH_TRUST_AGENT_RUNS (3: runs of each mode and size in agent),
# BENCH_TRUST_JITTER (1000: a stream's reconnect delay is uniform in
# 0..JITTER ms, drawn again after each failed attempt), BENCH_TRUST_SIGNAL
# (KILL, or TERM: how the plane is stopped in storm), BENCH_TRUST_STORM_SIGN
# (0; 1 adds --signing-key to the storm's planes), BENCH_TRUST_STORM_MODES
# ("plain tls tls-full"; and tls-before: as tls with the plane binary
# BENCH_TRUST_BEFORE), ETCD_BIN (etcd), BENCH_TRUST_PERF (0; 1
# records `perf record -g` of the agent's pushes with --trust),
# BENCH_PLANE (another tether-plane binary).

# $EPOCHREALTIME and /dev/tcp are bash's
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u

SRCDIR=${1:?usage: trust.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: trust.sh SRCDIR BUILDDIR}
PLANE_BIN=${BENCH_PLANE:-$BUILDDIR/tether-plane}
AGENT=$BUILDDIR/tetherd
CTL=$BUILDDIR/tetherctl
LOAD_BIN=$BUILDDIR/bench/sse_load
MICRO_BIN=$BUILDDIR/bench/trust_micro
PARTS=${BENCH_TRUST_PARTS:-fanout agent storm failover}
FANOUT_RUNS=${BENCH_TRUST_FANOUT_RUNS:-5}
STORM_RUNS=${BENCH_TRUST_STORM_RUNS:-3}
CLIENTS=${BENCH_TRUST_CLIENTS:-2}
N=${BENCH_TRUST_STREAMS:-10000}
WRITES=${BENCH_WRITES:-5}
CLUSTERS=${BENCH_CLUSTERS:-1000}
THREADS=${BENCH_THREADS:-2}
SIZES=${BENCH_AGENT_SIZES:-1000 100000}
PUSHES=${BENCH_PUSHES:-100}
AGENT_RUNS=${BENCH_TRUST_AGENT_RUNS:-3}
JITTER=${BENCH_TRUST_JITTER:-1000}
SIGNAL=${BENCH_TRUST_SIGNAL:-KILL}
STORM_SIGN=${BENCH_TRUST_STORM_SIGN:-0}
STORM_MODES=${BENCH_TRUST_STORM_MODES:-plain tls tls-full}
BEFORE_BIN=${BENCH_TRUST_BEFORE:-}
ETCD_BIN=${ETCD_BIN:-$(command -v etcd || echo /usr/bin/etcd)}
PERF=${BENCH_TRUST_PERF:-0}
OUT=$BUILDDIR/bench-out/trust
RESULTS=$BUILDDIR/bench-trust.txt
# goals of the trust issue
GOAL_P99_RATIO=1.2
GOAL_AGENT_RATIO=1.5
GOAL_STORM_RATIO=2
GOAL_TLS_STREAM_B=14336

BENCH_NAME=trust.sh
. "$(dirname "$0")/lib.sh"
need "$PLANE_BIN" "$AGENT" "$CTL" "$LOAD_BIN"
for tool in curl openssl; do
	command -v "$tool" >/dev/null || { echo "trust.sh: needs $tool" >&2; exit 2; }
done
"$LOAD_BIN" --tls --help 2>&1 | grep -q -- --reconnect ||
	{ echo "trust.sh: $LOAD_BIN has no --tls/--reconnect; rebuild it (make bench/sse_load)" >&2; exit 2; }

rm -rf "$OUT"
mkdir -p "$OUT"
HZ=$(getconf CLK_TCK)

# ---- keys and certificates -----------------------------------------------------

# the signing key, and a throwaway CA with a server certificate for
# 127.0.0.1 (as tests/integration/lib-tls.sh makes them)
KEY=$OUT/keys/signing.key
PKI=$OUT/pki
mkdir -p "$OUT/keys" "$PKI"
"$CTL" keygen "$KEY" >/dev/null || die "tetherctl keygen failed"
(
	cd "$PKI" || exit 1
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
		-days 2 -subj /CN=tether-bench-ca &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
			-subj /CN=localhost &&
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext &&
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 \
			-extfile server.ext
) >"$PKI/pki.log" 2>&1 || die "cannot make a PKI (see $PKI/pki.log)"

# ---- the plane -----------------------------------------------------------------

# start_plane DIR LOG LISTEN FLAG...: a plane with its data in DIR/data,
# logging to LOG; sets PLANE_PID, PORT, PLANE_T0 (just before it started)
start_plane() {
	local dir=$1 plog=$2 listen=$3
	shift 3
	mkdir -p "$dir"
	PLANE_T0=$EPOCHREALTIME
	"$PLANE_BIN" --listen "$listen" --data "$dir/data" --heartbeat 3600 --threads "$THREADS" \
		$PLANE_LAB_FLAGS "$@" >"$plog" 2>&1 &
	PLANE_PID=$!
	track "$PLANE_PID"
	if ! wait_for "$plog" "tether-plane\\[$PLANE_PID\\] info: listening on " 60; then
		cat "$plog" >&2
		die "the plane did not start"
	fi
	PORT=$(grep -o 'listening on [^ ]*' "$plog" | tail -n 1 | sed 's/.*://')
}

# post_batch SCHEME FILE [CURL OPTION...]: prints the new version
post_batch() {
	local scheme=$1 file=$2
	shift 2
	curl -sS -f "$@" -X POST --data-binary "@$file" "$scheme://127.0.0.1:$PORT/v1/batch" |
		sed -n 's/.*"version":\([0-9]*\).*/\1/p'
}

# metric SCHEME NAME [CURL OPTION...]: one value of the plane's /metrics
metric() {
	local scheme=$1 name=$2
	shift 2
	curl -sS "$@" "$scheme://127.0.0.1:$PORT/metrics" | awk -v k="$name" '$1 == k { print $2 }'
}

# med FILEPATTERN KEY: the median over runs of one figure ("key value" files)
med() {
	local f
	for f in $OUT/$1; do
		awk -v k="$2" '$1 == k { print $2 }' "$f"
	done | median
}

# div A B [DECIMALS]
div() {
	awk -v a="$1" -v b="$2" -v d="${3:-2}" \
		'BEGIN { if (b == 0 || a == "-" || b == "-") print "-"; else printf "%.*f\n", d, a / b }'
}

# ---- fanout: signed vs unsigned --------------------------------------------------

# fanout MODE RUN: MODE unsigned or signed; "key value" lines into
# $OUT/fanout.MODE.RUN.txt, per-stream latencies into $OUT/fanout.MODE.RUN.lat
fanout() {
	local mode=$1 run=$2 dir=$OUT/fanout.$1.$2 flags=()
	[ "$mode" = signed ] && flags=(--signing-key "$KEY")
	mkdir -p "$dir"
	start_plane "$dir" "$dir/plane.log" 127.0.0.1:0 "${flags[@]}"
	clusters_batch "$CLUSTERS" >"$dir/batch.json"
	local v1
	v1=$(post_batch http "$dir/batch.json")
	[ -n "$v1" ] || die "batch load failed"
	sleep 1   # let the write-behind of the batch settle
	local rss0 rss1 rss2 c0 c1
	rss0=$(rss_kb "$PLANE_PID")
	: >"$dir/start"
	# streams at the current version: their first event is a heartbeat
	"$LOAD_BIN" -n "$N" --version "$v1" --prefix "f$run-" --wait-push $((v1 + 1)) --rounds "$WRITES" \
		--start-file "$dir/start" --per-stream --linger 4 --timeout 300 "127.0.0.1:$PORT" \
		>"$dir/load.out" 2>"$dir/load.err" &
	local lp=$!
	track "$lp"
	wait_for "$dir/load.out" '^ready=1' 300 || die "fanout $mode: streams did not open"
	sleep 1   # node records written behind, connections settled
	rss1=$(rss_kb "$PLANE_PID")
	c0=$(cpu_ticks "$PLANE_PID")
	local w
	for w in $(seq 1 "$WRITES"); do
		timed_put cluster/c7 "$(cluster_body $((run * 100 + w)))" "$dir/start" >/dev/null || exit 1
		wait_for "$dir/load.out" "^round\\.$w\\.done=1" 120 || { log "fanout $mode: write $w not seen by all"; break; }
		sleep 1   # one write at a time: the node-record flush of the last one is done
	done
	c1=$(cpu_ticks "$PLANE_PID")
	wait_for "$dir/load.out" '^lingering=1' 60
	rss2=$(rss_kb "$PLANE_PID")
	local signed
	signed=$(metric http tether_statements_signed_total)
	wait "$lp"
	untrack "$lp"
	stop_pid "$PLANE_PID"
	rm -rf "$dir/data"
	local f=$dir/load.out
	sed -n 's/^stream=.* latency_ms=\([0-9.]*\) .*/\1/p' "$f" >"$OUT/fanout.$mode.$run.lat"
	{
		echo "streams $(kv "$f" connect.ok)"
		echo "connect_ms $(kv "$f" connect.ms)"
		echo "rss_per_stream $(((rss1 - rss0) * 1024 / N))"
		echo "rss_per_stream_after $(((rss2 - rss0) * 1024 / N))"
		echo "cpu_ms_per_write $(((c1 - c0) * 1000 / HZ / WRITES))"
		echo "client_cpu_ms_per_write $((($(kv "$f" "round.$WRITES.cpu_user_ms") + $(kv "$f" "round.$WRITES.cpu_sys_ms") - \
			$(kv "$f" connect.cpu_user_ms) - $(kv "$f" connect.cpu_sys_ms)) / WRITES))"
		echo "signed ${signed:-0}"
		echo "first_sse $(kv "$f" first.sse_bytes.mean)"
		echo "push_sse $(kv "$f" round.1.sse_bytes.mean)"
		echo "push_wire $(kv "$f" round.1.wire_bytes.mean)"
		for w in $(seq 1 "$WRITES"); do
			echo "w$w.received $(kv "$f" "round.$w.received")"
			echo "w$w.p50 $(kv "$f" "round.$w.p50_ms")"
			echo "w$w.p99 $(kv "$f" "round.$w.p99_ms")"
			echo "w$w.max $(kv "$f" "round.$w.max_ms")"
		done
	} >"$OUT/fanout.$mode.$run.txt"
	[ "$(kv "$f" connect.ok)" = "$N" ] || die "fanout $mode run $run: $(kv "$f" connect.ok) of $N streams opened"
	for w in $(seq 1 "$WRITES"); do
		[ "$(kv "$f" "round.$w.received")" = "$N" ] || die "fanout $mode run $run: write $w not on every stream"
	done
}

# the p99 of every write of every run of MODE, one a line
write_p99s() {
	local run w
	for run in $(seq 1 "$FANOUT_RUNS"); do
		for w in $(seq 1 "$WRITES"); do
			awk -v k="w$w.p99" '$1 == k { print $2 }' "$OUT/fanout.$1.$run.txt"
		done
	done
}

fanout_report() {
	echo "(1) fan-out to $N streams, unsigned vs --signing-key ($FANOUT_RUNS runs of each, interleaved;"
	echo "    $WRITES one-resource writes per run; $CLUSTERS clusters; time from just before the PUT to"
	echo "    each stream having the push, ms)"
	printf '    %-9s %9s %10s %10s %10s %8s %7s %11s  %-17s %-17s %s\n' mode RSS/strm "after wr" cpu/wr \
		"client/wr" signed "hb B" "push B/wire" "pooled p50/p99" "write p99: median" \
		"worst write p50/p99/max (medians of runs)"
	local mode
	for mode in unsigned signed; do
		local pooled50 pooled99 mp99 worst
		pooled50=$(cat "$OUT"/fanout.$mode.*.lat | percentile 0.5)
		pooled99=$(cat "$OUT"/fanout.$mode.*.lat | percentile 0.99)
		mp99=$(write_p99s "$mode" | median)
		# the write with the highest median p99: its p50/p99/max
		worst=$(for w in $(seq 1 "$WRITES"); do
			local pat="fanout.$mode.*.txt"
			echo "$(med "$pat" "w$w.p99") $(med "$pat" "w$w.p50")/$(med "$pat" "w$w.p99")/$(med "$pat" "w$w.max")"
		done | sort -g | tail -n 1 | cut -d' ' -f2)
		printf '    %-9s %9s %10s %8sms %8sms %8s %7s %11s  %-17s %-17s %s\n' "$mode" \
			"$(med "fanout.$mode.*.txt" rss_per_stream)" "$(med "fanout.$mode.*.txt" rss_per_stream_after)" \
			"$(med "fanout.$mode.*.txt" cpu_ms_per_write)" "$(med "fanout.$mode.*.txt" client_cpu_ms_per_write)" \
			"$(med "fanout.$mode.*.txt" signed)" \
			"$(med "fanout.$mode.*.txt" first_sse)" \
			"$(med "fanout.$mode.*.txt" push_sse)/$(med "fanout.$mode.*.txt" push_wire)" \
			"$pooled50/$pooled99" "$mp99" "$worst"
		eval "P99_$mode=\$mp99; POOLED99_$mode=\$pooled99"
	done
	echo "    per run, p99 of each write (ms):"
	local run
	for run in $(seq 1 "$FANOUT_RUNS"); do
		for mode in unsigned signed; do
			printf '      run %d %-9s' "$run" "$mode"
			for w in $(seq 1 "$WRITES"); do
				printf ' %s' "$(awk -v k="w$w.p99" '$1 == k { print $2 }' "$OUT/fanout.$mode.$run.txt")"
			done
			printf '   (RSS/stream %s B)\n' "$(awk '$1 == "rss_per_stream" { print $2 }' "$OUT/fanout.$mode.$run.txt")"
		done
	done
	local r1 r2 verdict=MISSED
	r1=$(div "$P99_signed" "$P99_unsigned")
	r2=$(div "$POOLED99_signed" "$POOLED99_unsigned")
	awk -v a="$r1" -v b="$r2" -v g="$GOAL_P99_RATIO" 'BEGIN { exit !(a <= g && b <= g) }' && verdict=MET
	echo "    goal p99 signed <= ${GOAL_P99_RATIO}x unsigned: $verdict (median of the writes' p99:" \
		"${r1}x; pooled p99 of every stream of every write: ${r2}x)"
	echo
}

# ---- agent: verify and digest per push -------------------------------------------

status_version() { sed -n 's/.*"version":\([0-9]*\),"state".*/\1/p' "$1/status.json" 2>/dev/null; }

# agent_case N MODE RUN: MODE plain (unsigned plane, no --trust) or trust
# (signing plane, --trust); "key value" lines into $OUT/agent.N.MODE.RUN.txt
agent_case() {
	local n=$1 mode=$2 run=$3 dir=$OUT/agent.$1.$2.$3 pflags=() aflags=()
	if [ "$mode" = trust ]; then
		pflags=(--signing-key "$KEY")
		aflags=(--trust "$KEY.pub")
	fi
	mkdir -p "$dir"
	start_plane "$dir" "$dir/plane.log" 127.0.0.1:0 "${pflags[@]}"
	local url=http://127.0.0.1:$PORT
	clusters_batch "$n" >"$dir/batch.json"
	want=$(post_batch http "$dir/batch.json")
	[ -n "$want" ] || die "batch load failed"
	synced() { [ "$(status_version "$dir/state")" = "$want" ]; }

	# the first sync: a snapshot over the stream
	local t0=$EPOCHREALTIME
	"$AGENT" --plane "$url" --node bench --state-dir "$dir/state" --output-dir "$dir/out" "${aflags[@]}" \
		>"$dir/agent.log" 2>&1 &
	local apid=$!
	track "$apid"
	wait_until 300 synced || die "agent $n $mode: did not sync"
	local sync_ms sync_cpu
	sync_ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
	sync_cpu=$(($(cpu_ns "$apid") / 1000000))
	stop_pid "$apid"

	# a boot from last-good (with --trust: every generation verified,
	# the digest of the whole state), then one-resource pushes
	t0=$EPOCHREALTIME
	"$AGENT" --plane "$url" --node bench --state-dir "$dir/state" --output-dir "$dir/out" "${aflags[@]}" \
		>"$dir/agent2.log" 2>&1 &
	apid=$!
	track "$apid"
	wait_until 120 grep -q 'node bench at version' "$dir/agent2.log" || die "agent $n $mode: did not boot"
	local boot_cpu boot_ms
	boot_cpu=$(($(cpu_ns "$apid") / 1000000))
	boot_ms=$(awk -v a="$t0" -v b="$(log_epoch "$dir/agent2.log" 'node bench at version')" \
		'BEGIN { printf "%.0f", (b - a) * 1000 }')
	wait_until 60 synced || die "agent $n $mode: not synced after the boot"
	sleep 2
	local anon c0 c1 i v perf_pid=""
	anon=$(awk '$1 == "RssAnon:" { print $2 }' "/proc/$apid/status")
	if [ "$PERF" = 1 ] && [ "$mode" = trust ] && command -v perf >/dev/null; then
		perf record -g -F 2000 -o "$dir/perf.data" -p "$apid" >"$dir/perf.log" 2>&1 &
		perf_pid=$!
		sleep 1
	fi
	c0=$(cpu_ns "$apid")
	for i in $(seq 1 "$PUSHES"); do
		v=$(curl -sS -X PUT "$url/v1/resources/cluster/c7" \
			--data "{\"endpoints\":[{\"address\":\"10.200.$((i / 256 % 256)).$((i % 256))\",\"port\":80}]}" |
			sed -n 's/.*"version":\([0-9]*\).*/\1/p')
		want=$v
		wait_until 30 synced || die "agent $n $mode: push $v not applied"
	done
	c1=$(cpu_ns "$apid")
	if [ -n "$perf_pid" ]; then
		kill -INT "$perf_pid"
		wait "$perf_pid"
	fi
	grep 'applied version' "$dir/agent2.log" | grep '(delta, 1 changes' |
		sed -n 's/.*, \([0-9.]*\) ms cpu.*/\1/p' >"$dir/cpu.txt"
	local applied refused
	applied=$(wc -l <"$dir/cpu.txt")
	refused=$(grep -c 'refused\|mismatch\|NACK' "$dir/agent2.log")
	if [ "$mode" = trust ]; then
		grep -q 'trust: pushes must carry statements' "$dir/agent2.log" || die "agent $n: --trust is not on"
	fi
	stop_pid "$apid"
	stop_pid "$PLANE_PID"
	rm -rf "$dir/plane" "$dir/data"
	{
		echo "pushes $applied"
		echo "refused $refused"
		echo "apply_p50 $(percentile 0.5 <"$dir/cpu.txt")"
		echo "apply_p90 $(percentile 0.9 <"$dir/cpu.txt")"
		echo "proc_per_push_ms $(awk -v a="$c0" -v b="$c1" -v n="$PUSHES" 'BEGIN { printf "%.3f", (b - a) / n / 1e6 }')"
		echo "sync_ms $sync_ms"
		echo "sync_cpu_ms $sync_cpu"
		echo "boot_ms $boot_ms"
		echo "boot_cpu_ms $boot_cpu"
		echo "anon_kib $anon"
	} >"$OUT/agent.$n.$mode.$run.txt"
	[ "$applied" = "$PUSHES" ] || die "agent $n $mode: $applied of $PUSHES pushes applied as one-change deltas"
}

agent_report() {
	echo "(2) tetherd per one-resource push (files consumer, $PUSHES pushes one at a time; median of"
	echo "    $AGENT_RUNS run(s)): 'apply' is the CPU the agent logs per apply (decode of the merged push"
	echo "    to persist, the candidate's digest included; p50/p90 over the pushes); 'process' is the"
	echo "    whole process's CPU over the pushes / pushes (stream read, JSON decode, signature"
	echo "    check, apply, ACK, status.json)"
	printf '    %9s %-6s %16s %14s %13s %9s %9s %9s %9s %10s\n' resources mode "apply p50/p90" "process/push" \
		"vs plain" sync_ms sync_cpu boot_ms boot_cpu "anon KiB"
	local n mode worst=0 flat=""
	for n in $SIZES; do
		for mode in plain trust; do
			local pat="agent.$n.$mode.*.txt" p50 proc
			p50=$(med "$pat" apply_p50)
			proc=$(med "$pat" proc_per_push_ms)
			local vs="" r1 r2
			if [ "$mode" = trust ]; then
				r1=$(div "$p50" "$(med "agent.$n.plain.*.txt" apply_p50)")
				r2=$(div "$proc" "$(med "agent.$n.plain.*.txt" proc_per_push_ms)")
				vs="${r1}x/${r2}x"
				worst=$(awk -v a="$worst" -v b="$r1" -v c="$r2" \
					'BEGIN { m = a; if (b > m) m = b; if (c > m) m = c; print m }')
				flat="$flat $proc"
			fi
			printf '    %9s %-6s %16s %12sms %13s %9s %9s %9s %9s %10s\n' "$n" "$mode" "$p50/$(med "$pat" apply_p90)ms" \
				"$proc" "$vs" "$(med "$pat" sync_ms)" "$(med "$pat" sync_cpu_ms)" "$(med "$pat" boot_ms)" \
				"$(med "$pat" boot_cpu_ms)" "$(med "$pat" anon_kib)"
		done
	done
	local verdict=MISSED
	awk -v w="$worst" -v g="$GOAL_AGENT_RATIO" 'BEGIN { exit !(w <= g) }' && verdict=MET
	echo "    goal --trust within ${GOAL_AGENT_RATIO}x of without: $verdict (worst ratio ${worst}x, apply or process)"
	echo "    flat in N: process CPU per push with --trust at$(echo " $SIZES" | sed 's/ /, /g; s/^,//'):$flat ms"
	local m=$OUT/micro.txt
	echo "    the checks one by one (bench/trust_micro, us per operation): verify $(kv "$m" verify_us)" \
		"(base64url, Ed25519, JSON), peek $(kv "$m" peek_us) (decoding alone, for comparison),"
	echo "    one-resource candidate digest $(kv "$m" candidate_us) (seed $(kv "$m" seed_us), add/sub" \
		"$(kv "$m" add_us), digest $(kv "$m" digest_us)); the plane's sign $(kv "$m" sign_us);" \
		"statement $(kv "$m" token_bytes) B"
	echo
}

# ---- storm: TLS reconnects after a restart, and after a failover ------------------------

# a one-member etcd for the failover part's two replicas
ETCD=""
start_etcd() {
	local cport pport
	read -r cport pport <<<"$(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')"
	"$ETCD_BIN" --name m0 --data-dir "$OUT/etcd" --listen-client-urls "http://127.0.0.1:$cport" \
		--advertise-client-urls "http://127.0.0.1:$cport" --listen-peer-urls "http://127.0.0.1:$pport" \
		--initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "m0=http://127.0.0.1:$pport" \
		--max-txn-ops 10000 >"$OUT/etcd.log" 2>&1 &
	track $!
	ETCD=http://127.0.0.1:$cport
	wait_until 30 bash -c "curl -fsS -m 1 '$ETCD/health' | grep -q '\"health\":\"true\"'" ||
		die "etcd did not start (see $OUT/etcd.log)"
}

# storm KIND MODE RUN: KIND restart (the plane is killed, BENCH_TRUST_SIGNAL,
# and started again on the same port and data) or failover (two replicas
# on one etcd; the streams' plane is killed, they come back on the other);
# MODE plain, tls (session tickets: the streams offer their sessions and
# resume) or tls-full (--tls-ticket-rotation 0 and sse_load --no-resume:
# every reconnect a full handshake, as before tickets). "key value" lines
# into $OUT/KIND.MODE.RUN.txt, per-stream return times (ms after
# readiness, or after the kill for failover) into $OUT/KIND.MODE.RUN.back
storm() {
	local kind=$1 mode=$2 run=$3 dir=$OUT/$1.$2.$3 scheme=http pflags=() lflags=() cflags=() tag=$1.$2.$3
	if [ "$mode" != plain ]; then
		scheme=https
		pflags=(--tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key")
		lflags=(--ca-file "$PKI/ca.pem")
		cflags=(--cacert "$PKI/ca.pem")
	fi
	if [ "$mode" = tls-full ]; then
		pflags+=(--tls-ticket-rotation 0)
		lflags+=(--no-resume)
	fi
	# tls-before: as tls, with another build's plane, in the same
	# interleaved runs (a before and after on one machine state)
	local PLANE_BIN=$PLANE_BIN
	if [ "$mode" = tls-before ]; then
		[ -x "$BEFORE_BIN" ] || die "mode tls-before needs BENCH_TRUST_BEFORE, another tether-plane binary"
		PLANE_BIN=$BEFORE_BIN
	fi
	[ "$STORM_SIGN" = 1 ] && pflags+=(--signing-key "$KEY")
	mkdir -p "$dir"
	local alt_pid="" alt_port=""
	if [ "$kind" = failover ]; then
		pflags+=(--store etcd --etcd "$ETCD" --etcd-prefix "/trust/$tag/")
		start_plane "$dir/b" "$dir/planeB.log" 127.0.0.1:0 "${pflags[@]}"
		alt_pid=$PLANE_PID alt_port=$PORT
		lflags+=(--failover "127.0.0.1:$alt_port")
	fi
	start_plane "$dir" "$dir/plane1.log" 127.0.0.1:0 "${pflags[@]}"
	clusters_batch "$CLUSTERS" >"$dir/batch.json"
	local v1
	v1=$(post_batch "$scheme" "$dir/batch.json" "${cflags[@]}")
	[ -n "$v1" ] || die "batch load failed"
	sleep 1
	local rss0 rss1 rss3 c0 c1
	rss0=$(rss_kb "$PLANE_PID")
	c0=$(cpu_ticks "$PLANE_PID")
	# the N streams over CLIENTS load processes (the first takes the
	# remainder), each with its own node names; the same CLIENTS in every
	# mode
	local j cnt lps=() opened=0
	for j in $(seq 0 $((CLIENTS - 1))); do
		cnt=$((N / CLIENTS))
		[ "$j" -eq 0 ] && cnt=$((cnt + N % CLIENTS))
		"$LOAD_BIN" -n "$cnt" --version "$v1" --prefix "s$run-p$j-" --reconnect --reconnect-jitter "$JITTER" \
			--per-stream --timeout 300 "${lflags[@]}" "127.0.0.1:$PORT" >"$dir/load.$j.out" 2>"$dir/load.$j.err" &
		lps+=($!)
		track $!
	done
	for j in $(seq 0 $((CLIENTS - 1))); do
		wait_for "$dir/load.$j.out" '^ready=1' 300 || die "$kind $mode: process $j's streams did not open"
		opened=$((opened + $(kv "$dir/load.$j.out" connect.ok)))
	done
	[ "$opened" = "$N" ] || die "$kind $mode: $opened of $N opened"
	sleep 1   # node records written behind, connections settled
	rss1=$(rss_kb "$PLANE_PID")
	c1=$(cpu_ticks "$PLANE_PID")

	local t_kill t_dead old=$PLANE_PID t_start t_ready c_ready plog
	t_kill=$EPOCHREALTIME
	kill -"$SIGNAL" "$old"
	wait "$old" 2>/dev/null
	untrack "$old"
	t_dead=$EPOCHREALTIME
	if [ "$kind" = failover ]; then
		# the other replica is up already: times are from the kill
		PLANE_PID=$alt_pid PORT=$alt_port
		plog=$dir/planeB.log
		t_start=$t_kill t_ready=$t_kill
	else
		# the restart: same port, same data
		plog=$dir/plane2.log
		start_plane "$dir" "$plog" "127.0.0.1:$PORT" "${pflags[@]}"
		t_start=$PLANE_T0
		t_ready=$(log_epoch "$plog" 'info: listening on ')
	fi
	c_ready=$(cpu_ticks "$PLANE_PID")
	for j in $(seq 0 $((CLIENTS - 1))); do
		wait_for "$dir/load.$j.out" '^reconnect\.done=1' 300 || die "$kind $mode: not every stream came back"
	done
	local c_back resumed=- full=-
	c_back=$(cpu_ticks "$PLANE_PID")
	rss3=$(rss_kb "$PLANE_PID")
	if [ "$mode" != plain ]; then
		resumed=$(metric https 'tether_tls_handshakes_total{resumed="true"}' "${cflags[@]}")
		full=$(metric https 'tether_tls_handshakes_total{resumed="false"}' "${cflags[@]}")
	fi
	for j in "${lps[@]}"; do
		wait "$j"
		untrack "$j"
	done
	stop_pid "$PLANE_PID"
	rm -rf "$dir/data" "$dir/b/data"
	local f=$dir/load.out back
	load_merge "$dir"/load.[0-9]*.out >"$f"
	back=$(kv "$f" reconnect.back_last_at)
	awk -v r="$t_ready" '/^rstream=/ {
		for (i = 1; i <= NF; i++)
			if ($i ~ /^back_at=/) { sub(/back_at=/, "", $i); print ($i - r) * 1000 }
	}' "$f" >"$OUT/$tag.back"
	# the plane's side: when it handled each stream's request (its log line,
	# ms after readiness; the log's clock is UTC time of day)
	grep 'info: stream: node .* connected at version' "$plog" | cut -d' ' -f1 |
		awk -v r="$t_ready" '
		function sec(t, a) { split(substr(t, 12, 12), a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
		{ d = (sec($1) - (r % 86400)) * 1000; if (d < -43200000) d += 86400000; if (d >= 0) printf "%.0f\n", d }' |
		sort -n >"$OUT/$tag.served"
	{
		echo "clients $CLIENTS"
		echo "streams $(kv "$f" connect.ok)"
		echo "connect_ms $(kv "$f" connect.ms)"
		echo "open_cpu_ms $(((c1 - c0) * 1000 / HZ))"
		echo "open_client_cpu_ms $(($(kv "$f" connect.cpu_user_ms) + $(kv "$f" connect.cpu_sys_ms)))"
		echo "rss_per_stream $(((rss1 - rss0) * 1024 / N))"
		echo "rss_per_stream_storm $(((rss3 - rss0) * 1024 / N))"
		echo "down_ms $(awk -v a="$t_kill" -v b="$t_ready" 'BEGIN { printf "%.0f", (b - a) * 1000 }')"
		echo "exit_ms $(awk -v a="$t_kill" -v b="$t_dead" 'BEGIN { printf "%.0f", (b - a) * 1000 }')"
		echo "start_to_ready_ms $(awk -v a="$t_start" -v b="$t_ready" 'BEGIN { printf "%.0f", (b - a) * 1000 }')"
		echo "back_from_kill_ms $(awk -v a="$t_kill" -v b="$back" 'BEGIN { printf "%.0f", (b - a) * 1000 }')"
		echo "back_from_ready_ms $(awk -v a="$t_ready" -v b="$back" 'BEGIN { printf "%.0f", (b - a) * 1000 }')"
		echo "back_p50_ms $(percentile 0.5 <"$OUT/$tag.back" | awk '{ printf "%.0f", $1 }')"
		echo "back_p99_ms $(percentile 0.99 <"$OUT/$tag.back" | awk '{ printf "%.0f", $1 }')"
		echo "served $(wc -l <"$OUT/$tag.served")"
		echo "served_p50_ms $(percentile 0.5 <"$OUT/$tag.served")"
		echo "served_last_ms $(tail -n 1 "$OUT/$tag.served")"
		echo "storm_cpu_ms $(((c_back - c_ready) * 1000 / HZ))"
		echo "plane_cpu_ms $((c_back * 1000 / HZ))"
		echo "client_cpu_ms $(($(kv "$f" reconnect.cpu_user_ms) + $(kv "$f" reconnect.cpu_sys_ms) - \
			$(kv "$f" connect.cpu_user_ms) - $(kv "$f" connect.cpu_sys_ms)))"
		echo "attempts $(kv "$f" reconnect.attempts)"
		echo "attempts_max $(kv "$f" reconnect.attempts_max)"
		echo "failed_connect $(kv "$f" reconnect.failed_connect)"
		echo "failed_tls $(kv "$f" reconnect.failed_tls)"
		echo "failed_http $(kv "$f" reconnect.failed_http)"
		echo "failed_closed $(kv "$f" reconnect.failed_closed)"
		echo "reestablished $(kv "$f" reconnect.reestablished)"
		echo "tls_offered $(kv "$f" reconnect.tls_offered)"
		echo "tls_resumed $(kv "$f" reconnect.tls_resumed)"
		echo "plane_resumed $resumed"
		echo "plane_full $full"
	} >"$OUT/$tag.txt"
	[ "$(kv "$f" reconnect.back)" = "$N" ] || die "$kind $mode run $run: $(kv "$f" reconnect.back) of $N back"
}

# load_merge FILE...: the load processes' outputs as one (what storm reads):
# the per-stream lines of all; times to open all and the last stream back
# the latest of any process; attempts_max the largest; counts and CPU the
# sums
load_merge() {
	awk -F= '
	/^rstream=/ { print; next }
	$1 == "connect.ms" || $1 == "reconnect.back_last_at" || $1 == "reconnect.attempts_max" {
		if (!($1 in v) || $2 + 0 > v[$1] + 0) v[$1] = $2; next }
	$1 ~ /^(connect\.(ok|cpu_user_ms|cpu_sys_ms)|reconnect\.(back|attempts|failed_connect|failed_tls|failed_http|failed_closed|reestablished|tls_offered|tls_resumed|cpu_user_ms|cpu_sys_ms))$/ {
		v[$1] += $2; next }
	END { for (k in v) print k "=" v[k] }' "$@"
}

# storm_table KIND: the storm's table for restart or failover
storm_table() {
	local kind=$1 mode run
	printf '    %-8s %6s %6s %13s %13s %17s %17s %10s %10s %9s %11s %15s\n' mode "down" "ready" "all back:kill" \
		"all back:rdy" "p50/p99 from rdy" "plane: p50/last" "plane cpu" "client cpu" attempts "refused/tls" \
		"resumed/full"
	for mode in $STORM_MODES; do
		local pat="$kind.$mode.*.txt"
		printf '    %-8s %6s %6s %13s %13s %17s %17s %8sms %8sms %9s %11s %15s\n' "$mode" "$(med "$pat" exit_ms)" \
			"$(med "$pat" start_to_ready_ms)" "$(med "$pat" back_from_kill_ms)" "$(med "$pat" back_from_ready_ms)" \
			"$(med "$pat" back_p50_ms)/$(med "$pat" back_p99_ms)" \
			"$(med "$pat" served_p50_ms)/$(med "$pat" served_last_ms)" "$(med "$pat" storm_cpu_ms)" \
			"$(med "$pat" client_cpu_ms)" "$(med "$pat" attempts)" \
			"$(med "$pat" failed_connect)/$(med "$pat" failed_tls)" \
			"$(med "$pat" plane_resumed)/$(med "$pat" plane_full)"
	done
	echo "    per run, all back from the kill / from readiness (ms):"
	for run in $(seq 1 "$STORM_RUNS"); do
		for mode in $STORM_MODES; do
			printf '      run %d %-8s %s / %s\n' "$run" "$mode" \
				"$(awk '$1 == "back_from_kill_ms" { print $2 }' "$OUT/$kind.$mode.$run.txt")" \
				"$(awk '$1 == "back_from_ready_ms" { print $2 }' "$OUT/$kind.$mode.$run.txt")"
		done
	done
	local p t
	p=$(med "$kind.plain.*.txt" back_from_kill_ms)
	for mode in $STORM_MODES; do
		[ "$mode" = plain ] && continue
		t=$(med "$kind.$mode.*.txt" back_from_kill_ms)
		echo "    $mode all back from the kill: $(div "$t" "$p")x plain HTTP (goal for tls: within ${GOAL_STORM_RATIO}x)"
	done
	for mode in $STORM_MODES; do
		echo "    $mode: plane cpu per reconnect $(awk -v c="$(med "$kind.$mode.*.txt" storm_cpu_ms)" -v n="$N" \
			'BEGIN { printf "%.3f", c / n }') ms, clients' cpu per reconnect $(awk \
			-v c="$(med "$kind.$mode.*.txt" client_cpu_ms)" -v n="$N" 'BEGIN { printf "%.3f", c / n }') ms"
	done
}

storm_report() {
	echo "(3) $N streams, the plane stopped with SIG$SIGNAL and restarted on the same port and data"
	echo "    ($STORM_RUNS runs of each, interleaved; $CLIENTS load processes; reconnect delay uniform in 0..$JITTER ms,"
	echo "    drawn again after each failed attempt; 'back' = every stream has the first event of a new"
	echo "    connection, in every load process; ms)"
	storm_table restart
	echo "    (down = kill until the old plane had exited; ready = the new plane's start until its"
	echo "    'listening on' line; from rdy = the client's first event on each new connection;"
	echo "    plane = when the plane handled each stream's request (its log); plane cpu = from"
	echo "    readiness until all were back; client = the sse_load processes' CPU meanwhile, summed;"
	echo "    resumed/full = the new plane's tether_tls_handshakes_total, its own readiness checks"
	echo "    included)"
	echo
	echo "(4) plane RSS per stream at N = $N (medians of $STORM_RUNS runs)"
	printf '    %-8s %10s %14s %12s %16s %18s\n' mode RSS/strm "after restart" "open all ms" "plane cpu open" \
		"client cpu open"
	local mode
	for mode in $STORM_MODES; do
		local pat="restart.$mode.*.txt"
		printf '    %-8s %10s %14s %12s %14sms %16sms\n' "$mode" "$(med "$pat" rss_per_stream)" \
			"$(med "$pat" rss_per_stream_storm)" "$(med "$pat" connect_ms)" "$(med "$pat" open_cpu_ms)" \
			"$(med "$pat" open_client_cpu_ms)"
	done
	echo "    (goal: a TLS stream <= $GOAL_TLS_STREAM_B B)"
	echo
}

failover_report() {
	echo "(3b) $N streams on one of two replicas sharing an etcd store; it is stopped with SIG$SIGNAL and"
	echo "    the streams come back on the other (sse_load --failover); times from the kill ($STORM_RUNS runs,"
	echo "    $CLIENTS load processes)"
	storm_table failover
	echo
}

# ---- run ------------------------------------------------------------------------

log "machine: $MACHINE; open files $(ulimit -n); parts: $PARTS"
for part in $PARTS; do
	case $part in
	fanout)
		for run in $(seq 1 "$FANOUT_RUNS"); do
			order="unsigned signed"
			[ $((run % 2)) = 0 ] && order="signed unsigned"
			for mode in $order; do
				log "fanout run $run/$FANOUT_RUNS: $mode, $N streams, $WRITES writes"
				fanout "$mode" "$run"
			done
		done
		;;
	agent)
		need "$MICRO_BIN"
		log "agent: trust_micro"
		"$MICRO_BIN" --ms 500 >"$OUT/micro.txt" || die "trust_micro failed"
		for run in $(seq 1 "$AGENT_RUNS"); do
			for n in $SIZES; do
				order="plain trust"
				[ $((run % 2)) = 0 ] && order="trust plain"
				for mode in $order; do
					log "agent run $run/$AGENT_RUNS: $n resources, $mode, $PUSHES pushes"
					agent_case "$n" "$mode" "$run"
				done
			done
		done
		;;
	storm | failover)
		kind=restart
		if [ "$part" = failover ]; then
			kind=failover
			need "$ETCD_BIN"
			[ -n "$ETCD" ] || start_etcd
		fi
		for run in $(seq 1 "$STORM_RUNS"); do
			order=$STORM_MODES
			[ $((run % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$STORM_MODES" | tac | tr '\n' ' ')
			for mode in $order; do
				log "$part run $run/$STORM_RUNS: $mode, $N streams, SIG$SIGNAL and $kind"
				storm "$kind" "$mode" "$run"
			done
		done
		;;
	*) die "unknown part '$part' (fanout, agent, storm, failover)" ;;
	esac
done

{
	bench_header "tether trust bench results"
	echo "plane: $PLANE_BIN --threads $THREADS --heartbeat 3600 $PLANE_LAB_FLAGS"
	echo
	for part in $PARTS; do
		"${part}_report"
	done
	echo "raw output, per stream: $OUT"
} >"$RESULTS"
cat "$RESULTS"
