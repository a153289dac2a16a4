# bench/gates.sh: traffic-aware gates (issue 13, part 5; run as `bash
# bench/gates.sh SRCDIR BUILDDIR`). Real tetherd, nginx and haproxy
# processes on this machine, set up by the integration tests' own helpers
# (tests/integration/lib.sh, lib-proxy.sh, lib-gates.sh), so the bench runs
# exactly what t0955 and t0956 check.
#
#   cpu     the agent's CPU per 10,000 requests: one node, the load
#           generator (tests/tools/loadgen.mjs) sending BENCH_GATES_RATE
#           requests a second for BENCH_GATES_SECONDS; the agent's utime +
#           stime (/proc/PID/stat) over the load, divided by the requests
#           answered, times 10,000. Each consumer twice in the same run:
#           without counting (the alternative: no gates) and with it (nginx
#           --traffic-listen; haproxy --traffic-socket, and --traffic-listen
#           with it). A rollout with gates runs the whole time (--stages 100
#           and a long bake), so the agent also reports every second.
#   revert  the time from the first 5xx a client saw to the revert: four
#           nginx nodes, --bake 5 --gate-min-requests 50, 40 requests a
#           second to each node; a change sends /api to a cluster whose
#           backend answers 500; the load generator's first 5xx (wall ms)
#           against the rollout's finished_at. BENCH_GATES_RUNS times.
#   micro   bench/traffic_count (when built: make bench/traffic_count): the
#           CPU of parsing and counting one line, in a loop.
# Results: BUILDDIR/bench-gates.txt.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
SRCDIR=$(cd "${1:?usage: gates.sh SRCDIR BUILDDIR}" && pwd)
BUILDDIR=$(cd "${2:?usage: gates.sh SRCDIR BUILDDIR}" && pwd)
RATE=${BENCH_GATES_RATE:-1000}
SECONDS_LOAD=${BENCH_GATES_SECONDS:-20}
RUNS=${BENCH_GATES_RUNS:-3}
OUT=$BUILDDIR/bench-gates.txt

export TOP_SRCDIR=$SRCDIR TOP_BUILDDIR=$BUILDDIR
TOOLS=$SRCDIR/tests/tools
. "$SRCDIR/tests/integration/lib.sh"
. "$SRCDIR/tests/integration/lib-proxy.sh"
. "$SRCDIR/tests/integration/lib-gates.sh"
KEEP_WORK=0
need_cmd nginx haproxy node jq ss
trap 'gates_stop_proxies; cleanup' EXIT

say() {
	echo "$*" | tee -a "$OUT"
}
: >"$OUT"
say "bench/gates.sh at $(git -C "$SRCDIR" rev-parse --short HEAD 2>/dev/null): $(nproc) cores, $(date -u +%FT%TZ)"

# cpu_ticks PID: utime + stime, in clock ticks
cpu_ticks() {
	awk '{print $14 + $15}' "/proc/$1/stat"
}

