# bench/relay.sh: relays (issue 11, part 4; run as `bash bench/relay.sh
# SRCDIR BUILDDIR`). BENCH_RELAY_NODES simulated nodes (default 100,000:
# bench/sse_load processes, each under its file limit) behind N relays
# (tether-plane --upstream) behind one origin, for each N in
# BENCH_RELAY_COUNTS. Load clients, relays and origin all run on this one
# machine and share its cores; the results say how many.
#
# For each N, BENCH_RUNS times (the counts in turn, in reverse order on
# even runs): a fresh origin with BENCH_CLUSTERS clusters, N relays
# following it, the nodes spread evenly over the relays at the origin's
# version (each stream's first event is a heartbeat). Then:
#   fan-out   BENCH_WRITES one-resource PUTs to the origin, one at a time:
#             the next once the origin and the relays are idle again (the
#             node records the last one set off are in; how long that took
#             is reported); for each, the time from just before the PUT
#             until each node had the push (sse_load --wait-push/--rounds,
#             the start time fed to every load process through one
#             --start-file), p50/p99/max over every node of every process;
#             goal: every node within 2 s
#   bytes     what the origin sends per write: the growth of its
#             tether_push_bytes_total (every byte of pushes and relay-stream
#             events) over the writes, divided by the writes; and what the
#             relays sent the nodes (as the clients counted it)
#   memory    each relay's VmRSS with its streams open minus before they
#             opened, over its streams
#   failover  (N >= 2) every load process has --failover to another relay
#             (process j of relay k to relay k+1+j mod N-1, with enough
#             processes per relay that the survivors have room for relay 0's
#             streams); relay 0 is stopped (SIGSTOP), one more write lands
#             at the origin and the other relays, and relay 0 is killed
#             (kill -9), so its nodes come back one version behind: the time
#             from the kill until the last of them had the first event of
#             its new connection (goal < 10 s), and what that event was
#             (sse_load counts heartbeats, deltas and snapshots, and every
#             snapshot after the loss; goal: 0 snapshots). The survivors'
#             tether_snapshots_total is read too when a relay's /metrics
#             works (probed first on a throwaway relay).
# The CPU of the origin, the relays and the load clients over the writes,
# the requests the origin served (the relays' node-record batches) and the
# context switches (the relays', and the machine's from /proc/stat) are
# reported per write, for choosing N. A relay that dies, or a write that
# misses nodes, marks the run INVALID; so does a relay that stalls: when a
# load process's streams have not all opened within
# BENCH_RELAY_OPEN_TIMEOUT, the relay's thread stacks (gdb) and listen
# backlog are saved, one more connection is opened to it, and whether that
# woke it is written down. Each relay's exit status when it is stopped
# (SIGTERM) at the end is written down.
# Then, unless BENCH_RELAY_DIRECT=0, the same writes once with
# BENCH_RELAY_DIRECT nodes (default 10,000) straight on a fresh origin: its
# bytes and CPU per write without relays. One plane holds a stream per
# descriptor: when the file limit is too low for that many, the script
# raises its soft and hard limit at its start (the relays' runs keep the
# layout the limit it started with gives) as far as the direct origin
# needs, where it may (root with CAP_SYS_RESOURCE, up to
# fs.nr_open), says so, and otherwise skips the direct run with a line
# saying why. The direct nodes are spread over load processes of at most
# BENCH_RELAY_DIRECT_PER_PROC streams each (10,000: as many as one relay's
# at 100,000 nodes behind 10), so one process's core does not limit them.
#
# Knobs (environment): BENCH_RELAY_NODES (100000), BENCH_RELAY_COUNTS
# ("6 7 10 14"; a count whose relays cannot hold the nodes under the file
# limit is skipped and said so, and the failover of one whose survivors
# have no room for relay 0's nodes), BENCH_RUNS (3), BENCH_WRITES (5),
# BENCH_CLUSTERS (1000), BENCH_THREADS (2: every plane's --threads),
# BENCH_RELAY_JITTER (1000: a lost stream reconnects after a delay uniform
# in 0..JITTER ms), BENCH_RELAY_DIRECT (10000), BENCH_RELAY_TIMEOUT (300 s:
# the load clients' --timeout), BENCH_RELAY_OPEN_TIMEOUT (60 s: streams not
# all open by then mean a stalled relay), BENCH_RELAY_PERF (0; 1 records `perf
# record -g` of the origin and of relay r1 during the writes of the first
# run, into each N's directory, and of the direct origin during its writes,
# into direct/), BENCH_RELAY_ACK (0; 1: every node ACKs
# every push, sse_load --ack, to the relay it streams from or, direct, to
# the origin: the relays then carry the ACKs up),
# BENCH_RELAY_DIRECT_PER_PROC (10000), BENCH_PLANE (another tether-plane
# binary).
# Results in BUILDDIR/bench-relay.txt; per-run figures (n<N>.r<RUN>.txt),
# every load client's output (one line per stream and write) and every
# plane's log in BUILDDIR/bench-out/relay/.

# $EPOCHREALTIME and /dev/tcp are bash's
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u

SRCDIR=${1:?usage: relay.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: relay.sh SRCDIR BUILDDIR}
PLANE_BIN=${BENCH_PLANE:-$BUILDDIR/tether-plane}
LOAD_BIN=$BUILDDIR/bench/sse_load
NODES=${BENCH_RELAY_NODES:-100000}
COUNTS=${BENCH_RELAY_COUNTS:-6 7 10 14}
RUNS=${BENCH_RUNS:-3}
WRITES=${BENCH_WRITES:-5}
CLUSTERS=${BENCH_CLUSTERS:-1000}
THREADS=${BENCH_THREADS:-2}
JITTER=${BENCH_RELAY_JITTER:-1000}
DIRECT=${BENCH_RELAY_DIRECT:-10000}
DIRECT_PER_PROC=${BENCH_RELAY_DIRECT_PER_PROC:-10000}
TIMEOUT=${BENCH_RELAY_TIMEOUT:-300}
# a connect storm of 100,000 streams takes about 10 s here
OPEN_TIMEOUT=${BENCH_RELAY_OPEN_TIMEOUT:-60}
STALL_GRACE=30
PERF=${BENCH_RELAY_PERF:-0}
ACK=${BENCH_RELAY_ACK:-0}
ACK_OPT=()
[ "$ACK" = 1 ] && ACK_OPT=(--ack)
OUT=$BUILDDIR/bench-out/relay
RESULTS=$BUILDDIR/bench-relay.txt
# goals of issue 11
GOAL_ALL_MS=2000
GOAL_BACK_MS=10000

BENCH_NAME=relay
. "$(dirname "$0")/lib.sh"
need "$PLANE_BIN" "$LOAD_BIN"
command -v curl >/dev/null || die "relay.sh needs curl"

