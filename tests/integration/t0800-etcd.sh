#!/usr/bin/env bash
# t0800-etcd.sh: --store etcd against a real three-member etcd cluster
# (Debian's etcd-server): two plane replicas over one etcd; a write on
# either reaches the other and the nodes on it; identical content makes no
# version, a delete makes one; two replicas writing at once both land,
# nothing lost, versions one after another; a replica whose connection to
# etcd goes silent (a black hole) notices, resumes from its last revision
# and gets what was written meanwhile; a compaction while it was cut off
# reloads only the changed bodies and the deletions; the kill -9 of an
# etcd member goes unnoticed by writers and streams; a bad --etcd is
# refused at start.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
need_cmd jq curl node

etcd_cluster_start 3
check "a three-member etcd cluster is healthy" etcd_healthy 1
PREFIX=/t0800-$$/
# one tombstone kept: a second delete drops the first (its key goes)
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "$PREFIX" --heartbeat 1 --tombstone-keep 1)

start_plane a "${E[@]}"
A_URL=$PLANE_URL A_PID=$PLANE_PID A_LOG=$PLANE_LOG A_PORT=$PLANE_PORT
start_plane b "${E[@]}"
B_URL=$PLANE_URL B_PID=$PLANE_PID B_LOG=$PLANE_LOG

# on URL CMD...: run a lib.sh helper against another replica
on() { local PLANE_URL=$1; shift; "$@"; }
version_on() { curl -fsS "$1/v1/resources" | jq -r '.version'; }
body_on() { curl -fsS "$1/v1/resources/$2" 2>/dev/null | jq -c '.body // .'; }

check_eq "a fresh store is at version 0 on a" 0 "$(version_on "$A_URL")"
on "$A_URL" put file/one '{"path":"one.txt","content":"1\n"}' >/dev/null
check_eq "a write on a makes version 1" 1 "$(version_on "$A_URL")"
check "... and reaches b" wait_until 10 sh -c "[ \"\$(curl -fsS '$B_URL/v1/resources' | jq -r .version)\" = 1 ]"
check_eq "b serves the body written on a" '{"content":"1\n","path":"one.txt"}' "$(body_on "$B_URL" file/one)"
check "b's log says the version came from another replica" grep -q 'version 1 from another replica' "$B_LOG"

# a node on b gets what is written on a
start_agent n1 --plane "$B_URL" --consumer files
check "an agent on b syncs to version 1" wait_until 10 agent_at n1 1
on "$A_URL" put file/two '{"path":"two.txt","content":"2\n"}' >/dev/null
check "a write on a reaches the node on b" wait_until 10 agent_at n1 2
check_eq "... with its content" "2" "$(cat "$WORK/n1.out/two.txt" 2>/dev/null)"

# one fleet view: the node on b is in a's /v1/nodes, with its ACK
node_on() { curl -fsS "$1/v1/nodes" | jq -r --arg n "$2" ".[] | select(.node == \$n) | .$3"; }
check "a's /v1/nodes shows the node that is on b, ACKed at 2" wait_until 10 sh -c "[ \"\$(curl -fsS '$A_URL/v1/nodes' | jq -r '.[] | select(.node == \"n1\") | .acked_version')\" = 2 ]"

# a token made on a admits on b; revoked on a, its stream on b closes
tok=$(PLANE_URL=$A_URL ctl token create --node tk) || bail "cannot make a token on a"
tid=$(echo "$tok" | cut -d_ -f2)
check "the token's record reaches b" wait_until 10 sh -c "curl -fsS '$B_URL/v1/tokens' | jq -e --arg i '$tid' 'map(select(.id == \$i)) | length == 1' >/dev/null"
curl -sN -H "Authorization: Bearer $tok" "$B_URL/v1/stream?node=tk&version=0" >"$WORK/tk.stream" 2>/dev/null &
TK=$!
track_pid "$TK"
check "a stream on b opened with it" wait_until 10 grep -q 'event:' "$WORK/tk.stream"
PLANE_URL=$A_URL ctl token revoke "$tid" >/dev/null
check "revoked on a, its stream on b is closed" wait_until 10 sh -c "! kill -0 $TK 2>/dev/null"
check "... and b says why" wait_until 5 grep -q "token $tid revoked on another replica" "$B_LOG"

# identical content: no version; a delete: one
out=$(on "$B_URL" put file/two '{"path":"two.txt","content":"2\n"}')
check_eq "the same body again (on b) makes no version" '{"version":2,"changed":false}' "$out"
on "$B_URL" api DELETE /v1/resources/file/one >/dev/null
check_eq "a delete on b makes version 3" 3 "$(version_on "$B_URL")"
check "... and a sees the tombstone" wait_until 10 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' '$A_URL/v1/resources/file/one')\" = 404 ]"
check "the node removes the file" wait_until 10 sh -c "[ ! -e '$WORK/n1.out/one.txt' ]"

