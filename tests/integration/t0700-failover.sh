#!/usr/bin/env bash
# t0700-failover.sh: --plane URL1,URL2 on tetherd and tetherctl. Two real
# planes carry the same content (every write goes to both, in the same
# order, so their versions line up; a plane that was down is caught up
# before it serves again). An agent on A moves to B when A is killed, by
# delta from its applied version (B logs the version it connected at and
# sends no snapshot), status.json names B, a change on B reaches it and
# its ACK reaches B; back to A when B dies; the poll transport too. An ACK
# in flight to a plane that goes silent is taken back and reaches the new
# plane. A first URL that refuses connections costs no backoff. A plane
# that refuses the node's credentials is reported. SIGHUP re-reads the
# list. Bad lists exit 2. tetherctl tries the planes in order: on a refused
# connection or a 503 for any request, on a 502 for a read only, never on
# a 4xx.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
command -v node >/dev/null 2>&1 || skip_all "node is not installed (the fake planes need it)"

# ---- helpers of this test ------------------------------------------------------

# put_on URL NAME CONTENT: PUT file/NAME on the plane at URL; prints the version.
put_on() {
	curl -sS -X PUT --data-binary "{\"path\":\"$2.txt\",\"content\":\"$3\\n\"}" \
		"$1/v1/resources/file/$2" | jq -r .version
}

# write NAME CONTENT URL...: the same write on every plane given; they must
# agree on its version (their stores stay twins). Sets V.
write() {
	local name=$1 content=$2 u v
	shift 2
	V=""
	for u in "$@"; do
		v=$(put_on "$u" "$name" "$content")
		[ -n "$V" ] && [ "$v" != "$V" ] && bail "the planes disagree: version $v on $u, $V before"
		V=$v
	done
}

# on NAME URL: agent NAME's status.json says it is on the plane at URL.
on() {
	[ "$(st "$1" plane)" = "$2" ]
}

# both_on URL NAME...: every one of the agents is on that plane.
both_on() {
	local u=$1 n
	shift
	for n in "$@"; do
		on "$n" "$u" || return 1
	done
}

# on_at NAME URL VERSION: on that plane, at that version, synced.
on_at() {
	on "$1" "$2" && agent_at "$1" "$3" && [ "$(st "$1" state)" = synced ]
}

# metric_of URL NAME: an unlabelled metric of the plane at URL.
metric_of() {
	curl -sS "$1/metrics" | awk -v m="$2" '$1 == m {print $2}'
}

# node_on URL NODE JQ: a field of the record of NODE on the plane at URL.
node_on() {
	curl -sS "$1/v1/nodes/$2" | jq -r "$3"
}

node_acked_on() {
	[ "$(node_on "$1" "$2" .acked_version)" = "$3" ]
}

# after PATTERN LINE FILE: FILE has a line matching PATTERN after line LINE.
after() {
	tail -n +"$(($2 + 1))" "$3" 2>/dev/null | grep -qE -- "$1"
}

lines() {
	wc -l <"$1" 2>/dev/null || echo 0
}

# ms_of LINE: a log line's time stamp in milliseconds.
ms_of() {
	local ts=${1%% *}
	echo $(($(date -d "$ts" +%s%N) / 1000000))
}

# a_plane NAME: starts (or restarts, on its port and data) plane NAME with
# a heartbeat a second and debug logs (each push: delta or snapshot).
declare -A PURL PPID_OF PPORT
a_plane() {
	local name=$1 args=(--heartbeat 1 --log-level debug --data "$WORK/$1.data")
	[ -n "${PPORT[$name]:-}" ] && args+=(--listen "127.0.0.1:${PPORT[$name]}")
	start_plane "$name" "${args[@]}"
	[ -z "${PPORT[$name]:-}" ] || [ "$PLANE_PORT" = "${PPORT[$name]}" ] || bail "$name came back on another port"
	PURL[$name]=$PLANE_URL
	PPID_OF[$name]=$PLANE_PID
	PPORT[$name]=$PLANE_PORT
}

# ---- two planes with the same content ----------------------------------------------
a_plane A
a_plane B
A=${PURL[A]}
B=${PURL[B]}
write one "one" "$A" "$B"
write two "two" "$A" "$B"
check_eq "the two planes agree (version 2)" "2 2" "$(PLANE_URL=$A plane_version) $(PLANE_URL=$B plane_version)"

