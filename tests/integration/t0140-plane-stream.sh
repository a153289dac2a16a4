#!/usr/bin/env bash
# t0140-plane-stream.sh: Server-Sent Event streams against the real plane,
# read by curl -N in the background: the first event (the gap, or a
# heartbeat), heartbeat cadence and fields, fan-out to 20 streams,
# coalescing, Last-Event-ID, one stream per node, gzip, a clean end on
# SIGTERM, and a client that stops reading while the others go on.
. "$(dirname "$0")/lib.sh"

HB=0.3

# sse_events FILE: the complete events of an SSE capture, one a line:
# TYPE<tab>ID<tab>DATA (an event counts once its blank line arrived).
sse_events() {
	awk '
		/^event: / { ev = substr($0, 8); next }
		/^id: / { id = substr($0, 5); next }
		/^data: / { data = substr($0, 7); next }
		/^$/ { if (ev != "" || data != "") print ev "\t" id "\t" data; ev = ""; id = ""; data = ""; next }
	' "$1"
}

# count_events FILE TYPE
count_events() {
	sse_events "$1" | awk -F'\t' -v t="$2" '$1 == t { n++ } END { print n + 0 }'
}

# has_events FILE N [TYPE]: at least N complete events (of TYPE).
has_events() {
	if [ -n "${3:-}" ]; then
		[ "$(count_events "$1" "$3")" -ge "$2" ]
	else
		[ "$(sse_events "$1" | wc -l)" -ge "$2" ]
	fi
}

# has_push FILE ID: a complete push event with that id arrived.
has_push() {
	sse_events "$1" | awk -F'\t' -v id="$2" '$1 == "push" && $2 == id { f = 1 } END { exit !f }'
}

# pushes FILE: the data of every push, one a line.
pushes() {
	sse_events "$1" | awk -F'\t' '$1 == "push" { print $3 }'
}

# open_stream NAME QUERY [CURL ARGS...]: curl -N in the background into
# $WORK/NAME.sse (headers in $WORK/NAME.hdr); sets SPID[NAME].
declare -A SPID
open_stream() {
	local name=$1 query=$2
	shift 2
	curl -sN -D "$WORK/$name.hdr" "$@" "$PLANE_URL/v1/stream?$query" >"$WORK/$name.sse" 2>"$WORK/$name.err" &
	SPID[$name]=$!
	track_pid "${SPID[$name]}"
}

# exited PID: the process is gone or a zombie (kill -0 succeeds on zombies).
exited() {
	[ ! -e "/proc/$1" ] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null
}

# exit_code PID: waits (bounded) for a child to end and sets RC to its exit
# status ("running" when it did not end within 10 s). Not for $( ): wait
# must run in the shell that started the child.
exit_code() {
	RC=running
	wait_until 10 exited "$1" || return 0
	wait "$1" 2>/dev/null
	RC=$?
	untrack_pid "$1"
}

version() {
	curl -sS "$PLANE_URL/healthz" | json .version
}

cluster() {
	put "cluster/$1" '{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":'"$2"'}]}' | json .version
}

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

start_plane p --heartbeat $HB
P_PID=$PLANE_PID
cluster a 9001 >/dev/null
cluster b 9002 >/dev/null
cluster c 9003 >/dev/null

# ---- the first event ---------------------------------------------------------

open_stream g1 "node=g1&version=1"
wait_until 10 has_events "$WORK/g1.sse" 1
check_eq "a stream body starts with retry: 2000" "retry: 2000" "$(head -n 1 "$WORK/g1.sse")"
first=$(sse_events "$WORK/g1.sse" | head -n 1)
check_eq "a node at version 1 first gets the gap as a push with id 3" "push 3" "$(echo "$first" | cut -f1,2 --output-delimiter=' ')"
check_eq "the gap push is the delta 1 -> 3 with the two new clusters" "3 1 false cluster/b cluster/c" \
	"$(echo "$first" | cut -f3 | json '"\(.version) \(.base) \(.full) \([.upserts[].name] | join(" "))"')"
check_eq "the stream is text/event-stream" 1 "$(grep -ci '^content-type: text/event-stream' "$WORK/g1.hdr")"
stop_pid "${SPID[g1]}"

open_stream h1 "node=h1&version=3"
wait_until 10 has_events "$WORK/h1.sse" 1
first=$(sse_events "$WORK/h1.sse" | head -n 1)
check_eq "a node at the current version first gets a heartbeat" heartbeat "$(echo "$first" | cut -f1)"
hb=$(echo "$first" | cut -f3)
check_eq "the heartbeat carries the version and the interval" "3 0.3" "$(echo "$hb" | json '"\(.version) \(.interval)"')"
t=$(echo "$hb" | json .time)
check "the heartbeat's time is the wall clock (unix seconds)" test $((t - $(date +%s))) -ge -5 -a $((t - $(date +%s))) -le 5

