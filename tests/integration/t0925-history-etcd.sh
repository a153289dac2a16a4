#!/usr/bin/env bash
# t0925-history-etcd.sh: the version log with --store etcd: two replicas
# over one etcd cluster; a write with a message on one is in the log of
# the other (author, message, names); show, diff and get --at on either;
# a revert on b of a write made on a; retention by count (410 past it);
# a batch's base refused with 409 when the other replica wrote; a version
# too large to carry its bodies keeps its names and moves the floor;
# retention by age (--history-max-age) with no write coming, on both
# replicas, and a write after it on the other leaving the floor where it is;
# writes on both replicas for longer than the age keeping the log whole
# above its floor;
# a history read waiting on a stalled etcd holds up no other request (it
# runs off the HTTP threads: --threads 1 here).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
need_cmd jq curl

etcd_cluster_start 1
check "an etcd member is healthy" etcd_healthy 1
PREFIX=/t0925-$$/
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "$PREFIX" --heartbeat 1 --history-keep 5)
start_plane a "${E[@]}"
A_URL=$PLANE_URL
A_PID=$PLANE_PID
start_plane b "${E[@]}"
B_URL=$PLANE_URL
B_PID=$PLANE_PID
web() { printf '{"lb":"%s","endpoints":[{"address":"127.0.0.1","port":%s}]}' "$1" "$2"; }
on() { local PLANE_URL=$1; shift; "$@"; }
version_on() { curl -fsS "$1/healthz" | jq -r .version; }

web round_robin 9001 | on "$A_URL" ctl put cluster/web --message "first on a" >/dev/null
check "b follows to version 1" wait_until 10 sh -c "[ \"\$(curl -fsS '$B_URL/healthz' | jq -r .version)\" = 1 ]"
out=$(curl -fsS "$B_URL/v1/history")
check_eq "b's log has a's version with its author, message and names" "1 anonymous first on a cluster/web" \
	"$(echo "$out" | json '.versions[0] | "\(.version) \(.author) \(.message) \(.names | join(","))"')"
web least_conn 9002 | on "$B_URL" ctl put cluster/web --message "second on b" >/dev/null
check "a follows to version 2" wait_until 10 sh -c "[ \"\$(curl -fsS '$A_URL/healthz' | jq -r .version)\" = 2 ]"
check_eq "a's log lists both, newest first" "second on b|first on a" \
	"$(curl -fsS "$A_URL/v1/history" | json '[.versions[].message] | join("|")')"
check_eq "show 2 on a: before and after" "round_robin least_conn" \
	"$(curl -fsS "$A_URL/v1/history/2" | json '.changes[0] | "\(.before.lb) \(.after.lb)"')"
check_eq "diff 0 2: web added" "cluster/web null 9002" \
	"$(curl -fsS "$A_URL/v1/diff?from=0&to=2" | json '.changes[0] | "\(.name) \(.before) \(.after.endpoints[0].port)"')"
check_eq "get --at 1 on b" round_robin "$(on "$B_URL" ctl get cluster/web --at 1 | json .lb)"
check_eq "a batch on a stale base (b wrote since) is 409 on a" 409 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -X POST --data '{"base":1,"removes":["cluster/web"]}' "$A_URL/v1/batch")"
check_eq "revert 1 on b makes version 3" "version 3" "$(on "$B_URL" ctl revert 1 --message "undo b")"
check "a follows to version 3 with version 1's body" wait_until 10 sh -c \
	"[ \"\$(curl -fsS '$A_URL/v1/resources/cluster/web' | jq -r '\"\(.version) \(.body.lb)\"')\" = '3 round_robin' ]"
check_eq "the revert's message" "revert to version 1: undo b" "$(curl -fsS "$A_URL/v1/history/3" | json .message)"
check_eq "a reads version 2 as reverted by 3, 1 not (etcd's vrev/)" "1:0 2:3" \
	"$(curl -fsS "$A_URL/v1/history?limit=10" | json '[.versions[] | select(.version < 3) | "\(.version):\(.reverted_by)"] | reverse | join(" ")')"
for i in 1 2 3 4; do web round_robin $((9100 + i)) | on "$A_URL" ctl put cluster/web >/dev/null; done
out=$(curl -fsS "$B_URL/v1/history?limit=100")
check_eq "5 versions kept (--history-keep 5)" "7 6 5 4 3" "$(echo "$out" | json '[.versions[].version] | map(tostring) | join(" ")')"
check_eq "the floor is 2" 2 "$(echo "$out" | json .floor)"
check_eq "show 2 is past it (410)" 410 "$(curl -sS -o /dev/null -w '%{http_code}' "$B_URL/v1/history/2")"
check_eq "get --at 2 still answers (the floor)" least_conn "$(on "$B_URL" ctl get cluster/web --at 2 | json .lb)"
check_eq "get --at 1 is past it (410)" 410 "$(curl -sS -o /dev/null -w '%{http_code}' "$B_URL/v1/resources/cluster/web?at=1")"

# a version whose bodies before and after pass 256 KiB keeps its names only
big=$(head -c 150000 /dev/zero | tr '\0' a)
printf '{"path":"big.txt","content":"%s"}' "$big" | on "$A_URL" ctl put file/big >/dev/null
printf '{"path":"big.txt","content":"%sb"}' "$big" | on "$A_URL" ctl put file/big --message "big again" >/dev/null
check_eq "a large version is written (version 9)" 9 "$(version_on "$A_URL")"
out=$(curl -fsS "$A_URL/v1/history?limit=1")
check_eq "its record has author, message and names" "9 big again file/big" \
	"$(echo "$out" | json '.versions[0] | "\(.version) \(.message) \(.names | join(","))"')"