start_agent n1 --plane "$A,$B" --backoff-min 0.1 --backoff-max 0.5
start_agent np --plane "$A,$B" --transport poll --poll-wait 2 --backoff-min 0.1 --backoff-max 0.5
check "an SSE agent with --plane A,B syncs from A" wait_until 10 on_at n1 "$A" 2
check "a polling agent with --plane A,B syncs from A" wait_until 10 on_at np "$A" 2
check_eq "status.json lists the planes" "$A,$B" "$(jq -r '.planes | join(",")' "$WORK/n1.state/status.json")"
check "A has n1's ACK" wait_until 10 node_acked_on "$A" n1 2
check "A has np's ACK" wait_until 10 node_acked_on "$A" np 2

# ---- kill -9 A: both move to B, by delta -----------------------------------------------
PUSHES_B=$(metric_of "$B" tether_pushes_total)
POLLS_B=$(metric_of "$B" tether_polls_total)
stop_pid "${PPID_OF[A]}" KILL
check "the SSE agent moves to B" wait_until 10 on_at n1 "$B" 2
check "the polling agent moves to B" wait_until 10 on_at np "$B" 2
check "n1 logs the move" grep -q "plane: moving from $A to $B after " "$WORK/n1.log"
check "np logs the move" grep -q "plane: moving from $A to $B after " "$WORK/np.log"
check "B: n1 connected at its version 2 (a resume, not version 0)" \
	wait_until 5 grep -qE "stream: node n1 connected at version 2( \(gzip\))?\$" "$WORK/B.log"
check_eq "B sent n1 nothing on connecting (up to date: no snapshot)" "$PUSHES_B" "$(metric_of "$B" tether_pushes_total)"
check "B answered np's polls" test "$(metric_of "$B" tether_polls_total)" -gt "$POLLS_B"
check_eq "status.json says B" "$B" "$(st n1 plane)"
check_eq "... and still lists both planes" "$A,$B" "$(jq -r '.planes | join(",")' "$WORK/n1.state/status.json")"

