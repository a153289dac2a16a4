#!/usr/bin/env bash
# t0325-haproxy-runtime.sh: changes without reloads (tetherd --runtime-api)
# with a real haproxy 2.6 in master-worker mode and a real plane. The
# rendered file declares the admin-level socket and free server slots;
# then, with a client loop running (no request may fail):
#  - an endpoint's port, then its address, changed; an endpoint added
#    within the free slots; a weight changed; an endpoint removed (drained,
#    then in maintenance): each is served (curl through haproxy reaches the
#    new backend) with no reload -- the master logged none, the same worker
#    serves, tetherd_runtime_updates_total counts it, the marker still
#    answers the generation haproxy loaded while current is the new one --
#    and ACKed ("applied":"runtime"); the access log's lines (naming the
#    generation haproxy loaded) are counted as the live generation's, and
#    that generation stays on disk;
#  - a runtime update whose --health probe then fails: the old generation
#    is put back, haproxy reloaded onto it (revert), the version NACKed;
#  - fallbacks to a reload, each served, ACKed with its reason, counted in
#    tetherd_reloads_total{reason} and said in one log line: more endpoints
#    than the running configuration's slots (template_exhausted); a route
#    added (change); an address haproxy refuses at runtime, a host name,
#    after a command it took (runtime_failed); a server's weight changed
#    over the socket between the commands and their read-back
#    (readback_differs: the agent paused there by tests/tools/tetherd-faults);
#    the socket gone from its path (runtime_failed);
#  - the agent killed (kill -9, at a fault point) after the commands and
#    before the commit, and after the first of several commands: booted
#    again, haproxy is reloaded onto the live file, serves what it says
#    (marker, answers, `show servers state`), and the plane gets the ACK;
#  - the option's checks, and the socket's declaration: once at level
#    admin when --traffic-socket names it too, not at all when the base
#    configuration declares it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

FAULTD=$TOP_BUILDDIR/tests/tools/tetherd-faults
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
[ -x "$FAULTD" ] || bail "no $FAULTD: build first (make check builds it)"
need_cmd haproxy node python3 ss

# ---- haproxy --------------------------------------------------------------------
HAP_PIDFILE=$WORK/haproxy.pid
trap 'stop_haproxy; cleanup' EXIT

SOCK=$WORK/admin.sock
OUT=$WORK/h.out
PROM=$WORK/h.prom

