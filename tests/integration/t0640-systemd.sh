#!/usr/bin/env bash
# t0640-systemd.sh: what the daemons tell systemd and the journal, without
# a systemd (tests/system/ boots a real one): READY=1 once the plane
# listens and once the agent booted from last-good, STATUS= lines that
# follow the version and state, WATCHDOG=1 from a loop that turns (and
# none from a stopped one, nor for another WATCHDOG_PID), no
# NOTIFY_SOCKET in a hook's environment, syslog priority prefixes only
# when stderr is the stream $JOURNAL_STREAM names; and the agent's metrics
# (--metrics-file, --metrics-listen): every series the docs promise.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd python3

# notify_start NAME: a stand-in for systemd's notify socket
notify_start() {
	python3 "$TOOLS/notify-recv.py" "$WORK/$1.sock" "$WORK/$1.notify" 2>>"$WORK/$1.recv.log" &
	track_pid $!
	wait_until 10 grep -q LISTENING "$WORK/$1.notify" || bail "the notify receiver $1 did not start"
}
# pings NAME: WATCHDOG=1 messages received so far
pings() { grep -c ' WATCHDOG=1$' "$WORK/$1.notify"; }
# pings_above NAME N: more than N of them
pings_above() { [ "$(pings "$1")" -gt "$2" ]; }
# last_status_is NAME PATTERN: the newest STATUS= line matches the glob
last_status_is() {
	local s
	s=$(sed -n 's/^[0-9]* STATUS=//p' "$WORK/$1.notify" | tail -n 1)
	# shellcheck disable=SC2053
	[[ $s == $2 ]]
}

# ---- the plane -----------------------------------------------------------------------
notify_start plane
NOTIFY_SOCKET=$WORK/plane.sock WATCHDOG_USEC=400000 start_plane p --heartbeat 1
check "the plane said READY=1" wait_until 5 grep -q ' READY=1$' "$WORK/plane.notify"
check "its READY carries a status with its version and address" \
	grep -q "STATUS=tether-plane .* listening on 127.0.0.1:$PLANE_PORT, store at version 0" "$WORK/plane.notify"
check "the plane feeds the watchdog (WATCHDOG_USEC=400000: every 200 ms)" wait_until 5 pings_above plane 4

put file/a '{"path":"a.txt","content":"a\n"}' >/dev/null
check "the plane's STATUS follows the version" wait_until 5 sh -c "grep -q 'STATUS=version 1, ' '$WORK/plane.notify'"

