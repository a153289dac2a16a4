#!/usr/bin/env bash
# t0160-plane-ack.sh: nonce-matched ACK/NACK records over a real SSE stream
# and the poll endpoint: acked version and lag in /v1/nodes, stale nonces
# counted and ignored, a version that does not match its nonce is 409, NACK
# records (version, nonce, error, time), unknown nodes, labels from the
# stream, a reconnect closing the older stream, self-describing poll nonces,
# and the ACK metrics.
. "$(dirname "$0")/lib.sh"

# exited PID: the process is gone (or a zombie waiting to be reaped).
exited() {
	! kill -0 "$1" 2>/dev/null || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

# push_data FILE N: the data of the N-th push event in an SSE capture.
push_data() {
	awk -v n="$2" '/^event: push/ {p = 1; next} p && /^data: / {c++; if (c == n) {sub(/^data: /, ""); print}; p = 0}' "$1"
}

# has_pushes FILE N: the capture holds at least N push events.
has_pushes() {
	[ "$(grep -c '^event: push' "$1" 2>/dev/null)" -ge "$2" ] && [ -n "$(push_data "$1" "$2")" ]
}

# ack NODE VERSION NONCE [STATUS [ERROR]]: prints the result, or the status
# code and error when the answer is not 200.
ack() {
	local body out code
	body=$(jq -cn --arg n "$1" --argjson v "$2" --arg o "$3" --arg s "${4:-ack}" --arg e "${5:-}" \
		'{node: $n, version: $v, nonce: $o, status: $s} + (if $e == "" then {} else {error: $e} end)')
	out=$(curl -sS -X POST -w '\n%{http_code}' --data-binary "$body" "$PLANE_URL/v1/ack")
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	if [ "$code" = 200 ]; then
		echo "$out" | jq -r .result
	else
		echo "$code $(echo "$out" | jq -r .error)"
	fi
}

# nodef ID FILTER: a jq filter over the node's record in /v1/nodes.
nodef() {
	curl -sS "$PLANE_URL/v1/nodes" | jq -r --arg n "$1" ".[] | select(.node == \$n) | $2"
}

start_plane p

put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9001}]}' >/dev/null

# ---- a stream, its push, its ACK -----------------------------------------------------------------

curl -sSN "$PLANE_URL/v1/stream?node=n1&version=0&labels=region%3Deu%2Ctier%3Dweb" >"$WORK/s1.sse" 2>"$WORK/s1.err" &
S1=$!
track_pid "$S1"
wait_until 10 has_pushes "$WORK/s1.sse" 1 || bail "no push on the first stream"
d1=$(push_data "$WORK/s1.sse" 1)
n1=$(echo "$d1" | jq -r .nonce)
check_eq "the first push is the snapshot of version 1" "1 true" "$(echo "$d1" | jq -r '"\(.version) \(.full)"')"
check "the push carries a nonce" test -n "$n1" -a "$n1" != null
check_eq "before any ACK the node lags by 1" "0 1 true" "$(nodef n1 '"\(.acked_version) \(.lag) \(.connected)"')"
check_eq "the stream's labels show in /v1/nodes" '{"region":"eu","tier":"web"}' "$(nodef n1 '.labels | tojson')"
check_eq "the ACK of the push is accepted" accepted "$(ack n1 1 "$n1")"
check_eq "/v1/nodes shows acked_version 1 and lag 0" "1 0 1" "$(nodef n1 '"\(.acked_version) \(.lag) \(.acks)"')"

# ---- a write: lag 1 until the new push is acked; stale and mismatched ACKs ----------------------------------