# hcli CMD: one command on haproxy's admin socket; its answer on stdout
hcli() {
	python3 "$TOOLS/hcli.py" "$SOCK" "$1"
}
# slot N FIELD: a field of server eN of tether_c_web in `show servers state`
# (FIELD: srv_addr, srv_port, srv_uweight, srv_admin_state, srv_fqdn)
slot() {
	hcli "show servers state tether_c_web" | awk -v s="e$1" -v f="$2" '
		NR == 2 { for (i = 2; i <= NF; i++) col[$i] = i - 1 }
		NR > 2 && $4 == s { print $col[f] }'
}
# in_maint N: server eN is in maintenance (srv_admin_state & 0x23)
in_maint() {
	local a
	a=$(slot "$1" srv_admin_state)
	[ -n "$a" ] && [ $((a & 0x23)) -ne 0 ]
}
cur_gen() {
	readlink "$OUT/current" 2>/dev/null | sed 's/^gen-//'
}
marker() {
	curl -s -m 2 "http://127.0.0.1:$MP/tether-generation"
}
marker_is() {
	[ "$(marker)" = "$1" ]
}
marker_is_current() {
	[ -n "$(cur_gen)" ] && marker_is "$(cur_gen)"
}
reloads() {
	grep -c 'Reloading HAProxy' "$WORK/haproxy.log"
}
reloads_ge() {
	[ "$(reloads)" -ge "$1" ]
}
# workers: haproxy's workers now (the master's children), one line
workers() {
	pgrep -P "$(cat "$HAP_PIDFILE" 2>/dev/null)" haproxy 2>/dev/null | sort | xargs
}
one_worker() {
	[ "$(workers | wc -w)" = 1 ]
}
# m NAME: a metric's value in the agent's --metrics-file
m() {
	awk -v k="$1" '$1 == k {print $2}' "$PROM" 2>/dev/null
}
# body PATH: what haproxy answers on PATH (the backend's "NAME PATH")
body() {
	curl -s -m 2 "http://127.0.0.1:$LP$1"
}
serves() {
	[ "$(body "$1")" = "$2" ]
}
# serves_only PATH WANT: 6 requests in a row all answered WANT
serves_only() {
	local i
	for i in 1 2 3 4 5 6; do
		serves "$1" "$2" || return 1
	done
}
# spread N: who answered N requests to /s in a row, as "b1=2 b2=6" (the
# client loop, when it runs, held meanwhile)
spread() {
	local i
	touch "$WORK/hold"
	[ -z "${CLIENT_PID:-}" ] || wait_until 10 test -e "$WORK/held"
	for i in $(seq 1 "$1"); do
		body /s | awk '{print $1}'
	done | sort | uniq -c | awk '{print $2 "=" $1}' | xargs
	rm -f "$WORK/hold"
}
# the ACK of VERSION the agent posted (its debug log)
ack_of() {
	grep -o "ack: posting {\"node\":\"h\",\"version\":$1,.*" "$WORK/h.log" | tail -n 1
}
endpoints() {
	# endpoints JSON...: PUT cluster/web with these endpoints
	local e
	e=$(printf '%s,' "$@")
	put cluster/web "{\"lb\":\"round_robin\",\"endpoints\":[${e%,}]}" >/dev/null
}
ep() {
	# ep ADDRESS PORT [WEIGHT]
	printf '{"address":"%s","port":%s,"weight":%s}' "$1" "$2" "${3:-1}"
}

# ---- backends, ports, the base configuration ---------------------------------
start_tool b1 backend.mjs 0 b1
B1=$TOOL_PORT
start_tool b2 backend.mjs 0 b2
B2=$TOOL_PORT
start_tool b3 backend.mjs 0 b3 127.0.0.2
B3=$TOOL_PORT
free_port LP
free_port MP
free_port TLP   # the access log's syslog (UDP)
free_port DP    # nothing listens here: a dead endpoint
diag "backends b1 $B1, b2 $B2, b3 127.0.0.2:$B3; listener $LP, marker $MP, syslog $TLP"

write_haproxy_base "$WORK/base.cfg"

# ---- the option's checks -------------------------------------------------------
start_plane p --heartbeat 1
cfgcheck() {
	"$AGENT_BIN" --plane "$PLANE_URL" --check-config --output-dir "$WORK/x.out" --pidfile "$WORK/none.pid" "$@" 2>&1
}
out=$(cfgcheck --consumer nginx --runtime-api "$SOCK")
check "--runtime-api with --consumer nginx is refused, naming the option" \
	grep -q "runtime-api: haproxy's runtime API needs --consumer haproxy" <<<"$out"
out=$(cfgcheck --consumer haproxy --runtime-api admin.sock)
check "a relative --runtime-api path is refused" grep -q "runtime-api: 'admin.sock' must be an absolute path" <<<"$out"
long=/tmp/$(printf 'x%.0s' $(seq 1 110))
out=$(cfgcheck --consumer haproxy --runtime-api "$long")
check "a --runtime-api path over 107 bytes is refused" grep -q "must be an absolute path of at most 107 bytes" <<<"$out"
check_eq "an absolute path with --consumer haproxy is accepted" "configuration OK" \
	"$(cfgcheck --consumer haproxy --runtime-api "$SOCK")"

# ---- the plane, the agent, haproxy on the agent's first generation --------------
AGENT_ARGS=(--consumer haproxy --pidfile "$HAP_PIDFILE" --marker "127.0.0.1:$MP" --base-config "$WORK/base.cfg"
	--runtime-api "$SOCK" --metrics-file "$PROM" --traffic-listen "127.0.0.1:$TLP" --reload-timeout 3 --backoff-max 1
	--health "http://127.0.0.1:$LP/health" --health-timeout 1 --health-retries 2 --log-level debug)
