#!/usr/bin/env bash
# t0993-opts-runtime.sh: haproxy's runtime API (tetherd --runtime-api)
# reaches the backends of routes with options haproxy allows only per
# backend: route/slow (a read timeout) has its own backend tether_r_slow
# with cluster/web's servers. A change of cluster/web's endpoints goes over
# the runtime API with no reload, and both tether_c_web and tether_r_slow
# hold the new endpoint (`show servers state`); traffic through route/slow
# reaches it, and its timeout still holds. (checkmap's mapping of a
# tether_r_ backend's line to its route: tests/unit/test_checkmap.c.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd haproxy node python3 ss

HAP_PIDFILE=$WORK/haproxy.pid
trap 'stop_haproxy; cleanup' EXIT

start_tool b1 opts-backend.mjs 0 b1
B1=$TOOL_PORT
start_tool b2 opts-backend.mjs 0 b2
B2=$TOOL_PORT
free_port LP
free_port MP
SOCK=$WORK/admin.sock
OUT=$WORK/h.out
write_haproxy_base "$WORK/base.cfg"
# ready_ports BACKEND: the ports of BACKEND's servers that are ready (not in maintenance)
ready_ports() {
	python3 "$TOOLS/hcli.py" "$SOCK" "show servers state $1" | awk '
		NR == 2 { for (i = 2; i <= NF; i++) col[$i] = i - 1 }
		NR > 2 && NF { a = $col["srv_admin_state"] + 0
			if (a % 2 == 0 && int(a / 2) % 2 == 0 && int(a / 32) % 2 == 0) print $col["srv_port"] }' | sort -n | xargs
}
sorted() {
	printf '%s\n' "$@" | sort -n | xargs
}
reloads() {
	grep -c 'Reloading HAProxy' "$WORK/haproxy.log"
}
cur_gen() {
	readlink "$OUT/current" 2>/dev/null | sed 's/^gen-//'
}
ep() {
	echo "{\"address\":\"127.0.0.1\",\"port\":$1}"
}

start_plane p --heartbeat 1
start_agent h --consumer haproxy --pidfile "$HAP_PIDFILE" --marker "127.0.0.1:$MP" --base-config "$WORK/base.cfg" \
	--runtime-api "$SOCK" --reload-timeout 5 --backoff-max 1
wait_until 10 test -f "$OUT/current/tether.cfg" || bail "the agent made no first generation"
haproxy -W -p "$HAP_PIDFILE" -f "$WORK/base.cfg" -f "$OUT/current/" >>"$WORK/haproxy.log" 2>&1 &
track_pid $!
wait_until 10 sh -c "[ \"\$(curl -s -m 2 http://127.0.0.1:$MP/tether-generation)\" = '$(cur_gen)' ]" ||
	bail "haproxy does not serve the marker"

ctl apply - >/dev/null <<EOF || bail "cannot load the configuration"
{"upserts":[
 {"name":"cluster/web","body":{"endpoints":[$(ep "$B1")]}},
 {"name":"listener/web","body":{"address":"127.0.0.1","port":$LP}},
 {"name":"route/root","body":{"listener":"web","path":"/","cluster":"web"}},
 {"name":"route/slow","body":{"listener":"web","path":"/slow","cluster":"web","timeout":{"read":0.5}}}
]}
EOF
V=$(plane_version)
check "version $V is live" wait_until 20 sh -c "curl -s '$PLANE_URL/v1/nodes/h' | jq -e '.acked_version == $V' >/dev/null && [ \"\$(curl -s -m 2 http://127.0.0.1:$MP/tether-generation)\" = \"\$(readlink '$OUT/current' | sed 's/^gen-//')\" ]"
check "the admin socket is there" wait_until 10 test -S "$SOCK"
check_eq "route/slow's own backend holds cluster/web's endpoint" "$B1" "$(ready_ports tether_r_slow)"
check_eq "route/slow reaches b1" b1 "$(curl -s -m 5 "http://127.0.0.1:$LP/slow/x" | jq -r .name)"
R0=$(reloads)

# the cluster's endpoints change: b2 joins, then b1 leaves
put cluster/web "{\"endpoints\":[$(ep "$B1"),$(ep "$B2")]}" >/dev/null
V=$(plane_version)
check "an endpoint added: version $V is ACKed" wait_until 15 sh -c "curl -s '$PLANE_URL/v1/nodes/h' | jq -e '.acked_version == $V' >/dev/null"
check "it went over the runtime API" grep -q "applied version $V (.*; over the runtime API)" "$WORK/h.log"
check_eq "haproxy was not reloaded" "$R0" "$(reloads)"
check_eq "tether_c_web holds both endpoints" "$(sorted "$B1" "$B2")" "$(ready_ports tether_c_web)"
check_eq "tether_r_slow (route/slow's own backend) holds both too" "$(sorted "$B1" "$B2")" "$(ready_ports tether_r_slow)"

put cluster/web "{\"endpoints\":[$(ep "$B2")]}" >/dev/null
V=$(plane_version)
check "an endpoint removed: version $V is ACKed" wait_until 15 sh -c "curl -s '$PLANE_URL/v1/nodes/h' | jq -e '.acked_version == $V' >/dev/null"
check "it went over the runtime API" grep -q "applied version $V (.*; over the runtime API)" "$WORK/h.log"
check_eq "haproxy was not reloaded" "$R0" "$(reloads)"
check_eq "tether_r_slow holds only b2" "$B2" "$(ready_ports tether_r_slow)"
out=$(for i in 1 2 3 4; do curl -s -m 5 "http://127.0.0.1:$LP/slow/x" | jq -r .name; done | sort -u | xargs)
check_eq "route/slow reaches b2 only" b2 "$out"
check_eq "route/slow's read timeout still holds (a 2 s answer is a 504)" 504 \
	"$(curl -s -o /dev/null -w '%{http_code}' -m 5 "http://127.0.0.1:$LP/slow/x?sleep=2000")"

done_testing