# ---- two replicas write at once ---------------------------------------------------------
: >"$WORK/answers"
for i in $(seq 1 20); do
	curl -sS -X PUT -d "{\"path\":\"a$i.txt\",\"content\":\"a\"}" "$A_URL/v1/resources/file/a$i" >>"$WORK/answers" &
	curl -sS -X PUT -d "{\"path\":\"b$i.txt\",\"content\":\"b\"}" "$B_URL/v1/resources/file/b$i" >>"$WORK/answers" &
done
wait_jobs() { local j; for j in $(jobs -p); do case " ${T_PIDS:-} " in *" $j "*) ;; *) wait "$j" ;; esac; done; }
sleep 0.1
wait_until 30 sh -c "[ \$(grep -o '\"version\"' '$WORK/answers' | wc -l) -ge 40 ]"
check_eq "40 concurrent writes on two replicas: 40 answers with a version" 40 "$(grep -o '"version":[0-9]*,"changed":true' "$WORK/answers" | wc -l)"
check_eq "... each a different version" 40 "$(grep -o '"version":[0-9]*' "$WORK/answers" | sort -u | wc -l)"
check_eq "... versions 4 to 43" "4 43" "$(grep -o '"version":[0-9]*' "$WORK/answers" | cut -d: -f2 | sort -n | sed -n '1p;$p' | tr '\n' ' ' | sed 's/ $//')"
check "both replicas reach version 43" wait_until 10 sh -c "[ \"\$(curl -fsS '$A_URL/v1/resources' | jq -r .version)\" = 43 ] && [ \"\$(curl -fsS '$B_URL/v1/resources' | jq -r .version)\" = 43 ]"
check_eq "... with the same resources" "$(curl -fsS "$A_URL/v1/resources" | jq -c '[.resources[].name] | sort')" \
	"$(curl -fsS "$B_URL/v1/resources" | jq -c '[.resources[].name] | sort')"
check "the node reaches version 43" wait_until 15 agent_at n1 43

# ---- a black hole between b and etcd, and a compaction meanwhile -------------------------
stop_pid "$B_PID"
start_tool bh blackhole-proxy.mjs --target "127.0.0.1:${ETCD_CLIENT[1]}" --mode forward
BH_PID=$TOOL_PID
start_plane b2 --store etcd --etcd "http://127.0.0.1:$TOOL_PORT" --etcd-prefix "$PREFIX" --heartbeat 1 --tombstone-keep 1
B_URL=$PLANE_URL B_PID=$PLANE_PID B_LOG=$PLANE_LOG
check_eq "b, restarted through a proxy to etcd, loads version 43" 43 "$(version_on "$B_URL")"
start_agent n2 --plane "$B_URL" --consumer files
check "a node on b syncs" wait_until 10 agent_at n2 43
kill -STOP "$BH_PID"   # every byte between b and etcd stops: no FIN, no RST
on "$A_URL" put file/c1 '{"path":"c1.txt","content":"c1\n"}' >/dev/null
on "$A_URL" put file/c2 '{"path":"c2.txt","content":"c2\n"}' >/dev/null
on "$A_URL" put file/a1 '{"path":"a1.txt","content":"changed\n"}' >/dev/null
on "$A_URL" api DELETE /v1/resources/file/a2 >/dev/null
check_eq "a writes on while b is cut off (version 47)" 47 "$(version_on "$A_URL")"
rev=$(etcd_revision 1)
etcdv3 1 /v3/kv/compaction "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
check "etcd compacted up to revision $rev" grep -q . <(etcdv3 1 /v3/kv/range "{\"key\":\"$(printf x | base64)\",\"revision\":\"$((rev - 1))\"}" | grep -i compacted)
check "b notices it cannot reach etcd" wait_until 15 grep -q 'etcd: unreachable\|etcd watch:' "$B_LOG"
check_eq "b still serves what it has meanwhile (version 43)" 43 "$(version_on "$B_URL")"
check_eq "... and its node stays at 43, connected" 43 "$(st n2 version)"
kill -CONT "$BH_PID"
check "b reloads after the compaction" wait_until 20 grep -q 'compaction reload at revision' "$B_LOG"
line=$(grep 'compaction reload at revision' "$B_LOG" | tail -n 1)
diag "$line"
check "... fetching only the 4 bodies that changed (c1, c2, a1, a2's tombstone)" sh -c "echo '$line' | grep -q ', 4 bodies fetched, '"
check "... and finding the tombstone dropped meanwhile (file/one's)" sh -c "echo '$line' | grep -q ', 1 deleted'"
check_eq "... so its horizon moved to the version it reloaded at" 47 "$(curl -fsS "$B_URL/metrics" | awk '$1 == "tether_tombstone_horizon" {print $2}')"
check "b reaches version 47" wait_until 10 sh -c "[ \"\$(curl -fsS '$B_URL/v1/resources' | jq -r .version)\" = 47 ]"
check "the node on b gets the writes made while b was cut off" wait_until 15 agent_at n2 47
check_eq "... a1's new content" "changed" "$(cat "$WORK/n2.out/a1.txt" 2>/dev/null)"
check "... and a2 is gone" test ! -e "$WORK/n2.out/a2.txt"

