#!/usr/bin/env bash
# t0335-drain-guard.sh: reloads never outrun the draining, with a real
# nginx and a real haproxy. 200 long-lived answers are held through nginx
# (each lasts 2.5 s, and a new one opens as each ends, so every generation
# gets some) with fresh requests alongside, while 100 writes go in a tight
# loop: the old workers still draining (our own count from /proc, and the
# agent's tetherd_draining_workers) never exceed --max-draining (default
# twice the live workers) plus the live ones a reload retires, the agent
# says `deferred` meanwhile (status.json, tetherd_state), the held changes
# are merged (fewer SIGHUPs than versions), every version is ACKed in order
# (the plane's acked_version never goes back and ends at the last), and no
# held or fresh request fails. Then, with --max-draining 0 and --max-defer 2
# from the configuration file (SIGHUP): an answer that never ends keeps an
# old worker draining, the next change is held (deferred, its ACK waits,
# the agent's count and memory agree with ours) and goes after 2 s anyway,
# with its log line and tetherd_reloads_forced_total; nginx's
# worker_shutdown_timeout ends that worker; with nothing draining
# --max-draining 0 still reloads; polling, a push held is replaced by the
# next poll's (a delta from the applied version), without a resync. The
# options' checks. Then haproxy
# (master-worker): its old workers (the master's children but the newest)
# are counted, and a storm is held to --max-draining 1.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx haproxy node ss

HAP_PIDFILE=$WORK/haproxy.pid
trap 'stop_haproxy; t_cleanup' EXIT

# ---- helpers of this test ---------------------------------------------------