BEGAN=$EPOCHREALTIME
rm -rf "$OUT"
mkdir -p "$OUT"
# lib.sh raised the file limit as far as allowed; every process inherits it
NOFILE=$(ulimit -n)
# streams one load process may hold (sse_load wants 64 descriptors more)
CLIENT_MAX=$((NOFILE - 100))
# streams one plane may hold: it takes the file limit - 32 connections
# (--max-connections' default); a few more for the bench's own requests
PLANE_MAX=$((NOFILE - 32 - 16))
# node records: every node, with room (the default is 100,000)
MAX_NODES=$((NODES + DIRECT + 1000))
HZ=$(getconf CLK_TCK)

# raise_nofile NEED: this shell's soft and hard file limit (so every
# process it starts from now on) to at least NEED where that is allowed;
# says what it did, or why it could not (returns 1)
raise_nofile() {
	local need=$1 soft hard nr cap
	soft=$(ulimit -Sn)
	hard=$(ulimit -Hn)
	[ "$soft" = unlimited ] || [ "$soft" -ge "$need" ] && return 0
	nr=$(cat /proc/sys/fs/nr_open 2>/dev/null || echo 1048576)
	if [ "$need" -gt "$nr" ]; then
		log "open files: $need wanted, above fs.nr_open ($nr), the most a process may have"
		return 1
	fi
	if [ "$hard" != unlimited ] && [ "$hard" -lt "$need" ] && ! ulimit -Hn "$need" 2>/dev/null; then
		cap=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
		if [ -n "$cap" ] && [ $((0x$cap >> 24 & 1)) = 1 ]; then
			log "open files: raising the hard limit $hard to $need failed"
		else
			log "open files: cannot raise the hard limit $hard to $need: that needs CAP_SYS_RESOURCE," \
				"which this process lacks (uid $(id -u), CapEff ${cap:-?})"
		fi
		return 1
	fi
	ulimit -Sn "$need" 2>/dev/null || { log "open files: raising the soft limit $soft to $need failed"; return 1; }
	log "open files: raised from $soft (hard $hard) to $(ulimit -Sn) (hard $(ulimit -Hn)), for the direct origin's" \
		"$DIRECT streams; the relays' layout stays that of $NOFILE"
}

# the direct origin: its streams and the bench's own requests under the
# file limit (raised for it when it may be); its load processes hold at
# most DIRECT_PER_PROC streams each
[ "$DIRECT" -gt 0 ] && [ "$DIRECT" -gt "$PLANE_MAX" ] && raise_nofile $((DIRECT + 32 + 16))
DIRECT_MAX=$(($(ulimit -n) - 32 - 16))
DIRECT_CLIENT_MAX=$(($(ulimit -n) - 100))
[ "$DIRECT_CLIENT_MAX" -le "$DIRECT_PER_PROC" ] || DIRECT_CLIENT_MAX=$DIRECT_PER_PROC

# wait_out FILE REGEX SECONDS: wait_for on a load client's output, whose
# newest line is the one waited for: only its last 4 KiB are read (the
# output grows by a line per stream and write, megabytes, and the waits
# run while the writes are measured), every 50 ms
tail_has() {
	tail -c 4096 "$1" 2>/dev/null | grep -q -- "$2"
}
wait_out() {
	BENCH_POLL=0.05 wait_until "$3" tail_has "$1" "$2"
}

listen_port() {
	grep -o 'listening on [^ ]*' "$1" | tail -n 1 | sed 's/.*://'
}

# metric PORT NAME: a plane's metric (empty when it does not answer)
metric() {
	curl -fsS -m 5 "http://127.0.0.1:$1/metrics" 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'
}

# healthz_version PORT
healthz_version() {
	curl -fsS -m 5 "http://127.0.0.1:$1/healthz" 2>/dev/null | sed -n 's/.*"version":\([0-9]*\).*/\1/p'
}

# ctxt_sum PID: voluntary + involuntary context switches of all its threads
ctxt_sum() {
	cat /proc/"$1"/task/*/status 2>/dev/null |
		awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { s += $2 } END { printf "%.0f\n", s }'
}

# machine_ctxt: context switches of the whole machine since boot
machine_ctxt() {
	awk '$1 == "ctxt" { print $2 }' /proc/stat
}

# machine_cpu: "BUSY SOFTIRQ STEAL": ms of CPU the whole machine used since
# boot in processes (user, nice, system, irq), in softirqs (most of it the
# loopback TCP of these streams, charged to no process) and ms stolen from
# it by the host
machine_cpu() {
	awk -v hz="$HZ" '$1 == "cpu" { printf "%.0f %.0f %.0f\n", ($2 + $3 + $4 + $7) * 1000 / hz, $8 * 1000 / hz,
		$9 * 1000 / hz }' /proc/stat
}

# settle PID...: waits until the processes are idle (less than 40 ms of CPU
# in 400 ms: the node records a write set off are in), at most 30 s; prints
# how long that took (s)
settle() {
	local t0=$EPOCHREALTIME a b
	a=$(cpu_ms "$@")
	for _ in $(seq 1 75); do
		sleep 0.4
		b=$(cpu_ms "$@")
		[ $((b - a)) -lt 40 ] && break
		a=$b
	done
	awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }'
}

# start_origin DIR: sets ORIGIN_PID, ORIGIN_PORT
start_origin() {
	"$PLANE_BIN" --listen 127.0.0.1:0 --data "$1/origin.data" --heartbeat 3600 --threads "$THREADS" \
		--max-nodes "$MAX_NODES" $PLANE_LAB_FLAGS >"$1/origin.log" 2>&1 &
	ORIGIN_PID=$!
	track "$ORIGIN_PID"
	wait_for "$1/origin.log" 'listening on ' 20 || die "the origin did not start (see $1/origin.log)"
	ORIGIN_PORT=$(listen_port "$1/origin.log")
}

# start_relay DIR K: relay rK of the origin; sets RPID[K], RPORT[K]. A
# relay listens only once it has the origin's state.
RPID=()
RPORT=()
start_relay() {
	"$PLANE_BIN" --upstream "http://127.0.0.1:$ORIGIN_PORT" --relay-id "r$2" --listen 127.0.0.1:0 \
		--data "$1/r$2.data" --heartbeat 3600 --threads "$THREADS" --max-nodes "$MAX_NODES" \
		$PLANE_LAB_FLAGS >"$1/r$2.log" 2>&1 &
	RPID[$2]=$!
	track "${RPID[$2]}"
}
relay_ready() {
	wait_for "$1/r$2.log" 'listening on ' 30 || die "relay r$2 did not start (see $1/r$2.log)"
	RPORT[$2]=$(listen_port "$1/r$2.log")
}

# load_clusters DIR: batch-loads the clusters into the origin; prints the version
load_clusters() {
	clusters_batch "$CLUSTERS" >"$1/batch.json"
	curl -fsS -X POST --data-binary "@$1/batch.json" "http://127.0.0.1:$ORIGIN_PORT/v1/batch" |
		sed -n 's/.*"version":\([0-9]*\).*/\1/p'
}

