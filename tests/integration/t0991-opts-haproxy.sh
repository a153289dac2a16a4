#!/usr/bin/env bash
# t0991-opts-haproxy.sh: route and cluster options through a real haproxy
# (master-worker) driven by tetherd (lib-opts.sh's scenario, as t0990 with
# nginx): timeout.read turns a slow backend into a 504,
# timeout.connect gives up on an endpoint that never accepts, strip_prefix and
# rewrite change the path the backend sees (replace-path, after the route
# is named, so routing still sees the path as it came), headers set
# and removed are seen by backend and client (a Host set does not change
# the route), a websocket upgrades and echoes, retries (a backend of the
# route's own, tether_r_NAME) reach the live endpoint past a dead one,
# max_body answers 413 on the Content-Length, keepalive 0 takes a
# connection per request and 4 reuses them, health marks a dead endpoint
# down after at most max_fails failures (without it, failures go on); and
# the lines each option renders to.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
. "$(dirname "$0")/lib-opts.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd haproxy node ss python3

HAP_PIDFILE=$WORK/haproxy.pid
trap 'stop_haproxy; cleanup' EXIT

opts_backends
free_port LP
free_port MP
OUT=$WORK/h.out
write_haproxy_base "$WORK/base.cfg"
start_plane p --heartbeat 1
start_agent h --consumer haproxy --pidfile "$HAP_PIDFILE" --marker "127.0.0.1:$MP" \
	--base-config "$WORK/base.cfg" --reload-timeout 5 --backoff-max 1
wait_until 10 test -f "$OUT/current/tether.cfg" || bail "the agent made no first generation"
haproxy -W -p "$HAP_PIDFILE" -f "$WORK/base.cfg" -f "$OUT/current/" >>"$WORK/haproxy.log" 2>&1 &
track_pid $!
cur_gen() {
	readlink "$OUT/current" 2>/dev/null | sed 's/^gen-//'
}
wait_until 10 sh -c "[ \"\$(curl -s -m 2 http://127.0.0.1:$MP/tether-generation)\" = '$(cur_gen)' ]" ||
	bail "haproxy does not serve the marker"
live_version() {
	agent_at h "$1" && [ -n "$(cur_gen)" ] && [ "$(curl -s -m 2 "http://127.0.0.1:$MP/tether-generation")" = "$(cur_gen)" ]
}

opts_scenario
check_eq "strip_prefix: haproxy rewrites the path as sent: /strip/a%2Fb goes up as /a%2Fb" "/a%2Fb" \
	"$(seen '/strip/a%2Fb' .url)"
# chunked bodies: haproxy counts what it buffers and the size the chunk in
# transit announces
head -c 40000 /dev/zero | tr '\0' a >"$WORK/huge"
check_eq "max_body 20000: a chunked 40000-byte body in one chunk is a 413 (its chunk size announced)" 413 \
	"$(code /gap/x -X POST -H 'Transfer-Encoding: chunked' --data-binary @"$WORK/huge")"
check_eq "max_body 1000: a chunked 2000-byte body in 100-byte chunks is a 413 (within the buffer)" "413" \
	"$(python3 "$TOOLS/chunked-post.py" "$LP" /body/x 2000 100 | cut -d' ' -f1)"
# the documented gap: in small chunks, a body is measured only as far as
# haproxy's buffer (tune.bufsize, 16 kB) holds it
check_eq "max_body 20000 (above haproxy's buffer): 40000 bytes in 1000-byte chunks pass (tetherd(8) says so)" \
	'200 40000' "$(python3 "$TOOLS/chunked-post.py" "$LP" /gap/x 40000 1000 | sed 's/ {.*"body":\([0-9]*\).*/ \1/')"
check_eq "max_body 20000: with its Content-Length, the same body is a 413" 413 \
	"$(code /gap/x -X POST -H 'Content-Type: text/plain' --data-binary @"$WORK/huge")"
cfg=$OUT/current/tether.cfg
check "the live tether.cfg passes haproxy -c with the base configuration" \
	haproxy -c -q -f "$WORK/base.cfg" -f "$cfg"

# a Host set by a route does not move the request to another route
check_eq "route/hdr sets Host: backend.test, and the request still went by its own Host" "/hdr/y" \
	"$(seen /hdr/y .url -H 'Host: hdr.test')"

opts_health
f=$(fails 10 /try0/x)
check "without health, the dead endpoint keeps failing requests ($f of 10: $(xargs <"$WORK/codes"))" test "$f" -ge 4

# what the options render to
backend_of() {
	awk -v want="backend $1" '$0 == want {on = 1; print; next} /^[a-z]/ {on = 0} on' "$cfg"
}
check "route/try1 has a backend of its own: retries 1, option redispatch 1, its cluster's servers" sh -c \
	"printf '%s\n' \"\$1\" | grep -q '^    retries 1\$' && printf '%s\n' \"\$1\" | grep -q '^    option redispatch 1\$' && [ \"\$(printf '%s\n' \"\$1\" | grep -c '^    server e')\" = 2 ]" _ "$(backend_of tether_r_try1)"
check "route/conn's backend: timeout connect 200ms, timeout server 2s" sh -c \
	"printf '%s\n' \"\$1\" | grep -q '^    timeout connect 200ms\$' && printf '%s\n' \"\$1\" | grep -q '^    timeout server 2s\$'" _ "$(backend_of tether_r_conn)"
check "use_backend tether_r_try1 by the route's name" grep -q '^    use_backend tether_r_try1 if { var(txn.tether_route) -m str route/try1 }$' "$cfg"
check "route/slow's backend: timeout server 500ms" sh -c \
	"printf '%s\n' \"\$1\" | grep -q '^    timeout server 500ms\$'" _ "$(backend_of tether_r_slow)"
check "route/ws's backend: timeout tunnel of an hour" sh -c \
	"printf '%s\n' \"\$1\" | grep -q '^    timeout tunnel 3600s\$'" _ "$(backend_of tether_r_ws)"
check "route/hdr: the value's % doubled for haproxy's log-format" \
	grep -qF 'http-request set-header X-Req "a%%20b c" if { var(txn.tether_route) -m str route/hdr }' "$cfg"
check "cluster/sick: check, observe layer4, error-limit 3, on-error mark-down" sh -c \
	"[ \"\$(printf '%s\n' \"\$1\" | grep -c 'check inter 60s fall 1 rise 1 observe layer4 error-limit 3 on-error mark-down')\" = 2 ]" _ "$(backend_of tether_c_sick)"
check "cluster/pool: http-reuse always, pool-max-conn 4" sh -c \
	"printf '%s\n' \"\$1\" | grep -q '^    http-reuse always\$' && printf '%s\n' \"\$1\" | grep -q 'pool-max-conn 4\$'" _ "$(backend_of tether_c_pool)"
check "cluster/nopool: http-reuse never" sh -c "printf '%s\n' \"\$1\" | grep -q '^    http-reuse never\$'" _ "$(backend_of tether_c_nopool)"
check "the master logged no reload failure" sh -c "! grep -q 'Loading failure' '$WORK/haproxy.log'"
done_testing
