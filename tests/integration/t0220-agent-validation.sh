#!/usr/bin/env bash
# t0220-agent-validation.sh: what tetherd refuses, and that a refusal
# changes nothing. Against the real plane: --strict and unknown fields, a
# failing --check. Against the scripted sse-server (pushes the plane would
# never send): references in any order, a dangling reference, paths out of
# the output directory, a wrong base, an older version, malformed JSON,
# duplicate keys, deep nesting, a symlink planted in the output directory.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
command -v node >/dev/null 2>&1 || skip_all "node is not installed (tests/tools need it)"

# ---- helpers of this test ---------------------------------------------------

# ack_of FILE NONCE: "status version error" of the ACK or NACK of NONCE
ack_of() {
	jq -r --arg n "$2" 'select(.nonce == $n) | "\(.status) \(.version) \(.error // "")"' "$1" 2>/dev/null
}

# ---- the real plane: --strict and unknown fields ---------------------------------
# --allow-unknown-fields: the plane passes fields it does not know on (a migration), so
# that a --strict agent meets one
start_plane p --heartbeat 1 --allow-unknown-fields
put file/a '{"path":"a.txt","content":"v1\n"}' >/dev/null
V1=$(plane_version)
start_agent strict1 --strict --backoff-max 1
start_agent lax1 --backoff-max 1
check "a --strict and a plain agent sync" wait_until 10 sh -c "[ \"\$(jq -r .version '$WORK/strict1.state/status.json' 2>/dev/null)\" = $V1 ] && [ \"\$(jq -r .version '$WORK/lax1.state/status.json' 2>/dev/null)\" = $V1 ]"
A_BEFORE=$(ident "$WORK/strict1.out/a.txt")
put file/a '{"path":"a.txt","content":"v2\n","x-future":{"knob":1}}' >/dev/null
V2=$(plane_version)
check "the plain agent applies a body with an unknown field" wait_until 10 agent_at lax1 "$V2"
check_eq "and writes it" v2 "$(cat "$WORK/lax1.out/a.txt" 2>/dev/null)"
check "the --strict agent NACKs it (the plane records the NACK)" wait_until 10 has_nack strict1 "$V2"
err=$(node_field strict1 .last_nack.error)
diag "strict1's NACK: $err"
check "the NACK's reason names the resource and the field" sh -c "echo '$err' | grep -q 'file/a' && echo '$err' | grep -q 'x-future'"
check_eq "tetherctl nodes --json shows the same last_nack" "$err" \
	"$("$CTL_BIN" --plane "$PLANE_URL" nodes --json | jq -r '.[] | select(.node == "strict1") | .last_nack.error')"
check "tetherctl nodes shows the NACK in its table" sh -c "'$CTL_BIN' --plane '$PLANE_URL' nodes | grep '^strict1 ' | grep -q 'x-future'"
check_eq "the plane still has the --strict agent at $V1 (lag 1)" "$V1 1" "$(node_field strict1 '"\(.acked_version) \(.lag)"')"
check_eq "the --strict agent keeps its version" "$V1" "$(st strict1 version)"
check_eq "the --strict agent keeps its file" v1 "$(cat "$WORK/strict1.out/a.txt" 2>/dev/null)"
check_eq "the file was not even rewritten" "$A_BEFORE" "$(ident "$WORK/strict1.out/a.txt")"
check_eq "its status says degraded" degraded "$(st strict1 state)"
check "its status.json last_error names the field" sh -c "jq -r .last_error '$WORK/strict1.state/status.json' | grep -q x-future"
check "the --strict agent keeps running" kill -0 "${APID[strict1]}"
check_eq "it left no staging behind" "" "$(ls -A "$WORK/strict1.out/.tether-work/staging" 2>/dev/null)"

# ---- a failing --check is a NACK with its stderr; nothing changes -----------------------
cat >"$WORK/check.sh" <<'EOF'
if grep -rq BAD "$TETHER_STAGING"; then
	echo "bad config" >&2
	exit 1
