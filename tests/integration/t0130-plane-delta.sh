#!/usr/bin/env bash
# t0130-plane-delta.sh: the delta computer against the real plane, the seed
# toy's cases: 1,000 clusters loaded as one version, one changed -> a node at
# the previous version gets exactly that one upsert and a node at 0 all
# 1,000, at a fraction of the bytes; a reconnecting node gets exactly the gap
# (2 upserts, 1 removal); make-before-break order of upserts and removals;
# subscriptions; a node ahead of the plane gets a snapshot.
. "$(dirname "$0")/lib.sh"

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

has_events() {
	[ "$(sse_events "$1" | wc -l)" -ge "$2" ]
}

# first_event NAME QUERY: opens a stream, waits for its first complete
# event, closes the stream and prints the event (TYPE<tab>ID<tab>DATA).
first_event() {
	local out=$WORK/$1.sse pid
	curl -sN "$PLANE_URL/v1/stream?$2" >"$out" 2>"$WORK/$1.err" &
	pid=$!
	track_pid "$pid"
	wait_until 15 has_events "$out" 1 || diag "stream $1: no event within 15 s"
	stop_pid "$pid"
	sse_events "$out" | head -n 1
}

# poll QUERY: one poll, prints the body.
poll() {
	curl -sS "$PLANE_URL/v1/config?$1"
}

names() {
	jq -r '[.upserts[].name] | join(" ")'
}

start_plane p --heartbeat 0.5

# ---- 1,000 clusters in one batch, then one change ---------------------------

jq -nc '{upserts: [range(1000) | {name: "cluster/c\(.)",
	body: {lb: "round_robin", endpoints: [{address: "10.0.\(. / 250 | floor).\(. % 250)", port: 8080, weight: 1}]}}],
	removes: []}' >"$WORK/load.json"
out=$(curl -sS -X POST --data-binary @"$WORK/load.json" "$PLANE_URL/v1/batch")
check_eq "1,000 clusters in one batch are one version" 1 "$(echo "$out" | json .version)"
check_eq "the store lists 1,000 clusters" 1000 "$(curl -sS "$PLANE_URL/v1/resources?prefix=cluster/" | json '.resources | length')"

out=$(put cluster/c7 '{"lb":"least_conn","endpoints":[{"address":"1.2.3.4","port":8080,"weight":1}]}')
check_eq "changing one cluster makes version 2" 2 "$(echo "$out" | json .version)"

ev=$(first_event delta1 "node=d1&version=1")
delta=$(printf '%s\n' "$ev" | cut -f3)
check_eq "a node at version 1 first gets a push with id 2" "push 2" "$(printf '%s\n' "$ev" | cut -f1,2 --output-delimiter=' ')"
check_eq "its push is a delta 1 -> 2" "2 1 false" "$(echo "$delta" | json '"\(.version) \(.base) \(.full)"')"
check_eq "the delta holds exactly the changed cluster" "cluster/c7" "$(echo "$delta" | names)"
check_eq "with its new body and version" "least_conn 1.2.3.4 2" \
	"$(echo "$delta" | json '.upserts[0] | "\(.body.lb) \(.body.endpoints[0].address) \(.version)"')"
check_eq "and no removals" 0 "$(echo "$delta" | json '.removed | length')"

ev=$(first_event snap1 "node=s1&version=0")
snap=$(printf '%s\n' "$ev" | cut -f3)
check_eq "a node at 0 gets a snapshot of version 2" "2 0 true" "$(echo "$snap" | json '"\(.version) \(.base) \(.full)"')"
check_eq "the snapshot holds all 1,000 clusters" 1000 "$(echo "$snap" | json '[.upserts[].name] | unique | length')"
check_eq "the snapshot carries the changed cluster's new body" least_conn \
	"$(echo "$snap" | json '.upserts[] | select(.name == "cluster/c7") | .body.lb')"

dbytes=$(printf '%s' "$delta" | wc -c)
sbytes=$(printf '%s' "$snap" | wc -c)
diag "delta push: $dbytes bytes; snapshot push: $sbytes bytes; ratio $((sbytes / (dbytes ? dbytes : 1)))x"
check "the delta push is at least 100x smaller than the snapshot" test $((dbytes * 100)) -le "$sbytes"

check_eq "a poll from version 1 gets the same delta" "cluster/c7 p2-1" \
	"$(poll "node=d2&version=1" | json '"\([.upserts[].name] | join(" ")) \(.nonce)"')"

# ---- the seed's reconnect case: exactly the gap -----------------------------

V=2
put cluster/new '{"lb":"round_robin","endpoints":[{"address":"10.9.9.9","port":80}]}' >/dev/null
curl -sS -X DELETE "$PLANE_URL/v1/resources/cluster/c3" >/dev/null
out=$(put cluster/c4 '{"lb":"random","endpoints":[{"address":"10.0.0.4","port":8080}]}')
check_eq "three writes make version 5" 5 "$(echo "$out" | json .version)"

ev=$(first_event late1 "node=late&version=$V")
gap=$(printf '%s\n' "$ev" | cut -f3)
check_eq "the reconnecting node gets one delta $V -> 5" "5 $V false" "$(echo "$gap" | json '"\(.version) \(.base) \(.full)"')"
check_eq "the gap has exactly 2 upserts" "cluster/c4 cluster/new" "$(echo "$gap" | names)"
check_eq "the gap has exactly 1 removal" '["cluster/c3"]' "$(echo "$gap" | jq -c .removed)"
check_eq "each upsert carries the version it changed in" "cluster/c4=5 cluster/new=3" \
	"$(echo "$gap" | json '[.upserts[] | "\(.name)=\(.version)"] | join(" ")')"
