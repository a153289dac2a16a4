#!/usr/bin/env bash
# t0910-cache.sh: a real nginx running contrib/nginx-cache.conf in front of
# real planes (--insecure: anonymous polling, docs/caching.md). 1,000
# pollers (tests/tools/pollers.mjs, a node id and version each) through the
# cache make the plane answer a handful of requests per version, the same
# round straight at the plane 1,000; a statement (--signing-key) served from
# the cache is renewed; real tetherd pollers get through it and their ACKs
# reach the plane; an answer holding a secret is never kept; a long-poll
# passes uncached, held by the plane with the node's own If-None-Match;
# with the plane down the cache serves its last answer. Then cache
# isolation: a staged rollout in progress, a canary member on the new
# version and a neighbour on the baseline, polling through the same cache
# many times in both orders and at once, each get only their own target;
# once the rollout completes their answers are shared again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || skip_all "nginx is not installed"
need_cmd node ss base64

N=1000          # pollers per round
MAX_ORIGIN=5    # requests the plane may see per version through the cache

# ---- helpers of this test -------------------------------------------------------

# start_cache NAME PLANE_PORT: nginx with contrib/nginx-cache.conf (its
# placeholders filled in) in front of the plane, prefix $WORK/NAME, in the
# foreground (tracked). Sets CACHE_URL and CACHE_DIR.
start_cache() {
	local name=$1 plane=$2 dir=$WORK/$1 port
	free_port port
	mkdir -p "$dir/tmp"
	sed -e "s|@LISTEN@|127.0.0.1:$port|" -e "s|@PLANE@|127.0.0.1:$plane|" \
		-e "s|@CACHE_DIR@|$dir/cache|" -e "s|@LOG@|$dir/access.log|" \
		"$TOP_SRCDIR/contrib/nginx-cache.conf" >"$dir/cache.conf"
	! grep -q '@[A-Z_]*@' "$dir/cache.conf" || bail "a placeholder of nginx-cache.conf is left"
	# workers run as us: the work directory is ours only
	cat >"$dir/nginx.conf" <<EOF
user $(id -un) $(id -gn);
pid $dir/nginx.pid;
error_log $dir/error.log notice;
worker_processes 1;
events { worker_connections 1024; }
http {
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    include $dir/cache.conf;
}
EOF
	"$NGINX" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' >>"$dir/run.log" 2>&1 &
	track_pid $!
	CACHE_URL=http://127.0.0.1:$port
	CACHE_DIR=$dir/cache
	wait_until 10 curl -fsS "$CACHE_URL/healthz" || bail "nginx $name did not start: $(cat "$dir/run.log")"
}

# cget NAME URL QUERY [CURL ARGS...]: one GET /v1/config; headers in
# $WORK/NAME.hdr, body in $WORK/NAME.body; prints the status.
cget() {
	local name=$1 url=$2 query=$3
	shift 3
	curl -sS --max-time 20 -D "$WORK/$name.hdr" -o "$WORK/$name.body" -w '%{http_code}' "$@" "$url/v1/config?$query"
}

# header NAME FIELD: a response header's value (without CR).
header() {
	grep -i "^$2:" "$WORK/$1.hdr" | head -n 1 | sed 's/^[^:]*: *//' | tr -d '\r'
}

# answer NAME: "STATUS VERSION CACHE-CONTROL X-CACHE-STATUS" of the last cget
# NAME (the version of a 200's body, of a 304's ETag).
answer() {
	local st v
	st=$(head -n 1 "$WORK/$1.hdr" | awk '{print $2}')
	if [ "$st" = 200 ]; then
		v=$(jq -r .version "$WORK/$1.body")
	else
		v=$(header "$1" ETag | sed -E 's/^W\/"([0-9]+)\..*/\1/')
	fi
	echo "$st $v $(header "$1" Cache-Control | cut -d, -f1) $(header "$1" X-Cache-Status)"
}

polls() {
	metric tether_polls_total
}

polls_ge() {
	[ "$(polls)" -ge "$1" ]
}