HPID=""
# start_h [VAR=VALUE...]: tetherd (the fault-point build: the same agent,
# its points inert unless the environment arms them) as node h
start_h() {
	env "$@" "$FAULTD" --node h --state-dir "$WORK/h.state" --output-dir "$OUT" --plane "$PLANE_URL" \
		"${AGENT_ARGS[@]}" >>"$WORK/h.log" 2>&1 &
	HPID=$!
	track_pid "$HPID"
}
REASONS="no_runtime_api change template_exhausted runtime_failed readback_differs boot revert"
declare -A NR
# snapshot: the agent's counters as it wrote them (RT: runtime updates;
# NR[reason]: reloads), what the checks count on from
snapshot() {
	local r
	RT=$(m tetherd_runtime_updates_total)
	for r in $REASONS; do
		NR[$r]=$(m "tetherd_reloads_total{reason=\"$r\"}")
	done
}
# restart_h [VAR=VALUE...]: the agent stopped (when it runs) and started
# again; waits until it is synced and wrote its metrics
restart_h() {
	[ -z "$HPID" ] || stop_pid "$HPID"
	rm -f "$PROM"
	start_h "$@"
	wait_until 20 h_ready || bail "the agent did not come back"
	snapshot
}
# h_ready: the agent started last is synced and wrote its metrics
h_ready() {
	[ "$(st h pid)" = "$HPID" ] && [ "$(st h state)" = synced ] && [ -s "$PROM" ]
}
start_h
wait_until 10 test -f "$OUT/current/tether.cfg" || bail "the agent made no first generation"
haproxy -W -p "$HAP_PIDFILE" -f "$WORK/base.cfg" -f "$OUT/current/" >>"$WORK/haproxy.log" 2>&1 &
track_pid $!
wait_until 10 marker_is_current || bail "haproxy does not serve the marker"
check "the admin socket is there, 0600" test "$(stat -c %a "$SOCK" 2>/dev/null)" = 600

ctl apply - >/dev/null <<EOF || bail "cannot load the first configuration"
{"upserts":[
 {"name":"cluster/web","body":{"lb":"round_robin","endpoints":[$(ep 127.0.0.1 "$B1")]}},
 {"name":"listener/web","body":{"address":"127.0.0.1","port":$LP}},
 {"name":"route/all","body":{"listener":"web","host":"*","path":"/","cluster":"web"}}
]}
EOF
V=$(plane_version)
wait_until 15 node_acked h "$V" && wait_until 10 marker_is_current || bail "the first configuration did not go live"
ok "the first configuration goes live by a reload (version $V)"
snapshot
check "it was a reload for a change: the log says why" grep -q "runtime: version $V reloads haproxy (change): " "$WORK/h.log"
sec=$(awk '$0 == "backend tether_c_web" {on = 1} /^$/ {on = 0} on' "$OUT/current/tether.cfg")
check "the backend has its server e0 and free slots e1..e4 (server-template, disabled)" \
	grep -q "^    server-template e 1-4 127.0.0.1:1 disabled weight 1\$" <<<"$sec"
check "the file declares the socket at level admin, in a second global section" \
	grep -q "^    stats socket $SOCK mode 600 level admin\$" "$OUT/current/tether.cfg"
check "haproxy -c accepts it after the base configuration" haproxy -c -q -f "$WORK/base.cfg" -f "$OUT/current/tether.cfg"
check_eq "haproxy has slots e0..e4" "e0 e1 e2 e3 e4" \
	"$(hcli 'show servers state tether_c_web' | awk 'NR > 2 && NF {print $4}' | xargs)"
check "a free slot is in maintenance" in_maint 3
check "the listener answers from b1" wait_until 5 serves_only /x "b1 /x"

