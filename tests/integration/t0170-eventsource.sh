#!/usr/bin/env bash
# t0170-eventsource.sh: a standard EventSource client (the npm package
# eventsource 3.0.7 on node) reads the plane's stream: the snapshot first,
# pushes whose lastEventId is their version, heartbeats, gzip, and a
# reconnect by itself with Last-Event-ID after the plane restarts on the
# same port, getting only the gap and never the snapshot again.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || skip_all "node is not installed"

# the eventsource package: $NODE_PATH, the tree's build/node_modules, or
# installed here (pinned) by scripts/npm-deps
eventsource_dir

# The client: every event as one JSON line. The fetch wrapper only records
# what each (re)connect sent and got; the EventSource does the rest.
cat >"$WORK/es.cjs" <<'EOF'
const { EventSource } = require('eventsource');
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const es = new EventSource(process.argv[2], {
	fetch: async (url, init) => {
		const h = init.headers || {};
		out({ type: 'request', lastEventId: h['Last-Event-ID'] ?? null });
		const r = await fetch(url, init);
		out({ type: 'response', status: r.status, encoding: r.headers.get('content-encoding') });
		return r;
	},
});
es.addEventListener('open', () => out({ type: 'open' }));
es.addEventListener('error', (e) => out({ type: 'error', message: e.message ?? null, code: e.code ?? null }));
for (const t of ['push', 'heartbeat']) {
	es.addEventListener(t, (e) => {
		let data;
		try { data = JSON.parse(e.data); } catch (x) { data = { unparsed: e.data }; }
		out({ type: t, lastEventId: e.lastEventId, data });
	});
}
process.on('SIGTERM', () => { es.close(); process.exit(0); });
EOF

OUT=$WORK/es.out

# lines TYPE: the client's events of that type
lines() {
	jq -c --arg t "$1" 'select(.type == $t)' "$OUT"
}

count() {
	lines "$1" | wc -l
}

has() { # has TYPE N
	[ "$(count "$1")" -ge "$2" ]
}

has_push() { # has_push ID
	lines push | jq -e --arg id "$1" 'select(.lastEventId == $id)' >/dev/null
}

cluster() {
	put "cluster/$1" '{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":'"$2"'}]}' | json .version
}

start_plane p --heartbeat 0.5
PORT=$PLANE_PORT
cluster a 9001 >/dev/null
cluster b 9002 >/dev/null
V=$(cluster c 9003)

NODE_PATH=$ES_DIR node "$WORK/es.cjs" "$PLANE_URL/v1/stream?node=es1&version=0" >"$OUT" 2>"$WORK/es.err" &
ES=$!
track_pid $ES

check "the client opens the stream" wait_until 15 has open 1
check "the first push arrives" wait_until 10 has push 1
first=$(lines push | head -n 1)
check_eq "the first push is the snapshot of version $V" "$V 0 true cluster/a cluster/b cluster/c" \
	"$(echo "$first" | json '.data | "\(.version) \(.base) \(.full) \([.upserts[].name] | join(" "))"')"
check_eq "its lastEventId is its version" "$V" "$(echo "$first" | json .lastEventId)"
check_eq "it carries a nonce" true "$(echo "$first" | json '.data.nonce | type == "string" and length > 0')"

check "heartbeats arrive" wait_until 10 has heartbeat 2
hb=$(lines heartbeat | head -n 1)
check_eq "a heartbeat parses to version, time and interval" "$V number 0.5" \
	"$(echo "$hb" | json '.data | "\(.version) \(.time | type) \(.interval)"')"
check "its time is the wall clock" test "$(echo "$hb" | json '.data.time')" -ge $(($(date +%s) - 10))
check_eq "the first push was its first event" push "$(jq -r 'select(.type == "push" or .type == "heartbeat") | .type' "$OUT" | head -n 1)"

check_eq "the client asked for gzip and got it (EventSource over fetch)" gzip \
	"$(lines response | head -n 1 | json .encoding)"
check_eq "the plane served the stream gzipped" 1 "$(grep -c 'stream: node es1 connected at version 0 (gzip)' "$PLANE_LOG")"

W=$(cluster d 9004)
check "a write arrives as a push" wait_until 10 has_push "$W"
p=$(lines push | jq -c --arg id "$W" 'select(.lastEventId == $id)')
check_eq "whose lastEventId is its version, and which is the delta" "$W $V false cluster/d" \
	"$(echo "$p" | json '.data | "\(.version) \(.base) \(.full) \([.upserts[].name] | join(" "))"')"
hb_at() { # hb_at VERSION: a heartbeat of that version arrived
	lines heartbeat | jq -e --argjson v "$1" 'select(.data.version == $v)' >/dev/null
}
check "heartbeats after it carry the new version" wait_until 5 hb_at "$W"

# ---- the plane restarts on the same port ------------------------------------------

opens=$(count open)
stop_pid "$PLANE_PID"
check "the client notices the end of the stream" wait_until 10 has error 1
check_eq "the gzip stream ended cleanly (a plain end, no decoding or network error)" null \
	"$(lines error | head -n 1 | json .message)"
start_plane p2 --heartbeat 0.5 --listen "127.0.0.1:$PORT" --data "$WORK/p.data"
check_eq "the plane is back on the same port at version $W" "$PORT $W" \
	"$PLANE_PORT $(curl -sS "$PLANE_URL/healthz" | json .version)"
check "the client reconnects by itself" wait_until 20 has open $((opens + 1))
check_eq "its reconnect sent Last-Event-ID: $W" "$W" "$(lines request | tail -n 1 | json .lastEventId)"
check_eq "the plane resumed the node from that version" 1 \
	"$(grep -c "stream: node es1 connected at version $W" "$PLANE_LOG")"
hbs=$(count heartbeat)
check "after the reconnect it gets a heartbeat (nothing is missing)" wait_until 10 has heartbeat $((hbs + 1))

W2=$(cluster e 9005)
check "a write after the restart arrives" wait_until 10 has_push "$W2"
p=$(lines push | tail -n 1)
check_eq "as the gap only: $W -> $W2 with the one new cluster" "$W2 $W false cluster/e" \
	"$(echo "$p" | json '"\(.lastEventId) \(.data.base) \(.data.full) \([.data.upserts[].name] | join(" "))"')"
check_eq "the reconnect did not resend the snapshot: one full push in all" 1 \
	"$(lines push | jq -s 'map(select(.data.full)) | length')"
check_eq "three pushes in all: snapshot, $W, $W2" "$V $W $W2" "$(lines push | json .lastEventId | tr '\n' ' ' | sed 's/ $//')"
check_eq "still gzip after the reconnect" gzip "$(lines response | tail -n 1 | json .encoding)"
check_eq "the client logged no parse failure" 0 "$(jq -c 'select(.data.unparsed != null)' "$OUT" | wc -l)"

stop_pid $ES
done_testing