# A relay's GET /metrics may fail (at 63f029f it crashes the relay): probe
# it on a throwaway relay, so the survivors' snapshots are read only when
# reading them cannot take a survivor down.
probe_relay_metrics() {
	local dir=$OUT/probe
	mkdir -p "$dir"
	start_origin "$dir"
	start_relay "$dir" 0
	relay_ready "$dir" 0
	RELAY_METRICS=0
	PROBE_STATUS=
	metric "${RPORT[0]}" tether_snapshots_total >/dev/null
	sleep 0.5
	if [ -n "$(healthz_version "${RPORT[0]}")" ] && [ -n "$(metric "${RPORT[0]}" tether_snapshots_total)" ]; then
		RELAY_METRICS=1
		stop_pid "${RPID[0]}"
	else
		wait "${RPID[0]}" 2>/dev/null
		PROBE_STATUS=$?
		untrack "${RPID[0]}"
		log "GET /metrics on a relay did not answer (the relay exited with status $PROBE_STATUS; see $dir/r0.log);" \
			"snapshots are counted at the nodes only"
	fi
	stop_pid "$ORIGIN_PID"
}

# ---- the layout of the nodes -------------------------------------------------

# layout N: sets PER (nodes per relay, relay 0 takes the remainder), SPREAD
# (relays relay 0's nodes fail over to; 0: no failover), PROCS (load
# processes per relay) and FIT (1 when N relays hold NODES)
layout() {
	local n=$1 smax room
	PER=$((NODES / n))
	smax=$((PER + NODES % n))
	FIT=1
	[ "$smax" -le "$PLANE_MAX" ] || FIT=0
	SPREAD=0
	if [ "$n" -ge 2 ] && [ $FIT = 1 ]; then
		room=$((PLANE_MAX - smax))
		if [ "$room" -gt 0 ]; then
			SPREAD=$(((smax + room - 1) / room))
			[ "$SPREAD" -le $((n - 1)) ] || SPREAD=0
		fi
	fi
	PROCS=$(((smax + CLIENT_MAX - 1) / CLIENT_MAX))
	[ "$PROCS" -ge "$SPREAD" ] || PROCS=$SPREAD
}

# ---- load clients ---------------------------------------------------------------

LPIDS=()
LOUTS=()
# start_loads DIR N VERSION: every relay's nodes over PROCS processes;
# their stdout in DIR/load.K.J
start_loads() {
	local dir=$1 n=$2 v=$3 k j cnt fo
	LPIDS=()
	LOUTS=()
	: >"$dir/start"
	for k in $(seq 0 $((n - 1))); do
		for j in $(seq 0 $((PROCS - 1))); do
			cnt=$((PER / PROCS))
			[ "$j" -eq 0 ] && cnt=$((cnt + PER % PROCS))
			[ "$k" -eq 0 ] && [ "$j" -eq 0 ] && cnt=$((cnt + NODES % n))
			fo=()
			[ "$SPREAD" -gt 0 ] && fo=(--failover "127.0.0.1:${RPORT[$(((k + 1 + j % (n - 1)) % n))]}"
				--reconnect-jitter "$JITTER")
			"$LOAD_BIN" -n "$cnt" --version "$v" --prefix "r${k}p$j-" --wait-push $((v + 1)) --rounds "$WRITES" \
				--start-file "$dir/start" --per-stream --timeout "$TIMEOUT" "${fo[@]}" "${ACK_OPT[@]}" \
				"127.0.0.1:${RPORT[$k]}" >"$dir/load.$k.$j" 2>"$dir/load.$k.$j.err" &
			LPIDS+=($!)
			LOUTS+=("$dir/load.$k.$j")
			track $!
		done
	done
}