# ---- heartbeat cadence ------------------------------------------------------------

wait_until 10 has_events "$WORK/h1.sse" 2 heartbeat
t2=$(now_ms)
n2=$(count_events "$WORK/h1.sse" heartbeat)
wait_until 10 has_events "$WORK/h1.sse" $((n2 + 5)) heartbeat
t7=$(now_ms)
dt=$((t7 - t2))
diag "5 heartbeats took $dt ms at --heartbeat $HB"
check "heartbeats arrive every --heartbeat $HB s (5 in 1.0..4.5 s)" test "$dt" -ge 1000 -a "$dt" -le 4500
check_eq "a stream with nothing new gets no push" 0 "$(count_events "$WORK/h1.sse" push)"
hbs=$(sse_events "$WORK/h1.sse" | awk -F'\t' '$1 == "heartbeat" { print $3 }')
n_all=$(echo "$hbs" | wc -l)
n_ok=$(echo "$hbs" | jq -r 'select(.version == 3 and (.time | type) == "number" and .time > 1000000000 and .interval == 0.3) | 1' | wc -l)
check_eq "every heartbeat ($n_all) carries version, time and interval" "$n_all" "$n_ok"
stop_pid "${SPID[h1]}"

# ---- coalescing: a node at V after 5 writes gets one push ----------------------

V=$(version)
for i in 1 2 3 4 5; do cluster "k$i" $((9100 + i)) >/dev/null; done
W=$(version)
check_eq "five writes make five versions" $((V + 5)) "$W"
open_stream c1 "node=c1&version=$V"
wait_until 10 has_push "$WORK/c1.sse" "$W"
n=$(count_events "$WORK/c1.sse" heartbeat)
wait_until 10 has_events "$WORK/c1.sse" $((n + 3)) heartbeat
check_eq "a node at V after five writes gets exactly one push" 1 "$(count_events "$WORK/c1.sse" push)"
check_eq "that push covers the whole gap V -> V+5" "$W $V false 5" \
	"$(pushes "$WORK/c1.sse" | json '"\(.version) \(.base) \(.full) \(.upserts | length)"')"
check_eq "the stream's first event is that push" push "$(sse_events "$WORK/c1.sse" | head -n 1 | cut -f1)"
stop_pid "${SPID[c1]}"

# ---- Last-Event-ID ---------------------------------------------------------------

open_stream le1 "node=le1&version=0" -H "Last-Event-ID: $((V + 3))"
wait_until 10 has_events "$WORK/le1.sse" 1 push
check_eq "Last-Event-ID overrides version=0: the push starts at its id" "$W $((V + 3)) false cluster/k4 cluster/k5" \
	"$(pushes "$WORK/le1.sse" | head -n 1 | json '"\(.version) \(.base) \(.full) \([.upserts[].name] | join(" "))"')"
stop_pid "${SPID[le1]}"
open_stream le2 "node=le2" -H "Last-Event-ID: $W"
wait_until 10 has_events "$WORK/le2.sse" 1
check_eq "Last-Event-ID at the current version: a heartbeat first, no snapshot" heartbeat \
	"$(sse_events "$WORK/le2.sse" | head -n 1 | cut -f1)"
stop_pid "${SPID[le2]}"

# ---- fan-out to 20 streams -----------------------------------------------------------

V=$(version)
for i in $(seq 1 20); do open_stream "f$i" "node=f$i&version=$V"; done
all_have() { # all_have COUNT TYPE
	local i
	for i in $(seq 1 20); do has_events "$WORK/f$i.sse" "$1" "$2" || return 1; done
}
all_push() { # all_push ID
	local i
	for i in $(seq 1 20); do has_push "$WORK/f$i.sse" "$1" || return 1; done
}
check "20 streams are open and got their first heartbeat" wait_until 10 all_have 1 heartbeat
metric_is() {
	[ "$(metric "$1")" = "$2" ]
}
check "the plane counts 20 open streams" wait_until 5 metric_is tether_streams 20
W=$(cluster fan 9200)
check "one write reaches every one of the 20 streams" wait_until 10 all_push "$W"
for i in 1 2 3 4 5; do cluster "burst$i" $((9300 + i)) >/dev/null; done
W2=$(version)
check "a burst of 5 writes reaches every stream" wait_until 10 all_push "$W2"
# each stream's pushes must chain: base = previous id, ending at the newest
chain_ok() {
	pushes "$1" | jq -s -e --argjson from "$2" --argjson to "$3" '
		(.[0].base == $from) and (.[-1].version == $to)
		and ([range(1; length) as $i | .[$i].base == .[$i - 1].version] | all)
		and (map(.full) | any | not)'
}
bad=""
maxp=0
for i in $(seq 1 20); do
	chain_ok "$WORK/f$i.sse" "$V" "$W2" >/dev/null || bad="$bad f$i"
	c=$(count_events "$WORK/f$i.sse" push)
	[ "$c" -gt "$maxp" ] && maxp=$c