# ---- the client loop: every request must be answered 200 -------------------------
CLIENT=$WORK/client.txt
: >"$CLIENT"
(
	while :; do
		# held while a check counts who answers (round robin is shared)
		if [ -e "$WORK/hold" ]; then
			touch "$WORK/held"
			sleep 0.01
			continue
		fi
		rm -f "$WORK/held"
		c=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://127.0.0.1:$LP/loop")
		[ "$c" = 200 ] && echo ok || echo "fail $c"
		sleep 0.01
	done >>"$CLIENT" 2>/dev/null
) &
CLIENT_PID=$!
track_pid "$CLIENT_PID"
lines() {
	wc -l <"$CLIENT"
}
lines_ge() {
	[ "$(lines)" -ge "$1" ]
}
more() {
	wait_until 20 lines_ge $(($(lines) + $1))
}
fails() {
	sed -n "$(($1 + 1)),$2p" "$CLIENT" | grep -c '^fail'
}
more 10 || bail "the client loop does not run"

# ---- changes over the runtime API ------------------------------------------------
wait_until 10 one_worker
R0=$(reloads)
W0=$(workers)
GLOADED=$(cur_gen)
L0=$(lines)
diag "haproxy: worker $W0, $R0 reloads so far, generation $GLOADED loaded"

# expect_runtime DESC: the plane's newest version went live over the
# runtime API: ACKed, no reload, counted, the marker on the loaded generation
expect_runtime() {
	local desc=$1 v
	v=$(plane_version)
	if wait_until 15 node_acked h "$v"; then
		ok "$desc: version $v is ACKed"
	else
		not_ok "$desc: version $v is ACKed"
		diag "$(tail -n 5 "$WORK/h.log")"
	fi
	check "$desc: the agent applied it over the runtime API" \
		grep -q "applied version $v (.*; over the runtime API)" "$WORK/h.log"
	check "$desc: its ACK says \"applied\":\"runtime\"" grep -q '"status":"ack".*"applied":"runtime"' <<<"$(ack_of "$v")"
	check_eq "$desc: haproxy's master logged no reload" "$R0" "$(reloads)"
	check_eq "$desc: the same worker serves" "$W0" "$(workers)"
	RT=$((RT + 1))
	check_eq "$desc: tetherd_runtime_updates_total counts it ($RT)" "$RT" "$(m tetherd_runtime_updates_total)"
	check "$desc: current is a new generation" test "$(cur_gen)" != "$GLOADED"
	check_eq "$desc: the marker answers the generation haproxy loaded" "$GLOADED" "$(marker)"
}

endpoints "$(ep 127.0.0.1 "$B2")"
expect_runtime "a port changed"
check "it is served: b2 answers" wait_until 5 serves_only /x "b2 /x"
check_eq "haproxy's e0 has the new port" "$B2" "$(slot 0 srv_port)"
check "the live file says the same" grep -q "^    server e0 127.0.0.1:$B2 weight 1\$" "$OUT/current/tether.cfg"

endpoints "$(ep 127.0.0.2 "$B3")"
expect_runtime "an address changed"
check "it is served: b3 (on 127.0.0.2) answers" wait_until 5 serves_only /x "b3 /x"
check_eq "haproxy's e0 has the new address" "127.0.0.2 $B3" "$(slot 0 srv_addr) $(slot 0 srv_port)"

endpoints "$(ep 127.0.0.2 "$B3")" "$(ep 127.0.0.1 "$B1")"
expect_runtime "an endpoint added within the free slots"
check_eq "e1 is ready now (admin state 4: only the configuration's mark left)" 4 "$(slot 1 srv_admin_state)"
check "it is served: b1 and b3 both answer" wait_until 5 sh -c "[ \"\$(for i in 1 2 3 4; do curl -s -m 2 http://127.0.0.1:$LP/s; done | sort -u | xargs)\" = 'b1 /s b3 /s' ]"

