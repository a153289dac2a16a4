#!/usr/bin/env bash
# t0995-snippet-proxies.sh: snippets in a real nginx, then a real haproxy
# (issue 28, 3). nginx: a listener's snippet in every server of the
# listener (a header on the paths no location of ours overrides), a
# route's in its location (its header, and an `if` that answers DELETE with
# 405, on that route only), a cluster's in its upstream (keepalive, in the
# live configuration, and nginx takes it); then a snippet nginx -t refuses
# (an unknown directive) is NACKed naming "route/NAME: snippet.nginx: "
# then nginx's words, the agent stays, nginx keeps serving, and a good push
# after it applies. haproxy: a route's http-response rule acts on that
# route only (not on the "/" route nor on a longer path's route that
# shares its prefix), an http-request rule of a route (return 418) too, a
# listener's rule on every route, a cluster's in its backend (a header
# set there); a snippet haproxy -c refuses is NACKed naming the route and
# snippet.haproxy, and haproxy keeps serving.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx haproxy node jq ss curl

HAP_PIDFILE=$WORK/haproxy.pid
trap 'stop_haproxy; t_cleanup' EXIT

# header NAME PATH [CURL ARGS]: the value of response header NAME (lower case) for PATH
header() {
	local name=$1 path=$2
	shift 2
	curl -s --max-time 3 -D - -o /dev/null "$@" "http://127.0.0.1:$LMAIN$path" |
		tr -d '\r' | awk -v h="$name:" 'tolower($1) == h {sub(/^[^:]*: */, ""); print}'
}
header_is() {
	[ "$(header "$2" "$3")" = "$1" ]
}
nack_error() {
	"$CTL_BIN" --plane "$PLANE_URL" nodes --json | jq -r --arg n "$1" '.[] | select(.node == $n) | .last_nack.error // empty'
}

start_tool ba backend.mjs 0 A
PA=$TOOL_PORT
free_port LMAIN
free_port MARK
free_port HMARK

start_plane p --heartbeat 1

# ---- nginx -------------------------------------------------------------------------------------
OUT=$WORK/ng.out
write_nginx_conf "$OUT"
start_nginx
jq -n --argjson pa "$PA" --argjson lm "$LMAIN" '{upserts:[
 {name:"cluster/a", body:{endpoints:[{address:"127.0.0.1", port:$pa}], snippet:{nginx:"keepalive 4;"}}},
 {name:"listener/main", body:{address:"127.0.0.1", port:$lm,
   snippet:{nginx:"add_header X-Listener-Snip on always;", haproxy:"http-response set-header X-Listener-Snip on"}}},
 {name:"route/root", body:{listener:"main", path:"/", cluster:"a"}},
 {name:"route/api", body:{listener:"main", path:"/api", cluster:"a",
   snippet:{nginx:"add_header X-Route-Snip api always;\nif ($request_method = DELETE) {\n    return 405;\n}",
            haproxy:"http-response set-header X-Route-Snip api"}}},
 {name:"route/apiv2", body:{listener:"main", path:"/api/v2", cluster:"a"}}
]}' >"$WORK/base.json"
ctl apply "$WORK/base.json" >/dev/null || bail "cannot load the configuration"
V=$(plane_version)
start_agent ng --consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" --reload-timeout 2 \
	--backoff-min 0.1 --backoff-max 1
check "the nginx agent applies version $V" wait_until 20 agent_at ng "$V"
check "traffic through nginx reaches A" wait_until 10 answers "A /x" "$LMAIN" /x
check_eq "the listener's snippet: its header on a path of no route's own header" on "$(header x-listener-snip /x)"
check_eq "the route's snippet: its header on its route" api "$(header x-route-snip /api/x)"
check_eq "... not on the '/' route" "" "$(header x-route-snip /x)"
check_eq "... not on the longer path's route" "" "$(header x-route-snip /api/v2/x)"
check "the route's if: DELETE on its route is 405" code_is 405 "$LMAIN" /api/x -X DELETE
check "... and passes elsewhere (A answers)" code_is 200 "$LMAIN" /x -X DELETE
upstream_a=$(awk '/^upstream tether_c_a /{on=1} on{print} on && /^}/{exit}' "$OUT/current/tether.conf")
check "the cluster's snippet sits in its upstream, between the markers" \
	grep -Pzq '#tether-snippet cluster/a snippet.nginx\n    keepalive 4;\n    #tether-snippet-end\n}' <<<"$upstream_a"