OUT=$WORK/n.out
# nginx_workers: "LIVE DRAINING BYTES": our nginx master's workers by their
# title, and the VmRSS of those shutting down, summed
nginx_workers() {
	local live=0 down=0 bytes=0 pid args kb
	while read -r pid args; do
		case $args in
		*"worker process is shutting down"*)
			down=$((down + 1))
			kb=$(awk '$1 == "VmRSS:" {print $2}' "/proc/$pid/status" 2>/dev/null)
			bytes=$((bytes + ${kb:-0} * 1024))
			;;
		*"worker process"*) live=$((live + 1)) ;;
		esac
	done < <(ps --ppid "$NGINX_PID" -o pid=,args= 2>/dev/null)
	echo "$live $down $bytes"
}
draining() {
	nginx_workers | awk '{print $2}'
}
draining_is() {
	[ "$(draining)" = "$1" ]
}
# hap_workers: "LIVE OLD BYTES": haproxy's master's children running haproxy,
# the newest (start time, field 22 of stat) live, the others old
hap_workers() {
	local m pid
	m=$(cat "$HAP_PIDFILE" 2>/dev/null)
	[ -n "$m" ] || { echo "0 0 0"; return; }
	for pid in $(ps --ppid "$m" -o pid= 2>/dev/null); do
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = haproxy ] || continue
		echo "$pid $(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $20}') $(awk '$1 == "VmRSS:" {print $2}' "/proc/$pid/status")"
	done | sort -k2,2n -k1,1n | awk '{n++; kb[n] = $3} END {
		if (!n) {print "0 0 0"; exit}
		for (i = 1; i < n; i++) b += kb[i] * 1024
		print 1, n - 1, b + 0 }'
}
hap_old() {
	hap_workers | awk '{print $2}'
}
hap_old_is() {
	[ "$(hap_old)" = "$1" ]
}
# am NAME [PORT]: a series of the agent's metrics, scraped
am() {
	curl -s -m 3 "http://127.0.0.1:${2:-$NM}/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
am_is() {
	[ "$(am "$1" "${3:-$NM}")" = "$2" ]
}
# hstat FIELD [FILE]: a field of a holder's stats
hstat() {
	jq -r ".$1" "${2:-$WORK/hold.json}" 2>/dev/null
}
hstat_ge() {
	[ "$(hstat "$1" "${3:-$WORK/hold.json}")" -ge "$2" ] 2>/dev/null
}
acked() {
	node_field "$1" .acked_version
}
# sampler FILE NODE PORT COUNTER: every 100 ms a line "OURS AGENTS STATE ACKED"
# (our count of old workers draining, the agent's metric, status.json's
# state, the plane's acked_version) until killed
sampler() {
	local f=$1 node=$2 port=$3 counter=$4
	while :; do
		echo "$($counter) $(am tetherd_draining_workers "$port") $(st "$node" state) $(acked "$node")" >>"$f"
		sleep 0.1
	done
}
# storm N FIRST: N writes in a tight loop, write i to route/r(i%5)'s path
storm() {
	local n=$1 first=$2 i
	for i in $(seq "$first" $((first + n - 1))); do
		put "route/r$((i % 5))" "{\"listener\":\"web\",\"host\":\"*\",\"path\":\"/r$((i % 5))/w$i\",\"cluster\":\"s\"}" >/dev/null
	done
}
# monotonic FILE COLUMN: the column never decreases
monotonic() {
	awk -v c="$2" '$c ~ /^[0-9]+$/ { if ($c < last) bad = 1; last = $c } END {exit bad}' "$1"
}
col_max() {
	awk -v c="$2" '$c ~ /^[0-9]+$/ && $c > m {m = $c} END {print m + 0}' "$1"
}
at() {
	agent_at n "$1" && marker_is_current
}

# ---- the options' checks ------------------------------------------------------
check_cfg() {
	"$AGENT_BIN" --plane http://127.0.0.1:9 --node c --state-dir "$WORK/c.state" --output-dir "$WORK/c.out" \
		--check-config "$@" >"$WORK/cfg.log" 2>&1
}
check_cfg --consumer files --max-draining 3
check_eq "--max-draining with the files consumer is refused (exit 2)" 2 "$?"
check "... naming the option and what it needs" \
	grep -q "max-draining: the drain guard counts the workers of the master in --pidfile: it needs --consumer nginx or haproxy and --pidfile FILE" "$WORK/cfg.log"
check_cfg --consumer nginx --reload true --max-draining 3
check_eq "--max-draining with --reload (no pidfile) is refused" 2 "$?"
check_cfg --consumer nginx --pidfile "$WORK/x.pid" --max-defer 4000
check_eq "--max-defer above 3600 is refused" 2 "$?"
check "... naming it" grep -q "max-defer" "$WORK/cfg.log"
check_cfg --consumer nginx --pidfile "$WORK/x.pid" --max-draining 0 --max-defer 0
check_eq "--max-draining 0 --max-defer 0 is a configuration" 0 "$?"
check "--help documents both" sh -c "'$AGENT_BIN' --help 2>&1 | grep -q -- '--max-draining N' && '$AGENT_BIN' --help 2>&1 | grep -q -- '--max-defer SECONDS'"

# ---- nginx, the plane, the agent ---------------------------------------------------
start_tool sb stream-backend.mjs 0 sb
SB=$TOOL_PORT
free_port LP
free_port MARK
diag "ports: stream backend $SB, listener $LP, marker $MARK"
# the operator's nginx.conf: room for the held connections, and
# worker_shutdown_timeout in the main context, as tetherd(8) says
cat >"$WORK/nginx.conf" <<EOF
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log notice;
worker_processes 1;
worker_rlimit_nofile 8192;
worker_shutdown_timeout 8s;
events { worker_connections 4096; }
http {
    access_log off;
    include $OUT/current/*.conf;
}
EOF
start_nginx

start_plane p --heartbeat 1
ctl apply - >/dev/null <<EOF || bail "cannot load the initial configuration"
{"upserts":[
 {"name":"cluster/s","body":{"endpoints":[{"address":"127.0.0.1","port":$SB}]}},
 {"name":"listener/web","body":{"address":"127.0.0.1","port":$LP}},
 {"name":"route/stream","body":{"listener":"web","host":"*","path":"/stream","cluster":"s"}},
 {"name":"route/fresh","body":{"listener":"web","host":"*","path":"/fresh","cluster":"s"}},
 {"name":"route/r0","body":{"listener":"web","host":"*","path":"/r0/init","cluster":"s"}},
 {"name":"route/r1","body":{"listener":"web","host":"*","path":"/r1/init","cluster":"s"}},
 {"name":"route/r2","body":{"listener":"web","host":"*","path":"/r2/init","cluster":"s"}},
 {"name":"route/r3","body":{"listener":"web","host":"*","path":"/r3/init","cluster":"s"}},
 {"name":"route/r4","body":{"listener":"web","host":"*","path":"/r4/init","cluster":"s"}}
]}
EOF
V1=$(plane_version)
# the guard's options from the configuration file (SIGHUP changes them)
cat >"$WORK/agent.conf" <<EOF
[agent]
plane = $PLANE_URL
EOF
start_agent n -c "$WORK/agent.conf" --consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" \
	--metrics-listen 127.0.0.1:0 --metrics-file "$WORK/n.prom" --backoff-max 1
check "the agent applies version $V1 and nginx serves it" wait_until 20 at "$V1"
wait_until 5 grep -q 'metrics: serving http://127.0.0.1:[0-9]*/metrics' "$WORK/n.log" || bail "no metrics port"
NM=$(grep -o 'metrics: serving http://127.0.0.1:[0-9]*' "$WORK/n.log" | tail -n 1 | sed 's/.*://')
check "nginx settles on one worker" wait_until 10 draining_is 0
check_eq "the agent counts one live worker" 1 "$(am tetherd_live_workers)"
check_eq "... none draining" 0 "$(am tetherd_draining_workers)"
check_eq "... so the limit is twice the live workers: 2" 2 "$(am tetherd_draining_limit)"
check_eq "nothing deferred yet" 0 "$(am tetherd_reloads_deferred_total)"

# ---- a storm under 200 held answers ----------------------------------------------
start_tool hold holder.mjs "$WORK/hold.json" --url "http://127.0.0.1:$LP" --streams 200 --hold 2500 --fresh 20
HOLD_PID=$TOOL_PID
check "200 answers are held through nginx" wait_until 20 hstat_ge streams_answered 200
H0=$(hups)
A0=$(wc -l <"$WORK/n.log")
: >"$WORK/samples"
sampler "$WORK/samples" n "$NM" draining &
SAMPLER=$!
track_pid "$SAMPLER"
storm 100 0
VLAST=$(plane_version)
check_eq "the plane made 100 versions" $((V1 + 100)) "$VLAST"
check "the agent ends at version $VLAST, nginx serving it" wait_until 60 at "$VLAST"
check "the plane records version $VLAST ACKed" wait_until 10 node_acked n "$VLAST"
stop_pid "$SAMPLER"
HUPS=$(($(hups) - H0))
APPLIES=$(tail -n +$((A0 + 1)) "$WORK/n.log" | grep -c 'applied version')
DEFERRED=$(am tetherd_reloads_deferred_total)
diag "storm: $HUPS SIGHUPs, $APPLIES applies, $DEFERRED deferrals; $(wc -l <"$WORK/samples") samples, most draining: ours $(col_max "$WORK/samples" 1), the agent's $(col_max "$WORK/samples" 2)"
diag "$(tail -n +$((A0 + 1)) "$WORK/n.log" | grep -E 'drain guard|applied version' | head -n 20)"
check "old workers draining never exceeded --max-draining (2) plus the live one a reload retires (ours)" \
	test "$(col_max "$WORK/samples" 1)" -le 3
check "... nor by the agent's count" test "$(col_max "$WORK/samples" 2)" -le 3
check "workers did drain meanwhile (the samples saw some)" test "$(col_max "$WORK/samples" 1)" -ge 1
check "the agent deferred reloads" test "${DEFERRED:-0}" -ge 1
check "status.json said deferred meanwhile" grep -q ' deferred ' "$WORK/samples"
check "the log says why it waits" \
	sh -c "tail -n +$((A0 + 1)) '$WORK/n.log' | grep -q \"drain guard: nginx's old workers still draining: [0-9]* (.* MiB), more than 2: version [0-9]* waits, for up to 60s (--max-defer)\""
check "held changes were merged: fewer reloads ($HUPS) than versions (100)" test "$HUPS" -ge 1 -a "$HUPS" -lt 50
check_eq "one reload per apply" "$APPLIES" "$HUPS"
check "applies merged pushes" sh -c "tail -n +$((A0 + 1)) '$WORK/n.log' | grep -q 'pushes merged'"
check "the plane's acked_version never went back" monotonic "$WORK/samples" 4
check_eq "... and ends at the last version" "$VLAST" "$(acked n)"
check "no reload was forced" am_is tetherd_reloads_forced_total 0
check_eq "status.json says synced" synced "$(st n state)"
check "every route serves its last write" sh -c "curl -s -m 3 http://127.0.0.1:$LP/r4/w99 | grep -q '^sb /r4/w99'"
stop_pid "$HOLD_PID" TERM
diag "holder: $(cat "$WORK/hold.json")"
check "held answers completed" hstat_ge streams_done 200
check_eq "no held answer failed" 0 "$(hstat streams_failed)"
check "fresh requests were made" hstat_ge fresh_ok 20
check_eq "no fresh request failed" 0 "$(hstat fresh_failed)"
check "the old workers drain once nothing is held" wait_until 10 draining_is 0
check "the agent's count says so too" wait_until 5 am_is tetherd_draining_workers 0
check "... and so does its metrics file (counted again after the reloads)" wait_until 5 \
	sh -c "awk '\$1 == \"tetherd_draining_workers\" {print \$2}' '$WORK/n.prom' | grep -qx 0"
check "the time held is counted" awk '$1 == "tetherd_reload_defer_seconds_total" && $2 > 0 {f = 1} END {exit !f}' \
	<(curl -s "http://127.0.0.1:$NM/metrics")

# ---- --max-draining 0 --max-defer 2 (SIGHUP): an answer that never ends -------------
cat >>"$WORK/agent.conf" <<EOF
max_draining = 0
max_defer = 2
EOF
L0=$(wc -l <"$WORK/n.log")
kill -HUP "${APID[n]}"
check "SIGHUP reads the new limits" wait_until 10 sh -c "tail -n +$((L0 + 1)) '$WORK/n.log' | grep -q 'SIGHUP: configuration reloaded'"
check "the limit is 0 now" wait_until 5 am_is tetherd_draining_limit 0
start_tool hold2 holder.mjs "$WORK/hold2.json" --url "http://127.0.0.1:$LP" --forever 1
HOLD2_PID=$TOOL_PID
check "an endless answer is held" wait_until 10 hstat_ge forever_answered 1 "$WORK/hold2.json"
H0=$(hups)
put route/r0 '{"listener":"web","host":"*","path":"/r0/a","cluster":"s"}' >/dev/null
VA=$(plane_version)
check "with nothing draining, --max-draining 0 still reloads: version $VA applies" wait_until 20 at "$VA"
check_eq "... with one SIGHUP" 1 "$(($(hups) - H0))"
check "the endless answer keeps the old worker draining" wait_until 10 draining_is 1
read -r _ OURS_N OURS_B < <(nginx_workers)
AG_N=$(am tetherd_draining_workers)
AG_B=$(am tetherd_draining_bytes)
diag "draining: ours $OURS_N ($OURS_B bytes), the agent's $AG_N ($AG_B bytes)"
check_eq "the agent's count agrees with ours" "$OURS_N" "$AG_N"
check "... and its memory (VmRSS) within a quarter of ours" \
	awk -v a="$AG_B" -v o="$OURS_B" 'BEGIN {exit !(o > 0 && a > o * 0.75 && a < o * 1.25)}'
DEF0=$(am tetherd_reloads_deferred_total)
H0=$(hups)
L0=$(wc -l <"$WORK/n.log")
put route/r1 '{"listener":"web","host":"*","path":"/r1/a","cluster":"s"}' >/dev/null
VB=$(plane_version)
check "the next change is held: status.json says deferred" wait_until 5 sh -c "[ \"\$(jq -r .state '$WORK/n.state/status.json')\" = deferred ]"
check "... and tetherd_state{state=\"deferred\"} is 1" am_is 'tetherd_state{state="deferred"}' 1
check_eq "... and a deferral is counted" $((DEF0 + 1)) "$(am tetherd_reloads_deferred_total)"
check_eq "its ACK waits (the plane has $VA)" "$VA" "$(acked n)"
check_eq "nginx was not reloaded" 0 "$(($(hups) - H0))"
check "after --max-defer (2 s) it goes anyway: version $VB applies" wait_until 15 at "$VB"
check "... and is ACKed" wait_until 10 node_acked n "$VB"
check "the log says so, once" sh -c "[ \"\$(tail -n +$((L0 + 1)) '$WORK/n.log' | grep -c \"drain guard: reloading after 2s (--max-defer) with nginx's old workers still draining: 1 (.* MiB), more than 0: version $VB goes live\")\" = 1 ]"
check_eq "tetherd_reloads_forced_total counts it" 1 "$(am tetherd_reloads_forced_total)"
check_eq "one SIGHUP" 1 "$(($(hups) - H0))"
check "the state is synced again" wait_until 5 sh -c "[ \"\$(jq -r .state '$WORK/n.state/status.json')\" = synced ]"
check "worker_shutdown_timeout (8 s) ends the endless answer's worker" wait_until 20 draining_is 0
check "... cutting the endless answer (the holder saw it end)" wait_until 5 sh -c "[ \"\$(jq -r .streams_failed '$WORK/hold2.json')\" = 1 ]"
stop_pid "$HOLD2_PID" TERM
DEF0=$(am tetherd_reloads_deferred_total)
put route/r2 '{"listener":"web","host":"*","path":"/r2/a","cluster":"s"}' >/dev/null
VC=$(plane_version)
check "nothing draining: --max-draining 0 reloads at once (version $VC)" wait_until 20 at "$VC"
check_eq "... without a deferral" "$DEF0" "$(am tetherd_reloads_deferred_total)"

# ---- polling: what arrives while a push is held replaces it ---------------------------
stop_pid "${APID[n]}" TERM
check_eq "the agent exits 0" 0 "$?"
ALOG=n2 start_agent n -c "$WORK/agent.conf" --consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" \
	--metrics-listen 127.0.0.1:0 --transport poll --backoff-max 1
check "the agent restarted with --transport poll is at $VC" wait_until 20 at "$VC"
wait_until 5 grep -q 'metrics: serving http://127.0.0.1:[0-9]*/metrics' "$WORK/n2.log" || bail "no metrics port"
NM=$(grep -o 'metrics: serving http://127.0.0.1:[0-9]*' "$WORK/n2.log" | tail -n 1 | sed 's/.*://')
start_tool hold5 holder.mjs "$WORK/hold5.json" --url "http://127.0.0.1:$LP" --forever 1
HOLD5_PID=$TOOL_PID
check "an endless answer is held" wait_until 10 hstat_ge forever_answered 1 "$WORK/hold5.json"
put route/r3 '{"listener":"web","host":"*","path":"/r3/p","cluster":"s"}' >/dev/null
VP=$(plane_version)
check "polling, version $VP applies" wait_until 20 at "$VP"
check "its endless answer keeps a worker draining" wait_until 10 draining_is 1
H0=$(hups)
put route/r4 '{"listener":"web","host":"*","path":"/r4/p1","cluster":"s"}' >/dev/null
check "the next poll's push is held (deferred)" wait_until 5 sh -c "[ \"\$(jq -r .state '$WORK/n.state/status.json')\" = deferred ]"
put route/r4 '{"listener":"web","host":"*","path":"/r4/p2","cluster":"s"}' >/dev/null
VQ=$(plane_version)
check "the push after it (from the applied version) replaces it: version $VQ applies after --max-defer" \
	wait_until 15 at "$VQ"
check_eq "... with one SIGHUP" 1 "$(($(hups) - H0))"
check "... and no resync" sh -c "! grep -q resyncing '$WORK/n2.log'"
check_eq "... carrying the last write" "sb /r4/p2" "$(curl -s -m 3 "http://127.0.0.1:$LP/r4/p2")"
check "... ACKed" wait_until 10 node_acked n "$VQ"
stop_pid "$HOLD5_PID" TERM

# ---- no master: no guard ----------------------------------------------------------------
DEF0=$(am tetherd_reloads_deferred_total)
stop_nginx
put route/r3 '{"listener":"web","host":"*","path":"/r3/a","cluster":"s"}' >/dev/null
VD=$(plane_version)
check "with nginx stopped, version $VD goes live for when it starts" wait_until 20 agent_at n "$VD"
check_eq "... not deferred" "$DEF0" "$(am tetherd_reloads_deferred_total)"
stop_pid "${APID[n]}" TERM
check_eq "the nginx agent exits 0" 0 "$?"

# ---- haproxy: its old workers, --max-draining 1 -------------------------------------------
OUT=$WORK/h.out
free_port HP
free_port HMARK
cat >"$WORK/base.cfg" <<'EOF'
global
    log stderr format raw local0
    maxconn 8000
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
EOF
put listener/hweb "{\"address\":\"127.0.0.1\",\"port\":$HP}" >/dev/null
for r in stream fresh r0 r1 r2 r3 r4; do
	p=/$r
	case $r in r*) p=/$r/h ;; esac
	put "route/h$r" "{\"listener\":\"hweb\",\"host\":\"*\",\"path\":\"$p\",\"cluster\":\"s\"}" >/dev/null
done
start_agent h --consumer haproxy --pidfile "$HAP_PIDFILE" --marker "127.0.0.1:$HMARK" --base-config "$WORK/base.cfg" \
	--max-draining 1 --metrics-listen 127.0.0.1:0 --backoff-max 1
VH=$(plane_version)
# haproxy starts on the generation of the plane's version (not on the empty
# one the agent boots with, which it would not reload from: no pidfile yet)
wait_until 20 agent_at h "$VH" || bail "the haproxy agent did not apply version $VH"
haproxy -W -p "$HAP_PIDFILE" -f "$WORK/base.cfg" -f "$OUT/current/" >>"$WORK/haproxy.log" 2>&1 &
track_pid $!
hap_at() {
	agent_at h "$1" && [ "$(curl -s -m 2 "http://127.0.0.1:$HMARK/tether-generation")" = "$(readlink "$OUT/current" | sed 's/^gen-//')" ]
}
check "haproxy serves the agent's version $VH" wait_until 20 hap_at "$VH"
wait_until 5 grep -q 'metrics: serving http://127.0.0.1:[0-9]*/metrics' "$WORK/h.log" || bail "no metrics port"
HM=$(grep -o 'metrics: serving http://127.0.0.1:[0-9]*' "$WORK/h.log" | tail -n 1 | sed 's/.*://')
reloads() {
	grep -c 'Reloading HAProxy' "$WORK/haproxy.log"
}
check "haproxy runs one worker, none old" wait_until 15 hap_old_is 0
check_eq "the agent counts one live haproxy worker" 1 "$(am tetherd_live_workers "$HM")"
check_eq "... and the limit --max-draining gives" 1 "$(am tetherd_draining_limit "$HM")"
start_tool hold3 holder.mjs "$WORK/hold3.json" --url "http://127.0.0.1:$HP" --streams 100 --hold 2500 --fresh 10
HOLD3_PID=$TOOL_PID
check "100 answers are held through haproxy" wait_until 20 hstat_ge streams_answered 100 "$WORK/hold3.json"
R0=$(reloads)
: >"$WORK/hsamples"
sampler "$WORK/hsamples" h "$HM" hap_old &
SAMPLER=$!
track_pid "$SAMPLER"
for i in $(seq 0 49); do
	put "route/hr$((i % 5))" "{\"listener\":\"hweb\",\"host\":\"*\",\"path\":\"/r$((i % 5))/h$i\",\"cluster\":\"s\"}" >/dev/null
done
VH=$(plane_version)
check "the haproxy agent ends at version $VH" wait_until 60 hap_at "$VH"
check "... ACKed" wait_until 10 node_acked h "$VH"
stop_pid "$SAMPLER"
HRELOADS=$(($(reloads) - R0))
diag "haproxy storm: $HRELOADS reloads, $(am tetherd_reloads_deferred_total "$HM") deferrals; most old workers: ours $(col_max "$WORK/hsamples" 1), the agent's $(col_max "$WORK/hsamples" 2)"
check "haproxy's old workers never exceeded --max-draining (1) plus the one a reload retires (ours)" \
	test "$(col_max "$WORK/hsamples" 1)" -le 2
check "... nor by the agent's count" test "$(col_max "$WORK/hsamples" 2)" -le 2
check "old workers did drain meanwhile" test "$(col_max "$WORK/hsamples" 1)" -ge 1
check "the agent deferred haproxy's reloads" test "$(am tetherd_reloads_deferred_total "$HM")" -ge 1
check "... saying deferred meanwhile" grep -q ' deferred ' "$WORK/hsamples"
check "fewer reloads ($HRELOADS) than versions (50)" test "$HRELOADS" -ge 1 -a "$HRELOADS" -lt 25
check "the plane's acked_version never went back" monotonic "$WORK/hsamples" 4
stop_pid "$HOLD3_PID" TERM
diag "holder: $(cat "$WORK/hold3.json")"
check_eq "no held answer through haproxy failed" 0 "$(hstat streams_failed "$WORK/hold3.json")"
check_eq "no fresh request through haproxy failed" 0 "$(hstat fresh_failed "$WORK/hold3.json")"
check "haproxy's old workers leave once nothing is held" wait_until 15 hap_old_is 0
# an endless answer: one old worker, counted alike by both
start_tool hold4 holder.mjs "$WORK/hold4.json" --url "http://127.0.0.1:$HP" --forever 1
check "an endless answer is held through haproxy" wait_until 10 hstat_ge forever_answered 1 "$WORK/hold4.json"
put route/hr0 '{"listener":"hweb","host":"*","path":"/r0/end","cluster":"s"}' >/dev/null
VH=$(plane_version)
check "version $VH applies" wait_until 20 hap_at "$VH"
check "the endless answer keeps one old worker" wait_until 10 hap_old_is 1
read -r _ OURS_N OURS_B < <(hap_workers)
check_eq "the agent's count of haproxy's old workers agrees with ours" "$OURS_N" "$(am tetherd_draining_workers "$HM")"
AG_B=$(am tetherd_draining_bytes "$HM")
check "... and their memory within a quarter" \
	awk -v a="$AG_B" -v o="$OURS_B" 'BEGIN {exit !(o > 0 && a > o * 0.75 && a < o * 1.25)}'
stop_pid "${APID[h]}" TERM
check_eq "the haproxy agent exits 0" 0 "$?"

# ---- haproxy --runtime-api: an endpoint-only change reloads nothing, so it never waits ----
# The endless answer keeps one old worker; --max-draining 0 holds every
# apply that reloads. With --runtime-api the agent's boot reloads haproxy
# onto a file that declares the admin socket (and two old workers then
# drain: the endless one and the one that booted).
start_agent h --consumer haproxy --pidfile "$HAP_PIDFILE" --marker "127.0.0.1:$HMARK" --base-config "$WORK/base.cfg" \
	--max-draining 0 --max-defer 30 --runtime-api "$WORK/hap-admin.sock" --metrics-listen 127.0.0.1:0 --backoff-max 1
wait_until 10 test -S "$WORK/hap-admin.sock" || bail "haproxy did not open the --runtime-api socket"
wait_until 5 grep -q 'metrics: serving http://127.0.0.1:[0-9]*/metrics' "$WORK/h.log" || bail "no metrics port"
HM=$(grep -o 'metrics: serving http://127.0.0.1:[0-9]*' "$WORK/h.log" | tail -n 1 | sed 's/.*://')
check "old workers drain (the endless answer's)" wait_until 10 sh -c "[ \"\$(curl -s -m 3 http://127.0.0.1:$HM/metrics | awk '\$1 == \"tetherd_draining_workers\" {print \$2}')\" -ge 1 ]"
R0=$(reloads)
D0=$(am tetherd_reloads_deferred_total "$HM")
put cluster/s "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$SB,\"weight\":7}]}" >/dev/null
VR=$(plane_version)
check "an endpoint-only change ($VR) is applied while old workers drain" wait_until 20 agent_at h "$VR"
check "... over the runtime API" grep -q "applied version $VR (.*; over the runtime API)" "$WORK/h.log"
check_eq "... without a deferral" "$D0" "$(am tetherd_reloads_deferred_total "$HM")"
check_eq "... and without a reload" "$R0" "$(reloads)"
check "... ACKed" wait_until 10 node_acked h "$VR"
put route/hr0 '{"listener":"hweb","host":"*","path":"/r0/held","cluster":"s"}' >/dev/null
VD=$(plane_version)
check "a route change ($VD), which reloads, waits: the state says deferred" wait_until 10 sh -c "[ \"\$(jq -r .state '$WORK/h.state/status.json')\" = deferred ]"
check_eq "... at the version before" "$VR" "$(st h version)"
stop_pid "${APID[h]}" TERM
check_eq "the haproxy agent exits 0" 0 "$?"

check "nginx logged no emergency or alert" sh -c "! grep -E '\\[(emerg|alert)\\]' '$WORK/nginx-error.log'"
done_testing
