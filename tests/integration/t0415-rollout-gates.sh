#!/usr/bin/env bash
# t0415-rollout-gates.sh: the traffic gates' options and how a staged
# rollout shows them, with real agents that serve no traffic (--consumer
# files): wrong gate options stop the plane at start-up with a message
# naming the option; with gates, every stage of a rollout is unjudged after
# its bake (files nodes count no traffic), and with --gate-unjudged pass
# passes flagged so (without it, it would be held: t0986; with
# --gate-unjudged revert, the rollout is rolled back saying why),
# which GET /v1/rollouts/current, tetherctl rollout status (and --json),
# tetherctl watch,
# the console (with headless chromium and puppeteer-core, as t0940),
# /metrics and the plane's log show; without gates nothing of it appears.
# (Canaries judged on live nginx/haproxy traffic: the end-to-end tests.)
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# ---- options --------------------------------------------------------------------

# refused ARGS...: the plane refuses to start; its stderr is in $WORK/refused.
refused() {
	timeout 10 "$PLANE_BIN" --insecure --listen 127.0.0.1:0 --data "$WORK/refused.data" "$@" >"$WORK/refused" 2>&1
	[ $? = 2 ]
}
check "a gate without --rollout staged is refused" refused --gate-error-rate 0.01
check "... saying why" grep -q -- "--gate-error-rate needs --rollout staged" "$WORK/refused"
check "--gate-min-requests alone is refused" refused --rollout staged --gate-min-requests 5
check "... saying it needs a gate" grep -q -- "--gate-min-requests needs a gate" "$WORK/refused"
check "a malformed --gate-latency-p99 is refused" refused --rollout staged --gate-latency-p99 fast
check "... naming the option" grep -q -- "--gate-latency-p99: 'fast' is not a value" "$WORK/refused"
check "a rate above 1 is refused" refused --rollout staged --gate-error-rate 2
check "... naming the option" grep -q -- "--gate-error-rate: '2' is not a rate between 0 and 1" "$WORK/refused"
check "a multiple under 1x is refused" refused --rollout staged --gate-error-rate 0.5x
check "--gate-min-requests 0 is refused" refused --rollout staged --gate-error-rate 2x --gate-min-requests 0
printf '[plane]\nrollout = staged\ngate_latency_p99 = 0.5x\n' >"$WORK/plane.conf"
check "a malformed gate in the configuration file is refused" refused -c "$WORK/plane.conf"
check "... naming the option" grep -q -- "--gate-latency-p99: '0.5x'" "$WORK/refused"
check "--help describes the gates" sh -c "'$PLANE_BIN' --help | grep -q -- '--gate-latency-p99 MS|Nx'"
check "a bad --gate-unjudged is refused" refused --rollout staged --gate-error-rate 0.01 --gate-unjudged skip
check "... naming the option and its values" grep -q -- "--gate-unjudged: 'skip' is not pass, hold or revert" "$WORK/refused"
check "--help describes --gate-unjudged" sh -c "'$PLANE_BIN' --help | grep -q -- '--gate-unjudged pass|hold|revert'"

# ---- a staged plane with gates, and agents without traffic --------------------

start_plane p --rollout staged --stages 50,100 --bake 1 --heartbeat 1 --ack-timeout 20 \
	--gate-error-rate 0.01 --gate-latency-p99 2x --gate-min-requests 10 --gate-unjudged pass
put file/motd '{"path":"motd.txt","content":"one\n"}' >/dev/null
check "with no node, the first rollout ends" wait_until 10 ro_ended 1
NODES=(n1 n2 n3 n4)
for n in "${NODES[@]}"; do
	start_agent "$n" --consumer files --backoff-max 1
done
check "the four agents apply version 1" wait_until 30 fleet_at 1
connected_is() {
	curl -sS "$PLANE_URL/v1/nodes" | jq -e --argjson n "$1" '[.[] | select(.connected)] | length == $n' >/dev/null
}
check "the plane sees them connected" wait_until 20 connected_is 4
# tetherctl watch prints the gate events
"$CTL_BIN" --plane "$PLANE_URL" watch >"$WORK/watch.out" 2>"$WORK/watch.err" &
WATCH_PID=$!
track_pid "$WATCH_PID"
watching() { [ "$(metric tether_events_subscribers)" = 1 ]; }
check "tetherctl watch is subscribed" wait_until 10 watching
put file/motd '{"path":"motd.txt","content":"two\n"}' >/dev/null
check "the change's rollout starts" wait_until 10 ro_is '.id == 2'
check "while it runs, the rollout shows its gates" ro_is '.gate.error_rate == "0.01" and .gate.latency_p99 == "2x" and .gate.min_requests == 10 and .gate.unjudged == "pass"'
check "the rollout completes" wait_until 30 ro_ended 2
check_eq "... completed" completed "$(ro .state)"
check_eq "both stages passed flagged unjudged" "1 50 unjudged,2 100 unjudged" \
	"$(ro '[.gate.stages[] | "\(.stage) \(.percent) \(.verdict)"] | join(",")')"