# loads_ready [FIGS]: every load process had every stream's first event.
# With FIGS (relays), a load process whose streams have not all opened
# within OPEN_TIMEOUT is a stalled relay: its threads' stacks and listen
# backlog are saved (DIR/rK.stall.*), one more connection is opened to it
# (GET /healthz), and the streams get STALL_GRACE s more; what happened is
# written into FIGS. Returns 1 when streams still did not open.
loads_ready() {
	local figs=${1:-} f k pid port dir t
	for f in "${LOUTS[@]}"; do
		if ! wait_out "$f" '^ready=1' "$OPEN_TIMEOUT"; then
			[ -n "$figs" ] || die "streams did not open within $OPEN_TIMEOUT s (see $f.err)"
			k=${f##*/load.}
			k=${k%%.*}
			pid=${RPID[$k]}
			port=${RPORT[$k]}
			dir=${f%/*}
			log "relay r$k: streams of $f not open after $OPEN_TIMEOUT s; saving its stacks, then one more connection"
			ss -ltn "( sport = :$port )" >"$dir/r$k.stall.listen" 2>&1
			ss -tn state established "( sport = :$port )" | tail -n +2 | wc -l >"$dir/r$k.stall.established"
			for t in /proc/"$pid"/task/*; do
				echo "$(cat "$t/comm") $(cat "$t/wchan" 2>/dev/null)"
			done >"$dir/r$k.stall.wchan" 2>&1
			command -v gdb >/dev/null &&
				timeout 60 gdb -q -batch -p "$pid" -ex 'thread apply all bt' >"$dir/r$k.stall.stacks" 2>&1
			echo "stall r$k: $(grep -c 'stream: node .* connected' "$dir/r$k.log" 2>/dev/null) streams connected in its log;" \
				"backlog (Recv-Q) $(awk 'NR == 2 { print $2 }' "$dir/r$k.stall.listen")," \
				"$(cat "$dir/r$k.stall.established") established" >>"$figs"
			t=$EPOCHREALTIME
			curl -fsS -m 5 -o /dev/null "http://127.0.0.1:$port/healthz" ||
				echo "stall r$k: GET /healthz failed" >>"$figs"
			if wait_out "$f" '^ready=1' "$STALL_GRACE"; then
				echo "stall r$k: every stream open $(awk -v a="$t" -v b="$EPOCHREALTIME" \
					'BEGIN { printf "%.1f", b - a }') s after one more connection" >>"$figs"
			else
				echo "stall r$k: streams still not open $STALL_GRACE s after one more connection" >>"$figs"
				return 1
			fi
		fi
		if [ "$(kv "$f" connect.failed)" != 0 ] || [ "$(kv "$f" connect.ok)" != "$(kv "$f" connect.streams)" ]; then
			[ -n "$figs" ] || die "not every stream opened: $(kv "$f" connect.ok) of $(kv "$f" connect.streams)" \
				"(see $f.err)"
			echo "stall $f: $(kv "$f" connect.ok) of $(kv "$f" connect.streams) streams opened" >>"$figs"
			return 1
		fi
	done
}

# round_done W: every load process saw round W complete
round_done() {
	local f
	for f in "${LOUTS[@]}"; do
		wait_out "$f" "^round\\.$1\\.done=1" 120 || return 1
	done
}

# stop_loads: the load clients still running (those waiting for a failover
# that is not theirs)
stop_loads() {
	local p
	for p in "${LPIDS[@]}"; do
		stop_pid "$p"
	done
}

# latencies W FILE...: every stream's latency of round W (ms), one a line
latencies() {
	local w=$1
	shift
	cat "$@" | awk -v r="round=$w" '$1 ~ /^stream=/ && $3 == r { sub(/latency_ms=/, "", $5); print $5 }'
}

# sum_kv KEY FILE...: the sum of KEY over the load outputs
sum_kv() {
	local k=$1 f
	shift
	for f in "$@"; do kv "$f" "$k"; done | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# alive PID: the process runs (not gone, not a zombie waiting to be reaped)
alive() {
	[ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# cpu_ms PID...: their user + system CPU so far, ms (a process gone counts
# 0); one awk for all of them
cpu_ms() {
	local p files=()
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] && files+=("/proc/$p/stat")
	done
	[ ${#files[@]} -gt 0 ] || { echo 0; return; }
	awk -v hz="$HZ" '{ t += $14 + $15 } END { printf "%.0f\n", t * 1000 / hz }' "${files[@]}" 2>/dev/null || echo 0
}

# check_relays FIGS STAGE: a relay that is no longer running (other than
# one the failover killed) is written down with its exit status; returns 1
# when one died
check_relays() {
	local k st rc=0
	for k in "${!RPID[@]}"; do
		[ "${KILLED:-}" = "$k" ] && continue
		alive "${RPID[$k]}" && continue
		wait "${RPID[$k]}" 2>/dev/null
		st=$?
		untrack "${RPID[$k]}"
		log "relay r$k (pid ${RPID[$k]}) is gone $2 (exit status $st; see its log)"
		echo "died r$k $2 status=$st pid=${RPID[$k]}" >>"$1"
		rc=1
	done
	return $rc
}

# clients_cpu_ms W: the load clients' CPU up to round W (they report it)
clients_cpu_ms() {
	local f t=0
	for f in "${LOUTS[@]}"; do
		t=$((t + $(kv "$f" "round.$1.cpu_user_ms") + $(kv "$f" "round.$1.cpu_sys_ms")))
	done
	echo "$t"
}

# writes DIR VERSION FIGS: BENCH_WRITES timed PUTs to the origin, a second
# apart, each awaited on every node; figures into FIGS
writes() {
	local dir=$1 v=$2 figs=$3 w b0 b1 q0 q1 c0 c1 r0 r1 x0 x1 m0 m1 mc0 mc1 mq0 mq1 ms0 ms1 lat p
	b0=$(metric "$ORIGIN_PORT" tether_push_bytes_total)
	q0=$(metric "$ORIGIN_PORT" tether_requests_total)
	c0=$(cpu_ms "$ORIGIN_PID")
	r0=$(cpu_ms "${RPID[@]}")
	x0=0
	for p in "${RPID[@]}"; do x0=$((x0 + $(ctxt_sum "$p"))); done
	m0=$(machine_ctxt)
	read -r mc0 mq0 ms0 <<<"$(machine_cpu)"
	PORT=$ORIGIN_PORT
	for w in $(seq 1 "$WRITES"); do
		timed_put cluster/c7 "$(cluster_body "$w")" "$dir/start" >/dev/null || die "write $w failed"
		round_done "$w" || die "write $w did not reach every node (see $dir/load.*)"
		# one write at a time: the next waits until the origin and the
		# relays are done with this one (the node records going up)
		echo "w$w.settle_s $(settle "$ORIGIN_PID" "${RPID[@]}")" >>"$figs"
	done
	# the CPU first: a GET /metrics formats every node's gauges (at
	# 100,000 nodes, tens of ms of the origin's CPU), no write's work
	read -r mc1 mq1 ms1 <<<"$(machine_cpu)"
	c1=$(cpu_ms "$ORIGIN_PID")
	r1=$(cpu_ms "${RPID[@]}")
	x1=0
	for p in "${RPID[@]}"; do x1=$((x1 + $(ctxt_sum "$p"))); done
	m1=$(machine_ctxt)
	b1=$(metric "$ORIGIN_PORT" tether_push_bytes_total)
	q1=$(metric "$ORIGIN_PORT" tether_requests_total)
	{
		echo "origin_bytes_per_write $(((b1 - b0) / WRITES))"
		echo "origin_cpu_ms_per_write $(((c1 - c0) / WRITES))"
		# requests the origin served (the relays' node records, the PUT)
		echo "origin_requests_per_write $(((q1 - q0 - 2) / WRITES))"
		echo "relays_cpu_ms_per_write $(((r1 - r0) / WRITES))"
		echo "relays_ctxt_per_write $(((x1 - x0) / WRITES))"
		echo "machine_ctxt_per_write $(((m1 - m0) / WRITES))"
		# the clients' CPU from the end of phase 1 to the last round
		local cc0=0 f
		for f in "${LOUTS[@]}"; do
			cc0=$((cc0 + $(kv "$f" connect.cpu_user_ms) + $(kv "$f" connect.cpu_sys_ms)))
		done
		local ccw=$((($(clients_cpu_ms "$WRITES") - cc0) / WRITES))
		echo "clients_cpu_ms_per_write $ccw"
		# the machine's CPU in processes over the writes beyond the
		# origin's, the relays' and the clients': other processes (this
		# script's tools, whatever else runs here); softirqs; and what
		# the host stole
		echo "others_cpu_ms_per_write $(((mc1 - mc0) / WRITES - (c1 - c0) / WRITES - (r1 - r0) / WRITES - ccw))"
		echo "softirq_ms_per_write $(((mq1 - mq0) / WRITES))"
		echo "steal_ms_per_write $(((ms1 - ms0) / WRITES))"
		for w in $(seq 1 "$WRITES"); do
			lat=$(latencies "$w" "${LOUTS[@]}")
			echo "w$w.received $(sum_kv "round.$w.received" "${LOUTS[@]}")"
			echo "w$w.p50 $(percentile 0.5 <<<"$lat")"
			echo "w$w.p99 $(percentile 0.99 <<<"$lat")"
			echo "w$w.max $(percentile 1 <<<"$lat")"
			echo "w$w.node_bytes $(sum_kv "round.$w.wire_bytes.total" "${LOUTS[@]}")"
		done
	} >>"$figs"
}

# ---- figures of a run -------------------------------------------------------------

# fig FILE KEY
fig() {
	awk -v k="$2" '$1 == k { print $2 }' "$1" | tail -n 1
}

# med_w FILE KEY / max_w FILE KEY: the median / the largest over the
# writes of wW.KEY
med_w() {
	local w
	for w in $(seq 1 "$WRITES"); do fig "$1" "w$w.$2"; done | median
}
max_w() {
	local w
	for w in $(seq 1 "$WRITES"); do fig "$1" "w$w.$2"; done | sort -g | tail -n 1
}

# complete FILE: every write reached every node, no relay died or stalled
complete() {
	local w
	grep -q '^died \|^stall ' "$1" && return 1
	for w in $(seq 1 "$WRITES"); do
		[ "$(fig "$1" "w$w.received")" = "$NODES" ] || return 1
	done
}

# perf_start DIR / perf_stop: `perf record -g` of the origin and relay r1
PERF_PIDS=()
perf_start() {
	local p
	PERF_PIDS=()
	for p in "origin:$ORIGIN_PID" "r1:${RPID[1]:-}"; do
		[ -n "${p#*:}" ] || continue
		perf record -g -o "$1/${p%%:*}.perf" -p "${p#*:}" >"$1/${p%%:*}.perf.log" 2>&1 &
		PERF_PIDS+=($!)
		track $!
	done
	sleep 1
}
perf_stop() {
	local p
	for p in "${PERF_PIDS[@]}"; do
		kill -INT "$p" 2>/dev/null
		wait "$p" 2>/dev/null
		untrack "$p"
	done
	PERF_PIDS=()
}

# ---- one relay count, one run ------------------------------------------------------

# run_relays N RUN: figures into $OUT/nN.rRUN.txt
run_relays() {
	local n=$1 run=$2 dir=$OUT/n$1.r$2 figs=$OUT/n$1.r$2.txt k v t0 t1 cnt ok=1
	mkdir -p "$dir"
	: >"$figs"
	layout "$n"
	log "N=$n, run $run/$RUNS: $NODES nodes, $PER per relay, $PROCS load processes per relay," \
		"failover spread $SPREAD"
	start_origin "$dir"
	v=$(load_clusters "$dir")
	[ -n "$v" ] || die "the batch load failed"
	RPID=()
	RPORT=()
	KILLED=
	for k in $(seq 0 $((n - 1))); do start_relay "$dir" "$k"; done
	for k in $(seq 0 $((n - 1))); do relay_ready "$dir" "$k"; done
	for k in $(seq 0 $((n - 1))); do
		[ "$(healthz_version "${RPORT[$k]}")" = "$v" ] || die "relay r$k is not at version $v"
	done
	sleep 1
	local rss0=() rss1=() total0=0 total1=0
	for k in $(seq 0 $((n - 1))); do rss0[$k]=$(rss_kb "${RPID[$k]}"); done

	t0=$EPOCHREALTIME
	start_loads "$dir" "$n" "$v"
	if ! loads_ready "$figs"; then
		log "N=$n, run $run: a relay stalled; this run is INVALID (see $figs)"
		printf 'failover -\ncomplete 0\n' >>"$figs"
		teardown "$n" "$figs" "$dir"
		return
	fi
	t1=$EPOCHREALTIME
	check_relays "$figs" "while the streams opened"
	echo "connect_s $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" >>"$figs"
	# every node's record went up to the origin
	if wait_until 120 sh -c "[ \"\$(curl -fsS -m 5 http://127.0.0.1:$ORIGIN_PORT/metrics |
		awk '\$1 == \"tether_nodes_connected\" { print \$2 }')\" = $NODES ]"; then
		echo "origin_nodes_s $(awk -v a="$t1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')" >>"$figs"
	else
		echo "origin_nodes_s -" >>"$figs"
		log "N=$n: the origin counts $(metric "$ORIGIN_PORT" tether_nodes_connected) nodes connected, not $NODES"
	fi
	echo "origin_nodes_connected $(metric "$ORIGIN_PORT" tether_nodes_connected)" >>"$figs"
	echo "origin_nodes $(metric "$ORIGIN_PORT" tether_nodes)" >>"$figs"
	sleep 2
	for k in $(seq 0 $((n - 1))); do
		rss1[$k]=$(rss_kb "${RPID[$k]}" 2>/dev/null)
		rss1[$k]=${rss1[$k]:-${rss0[$k]}}
		cnt=$PER
		[ "$k" -eq 0 ] && cnt=$((PER + NODES % n))
		echo "r$k.rss0_kb ${rss0[$k]}" >>"$figs"
		echo "r$k.rss1_kb ${rss1[$k]}" >>"$figs"
		echo "r$k.rss_per_stream $(((rss1[k] - rss0[k]) * 1024 / cnt))" >>"$figs"
		total0=$((total0 + rss0[k]))
		total1=$((total1 + rss1[k]))
	done
	echo "relays_rss0_kb $total0" >>"$figs"
	echo "relays_rss1_kb $total1" >>"$figs"
	echo "relays_rss_per_stream $(((total1 - total0) * 1024 / NODES))" >>"$figs"

	log "N=$n, run $run/$RUNS: $WRITES writes"
	[ "$PERF" = 1 ] && [ "$run" = 1 ] && perf_start "$dir"
	writes "$dir" "$v" "$figs"
	perf_stop
	check_relays "$figs" "by the end of the writes" || ok=0
	grep -q '^died ' "$figs" && ok=0
	{
		echo "lat_p50 $(med_w "$figs" p50)"
		echo "lat_p99 $(med_w "$figs" p99)"
		echo "lat_max $(med_w "$figs" max)"
		echo "lat_worst $(max_w "$figs" max)"
		echo "cpu_ms_per_write $(($(fig "$figs" origin_cpu_ms_per_write) + $(fig "$figs" relays_cpu_ms_per_write) +
			$(fig "$figs" clients_cpu_ms_per_write)))"
		echo "node_bytes_per_write $(med_w "$figs" node_bytes | cut -d. -f1)"
		echo "settle_s $(med_w "$figs" settle_s)"
	} >>"$figs"

	if [ "$SPREAD" -gt 0 ] && [ $ok = 1 ]; then
		failover "$dir" "$n" "$((v + WRITES))" "$figs"
		check_relays "$figs" "by the end of the failover"
	else
		echo "failover -" >>"$figs"
	fi
	complete "$figs" && echo "complete 1" >>"$figs" || echo "complete 0" >>"$figs"
	teardown "$n" "$figs" "$dir"
}

# teardown N FIGS DIR: the load clients, then each relay with SIGTERM (its
# exit status into FIGS), then the origin
teardown() {
	local k st
	stop_loads
	for k in $(seq 0 $(($1 - 1))); do
		[ "$KILLED" = "$k" ] && continue
		alive "${RPID[$k]}" || continue
		kill -TERM "${RPID[$k]}" 2>/dev/null
		wait "${RPID[$k]}" 2>/dev/null
		st=$?
		untrack "${RPID[$k]}"
		echo "r$k.exit_status $st" >>"$2"
	done
	stop_pid "$ORIGIN_PID"
	rm -rf "$3"/*.data
}

# failover DIR N VERSION FIGS: relay 0 stopped, one write, relay 0 killed
failover() {
	local dir=$1 n=$2 v=$3 figs=$4 k f tk s0 s1 backs outs=()
	for f in "${LOUTS[@]}"; do
		case $f in */load.0.*) outs+=("$f") ;; esac
	done
	for f in "${LOUTS[@]}"; do
		wait_out "$f" '^reconnect\.waiting=1' 60 || die "failover: $f is not waiting"
	done
	s0=0
	if [ "$RELAY_METRICS" = 1 ]; then
		for k in $(seq 1 $((n - 1))); do s0=$((s0 + $(metric "${RPORT[$k]}" tether_snapshots_total))); done
	fi
	log "N=$n: relay r0 ($(sum_kv connect.ok "${outs[@]}") nodes) stopped, one write, kill -9"
	kill -STOP "${RPID[0]}"
	PORT=$ORIGIN_PORT
	timed_put cluster/c7 "$(cluster_body 999)" "$dir/start.failover" >/dev/null || die "the failover write failed"
	for k in $(seq 1 $((n - 1))); do
		wait_until 30 sh -c "[ \"\$(curl -fsS -m 2 http://127.0.0.1:${RPORT[$k]}/healthz |
			sed -n 's/.*\"version\":\([0-9]*\).*/\1/p')\" = $((v + 1)) ]" ||
			die "relay r$k did not get version $((v + 1))"
	done
	tk=$EPOCHREALTIME
	kill -KILL "${RPID[0]}"
	KILLED=0
	wait "${RPID[0]}" 2>/dev/null
	untrack "${RPID[0]}"
	for f in "${outs[@]}"; do
		wait_out "$f" '^reconnect\.done=1' "$TIMEOUT" || die "failover: not every stream came back ($f)"
	done
	for f in "${outs[@]}"; do
		[ "$(kv "$f" reconnect.complete)" = 1 ] || log "failover: $f did not complete"
	done
	# each stream's return, from the kill (ms)
	backs=$(cat "${outs[@]}" | awk -v tk="$tk" '$1 ~ /^rstream=/ {
		for (i = 2; i <= NF; i++) if ($i ~ /^back_at=/) { sub(/back_at=/, "", $i); printf "%.1f\n", ($i - tk) * 1000 } }')
	{
		echo "failover_streams $(sum_kv reconnect.streams "${outs[@]}")"
		echo "failover_back $(sum_kv reconnect.back "${outs[@]}")"
		echo "failover_spread $SPREAD"
		echo "failover_p50_ms $(percentile 0.5 <<<"$backs")"
		echo "failover_p99_ms $(percentile 0.99 <<<"$backs")"
		echo "failover_all_back_ms $(percentile 1 <<<"$backs")"
		echo "failover_attempts $(sum_kv reconnect.attempts "${outs[@]}")"
		echo "failover_failed $(($(sum_kv reconnect.failed_connect "${outs[@]}") +
			$(sum_kv reconnect.failed_http "${outs[@]}") + $(sum_kv reconnect.failed_closed "${outs[@]}")))"
		echo "failover_first_heartbeat $(sum_kv reconnect.first_heartbeat "${outs[@]}")"
		echo "failover_first_delta $(sum_kv reconnect.first_delta "${outs[@]}")"
		echo "failover_first_snapshot $(sum_kv reconnect.first_snapshot "${outs[@]}")"
		echo "failover_snapshots_nodes $(sum_kv reconnect.snapshots "${outs[@]}")"
	} >>"$figs"
	if [ "$RELAY_METRICS" = 1 ]; then
		s1=0
		for k in $(seq 1 $((n - 1))); do s1=$((s1 + $(metric "${RPORT[$k]}" tether_snapshots_total))); done
		echo "failover_snapshots_relays $((s1 - s0))" >>"$figs"
	else
		echo "failover_snapshots_relays -" >>"$figs"
	fi
	# the origin counts every node connected again (through the survivors)
	if wait_until 60 sh -c "[ \"\$(curl -fsS -m 5 http://127.0.0.1:$ORIGIN_PORT/metrics |
		awk '\$1 == \"tether_nodes_connected\" { print \$2 }')\" = $NODES ]"; then
		echo "failover_origin_connected_s $(awk -v a="$tk" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')" >>"$figs"
	else
		echo "failover_origin_connected_s -" >>"$figs"
	fi
}