endpoints "$(ep 127.0.0.2 "$B3" 1)" "$(ep 127.0.0.1 "$B1" 3)"
expect_runtime "a weight changed"
check_eq "haproxy's e1 weighs 3" 3 "$(slot 1 srv_uweight)"
# haproxy's weighted round robin is exact over a cycle, but where the cycle
# starts after a weight changes at runtime is haproxy's (8 requests once
# gave b1=7 b3=1): 40 requests, 1:3 give b1 30 +- 3 (equal weights: 20)
SPREAD=$(spread 40)
check "40 requests are spread about 1:3 (b1 weighs 3): $SPREAD" \
	awk -v s="$SPREAD" 'BEGIN { n = split(s, kv, /[ =]/); for (i = 1; i < n; i += 2) c[kv[i]] = kv[i + 1]
		exit !(c["b1"] >= 27 && c["b1"] <= 33 && c["b1"] + c["b3"] == 40) }'

endpoints "$(ep 127.0.0.2 "$B3" 1)"
expect_runtime "an endpoint removed"
check "e1 is in maintenance" in_maint 1
check "e1 was drained first, then put in maintenance" sh -c "grep -o 'runtime: set server tether_c_web/e1 state [a-z]*' '$WORK/h.log' | tail -n 2 | awk '{print \$NF}' | xargs | grep -qx 'drain maint'"
check "it is served: only b3 answers" wait_until 5 serves_only /x "b3 /x"
check "the generation haproxy loaded is still on disk after 5 newer ones (--generations 3)" test -d "$OUT/gen-$GLOADED"
# the access log names the generation haproxy loaded: its lines are the
# live generation's traffic, counted from the last runtime update on
traffic_counted() {
	[ "$(m 'tetherd_traffic_requests_total{route="route/all"}')" -gt 0 ] 2>/dev/null
}
check "the access log's requests since the last runtime update are counted" wait_until 15 traffic_counted
check_eq "none of them as another generation's" 0 "$(m tetherd_traffic_other_generation_total)"
more 20
L1=$(lines)
check_eq "no client request failed across the runtime updates ($((L1 - L0)) requests)" 0 "$(fails "$L0" "$L1")"

# a runtime update haproxy takes, whose --health probe then fails: the old
# generation is put back and reloaded onto, and the version NACKed (the
# client loop held meanwhile: the endpoint is dead on purpose)
touch "$WORK/hold"
wait_until 10 test -e "$WORK/held"
GBEFORE=$(cur_gen)
VBEFORE=$(st h version)
endpoints "$(ep 127.0.0.1 "$DP")"
V=$(plane_version)
check "a dead endpoint set over the runtime API, its health probe failing: version $V is NACKed" \
	wait_until 20 has_nack h "$V"
check "the NACK names the health probe" grep -q "health probe http://127.0.0.1:$LP/health failed" <<<"$(node_field h .last_nack.error)"
check "the runtime update had gone through (read back)" \
	grep -q "runtime: version $V: 1 command over $SOCK (1 cluster), read back" "$WORK/h.log"
check_eq "current is the generation before" "$GBEFORE" "$(cur_gen)"
check "haproxy was reloaded onto it" wait_until 10 reloads_ge $((R0 + 1))
check "the marker answers it" wait_until 10 marker_is "$GBEFORE"
NR[revert]=$((NR[revert] + 1))
check_eq "tetherd_reloads_total{reason=\"revert\"} counts it" "${NR[revert]}" "$(m 'tetherd_reloads_total{reason="revert"}')"
check_eq "the agent stays at version $VBEFORE" "$VBEFORE" "$(st h version)"
check "b3 answers again" wait_until 5 serves_only /x "b3 /x"
check_eq "haproxy's e0 is b3's again" "127.0.0.2 $B3" "$(slot 0 srv_addr) $(slot 0 srv_port)"
wait_until 10 one_worker
R0=$(reloads)
W0=$(workers)
GLOADED=$(cur_gen)
rm -f "$WORK/hold"

