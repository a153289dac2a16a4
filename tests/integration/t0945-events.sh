#!/usr/bin/env bash
# t0945-events.sh: GET /v1/events, the operators' event stream, read by a
# standard EventSource client (the npm package eventsource, as in t0170)
# with a reader token, and by `tetherctl watch`: on a staged plane with two
# agents, one of which refuses content holding BAD, a write arrives as a
# `version` event, the agents' ACKs as `ack`, the refused change as a `nack`
# carrying the check's error, and the rollout's transitions (in progress,
# rolled back) as `rollout`; ids only grow; a client that comes back with
# Last-Event-ID gets exactly what it missed, one whose id is gone gets a
# `reset`; credentials are checked (no token on a secure plane: 401, a node
# token: 403); a subscriber shows in the metrics.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || skip_all "node is not installed"
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

eventsource_dir

# es.cjs URL TOKEN [LAST-EVENT-ID]: every event as one JSON line.
cat >"$WORK/es.cjs" <<'EOF'
const { EventSource } = require('eventsource');
const [url, token, last] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
let first = true;
const es = new EventSource(url, {
	fetch: async (u, init) => {
		const h = { ...(init.headers || {}) };
		if (token)
			h.Authorization = 'Bearer ' + token;
		if (first && last)
			h['Last-Event-ID'] = last;
		first = false;
		const r = await fetch(u, { ...init, headers: h });
		out({ type: 'response', status: r.status, ctype: r.headers.get('content-type') });
		return r;
	},
});
es.addEventListener('open', () => out({ type: 'open' }));
es.addEventListener('error', (e) => out({ type: 'error', code: e.code ?? null }));
for (const t of ['version', 'ack', 'nack', 'rollout', 'node', 'heartbeat', 'reset']) {
	es.addEventListener(t, (e) => {
		let data;
		try { data = JSON.parse(e.data); } catch (x) { data = { unparsed: e.data }; }
		out({ type: t, id: e.lastEventId, data });
	});
}
process.on('SIGTERM', () => { es.close(); process.exit(0); });
EOF

# es NAME TOKEN [LAST-ID]: starts a client writing $WORK/NAME.out; sets ES
es() {
	NODE_PATH=$ES_DIR node "$WORK/es.cjs" "$PLANE_URL/v1/events" "$2" "${3:-}" >"$WORK/$1.out" 2>"$WORK/$1.err" &
	ES=$!
	track_pid $ES
}

lines() { # lines NAME TYPE
	jq -c --arg t "$2" 'select(.type == $t)' "$WORK/$1.out"
}
has() { # has NAME TYPE N
	[ "$(lines "$1" "$2" | wc -l)" -ge "$3" ]
}
has_where() { # has_where NAME TYPE JQ-CONDITION
	lines "$1" "$2" | jq -s -e "map(select($3)) | length > 0" >/dev/null
}

# ---- a staged plane, a reader, two agents -------------------------------------

start_plane p --rollout staged --stages 50,100 --bake 1 --heartbeat 1 --ack-timeout 20
READER=$(ctl token create --role reader --name console) || bail "cannot make a reader token"
NODETOK=$(ctl token create --node good) || bail "cannot make a node token"

check_eq "a node's token may not read the events" 403 \
	"$(api_status GET /v1/events -H "Authorization: Bearer $NODETOK" --max-time 2)"
check_eq "an unknown token may not either" 401 \
	"$(api_status GET /v1/events -H "Authorization: Bearer tt1_000000000000_nope" --max-time 2)"

es a "$READER"
A=$ES
check "the client opens the stream with the reader token" wait_until 15 has a open 1
check_eq "200, text/event-stream" "200 text/event-stream" "$(lines a response | head -n 1 | json '"\(.status) \(.ctype)"')"
check "heartbeats come every interval (no id)" wait_until 10 has a heartbeat 2
check_eq "heartbeats carry no id" "" "$(lines a heartbeat | head -n 1 | json .id)"
check_eq "the metrics count the subscriber" 1 "$(metric tether_events_subscribers)"

bad_check "$WORK/check.sh"
start_agent good --labels zone=a --backoff-max 1
start_agent picky --labels zone=b --backoff-max 1 --check "sh $WORK/check.sh"
check "both agents connect (node events)" wait_until 15 has_where a node '.data.connected == true and .data.node == "picky"'
check "... and good" has_where a node '.data.connected == true and .data.node == "good"'

# tetherctl watch, plain and --json, from now on
(umask 077 && echo "$READER" >"$WORK/reader.token")
"$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/reader.token" watch >"$WORK/watch.out" 2>"$WORK/watch.err" &
W=$!
track_pid $W
"$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/reader.token" watch --json >"$WORK/watchj.out" 2>"$WORK/watchj.err" &
WJ=$!
track_pid $WJ
sleep_until_watching() { [ "$(metric tether_events_subscribers)" = 3 ]; }
check "both watchers subscribe" wait_until 10 sleep_until_watching

V1=$(put file/motd '{"path":"motd.txt","content":"hello\n"}' | json .version)
check "a write is a version event with its names" wait_until 10 \
	has_where a version ".data.version == $V1 and .data.names == [\"file/motd\"]"
check "a rollout of version $V1 starts (rollout event)" wait_until 10 \
	has_where a rollout ".data.to_version == $V1 and .data.state == \"in_progress\""
check "both agents ACK it (ack events)" wait_until 20 has_where a ack ".data.version == $V1 and .data.node == \"picky\""
check "... good too" has_where a ack ".data.version == $V1 and .data.node == \"good\""
check "the rollout completes (rollout event)" wait_until 20 \
	has_where a rollout ".data.to_version == $V1 and .data.state == \"completed\""