write three "three on B" "$B"
check "a change on B reaches n1" wait_until 10 on_at n1 "$B" 3
check "a change on B reaches np" wait_until 10 on_at np "$B" 3
check_eq "with its content" "three on B" "$(cat "$WORK/n1.out/three.txt" 2>/dev/null)"
check "B pushed n1 a delta from 2" grep -q "stream n1: push 2 -> 3 (delta" "$WORK/B.log"
check "B never sent n1 a snapshot" bash -c "! grep -q 'stream n1: push .*(snapshot' '$WORK/B.log'"
check "n1 applied a delta" grep -q "applied version 3 (delta" "$WORK/n1.log"
check "np applied a delta" grep -q "applied version 3 (delta" "$WORK/np.log"
check "n1's ACK reaches B" wait_until 10 node_acked_on "$B" n1 3
check "np's ACK reaches B" wait_until 10 node_acked_on "$B" np 3
check_eq "n1 took no snapshot since its first sync" 1 "$(grep -c "(snapshot" "$WORK/n1.log")"
check_eq "np took no snapshot since its first sync" 1 "$(grep -c "(snapshot" "$WORK/np.log")"

# ---- A comes back (caught up), B dies: back to A ------------------------------------------
a_plane A
write three "three on B" "$A"
check_eq "A, caught up, is at 3 too" 3 "$V"
AL=$(lines "$WORK/A.log")
stop_pid "${PPID_OF[B]}" KILL
check "n1 moves back to A" wait_until 10 on_at n1 "$A" 3
check "np moves back to A" wait_until 10 on_at np "$A" 3
check "n1 logs the move back" grep -q "plane: moving from $B to $A after " "$WORK/n1.log"
check "A: n1 connected at its version 3" wait_until 5 after "stream: node n1 connected at version 3( \(gzip\))?\$" "$AL" "$WORK/A.log"
write four "four on A" "$A"
check "a change on A reaches n1" wait_until 10 on_at n1 "$A" 4
check "a change on A reaches np" wait_until 10 on_at np "$A" 4
check "A pushed n1 a delta from 3" after "stream n1: push 3 -> 4 \(delta" "$AL" "$WORK/A.log"
check "n1's ACK reaches A" wait_until 10 node_acked_on "$A" n1 4
check "np's ACK reaches A" wait_until 10 node_acked_on "$A" np 4
check_eq "still no second snapshot on n1" 1 "$(grep -c "(snapshot" "$WORK/n1.log")"

a_plane B
write four "four on A" "$B"
check_eq "B, caught up, is at 4 too" 4 "$V"

# ---- an ACK in flight when the agent moves reaches the new plane -------------------------------
# n2 reaches A through a proxy that forwards its second ACK and holds the
# answer (headers through, then silence): that ACK is in flight when A dies
# and n2 moves to B.
start_tool pa blackhole-proxy.mjs --target "127.0.0.1:${PPORT[A]}" --match "POST /v1/ack" --nth 2
PA=http://127.0.0.1:$TOOL_PORT
start_agent n2 --plane "$PA,$B" --backoff-min 0.1 --backoff-max 0.5
check "n2 syncs from A through the proxy" wait_until 10 on_at n2 "$PA" 4
check "A has n2's ACK of 4" wait_until 10 node_acked_on "$A" n2 4
STALE_B=$(node_on "$B" n2 '.stale_acks // 0')
write five "five" "$A" "$B"
check "n2 applies 5" wait_until 10 agent_at n2 5
check "its ACK is in flight, the answer held by the proxy" \
	wait_until 10 grep -q "response headers forwarded; from now on silence" "$WORK/pa.log"
check "A took it (what is held is only its answer)" wait_until 10 node_acked_on "$A" n2 5
stop_pid "${PPID_OF[A]}" KILL
check "n2 moves to B" wait_until 10 on_at n2 "$B" 5
check "the ACK in flight was taken back, not waited for" \
	wait_until 10 grep -q "the client closed the silent connection" "$WORK/pa.log"
# B never sent n2 version 5 (n2 connected there at 5): B counts the ACK,
# whose nonce is A's, as stale -- which shows where it went
check "... and reached B" wait_until 10 \
	bash -c "[ \"\$(curl -sS '$B/v1/nodes/n2' | jq -r '.stale_acks // 0')\" -gt '$STALE_B' ]"
check "n1 and np, on A, moved to B as well" wait_until 10 both_on "$B" n1 np
a_plane A

# ---- a stream that goes silent: the next plane ----------------------------------------------
start_tool pb blackhole-proxy.mjs --target "127.0.0.1:${PPORT[B]}" --mode forward --match "/v1/stream"
PB=http://127.0.0.1:$TOOL_PORT
start_agent n6 --plane "$PB,$A" --stream-timeout 1 --backoff-min 0.1 --backoff-max 0.5
check "n6 syncs from B through the proxy" wait_until 10 on_at n6 "$PB" 5
kill -USR2 "$TOOL_PID"
check "the silent stream moves n6 to A" wait_until 10 on_at n6 "$A" 5
check "n6 logs why" grep -q "plane: moving from $PB to $A after a dead stream" "$WORK/n6.log"
check "A: n6 connected at its version 5" wait_until 5 grep -qE "stream: node n6 connected at version 5( \(gzip\))?\$" "$WORK/A.log"

# ---- a first URL that refuses connections: the second at once --------------------------------
start_plane dead
DEAD=$PLANE_URL
stop_pid "$PLANE_PID" KILL
printf '[agent]\nplane = %s , %s/\n' "$DEAD" "$B" >"$WORK/n3.conf"
start_agent n3 -c "$WORK/n3.conf" --backoff-min 30 --backoff-max 60
check "n3 (plane = DEAD, B) syncs from B" wait_until 10 on_at n3 "$B" 5
check_eq "status.json lists the planes, normalized" "$DEAD,$B" "$(jq -r '.planes | join(",")' "$WORK/n3.state/status.json")"
moved=$(grep -m1 "plane: moving from $DEAD to $B after " "$WORK/n3.log")
connected=$(grep "stream: node n3 connected at version 0" "$WORK/B.log" | tail -n 1)
check "n3 logs the move" test -n "$moved"
# the backoff is 30..60 s here: what came within a second did not wait for it
if [ -n "$moved" ] && [ -n "$connected" ]; then
	gap=$(($(ms_of "$connected") - $(ms_of "$moved")))
	check "n3 dialled B at once, not after a backoff (${gap} ms)" test "$gap" -lt 1000
else
	not_ok "n3 dialled B at once"
fi

# ---- SIGHUP re-reads the list --------------------------------------------------------------
printf '[agent]\nplane = %s\n' "$B" >"$WORK/n3.conf"
kill -HUP "${APID[n3]}"
check "SIGHUP: n3 reloads and redials" wait_until 5 grep -q "SIGHUP: configuration reloaded; reconnecting" "$WORK/n3.log"
check_eq "status.json lists the new planes" "$B" "$(jq -r '.planes | join(",")' "$WORK/n3.state/status.json")"
check "n3 stays on B, synced" wait_until 10 on_at n3 "$B" 5
printf '[agent]\nplane = %s,%s\n' "$A" "$B" >"$WORK/n3.conf"
kill -HUP "${APID[n3]}"
check "SIGHUP to A,B: n3 keeps B, the plane it is on" \
	wait_until 5 bash -c "[ \"\$(jq -r '.planes | join(\",\")' '$WORK/n3.state/status.json')\" = '$A,$B' ]"
check_eq "... on B" "$B" "$(st n3 plane)"

# ---- fake planes: 403 and 503 ----------------------------------------------------------------
# fake.mjs STATUS: answers every request with STATUS and an error body; logs
# each request line to stderr.
cat >"$WORK/fake.mjs" <<'EOF'
import http from 'node:http';
const status = Number(process.argv[2]);
const server = http.createServer((req, res) => {
	console.error(`${req.method} ${req.url}`);
	req.resume();
	req.on('end', () => {
		res.writeHead(status, { 'Content-Type': 'application/json' });
		res.end(JSON.stringify({ error: `fake plane says ${status}` }));
	});
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
EOF
# fake NAME STATUS: starts one; sets FAKE_URL.
fake() {
	node "$WORK/fake.mjs" "$2" >"$WORK/$1.port" 2>>"$WORK/$1.log" &
	track_pid $!
	wait_until 10 grep -q '^listening ' "$WORK/$1.port" || bail "fake plane $1 did not start"
	FAKE_URL=http://127.0.0.1:$(awk '/^listening /{print $2; exit}' "$WORK/$1.port")
}
fake f403 403
F403=$FAKE_URL
fake f503 503
F503=$FAKE_URL
fake f502 502
F502=$FAKE_URL

start_agent n4 --plane "$F403,$B" --backoff-min 0.1 --backoff-max 0.5
check "n4 (a plane that answers 403 first) syncs from B" wait_until 10 on_at n4 "$B" 5
check "... and reports the refusal as an error" \
	grep -q "error: plane $F403 refused this node's credentials (HTTP 403: " "$WORK/n4.log"
start_agent n5 --plane "$F503,$B" --transport poll --poll-wait 2 --backoff-min 0.1 --backoff-max 0.5
check "n5 (polling; a plane that answers 503 first) syncs from B" wait_until 10 on_at n5 "$B" 5
check "n5 logs the move" grep -q "plane: moving from $F503 to $B after HTTP 503" "$WORK/n5.log"

# ---- --once tries each plane in turn ---------------------------------------------------------
"$AGENT_BIN" --once --node o1 --plane "$DEAD,$F503,$B" --state-dir "$WORK/o1.state" --output-dir "$WORK/o1.out" \
	--backoff-min 0.1 --backoff-max 0.5 >"$WORK/o1.log" 2>&1
check_eq "--once with DEAD,F503,B exits 0" 0 "$?"
check_eq "... at B's version from B" "5 $B" "$(st o1 version) $(st o1 plane)"
check "... and acked it on B" wait_until 5 node_acked_on "$B" o1 5
"$AGENT_BIN" --once --node o2 --plane "$DEAD,$F503" --state-dir "$WORK/o2.state" --output-dir "$WORK/o2.out" \
	--backoff-min 0.1 --backoff-max 0.2 >"$WORK/o2.log" 2>&1
check_eq "--once with no plane that answers exits 1" 1 "$?"
check "... after trying both" bash -c "grep -q 'cannot sync with $DEAD' '$WORK/o2.log' && \
	grep -q 'cannot sync with $F503' '$WORK/o2.log'"

# ---- bad lists exit 2 ---------------------------------------------------------------------
for bad in "$B,,$A" "$B,$A," "$B,$B/" "$B,ftp://x" "http://" "$B, https://" \
	"$(printf 'http://h%d,' $(seq 1 16))http://h17"; do
	"$AGENT_BIN" --check-config --plane "$bad" --node cc --state-dir "$WORK/cc.state" \
		--output-dir "$WORK/cc.out" >/dev/null 2>"$WORK/cc.err"
	check_eq "tetherd --plane '${bad:0:60}' exits 2" 2 "$?"
	check "... and says why" grep -q "tetherd: plane: " "$WORK/cc.err"
done
"$AGENT_BIN" --check-config --plane "$B,$B/" --node cc --state-dir "$WORK/cc.state" --output-dir "$WORK/cc.out" \
	2>&1 | grep -q "listed twice"
check_eq "a duplicate is named" 0 "$?"
out=$("$AGENT_BIN" --check-config --plane "$A, $B" --node cc --state-dir "$WORK/cc.state" --output-dir "$WORK/cc.out" 2>&1)
check_eq "a good list passes --check-config" "configuration OK" "$out"
out=$("$AGENT_BIN" --check-config --plane "$(printf 'http://h%d,' $(seq 1 15))http://h16" --node cc \
	--state-dir "$WORK/cc.state" --output-dir "$WORK/cc.out" 2>&1)
check_eq "16 planes are fine" "configuration OK" "$out"

# ---- tetherctl --plane A,B ---------------------------------------------------------------------
# DEAD refuses connections; F503 and F502 answer 503 and 502; F403 403
tc() {
	OUT=$("$CTL_BIN" "$@" 2>"$WORK/ctl.err")
	RC=$?
	ERR=$(cat "$WORK/ctl.err")
}
tc --plane "$DEAD,$B" get file/five
check_eq "a read: the dead plane first, then B" "0 five.txt" "$RC $(jq -r .path <<<"$OUT" 2>/dev/null)"
tc --plane "$DEAD,$B" put file/six - <<<'{"path":"six.txt","content":"six\n"}'
check_eq "a write: refused connection on the first, done on B" "0 version 6" "$RC $OUT"
write six "six" "$A"
tc --plane "$F503,$B" ls file/
check_eq "a read after a 503 goes on to B" 0 "$RC"
tc --plane "$F503,$B" put file/seven - <<<'{"path":"seven.txt","content":"seven\n"}'
check_eq "a write after a 503 goes on to B (a 503 did nothing)" "0 version 7" "$RC $OUT"
write seven "seven" "$A"
tc --plane "$F502,$B" get file/seven
check_eq "a read after a 502 goes on to B" 0 "$RC"
before=$(grep -c "PUT " "$WORK/f502.log")
tc --plane "$F502,$B" put file/eight - <<<'{"path":"eight.txt","content":"eight\n"}'
check_eq "a write after a 502 is not sent again elsewhere" 1 "$RC"
check "... and says so" grep -q "not sent to $B: the plane at $F502 may have done it already" <<<"$ERR"
check_eq "... B did not get it" 7 "$(PLANE_URL=$B plane_version)"
check_eq "... F502 got it once" "$((before + 1))" "$(grep -c "PUT " "$WORK/f502.log")"
tc --plane "$F403,$B" ls
check_eq "a 403 is an answer: not tried elsewhere" "1 tetherctl: fake plane says 403" "$RC $ERR"
TETHER_PLANE="$DEAD,$B" tc ls file/
check_eq "TETHER_PLANE takes a list too" 0 "$RC"
tc --plane "$DEAD,$F503" ls
check_eq "no plane answers: exit 1" 1 "$RC"
check "... naming each plane's failure" bash -c "grep -q 'cannot reach the plane at $DEAD' <<<\"\$0\" && \
	grep -q 'fake plane says 503' <<<\"\$0\"" "$ERR"
for bad in "$B,,$A" "$B,$B" "ftp://x" "$B,"; do
	tc --plane "$bad" ls
	check_eq "tetherctl --plane '$bad' exits 2" 2 "$RC"
done
TETHER_PLANE="$B,$B" tc ls
check_eq "a bad TETHER_PLANE exits 2" 2 "$RC"
check "... naming TETHER_PLANE" grep -q "TETHER_PLANE: " <<<"$ERR"
TETHER_PLANE="ftp://x" tc status --state-dir "$WORK/n1.state"
check_eq "a local command does not care about the plane" 0 "$RC"

done_testing
