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
need_cmd haproxy node ss

HAP_PIDFILE=$WORK/haproxy.pid
stop_haproxy() {
	local pid i=0
	pid=$(cat "$HAP_PIDFILE" 2>/dev/null)
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	kill -KILL "$pid" 2>/dev/null
	return 0
}
trap 'stop_haproxy; cleanup' EXIT

opts_backends
free_port LP
free_port MP
OUT=$WORK/h.out
cat >"$WORK/base.cfg" <<'EOF'
global
    log stderr format raw local0
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
EOF
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