done
check_eq "on every stream the pushes chain without gaps or repeats" "" "$bad"
check "no stream got more pushes than versions (at most 6)" test "$maxp" -le 6
diag "most pushes on one stream for 6 versions: $maxp"
check_eq "a burst's upserts arrive exactly once on a stream" "burst1 burst2 burst3 burst4 burst5 fan" \
	"$(pushes "$WORK/f7.sse" | jq -r '.upserts[].name' | sed 's,cluster/,,' | sort | tr '\n' ' ' | sed 's/ $//')"

# ---- one stream per node -----------------------------------------------------------

open_stream dup1 "node=dup&version=0"
wait_until 10 has_events "$WORK/dup1.sse" 1
open_stream dup2 "node=dup&version=$W2"
wait_until 10 has_events "$WORK/dup2.sse" 1
exit_code "${SPID[dup1]}"
check_eq "a second stream for the same node ends the first (its curl exits 0)" 0 "$RC"
check_eq "the plane counts the replaced stream" 1 "$(metric tether_streams_replaced_total)"
W=$(cluster dupcheck 9400)
check "the newer stream stays open and gets the next write" wait_until 10 has_push "$WORK/dup2.sse" "$W"
check_eq "the older stream got nothing after it was replaced" 0 "$(grep -c "^id: $W\$" "$WORK/dup1.sse")"
check_eq "/v1/nodes shows the node connected over sse" "true sse" \
	"$(curl -sS "$PLANE_URL/v1/nodes/dup" | json '"\(.connected) \(.transport)"')"

# ---- gzip ------------------------------------------------------------------------------

open_stream z0 "node=z0&version=1"
open_stream z1 "node=z1&version=1" --compressed
open_stream zr "node=zr&version=1" -H "Accept-Encoding: gzip"
wait_until 10 has_events "$WORK/z0.sse" 1
wait_until 10 has_events "$WORK/z1.sse" 1
check_eq "a gzip stream is sent with Content-Encoding: gzip" 1 "$(grep -ci '^content-encoding: gzip' "$WORK/z1.hdr")"
check_eq "a plain stream is not" 0 "$(grep -ci '^content-encoding:' "$WORK/z0.hdr")"
strip_nonce() {
	sse_events "$1" | awk -F'\t' '$1 == "push"' | cut -f1,2 >"$WORK/$2.ids"
	pushes "$1" | jq -c 'del(.nonce)' >"$WORK/$2.data"
	cat "$WORK/$2.ids" "$WORK/$2.data"
}
check_eq "the gzip stream decodes to the same first push" "$(strip_nonce "$WORK/z0.sse" z0)" "$(strip_nonce "$WORK/z1.sse" z1)"
W=$(cluster gz 9500)
wait_until 10 has_push "$WORK/z0.sse" "$W"
check "a write reaches the gzip stream" wait_until 10 has_push "$WORK/z1.sse" "$W"
check_eq "and decodes to the same push" "$(strip_nonce "$WORK/z0.sse" z0)" "$(strip_nonce "$WORK/z1.sse" z1)"
wait_until 10 has_events "$WORK/z1.sse" 1 heartbeat
check "heartbeats arrive on the gzip stream too" wait_until 10 has_events "$WORK/z1.sse" 2 heartbeat

# ---- SIGTERM ends every stream cleanly ------------------------------------------------

