#!/usr/bin/env bash
# t1001-rollout-wait.sh: a staged plane that restarts waits for its known
# nodes to reconnect before it starts a rollout (three heartbeats at
# most), and says so: the write's answer ({"rollout":{"state":"waiting",
# "for":"nodes","back","expected","until"}}) and tetherctl put ("its
# rollout waits for nodes to reconnect (B of E back, up to S more)"), one
# log line at the start of the wait and one at its end, "waiting" in GET
# /v1/rollouts/current and /v1/status, and `tetherctl rollout status`
# printing it -- never "no rollout yet" while a version waits (here the
# plane has had no rollout at all: its nodes connected before any write).
# The wait ends early once every known node is back. With --store etcd,
# a replica that takes over as the rollout controller waits and says so
# the same way.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

need_cmd jq curl
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

HB=3
P=(--rollout staged --stages 50,100 --bake 1 --ack-timeout 60)
start_plane p "${P[@]}" --heartbeat $HB
NODES=(a1 a2)
for n in "${NODES[@]}"; do
	start_agent "$n" --backoff-max 1 --stream-timeout 90
done
connected() { [ "$(curl -sS "$PLANE_URL/v1/nodes" | jq '[.[] | select(.connected)] | length')" = "$1" ]; }
wait_until 20 connected 2 || bail "the plane does not see both agents"
check "no rollout yet: 404" sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' '$PLANE_URL/v1/rollouts/current')\" = 404 ]"

# ---- a restart with one of two nodes gone: the wait runs its full length --------------

# the same port: the agents reconnect to it
P+=(--listen "127.0.0.1:$PLANE_PORT")
stop_pid "$PLANE_PID"
stop_pid "${APID[a2]}"
start_plane p "${P[@]}" --heartbeat $HB
ans=$(curl -sS -X PUT --data-binary '{"path":"motd.txt","content":"motd-1\n"}' "$PLANE_URL/v1/resources/file/motd")
check "the write's answer: its rollout waits for nodes (of 2 expected)" \
	jq -e '.version == 1 and .rollout.state == "waiting" and .rollout.for == "nodes" and .rollout.expected == 2 and .rollout.back <= 1 and .rollout.queue == 1' <<<"$ans"
check "... until a time within three heartbeats" jq -e "(.rollout.until - $(date +%s)) | . > 0 and . <= $((3 * HB + 1))" <<<"$ans"
out=$(ctl put file/b - <<<'{"path":"b.txt","content":"b\n"}')
check "tetherctl put says what it waits for" \
	grep -Eq '^version 2: its rollout waits for nodes to reconnect \([01] of 2 back, up to [0-9] s more\)$' <<<"$out"
cur=$(curl -sS -w '\n%{http_code}' "$PLANE_URL/v1/rollouts/current")
check_eq "GET /v1/rollouts/current: 200, not 'no rollout yet'" 200 "$(tail -n 1 <<<"$cur")"
check "... state none, waiting for nodes, version 2, 2 expected" \
	jq -e '.state == "none" and .waiting.for == "nodes" and .waiting.version == 2 and .waiting.expected == 2' <<<"$(head -n 1 <<<"$cur")"
check "... and the two versions queued" jq -e '[.queue[].version] == [1, 2] and .queued == 2' <<<"$(head -n 1 <<<"$cur")"
check "/v1/status carries it too" sh -c "curl -sS '$PLANE_URL/v1/status' | jq -e '.waiting.for == \"nodes\" and .waiting.version == 2' >/dev/null"
out=$(ctl rollout status)
diag "$out"
check "rollout status: none yet" grep -Eq '^rollout: +none yet$' <<<"$out"
check "rollout status: what it waits for, in words" \
	grep -Eq '^waiting: +version 2 waits for nodes to reconnect: [01] of 2 back, up to [0-9]+ s more \(until [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[+-][0-9]{2}:[0-9]{2}\)$' <<<"$out"
check "rollout status: never 'no rollout yet'" sh -c "! grep -q 'no rollout yet' <<'OUT'
$out
OUT"
check "the plane logged the start of the wait" \
	grep -Eq 'rollout of version 1 waits for nodes to reconnect: [01] of 2 back, up to [0-9] s more' "$PLANE_LOG"
check "the wait ends after three heartbeats: logged, one of two back" wait_until 20 \
	grep -q 'rollout of version 2: the wait for nodes is over: 1 of 2 back (the rest join when they reconnect)' "$PLANE_LOG"