# ---- the same writes, nodes straight on the origin ----------------------------------

run_direct() {
	local dir=$OUT/direct figs=$OUT/direct.txt v j cnt procs r0 r1 t0 open_s
	mkdir -p "$dir"
	: >"$figs"
	procs=$(((DIRECT + DIRECT_CLIENT_MAX - 1) / DIRECT_CLIENT_MAX))
	# every stream on one plane: its connect storm takes longer than a relay's
	open_s=$((DIRECT / 1000))
	[ "$open_s" -ge "$OPEN_TIMEOUT" ] || open_s=$OPEN_TIMEOUT
	log "direct: $DIRECT nodes on the origin ($procs load processes, open files $(ulimit -n)), $WRITES writes"
	start_origin "$dir"
	v=$(load_clusters "$dir")
	[ -n "$v" ] || die "the batch load failed"
	sleep 1
	r0=$(rss_kb "$ORIGIN_PID")
	LPIDS=()
	LOUTS=()
	RPID=()
	: >"$dir/start"
	for j in $(seq 0 $((procs - 1))); do
		cnt=$((DIRECT / procs))
		[ "$j" -eq 0 ] && cnt=$((cnt + DIRECT % procs))
		"$LOAD_BIN" -n "$cnt" --version "$v" --prefix "d$j-" --wait-push $((v + 1)) --rounds "$WRITES" \
			--start-file "$dir/start" --per-stream --timeout "$TIMEOUT" "${ACK_OPT[@]}" "127.0.0.1:$ORIGIN_PORT" \
			>"$dir/load.$j" 2>"$dir/load.$j.err" &
		LPIDS+=($!)
		LOUTS+=("$dir/load.$j")
		track $!
		[ "$j" = 0 ] && t0=$EPOCHREALTIME
	done
	OPEN_TIMEOUT=$open_s loads_ready
	{
		echo "connect_s $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
		echo "procs $procs"
	} >>"$figs"
	sleep 2
	r1=$(rss_kb "$ORIGIN_PID")
	{
		echo "origin_rss0_kb $r0"
		echo "origin_rss1_kb $r1"
		echo "origin_rss_per_stream $(((r1 - r0) * 1024 / DIRECT))"
	} >>"$figs"
	[ "$PERF" = 1 ] && perf_start "$dir"
	writes "$dir" "$v" "$figs"
	perf_stop
	for j in "${LPIDS[@]}"; do
		wait "$j" || log "direct: a load client failed"
		untrack "$j"
	done
	stop_pid "$ORIGIN_PID"
	rm -rf "$dir"/*.data
}

# ---- run ------------------------------------------------------------------------

log "machine: $MACHINE; open files $NOFILE (a load process holds up to $CLIENT_MAX streams, a plane $PLANE_MAX)"
probe_relay_metrics
RUNNABLE=""
for n in $COUNTS; do
	layout "$n"
	if [ $FIT = 0 ]; then
		log "N=$n: $((PER + NODES % n)) streams per relay do not fit under the file limit ($PLANE_MAX); skipped"
	else
		RUNNABLE="$RUNNABLE $n"
	fi
done
for run in $(seq 1 "$RUNS"); do
	order=$RUNNABLE
	[ $((run % 2)) = 0 ] && order=$(echo $RUNNABLE | tr ' ' '\n' | tac | tr '\n' ' ')
	for n in $order; do
		run_relays "$n" "$run"
	done
done
if [ "$DIRECT" -gt 0 ] && [ "$DIRECT" -le "$DIRECT_MAX" ]; then
	run_direct
elif [ "$DIRECT" -gt 0 ]; then
	log "direct: $DIRECT streams do not fit in one plane ($DIRECT_MAX: open files $(ulimit -n), hard limit" \
		"$(ulimit -Hn)); skipped"
fi
ENDED=$EPOCHREALTIME

# runs N KEY: KEY of every run of N, one a line
runs() {
	local r
	for r in $(seq 1 "$RUNS"); do fig "$OUT/n$1.r$r.txt" "$2"; done
}
# mr N KEY: the median over the runs
mr() {
	runs "$1" "$2" | grep -v '^-$' | median
}
verdict() {
	awk -v a="$1" -v g="$2" 'BEGIN { exit !(a != "" && a != "-" && a < g) }' && echo MET || echo MISSED
}

{
	bench_header "tether relay benchmark"
	echo "all on this machine: the origin, the relays and the load clients share its $(nproc) cores"
	echo "open files: $NOFILE per process: a plane holds up to $PLANE_MAX streams, a load process up to $CLIENT_MAX"
	[ "$DIRECT" -gt 0 ] && echo "    direct: open files $(ulimit -n) (hard limit $(ulimit -Hn)): the origin holds up to" \
		"$DIRECT_MAX streams, a load process $DIRECT_CLIENT_MAX"
	echo "planes: $PLANE_BIN --threads $THREADS --heartbeat 3600 --max-nodes $MAX_NODES $PLANE_LAB_FLAGS"
	echo "relays: the same with --upstream http://ORIGIN --relay-id rK; $CLUSTERS clusters; $WRITES writes per run;"
	[ "$ACK" = 1 ] && echo "nodes: every node ACKs every push (sse_load --ack)"
	echo "    $RUNS runs of each N (medians of the runs; 'worst' is the largest over every write of every run)"
	if [ "$RELAY_METRICS" = 1 ]; then
		echo "relay /metrics: answers"
	else
		echo "relay /metrics: does not answer (the probe relay exited with status ${PROBE_STATUS:-?}):" \
			"snapshots counted at the nodes only"
	fi
	echo "wall time of the whole bench: $(awk -v a="$BEGAN" -v b="$ENDED" 'BEGIN { printf "%.0f", b - a }') s"
	for n in $COUNTS; do
		case " $RUNNABLE " in *" $n "*) ;; *)
			layout "$n"
			echo "N=$n: not run: $((PER + NODES % n)) streams per relay exceed what a plane holds ($PLANE_MAX)" ;;
		esac
	done
	echo
	echo "$NODES nodes behind N relays; one write at a time, from just before the PUT to the origin"
	echo "until each node had the push (ms; p50/p99/max over every node: median over the writes, then the runs)"
	printf '    %3s %5s %8s %8s %8s %8s %8s %9s %8s %8s %9s %8s %8s %8s %8s %9s %7s %9s\n' \
		N procs connect_s p50 p99 max worst B/wr_orig B/wr/rel RSS/strm relaysMiB cpu/wr busy_s others ctxt/wr \
		failover snaps goal
	for n in $RUNNABLE; do
		layout "$n"
		worst=$(for r in $(seq 1 "$RUNS"); do fig "$OUT/n$n.r$r.txt" lat_worst; done | sort -g | tail -n 1)
		ok=MET
		[ "$(verdict "$worst" "$GOAL_ALL_MS")" = MET ] || ok=MISSED
		runs "$n" complete | grep -q 0 && ok=INVALID
		fb=$(runs "$n" failover_all_back_ms | grep -v '^-$' | sort -g | tail -n 1)
		snaps=$(runs "$n" failover_snapshots_nodes | awk '$1 != "-" { s += $1; k++ } END { print k ? s : "-" }')
		if [ -n "$fb" ]; then
			[ "$(verdict "$fb" "$GOAL_BACK_MS")" = MET ] && [ "$snaps" = 0 ] || { [ $ok = MET ] && ok=MISSED; }
		fi
		ob=$(mr "$n" origin_bytes_per_write)
		printf '    %3s %5s %8.1f %8.0f %8.0f %8.0f %8.0f %9.0f %8.0f %8.0f %9.0f %8.0f %8.1f %8.0f %8.0f %9s %7s %9s\n' \
			"$n" "$((PROCS * n))" "$(mr "$n" connect_s)" "$(mr "$n" lat_p50)" "$(mr "$n" lat_p99)" \
			"$(mr "$n" lat_max)" "$worst" "$ob" "$(awk -v b="$ob" -v n="$n" 'BEGIN { print b / n }')" \
			"$(mr "$n" relays_rss_per_stream)" "$(awk -v k="$(mr "$n" relays_rss1_kb)" 'BEGIN { print k / 1024 }')" \
			"$(mr "$n" cpu_ms_per_write)" "$(mr "$n" settle_s)" "$(mr "$n" others_cpu_ms_per_write)" \
			"$(mr "$n" machine_ctxt_per_write)" \
			"$(awk -v f="${fb:--}" 'BEGIN { if (f == "-") print f; else printf "%.0f", f }')" "$snaps" "$ok"
	done
	echo "    procs: load processes; worst: the largest max of any write of any run; B/wr_orig: bytes the"
	echo "    origin sent per write (tether_push_bytes_total), B/wr/rel: the same per relay; RSS/strm: the"
	echo "    relays' VmRSS growth over their streams (B); relaysMiB: the relays' VmRSS with every stream"
	echo "    open, together; cpu/wr: origin + relays + load clients, CPU ms per write; busy_s: how long"
	echo "    the origin and the relays stayed busy after a write had reached every node (its node records"
	echo "    going up; the next write waits for it); others: CPU ms per write of every other process on"
	echo "    the machine, this script's polling included (softirqs and the host's steal are in the run"
	echo "    details); ctxt/wr: the machine's context switches per write; failover: the slowest run's"
	echo "    time from the kill until the last of relay 0's nodes was back (ms); snaps: snapshots those"
	echo "    nodes got, every run together;"
	echo "    goal: every node within $GOAL_ALL_MS ms on every write, back within $GOAL_BACK_MS ms with 0 snapshots"
	echo "    (INVALID: a relay died or stalled, or a write missed nodes; see below)"
	best=$(for n in $RUNNABLE; do
		echo "$(mr "$n" lat_max) $n"
	done | sort -g | head -n 1)
	[ -n "$best" ] && echo "    lowest median max: N=${best#* } (${best%% *} ms)"
	echo
	echo "per N and run:"
	for n in $RUNNABLE; do
		layout "$n"
		echo "  N=$n: $PER nodes per relay, $PROCS load processes per relay"
		for r in $(seq 1 "$RUNS"); do
			f=$OUT/n$n.r$r.txt
			echo "    run $r:"
			grep '^died ' "$f" | sed 's/^died /      RELAY DIED: /'
			grep '^stall ' "$f" | sed 's/^stall /      STALLED: relay /'
			if [ -z "$(fig "$f" connect_s)" ]; then
				echo "      not measured: the streams did not open"
				continue
			fi
			echo "      streams open in $(fig "$f" connect_s) s; the origin counted all $NODES connected" \
				"$(fig "$f" origin_nodes_s) s later (nodes $(fig "$f" origin_nodes), connected $(fig "$f" origin_nodes_connected))"
			printf '      writes p50/p99/max ms:'
			for w in $(seq 1 "$WRITES"); do
				printf ' %s/%s/%s' "$(fig "$f" "w$w.p50")" "$(fig "$f" "w$w.p99")" "$(fig "$f" "w$w.max")"
			done
			echo
			printf '      nodes that had each write:'
			for w in $(seq 1 "$WRITES"); do printf ' %s' "$(fig "$f" "w$w.received")"; done
			echo
			echo "      origin per write: $(fig "$f" origin_bytes_per_write) B, $(fig "$f" origin_cpu_ms_per_write) ms CPU," \
				"$(fig "$f" origin_requests_per_write) requests (the PUT and the relays' node-record batches);" \
				"the nodes got $(fig "$f" node_bytes_per_write) B in all"
			echo "      CPU per write: relays $(fig "$f" relays_cpu_ms_per_write) ms, load clients" \
				"$(fig "$f" clients_cpu_ms_per_write) ms, other processes (this script's included)" \
				"$(fig "$f" others_cpu_ms_per_write) ms," \
				"softirqs $(fig "$f" softirq_ms_per_write) ms, stolen by the host $(fig "$f" steal_ms_per_write) ms; context switches per write: relays" \
				"$(fig "$f" relays_ctxt_per_write), machine $(fig "$f" machine_ctxt_per_write)"
			printf '      origin and relays busy after each write had reached every node (s):'
			for w in $(seq 1 "$WRITES"); do printf ' %s' "$(fig "$f" "w$w.settle_s")"; done
			echo
			printf '      relays RSS per stream (B):'
			for k in $(seq 0 $((n - 1))); do printf ' %s' "$(fig "$f" "r$k.rss_per_stream")"; done
			echo "; before the streams $(($(fig "$f" relays_rss0_kb) / n)) KiB each"
			if [ "$(fig "$f" failover)" = "-" ]; then
				echo "      failover: not run (N=1, no room on the survivors for relay 0's nodes, or a relay died)"
			else
				fb=$(fig "$f" failover_all_back_ms)
				echo "      failover: relay r0 killed, its $(fig "$f" failover_streams) nodes over" \
					"$(fig "$f" failover_spread) relays: $(fig "$f" failover_back) back, the last $fb ms after" \
					"the kill (p50 $(fig "$f" failover_p50_ms), p99 $(fig "$f" failover_p99_ms)); goal < $GOAL_BACK_MS ms:" \
					"$(verdict "$fb" "$GOAL_BACK_MS")"
				echo "        first event back: $(fig "$f" failover_first_delta) deltas, $(fig "$f" failover_first_heartbeat)" \
					"heartbeats, $(fig "$f" failover_first_snapshot) snapshots; snapshots after the loss:" \
					"$(fig "$f" failover_snapshots_nodes) (survivors' tether_snapshots_total: $(fig "$f" failover_snapshots_relays));" \
					"attempts $(fig "$f" failover_attempts), failed $(fig "$f" failover_failed); the origin counted" \
					"all connected again $(fig "$f" failover_origin_connected_s) s after the kill"
			fi
			printf '      relays'"'"' exit status on SIGTERM at the end:'
			for k in $(seq 0 $((n - 1))); do
				st=$(fig "$f" "r$k.exit_status")
				[ -n "$st" ] && printf ' r%s=%s' "$k" "$st"
			done
			echo
		done
	done
	if [ "$DIRECT" -gt 0 ] && [ ! -f "$OUT/direct.txt" ]; then
		echo
		echo "direct: not run: $DIRECT streams do not fit in one plane ($DIRECT_MAX: open files $(ulimit -n), hard limit" \
			"$(ulimit -Hn); raising it needs CAP_SYS_RESOURCE, up to fs.nr_open $(cat /proc/sys/fs/nr_open))"
	fi
	if [ -f "$OUT/direct.txt" ]; then
		f=$OUT/direct.txt
		ob=$(fig "$f" origin_bytes_per_write)
		echo
		echo "direct: $DIRECT nodes straight on the origin (no relay), one run: $ob B per write from the origin" \
			"($(awk -v b="$ob" -v n="$DIRECT" 'BEGIN { printf "%.0f", b / n }') B per node), $(fig "$f" origin_cpu_ms_per_write) ms"
		echo "    of its CPU per write; p50/p99/max $(med_w "$f" p50)/$(med_w "$f" p99)/$(med_w "$f" max) ms (median of" \
			"$WRITES writes, worst $(max_w "$f" max)); origin RSS per stream $(fig "$f" origin_rss_per_stream) B"
		echo "    $(fig "$f" procs) load processes, streams open in $(fig "$f" connect_s) s; CPU per write: load clients" \
			"$(fig "$f" clients_cpu_ms_per_write) ms, others $(fig "$f" others_cpu_ms_per_write) ms, softirqs" \
			"$(fig "$f" softirq_ms_per_write) ms, stolen $(fig "$f" steal_ms_per_write) ms"
		printf '    writes p50/p99/max ms:'
		for w in $(seq 1 "$WRITES"); do
			printf ' %s/%s/%s' "$(fig "$f" "w$w.p50")" "$(fig "$f" "w$w.p99")" "$(fig "$f" "w$w.max")"
		done
		echo
		# the origin's CPU per write behind relays over directly; per node
		# when the direct run had a different number of nodes
		dc=$(fig "$f" origin_cpu_ms_per_write)
		for n in $RUNNABLE; do
			rc=$(mr "$n" origin_cpu_ms_per_write)
			awk -v n="$n" -v rc="$rc" -v dc="$dc" -v a="$NODES" -v b="$DIRECT" 'BEGIN {
				if (dc <= 0) exit
				if (a == b)
					printf "    origin CPU per write, N=%s over direct: %.0f / %.0f ms = %.3fx\n", n, rc, dc, rc / dc
				else
					printf "    origin CPU per node and write, N=%s over direct: %.2f / %.2f us = %.3fx (%s nodes behind relays, %s direct)\n",
						n, rc * 1000 / a, dc * 1000 / b, (rc / a) / (dc / b), a, b }'
		done
	fi
	echo
	echo "raw load-client output, per stream, and plane logs: $OUT"
} >"$RESULTS"
cat "$RESULTS"