check_eq "the floor moved to it: nothing before it can be rebuilt" 9 "$(echo "$out" | json .floor)"
check_eq "get --at 8 is past the history kept (410)" 410 \
	"$(curl -sS -o /dev/null -w '%{http_code}' "$A_URL/v1/resources/file/big?at=8")"
web round_robin 9200 | on "$A_URL" ctl put cluster/web >/dev/null
check_eq "the history goes on after it" "10 9" "$(curl -fsS "$B_URL/v1/history?limit=2" | json '[.versions[].version] | map(tostring) | join(" ")')"

# ---- retention by age (--history-max-age), with no write coming ------------
stop_pid "$A_PID"
stop_pid "$B_PID"
AGE=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "/t0925-age-$$/" --heartbeat 1 --history-max-age 3)
start_plane c "${AGE[@]}"
C_URL=$PLANE_URL
C_LOG=$PLANE_LOG
start_plane d "${AGE[@]}"
D_URL=$PLANE_URL
D_LOG=$PLANE_LOG
web round_robin 9301 | on "$C_URL" ctl put cluster/web --message "aging 1" >/dev/null
web round_robin 9302 | on "$C_URL" ctl put cluster/web --message "aging 2" >/dev/null
check_eq "both versions are in the log at first" "aging 2|aging 1" \
	"$(curl -fsS "$C_URL/v1/history" | json '[.versions[].message] | join("|")')"
for r in c d; do
	[ $r = c ] && u=$C_URL || u=$D_URL
	check "past the age, with no write since, both are dropped on $r (the floor is the version)" \
		wait_until 15 sh -c "[ \"\$(curl -fsS '$u/v1/history' | jq -c '[.floor, (.versions | length)]')\" = '[2,0]' ]"
done
check_eq "tetherctl log lists none of them" "" "$(on "$D_URL" ctl log | grep aging)"
check_eq "show 1 is past the history kept (410)" 410 "$(curl -sS -o /dev/null -w '%{http_code}' "$D_URL/v1/history/1")"
check_eq "get --at the floor (the current version) still answers" round_robin \
	"$(on "$D_URL" ctl get cluster/web --at 2 | json .lb)"
check "a replica says what it dropped" grep -q 'history: dropped the versions through 2, older than 3s' "$C_LOG" "$D_LOG"
web least_conn 9303 | on "$D_URL" ctl put cluster/web --message "after the trim" >/dev/null
check_eq "a write on the other replica starts the log again, the floor where it was" "3 after the trim 2" \
	"$(curl -fsS "$C_URL/v1/history" | json '"\(.versions[0].version) \(.versions[0].message) \(.floor)"')"
check "then that version ages out too" wait_until 15 sh -c \
	"[ \"\$(curl -fsS '$C_URL/v1/history' | jq -c '[.floor, (.versions | length)]')\" = '[3,0]' ]"

# ---- writes on both replicas for longer than the age ------------------------
# each commit drops what aged, and so does each replica's keeper between
# them: whoever moves the floor, it only moves up and the log stays whole
# above it
# (until the floor has moved past 10, however fast the writes go; the
# minute is only a bound on a broken plane)
n=3
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do
	n=$((n + 1))
	[ $((n % 2)) = 0 ] && u=$C_URL || u=$D_URL
	web round_robin $((10000 + n)) | on "$u" ctl put cluster/web >/dev/null || break
	[ $((n % 20)) = 0 ] && [ "$(curl -fsS "$C_URL/v1/history?limit=1" | jq .floor)" -gt 10 ] && break
done
check_eq "every write on either replica committed" "$n" "$(version_on "$C_URL")"
for r in c d; do
	[ $r = c ] && u=$C_URL || u=$D_URL
	out=$(curl -fsS "$u/v1/history?limit=10000")
	check_eq "on $r the log is every version above the floor" "$n" \
		"$(echo "$out" | jq '.floor as $f | [.versions[].version] | if . == ([range($f + 1; '"$n"' + 1)] | reverse) then '"$n"' else "floor \($f), \(length) versions" end')"
	check "on $r the floor moved past the versions older than the age" \
		jq -e '.floor > 10 and ([.versions[].time] | min) >= (now | floor) - 3 - 2' <<<"$out"
done

# ---- a history read waiting on etcd holds up no other request ---------------
start_plane e "${AGE[@]}" --threads 1
E_URL=$PLANE_URL
requests() { curl -sS --max-time 2 "$E_URL/metrics" | awk '$1 == "tether_requests_total" {print $2}'; }
r0=$(requests)
kill -STOP "${ETCD_PID[1]}"
curl -sS -o "$WORK/stalled.json" -w '%{http_code}' --max-time 30 "$E_URL/v1/history" >"$WORK/stalled.code" 2>&1 &
STALLED=$!
# the read has arrived: this poll is the second request since r0
wait_until 10 sh -c "[ \"\$(curl -sS --max-time 2 '$E_URL/metrics' | awk '\$1 == \"tether_requests_total\" {print \$2}')\" -ge $((r0 + 2)) ]" ||
	diag "the stalled read did not arrive"
check "while etcd stalls under a history read, /healthz answers (one HTTP thread)" \
	curl -fsS --max-time 3 -o /dev/null "$E_URL/healthz"
kill -CONT "${ETCD_PID[1]}"
wait "$STALLED"
check_eq "the read is answered once etcd is back" 200 "$(cat "$WORK/stalled.code")"
check_eq "... with the log" "$n" "$(json .version <"$WORK/stalled.json")"

done_testing
