#!/usr/bin/env bash
# t0992-opts-plane.sh: the plane validates route and cluster options
# before anything is written (common/resource_opts.c, the agent's check
# too): each refused field, through tetherctl put, is a refusal naming the
# resource and the field and what to do, and nothing is stored; put
# --dry-run says the same with exit 4; a route with every option and a
# cluster with both are accepted and read back as written; unknown fields
# inside an option's object are refused with the known ones (and taken
# with --allow-unknown-fields).
. "$(dirname "$0")/lib.sh"

need_cmd jq

run() {
	"$CTL_BIN" --plane "$PLANE_URL" "$@" >"$WORK/ctl.out" 2>"$WORK/ctl.err" </dev/null
	RC=$?
	OUT=$(cat "$WORK/ctl.out")
	ERR=$(cat "$WORK/ctl.err")
}
# refused NAME BODY MESSAGE: put is refused (non-zero) saying MESSAGE, nothing stored
refused() {
	local v0
	v0=$(plane_version)
	printf '%s' "$2" >"$WORK/body"
	run put "$1" "$WORK/body"
	if [ "$RC" != 0 ] && [ "${ERR#*"$1: $3"}" != "$ERR" ] && [ "$(plane_version)" = "$v0" ]; then
		ok "$1 $2: refused: $3"
	else
		not_ok "$1 $2: refused: $3"
		diag "exit $RC; stderr: $ERR; version $v0 -> $(plane_version)"
	fi
}

trap cleanup EXIT
start_plane p
ctl apply - >/dev/null <<'EOF' || bail "cannot load the base"
{"upserts":[
 {"name":"cluster/c","body":{"endpoints":[{"address":"127.0.0.1","port":9001}]}},
 {"name":"listener/l","body":{"port":8080}}
]}
EOF
R='"listener":"l","cluster":"c","path":"/api"'

refused route/r "{$R,\"timeout\":5}" "timeout: must be an object with connect, read and send in seconds (each optional)"
refused route/r "{$R,\"timeout\":{\"read\":0}}" "timeout.read: must be a number of seconds in 0.001..86400"
refused route/r "{$R,\"timeout\":{\"connect\":86401}}" "timeout.connect: must be a number of seconds in 0.001..86400"
refused route/r "{$R,\"timeout\":{\"send\":\"5s\"}}" "timeout.send: must be a number of seconds in 0.001..86400"
refused route/r "{$R,\"timeout\":{\"raed\":1}}" "timeout: unknown field 'raed' (known: connect, read, send)"
refused route/r "{$R,\"strip_prefix\":\"yes\"}" "strip_prefix: must be true or false"
refused route/r '{"listener":"l","cluster":"c","strip_prefix":true}' "strip_prefix: needs a path other than /"
refused route/r '{"listener":"l","cluster":"c","path":"/","strip_prefix":true}' "strip_prefix: needs a path other than /"
refused route/r "{$R,\"rewrite\":\"new\"}" "rewrite: must be a path starting with '/' of URL path characters (at most 1024)"
refused route/r "{$R,\"rewrite\":\"/a b\"}" "rewrite: must be a path starting with '/' of URL path characters (at most 1024)"
refused route/r "{$R,\"rewrite\":\"/new\",\"strip_prefix\":true}" "rewrite: cannot go with strip_prefix: drop one (rewrite '/' strips the prefix)"
refused route/r "{$R,\"rewrite\":\"/a%20b\"}" "rewrite: '%' is not allowed (nginx would encode it again, haproxy would not)"
refused route/r "{$R,\"headers\":{\"request\":{\"set\":{\"Transfer-Encoding\":\"chunked\"}}}}" \
	"headers.request.set: Transfer-Encoding frames the message: the proxy sets it from the body; drop it"
refused route/r "{$R,\"headers\":{\"response\":{\"remove\":[\"Content-Length\"]}}}" \
	"headers.response.remove[0]: Content-Length frames the message: the proxy sets it from the body; drop it"
refused route/r "{$R,\"headers\":[]}" "headers: must be an object with request and response (each optional)"
refused route/r "{$R,\"headers\":{\"request\":{\"set\":{\"X-A\":\"a;b\"}}}}" \
	"headers.request.set.X-A: must be a string of 1 to 1024 printable ASCII characters without \" \\ \$ ; { } ' (to drop a header, remove it)"
refused route/r "{$R,\"headers\":{\"request\":{\"set\":{\"X-A\":\"\$host\"}}}}" \
	"headers.request.set.X-A: must be a string of 1 to 1024 printable ASCII characters without"
refused route/r "{$R,\"headers\":{\"response\":{\"set\":{\"X A\":\"v\"}}}}" \
	"headers.response.set: 'X A' is not a header name (RFC 7230 token characters, at most 128)"
refused route/r "{$R,\"headers\":{\"request\":{\"set\":{\"X-A\":\"v\"},\"remove\":[\"x-a\"]}}}" \
	"headers.request: 'X-A' is both set and removed: drop it from one of them"