check "then rollout 1 starts and completes, the node back its one member" \
	wait_until 20 ro_is '.id == 1 and .to_version == 2 and .state == "completed" and .members == 1'
check "nothing waits any more" sh -c "curl -sS '$PLANE_URL/v1/status' | jq -e '.waiting == null' >/dev/null"
check_eq "the wait was logged once" 1 "$(grep -c 'waits for nodes to reconnect' "$PLANE_LOG")"

# ---- every known node back: the wait ends at once ------------------------------------------

stop_pid "$PLANE_PID"
stop_pid "${APID[a1]}"
LONG=20   # three heartbeats: a minute
start_plane p "${P[@]}" --heartbeat $LONG
T0=$(date +%s)
out=$(ctl put file/motd - <<<'{"path":"motd.txt","content":"motd-3\n"}')
check_eq "a write right after the restart waits, no node back yet" \
	"version 3: its rollout waits for nodes to reconnect (0 of 2 back, up to 60 s more)" "$out"
for n in "${NODES[@]}"; do
	start_agent "$n" --backoff-max 1 --stream-timeout 90
done
check "both nodes back: the wait is over at once, logged" wait_until 30 \
	grep -q 'rollout of version 3: the wait for nodes is over: 2 of 2 back$' "$PLANE_LOG"
check "rollout 2 starts, both nodes its members" wait_until 10 ro_is '.id == 2 and .to_version == 3 and .members == 2'
check "... well before the minute" test $(($(date +%s) - T0)) -lt 40
for n in "${NODES[@]}"; do stop_pid "${APID[$n]}"; done
stop_pid "$PLANE_PID"

# ---- etcd: the replica that takes over as the controller waits, and says so ---------------

if [ ! -x "$ETCD_BIN" ]; then
	ok "etcd: the take-over's wait # SKIP etcd is not installed"
	done_testing
	exit
fi
etcd_cluster_start 1
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "/t1001-$$/" --heartbeat $HB --lease-ttl 3 "${P[@]:0:8}")
start_plane ea "${E[@]}"
A_URL=$PLANE_URL A_PID=$PLANE_PID
start_plane eb "${E[@]}"
B_URL=$PLANE_URL B_PID=$PLANE_PID
check "a is the rollout controller (it started first)" wait_until 15 sh -c "[ \"\$(curl -fsS '$A_URL/metrics' | awk '\$1 == \"tether_rollout_controller\" {print \$2}')\" = 1 ]"
NODES=(e1 e2)   # new nodes: fresh state
for n in "${NODES[@]}"; do
	start_agent "$n" --plane "$A_URL,$B_URL" --backoff-max 1 --stream-timeout 90
done
PLANE_URL=$A_URL
check "both agents connected" wait_until 20 connected 2
echo '{"path":"motd.txt","content":"e-1\n"}' >"$WORK/e1.json"
check "etcd: version 1 written" ctl put file/motd "$WORK/e1.json"
check "its rollout completes" wait_until 30 ro_is '.to_version == 1 and .state == "completed"'
stop_pid "${APID[e2]}"
stop_pid "$A_PID"   # a clean stop hands the controller over at once
PLANE_URL=$B_URL
check "b takes over as the controller" wait_until 15 sh -c "[ \"\$(curl -fsS '$B_URL/metrics' | awk '\$1 == \"tether_rollout_controller\" {print \$2}')\" = 1 ]"
ans=$(curl -sS -X PUT --data-binary '{"path":"motd.txt","content":"e-2\n"}' "$B_URL/v1/resources/file/motd")
check "a write on b meanwhile: its rollout waits for nodes" \
	jq -e '.rollout.state == "waiting" and .rollout.expected == 2 and .rollout.back <= 1' <<<"$ans"
check "b's /v1/status says so" sh -c "curl -sS '$B_URL/v1/status' | jq -e '.waiting.for == \"nodes\" and .waiting.expected == 2' >/dev/null"
check "b's log says it waits" grep -Eq 'rollout of version 2 waits for nodes to reconnect: [01] of 2 back' "$WORK/eb.log"
check "the wait ends with e1 back, logged" wait_until 20 \
	grep -q 'rollout of version 2: the wait for nodes is over: 1 of 2 back' "$WORK/eb.log"
check "then its rollout runs to e1" wait_until 20 ro_is '.to_version == 2 and .state == "completed" and .members == 1'
done_testing