fi
exit 0
EOF
start_agent chk1 --check "sh $WORK/check.sh" --reload "echo reloaded >>$WORK/chk1.reloads" --backoff-max 1
check "an agent whose check passes syncs" wait_until 10 agent_at chk1 "$V2"
check_eq "its reload ran once" 1 "$(wc -l <"$WORK/chk1.reloads" 2>/dev/null)"
B_BEFORE=$(ident "$WORK/chk1.out/a.txt")
put file/a '{"path":"a.txt","content":"BAD\n"}' >/dev/null
V3=$(plane_version)
check "the plain agent applies version $V3" wait_until 10 agent_at lax1 "$V3"
check "a failing check is a NACK" wait_until 10 has_nack chk1 "$V3"
err=$(node_field chk1 .last_nack.error)
diag "chk1's NACK: $err"
check "the NACK carries the check's stderr ('bad config')" sh -c "echo '$err' | grep -q 'bad config'"
check_eq "the agent keeps its version" "$V2" "$(st chk1 version)"
check_eq "the output is unchanged" v2 "$(cat "$WORK/chk1.out/a.txt" 2>/dev/null)"
check_eq "the file was not rewritten" "$B_BEFORE" "$(ident "$WORK/chk1.out/a.txt")"
check_eq "the reload did not run" 1 "$(wc -l <"$WORK/chk1.reloads" 2>/dev/null)"
check_eq "nothing else appeared in the output" "./a.txt" "$(files_of "$WORK/chk1.out")"
put file/a '{"path":"a.txt","content":"good again\n"}' >/dev/null
V4=$(plane_version)
check "a later good version applies" wait_until 10 agent_at chk1 "$V4"
check_eq "with its content" "good again" "$(cat "$WORK/chk1.out/a.txt" 2>/dev/null)"
check_eq "and says synced again" synced "$(st chk1 state)"
for n in strict1 lax1 chk1; do stop_pid "${APID[$n]}" TERM; done

# ---- the scripted server: pushes the plane would never send -------------------------
# Each push waits for the answer to the one before (wait_acks): an agent
# keeps only its newest unsent ACK, as older ones would be stale anyway.
# the output directory holds a planted symlink to a directory outside it
mkdir -p "$WORK/sx.out" "$WORK/elsewhere"
ln -s "$WORK/elsewhere" "$WORK/sx.out/sub"
DEEP=$(printf '%0.s[' $(seq 200))1$(printf '%0.s]' $(seq 200))
cat >"$WORK/sx.json" <<EOF
{"streams": [[
 {"event": "push", "id": "1", "data": {"version": 1, "base": 0, "full": true, "nonce": "s.1", "removed": [], "upserts": [
   {"name": "route/r", "version": 1, "body": {"listener": "l", "cluster": "c", "host": "*", "path": "/"}},
   {"name": "listener/l", "version": 1, "body": {"address": "127.0.0.1", "port": 8080}},
   {"name": "cluster/c", "version": 1, "body": {"endpoints": [{"address": "127.0.0.1", "port": 9001}]}},
   {"name": "file/f", "version": 1, "body": {"path": "f.txt", "content": "one\n", "mode": "0644"}}]}},
 {"event": "push", "id": "2", "wait_acks": 1, "data": {"version": 2, "base": 1, "nonce": "s.2", "removed": [], "upserts": [
   {"name": "route/z", "version": 2, "body": {"listener": "l", "cluster": "z"}},
   {"name": "file/g", "version": 2, "body": {"path": "g.txt", "content": "dangling\n"}}]}},
 {"event": "push", "id": "3", "wait_acks": 2, "data": {"version": 3, "base": 1, "nonce": "s.3", "removed": [], "upserts": [
   {"name": "file/esc", "version": 3, "body": {"path": "../escape", "content": "out\n"}}]}},
 {"event": "push", "id": "4", "wait_acks": 3, "data": {"version": 4, "base": 1, "nonce": "s.4", "removed": [], "upserts": [
   {"name": "file/abs", "version": 4, "body": {"path": "$WORK/abs-target", "content": "out\n"}}]}},
 {"event": "push", "id": "5", "wait_acks": 4, "data": {"version": 5, "base": 1, "nonce": "s.5", "removed": [], "upserts": [
   {"name": "file/x", "version": 5, "body": {"path": "sub/x", "content": "through the symlink\n"}}]}},
 {"event": "push", "id": "6", "wait_acks": 5, "data": "{\"version\":6,\"base\":1,\"nonce\":\"s.6\",\"upserts\":[{\"name\":\"file/m\",\"body\":{\"path\":\"m.txt\""},
 {"event": "push", "id": "7", "data": "{\"version\":7,\"base\":1,\"nonce\":\"s.7\",\"removed\":[],\"upserts\":[{\"name\":\"file/d\",\"version\":7,\"body\":{\"path\":\"d.txt\",\"path\":\"../dup\",\"content\":\"dup\\\\n\"}}]}"},
 {"event": "push", "id": "8", "data": "{\"version\":8,\"base\":1,\"nonce\":\"s.8\",\"nonce\":\"s.8b\",\"removed\":[],\"upserts\":[{\"name\":\"file/d\",\"version\":8,\"body\":{\"path\":\"d.txt\",\"content\":\"dup\\\\n\"}}]}"},
 {"event": "push", "id": "9", "data": "{\"version\":9,\"base\":1,\"nonce\":\"s.9\",\"removed\":[],\"upserts\":[{\"name\":\"file/deep\",\"version\":9,\"body\":{\"path\":\"deep.txt\",\"content\":\"deep\",\"x\":$DEEP}}]}"},
 {"event": "push", "id": "10", "wait_acks": 5, "data": {"version": 10, "base": 1, "nonce": "s.10", "removed": ["cluster/c", "route/r"], "upserts": [
   {"name": "file/h", "version": 10, "body": {"path": "h.txt", "content": "h\n", "mode": "0600"}}]}},
 {"event": "push", "id": "5", "wait_acks": 6, "data": {"version": 5, "base": 0, "full": true, "nonce": "s.11", "removed": [], "upserts": [
   {"name": "file/f", "version": 5, "body": {"path": "f.txt", "content": "older\n"}}]}},
 {"event": "push", "id": "20", "wait_acks": 7, "data": {"version": 20, "base": 15, "nonce": "s.12", "removed": [], "upserts": [
   {"name": "file/k", "version": 20, "body": {"path": "k.txt", "content": "wrong base\n"}}]}}
 ], [
 {"event": "heartbeat", "data": {"version": 10, "time": 1, "interval": 1}},
 {"keepalive_ms": 300}
]]}
EOF
jq -e . "$WORK/sx.json" >/dev/null || bail "the script sx.json is not JSON"
start_tool sx sse-server.mjs --script "$WORK/sx.json" --acks "$WORK/sx.acks" --requests "$WORK/sx.requests"
start_agent sx --plane "http://127.0.0.1:$TOOL_PORT" --backoff-min 0.1 --backoff-max 0.5
SX_PID=$AGENT_PID
check "the agent plays the script and reconnects once" wait_until 15 count_ge 2 '"/v1/stream"' "$WORK/sx.requests"
check "it answered every push with a nonce it could read (7)" wait_until 10 count_ge 7 '"nonce"' "$WORK/sx.acks"
diag "$(cat "$WORK/sx.acks")"

