#!/usr/bin/env bash
# bench/http_storm.sh: a storm of connections at the plane's HTTP server
# (`bash bench/http_storm.sh SRCDIR BUILDDIR`). On a
# fresh lab plane per run (BENCH_STORM_RUNS, default 1), BENCH_STORM_ROUNDS
# rounds (5) of BENCH_STORM_CONNS connections (10,000) opened as fast as
# the client can, each sending one GET /healthz (Connection: close) as soon
# as it is connected (tests/tools/httpprobe.mjs storm, one node process).
# Per round: the time until the last answer, p50/p99 of the answers' times
# from the round's start, and how many were left unanswered after
# BENCH_STORM_BOUND seconds (60). The goal: none left unanswered. Other
# knobs: BENCH_THREADS (the plane's --threads, 2), BENCH_STORM_SOURCES
# (source addresses 127.0.0.2.., 0: the kernel's choice), BENCH_PLANE
# (another tether-plane binary). Results in BUILDDIR/bench-http-storm.txt,
# the tool's JSON lines and the plane logs in BUILDDIR/bench-out/http_storm/.
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: http_storm.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: http_storm.sh SRCDIR BUILDDIR}
BENCH_NAME=bench-http-storm
. "$SRCDIR/bench/lib.sh"
PLANE_BIN=${BENCH_PLANE:-$BUILDDIR/tether-plane}
PROBE=$SRCDIR/tests/tools/httpprobe.mjs
need "$PLANE_BIN"
command -v node >/dev/null || die "needs node"
command -v jq >/dev/null || die "needs jq"
CONNS=${BENCH_STORM_CONNS:-10000}
ROUNDS=${BENCH_STORM_ROUNDS:-5}
RUNS=${BENCH_STORM_RUNS:-1}
BOUND=${BENCH_STORM_BOUND:-60}
SOURCES=${BENCH_STORM_SOURCES:-0}
THREADS=${BENCH_THREADS:-2}
OUT=$BUILDDIR/bench-out/http_storm
RESULTS=$BUILDDIR/bench-http-storm.txt
rm -rf "$OUT"
mkdir -p "$OUT"

NOFILE=$(ulimit -n)
[ "$NOFILE" -ge $((CONNS + 200)) ] || die "the file limit ($NOFILE) is below $CONNS connections + 200"

{
	bench_header "HTTP connection storm"
	echo "plane: $PLANE_BIN --threads $THREADS --max-connections $((CONNS + 100)) $PLANE_LAB_FLAGS"
	echo "$CONNS connections at once per round, one GET /healthz each (Connection: close), $ROUNDS rounds" \
		"per run, $RUNS run(s); bound ${BOUND} s; times in ms from the round's start"
	printf '%-4s %-6s %10s %10s %10s %10s %12s  %s\n' run round answered last_ms p50_ms p99_ms unanswered errors
} >"$RESULTS"

for r in $(seq 1 "$RUNS"); do
	dir=$OUT/run$r
	mkdir -p "$dir"
	"$PLANE_BIN" $PLANE_LAB_FLAGS --listen 127.0.0.1:0 --data "$dir/data" --threads "$THREADS" \
		--max-connections $((CONNS + 100)) >"$dir/plane.log" 2>&1 &
	pid=$!
	track "$pid"
	wait_until 10 grep -q 'listening on ' "$dir/plane.log" || die "the plane did not start"
	port=$(grep -o 'listening on [^ ]*' "$dir/plane.log" | sed 's/.*://')
	wait_until 10 curl -fsS "http://127.0.0.1:$port/healthz" || die "the plane is not healthy"
	node "$PROBE" storm 127.0.0.1 "$port" --conns "$CONNS" --rounds "$ROUNDS" --bound-ms $((BOUND * 1000)) \
		--sources "$SOURCES" >"$dir/storm.json" 2>"$dir/storm.err" || die "httpprobe failed: $(tail -n 3 "$dir/storm.err")"
	while read -r line; do
		log "run $r: $line"
	done < <(jq -r '"round \(.round): \(.answered)/\(.conns) answered, last at \(.round_ms) ms (p50 \(.p50_ms), p99 \(.p99_ms)), \(.unanswered) unanswered \(.errors | tostring)"' "$dir/storm.json")
	jq -r --arg r "$r" '"\($r) \(.round) \(.answered) \(.round_ms) \(.p50_ms) \(.p99_ms) \(.unanswered) \(.errors | tostring)"' \
		"$dir/storm.json" | while read -r a b c d e f g h; do
		printf '%-4s %-6s %10s %10s %10s %10s %12s  %s\n' "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h"
	done >>"$RESULTS"
	curl -fsS -m 5 "http://127.0.0.1:$port/healthz" >/dev/null || log "run $r: the plane is not healthy after the storm"
	stop_pid "$pid"
	rm -rf "$dir/data"
done

{
	all=$(cat "$OUT"/run*/storm.json)
	echo "median time to the last answer: $(jq -r .round_ms <<<"$all" | median) ms;" \
		"worst: $(jq -r .round_ms <<<"$all" | sort -g | tail -n 1) ms"
	left=$(jq -s 'map(.unanswered) | add' <<<"$all")
	rounds=$(jq -s 'length' <<<"$all")
	if [ "$rounds" = $((RUNS * ROUNDS)) ] && [ "$left" = 0 ]; then
		echo "goal every request of every round answered within ${BOUND} s: MET"
	else
		echo "goal every request of every round answered within ${BOUND} s: MISSED ($left unanswered, $rounds rounds)"
	fi
} >>"$RESULTS"
cat "$RESULTS"
