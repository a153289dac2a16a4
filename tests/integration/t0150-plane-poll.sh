#!/usr/bin/env bash
# t0150-plane-poll.sh: ETag polling against the real plane: ETag and an
# empty 304, a stale tag gets the delta, long-poll (returns at a write, or
# 304 after the wait), Cache-Control and Vary, gzip, subscriptions in the
# ETag, the "p<version>-<base>" nonce, and the node listed as a poller.
. "$(dirname "$0")/lib.sh"

# get NAME QUERY [CURL ARGS...]: one poll; body in $WORK/NAME.body, headers
# in $WORK/NAME.hdr; prints "STATUS SIZE TIME".
get() {
	local name=$1 query=$2
	shift 2
	curl -sS -D "$WORK/$name.hdr" -o "$WORK/$name.body" -w '%{http_code} %{size_download} %{time_total}' \
		"$@" "$PLANE_URL/v1/config?$query"
}

# header NAME FIELD: a response header's value (without CR).
header() {
	grep -i "^$2:" "$WORK/$1.hdr" | head -n 1 | sed 's/^[^:]*: *//' | tr -d '\r'
}

body() {
	cat "$WORK/$1.body"
}

metric_above() {
	[ "$(metric "$1")" -gt "$2" ]
}

cluster() {
	put "cluster/$1" '{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":'"$2"'}]}' | json .version
}

# ms SECONDS: curl's time_total in milliseconds
ms() {
	awk -v t="$1" 'BEGIN { printf "%d", t * 1000 }'
}

# the default heartbeat (10 s): a poller counts as connected for 3 of them
start_plane p
cluster a 9001 >/dev/null
cluster b 9002 >/dev/null

# ---- ETag and 304 -------------------------------------------------------------

r=$(get p1 "node=p1&version=0")
check_eq "a poll from 0 is 200" 200 "${r%% *}"
etag=$(header p1 ETag)
check "the ETag is W/\"<version>.<hash>\" of version 2" sh -c "echo '$etag' | grep -Eq '^W/\"2\.[0-9a-f]+\"\$'"
check_eq "the body is the push: snapshot of version 2" "2 0 true cluster/a cluster/b" \
	"$(body p1 | json '"\(.version) \(.base) \(.full) \([.upserts[].name] | join(" "))"')"
check_eq "the poll nonce is p<version>-<base>" p2-0 "$(body p1 | json .nonce)"
check_eq "Cache-Control lets a cache serve it for a second, and while the plane is down" \
	"public, max-age=1, stale-if-error=86400" "$(header p1 Cache-Control)"
check_eq "Vary: Accept-Encoding" Accept-Encoding "$(header p1 Vary)"
check_eq "Content-Type is JSON" application/json "$(header p1 Content-Type)"

r=$(get p2 "node=p1&version=2" -H "If-None-Match: $etag")
check_eq "If-None-Match with the current ETag is 304 with an empty body" "304 0" "$(echo "$r" | cut -d' ' -f1,2)"
check_eq "the 304 repeats the ETag" "$etag" "$(header p2 ETag)"
check_eq "the 304 carries Cache-Control" "public, max-age=1, stale-if-error=86400" "$(header p2 Cache-Control)"
check_eq "the 304 carries Vary" Accept-Encoding "$(header p2 Vary)"
r=$(get p2b "node=p1&version=2" -H "If-None-Match: W/\"1.0\", $etag")
check_eq "a list of tags holding the current one is 304 too" 304 "${r%% *}"

old=$etag
cluster c 9003 >/dev/null
r=$(get p3 "node=p1&version=2" -H "If-None-Match: $old")
check_eq "a stale tag gets 200" 200 "${r%% *}"
check_eq "with the delta from the node's version" "3 2 false cluster/c p3-2" \
	"$(body p3 | json '"\(.version) \(.base) \(.full) \([.upserts[].name] | join(" ")) \(.nonce)"')"
new=$(header p3 ETag)
check "and a new ETag of version 3" sh -c "echo '$new' | grep -Eq '^W/\"3\.[0-9a-f]+\"\$'"
r=$(get p4 "node=p1&version=3" -H "If-None-Match: $new")
check_eq "the new tag is 304 again" 304 "${r%% *}"

