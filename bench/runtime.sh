#!/usr/bin/env bash
# bench/runtime.sh: haproxy's runtime API (tetherd --runtime-api) against
# reloads (run by `make bench`, or `bash bench/runtime.sh SRCDIR BUILDDIR`).
# For each mode -- "runtime" (--runtime-api) and "reload" (without it, every
# change a reload) -- a plane, two backends, haproxy in master-worker mode
# and one tetherd; steady load through haproxy on the cluster that changes
# (tests/tools/loadgen.mjs, keep-alive connections); then BENCH_RUNTIME_CHANGES
# (default 1,000) changes of that cluster's endpoint, its port flipped
# between the two backends (bench/runtime_flip.mjs: a PUT on the plane, then
# polls through haproxy until the new backend answers). Figures per mode:
# haproxy's reloads during the changes (its master's log; goal 0 with the
# runtime API) and the agent's own counts (tetherd_runtime_updates_total,
# tetherd_reloads_total), the time from just before the write until haproxy
# serves the change (p50, p99, max), and the load's requests that failed
# (5xx answers, and connections refused, reset or timed out; goal 0).
# Results go to BUILDDIR/bench-runtime.txt; logs to BUILDDIR/bench-out/runtime/.
# Knobs: BENCH_RUNTIME_CHANGES=1000, BENCH_RUNTIME_RATE=200 (requests a
# second of load), BENCH_RUNTIME_MODES="runtime reload".

# $EPOCHREALTIME (bench/lib.sh) is bash's
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: runtime.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: runtime.sh SRCDIR BUILDDIR}
CHANGES=${BENCH_RUNTIME_CHANGES:-1000}
RATE=${BENCH_RUNTIME_RATE:-200}
MODES=${BENCH_RUNTIME_MODES:-runtime reload}
OUT=$BUILDDIR/bench-out/runtime
RESULTS=$BUILDDIR/bench-runtime.txt
rm -rf "$OUT"
mkdir -p "$OUT"
chmod 755 "$OUT" "$BUILDDIR/bench-out"
BENCH_NAME=runtime.sh
. "$(dirname "$0")/lib.sh"
need "$BUILDDIR/tether-plane" "$BUILDDIR/tetherd"
for c in haproxy node jq curl; do
	command -v "$c" >/dev/null 2>&1 || die "$c is not installed"
done
# m FILE NAME: a metric's value in a --metrics-file (0 when absent)
m() {
	awk -v k="$2" '$1 == k {v = $2} END {print v + 0}' "$1" 2>/dev/null
}