# one_cpu_run LABEL CONSUMER [AGENT ARGS...]: one node, one rollout baking,
# the load; prints the agent's CPU per 10,000 requests.
one_cpu_run() {
	local label=$1 consumer=$2
	shift 2
	GATE_N=1
	CPU_RUN=$((${CPU_RUN:-0} + 1))
	gates_backends
	start_plane "p$CPU_RUN" --heartbeat 1 --rollout staged --stages 100 --bake 3600 --ack-timeout 3600 \
		--gate-error-rate 0.5 --gate-min-requests 100000000
	# @UDP@ and @SOCK@: this run's traffic port and stats socket
	local args=() a
	for a in "$@"; do
		a=${a//@UDP@/127.0.0.1:${GU[1]}}
		args+=("${a//@SOCK@/$WORK/hx1/stats.sock}")
	done
	if [ "$consumer" = nginx ]; then
		gates_nginx_node 1 "${args[@]}"
	else
		gates_haproxy_node 1 "${args[@]}"
	fi
	local apid=$AGENT_PID
	# connected first: the rollout's members are the nodes connected at its start
	wait_until 15 sh -c "curl -s '$PLANE_URL/v1/nodes' | jq -e '[.[] | select(.connected)] | length == 1'" ||
		bail "node 1 did not connect"
	gates_state | ctl apply - >/dev/null || bail "cannot load the state"
	wait_until 30 sh -c "curl -s -m 1 http://127.0.0.1:${GL[1]}/api/x | grep -q good" || bail "node 1 does not serve"
	ro_is '.state == "in_progress"' || bail "$label: no rollout in progress (no reports would flow)"
	local t0 t1 hz=$(getconf CLK_TCK)
	t0=$(cpu_ticks "$apid")
	node "$TOOLS/loadgen.mjs" "$WORK/cpu.json" --targets "http://127.0.0.1:${GL[1]}" --paths /api/x,/web \
		--rate "$RATE" --duration "$SECONDS_LOAD" >/dev/null
	sleep 1   # the last datagrams
	t1=$(cpu_ticks "$apid")
	local answered reports
	answered=$(jq '[.targets[].answered] | add' "$WORK/cpu.json")
	reports=$(curl -s "$PLANE_URL/v1/nodes/n1" | jq '.traffic.routes | map(.requests) | add // 0')
	awk -v l="$label" -v t=$((t1 - t0)) -v hz="$hz" -v n="$answered" -v r="$reports" 'BEGIN {
		ms = t * 1000 / hz
		printf "  %-34s %6d requests answered, agent CPU %6.0f ms: %6.1f ms per 10,000 (the plane last heard of %d)\n",
			l, n, ms, (n ? ms * 10000 / n : 0), r }' | tee -a "$OUT"
	gates_stop_proxies
	stop_tracked
	NPID=()
	rm -rf "$WORK"/n1* "$WORK"/nx1 "$WORK"/hx1 "$WORK"/*.port "$WORK/base.cfg"
}

say ""
if [ -x "$BUILDDIR/bench/traffic_count" ]; then
	say "micro: ns of CPU per request (bench/traffic_count --routes 10: parse, + count, + recvmmsg)"
	"$BUILDDIR/bench/traffic_count" --routes 10 | sed 's/^/  /' | tee -a "$OUT"
else
	say "micro: skipped (no $BUILDDIR/bench/traffic_count: make bench/traffic_count)"
fi
say ""
say "cpu: one node, $RATE requests/s for ${SECONDS_LOAD} s, a gated rollout baking throughout"
# (counting is on by default since issue 27: "no counting" says off)
one_cpu_run "nginx, no counting" nginx --traffic-listen off
one_cpu_run "nginx --traffic-listen" nginx --traffic-listen @UDP@
one_cpu_run "haproxy, no counting" haproxy --traffic-listen off
one_cpu_run "haproxy --traffic-socket" haproxy --traffic-socket @SOCK@
one_cpu_run "haproxy --traffic-socket + --listen" haproxy --traffic-socket @SOCK@ --traffic-listen @UDP@

say ""
say "revert: 4 nginx nodes, --stages 25,100 --bake 5 --gate-min-requests 50, 40 requests/s to each node"
GATE_N=4
gates_backends
start_plane revert --heartbeat 1 --rollout staged --stages 25,100 --bake 5 --ack-timeout 30 \
	--gate-error-rate 0.05 --gate-min-requests 50
for i in $(seq 1 "$GATE_N"); do
	gates_nginx_node "$i" --traffic-listen "127.0.0.1:${GU[$i]}"
done
wait_until 15 sh -c "curl -s '$PLANE_URL/v1/nodes' | jq -e '[.[] | select(.connected)] | length == $GATE_N'" ||
	bail "the nodes did not connect"
gates_state | ctl apply - >/dev/null || bail "cannot load the first state"
wait_until 60 ro_is '.state == "completed"' || bail "the first rollout did not complete"
for run in $(seq 1 "$RUNS"); do
	gates_load 40
	sleep 3
	gates_reroute api bad
	v=$(plane_version)
	wait_until 10 ro_is ".to_version == $v" || bail "no rollout of version $v"
	id=$(ro .id)
	wait_until 60 ro_is ".id == $id and .state != \"in_progress\"" || bail "rollout $id did not end"
	sleep 1.5   # the load generator writes its counts every second
	first=$(load_first_5xx)
	fin=$(ro '.finished_at * 1000 | floor')
	say "  run $run: rollout $id $(ro .state), touched $(ro .touched): first 5xx to revert $((fin - first)) ms; 5xx seen $(load_errors)"
	gates_load_stop
	# the revert put /api back on cluster good everywhere
	wait_until 30 ro_is '.state != "in_progress"' || bail "a rollout still runs after the revert"
done
say ""
say "results in $OUT"
T_FAILED=0