# ---- fallbacks to a reload ----------------------------------------------------------
# expect_reload DESC REASON: the plane's newest version went live by a
# reload for REASON: ACKed with it, counted, said in the log, the marker on
# the new generation
expect_reload() {
	local desc=$1 reason=$2 v
	v=$(plane_version)
	if wait_until 20 node_acked h "$v"; then
		ok "$desc: version $v is ACKed"
	else
		not_ok "$desc: version $v is ACKed"
		diag "$(tail -n 5 "$WORK/h.log")"
	fi
	check "$desc: haproxy was reloaded" wait_until 10 reloads_ge $((R0 + 1))
	check "$desc: the marker answers the new generation" wait_until 10 marker_is_current
	check "$desc: one log line says why ($reason)" grep -q "runtime: version $v reloads haproxy ($reason" "$WORK/h.log"
	check "$desc: its ACK says \"applied\":\"reload\" and why" \
		grep -q "\"applied\":\"reload\",\"reload_reason\":\"$reason\"" <<<"$(ack_of "$v")"
	NR[$reason]=$((NR[$reason] + 1))
	check_eq "$desc: tetherd_reloads_total{reason=\"$reason\"} counts it (${NR[$reason]})" "${NR[$reason]}" \
		"$(m "tetherd_reloads_total{reason=\"$reason\"}")"
	wait_until 10 one_worker
	R0=$(reloads)
	W0=$(workers)
	GLOADED=$(cur_gen)
}

# 6 endpoints; the running configuration (loaded with 1) has 5 slots
endpoints "$(ep 127.0.0.1 "$B1")" "$(ep 127.0.0.1 "$B2")" "$(ep 127.0.0.1 "$B1")" "$(ep 127.0.0.1 "$B2")" \
	"$(ep 127.0.0.1 "$B1")" "$(ep 127.0.0.1 "$B2")"
expect_reload "more endpoints than slots" template_exhausted
check "the log names the cluster and the slots" \
	grep -q "cluster/web: 6 endpoints, and haproxy's running configuration has 5 slots in tether_c_web" "$WORK/h.log"
check_eq "12 requests are spread over b1 and b2" "b1=6 b2=6" "$(spread 12)"
check_eq "the reloaded configuration has 12 slots" 12 \
	"$(hcli 'show servers state tether_c_web' | awk 'NR > 2 && NF' | wc -l)"

put route/x '{"listener":"web","host":"*","path":"/x","cluster":"web"}' >/dev/null
expect_reload "a route added" change
check "the log names what else changes" grep -q "change): route/x is added" "$WORK/h.log"

# a host name: haproxy refuses `set server ... addr` of one at runtime (it
# resolves names when it loads its configuration); the change of e0 before
# it was taken, and the reload makes the whole file hold
endpoints "$(ep 127.0.0.1 "$B2")" "$(ep localhost "$B1")"
expect_reload "an address haproxy refuses at runtime (a host name)" runtime_failed
check "the log quotes haproxy's refusal" \
	grep -q "haproxy refused 'set server tether_c_web/e1 addr localhost port $B1': Invalid addr" "$WORK/h.log"
check "the change before the refused one had been taken (1 command)" \
	grep -q "reloads haproxy (runtime_failed, after 1 command)" "$WORK/h.log"
check_eq "the reloaded haproxy holds e1 by its name" "localhost $B1" "$(slot 1 srv_fqdn) $(slot 1 srv_port)"
check_eq "both endpoints answer" "b1=4 b2=4" "$(spread 8)"

# a read-back that differs: the agent stops after its commands (alive, at
# the fault point runtime-sent), someone sets e0's weight over the socket,
# the agent goes on and reads back
mkdir -p "$WORK/pause"
restart_h TETHERD_PAUSE=runtime-sent TETHERD_PAUSE_DIR="$WORK/pause"
endpoints "$(ep 127.0.0.1 "$B2" 2)" "$(ep localhost "$B1")"
if wait_until 15 test -f "$WORK/pause/paused"; then
	ok "the agent stopped between its commands and their read-back"
else
	not_ok "the agent stopped between its commands and their read-back"
