#!/usr/bin/env bash
# t0210-agent-resilience.sh: tetherd through outages. A stopped agent
# resumes with exactly the gap; a killed plane leaves every node serving its
# files (offline), and a restarted one gets them going again; an agent
# booting with the plane down and its output wiped rebuilds it from
# last-good; a silently dead stream (seed 002: established, then no byte,
# no FIN, no RST) is detected by its silence and resumed from the applied
# version, which never moves while the stream is dead; a heartbeat never
# moves the version; reconnects back off.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
command -v node >/dev/null 2>&1 || skip_all "node is not installed (tests/tools need it)"

# ---- helpers of this test ---------------------------------------------------

# all_state STATE NAME...: every status.json says STATE
all_state() {
	local s=$1 n
	shift
	for n in "$@"; do
		[ "$(st "$n" state)" = "$s" ] || return 1
	done
}

# booted NAME: status.json was written by the running NAME (its pid)
booted() {
	[ "$(st "$1" pid)" = "${APID[$1]}" ]
}

# booted_as NAME STATE: the running NAME wrote status.json with STATE
booted_as() {
	booted "$1" && [ "$(st "$1" state)" = "$2" ]
}

# heartbeats: the plane's count of heartbeats sent
heartbeats() {
	curl -s "$PLANE_URL/metrics" | awk '/^tether_heartbeats_total /{print $2}'
}

count() {
	grep -c -- "$1" "$2" 2>/dev/null
}

# sample_until PATTERN FILE NAME: samples NAME's status.json version every
# 50 ms until FILE has a line matching PATTERN (at most 15 s). Sets
# SAMPLED_VERSIONS (the distinct versions seen), SAMPLES (how many) and
# SAMPLED_MS (over how long).
sample_until() {
	local pat=$1 file=$2 name=$3 n=0 seen="" v t0 deadline=$(($(date +%s) + 15))
	t0=$(date +%s%N)
	while [ "$(date +%s)" -lt $deadline ]; do
		# read first, then look at the log: a sample counts only when the
		# silence had not been detected yet after it was taken
		v=$(st "$name" version)
		grep -q -- "$pat" "$file" 2>/dev/null && break
		case " $seen " in *" $v "*) ;; *) seen="$seen $v" ;; esac
		n=$((n + 1))
		sleep 0.05
	done
	SAMPLED_VERSIONS=${seen# }
	SAMPLES=$n
	SAMPLED_MS=$((($(date +%s%N) - t0) / 1000000))
}

# ---- a plane, three agents ------------------------------------------------------
start_plane p --heartbeat 1
DATA=$WORK/p.data
PORT=$PLANE_PORT
put file/base '{"path":"base.txt","content":"base v1\n"}' >/dev/null
put file/keep '{"path":"keep/keep.txt","content":"kept\n","mode":"0600"}' >/dev/null
V=$(plane_version)
for n in r1 r2 r3; do
	start_agent "$n" --backoff-min 0.1 --backoff-max 0.5
done
check "three agents sync to version $V" wait_until 10 all_at "$V" r1 r2 r3

# ---- a stopped agent resumes with exactly the gap ---------------------------------
stop_pid "${APID[r1]}" TERM
put file/g1 '{"path":"g1.txt","content":"gap one\n"}' >/dev/null
put file/g2 '{"path":"g/g2.txt","content":"gap two\n"}' >/dev/null
put file/base '{"path":"base.txt","content":"base v2\n"}' >/dev/null
VG=$(plane_version)
check_eq "three writes while r1 was away" "$((V + 3))" "$VG"
check "r2 and r3 follow them live" wait_until 10 all_at "$VG" r2 r3
ALOG=r1-second start_agent r1 --backoff-min 0.1 --backoff-max 0.5
check "r1 restarted catches up to $VG" wait_until 10 agent_at r1 "$VG"
check "r1 booted from last-good at version $V" grep -q "node r1 at version $V " "$WORK/r1-second.log"
check "the plane resumed r1 from its version $V (not from 0)" \
	grep -q "stream: node r1 connected at version $V\b" "$PLANE_LOG"
