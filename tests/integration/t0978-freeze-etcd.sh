#!/usr/bin/env bash
# t0978-freeze-etcd.sh: a freeze with --store etcd: set on replica a, it
# holds at once for a write to replica b (423: b reads it from etcd when it
# checks a write), b's /v1/status, tether_frozen and `tetherctl freeze`
# show it, b's events announce it; an admin's override passes on b; --off
# on b ends it on both (a write to a goes); a freeze set on b survives a
# restart of both replicas.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
need_cmd jq curl

etcd_cluster_start 1
check "an etcd member is healthy" etcd_healthy 1
PREFIX=/t0978-$$/
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "$PREFIX" --heartbeat 1)
start_plane a "${E[@]}"
A_URL=$PLANE_URL
A_PID=$PLANE_PID
start_plane b "${E[@]}"
B_URL=$PLANE_URL
B_PID=$PLANE_PID
on() { local PLANE_URL=$1; shift; "$@"; }
motd() { printf '{"path":"motd.txt","content":"%s\\n"}' "$1"; }
status_on() { curl -sS -o /dev/null -w '%{http_code}' -X PUT --data-binary "$(motd "$2")" "$1/v1/resources/file/motd"; }

check_eq "a write on a" "version 1" "$(motd one | on "$A_URL" ctl put file/motd - 2>&1)"
check "b follows to version 1" wait_until 10 sh -c "[ \"\$(curl -fsS '$B_URL/healthz' | jq -r .version)\" = 1 ]"

# b's events
on "$B_URL" ctl watch --json >"$WORK/b-events.out" 2>"$WORK/b-watch.err" &
track_pid $!
subscribed() { [ "$(on "$B_URL" metric tether_events_subscribers)" -ge 1 ]; }
wait_until 10 subscribed || bail "tetherctl watch on b did not subscribe"

on "$A_URL" ctl freeze --until 1h --message "freeze on a" >/dev/null || not_ok "cannot freeze on a"
check_eq "a write to b right after is refused: 423" 423 "$(status_on "$B_URL" two)"
check "... with the freeze's words" sh -c "curl -sS -X PUT --data-binary '$(motd two)' '$B_URL/v1/resources/file/motd' |
	jq -r .error | grep -q 'by anonymous: freeze on a (an admin may pass with --override REASON)'"
frozen_b() { [ "$(curl -sS "$B_URL/v1/status" | jq -r .freeze.message)" = "freeze on a" ]; }
check "b's /v1/status shows a's freeze" wait_until 10 frozen_b
check_eq "b's tether_frozen is 1" 1 "$(on "$B_URL" metric tether_frozen)"
check "b's tetherctl freeze prints it" sh -c "PLANE_URL='$B_URL'; '$CTL_BIN' --plane '$B_URL' freeze | grep -q 'by anonymous: freeze on a$'"
b_event() { jq -e "select(.event == \"$1\") | .data | $2" "$WORK/b-events.out" 2>/dev/null | grep -q true; }
check "b announces the freeze on its events" wait_until 10 b_event freeze '.message == "freeze on a"'
check_eq "an admin's override passes on b" "version 2" \
	"$(motd two | on "$B_URL" ctl put file/motd - --override "urgent, on b" 2>&1)"
check "a follows to version 2" wait_until 10 sh -c "[ \"\$(curl -fsS '$A_URL/healthz' | jq -r .version)\" = 2 ]"
check_eq "a write to a without one is still refused" 423 "$(status_on "$A_URL" three)"

check_eq "--off on b" "freeze ended: writes and rollouts go on" "$(on "$B_URL" ctl freeze --off)"
check_eq "a write to a goes at once" "version 3" "$(motd three | on "$A_URL" ctl put file/motd - 2>&1)"
thawed_a() { [ "$(curl -sS "$A_URL/v1/status" | jq -c .freeze)" = null ]; }
check "a's /v1/status drops it" wait_until 10 thawed_a
check_eq "a's tether_frozen is 0" 0 "$(on "$A_URL" metric tether_frozen)"
check "b announces the thaw" wait_until 10 b_event thaw '.ended == "off" and .message == "freeze on a"'

# ---- kept in etcd across restarts of both --------------------------------------------

on "$B_URL" ctl freeze --until 2h --message "kept in etcd" >/dev/null || not_ok "cannot freeze on b"
stop_pid "$A_PID"
stop_pid "$B_PID"
start_plane a "${E[@]}"
A_URL=$PLANE_URL
check_eq "restarted, a still refuses writes" 423 "$(status_on "$A_URL" four)"
check_eq "... and shows the freeze" "kept in etcd" "$(curl -sS "$A_URL/v1/status" | jq -r .freeze.message)"
done_testing