# a snippet nginx -t refuses
H=$(hups)
C=$(current)
V0=$V
jq -n '{listener:"main", path:"/bad", cluster:"a", snippet:{nginx:"add_header X-A 1;\nadd_headr X-B 2;"}}' >"$WORK/bad.json"
ctl put route/bad "$WORK/bad.json" >/dev/null || bail "the plane refused route/bad"
VBAD=$(plane_version)
check "the agent NACKs version $VBAD" wait_until 15 has_nack ng "$VBAD"
err=$(nack_error ng)
check "the NACK names the route and snippet.nginx, then nginx's words ($err)" \
	sh -c 'case "$1" in "route/bad: snippet.nginx: "*"unknown directive"*"add_headr"*) ;; *) exit 1 ;; esac' _ "$err"
check_eq "the agent stays at version $V0" "$V0" "$(st ng version)"
check_eq "current is unchanged" "$C" "$(current)"
check_eq "nginx was not reloaded" "$H" "$(hups)"
check "nginx keeps serving A, with the snippets" sh -c "[ \"\$(curl -s --max-time 3 http://127.0.0.1:$LMAIN/x)\" = 'A /x' ]"
check_eq "... the route's header still there" api "$(header x-route-snip /api/x)"
ctl rm route/bad >/dev/null
V=$(plane_version)
check "a good push after it applies (version $V)" wait_until 15 agent_at ng "$V"

# nginx and its agent go; haproxy takes the same listener
stop_pid "${APID[ng]}"
stop_nginx

# ---- haproxy -----------------------------------------------------------------------------------
# a route whose request rule answers 418 (on /tea only), and a rule in the
# cluster's backend
jq -n '{listener:"main", path:"/tea", cluster:"a",
   snippet:{haproxy:"http-request return status 418 content-type text/plain string teapot"}}' |
	ctl put route/tea - >/dev/null || bail "cannot add route/tea"
jq -n --argjson pa "$PA" '{endpoints:[{address:"127.0.0.1", port:$pa}],
   snippet:{nginx:"keepalive 4;", haproxy:"http-response set-header X-Cluster-Snip a"}}' |
	ctl put cluster/a - >/dev/null || bail "cannot update cluster/a"
V=$(plane_version)
write_haproxy_base "$WORK/base.cfg"
OUT=$WORK/h.out
start_agent h --consumer haproxy --pidfile "$HAP_PIDFILE" --marker "127.0.0.1:$HMARK" \
	--base-config "$WORK/base.cfg" --reload-timeout 2 --backoff-max 1
wait_until 20 agent_at h "$V" || bail "the haproxy agent did not apply version $V"
check "the live tether.cfg passes haproxy -c" haproxy -c -q -f "$WORK/base.cfg" -f "$OUT/current/tether.cfg"
haproxy -W -p "$HAP_PIDFILE" -f "$WORK/base.cfg" -f "$OUT/current/" >>"$WORK/haproxy.log" 2>&1 &
track_pid $!
check "traffic through haproxy reaches A" wait_until 10 answers "A /x" "$LMAIN" /x
check_eq "a route's http-response rule: on its route" api "$(header x-route-snip /api/x)"
check_eq "... not on the '/' route" "" "$(header x-route-snip /x)"
check_eq "... not on /api/v2, another route sharing its prefix" "" "$(header x-route-snip /api/v2/x)"
check "a route's http-request rule: /tea answers 418" code_is 418 "$LMAIN" /tea
check_eq "... with its body" teapot "$(get "$LMAIN" /tea)"
check "... and no other route does" code_is 200 "$LMAIN" /api/tea
check_eq "the listener's rule on every route (/x)" on "$(header x-listener-snip /x)"
check_eq "... (/api/v2/x)" on "$(header x-listener-snip /api/v2/x)"
check_eq "the cluster's rule in its backend" a "$(header x-cluster-snip /x)"

# a snippet haproxy -c refuses
V0=$V
C=$(readlink "$OUT/current")
jq -n '{listener:"main", path:"/bad", cluster:"a", snippet:{haproxy:"http-response set-headr X-B 2"}}' |
	ctl put route/bad - >/dev/null || bail "the plane refused route/bad"
VBAD=$(plane_version)
check "the agent NACKs version $VBAD" wait_until 15 has_nack h "$VBAD"
err=$(nack_error h)
check "the NACK names the route and snippet.haproxy, then haproxy's words ($err)" \
	sh -c 'case "$1" in "route/bad: snippet.haproxy: "*"set-headr"*) ;; *) exit 1 ;; esac' _ "$err"
check_eq "the agent stays at version $V0" "$V0" "$(st h version)"
check_eq "current is unchanged" "$C" "$(readlink "$OUT/current")"
check "haproxy keeps serving A" answers "A /x" "$LMAIN" /x
check_eq "... with the route's rule" api "$(header x-route-snip /api/x)"
done_testing