refused route/r "{$R,\"headers\":{\"request\":{\"remove\":[\"Host\"]}}}" "headers.request.remove[0]: Host cannot be removed (set it instead)"
refused route/r "{$R,\"headers\":{\"request\":{\"set\":{\"X-A\":\"1\",\"x-a\":\"2\"}}}}" \
	"headers.request.set: 'x-a' is set twice (header names have no case)"
many=$(for i in $(seq 1 65); do printf '"H%d",' "$i"; done)
refused route/r "{$R,\"headers\":{\"response\":{\"remove\":[${many%,}]}}}" "headers.response.remove: at most 64 headers"
refused route/r "{$R,\"headers\":{\"request\":{\"add\":{}}}}" "headers.request: unknown field 'add' (known: set, remove)"
refused route/r "{$R,\"websocket\":1}" "websocket: must be true or false"
refused route/r "{$R,\"retries\":11}" "retries: must be an integer in 0..10"
refused route/r "{$R,\"retries\":1.5}" "retries: must be an integer in 0..10"
refused route/r "{$R,\"max_body\":-1}" "max_body: must be an integer of bytes in 0..1099511627776 (0: unlimited)"
refused route/r "{$R,\"max_body\":1099511627777}" "max_body: must be an integer of bytes in 0..1099511627776 (0: unlimited)"
refused route/r "{$R,\"retires\":1}" "unknown field 'retires' (did you mean 'retries'?)"
E='"endpoints":[{"address":"127.0.0.1","port":9001}]'
refused cluster/c "{$E,\"health\":{\"max_fails\":0}}" "health.max_fails: must be an integer in 1..1000"
refused cluster/c "{$E,\"health\":{\"fail_timeout\":0.5}}" "health.fail_timeout: must be an integer of seconds in 1..86400"
refused cluster/c "{$E,\"health\":{\"fails\":1}}" "health: unknown field 'fails' (known: max_fails, fail_timeout)"
refused cluster/c "{$E,\"health\":true}" "health: must be an object with max_fails and fail_timeout (each optional)"
refused cluster/c "{$E,\"keepalive\":10001}" "keepalive: must be an integer in 0..10000"

printf '{%s,"retries":11}' "$R" >"$WORK/bad.json"
run put route/r "$WORK/bad.json" --dry-run
check_eq "put --dry-run of a bad option: exit 4" 4 "$RC"
check "... with the plane's reason" grep -qF "route/r: retries: must be an integer in 0..10" "$WORK/ctl.err"

FULL='{"listener":"l","cluster":"c","path":"/api","timeout":{"connect":0.25,"read":30,"send":30},
 "strip_prefix":true,"headers":{"request":{"set":{"Host":"api.internal","X-Env":"prod 100%"},"remove":["X-Debug"]},
 "response":{"set":{"X-Frame-Options":"DENY"},"remove":["Server"]}},"websocket":true,"retries":2,"max_body":1048576}'
printf '%s' "$FULL" >"$WORK/full.json"
run put route/full "$WORK/full.json" --dry-run
check_eq "put --dry-run of a route with every option: exit 3 (would change)" 3 "$RC"
run put route/full "$WORK/full.json"
check_eq "a route with every option is stored" 0 "$RC"
check_eq "and reads back as written" "$(jq -cS . "$WORK/full.json")" "$(curl -s "$PLANE_URL/v1/resources/route/full" | jq -cS '.body // .')"
printf '{%s,"health":{"max_fails":3,"fail_timeout":30},"keepalive":16}' "$E" >"$WORK/cl.json"
run put cluster/c "$WORK/cl.json"
check_eq "a cluster with health and keepalive is stored" 0 "$RC"
rewrite_ok='{"listener":"l","cluster":"c","rewrite":"/v2/"}'
printf '%s' "$rewrite_ok" >"$WORK/rw.json"
run put route/rw "$WORK/rw.json"
check_eq "a rewrite on a route without a path (its prefix is /) is stored" 0 "$RC"

stop_pid "$PLANE_PID" TERM
start_plane p2 --allow-unknown-fields
ctl apply - >/dev/null <<'EOF' || bail "cannot load the base"
{"upserts":[
 {"name":"cluster/c","body":{"endpoints":[{"address":"127.0.0.1","port":9001}]}},
 {"name":"listener/l","body":{"port":8080}}
]}
EOF
printf '{%s,"timeout":{"read":1,"idle":5}}' "$R" >"$WORK/idle.json"
run put route/r "$WORK/idle.json"
check_eq "--allow-unknown-fields: an unknown field inside timeout is taken" 0 "$RC"
printf '{%s,"timeout":{"read":-1,"idle":5}}' "$R" >"$WORK/idle.json"
run put route/r "$WORK/idle.json"
check "... but a known one out of range is still refused" grep -qF "route/r: timeout.read: must be a number of seconds in 0.001..86400" "$WORK/ctl.err"
done_testing