fi
check_eq "haproxy took the new weight" 2 "$(slot 0 srv_uweight)"
hcli "set server tether_c_web/e0 weight 7" >/dev/null
touch "$WORK/pause/resume"
expect_reload "someone set a weight between the commands and the read-back" readback_differs
check "the log says what differs" grep -q "tether_c_web/e0: haproxy has weight 7, the file 2" "$WORK/h.log"
check_eq "after the reload haproxy holds the file's weight" 2 "$(slot 0 srv_uweight)"
more 20
L1=$(lines)
check_eq "no client request failed across the fallbacks ($((L1 - L0)) requests so far)" 0 "$(fails "$L0" "$L1")"

# ---- kill -9 between the commands and the commit ------------------------------------
# crash POINT DESC ENDPOINTS...: the agent dies at POINT while applying the
# endpoints; the plane holds no ACK of that version; booted again, haproxy
# serves what the live file says and the plane gets the ACK
crash() {
	local point=$1 desc=$2 v acked
	shift 2
	restart_h TETHERD_FAULT="$point" TETHERD_FAULT_LOG="$WORK/trail"
	acked=$(node_field h .acked_version)
	endpoints "$@"
	v=$(plane_version)
	if wait_until 15 sh -c "! kill -0 $HPID 2>/dev/null || [ \"\$(sed 's/.*) //' /proc/$HPID/stat | cut -c1)\" = Z ]"; then
		ok "$desc: the agent died at $point"
	else
		not_ok "$desc: the agent died at $point"
	fi
	stop_pid "$HPID" KILL
	HPID=""
	check "$desc: it died there" grep -q "^kill $point\$" "$WORK/trail"
	check_eq "$desc: the plane has no ACK of version $v" "$acked" "$(node_field h .acked_version)"
	rm -f "$PROM"
	start_h
	if wait_until 20 node_acked h "$v"; then
		ok "$desc: booted again, version $v is ACKed"
	else
		not_ok "$desc: booted again, version $v is ACKed"
		diag "$(tail -n 8 "$WORK/h.log")"
	fi
	check_eq "$desc: the agent runs version $v" "$v" "$(st h version)"
	check "$desc: the boot finished the apply" grep -q "boot: finished the apply of version $v" "$WORK/h.log"
	check "$desc: haproxy was reloaded onto the live file (the marker)" wait_until 10 marker_is_current
	check_eq "$desc: the boot's reload is counted" 1 "$(m 'tetherd_reloads_total{reason="boot"}')"
	wait_until 10 one_worker
	R0=$(reloads)
	W0=$(workers)
	GLOADED=$(cur_gen)
}

crash runtime-applied "killed after the read-back, before the commit" "$(ep 127.0.0.1 "$B1" 5)" "$(ep localhost "$B1")"
check_eq "haproxy's e0 is what the file says (b1, weight 5)" "127.0.0.1 $B1 5" \
	"$(slot 0 srv_addr) $(slot 0 srv_port) $(slot 0 srv_uweight)"
check "the file says so" grep -q "^    server e0 127.0.0.1:$B1 weight 5\$" "$OUT/current/tether.cfg"
check "b1 answers every request" wait_until 5 serves_only /x "b1 /x"

crash runtime-command "killed after the first of several commands" "$(ep 127.0.0.1 "$B2" 3)" \
	"$(ep 127.0.0.1 "$B2")" "$(ep 127.0.0.2 "$B3")"
check_eq "haproxy's e0..e2 are what the file says" "$B2/3 $B2/1 127.0.0.2:$B3/1" \
	"$(slot 0 srv_port)/$(slot 0 srv_uweight) $(slot 1 srv_port)/$(slot 1 srv_uweight) $(slot 2 srv_addr):$(slot 2 srv_port)/$(slot 2 srv_uweight)"
check_eq "the file says so" 3 "$(grep -c -e "^    server e0 127.0.0.1:$B2 weight 3\$" -e "^    server e1 127.0.0.1:$B2 weight 1\$" \
	-e "^    server e2 127.0.0.2:$B3 weight 1\$" "$OUT/current/tether.cfg")"