put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9002}]}' >/dev/null
check_eq "a write moves the lag to 1" "1 1" "$(nodef n1 '"\(.acked_version) \(.lag)"')"
wait_until 10 has_pushes "$WORK/s1.sse" 2 || bail "no second push"
d2=$(push_data "$WORK/s1.sse" 2)
n2=$(echo "$d2" | jq -r .nonce)
check_eq "the second push is a delta 1 -> 2" "2 1 false" "$(echo "$d2" | jq -r '"\(.version) \(.base) \(.full)"')"
check "the second push has a new nonce" test "$n2" != "$n1"
check_eq "the lag stays 1 while the push is not acked" "1 1" "$(nodef n1 '"\(.acked_version) \(.lag)"')"
check_eq "an ACK with the older nonce is stale" stale "$(ack n1 1 "$n1")"
check_eq "a stale ACK moves nothing and is counted" "1 1 1" "$(nodef n1 '"\(.acked_version) \(.lag) \(.stale_acks)"')"
check_eq "an ACK with an unknown nonce is stale" stale "$(ack n1 2 "made-up-nonce")"
check_eq "the latest nonce with another version is 409" "409" "$(ack n1 1 "$n2" | cut -d' ' -f1)"
check_eq "the 409 says why" "ack: version 1 is not the version of push '$n2'" "$(ack n1 1 "$n2" | cut -d' ' -f2-)"
check_eq "the latest nonce with a version ahead of it is 409" "409" "$(ack n1 3 "$n2" | cut -d' ' -f1)"
check_eq "a mismatch moves nothing" "1 1 2" "$(nodef n1 '"\(.acked_version) \(.lag) \(.stale_acks)"')"
check_eq "the ACK of the second push is accepted" accepted "$(ack n1 2 "$n2")"
check_eq "the lag is back to 0" "2 0 2" "$(nodef n1 '"\(.acked_version) \(.lag) \(.acks)"')"
check_eq "acking the same push again is accepted and keeps the version" accepted "$(ack n1 2 "$n2")"
check_eq "a repeated ACK never moves the version back or forward" "2 0" "$(nodef n1 '"\(.acked_version) \(.lag)"')"

# ---- NACK ----------------------------------------------------------------------------------------------------

put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9003}]}' >/dev/null
wait_until 10 has_pushes "$WORK/s1.sse" 3 || bail "no third push"
n3=$(push_data "$WORK/s1.sse" 3 | jq -r .nonce)
t0=$(date +%s)
check_eq "a NACK with an error is accepted" accepted "$(ack n1 3 "$n3" nack 'nginx -t: "upstream" directive is not allowed here')"
t1=$(date +%s)
rec=$(curl -sS "$PLANE_URL/v1/nodes" | jq -c '.[] | select(.node == "n1")')
check_eq "/v1/nodes shows the last NACK's version, nonce and error" \
	"3|$n3|nginx -t: \"upstream\" directive is not allowed here" \
	"$(echo "$rec" | jq -r '"\(.last_nack.version)|\(.last_nack.nonce)|\(.last_nack.error)"')"
nt=$(echo "$rec" | jq -r .last_nack.time)
check "the NACK's time is now ($nt)" test "$nt" -ge "$t0" -a "$nt" -le "$t1"
check_eq "a NACK does not move the acked version" "2 1 1" "$(echo "$rec" | jq -r '"\(.acked_version) \(.lag) \(.nacks)"')"
# behind_seconds counts the time, so it may tick between the two reads
check_eq "/v1/nodes/n1 shows the same record" "$(echo "$rec" | jq -cS 'del(.behind_seconds)')" \
	"$(curl -sS "$PLANE_URL/v1/nodes/n1" | jq -cS 'del(.behind_seconds)')"
check_eq "a NACK without an error is 422" "422 ack: a nack needs an error saying why" "$(ack n1 3 "$n3" nack)"
check_eq "a NACK with an empty error is 422" 422 "$(curl -sS -o /dev/null -w '%{http_code}' -X POST \
	--data-binary "{\"node\":\"n1\",\"version\":3,\"nonce\":\"$n3\",\"status\":\"nack\",\"error\":\"\"}" "$PLANE_URL/v1/ack")"
check_eq "an ACK from an unknown node is 404" "404 ack: no node 'ghost' (connect before acking)" "$(ack ghost 3 "$n3")"
check_eq "a stale NACK is stale and leaves the last NACK alone" "stale 3 $n3" \
	"$(ack n1 2 "$n2" nack 'late' ) $(nodef n1 '"\(.last_nack.version) \(.last_nack.nonce)"')"
check_eq "healthy:false on an ACK shows in /v1/nodes" "accepted false 3" \
	"$(curl -sS -X POST --data-binary "{\"node\":\"n1\",\"version\":3,\"nonce\":\"$n3\",\"status\":\"ack\",\"healthy\":false}" \
		"$PLANE_URL/v1/ack" | jq -r .result) $(nodef n1 '"\(.healthy) \(.acked_version)"')"

# ---- reconnect: the older stream is closed ------------------------------------------------------------------

