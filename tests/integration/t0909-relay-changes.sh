#!/usr/bin/env bash
# t0909-relay-changes.sh: what relays send up (POST /v1/relay/changes, one
# line a change). A relay r1 with agents n1 and n2 below it: the origin
# lists both behind r1 with what they ACKed, and a sent version it derives
# itself (the version r1 holds), never a nonce r1 made. Then batches a
# broken or lying relay could send, each refused whole with its line and
# field named (truncated, an unknown field, an unknown kind, too many
# changes, a body over the route's cap), and nothing of them taken; a
# strict node's NACK comes up and the origin flags it lagging; a
# relay speaking for a node behind another relay is refused that change
# alone; the JSON records of relays before the changes are still taken
# at POST /v1/relay/nodes (from the relay holding its stream; 403 else).
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

put_file() {
	curl -sS -X PUT --data-binary "{\"path\":\"$1.txt\",\"content\":\"$2\\n\"}" "$ORIGIN/v1/resources/file/$1" |
		jq -r .version
}
# post BODY-FILE: POST /v1/relay/changes; prints the status, the answer in $WORK/answer
post() {
	curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST -H 'Content-Type: text/plain' \
		--data-binary "@$1" "$ORIGIN/v1/relay/changes"
}
answer_has() {
	grep -qF -- "$1" "$WORK/answer"
}
nodes_count() {
	curl -sS "$ORIGIN/v1/nodes" | jq length
}
origin_field() {
	curl -sS "$ORIGIN/v1/nodes/$1" | jq -r "$2"
}
origin_acked() {
	[ "$(origin_field "$1" .acked_version)" = "$2" ]
}

# --allow-unknown-fields: cluster/web's newfield (V4) reaches a strict node through r1
start_plane origin --heartbeat 1 --lag-alert 1 --allow-unknown-fields
ORIGIN=$PLANE_URL
V1=$(put_file a a1)
start_plane r1 --upstream "$ORIGIN" --relay-id r1 --heartbeat 1
R1=$PLANE_URL
R1_LOG=$PLANE_LOG
PLANE_URL=$R1
start_agent n1 --backoff-max 1 --stream-timeout 3
start_agent n2 --backoff-max 1 --stream-timeout 3
start_agent s3 --strict --backoff-max 1 --stream-timeout 3
check "n1, n2 and s3 run version $V1 through r1" wait_until 15 all_at "$V1" n1 n2 s3
V2=$(put_file b b1)
check "n1 and n2 run version $V2" wait_until 15 all_at "$V2" n1 n2
PLANE_URL=$ORIGIN
check "the origin has n1's ACK of version $V2 through r1" wait_until 10 origin_acked n1 "$V2"
check "... and n2's" wait_until 10 origin_acked n2 "$V2"
check_eq "the origin lists n1 behind r1, connected" "r1 true" "$(origin_field n1 '"\(.via | join(",")) \(.connected)"')"
check_eq "its sent version is what it ACKed (derived at the origin), its nonce not the relay's" "$V2 " \
	"$(origin_field n1 '"\(.sent_version) \(.sent_nonce)"')"
check "r1 keeps the nonce it sent n1" test -n "$(curl -sS "$R1/v1/nodes/n1" | jq -r .sent_nonce)"
check "r1 posts changes, and nothing was refused" sh -c "! grep -q 'refused' '$R1_LOG'"
acks_before=$(origin_field n1 .acks)
count=$(nodes_count)

# ---- broken batches: refused whole, naming the line and the field -----------------------
printf 'tether-changes 1 rX 5\nc ghost 1 sse 1 - - {}\na ghost 5 1 1\n' >"$WORK/truncated"
check_eq "a truncated batch is refused (400)" 400 "$(post "$WORK/truncated")"
check "... saying so" answer_has "truncated (no 'end' line)"
printf 'tether-changes 1 rX 5\nc ghost 1 sse 1 - - {}\na ghost 5 1 1 extra\nend 2\n' >"$WORK/unknown-field"
check_eq "a line with an unknown field is refused (400)" 400 "$(post "$WORK/unknown-field")"
check "... naming the line, the node and the field" answer_has "line 3 ('a' ghost): acks: an unknown field follows it"
printf 'tether-changes 1 rX 5\nc ghost 1 sse 1 - - {}\nq ghost 5\nend 2\n' >"$WORK/unknown-kind"
check_eq "a line of an unknown kind is refused (400)" 400 "$(post "$WORK/unknown-kind")"
check "... naming it" answer_has "line 3: kind: unknown"
printf 'tether-changes 1 rX 5\nc ghost 1 sse 1 - - {"a":1}\nend 1\n' >"$WORK/bad-labels"
check_eq "labels that are not strings are refused (400)" 400 "$(post "$WORK/bad-labels")"
check "... naming the field" answer_has "labels: must be a JSON object of"
printf 'tether-changes 1 rX 5\nend 2\n' >"$WORK/lying-count"
check_eq "an end line that miscounts is refused (400)" 400 "$(post "$WORK/lying-count")"
check "... saying what it says and what it holds" answer_has "says 2 changes, the batch holds 0"
{
	echo "tether-changes 1 rX 5"
	seq 1 100001 | sed 's/.*/s ghost 1/'
	echo "end 100001"
} >"$WORK/too-many"
check_eq "a batch of more than 100,000 changes is refused (413)" 413 "$(post "$WORK/too-many")"
check "... saying the limit" answer_has "more than 100000 changes"
head -c $((17 << 20)) /dev/zero | tr '\0' 'x' >"$WORK/huge"
check_eq "a body over 16 MiB is refused on its headers (413)" 413 "$(post "$WORK/huge")"
check_eq "none of them placed a node" "$count" "$(nodes_count)"
check_eq "... and the origin still answers" 200 "$(curl -sS -o /dev/null -w '%{http_code}' "$ORIGIN/healthz")"