check_eq "b2 and b3 answer" "b2=4 b3=1" "$(spread 5)"

# ---- a dead socket --------------------------------------------------------------------
restart_h
endpoints "$(ep 127.0.0.1 "$B2" 3)" "$(ep 127.0.0.1 "$B2")"
expect_runtime "after the boot, a change goes over the runtime API again"
# haproxy keeps its listening socket; the path leads nowhere for a while
mv "$SOCK" "$SOCK.away"
endpoints "$(ep 127.0.0.1 "$B1")" "$(ep 127.0.0.1 "$B2")"
expect_reload "the socket's path leads nowhere" runtime_failed
check "the log names the socket and why" grep -q "runtime_failed, after 0 commands): $SOCK: connect: No such file or directory" "$WORK/h.log"
check_eq "both endpoints answer" "b1=2 b2=2" "$(spread 4)"
mv "$SOCK.away" "$SOCK"
endpoints "$(ep 127.0.0.1 "$B1")"
expect_runtime "the socket back, an endpoint removed"
check "only b1 answers" wait_until 5 serves_only /x "b1 /x"
stop_pid "$CLIENT_PID"
L1=$(lines)
check_eq "no client request failed in the whole run ($L1 requests)" 0 "$(fails 0 "$L1")"
stop_pid "$HPID"

# ---- where the socket is declared -----------------------------------------------------
# once_agent NAME ARGS...: one sync (--once) of a second agent, which renders
# the same state; its tether.cfg on stdout
# (clusters only, --sub: no listener for the check or a bind to refuse)
once_agent() {
	local name=$1
	shift
	"$AGENT_BIN" --once --node "$name" --state-dir "$WORK/$name.state" --output-dir "$WORK/$name.out" \
		--plane "$PLANE_URL" --sub cluster/ --consumer haproxy --reload true --check true --marker off "$@" \
		>>"$WORK/$name.log" 2>&1
	cat "$WORK/$name.out/current/tether.cfg"
}
conf=$(once_agent o1 --runtime-api "$WORK/o1.sock" --traffic-socket "$WORK/o1.sock")
check_eq "--traffic-socket on the same path: one declaration, at level admin" \
	"    stats socket $WORK/o1.sock mode 600 level admin" "$(grep 'stats socket' <<<"$conf")"
conf=$(once_agent o2 --runtime-api "$WORK/o2.sock" --traffic-socket "$WORK/o2-user.sock")
check_eq "--traffic-socket on another path: both declared" \
	"    stats socket $WORK/o2.sock mode 600 level admin|    stats socket $WORK/o2-user.sock mode 600 level user" \
	"$(grep 'stats socket' <<<"$conf" | paste -sd'|')"
printf 'global\n    stats socket %s mode 600 level admin\n' "$WORK/o3.sock" >"$WORK/base-sock.cfg"
conf=$(once_agent o3 --runtime-api "$WORK/o3.sock" --base-config "$WORK/base-sock.cfg")
check "the file has the free slots" grep -q "^    server-template e 1-4 127.0.0.1:1 disabled weight 1\$" <<<"$conf"
check_eq "the base configuration declares it: the file does not" "" "$(grep 'stats socket' <<<"$conf")"
printf 'global\n    stats socket %s mode 600\n' "$WORK/o4.sock" >"$WORK/base-op.cfg"
once_agent o4 --runtime-api "$WORK/o4.sock" --base-config "$WORK/base-op.cfg" >/dev/null
check "declared there below level admin: a warning says every change will reload" \
	grep -q "runtime-api: $WORK/base-op.cfg declares the stats socket $WORK/o4.sock at level operator" "$WORK/o4.log"
conf=$(once_agent o5)
check_eq "without --runtime-api: no slots, no socket" "" "$(grep -e server-template -e 'stats socket' <<<"$conf")"
check "without --runtime-api: the server line as before" grep -q "^    server e0 127.0.0.1:$B1 weight 1\$" <<<"$conf"

done_testing