# ---- long-poll ---------------------------------------------------------------------

n=$(metric tether_polls_total)
get lp1 "node=lp1&version=3&wait=5" -H "If-None-Match: $new" >"$WORK/lp1.out" &
LP=$!
track_pid $LP
check "the long-poll arrived at the plane" wait_until 5 metric_above tether_polls_total "$n"
# the plane answers 304s at once; this one must still be held
check_eq "the long-poll is held while nothing changes" "" "$(cat "$WORK/lp1.out")"
V=$(cluster d 9004)
check "a write answers the held long-poll" wait_until 10 test -s "$WORK/lp1.out"
wait "$LP" 2>/dev/null
untrack_pid $LP
read -r code size t <"$WORK/lp1.out"
diag "long-poll with wait=5 answered after ${t}s"
check_eq "the answer is 200" 200 "$code"
check "well under the 5 s wait (< 2.5 s)" test "$(ms "$t")" -lt 2500
check_eq "with the new version's delta" "$V 3 cluster/d p$V-3" \
	"$(body lp1 | json '"\(.version) \(.base) \([.upserts[].name] | join(" ")) \(.nonce)"')"

# held by version alone (no If-None-Match), the way a first poller waits
n=$(metric tether_polls_total)
get lp2 "node=lp2&version=$V&wait=5" >"$WORK/lp2.out" &
LP=$!
track_pid $LP
wait_until 5 metric_above tether_polls_total "$n"
V2=$(cluster e 9005)
check "a long-poll by version alone is answered by a write" wait_until 10 test -s "$WORK/lp2.out"
wait "$LP" 2>/dev/null
untrack_pid $LP
read -r code size t <"$WORK/lp2.out"
check_eq "with 200 and the delta" "200 $V2 $V cluster/e" \
	"$code $(body lp2 | json '"\(.version) \(.base) \([.upserts[].name] | join(" "))"')"
check "also well under the wait (< 2.5 s)" test "$(ms "$t")" -lt 2500

cur=$(get cur "node=p1&version=$V2")
cur=$(header cur ETag)
r=$(get lp3 "node=lp3&version=$V2&wait=1" -H "If-None-Match: $cur")
read -r code size t <<<"$r"
diag "long-poll with wait=1 and nothing new answered after ${t}s"
check_eq "with nothing new, wait=1 ends in 304 with an empty body" "304 0" "$code $size"
check "after the wait, not before (0.9 .. 3 s)" test "$(ms "$t")" -ge 900 -a "$(ms "$t")" -lt 3000
check_eq "its ETag is still the current one" "$cur" "$(header lp3 ETag)"
r=$(get lp5 "node=lp5&version=$V2&wait=1")
read -r code size t <<<"$r"
check_eq "held by version alone (no If-None-Match), wait=1 ends in 200 with an empty push" "200 $V2 $V2 false 0 0 p$V2-$V2" \
	"$code $(body lp5 | json '"\(.version) \(.base) \(.full) \(.upserts | length) \(.removed | length) \(.nonce)"')"
check "also after the wait (0.9 .. 3 s)" test "$(ms "$t")" -ge 900 -a "$(ms "$t")" -lt 3000
check_eq "wait above 300 s is refused" 400 "$(api_status GET "/v1/config?node=lp4&version=1&wait=301")"

# ---- gzip ---------------------------------------------------------------------------

# enough clusters for the snapshot to pass 1 KiB
jq -nc '{upserts: [range(30) | {name: "cluster/g\(.)",
	body: {lb: "round_robin", endpoints: [{address: "10.1.0.\(.)", port: 8080, weight: 1}]}}]}' >"$WORK/g.json"