# ---- kill -9 of an etcd member ---------------------------------------------------------------
kill -KILL "${ETCD_PID[1]}"
untrack_pid "${ETCD_PID[1]}"
on "$A_URL" put file/after '{"path":"after.txt","content":"x\n"}' >/dev/null
check_eq "with member 1 dead, a write on a still lands (version 48)" 48 "$(version_on "$A_URL")"
etcd_member_start 1 existing
check "member 1 comes back" wait_until 30 etcd_healthy 1
check "b (through member 1's proxy) catches up to 48" wait_until 20 sh -c "[ \"\$(curl -fsS '$B_URL/v1/resources' | jq -r .version)\" = 48 ]"
check "the node on b reaches 48" wait_until 15 agent_at n2 48

# ---- quorum lost, and back -------------------------------------------------------------------
kill -KILL "${ETCD_PID[2]}" "${ETCD_PID[3]}"
untrack_pid "${ETCD_PID[2]}"
untrack_pid "${ETCD_PID[3]}"
code=$(curl -s -o "$WORK/noquorum.json" -w '%{http_code}' -m 60 -X PUT -d '{"path":"q.txt","content":"q"}' \
	"$A_URL/v1/resources/file/q")
check_eq "without quorum a write gets 503" 503 "$code"
check "... saying the store is read-only" grep -q "read-only" "$WORK/noquorum.json"
check_eq "... and nothing was stored" 48 "$(version_on "$A_URL")"
check "a replica's heartbeats say read-only" wait_until 20 sh -c "curl -sN -m 4 '$B_URL/v1/stream?node=probe&version=48' | grep -q '\"read_only\":true'"
check "/metrics says the store takes no writes" wait_until 10 sh -c "curl -fsS '$A_URL/metrics' | grep -q '^tether_store_writable 0'"
check_eq "the node on b still holds 48" 48 "$(st n2 version)"
etcd_member_start 2 existing
etcd_member_start 3 existing
check "quorum comes back" wait_until 30 etcd_healthy 2
check "writes resume" wait_until 30 sh -c "curl -fsS -m 10 -X PUT -d '{\"path\":\"q.txt\",\"content\":\"q\"}' '$A_URL/v1/resources/file/q' | grep -q '\"version\":49'"
check "the node on b gets version 49" wait_until 20 agent_at n2 49

# ---- bad flags ---------------------------------------------------------------------------------
"$PLANE_BIN" --store etcd --insecure --listen 127.0.0.1:0 --data "$WORK/x" >"$WORK/x.log" 2>&1
check_eq "--store etcd without --etcd exits 2" 2 "$?"
"$PLANE_BIN" --etcd "$ETCD_ENDPOINTS" --insecure --listen 127.0.0.1:0 --data "$WORK/x" >"$WORK/x.log" 2>&1
check_eq "--etcd without --store etcd exits 2" 2 "$?"
"$PLANE_BIN" --store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix nope --insecure --listen 127.0.0.1:0 --data "$WORK/x" >"$WORK/x.log" 2>&1
check_eq "--etcd-prefix without a trailing / exits 2" 2 "$?"
"$PLANE_BIN" --store etcd --etcd "$ETCD_ENDPOINTS" --lease-ttl 1 --insecure --listen 127.0.0.1:0 --data "$WORK/x" >"$WORK/x.log" 2>&1
check_eq "a --lease-ttl below 2 s exits 2" 2 "$?"
check "... naming the flag" grep -q "lease-ttl" "$WORK/x.log"
timeout 20 "$PLANE_BIN" --store etcd --etcd http://127.0.0.1:9 --insecure --listen 127.0.0.1:0 --data "$WORK/x" >"$WORK/x.log" 2>&1
check_eq "an etcd nobody answers at exits 1 at start" 1 "$?"
check "... saying so" grep -q "etcd unavailable" "$WORK/x.log"

done_testing