open_stream t1 "node=t1&version=$W"
wait_until 10 has_events "$WORK/t1.sse" 1
kill -TERM "$P_PID"
exit_code "$P_PID"
check_eq "SIGTERM: the plane exits 0" 0 "$RC"
exit_code "${SPID[t1]}"
check_eq "SIGTERM: a plain stream ends cleanly (curl exits 0)" 0 "$RC"
exit_code "${SPID[z1]}"
check_eq "SIGTERM: the gzip stream ends cleanly (curl --compressed exits 0)" 0 "$RC"
exit_code "${SPID[zr]}"
check_eq "SIGTERM: the raw gzip stream ends" 0 "$RC"
check "the raw gzip stream is complete gzip (trailer, CRC and length check)" gzip -t "$WORK/zr.sse"
check_eq "the raw gzip stream decodes to the same pushes" "$(strip_nonce "$WORK/z0.sse" z0)" \
	"$(gzip -dc "$WORK/zr.sse" >"$WORK/zr.txt"; strip_nonce "$WORK/zr.txt" zr)"
codes=""
for i in $(seq 1 20); do
	exit_code "${SPID[f$i]}"
	codes="$codes$RC"
done
check_eq "SIGTERM: all 20 fan-out streams end cleanly" "$(printf '0%.0s' $(seq 1 20))" "$codes"
check_eq "the plane logged its stop" 1 "$(grep -c ' stopped$' "$PLANE_LOG")"

# ---- a client that stops reading -----------------------------------------------------

# A second plane whose snapshot is far more than the loopback socket buffers
# hold (a sender's buffer grows to tcp_wmem's max; a receiver that never
# reads keeps tcp_rmem's default), so a client that never reads stays stuck
# inside it: at least 14 MB, more when the buffers are bigger.
wmem=$(awk '{ print $3 }' /proc/sys/net/ipv4/tcp_wmem 2>/dev/null || echo 4194304)
rmem=$(awk '{ print $2 }' /proc/sys/net/ipv4/tcp_rmem 2>/dev/null || echo 131072)
nbig=$(((2 * (wmem + rmem)) / 900000 + 2))
[ "$nbig" -ge 16 ] || nbig=16
diag "stuck-client snapshot: $nbig x 900 kB (tcp_wmem max $wmem, tcp_rmem default $rmem)"
start_plane q --heartbeat $HB --max-request $(((nbig + 1) * 1048576))
big=$(head -c 900000 /dev/zero | tr '\0' x)
{
	printf '{"upserts":['
	for i in $(seq 1 "$nbig"); do
		[ "$i" -gt 1 ] && printf ','
		printf '{"name":"file/big%d","body":{"path":"big/%d.txt","content":"%s"}}' "$i" "$i" "$big"
	done
	printf '],"removes":[]}'
} >"$WORK/big.json"
check_eq "a $((nbig * 9 / 10)) MB batch is version 1" 1 \
	"$(curl -sS -X POST --data-binary @"$WORK/big.json" "$PLANE_URL/v1/batch" | json .version)"
for i in 1 2 3; do open_stream "n$i" "node=n$i&version=1"; done
all_n() {
	local i
	for i in 1 2 3; do "$@" "$WORK/n$i.sse" "${ARGS[@]}" || return 1; done
}
ARGS=(1)
wait_until 10 all_n has_events
# the stuck client: a raw HTTP/1.0 request, then no read until $WORK/go
(
	exec 3<>"/dev/tcp/127.0.0.1/$PLANE_PORT" || exit 1
	printf 'GET /v1/stream?node=slow&version=0 HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
	while [ ! -e "$WORK/go" ]; do sleep 0.05; done
	exec cat <&3 >"$WORK/slow.raw"
) &
SLOW=$!
track_pid $SLOW
check "the stuck client's snapshot push has begun" wait_until 10 metric_is tether_pushes_total 1
for i in 1 2 3 4 5; do cluster "s$i" $((9600 + i)) >/dev/null; done
ARGS=(6)
check "while one client reads nothing, 5 writes reach the other 3 streams" wait_until 10 all_n has_push
others=0
for i in 1 2 3; do others=$((others + $(count_events "$WORK/n$i.sse" push))); done
check_eq "the stuck client was sent nothing new meanwhile (pushes_total = 1 + the others')" $((1 + others)) \
	"$(metric tether_pushes_total)"
check_eq "the stuck client's stream is still open" 4 "$(metric tether_streams)"
touch "$WORK/go"
slow_done() {
	sed '1,/^\r$/d' "$WORK/slow.raw" >"$WORK/slow.sse"
	has_push "$WORK/slow.sse" 6
}
check "once it reads again, it gets the rest" wait_until 20 slow_done
check_eq "it got exactly two pushes: the snapshot and one delta for the whole gap" "1 0 true $nbig|6 1 false 5" \
	"$(pushes "$WORK/slow.sse" | json '"\(.version) \(.base) \(.full) \(.upserts | length)"' | paste -sd'|')"

done_testing