# round URL PREFIX: one round of the N pollers PREFIXnnnn (state in
# $WORK/PREFIX.json); prints the tool's JSON line, then the polls the
# plane counted during the round.
round() {
	local before after out
	before=$(polls)
	out=$(node "$TOOLS/pollers.mjs" "$1" "$N" "$2" "$WORK/$2.json") || bail "pollers.mjs failed: $out"
	after=$(polls)
	echo "$out"
	echo $((after - before))
}

# statement_issued NAME: the issued time of the statement in the body of cget NAME.
statement_issued() {
	local p
	p=$(jq -r .statement "$WORK/$1.body" | cut -d. -f1 | tr '_-' '/+')
	while [ $((${#p} % 4)) != 0 ]; do p="$p="; done
	echo "$p" | base64 -d 2>/dev/null | jq -r .issued
}

# renewed_after T: a poll through the cache carries a statement issued after T.
renewed_after() {
	cget st "$CACHE_URL" "node=st&version=$V3" >/dev/null
	[ "$(statement_issued st)" -gt "$1" ]
}

# ---- the plane, the cache, 1,000 pollers -----------------------------------------

"$CTL_BIN" keygen "$WORK/sign" >/dev/null || bail "keygen failed"
start_plane a --heartbeat 1 --signing-key "$WORK/sign"
A_PORT=$PLANE_PORT
start_cache cache-a "$A_PORT"
diag "plane $PLANE_URL, cache $CACHE_URL"

cluster() {
	put "cluster/$1" '{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":'"$2"'}]}' | json .version
}
V1=$(cluster a 9001)

declare -A VIA DIRECT
VERS=()
# per version: the cache's pollers (c) and, the same round, pollers straight
# at the plane (d)
for step in 1 2 3; do
	if [ "$step" = 1 ]; then V=$V1; else V=$(cluster "x$step" $((9000 + step))); fi
	VERS+=("$V")
	mapfile -t r < <(round "$CACHE_URL" c)
	VIA[$V]=${r[1]}
	diag "version $V, $N pollers through the cache: ${r[0]}"
	check_eq "version $V: all $N pollers through the cache reach it, without an error" "$V 0 0" \
		"$(echo "${r[0]}" | jq -r '"\(.version) \(.nbehind) \(.nerrors)"')"
	check "version $V: the plane answered $MAX_ORIGIN requests at most through the cache (${VIA[$V]})" \
		test "${VIA[$V]}" -ge 1 -a "${VIA[$V]}" -le "$MAX_ORIGIN"
	mapfile -t r < <(round "$PLANE_URL" d)
	DIRECT[$V]=${r[1]}
	check_eq "version $V: all $N pollers straight at the plane reach it" "$V 0 0" \
		"$(echo "${r[0]}" | jq -r '"\(.version) \(.nbehind) \(.nerrors)"')"
	check_eq "version $V: the plane answered each of them ($N)" "$N" "${DIRECT[$V]}"
done
mapfile -t r < <(round "$CACHE_URL" c)
diag "nothing new, $N pollers with their ETag through the cache: ${r[0]}"
check_eq "nothing new: all $N get 304 through the cache" "$N" "$(echo "${r[0]}" | jq -r '.status["304"]')"
check "nothing new: the plane answered $MAX_ORIGIN requests at most (${r[1]})" test "${r[1]}" -le "$MAX_ORIGIN"
V3=${VERS[2]}
for V in "${VERS[@]}"; do
	diag "requests the plane saw for version $V: ${VIA[$V]} through the cache, ${DIRECT[$V]} without"
done

# revalidation would keep the statement nginx stored with the answer forever
cget st "$CACHE_URL" "node=st&version=$V3" >/dev/null
s0=$(statement_issued st)
check "the answer through the cache carries a statement" test -n "$s0" -a "$s0" != null
check "a statement served from the cache is renewed (a newer one within 10 s)" wait_until 10 renewed_after "$s0"

# ---- real tetherd pollers through the cache ----------------------------------------

# g1 long-polls (through to the plane); g2 polls every second, which the
# cache answers (--poll-wait 0 --poll-interval 1)
start_agent g1 --transport poll --plane "$CACHE_URL" --trust "$WORK/sign.pub" --backoff-max 1
start_agent g2 --transport poll --poll-wait 0 --poll-interval 1 --plane "$CACHE_URL" --trust "$WORK/sign.pub" \
	--backoff-max 1
check "two tetherd pollers through the cache reach version $V3 (verified)" wait_until 20 all_at "$V3" g1 g2
check "their ACKs reach the plane" wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/g1' | jq -e '.acked_version == $V3' &&
	curl -s '$PLANE_URL/v1/nodes/g2' | jq -e '.acked_version == $V3'"
V4=$(cluster d 9004)
check "a change reaches both through the cache" wait_until 20 all_at "$V4" g1 g2
check "and their ACKs of it the plane" wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/g1' | jq -e '.acked_version == $V4' &&
	curl -s '$PLANE_URL/v1/nodes/g2' | jq -e '.acked_version == $V4'"
g2_polls=$(grep -c 'GET /v1/config?node=g2&' "$WORK/cache-a/access.log" 2>/dev/null || echo 0)
sleep 3   # g2's next polls (the interval: no busy loop, and no long-poll)
g2_more=$(( $(grep -c 'GET /v1/config?node=g2&' "$WORK/cache-a/access.log" 2>/dev/null || echo 0) - g2_polls ))
check "g2 polls about once a second (between 2 and 5 polls in 3 s: $g2_more)" test "$g2_more" -ge 2 -a "$g2_more" -le 5
check "the cache answers g2's polls itself (HIT)" grep -q 'GET /v1/config?node=g2&.* cache=HIT' "$WORK/cache-a/access.log"
stop_pid "${APID[g1]}"
stop_pid "${APID[g2]}"

# ---- a secret is never kept --------------------------------------------------------

pem_pair tls   # KEYMARK: 16 characters of its private scalar
KEYMARK=$(sed -n 2p "$WORK/tls.key" | cut -c 49-)
VS=$(put secret/tls "{\"cert\":\"$PAIR_CERT\",\"key\":\"$PAIR_KEY\"}" | json .version)
n=$(polls)
s1=$(cget sec1 "$CACHE_URL" "node=sec1&version=$V4")
s2=$(cget sec2 "$CACHE_URL" "node=sec2&version=$V4")
check_eq "a push holding a secret comes through the cache" "200 $VS 200 $VS" "$s1 $(jq -r .version "$WORK/sec1.body") $s2 $(jq -r .version "$WORK/sec2.body")"
check "... with the key" grep -q "$KEYMARK" "$WORK/sec2.body"
check_eq "the plane marks it private, both times" "private private" \
	"$(header sec1 Cache-Control | cut -d, -f1) $(header sec2 Cache-Control | cut -d, -f1)"
check_eq "the cache did not keep it: MISS both times" "MISS MISS" "$(header sec1 X-Cache-Status) $(header sec2 X-Cache-Status)"
check_eq "the plane answered both" $((n + 2)) "$(polls)"
s1=$(cget sec3 "$CACHE_URL" "node=sec3&version=0")
s2=$(cget sec4 "$CACHE_URL" "node=sec4&version=0")
check_eq "a snapshot (it holds the secret) is not kept either" "200 private 200 private" \
	"$s1 $(header sec3 Cache-Control | cut -d, -f1) $s2 $(header sec4 Cache-Control | cut -d, -f1)"
check "the plane answered those too (none served from the cache)" test "$(header sec4 X-Cache-Status)" != HIT
V5=$(cluster e 9005)
cget sec5 "$CACHE_URL" "node=sec5&version=$VS" >/dev/null
cget sec6 "$CACHE_URL" "node=sec6&version=$VS" >/dev/null
check_eq "a later delta without the secret is shared again (public, then HIT)" "200 $V5 public MISS 200 $V5 public HIT" \
	"$(answer sec5) $(answer sec6)"
check_eq "no file of the cache holds the key" "" "$(grep -rl "$KEYMARK" "$CACHE_DIR" 2>/dev/null)"

# ---- long-poll: passed through, uncached ------------------------------------------

cget lp0 "$CACHE_URL" "node=lp0&version=$V5" >/dev/null
ET=$(header lp0 ETag)
n=$(polls)
cget lp1 "$CACHE_URL" "node=lp1&version=$V5&wait=10" -H "If-None-Match: $ET" >"$WORK/lp1.code" &
LP1=$!
track_pid $LP1
cget lp2 "$CACHE_URL" "node=lp2&version=$V5&wait=10" -H "If-None-Match: $ET" >"$WORK/lp2.code" &
LP2=$!
track_pid $LP2
check "two long-polls through the cache reach the plane" wait_until 5 polls_ge $((n + 2))
check_eq "and are held there while nothing changes" "" "$(cat "$WORK/lp1.code" "$WORK/lp2.code" 2>/dev/null)"
t0=$(date +%s%N)
V6=$(cluster f 9006)
check "a write answers both" wait_until 5 test -s "$WORK/lp1.code" -a -s "$WORK/lp2.code"
t1=$(date +%s%N)
wait $LP1 $LP2 2>/dev/null
untrack_pid $LP1
untrack_pid $LP2
diag "the long-polls were answered $(( (t1 - t0) / 1000000 )) ms after the write"
check_eq "each with the new version, not from the cache (BYPASS)" "200 $V6 BYPASS 200 $V6 BYPASS" \
	"$(cat "$WORK/lp1.code") $(answer lp1 | awk '{print $2, $4}') $(cat "$WORK/lp2.code") $(answer lp2 | awk '{print $2, $4}')"
cget lp3 "$CACHE_URL" "node=lp3&version=$V6" >/dev/null
ET=$(header lp3 ETag)
t0=$(date +%s%N)
code=$(cget lp4 "$CACHE_URL" "node=lp4&version=$V6&wait=1" -H "If-None-Match: $ET")
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check_eq "with nothing new, wait=1 ends in 304: the node's own If-None-Match reached the plane" "304 BYPASS" \
	"$code $(header lp4 X-Cache-Status)"
check "after the wait, not before (${ms} ms)" test "$ms" -ge 900

# ---- the plane down: the last answer ---------------------------------------------

cget dn0 "$CACHE_URL" "node=dn0&version=$V6" >/dev/null
stop_pid "$PLANE_PID"
stale_served() {
	cget dn1 "$CACHE_URL" "node=dn1&version=$V6" >/dev/null
	[ "$(answer dn1)" = "200 $V6 public STALE" ]
}
check "with the plane down, the cache serves its last answer (STALE)" wait_until 10 stale_served

# ---- cache isolation: a staged rollout in progress ---------------------------------

start_plane b --rollout staged --stages 50,100 --bake 1 --heartbeat 1 --ack-timeout 120
start_cache cache-b "$PLANE_PORT"
W1=$(cluster a 9101)
check "with no node connected, the first rollout completes at once" \
	wait_until 15 ro_is ".id == 1 and .state == \"completed\""
# the two nodes poll the plane itself once (a node the cache answers is
# unknown to the plane) and keep doing so until the rollout starts: its
# members are the nodes connected at its start
seen_direct() {
	cget ca0 "$PLANE_URL" "node=ca&version=$W1" >/dev/null
	cget nb0 "$PLANE_URL" "node=nb&version=$W1" >/dev/null
}
seen_direct
cget ca1 "$CACHE_URL" "node=ca&version=$W1" >/dev/null
cget nb1 "$CACHE_URL" "node=nb&version=$W1" >/dev/null
check_eq "before the rollout both share the answer (public, MISS then HIT)" "200 $W1 public MISS 200 $W1 public HIT" \
	"$(answer ca1) $(answer nb1)"
ETW1=$(header nb1 ETag)
seen_direct
W2=$(cluster b 9102)
started() {
	seen_direct
	ro_is ".id == 2 and .state == \"in_progress\""
}
check "the change starts rollout 2" wait_until 15 started
check_eq "with both nodes as members, stage 1 of 2 (50 %)" "2 1" "$(ro '"\(.members) \(.stage_index)"')"
if [ "$(node_field ca .target_version)" = "$W2" ]; then
	CANARY=ca NEIGH=nb
else
	CANARY=nb NEIGH=ca
fi
check_eq "one member ($CANARY) targets $W2, the other ($NEIGH) the baseline $W1" "$W2 $W1" \
	"$(node_field "$CANARY" .target_version) $(node_field "$NEIGH" .target_version)"
canary_moved() {
	cget cm "$CACHE_URL" "node=$CANARY&version=$W1" >/dev/null
	[ "$(answer cm | cut -d' ' -f1,2)" = "200 $W2" ]
}
check "through the cache the canary gets $W2 (once the answer kept from before the rollout expired)" \
	wait_until 10 canary_moved

# poll as both, many times, in both orders, plain and with the shared ETag,
# then both at once (a new entry: nginx's cache lock)
bad=""
expect() {
	local who=$1 want=$2 got=$3
	case $got in
	"$want") ;;
	*) bad="$bad [$who: $got, want $want]" ;;
	esac
}
for i in $(seq 1 20); do
	if [ $((i % 2)) = 0 ]; then order="$CANARY $NEIGH"; else order="$NEIGH $CANARY"; fi
	for who in $order; do
		if [ $((i % 4)) -lt 2 ]; then
			cget iso "$CACHE_URL" "node=$who&version=$W1" >/dev/null
			[ "$who" = "$CANARY" ] && want="200 $W2 private" || want="200 $W1 private"
		else
			# nginx does not pass a client's If-None-Match on (it answers it
			# from an entry it may use, and there is none it may): the
			# neighbour gets its baseline as an empty push, not a 304
			cget iso "$CACHE_URL" "node=$who&version=$W1" -H "If-None-Match: $ETW1" >/dev/null
			[ "$who" = "$CANARY" ] && want="200 $W2 private" || want="200 $W1 private"
		fi
		got=$(answer iso)
		expect "$who #$i" "$want" "${got% *}"
		[ "${got##* }" != HIT ] || bad="$bad [$who #$i: served from the cache]"
	done
done
for i in $(seq 1 10); do
	cget "par-c" "$CACHE_URL" "node=$CANARY&version=0&sub=cluster/" >/dev/null &
	p1=$!
	cget "par-n" "$CACHE_URL" "node=$NEIGH&version=0&sub=cluster/" >/dev/null &
	p2=$!
	wait $p1 $p2
	expect "$CANARY at once #$i" "200 $W2 private" "$(answer par-c | cut -d' ' -f1-3)"
	expect "$NEIGH at once #$i" "200 $W1 private" "$(answer par-n | cut -d' ' -f1-3)"
	check_snap=$(jq -r '[.upserts[] | select(.name == "cluster/b")] | length' "$WORK/par-n.body")
	[ "$check_snap" = 0 ] || bad="$bad [$NEIGH at once #$i: its snapshot holds cluster/b]"
done
check_eq "60 polls through the cache: each node got only its own target, never a shared answer" "" "$bad"

# the canary ACKs (through the cache: passed through) and the rollout moves
# on; then the neighbour; once it completes, answers are shared again
cget ack-c "$CACHE_URL" "node=$CANARY&version=$W1" >/dev/null
NONCE=$(jq -r .nonce "$WORK/ack-c.body")
code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST --data-binary \
	"{\"node\":\"$CANARY\",\"version\":$W2,\"nonce\":\"$NONCE\",\"status\":\"ack\"}" "$CACHE_URL/v1/ack")
check_eq "the canary's ACK through the cache is accepted" 200 "$code"
check "the rollout reaches stage 2 (100 %)" wait_until 15 ro_is '.stage_index == 2'
neigh_moved() {
	cget nm "$CACHE_URL" "node=$NEIGH&version=$W1" >/dev/null
	[ "$(answer nm | cut -d' ' -f1-3)" = "200 $W2 private" ]
}
check "the neighbour now gets $W2 through the cache, still private" wait_until 10 neigh_moved
NONCE=$(jq -r .nonce "$WORK/nm.body")
curl -sS -o /dev/null -X POST --data-binary \
	"{\"node\":\"$NEIGH\",\"version\":$W2,\"nonce\":\"$NONCE\",\"status\":\"ack\"}" "$CACHE_URL/v1/ack"
check "rollout 2 completes" wait_until 15 ro_is '.id == 2 and .state == "completed"'
shared_again() {
	cget sa1 "$CACHE_URL" "node=$CANARY&version=$W2" >/dev/null
	cget sa2 "$CACHE_URL" "node=$NEIGH&version=$W2" >/dev/null
	[ "$(answer sa1 | cut -d' ' -f1-3) $(answer sa2)" = "200 $W2 public 200 $W2 public HIT" ]
}
check "after the rollout both share the answer again (public, then HIT)" wait_until 10 shared_again

done_testing
