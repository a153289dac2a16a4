#!/usr/bin/env bash
# t0330-reload-storms.sh: no reload storms, with a real nginx. With
# --min-reload-interval 1, 50 writes in a tight loop make far fewer reloads
# than writes (SIGHUPs in nginx's error log, "applied version" lines in the
# agent's log, one reload per apply), pushes are merged ("pushes merged"),
# the agent ends at the plane's last version, the merged applies carry the
# last write of every resource (the served content shows it), and nginx's
# worker generations stay bounded (old workers drain). With
# --min-reload-interval 0 a burst arriving during a reload is still merged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node ss

# ---- helpers of this test ---------------------------------------------------

trap t_cleanup EXIT

OUT=$WORK/s.out
marker() {
	curl -s -m 2 "http://127.0.0.1:$MARK/tether-generation"
}
# since FILE LINE PATTERN: lines after LINE of FILE that match PATTERN
since() {
	tail -n +"$(($2 + 1))" "$1" | grep -c -- "$3"
}
nlines() {
	wc -l <"$1"
}
# workers: nginx worker processes of our master, "live shutting-down"
workers() {
	local live=0 down=0 args
	while IFS= read -r args; do
		case $args in
		*"worker process is shutting down"*) down=$((down + 1)) ;;
		*"worker process"*) live=$((live + 1)) ;;
		esac
	done < <(ps --ppid "$NGINX_PID" -o args= 2>/dev/null)
	echo "$live $down"
}
workers_settled() {
	[ "$(workers)" = "1 0" ]
}
# at VERSION: the agent runs VERSION and nginx serves its generation
at() {
	agent_at s "$1" && marker_is_current
}
get() {
	curl -s -m 3 "http://127.0.0.1:$LP$1"
}
# write_route K I: write I of the storm, to route/rK: a path of its own
# and cluster a or b by I's parity
route_body() {
	local k=$1 i=$2
	printf '{"listener":"web","host":"*","path":"/r%s/w%s","cluster":"%s"}' "$k" "$i" \
		"$([ $((i % 2)) = 0 ] && echo a || echo b)"
}
backend_for() {
	[ $(($1 % 2)) = 0 ] && echo b1 || echo b2
}
# storm N FIRST: N writes in a tight loop, write i (from FIRST) to route/r(i%5);
# sets STORM_VERSIONS (the versions the plane answered) and STORM_MS
storm() {
	local n=$1 first=$2 i v t0
	STORM_VERSIONS=""
	t0=$(date +%s%N)
	for i in $(seq "$first" $((first + n - 1))); do
		v=$(put "route/r$((i % 5))" "$(route_body $((i % 5)) "$i")" | jq -r .version)
		STORM_VERSIONS="$STORM_VERSIONS $v"
	done
	STORM_MS=$((($(date +%s%N) - t0) / 1000000))
}
# check_last_writes FIRST N DESCRIPTION: every route serves its last write of
# the storm (writes FIRST..FIRST+N-1), and its write before is gone
check_last_writes() {
	local first=$1 n=$2 k i bad=""
	for k in 0 1 2 3 4; do
		i=$((first + n - 1))
		while [ $((i % 5)) != "$k" ]; do i=$((i - 1)); done
		[ "$(get "/r$k/w$i")" = "$(backend_for "$i") /r$k/w$i" ] || bad="$bad r$k:w$i='$(get "/r$k/w$i")'"
		[ "$(curl -s -o /dev/null -w '%{http_code}' -m 3 "http://127.0.0.1:$LP/r$k/w$((i - 5))")" = 404 ] ||
			bad="$bad r$k:w$((i - 5))-still-routed"
	done
	check_eq "$3" "" "$bad"
}

# ---- backends, nginx, the plane, the agent --------------------------------------
start_tool b1 backend.mjs 0 b1
B1=$TOOL_PORT
start_tool b2 backend.mjs 0 b2
B2=$TOOL_PORT
free_port LP
free_port MARK
diag "ports: backends $B1 $B2, listener $LP, marker $MARK"

write_nginx_conf "$OUT"
start_nginx

start_plane p --heartbeat 1
ctl apply - >/dev/null <<EOF || bail "cannot load the initial configuration"
{"upserts":[
 {"name":"cluster/a","body":{"endpoints":[{"address":"127.0.0.1","port":$B1}]}},
 {"name":"cluster/b","body":{"endpoints":[{"address":"127.0.0.1","port":$B2}]}},
 {"name":"listener/web","body":{"address":"127.0.0.1","port":$LP}},
 {"name":"route/r0","body":{"listener":"web","host":"*","path":"/r0/init","cluster":"a"}},
 {"name":"route/r1","body":{"listener":"web","host":"*","path":"/r1/init","cluster":"a"}},
 {"name":"route/r2","body":{"listener":"web","host":"*","path":"/r2/init","cluster":"a"}},
 {"name":"route/r3","body":{"listener":"web","host":"*","path":"/r3/init","cluster":"a"}},
 {"name":"route/r4","body":{"listener":"web","host":"*","path":"/r4/init","cluster":"a"}}
]}
EOF
V1=$(plane_version)
AGENT_ARGS=(--consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" --backoff-max 1)
ALOG=s1 start_agent s "${AGENT_ARGS[@]}" --min-reload-interval 1
check "the agent (--min-reload-interval 1) applies version $V1 and nginx serves it" wait_until 20 at "$V1"
check_eq "traffic reaches the backend" "b1 /r3/init" "$(get /r3/init)"
check "nginx runs one worker" wait_until 10 workers_settled

# ---- a storm with --min-reload-interval 1 ------------------------------------------
H0=$(hups)
A0=$(nlines "$WORK/s1.log")
storm 50 0
VLAST=$(plane_version)
diag "50 writes in ${STORM_MS} ms: versions$(echo "$STORM_VERSIONS" | awk '{print " " $1 " .. " $NF}')"
check_eq "the plane made 50 versions, one per write" "$(seq $((V1 + 1)) $((V1 + 50)) | xargs)" "${STORM_VERSIONS# }"
check_eq "the plane ends at version $((V1 + 50))" "$((V1 + 50))" "$VLAST"
check "the agent ends at the plane's last version $VLAST, nginx serving it" wait_until 30 at "$VLAST"
W_AFTER=$(workers)
HUPS=$(($(hups) - H0))
APPLIES=$(since "$WORK/s1.log" "$A0" 'applied version')
MERGED=$(since "$WORK/s1.log" "$A0" 'pushes merged')
diag "storm: $HUPS SIGHUPs, $APPLIES applies, $MERGED of them merged; workers (live, shutting down) at the end: $W_AFTER"
diag "$(tail -n +"$((A0 + 1))" "$WORK/s1.log" | grep 'applied version')"
check "nginx was reloaded at least once" test "$HUPS" -ge 1
check "far fewer reloads than writes ($HUPS SIGHUPs for 50 writes)" test "$HUPS" -le 12
check "reloads spaced by the minimum interval: at most one a second, plus one ($HUPS in a ${STORM_MS} ms storm)" \
	test "$HUPS" -le $((STORM_MS / 1000 + 2))
check "far fewer applies than writes ($APPLIES)" test "$APPLIES" -ge 1 -a "$APPLIES" -le 12
check_eq "one reload per apply" "$APPLIES" "$HUPS"
check "pushes were merged ($MERGED applies say so)" test "$MERGED" -ge 1
check "the last apply is of version $VLAST" sh -c "tail -n +$((A0 + 1)) '$WORK/s1.log' | grep 'applied version' | tail -n 1 | grep -q 'applied version $VLAST '"
check "no push was refused" sh -c "! tail -n +$((A0 + 1)) '$WORK/s1.log' | grep -q 'refused'"
check_eq "status.json says synced" synced "$(st s state)"
check "the plane records version $VLAST ACKed with lag 0" wait_until 10 sh -c \
	"curl -s '$PLANE_URL/v1/nodes/s' | jq -e '.acked_version == $VLAST and .lag == 0'"
check_last_writes 0 50 "every route serves its last write of the storm (merged applies carry every change)"
check "nginx's worker generations are bounded right after the storm (live + shutting down = $W_AFTER)" \
	test $(($(echo "$W_AFTER" | awk '{print $1 + $2}'))) -le $((HUPS + 1))
check "nginx's old workers drain: one live worker, none shutting down" wait_until 10 workers_settled
check_eq "nginx's master is the same process" "$NGINX_PID" "$(cat "$WORK/nginx.pid")"
check_eq "no reload since the agent reached $VLAST" "$HUPS" "$(($(hups) - H0))"

# ---- --min-reload-interval 0: a burst arriving during a reload is merged ----------
stop_pid "${APID[s]}" TERM
check_eq "the first agent exits 0" 0 "$?"
ALOG=s2 start_agent s "${AGENT_ARGS[@]}" --min-reload-interval 0
check "the agent restarted with --min-reload-interval 0 is at $VLAST" wait_until 20 at "$VLAST"
check "the restarted agent found its generation already live" \
	wait_until 10 grep -q "current already serves version $VLAST" "$WORK/s2.log"
check_eq "so it did not reload nginx" "$HUPS" "$(($(hups) - H0))"
H0=$(hups)
A0=$(nlines "$WORK/s2.log")
storm 50 50
VLAST=$(plane_version)
diag "50 writes in ${STORM_MS} ms"
check "the agent ends at the plane's last version $VLAST, nginx serving it" wait_until 30 at "$VLAST"
HUPS=$(($(hups) - H0))
APPLIES=$(since "$WORK/s2.log" "$A0" 'applied version')
MERGED=$(since "$WORK/s2.log" "$A0" 'pushes merged')
diag "burst: $HUPS SIGHUPs, $APPLIES applies, $MERGED of them merged"
check "writes arriving during a reload were merged ($MERGED merged applies)" test "$MERGED" -ge 1
check "fewer reloads than writes ($HUPS for 50)" test "$HUPS" -ge 1 -a "$HUPS" -lt 50
check_eq "one reload per apply" "$APPLIES" "$HUPS"
check "no push was refused" sh -c "! tail -n +$((A0 + 1)) '$WORK/s2.log' | grep -q 'refused'"
check_last_writes 50 50 "every route serves its last write of the burst"
check "nginx's old workers drain" wait_until 10 workers_settled

# ---- the end -------------------------------------------------------------------
stop_pid "${APID[s]}" TERM
check_eq "the agent exits 0 on SIGTERM" 0 "$?"
check "nginx logged no emergency or alert" sh -c "! grep -E '\\[(emerg|alert)\\]' '$WORK/nginx-error.log'"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