curl -sSN "$PLANE_URL/v1/stream?node=n1&version=2" >"$WORK/s2.sse" 2>"$WORK/s2.err" &
S2=$!
track_pid "$S2"
wait_until 10 has_pushes "$WORK/s2.sse" 1 || bail "no push on the second stream"
check "the first stream is closed when the node reconnects" wait_until 10 exited "$S1"
wait "$S1"
s1rc=$?
untrack_pid "$S1"
check_eq "the first stream ended cleanly (curl exit 0)" 0 "$s1rc"
n4=$(push_data "$WORK/s2.sse" 1 | jq -r .nonce)
check_eq "the new stream sends the delta 2 -> 3" "3 2" "$(push_data "$WORK/s2.sse" 1 | jq -r '"\(.version) \(.base)"')"
check_eq "the old stream's nonce is now stale" stale "$(ack n1 3 "$n3")"
check_eq "the new stream's nonce is accepted" accepted "$(ack n1 3 "$n4")"
check_eq "the node is connected, acked at 3, lag 0" "true 3 0" "$(nodef n1 '"\(.connected) \(.acked_version) \(.lag)"')"
check_eq "the labels stay when a reconnect gives none" '{"region":"eu","tier":"web"}' "$(nodef n1 '.labels | tojson')"
check "the replacement is counted" test "$(metric tether_streams_replaced_total)" -ge 1

# ---- poll nonces ------------------------------------------------------------------------------------------------

out=$(curl -sS "$PLANE_URL/v1/config?node=p1&version=0&labels=tier%3Dbatch")
pn=$(echo "$out" | jq -r .nonce)
check_eq "a poll answer carries the nonce p<version>-<base>" "p3-0" "$pn"
check_eq "the poll nonce's ACK is accepted" accepted "$(ack p1 3 "$pn")"
check_eq "the poller shows acked 3, lag 0, transport poll, its labels" "3 0 poll batch" \
	"$(nodef p1 '"\(.acked_version) \(.lag) \(.transport) \(.labels.tier)"')"
put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9004}]}' >/dev/null
check_eq "a write makes the poller lag" 1 "$(nodef p1 .lag)"
# an HTTP cache may answer the poll without asking the plane: the nonce names
# its version and base, so its ACK is still accepted
check_eq "a poll nonce beyond the plane's version is stale" stale "$(ack p1 99 p99-4)"
check_eq "a poll nonce naming another version is stale" stale "$(ack p1 4 p5-4)"
check_eq "a malformed poll nonce is stale" stale "$(ack p1 4 p4-x)"
check_eq "none of them moved the poller" "3 1" "$(nodef p1 '"\(.acked_version) \(.lag)"')"
check_eq "the ACK of a poll answer the plane did not serve itself is accepted" accepted "$(ack p1 4 p4-3)"
check_eq "... and moves the poller to 4" "4 0" "$(nodef p1 '"\(.acked_version) \(.lag)"')"
check_eq "an older poll nonce is stale" stale "$(ack p1 3 p3-0)"
check_eq "the poller is still at 4 with four stale ACKs" "4 4" "$(nodef p1 '"\(.acked_version) \(.stale_acks)"')"

# ---- metrics ------------------------------------------------------------------------------------------------------

m=$(curl -sS "$PLANE_URL/metrics")
get() { echo "$m" | awk -v k="$1" '$1 == k {print $2}'; }
# n1: 3 ACKs accepted + healthy ACK + reconnect ACK = 5; p1: 2
check_eq "tether_acks_total counts accepted ACKs" 7 "$(get tether_acks_total)"
check_eq "tether_nacks_total counts accepted NACKs" 1 "$(get tether_nacks_total)"
# n1: older nonce, unknown nonce, stale NACK, old stream's nonce = 4; p1: 4
check_eq "tether_stale_acks_total counts stale ACKs and NACKs" 8 "$(get tether_stale_acks_total)"
check_eq "tether_node_lag is per node" "1 0" "$(get 'tether_node_lag{node="n1"}') $(get 'tether_node_lag{node="p1"}')"
check "the metrics carry TYPE lines" grep -q '^# TYPE tether_node_lag gauge' <<<"$m"
check_eq "n1 is current again once it acks the push of version 4" accepted \
	"$(wait_until 10 has_pushes "$WORK/s2.sse" 2 && ack n1 4 "$(push_data "$WORK/s2.sse" 2 | jq -r .nonce)")"
check_eq "tether_node_lag follows" 0 "$(metric 'tether_node_lag{node="n1"}')"

done_testing
