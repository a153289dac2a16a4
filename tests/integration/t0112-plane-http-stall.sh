#!/usr/bin/env bash
# t0112-plane-http-stall.sh: the plane's HTTP server answers every request
# that is waiting when it gets the CPU back. For N
# keep-alive connections (tests/tools/httpprobe.mjs stall): one GET /healthz
# on each, answered; then the plane is stopped (SIGSTOP), one more request
# is written on each connection, the plane is held 0.3 s and continued
# (SIGCONT); every one of the N second requests must be answered 200 within
# 2 s of the SIGCONT, in each of 3 rounds. With --threads 1 at 128, 256 and
# 384 connections (one epoll loop handed more ready connections than it
# takes in one wait) and with the default threads at 128, 256 and 1024.
# Then a storm: 2,000 connections opened at once, each sending one request,
# 2 rounds, every one answered within 10 s (the 10,000-connection storm is
# bench/http_storm.sh). One plane per case. The tool stops and continues
# the plane itself, waiting on events (every thread of the plane stopped,
# every write in the kernel), never on time but the hold and the bounds.
. "$(dirname "$0")/lib.sh"

need_cmd node
PROBE=$TOOLS/httpprobe.mjs

HOLD_MS=300          # the plane is stopped this long with the requests waiting
BOUND_MS=2000        # every second request answered within this after SIGCONT
ROUNDS=3
STORM_CONNS=2000
STORM_ROUNDS=2
STORM_BOUND_MS=10000

# every connection is a descriptor in the plane and in the tool
ulimit -n "$(ulimit -Hn)" 2>/dev/null
NOFILE=$(ulimit -n)
diag "file limit $NOFILE, node $(node --version)"

# skip DESC REASON: one skipped test point
skip() {
	T_COUNT=$((T_COUNT + 1))
	echo "ok $T_COUNT - $1 # SKIP $2"
}

# stall_case LABEL N [PLANE ARGS...]: one test point: N connections, ROUNDS
# rounds, on a plane of its own started with ARGS
stall_case() {
	local label=$1 n=$2 desc out sum rc
	shift 2
	desc="$label, $n keep-alive connections"
	if [ "$NOFILE" -lt $((n + 200)) ]; then
		skip "$desc" "the file limit ($NOFILE) is too low"
		return
	fi
	start_plane "stall-${label// /}-$n" --max-connections $((n + 100)) "$@"
	out=$WORK/stall-${label// /}-$n.json
	node "$PROBE" stall 127.0.0.1 "$PLANE_PORT" --pid "$PLANE_PID" --conns "$n" --rounds "$ROUNDS" \
		--hold-ms "$HOLD_MS" --bound-ms "$BOUND_MS" >"$out" 2>"$out.err"
	rc=$?
	kill -CONT "$PLANE_PID" 2>/dev/null   # whatever became of the tool
	sum=$(jq -c 'select(.summary)' "$out" 2>/dev/null)
	if [ $rc -ne 0 ] || [ -z "$sum" ]; then
		not_ok "$desc: the second requests answered after SIGCONT"
		diag "httpprobe stall failed (exit $rc): $(tail -n 5 "$out.err")"
	elif jq -e .ok <<<"$sum" >/dev/null; then
		ok "$desc: $(jq -r '"\(.worst_answered)/\(.conns)"' <<<"$sum") second requests answered within" \
			"$BOUND_MS ms of SIGCONT in each of $ROUNDS rounds (slowest $(jq -r .slowest_ms <<<"$sum") ms)"
	else
		local bad
		bad=$(jq -c 'select((.summary | not) and (.ok | not))' "$out" | head -n 1)
		not_ok "$desc: $(jq -r '"\(.answered)/\(.conns)"' <<<"$bad") second requests answered within" \
			"$BOUND_MS ms of SIGCONT in round $(jq -r .round <<<"$bad") of $ROUNDS"
		diag "$(jq -r 'select(.summary | not) |
			"round \(.round): first requests answered \(.first_answered)/\(.conns), second answered" +
			" \(.answered) in time, \(.late) late, \(.missing) missing, slowest \(.slowest_ms) ms," +
			" statuses \(.statuses | tostring), errors \(.errors | tostring)" +
			(if .error then ", " + .error else "" end)' "$out")"
	fi
	check "$desc: the plane is healthy afterwards" curl -fsS -m 5 "$PLANE_URL/healthz"
	stop_pid "$PLANE_PID"
}

# ---- one thread -----------------------------------------------------------------

for n in 128 256 384; do
	stall_case "--threads 1" "$n" --threads 1
done

# ---- the default threads --------------------------------------------------------

for n in 128 256 1024; do
	stall_case "default threads" "$n"
done

# ---- a storm of connections -----------------------------------------------------

desc="a storm of $STORM_CONNS connections opened at once, $STORM_ROUNDS rounds"
if [ "$NOFILE" -lt $((STORM_CONNS + 200)) ]; then
	skip "$desc" "the file limit ($NOFILE) is too low"
else
	start_plane storm --max-connections $((STORM_CONNS + 100))
	out=$WORK/storm.json
	node "$PROBE" storm 127.0.0.1 "$PLANE_PORT" --conns "$STORM_CONNS" --rounds "$STORM_ROUNDS" \
		--bound-ms "$STORM_BOUND_MS" >"$out" 2>"$out.err"
	rc=$?
	rounds=$(jq -s 'length' "$out" 2>/dev/null)
	worst=$(jq -s 'map(.answered) | min' "$out" 2>/dev/null)
	times=$(jq -rs 'map("\(.round_ms) ms") | join(", ")' "$out" 2>/dev/null)
	if [ $rc -ne 0 ] || [ "$rounds" != "$STORM_ROUNDS" ]; then
		not_ok "$desc: every request answered"
		diag "httpprobe storm failed (exit $rc): $(tail -n 5 "$out.err")"
	elif [ "$worst" = "$STORM_CONNS" ]; then
		ok "$desc: $worst/$STORM_CONNS answered 200 within $STORM_BOUND_MS ms in each round (round times $times)"
	else
		not_ok "$desc: $worst/$STORM_CONNS answered 200 within $STORM_BOUND_MS ms in the worst round"
	fi
	diag "$(jq -r '"round \(.round): \(.answered)/\(.conns) answered in \(.round_ms) ms" +
		" (p50 \(.p50_ms), p99 \(.p99_ms)), statuses \(.statuses | tostring), errors \(.errors | tostring)"' \
		"$out" 2>/dev/null)"
	check "after the storm the plane is healthy" curl -fsS -m 5 "$PLANE_URL/healthz"
	stop_pid "$PLANE_PID"
fi

done_testing