# a thread that stops turning stops the pings, and the plane says which:
# one HTTP loop stopped by ptrace (its other threads go on) until the
# watchdog's bound (30 s at least) has passed
tid_of() { local t; for t in /proc/"$PLANE_PID"/task/*; do [ "$(cat "$t/comm" 2>/dev/null)" = "$1" ] && basename "$t"; done | head -n 1; }
HTID=$(tid_of tp-http-0)
check "the plane's threads carry their names (tp-http-0 is $HTID)" test -n "$HTID"
check "... the keeper's, the ticker's and the other loop's too" \
	sh -c "[ -n '$(tid_of tp-keeper)' ] && [ -n '$(tid_of tp-ticker)' ] && [ -n '$(tid_of tp-http-1)' ]"
python3 "$TOOLS/wedge-thread.py" "$HTID" >"$WORK/wedge.out" 2>&1 &
WEDGE=$!
track_pid "$WEDGE"
wait_until 10 grep -q WEDGED "$WORK/wedge.out" || bail "cannot stop the thread: $(cat "$WORK/wedge.out")"
check "the plane names the thread that stopped turning" wait_until 60 grep -q \
	"error: watchdog: thread http-0: [0-9.]* s since it last turned; systemd's watchdog is no longer fed" "$PLANE_LOG"
stuck=$(pings plane)
sleep 1
check_eq "no WATCHDOG=1 while it is stuck" "$stuck" "$(pings plane)"
check "the plane still answers on its other HTTP loop" curl -fsS -o /dev/null "$PLANE_URL/healthz"
kill -TERM "$WEDGE"
wait "$WEDGE" 2>/dev/null
untrack_pid "$WEDGE"
check "once it turns again the pings come back" wait_until 10 pings_above plane "$stuck"
check "... and the plane says so" grep -q "watchdog: every thread turns again" "$PLANE_LOG"

# ---- the agent -----------------------------------------------------------------------
notify_start agent
NOTIFY_SOCKET=$WORK/agent.sock WATCHDOG_USEC=400000 WATCHDOG_PID= start_agent n1 --consumer files \
	--check "env > '$WORK/hook.env'" --metrics-file "$WORK/n1.prom" --metrics-listen 127.0.0.1:0
A1=$AGENT_PID
check "the agent said READY=1" wait_until 5 grep -q ' READY=1$' "$WORK/agent.notify"
check "... with a status naming what it booted" grep -q "STATUS=version 0, .*booted from last-good" "$WORK/agent.notify"
check "the agent applies version 1" wait_until 10 agent_at n1 1
check "its STATUS says synced at version 1" wait_until 5 sh -c "grep -q 'STATUS=version 1, synced' '$WORK/agent.notify'"
check "the agent feeds the watchdog" wait_until 5 pings_above agent 4
check "a hook does not inherit NOTIFY_SOCKET" sh -c "test -s '$WORK/hook.env' && ! grep -q NOTIFY_SOCKET '$WORK/hook.env'"
check "... nor WATCHDOG_USEC" sh -c "! grep -q WATCHDOG_ '$WORK/hook.env'"

# a stalled loop stops the pings (so systemd's watchdog fires)
kill -STOP "$A1"
sleep 0.3
before=$(pings agent)
sleep 1.2
check_eq "a stopped agent sends no WATCHDOG=1" "$before" "$(pings agent)"
kill -CONT "$A1"
check "... and pings again once it runs" wait_until 5 pings_above agent "$before"

# a change of state reaches STATUS=: the plane goes away
stop_pid "$PLANE_PID"
check "the agent's STATUS says offline when the plane is gone" \
	wait_until 15 last_status_is agent 'version 1, offline*'
stop_pid "$A1"
check "a stopping agent says STOPPING=1" grep -q ' STOPPING=1$' "$WORK/agent.notify"

# WATCHDOG_PID names another process: the watchdog is not ours to feed
: >"$WORK/agent.notify"
NOTIFY_SOCKET=$WORK/agent.sock WATCHDOG_USEC=200000 WATCHDOG_PID=1 start_agent n2 --consumer files
A2=$AGENT_PID
check "an agent told the watchdog is another pid's says READY=1" wait_until 5 grep -q ' READY=1$' "$WORK/agent.notify"
sleep 0.6
check_eq "... and sends no WATCHDOG=1" 0 "$(pings agent)"
stop_pid "$A2"

# ---- the journal's priority prefixes ---------------------------------------------------
# stderr is the file $JOURNAL_STREAM names (its device and inode)
: >"$WORK/j.log"
js=$(stat -c '%d:%i' "$WORK/j.log")
JOURNAL_STREAM=$js "$AGENT_BIN" --plane http://127.0.0.1:9 --node j --state-dir "$WORK/j.state" \
	--output-dir "$WORK/j.out" --once 2>"$WORK/j.log"
check "with JOURNAL_STREAM naming stderr, info lines start with <6>" grep -q '^<6>info: ' "$WORK/j.log"
check "... and errors with <3>" grep -q '^<3>error: ' "$WORK/j.log"
check "... and no line carries its own timestamp" sh -c "! grep -q '^20[0-9][0-9]-' '$WORK/j.log'"
: >"$WORK/j2.log"
JOURNAL_STREAM=1:1 "$AGENT_BIN" --plane http://127.0.0.1:9 --node j --state-dir "$WORK/j.state" \
	--output-dir "$WORK/j.out" --once 2>"$WORK/j2.log"
check "a JOURNAL_STREAM that is not stderr keeps the plain format" \
	sh -c "grep -q '^20[0-9][0-9]-.*tetherd\[[0-9]*\] info: ' '$WORK/j2.log' && ! grep -q '^<' '$WORK/j2.log'"
"$AGENT_BIN" --node j --state-dir "$WORK/j.state" --output-dir "$WORK/j.out" --once 2>"$WORK/j3.log"
check_eq "an agent with no plane exits 2" 2 "$?"
check "... saying the plane is not set" grep -q "plane: not set" "$WORK/j3.log"

# ---- --version: the version configure gave ---------------------------------------------
want=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$TOP_BUILDDIR/config.h")
check_eq "tetherd --version" "tetherd $want" "$("$AGENT_BIN" --version)"
check_eq "tether-plane --version" "tether-plane $want" "$("$PLANE_BIN" --version)"
check_eq "tetherctl --version" "tetherctl $want" "$("$TOP_BUILDDIR/tetherctl" --version)"

# ---- the agent's metrics ------------------------------------------------------------------
start_plane p2 --heartbeat 1
ctl apply - >/dev/null <<'J' || bail "cannot load the configuration"
{"upserts":[{"name":"file/a","body":{"path":"a.txt","content":"a\n"}},
 {"name":"file/b","body":{"path":"b.txt","content":"b\n"}}]}
J
start_agent m --consumer files --check "test ! -e '$WORK/refuse'" --metrics-file "$WORK/m.prom" \
	--metrics-listen 127.0.0.1:0
check "the agent with metrics applies version 1" wait_until 10 agent_at m 1
check "it logs where it serves them" wait_until 5 grep -q 'metrics: serving http://127.0.0.1:[0-9]*/metrics' "$WORK/m.log"
MPORT=$(grep -o 'metrics: serving http://127.0.0.1:[0-9]*' "$WORK/m.log" | tail -n 1 | sed 's/.*://')
# mv: series NAME [FILE]: its value in the file (or a scrape)
mv() { awk -v m="$1" '$1 == m {print $2}' "${2:-$WORK/m.prom}"; }
touch "$WORK/refuse"
put file/c '{"path":"c.txt","content":"c\n"}' >/dev/null
check "a refused change is counted" wait_until 10 sh -c "test \"\$(awk '\$1 == \"tetherd_pushes_rejected_total\" {print \$2}' '$WORK/m.prom')\" = 1"
rm -f "$WORK/refuse"
put file/d '{"path":"d.txt","content":"d\n"}' >/dev/null
check "the agent applies the next version" wait_until 10 agent_at m 3
curl -fsS "http://127.0.0.1:$MPORT/metrics" >"$WORK/scrape.prom"
check "GET /metrics answers" test -s "$WORK/scrape.prom"
for f in "$WORK/m.prom" "$WORK/scrape.prom"; do
	w=$(basename "$f")
	check_eq "$w: tetherd_version" 3 "$(mv tetherd_version "$f")"
	check_eq "$w: tetherd_plane_version" 3 "$(mv tetherd_plane_version "$f")"
	check_eq "$w: tetherd_pushes_applied_total (the snapshot and version 3)" 2 "$(mv tetherd_pushes_applied_total "$f")"
	check_eq "$w: tetherd_pushes_rejected_total" 1 "$(mv tetherd_pushes_rejected_total "$f")"
	check_eq "$w: tetherd_pushes_merged_total" 0 "$(mv tetherd_pushes_merged_total "$f")"
	for ph in stage check reload persist; do
		check_eq "$w: apply duration histogram counts both applies in phase $ph" 2 \
			"$(mv "tetherd_apply_duration_seconds_count{phase=\"$ph\"}" "$f")"
		check_eq "$w: ... and its +Inf bucket agrees" 2 \
			"$(mv "tetherd_apply_duration_seconds_bucket{phase=\"$ph\",le=\"+Inf\"}" "$f")"
	done
	check "$w: the check phase took time (a real command ran)" \
		awk '$1 == "tetherd_apply_duration_seconds_sum{phase=\"check\"}" && $2 > 0 {f=1} END {exit !f}' "$f"
	ts=$(mv tetherd_last_sync_timestamp_seconds "$f")
	check "$w: the last sync is a recent time ($ts)" test "$ts" -gt $(($(date +%s) - 60))
	check "$w: last-good's bytes are counted" test "$(mv tetherd_lastgood_bytes "$f")" -gt 0
	check_eq "$w: no reconnect yet" 0 "$(mv tetherd_stream_reconnects_total "$f")"
	check_eq "$w: the state gauge says synced" 1 "$(mv 'tetherd_state{state="synced"}' "$f")"
	check_eq "$w: ... and only synced" 1 "$(awk '/^tetherd_state\{/ {s += $2} END {print s}' "$f")"
done
check "only a scrape has the age of the last sync" \
	sh -c "grep -q '^tetherd_last_sync_age_seconds [0-9]' '$WORK/scrape.prom' && ! grep -q tetherd_last_sync_age '$WORK/m.prom'"
check "the buckets never decrease" awk -F'[ ]' '/^tetherd_apply_duration_seconds_bucket/ {
	split($1, a, "le="); ph = a[1]; if (ph == last && $2 < prev) bad = 1; last = ph; prev = $2 } END {exit bad}' "$WORK/scrape.prom"