check_eq "a node inside the gap gets only the rest of it" "cluster/c4 cluster/c3" \
	"$(poll "node=mid&version=3" | json '"\([.upserts[].name] | join(" ")) \(.removed | join(" "))"')"

# ---- make before break --------------------------------------------------------

pem_pair s1   # the plane parses a secret's certificate and key
PEM=$PAIR_CERT
KEY=$PAIR_KEY
out=$(curl -sS -X POST "$PLANE_URL/v1/batch" --data-binary '{"upserts":[
	{"name":"file/f1","body":{"path":"conf/f1.txt","content":"hello\n","mode":"0644"}},
	{"name":"route/r1","body":{"listener":"l1","host":"*","path":"/","cluster":"mb"}},
	{"name":"listener/l1","body":{"address":"127.0.0.1","port":8443,"tls":{"secret":"s1"}}},
	{"name":"cluster/mb","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9001}]}},
	{"name":"secret/s1","body":{"cert":"'"$PEM"'","key":"'"$KEY"'"}}],"removes":[]}')
check_eq "a batch of secret, cluster, listener, route and file is version 6" 6 "$(echo "$out" | json .version)"
check_eq "its delta is ordered make before break: secret, cluster, listener, route, file" \
	"secret/s1 cluster/mb listener/l1 route/r1 file/f1" "$(poll "node=mb1&version=5" | names)"
check_eq "the snapshot is ordered by type the same way" "secret cluster listener route file" \
	"$(poll "node=mb2&version=0" | json '[.upserts[].name | split("/")[0]] | reduce .[] as $t ([]; if (.[-1] // "") == $t then . else . + [$t] end) | join(" ")')"

out=$(curl -sS -X POST "$PLANE_URL/v1/batch" --data-binary \
	'{"upserts":[],"removes":["secret/s1","cluster/mb","listener/l1","route/r1","file/f1"]}')
check_eq "removing all five in one batch is version 7" 7 "$(echo "$out" | json .version)"
check_eq "removals are ordered referrers first: file, route, listener, cluster, secret" \
	"file/f1 route/r1 listener/l1 cluster/mb secret/s1" "$(poll "node=mb3&version=6" | json '.removed | join(" ")')"
check_eq "a node that never saw them is still told they are gone, in the same order" \
	"file/f1 route/r1 listener/l1 cluster/mb secret/s1" "$(poll "node=mb4&version=5" | json '.removed | join(" ")')"

# ---- subscriptions --------------------------------------------------------------

out=$(curl -sS -X POST "$PLANE_URL/v1/batch" --data-binary '{"upserts":[
	{"name":"listener/l2","body":{"address":"127.0.0.1","port":8081}},
	{"name":"cluster/c9","body":{"lb":"random","endpoints":[{"address":"10.0.0.9","port":8080}]}},
	{"name":"route/r2","body":{"listener":"l2","cluster":"c9"}}],"removes":["cluster/c5"]}')
check_eq "a mixed batch is version 8" 8 "$(echo "$out" | json .version)"
p=$(poll "node=sub1&version=7&sub=cluster/")
check_eq "sub=cluster/ sees only the cluster change of the mixed batch" "8 7 cluster/c9 cluster/c5" \
	"$(echo "$p" | json '"\(.version) \(.base) \([.upserts[].name] | join(" ")) \(.removed | join(" "))"')"
check_eq "sub=cluster/,listener/ sees both types" "cluster/c9 listener/l2" \
	"$(poll "node=sub2&version=7&sub=cluster/,listener/" | names)"
p=$(poll "node=sub3&version=0&sub=cluster/")
n=$(curl -sS "$PLANE_URL/v1/resources?prefix=cluster/" | json '.resources | length')
check_eq "a sub=cluster/ snapshot holds every cluster and nothing else" "$n $n" \
	"$(echo "$p" | json '"\(.upserts | length) \([.upserts[] | select(.name | startswith("cluster/"))] | length)"')"

out=$(put route/r2 '{"listener":"l2","cluster":"c9","path":"/v2"}')
check_eq "a route-only write is version 9" 9 "$(echo "$out" | json .version)"
ev=$(first_event sub4 "node=sub4&version=8&sub=cluster/")
check_eq "a cluster subscriber still gets a push for version 9" "push 9" "$(printf '%s\n' "$ev" | cut -f1,2 --output-delimiter=' ')"
check_eq "and that push is empty" "9 8 0 0" \
	"$(printf '%s\n' "$ev" | cut -f3 | json '"\(.version) \(.base) \(.upserts | length) \(.removed | length)"')"
check_eq "the route subscriber gets the route" "route/r2" "$(poll "node=sub5&version=8&sub=route/" | names)"

# ---- a node ahead of the plane -------------------------------------------------

ev=$(first_event ahead1 "node=ahead&version=500")
p=$(printf '%s\n' "$ev" | cut -f3)
check_eq "a stream from a version ahead of the plane starts with a push of version 9" "push 9" \
	"$(printf '%s\n' "$ev" | cut -f1,2 --output-delimiter=' ')"
check_eq "that push is a full snapshot" "true 0" "$(echo "$p" | json '"\(.full) \(.base)"')"
check_eq "the snapshot holds the whole store" \
	"$(curl -sS "$PLANE_URL/v1/resources" | json '.resources | length')" "$(echo "$p" | json '.upserts | length')"
check_eq "a poll from a version ahead gets full:true too" "true 9" \
	"$(poll "node=ahead2&version=500" | json '"\(.full) \(.version)"')"

done_testing
