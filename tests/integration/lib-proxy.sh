# lib-proxy.sh: helpers of the tests that drive a real nginx or haproxy,
# sourced after lib.sh: free ports below the ephemeral range, the
# operator's nginx.conf, nginx in the foreground, reload counting, requests
# through the proxy, the live generation and the marker, stopping a haproxy
# master. Tests set OUT (the agent's output directory) and MARK (the
# marker's port) before using them.

declare -A T_PORTS_TAKEN
# Ports handed out are also reserved machine-wide (a directory per port,
# made atomically, holding the test's pid) until the test ends: tests that
# run side by side (make check -j2) pick from the same range, and a port
# one of them checked free may be bound by the other before it is used.
# A reservation whose test is gone is taken over.
T_PORT_DIR=${TMPDIR:-/tmp}/tether-test-ports
port_reserve() {
	local d=$T_PORT_DIR/$1 owner
	mkdir -p "$T_PORT_DIR" 2>/dev/null
	if ! mkdir "$d" 2>/dev/null; then
		owner=$(cat "$d/pid" 2>/dev/null)
		# a reservation still being written, or a live test's
		[ -n "$owner" ] || return 1
		kill -0 "$owner" 2>/dev/null && return 1
		rm -rf "$d" 2>/dev/null
		mkdir "$d" 2>/dev/null || return 1
	fi
	echo $$ >"$d/pid"
}
ports_release() {
	local p
	for p in "${!T_PORTS_TAKEN[@]}"; do
		[ "$(cat "$T_PORT_DIR/$p/pid" 2>/dev/null)" = $$ ] && rm -rf "${T_PORT_DIR:?}/$p"
	done
}
T_CLEANUPS="$T_CLEANUPS ports_release"
# free_port VAR: a free loopback TCP port into VAR: below the kernel's
# ephemeral range (an outgoing connection's local port would make nginx's
# bind() fail later), in use by no socket in any state, not handed out
# before by this test nor reserved by another running beside it.
free_port() {
	local p i lo
	lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
	[ "${lo:-0}" -gt 12000 ] || lo=32768
	for i in $(seq 1 500); do
		p=$((10000 + RANDOM % (lo - 10000)))
		[ -z "${T_PORTS_TAKEN[$p]:-}" ] || continue
		port_reserve "$p" || continue
		if [ -z "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ]; then
			T_PORTS_TAKEN[$p]=1
			printf -v "$1" '%s' "$p"
			return 0
		fi
		rm -rf "${T_PORT_DIR:?}/$p"
	done
	bail "no free port found"
}

NGINX_PID=""
# write_nginx_conf OUTDIR: the operator's nginx.conf, including the agent's
# live generation.
write_nginx_conf() {
	cat >"$WORK/nginx.conf" <<EOF
# the operator's nginx.conf (written by $T_NAME)
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log notice;
worker_processes 1;
events { worker_connections 512; }
http {
    access_log off;
    include $1/current/*.conf;
}
EOF
}

# start_nginx: nginx in the foreground (daemon off, so its master is our
# child and tracked); waits for its pidfile to name it.
start_nginx() {
	nginx -p "$WORK" -c "$WORK/nginx.conf" -g 'daemon off;' >>"$WORK/nginx-run.log" 2>&1 &
	NGINX_PID=$!
	track_pid "$NGINX_PID"
	wait_until 10 sh -c "[ \"\$(cat '$WORK/nginx.pid' 2>/dev/null)\" = $NGINX_PID ]" ||
		bail "nginx did not start"
}

# stop_nginx: a graceful stop (SIGQUIT), waited for.
stop_nginx() {
	[ -n "$NGINX_PID" ] || return 0
	stop_pid "$NGINX_PID" QUIT
	NGINX_PID=""
}

# write_haproxy_base FILE: the operator's base configuration the haproxy
# tests start with (global logging to stderr, http mode, timeouts).
write_haproxy_base() {
	cat >"$1" <<'EOF'
global
    log stderr format raw local0
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
EOF
}

# stop_haproxy: the haproxy master in $HAP_PIDFILE (the test sets it; it
# stops its workers), waited for; its children killed if it would not go.
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
	pkill -KILL -P "$pid" 2>/dev/null
	return 0
}

# the trap: nginx first (a master we did not start as a child, e.g. from a
# daemonizing run, is found by its pidfile and must run our nginx.conf),
# then the harness's cleanup.
t_cleanup() {
	local pid
	pid=$(cat "$WORK/nginx.pid" 2>/dev/null)
	if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$WORK/nginx.conf"; then
		kill -TERM "$pid" 2>/dev/null
	fi
	cleanup
}

# hups: how many reload signals nginx's master received
hups() {
	grep -c 'signal 1 (SIGHUP) received' "$WORK/nginx-error.log" 2>/dev/null
}

# hups_ge N: nginx's master received at least N reload signals
hups_ge() {
	[ "$(hups)" -ge "$1" ]
}

# get PORT PATH [CURL ARGS]: the body of a request through nginx
get() {
	local port=$1 path=$2
	shift 2
	curl -s --max-time 3 "$@" "http://127.0.0.1:$port$path"
}

# answers EXPECTED PORT PATH [CURL ARGS]: a request through nginx answers it
answers() {
	local want=$1
	shift
	[ "$(get "$@")" = "$want" ]
}

# code_is CODE PORT PATH [CURL ARGS]
code_is() {
	local want=$1 port=$2 path=$3
	shift 3
	[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$@" "http://127.0.0.1:$port$path")" = "$want" ]
}

current() {
	readlink "$OUT/current" 2>/dev/null
}

marker() {
	curl -s --max-time 2 "http://127.0.0.1:$MARK/tether-generation"
}

# marker_is GEN: the marker answers generation GEN ("gen-<id>"). A fresh
# connection may still reach a worker of the generation before while it
# drains: the checks wait for it (wait_until), as the agent confirms.
marker_is() {
	[ "gen-$(marker)" = "$1" ]
}

# marker_is_current: the marker answers the generation current points at
marker_is_current() {
	local c
	c=$(current)
	[ -n "$c" ] && [ "gen-$(marker)" = "$c" ]
}

gens() {
	(cd "$OUT" && ls -d gen-* 2>/dev/null | xargs)
}