V2=$(put file/motd '{"path":"motd.txt","content":"BAD\n"}' | json .version)
check "picky's NACK of $V2 arrives with the check's error" wait_until 20 \
	has_where a nack ".data.version == $V2 and .data.node == \"picky\" and (.data.error | test(\"BAD content refused\"))"
check "the rollout of $V2 is rolled back (rollout event with the reason)" wait_until 20 \
	has_where a rollout ".data.to_version == $V2 and .data.state == \"rolled_back\" and (.data.reason | test(\"picky\"))"
stages=$(lines a rollout | jq -r --argjson v "$V2" 'select(.data.to_version == $v) | "\(.data.state)@\(.data.stage)"' | paste -sd ' ' -)
diag "rollout of $V2: $stages"
check_eq "its first transition was the 50 % stage in progress" "in_progress@50" "${stages%% *}"

ids=$(jq -r 'select(.id != null and .id != "") | .id' "$WORK/a.out")
check_eq "ids only grow, never repeat" "$(echo "$ids" | sort -n | uniq | paste -sd ' ' -)" "$(echo "$ids" | paste -sd ' ' -)"
check_eq "no event failed to parse" 0 "$(jq -c 'select(.data.unparsed != null)' "$WORK/a.out" | wc -l)"

check "tetherctl watch prints the NACK on one line" wait_until 5 \
	grep -q "nack picky version $V2: .*BAD content refused" "$WORK/watch.out"
check "... and the rollback" grep -q "rollout [0-9]*: rolled_back at stage [0-9]*% (version $V1 -> $V2" "$WORK/watch.out"
check "... without colour (not a terminal)" bash -c "! grep -q $'\033' '$WORK/watch.out'"
check_eq "tetherctl watch --json: one object a line, the same NACK" "picky $V2" \
	"$(jq -r 'select(.event == "nack") | "\(.data.node) \(.data.version)"' "$WORK/watchj.out" | tail -n 1)"

# ---- Last-Event-ID ---------------------------------------------------------------

# the third event with an id: a client resuming from it gets everything after
MID=$(echo "$ids" | sed -n 3p)
WANT=$(echo "$ids" | awk -v m="$MID" '$1 > m' | paste -sd ' ' -)
es b "$READER" "$MID"
B=$ES
check "a client resuming from id $MID opens" wait_until 10 has b open 1
got_all() {
	[ "$(jq -r 'select(.id != null and .id != "" and .type != "heartbeat") | .id' "$WORK/b.out" | head -n "$(echo "$WANT" | wc -w)" | paste -sd ' ' -)" = "$WANT" ]
}
check "it gets exactly the events after it, in order" wait_until 10 got_all
check_eq "and no reset" 0 "$(lines b reset | wc -l)"

es c "$READER" 1
C=$ES
check "a client resuming from an id the ring never held gets a reset" wait_until 10 has c reset 1

# ---- restart: the stream resumes --------------------------------------------------

PORT=$PLANE_PORT
opens=$(lines a open | wc -l)
stop_pid "$PLANE_PID"
start_plane p2 --rollout staged --stages 50,100 --bake 1 --heartbeat 1 --listen "127.0.0.1:$PORT" --data "$WORK/p.data"
check "the EventSource reconnects by itself after a restart" wait_until 20 has a open $((opens + 1))
check "and is told to reload (its id is from before the restart)" wait_until 10 has a reset 1
V3=$(put file/other '{"path":"o.txt","content":"x\n"}' | json .version)
check "a write after the restart arrives" wait_until 10 has_where a version ".data.version == $V3"
check "tetherctl watch reconnected and printed it too" wait_until 10 grep -q "version $V3: " "$WORK/watch.out"

# on a terminal (script(1) gives it one), watch colours its lines
if command -v script >/dev/null 2>&1; then
	subs=$(grep -c 'events: .* subscribed' "$PLANE_LOG")
	NO_COLOR= script -qec "'$CTL_BIN' --plane '$PLANE_URL' --token-file '$WORK/reader.token' watch" /dev/null \
		>"$WORK/tty.out" 2>&1 </dev/null &
	T=$!
	track_pid $T
	wait_until 10 count_ge $((subs + 1)) 'events: .* subscribed' "$PLANE_LOG" || diag "the watch on a terminal did not subscribe"
	V4=$(put file/other '{"path":"o.txt","content":"y\n"}' | json .version)
	check "on a terminal its lines have colour" wait_until 10 grep -q $'\033\\[1mversion '"$V4" "$WORK/tty.out"
	stop_pid $T
else
	ok "# SKIP script(1) is not installed: no terminal for watch"
fi

# ---- a revoked token closes its stream ----------------------------------------------

R2=$(ctl token create --role reader --name gone) || bail "cannot make a second reader token"
es d "$R2"
D=$ES
check "a client with a second reader token opens" wait_until 10 has d open 1
aerr=$(lines a error | wc -l)
closed=$(ctl token revoke "$(echo "$R2" | cut -d_ -f2)")
diag "revoke: $closed"
check "revoking the token ends its event stream at once" wait_until 5 has d error 1
check "its reconnect is refused: 401" wait_until 10 has_where d response '.status == 401'
check_eq "the stream of the other token stays" "$aerr" "$(lines a error | wc -l)"

stop_pid $A
stop_pid $B
stop_pid $D
stop_pid $C
stop_pid $W
stop_pid $WJ

# ---- a secure plane: no credential, no events -------------------------------------

echo "admin-$$-secret-token-0123456789" >"$WORK/admin.token"
SECURE=1 start_plane s --admin-token-file "$WORK/admin.token"
check_eq "a secure plane answers 401 without a credential" 401 "$(api_status GET /v1/events --max-time 2)"
check_eq "the console's files need none (they hold no data)" 200 "$(api_status GET /ui/ --max-time 2)"
done_testing