# ---- a lying relay: it speaks only for the nodes behind it ----------------------------------
printf 'tether-changes 1 r9 99\nend 0\n' >"$WORK/no-stream"
check_eq "a batch naming a relay that holds no stream here is refused (403)" 403 "$(post "$WORK/no-stream")"
check "... saying so" answer_has "relay r9 holds no stream here"
curl -sSN "$ORIGIN/v1/relay/stream?relay=rX" >/dev/null 2>&1 &
track_pid $!
check "rX follows the origin" wait_until 10 grep -q "relay rX: following" "$WORK/origin.log"
printf 'tether-changes 1 rX 99\na n1 99 0 500\nc n2 0 sse 1 - - {}\nn n1 99 0 1 k "forged"\nend 3\n' >"$WORK/lying"
check_eq "a batch about r1's nodes from rX is answered (200)" 200 "$(post "$WORK/lying")"
check_eq "... every change refused, none taken" "0 3" "$(jq -r '"\(.taken) \(.refused)"' "$WORK/answer")"
check "... the first refusal naming the node and its relay" \
	answer_has "node 'n1' is behind relay r1, not behind relay rX"
check_eq "n1's record is untouched (ACKed version, ACKs, no NACK)" "$V2 $acks_before null" \
	"$(origin_field n1 '"\(.acked_version) \(.acks) \(.last_nack)"')"
check_eq "n2 is still behind r1, connected" "r1 true" "$(origin_field n2 '"\(.via | join(",")) \(.connected)"')"
check "the origin logs the refusal with its count" grep -q "relay rX: 3 of 3 node changes refused" \
	"$WORK/origin.log"
check_eq "... and names the refused nodes, once each (the sender sends them again later)" '["n1","n2"] false' \
	"$(jq -c -r '"\(.refused_nodes) \(.refused_nodes_more)"' "$WORK/answer")"

# ---- the nodes keep ACKing through r1 --------------------------------------------------------
V3=$(put_file c c1)
check "a new version reaches the origin's record of n1 through r1" wait_until 15 origin_acked n1 "$V3"
check "... and of n2" wait_until 10 origin_acked n2 "$V3"

# ---- a NACK and a lag alert through r1 -----------------------------------------------------
V4=$(curl -sS -X PUT --data-binary '{"endpoints":[{"address":"127.0.0.1","port":9002}],"newfield":1}' \
	"$ORIGIN/v1/resources/cluster/web" | jq -r .version)
check "n1 applies version $V4 (an unknown field) and the origin has its ACK" wait_until 15 origin_acked n1 "$V4"
check "the strict s3 NACKs it, and the origin has the NACK through r1" wait_until 15 sh -c \
	"curl -sS '$ORIGIN/v1/nodes/s3' | jq -e '.last_nack.version == $V4 and (.last_nack.error | length > 0)'"
check "after --lag-alert (1 s) the origin flags s3 lagging" wait_until 10 sh -c \
	"curl -sS '$ORIGIN/v1/nodes/s3' | jq -e '.lagging and .target_version == $V4 and .acked_version < $V4'"
check_eq "... and not n1" "false 0" "$(origin_field n1 '"\(.lagging) \(.lag)"')"
check_eq "the origin's metrics count one node lagging" 1 \
	"$(curl -sS "$ORIGIN/metrics" | awk '$1 == "tether_nodes_lagging" {print $2}')"

# ---- nodes that do not answer: the version r1 holds goes up all the same ------------------
kill -STOP "${APID[n1]}" "${APID[n2]}" "${APID[s3]}"
V5=$(put_file d d1)
sent_is() {
	[ "$(origin_field "$1" .sent_version)" = "$2" ]
}
check "with no node answering, the origin's sent version of n1 reaches $V5 (a batch of no changes)" \
	wait_until 10 sent_is n1 "$V5"
check_eq "... its ACKed version still older" true "$(origin_field n1 ".acked_version < $V5")"
kill -CONT "${APID[n1]}" "${APID[n2]}" "${APID[s3]}"

# ---- an older relay's JSON records are still taken --------------------------------------------
# (from the relay that holds relay "old"'s stream: the records are its word)
code=$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST \
	--data-binary '{"relay":"old","nodes":[{"id":"o1","labels":"{}","transport":"sse","streaming":true}]}' \
	"$ORIGIN/v1/relay/nodes")
check_eq "POST /v1/relay/nodes from a relay that holds no stream here: 403" 403 "$code"
curl -sSN "$ORIGIN/v1/relay/stream?relay=old&version=0" >"$WORK/old.sse" 2>/dev/null &
track_pid $!
wait_until 10 grep -q '^event:' "$WORK/old.sse" || bail "relay old's stream did not open"
check_eq "POST /v1/relay/nodes (JSON records) still answers 200" 200 \
	"$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST \
		--data-binary '{"relay":"old","nodes":[{"id":"o1","labels":"{}","transport":"sse","streaming":true}]}' \
		"$ORIGIN/v1/relay/nodes")"
check_eq "... taking the record" 1 "$(jq -r .taken "$WORK/answer")"
check_eq "... o1 listed behind the old relay" "old" "$(origin_field o1 '.via | join(",")')"

done_testing