LINES=$OUT/lines.txt
: >"$LINES"
for mode in $MODES; do
	dir=$OUT/$mode
	mkdir -p "$dir"
	"$BUILDDIR/tether-plane" --listen 127.0.0.1:0 --data "$dir/plane" --heartbeat 3600 $PLANE_LAB_FLAGS \
		>"$dir/plane.log" 2>&1 &
	track "$!"
	wait_until 10 grep -q 'listening on' "$dir/plane.log" || die "plane did not start"
	url=http://127.0.0.1:$(grep -o 'listening on [^ ]*' "$dir/plane.log" | sed 's/.*://')
	for name in blue green; do
		node "$SRCDIR/tests/tools/backend.mjs" 0 "$name" >"$dir/$name.port" 2>&1 &
		track "$!"
		wait_until 10 grep -q listening "$dir/$name.port" || die "backend $name did not start"
	done
	blue=$(awk '{print $2}' "$dir/blue.port")
	green=$(awk '{print $2}' "$dir/green.port")
	http=$(free_port)
	marker=$(free_port)
	curl -sS -X POST "$url/v1/batch" --data "{\"upserts\":[
		{\"name\":\"cluster/web\",\"body\":{\"lb\":\"round_robin\",\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$blue}]}},
		{\"name\":\"listener/http\",\"body\":{\"address\":\"127.0.0.1\",\"port\":$http}},
		{\"name\":\"route/web\",\"body\":{\"listener\":\"http\",\"path\":\"/\",\"cluster\":\"web\"}}]}" >/dev/null
	cat >"$dir/base.cfg" <<HAPROXY
global
    log stderr format raw local0 notice
defaults
    timeout connect 5s
    timeout client 30s
    timeout server 30s
HAPROXY
	extra=()
	[ "$mode" = runtime ] && extra=(--runtime-api "$dir/admin.sock")
	"$BUILDDIR/tetherd" --plane "$url" --node bench --consumer haproxy --state-dir "$dir/state" \
		--output-dir "$dir/out" --pidfile "$dir/haproxy.pid" --marker "127.0.0.1:$marker" \
		--base-config "$dir/base.cfg" --metrics-file "$dir/agent.prom" "${extra[@]}" >"$dir/agent.log" 2>&1 &
	track "$!"
	wait_until 20 grep -q 'applied version 1 ' "$dir/agent.log" || die "the agent did not apply"
	haproxy -W -p "$dir/haproxy.pid" -f "$dir/base.cfg" -f "$dir/out/current/" >"$dir/haproxy.log" 2>&1 &
	track "$!"
	serves() { [ "$(curl -s "http://127.0.0.1:$http/x")" = "$1 /x" ]; }
	wait_until 10 serves blue || die "haproxy does not serve"

	node "$SRCDIR/tests/tools/loadgen.mjs" "$dir/load.json" --targets "http://127.0.0.1:$http" --paths /load \
		--rate "$RATE" >"$dir/load.out" 2>&1 &
	load=$!
	track "$load"
	wait_until 10 grep -q listening "$dir/load.out" || die "the load did not start"
	r0=$(grep -c 'Reloading HAProxy' "$dir/haproxy.log")
	u0=$(m "$dir/agent.prom" tetherd_runtime_updates_total)
	log "$mode: $CHANGES changes under $RATE req/s"
	node "$SRCDIR/bench/runtime_flip.mjs" --plane "$url" --proxy "http://127.0.0.1:$http" --changes "$CHANGES" \
		--out "$dir/latency.txt" --a "blue:$blue" --b "green:$green" >"$dir/flip.out" 2>&1 ||
		die "$mode: $(tail -n 1 "$dir/flip.out")"
	stop_pid "$load"
	# the last change served, its apply may still be confirming: the
	# agent's counts once it is at the plane's version
	at_version() { [ "$(jq -r .version "$dir/state/status.json")" = "$(curl -s "$url/healthz" | jq -r .version)" ]; }
	wait_until 30 at_version || log "$mode: the agent is not at the plane's version"
	r1=$(grep -c 'Reloading HAProxy' "$dir/haproxy.log")
	u1=$(m "$dir/agent.prom" tetherd_runtime_updates_total)
	agent_reloads=0
	for r in no_runtime_api change template_exhausted runtime_failed readback_differs revert; do
		agent_reloads=$((agent_reloads + $(m "$dir/agent.prom" "tetherd_reloads_total{reason=\"$r\"}")))
	done
	p50=$(percentile 0.5 <"$dir/latency.txt")
	p99=$(percentile 0.99 <"$dir/latency.txt")
	max=$(sort -g "$dir/latency.txt" | tail -n 1)
	read -r requests answered errors failed < <(jq -r '.targets[] | "\(.requests) \(.answered) \(.errors) \(.failed)"' \
		"$dir/load.json")
	printf '%s: %s changes: haproxy reloads %s (the agent: %s reloads, %s runtime updates); write -> served p50 %s ms, p99 %s ms, max %s ms; load %s requests, %s answered, %s 5xx, %s failed (refused, reset, timed out)\n' \
		"$mode" "$(wc -l <"$dir/latency.txt")" "$((r1 - r0))" "$agent_reloads" "$((u1 - u0))" "$p50" "$p99" "$max" \
		"$requests" "$answered" "$errors" "$failed" | tee -a "$LINES"
	for p in $PIDS; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in $PIDS; do
		wait "$p" 2>/dev/null
	done
	PIDS=""
done
{
	bench_header "runtime.sh: $CHANGES endpoint changes under $RATE req/s, haproxy --runtime-api vs reloads"
	cat "$LINES"
} >"$RESULTS"