# pushes that wait out --min-reload-interval are applied as one: merged
start_agent mm --consumer files --min-reload-interval 3 --metrics-file "$WORK/mm.prom"
check "an agent with --min-reload-interval 3 syncs" wait_until 10 agent_at mm 3
for f in x y z; do put "file/$f" "{\"path\":\"$f.txt\",\"content\":\"$f\\n\"}" >/dev/null; done
check "it applies the three changes" wait_until 15 agent_at mm 6
check_eq "... as one apply" 2 "$(mv tetherd_pushes_applied_total "$WORK/mm.prom")"
check_eq "... of which two pushes were merged" 2 "$(mv tetherd_pushes_merged_total "$WORK/mm.prom")"
stop_pid "${APID[mm]}"

# the HTTP side: other paths and methods, junk, a client that sends nothing
check_eq "GET /other is 404" 404 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/other")"
check_eq "POST /metrics is 405" 405 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$MPORT/metrics")"
check_eq "an oversized request is 431" 431 "$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 5000 /dev/zero | tr '\0' a)" "http://127.0.0.1:$MPORT/metrics")"
exec 7<>/dev/tcp/127.0.0.1/"$MPORT"   # says nothing: must not hold the loop
put file/e '{"path":"e.txt","content":"e\n"}' >/dev/null
check "a silent client does not stop the agent applying" wait_until 10 agent_at m 7
check "... nor other scrapes" sh -c "curl -fsS -m 2 http://127.0.0.1:$MPORT/metrics | grep -q '^tetherd_version 7'"
exec 7>&-

# reconnects are counted: the plane restarts
stop_pid "$PLANE_PID"
start_plane p2 --heartbeat 1 --listen "127.0.0.1:$PLANE_PORT"
check "after the plane comes back, a reconnect is counted" \
	wait_until 20 sh -c "awk '\$1 == \"tetherd_stream_reconnects_total\" && \$2 >= 1 {f=1} END {exit !f}' '$WORK/m.prom'"
"$AGENT_BIN" --plane "$PLANE_URL" --node x --state-dir "$WORK/x.state" --output-dir "$WORK/x.out" \
	--metrics-listen nope --check-config >/dev/null 2>&1
check_eq "--metrics-listen without a port is refused" 2 "$?"
"$AGENT_BIN" --plane "$PLANE_URL" --node x --state-dir "$WORK/x.state" --output-dir "$WORK/x.out" \
	--metrics-listen "127.0.0.1:$MPORT" >"$WORK/x.log" 2>&1
check_eq "--metrics-listen on a port in use exits 1" 1 "$?"
check "... saying why" grep -q "metrics-listen: cannot listen on" "$WORK/x.log"

done_testing