G=$(curl -sS -X POST --data-binary @"$WORK/g.json" "$PLANE_URL/v1/batch" | json .version)
get z0 "node=z0&version=0" >/dev/null
get z1 "node=z1&version=0" -H "Accept-Encoding: gzip" >/dev/null
check "the plain snapshot is over 1 KiB" test "$(wc -c <"$WORK/z0.body")" -ge 1024
check_eq "a snapshot over 1 KiB is gzipped when accepted" gzip "$(header z1 Content-Encoding)"
check_eq "the gzipped answer carries Vary: Accept-Encoding" Accept-Encoding "$(header z1 Vary)"
check "the gzipped body is smaller" test "$(wc -c <"$WORK/z1.body")" -lt "$(wc -c <"$WORK/z0.body")"
check_eq "it decodes to the same JSON (nonce aside)" "$(body z0 | jq -cS 'del(.nonce)')" \
	"$(gzip -dc "$WORK/z1.body" | jq -cS 'del(.nonce)')"
check_eq "its ETag is the same as the plain answer's" "$(header z0 ETag)" "$(header z1 ETag)"
get z2 "node=z2&version=0" --compressed >/dev/null
check_eq "curl --compressed reads the same JSON" "$(body z0 | jq -cS 'del(.nonce)')" "$(body z2 | jq -cS 'del(.nonce)')"
G=$(cluster h 9006)
get z3 "node=z3&version=$((G - 1))" -H "Accept-Encoding: gzip" >/dev/null
check_eq "a small delta (< 1 KiB) is not gzipped" "" "$(header z3 Content-Encoding)"
check_eq "and is plain JSON" "$G false cluster/h" "$(body z3 | json '"\(.version) \(.full) \([.upserts[].name] | join(" "))"')"
get z4 "node=z4&version=0" -H "Accept-Encoding: gzip;q=0" >/dev/null
check_eq "gzip;q=0 is not gzip" "" "$(header z4 Content-Encoding)"

# ---- subscriptions in the ETag -------------------------------------------------------

get s0 "node=s0&version=0" >/dev/null
get s1 "node=s1&version=0&sub=cluster/" >/dev/null
get s2 "node=s2&version=0&sub=listener/" >/dev/null
e0=$(header s0 ETag)
e1=$(header s1 ETag)
e2=$(header s2 ETag)
check "a subscription changes the ETag" test "$e0" != "$e1" -a "$e1" != "$e2" -a "$e0" != "$e2"
check "but not the version in it" sh -c "echo '$e0 $e1 $e2' | grep -Eq '^W/\"$G\.[0-9a-f]+\" W/\"$G\.[0-9a-f]+\" W/\"$G\.[0-9a-f]+\"\$'"
r=$(get s3 "node=s1&version=$G&sub=cluster/" -H "If-None-Match: $e0")
check_eq "the unsubscribed tag does not match a subscribed poll" 200 "${r%% *}"
r=$(get s4 "node=s1&version=$G&sub=cluster/" -H "If-None-Match: $e1")
check_eq "its own tag does" 304 "${r%% *}"
get s5 "node=s5&version=0&sub=listener/,cluster/" >/dev/null
get s6 "node=s6&version=0&sub=cluster/,listener/" >/dev/null
check_eq "the same prefixes in another order give the same ETag" "$(header s5 ETag)" "$(header s6 ETag)"
check_eq "a listener subscription's snapshot is empty" "0 true" "$(body s2 | json '"\(.upserts | length) \(.full)"')"

# ---- the node registry ---------------------------------------------------------------

nodes=$(curl -sS "$PLANE_URL/v1/nodes")
check_eq "the poller is listed in /v1/nodes with transport poll" "poll true" \
	"$(echo "$nodes" | json '.[] | select(.node == "p1") | "\(.transport) \(.connected)"')"
check_eq "and the version last sent to it, with its nonce" "$V2 p$V2-$V2" \
	"$(echo "$nodes" | json '.[] | select(.node == "p1") | "\(.sent_version) \(.sent_nonce)"')"
check_eq "a long-poller too" poll "$(echo "$nodes" | json '.[] | select(.node == "lp1") | .transport')"
check_eq "polls are counted" 1 "$(test "$(metric tether_polls_total)" -ge 15 && echo 1)"
check "304s are counted" test "$(metric tether_polls_not_modified_total)" -ge 4

done_testing