check_eq "r1 applied one delta of exactly the 3 changes (not a snapshot)" 1 \
	"$(count "applied version $VG (delta, 3 changes" "$WORK/r1-second.log")"
check_eq "r1 applied nothing else" 1 "$(count "applied version" "$WORK/r1-second.log")"
check_eq "the gap's files are there" "gap one|gap two|base v2" \
	"$(cat "$WORK/r1.out/g1.txt" "$WORK/r1.out/g/g2.txt" "$WORK/r1.out/base.txt" 2>&1 | paste -sd '|')"

# ---- the plane dies: the nodes keep their files, offline ----------------------------
stop_pid "$PLANE_PID" KILL
check "after kill -9 of the plane every agent reports offline" wait_until 10 all_state offline r1 r2 r3
check "they still are at version $VG" all_at "$VG" r1 r2 r3
bad=""
for n in r1 r2 r3; do
	[ "$(cat "$WORK/$n.out/base.txt" 2>/dev/null)" = "base v2" ] || bad="$bad $n:base"
	[ "$(cat "$WORK/$n.out/keep/keep.txt" 2>/dev/null)" = kept ] || bad="$bad $n:keep"
	[ "$(stat -c %a "$WORK/$n.out/keep/keep.txt" 2>/dev/null)" = 600 ] || bad="$bad $n:mode"
	kill -0 "${APID[$n]}" 2>/dev/null || bad="$bad $n:dead"
done
check_eq "every agent runs and keeps serving its files" "" "$bad"
check "the agent logged the outage" grep -q "serving version $VG, retrying" "$WORK/r2.log"

# ---- the plane comes back on the same port and data ------------------------------------
start_plane p2 --listen "127.0.0.1:$PORT" --data "$DATA"
check_eq "the plane restarted on the same port" "$PORT" "$PLANE_PORT"
check "the agents reconnect (synced)" wait_until 10 all_state synced r1 r2 r3
put file/after '{"path":"after.txt","content":"after the outage\n"}' >/dev/null
VA=$(plane_version)
check "a new write reaches all of them" wait_until 10 all_at "$VA" r1 r2 r3
check_eq "with its content" "after the outage" "$(cat "$WORK/r3.out/after.txt" 2>/dev/null)"
check "the agent logged that it is connected again" grep -q "connected again" "$WORK/r3.log"
check_eq "r3 got only a delta after the outage (no snapshot)" 1 "$(count "(snapshot" "$WORK/r3.log")"

# ---- boot with the plane down and the output wiped: last-good -----------------------
stop_pid "${APID[r2]}" TERM
stop_pid "$PLANE_PID" TERM
rm -rf "$WORK/r2.out"
ALOG=r2-offline start_agent r2 --backoff-min 0.1 --backoff-max 0.5
check "r2 boots with the plane down and reports offline" wait_until 10 booted_as r2 offline
check_eq "r2 kept its version $VA" "$VA" "$(st r2 version)"
check_eq "its output is rebuilt from last-good" "base v2|kept|gap one|gap two|after the outage" \
	"$(cat "$WORK/r2.out/base.txt" "$WORK/r2.out/keep/keep.txt" "$WORK/r2.out/g1.txt" \
		"$WORK/r2.out/g/g2.txt" "$WORK/r2.out/after.txt" 2>&1 | paste -sd '|')"
check_eq "with the modes" 600 "$(stat -c %a "$WORK/r2.out/keep/keep.txt" 2>/dev/null)"
check_eq "and nothing else" "./after.txt ./base.txt ./g/g2.txt ./g1.txt ./keep/keep.txt" \
	"$(cd "$WORK/r2.out" && find . -path ./.tether-work -prune -o -type f -print | sort | xargs)"
check "r2 logged the files it wrote" grep -q "files: output matches version $VA (5 files written" "$WORK/r2-offline.log"
for n in r1 r3; do stop_pid "${APID[$n]}" TERM; done
stop_pid "${APID[r2]}" TERM

# ---- a silently dead stream (seed 002) ----------------------------------------------
# the plane again, heartbeats every 0.5 s; agents with --stream-timeout 2
start_plane p3 --data "$DATA" --heartbeat 0.5
V=$(plane_version)
start_agent d1 --backoff-min 0.1 --backoff-max 0.5
check "d1 syncs directly first" wait_until 10 agent_at d1 "$V"
stop_pid "${APID[d1]}" TERM

# (a) the first stream through the proxy dies right after its headers
start_tool bh1 blackhole-proxy.mjs --target "127.0.0.1:$PLANE_PORT" --mode swallow-after-headers \
	--nth 1 --match "GET /v1/stream"
BH1=$TOOL_PORT
conns_before=$(count "stream: node d1 connected at version $V\b" "$PLANE_LOG")
ALOG=d1-proxy start_agent d1 --plane "http://127.0.0.1:$BH1" --stream-timeout 2 --backoff-min 0.1 --backoff-max 0.5
check "the proxy swallows d1's first stream after its headers" \
	wait_until 10 grep -q "response headers forwarded; from now on silence" "$WORK/bh1.log"
check "the plane did open that stream at d1's version $V" \
	wait_until 5 count_ge $((conns_before + 1)) "stream: node d1 connected at version $V\b" "$PLANE_LOG"
put file/dark '{"path":"dark.txt","content":"written while the stream was dark\n"}' >/dev/null
VD=$(plane_version)
sample_until "stream: silent for" "$WORK/d1-proxy.log" d1
check_eq "while the stream is dead d1's version never moves ($SAMPLES samples)" "$V" "$SAMPLED_VERSIONS"
check "the dead stream was watched for a while ($SAMPLED_MS ms, $SAMPLES samples)" test "$SAMPLED_MS" -ge 500 -a "$SAMPLES" -ge 3
check "d1 detected the silence" grep -q "stream: silent for .* reconnecting from version $V\$" "$WORK/d1-proxy.log"
check "d1 gets the write made meanwhile" wait_until 10 agent_at d1 "$VD"
check_eq "with its content" "written while the stream was dark" "$(cat "$WORK/d1.out/dark.txt" 2>/dev/null)"
check "the plane saw d1 come back from version $V (its applied version)" \
	count_ge $((conns_before + 2)) "stream: node d1 connected at version $V\b" "$PLANE_LOG"
check "the second stream went through the proxy untouched" grep -q "request [0-9]* (match 2): .*: forwarded" "$WORK/bh1.log"
check_eq "d1 applied exactly that delta" 1 "$(count "applied version $VD (delta, 1 changes" "$WORK/d1-proxy.log")"
stop_pid "${APID[d1]}" TERM

# (b) a stream that worked goes dark (SIGUSR2 to the proxy)
start_tool bh2 blackhole-proxy.mjs --target "127.0.0.1:$PLANE_PORT" --mode forward --match "GET /v1/stream"
BH2_PID=$TOOL_PID
BH2=$TOOL_PORT
put file/live '{"path":"live.txt","content":"one\n"}' >/dev/null
V=$(plane_version)
# no --stream-timeout: the default is three of the plane's heartbeats (1.5 s)
start_agent d2 --plane "http://127.0.0.1:$BH2" --backoff-min 0.1 --backoff-max 0.5
check "d2 syncs through the proxy" wait_until 10 agent_at d2 "$V"
check "d2 is synced (the stream works)" wait_until 5 all_state synced d2
# it must have heard a heartbeat (its interval sets the default timeout):
# d2 is the plane's only stream now, so heartbeats sent are heartbeats to d2
hb0=$(heartbeats)
check "the plane sends d2 heartbeats" wait_until 5 sh -c "[ \$(curl -s '$PLANE_URL/metrics' | awk '/^tether_heartbeats_total /{print \$2}') -ge $((hb0 + 3)) ]"
kill -USR2 "$BH2_PID"
check "the proxy silences d2's stream" wait_until 5 grep -q "SIGUSR2: from now on silence" "$WORK/bh2.log"
put file/live '{"path":"live.txt","content":"two\n"}' >/dev/null
VL=$(plane_version)
sample_until "stream: silent for" "$WORK/d2.log" d2
check_eq "while the working stream is dead d2's version never moves ($SAMPLES samples)" "$V" "$SAMPLED_VERSIONS"
check "the dead stream was watched for a while ($SAMPLED_MS ms, $SAMPLES samples)" test "$SAMPLED_MS" -ge 700 -a "$SAMPLES" -ge 5
check "the default stream timeout is three advertised heartbeats (1.5 s)" grep -q "stream: silent for .* (timeout 1.5s)" "$WORK/d2.log"
check "d2 detected the silence and resumes from its applied version $V" \
	grep -q "stream: silent for .* reconnecting from version $V\$" "$WORK/d2.log"
check "d2 gets the write made while its stream was dark" wait_until 10 agent_at d2 "$VL"
check_eq "with its content" two "$(cat "$WORK/d2.out/live.txt" 2>/dev/null)"
check "the plane saw d2 come back from version $V" grep -q "stream: node d2 connected at version $V\b" "$PLANE_LOG"
stop_pid "${APID[d2]}" TERM

# ---- a heartbeat never moves the version (scripted server) ------------------------------
cat >"$WORK/hb.json" <<'EOF'
{"streams": [
  [{"event": "push", "id": "3", "data": {"version": 3, "base": 0, "full": true, "nonce": "hb.1",
     "upserts": [{"name": "file/a", "version": 3, "body": {"path": "a.txt", "content": "three\n"}}], "removed": []}},
   {"event": "heartbeat", "data": {"version": 50, "time": 1, "interval": 0.5}, "delay_ms": 100},
   {"event": "heartbeat", "data": {"version": 51, "time": 2, "interval": 0.5}, "wait_acks": 1},
   {"close": true, "delay_ms": 300}],
  [{"event": "heartbeat", "data": {"version": 51, "time": 3, "interval": 0.5}}, {"keepalive_ms": 200}]
]}
EOF
start_tool hb sse-server.mjs --script "$WORK/hb.json" --acks "$WORK/hb.acks" --requests "$WORK/hb.requests"
start_agent h1 --plane "http://127.0.0.1:$TOOL_PORT" --backoff-min 0.1 --backoff-max 0.5
check "h1 applies the pushed version 3" wait_until 10 agent_at h1 3
check "h1 heard a heartbeat announcing a newer version (status.json plane_version >= 50)" \
	wait_until 10 sh -c "[ \"\$(jq -r .plane_version '$WORK/h1.state/status.json')\" -ge 50 ]"
check_eq "a heartbeat announcing version 50 does not move h1's version" 3 "$(st h1 version)"
check_eq "h1 says syncing, not synced" syncing "$(st h1 state)"
check "h1 reconnects after the stream closed" wait_until 10 count_ge 2 '"/v1/stream"' "$WORK/hb.requests"
check_eq "h1 reconnects with the version it applied (3), not the heartbeat's" 3 \
	"$(jq -r 'select(.n == 2) | .query.version' "$WORK/hb.requests")"
check_eq "h1 ACKed version 3 with its nonce" "ack 3 hb.1" "$(jq -r '"\(.status) \(.version) \(.nonce)"' "$WORK/hb.acks" | head -n 1)"
stop_pid "${APID[h1]}" TERM

# ---- reconnect backoff --------------------------------------------------------------------
# counted over the test's own waits (the log's wall-clock times are shown,
# not judged: a wall clock that steps makes their gaps meaningless)
ALOG=bk1 start_agent bk1 --plane http://127.0.0.1:1 --log-level debug --backoff-min 0.2 --backoff-max 1
sleep 2
n2=$(count "debug: sync: http://127.0.0.1:1/" "$WORK/bk1.log")
sleep 3
n5=$(count "debug: sync: http://127.0.0.1:1/" "$WORK/bk1.log")
stop_pid "${APID[bk1]}" TERM
times=$(grep "debug: sync: http://127.0.0.1:1/" "$WORK/bk1.log" | head -n 6 |
	sed -E 's/^[0-9-]+T([0-9]+):([0-9]+):([0-9]+)\.([0-9]+)Z.*/\1 \2 \3 \4/' |
	awk '{print (($1 * 60 + $2) * 60 + $3) * 1000 + $4}')
diag "attempts: $n2 in the first 2 s, $n5 in 5 s; the first six at (ms) $(echo $times)"
check "it backs off, not a tight loop: $n2 attempts in its first 2 s (at most 30)" test "$n2" -le 30
check "it keeps trying: $n5 attempts in 5 s (at least 4: no wait much over --backoff-max 1 s)" test "$n5" -ge 4
check_eq "the outage is logged once, not per attempt" 1 "$(count "warn: plane http://127.0.0.1:1" "$WORK/bk1.log")"

check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