check_eq "a snapshot listing a route before its cluster and listener is ACKed" "ack 1 " "$(ack_of "$WORK/sx.acks" s.1)"
check_eq "a dangling reference is NACKed with the exact reason" "nack 2 route/z: unknown cluster 'z'" \
	"$(ack_of "$WORK/sx.acks" s.2)"
check "a '../escape' path is NACKed, naming the resource" grep -q '^nack 3 file/esc' <<<"$(ack_of "$WORK/sx.acks" s.3)"
check "an absolute path is NACKed, naming the resource" grep -q '^nack 4 file/abs' <<<"$(ack_of "$WORK/sx.acks" s.4)"
check "a path through a planted symlink is NACKed" grep -q '^nack 5 .*sub' <<<"$(ack_of "$WORK/sx.acks" s.5)"
check_eq "malformed JSON, duplicate keys and 200-deep nesting are never ACKed" "" \
	"$(jq -r 'select(.nonce == "s.6" or .nonce == "s.7" or .nonce == "s.8" or .nonce == "s.8b" or .nonce == "s.9") | select(.status == "ack") | .nonce' "$WORK/sx.acks")"
check "malformed JSON is refused as such" grep -q 'refused: push: malformed JSON' "$WORK/sx.log"
check "a duplicate key in a body is refused as such" grep -q "refused: push: duplicate key 'path'" "$WORK/sx.log"
check "a duplicate key at the top is refused as such" grep -q "refused: push: duplicate key 'nonce'" "$WORK/sx.log"
check "200-deep nesting is refused as such" grep -q 'refused: push: JSON nesting deeper than' "$WORK/sx.log"
check_eq "removing a cluster before its route in one push is ACKed" "ack 10 " "$(ack_of "$WORK/sx.acks" s.10)"
check "a push older than the node's version is NACKed" grep -q '^nack 5 .*older' <<<"$(ack_of "$WORK/sx.acks" s.11)"
check_eq "a delta on a base that is not the node's version is not ACKed" "" "$(ack_of "$WORK/sx.acks" s.12 | grep '^ack')"
check_eq "the agent reconnected with its own applied version (10)" 10 \
	"$(jq -r 'select(.path == "/v1/stream" and .n == 2) | .query.version' "$WORK/sx.requests")"