check "... naming the nodes and why" ro_is '.gate.stages[0].reason | test("^unjudged: n[1-4], n[1-4] do not count traffic \\(consumer files does not count traffic\\); passed \\(--gate-unjudged pass\\)$")'
check "every agent is at version 2" wait_until 20 fleet_at 2
check_eq "tether_gate_unjudged_total counts both" 2 "$(metric tether_gate_unjudged_total)"
check_eq "tether_gate_low_traffic_total is 0 (they do not count: not few requests)" 0 "$(metric tether_gate_low_traffic_total)"
check_eq "tether_gate_failures_total is 0" 0 "$(metric tether_gate_failures_total)"
check "the plane's log flags the stages" grep -q "stage 50%: unjudged: n[1-4], n[1-4] do not count traffic" "$PLANE_LOG"
check "tetherctl watch shows both gate events" wait_until 5 sh -c "[ \$(grep -c ' gate rollout 2 stage [12] (\(50\|100\)%): unjudged: n[1-4]' '$WORK/watch.out') = 2 ]"
stop_pid "$WATCH_PID"
ctl rollout status >"$WORK/status.txt" 2>&1
check "tetherctl rollout status shows the gates" grep -q "^gates: error rate 0.01, p99 2x, at least 10 requests" "$WORK/status.txt"
check "... and each stage's verdict" grep -Eq "^stage 2 \(100%\): unjudged: n[1-4](, n[1-4]){3} do not count traffic" "$WORK/status.txt"
check "... and what an unjudged stage does" grep -q "^gates: .*; unjudged stages: pass$" "$WORK/status.txt"
check "... not as raw JSON" sh -c "! grep -q '\"stages\"' '$WORK/status.txt'"
check "tetherctl rollout status --json passes the gates through" \
	sh -c "'$CTL_BIN' --plane '$PLANE_URL' rollout status --json | jq -e '.gate.stages | length == 2' >/dev/null"

# the console's rollout panel, when a headless browser is at hand (t0940
# installs puppeteer-core into the build directory)
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
PP_DIR=""
for d in ${NODE_PATH:+$(echo "$NODE_PATH" | tr ':' ' ')} "$TOP_BUILDDIR/node_modules" "$TOP_SRCDIR/build/node_modules"; do
	[ -f "$d/puppeteer-core/package.json" ] && PP_DIR=$d && break
done
if [ -n "$CHROMIUM" ] && [ -x "$CHROMIUM" ] && [ -n "$PP_DIR" ] && command -v node >/dev/null 2>&1; then
	R=$(CHROMIUM=$CHROMIUM NODE_PATH=$PP_DIR timeout 60 node "$TOOLS/console-gate.cjs" "$PLANE_URL" 2>"$WORK/console.err")
	diag "console-gate: $R"
	check_eq "the console shows both stages unjudged" "1:unjudged 2:unjudged" \
		"$(echo "$R" | jq -r '[.stages[] | "\(.stage):\(.verdict)"] | join(" ")')"
	check "... with the gates' options" sh -c "echo '$R' | jq -e '.limits | test(\"5xx rate 0.01, p99 2x, at least 10 requests\")' >/dev/null"
	check "... and why" sh -c "echo '$R' | jq -e '.stages[0].text | test(\"unjudged . unjudged: n[1-4], n[1-4] do not count traffic\")' >/dev/null"
	check_eq "... with no script error" 0 "$(echo "$R" | jq '.page_errors | length')"
else
	diag "no headless chromium with puppeteer-core: the console's gate panel is not checked here"
fi
stop_pid "$PLANE_PID"

# ---- --gate-unjudged revert: the same stage is rolled back, saying why -------------------

for n in "${NODES[@]}"; do
	stop_pid "${APID[$n]}" TERM   # (plane r may get p's port)
done
start_plane r --rollout staged --stages 50,100 --bake 1 --heartbeat 1 --ack-timeout 20 \
	--gate-error-rate 0.01 --gate-unjudged revert
put file/motd '{"path":"motd.txt","content":"one\n"}' >/dev/null
check "(revert) with no node, the first rollout ends" wait_until 10 ro_ended 1
NODES=(r1 r2 r3 r4)
for n in "${NODES[@]}"; do
	start_agent "$n" --consumer files --backoff-max 1
done
check "(revert) the four agents apply version 1" wait_until 30 fleet_at 1
check "(revert) the plane sees them connected" wait_until 20 connected_is 4
put file/motd '{"path":"motd.txt","content":"two\n"}' >/dev/null
check "(revert) the change's rollout is rolled back after the first stage's bake" wait_until 30 ro_is \
	'.id == 2 and .state == "rolled_back"'
check "... the reason names the canaries and why" ro_is \
	'.reason | test("unjudged: r[1-4], r[1-4] do not count traffic \\(consumer files does not count traffic\\)")'
check "... the stage's verdict is unjudged, not held" ro_is '.gate.stages[0].verdict == "unjudged" and .gate.stages[0].held == false'
check_eq "... only the first stage ran" 1 "$(ro '.gate.stages | length')"
no_motd_two() { [ -z "$(wrong_content motd.txt one)" ]; }
check "... and every node serves the motd before the change again" wait_until 20 no_motd_two
check_eq "tether_gate_unjudged_total 1, no gate failure" "1 0" \
	"$(metric tether_gate_unjudged_total) $(metric tether_gate_failures_total)"
stop_pid "$PLANE_PID"

# ---- without gates, none of it -------------------------------------------------------

start_plane q --rollout staged --stages 50,100 --bake 1 --heartbeat 1
put file/motd '{"path":"motd.txt","content":"one\n"}' >/dev/null
check "without gates, a rollout ends as before" wait_until 10 ro_ended 1
check "... and shows no gate" ro_is 'has("gate") | not'
check_eq "/metrics has no tether_gate_ line" 0 "$(curl -sS "$PLANE_URL/metrics" | grep -c '^tether_gate_')"
check "... and judges no stage" sh -c "! grep -q 'passes flagged\\|passes its gates' '$PLANE_LOG'"

sanitizer_check
done_testing