check "it logged why it resynced" grep -q "push 20 applies on version 15, not on ours (10): resyncing" "$WORK/sx.log"
check_eq "the agent is at version 10" 10 "$(st sx version)"
check "the agent keeps running" kill -0 "$SX_PID"
check_eq "its output is exactly version 10 (the symlink it did not make aside)" "./f.txt ./h.txt ./sub" "$(files_of "$WORK/sx.out")"
check_eq "f.txt is the applied one, not the older push's" one "$(cat "$WORK/sx.out/f.txt" 2>/dev/null)"
check_eq "h.txt has its mode" 600 "$(stat -c %a "$WORK/sx.out/h.txt" 2>/dev/null)"
check "nothing escaped to ../escape" test ! -e "$WORK/escape"
check "nothing was written at the absolute path" test ! -e "$WORK/abs-target"
check_eq "nothing was written through the symlink" "" "$(ls -A "$WORK/elsewhere")"
check_eq "the symlink itself is untouched" "$WORK/elsewhere" "$(readlink "$WORK/sx.out/sub")"
check "nothing was written at ../dup" test ! -e "$WORK/dup"
check_eq "no stray temp files in the output" "" "$(cd "$WORK/sx.out" && find . -name '.tether-tmp*' | grep -v '^./.tether-work/' | xargs)"

# still serving: one more push on a fresh stream applies
# then a snapshot that leaves file/h out and repeats the rest unchanged:
# the missing one is removed, the unchanged ones are not rewritten
cat >"$WORK/sx.json" <<'EOF'
{"streams": [], "then": [
 {"event": "push", "id": "11", "data": {"version": 11, "base": 10, "nonce": "s.13", "removed": [], "upserts": [
   {"name": "file/f", "version": 11, "body": {"path": "f.txt", "content": "still serving\n"}}]}},
 {"event": "push", "id": "12", "wait_acks": 1, "data": {"version": 12, "base": 0, "full": true, "nonce": "s.14", "removed": [], "upserts": [
   {"name": "listener/l", "version": 12, "body": {"port": 8080, "address": "127.0.0.1"}},
   {"name": "file/f", "version": 12, "body": {"content": "still serving\n", "path": "f.txt"}}]}},
 {"keepalive_ms": 300}
]}
EOF
stop_pid "$TOOL_PID" TERM   # ends the stream: the agent reconnects
start_tool sx2 sse-server.mjs --listen "127.0.0.1:$(awk '/^listening /{print $2; exit}' "$WORK/sx.port")" \
	--script "$WORK/sx.json" --acks "$WORK/sx.acks" --requests "$WORK/sx.requests"
check "after all that the agent still applies a good push" wait_until 15 count_ge 1 '"s.13"' "$WORK/sx.acks"
check_eq "with its content" "still serving" "$(cat "$WORK/sx.out/f.txt" 2>/dev/null)"
check_eq "and ACKs it" "ack 11 " "$(ack_of "$WORK/sx.acks" s.13)"
F_BEFORE=$(ident "$WORK/sx.out/f.txt")
check "a snapshot that leaves a resource out applies" wait_until 10 agent_at sx 12
check_eq "and is ACKed" "ack 12 " "$(ack_of "$WORK/sx.acks" s.14)"
check_eq "the resource it left out is removed (a deletion is a change too)" "./f.txt ./sub" "$(files_of "$WORK/sx.out")"
check_eq "the unchanged file is not rewritten" "$F_BEFORE" "$(ident "$WORK/sx.out/f.txt")"
check "the snapshot counted one change (the removal)" grep -q "applied version 12 (snapshot, 1 changes" "$WORK/sx.log"
stop_pid "$SX_PID" TERM
check_eq "the agent exits 0" 0 "$?"

check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
