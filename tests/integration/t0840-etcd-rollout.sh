#!/usr/bin/env bash
# t0840-etcd-rollout.sh: staged rollouts over --store etcd with two plane
# replicas and 100 simulated nodes (bench/sse_load --ack), half on each.
# One rollout controller runs at a time, elected through an etcd lease;
# the other replica follows its records. Checked: one fleet view from both
# replicas; a rollout whose members are spread over both completes only on
# ACKs from both; a NACK from a node on the replica that is not the
# controller reverts it; and after kill -9 of the controller in the middle
# of a rollout, the survivor takes over within the lease's TTL and resumes
# at the stage the store says -- the same rollout, never from the start.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
LOAD=$TOP_BUILDDIR/bench/sse_load
[ -x "$LOAD" ] || bail "no $LOAD: build it (make check builds it)"
need_cmd jq curl
N=50    # per replica
TTL=3

etcd_cluster_start 3
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix /t0840/ --heartbeat 1 --rollout staged
	--stages 10,50,100 --bake 3 --ack-timeout 30 --lease-ttl $TTL)
start_plane a "${E[@]}"
A_URL=$PLANE_URL A_PID=$PLANE_PID A_PORT=$PLANE_PORT
start_plane b "${E[@]}"
B_URL=$PLANE_URL B_PID=$PLANE_PID B_PORT=$PLANE_PORT
PLANE_URL=$A_URL put file/one '{"path":"one.txt","content":"1\n"}' >/dev/null
check "b has version 1" wait_until 10 sh -c "[ \"\$(curl -fsS '$B_URL/v1/resources' | jq -r .version)\" = 1 ]"

ctl_of() { curl -fsS "$1/metrics" | awk '$1 == "tether_rollout_controller" {print $2}'; }
controllers() { echo $(( $(ctl_of "$A_URL" || echo 0) + $(ctl_of "$B_URL" || echo 0) )); }
one_controller() { [ "$(controllers)" = 1 ]; }
check "one replica is elected the rollout controller" wait_until 15 one_controller
if [ "$(ctl_of "$A_URL")" = 1 ]; then
	C=a C_URL=$A_URL C_PID=$A_PID F_URL=$B_URL F_PORT=$B_PORT C_PORT=$A_PORT
else
	C=b C_URL=$B_URL C_PID=$B_PID F_URL=$A_URL F_PORT=$A_PORT C_PORT=$B_PORT
fi
diag "the controller is $C"
check "... and says so in its log" grep -q "is the controller" "$WORK/$C.log"

# the nodes: c- on the controller, f- on the follower; only the follower's
# NACK a push that carries BAD; each fails over to the other replica
"$LOAD" -n $N --version 1 --prefix c- --ack --linger 600 --failover "127.0.0.1:$F_PORT" --timeout 60 \
	"127.0.0.1:$C_PORT" >"$WORK/c.out" 2>"$WORK/c.err" &
track_pid $!
"$LOAD" -n $N --version 1 --prefix f- --ack --nack-marker BAD --linger 600 --failover "127.0.0.1:$C_PORT" \
	--timeout 60 "127.0.0.1:$F_PORT" >"$WORK/f.out" 2>"$WORK/f.err" &
track_pid $!
check "$N nodes stream to each replica" wait_until 60 sh -c "grep -q '^ready=1' '$WORK/c.out' && grep -q '^ready=1' '$WORK/f.out'"

connected_on() { curl -fsS "$1/v1/nodes" | jq '[.[] | select(.connected)] | length'; }
all_connected() { [ "$(connected_on "$A_URL")" = $((2 * N)) ] && [ "$(connected_on "$B_URL")" = $((2 * N)) ]; }
check "both replicas see all $((2 * N)) nodes connected (one fleet view)" wait_until 15 all_connected

# ---- a good change: members on both replicas, ACKs from both ------------------------------------
cur() { curl -fsS "$1/v1/rollouts/current" | jq -r "$2"; }
ro_done() { [ "$(cur "$1" "$2")" = "$3" ]; }
PLANE_URL=$F_URL put file/two '{"path":"two.txt","content":"2\n"}' >/dev/null   # written on the follower
check "the controller starts a rollout of version 2" wait_until 20 ro_done "$C_URL" .to_version 2
check_eq "... with every node a member" $((2 * N)) "$(cur "$C_URL" .members)"
check "the follower shows the same rollout" wait_until 5 ro_done "$F_URL" .to_version 2
check "it completes (every stage ACKed, half the ACKs through the follower)" \
	wait_until 40 ro_done "$C_URL" .state completed
check_eq "... touching all $((2 * N))" $((2 * N)) "$(cur "$C_URL" .touched)"
check "the follower's record says completed too" wait_until 5 ro_done "$F_URL" .state completed
acked_all() { [ "$(curl -fsS "$1/v1/nodes" | jq "[.[] | select(.acked_version >= $2)] | length")" = $((2 * N)) ]; }
check "every node ACKed version 2, as the controller sees it" wait_until 10 acked_all "$C_URL" 2
check "... and as the follower sees it" wait_until 10 acked_all "$F_URL" 2
check_eq "the follower made no transition: its controller gauge is 0" 0 "$(ctl_of "$F_URL")"
check "no replica said it was not the controller while leading" sh -c "! grep -q 'no longer the controller' '$WORK/a.log' '$WORK/b.log'"

# ---- a NACK on the follower's side reverts ------------------------------------------------------
PLANE_URL=$C_URL put file/bad '{"path":"bad.txt","content":"BAD\n"}' >/dev/null
check "a follower node's NACK reverts the rollout" wait_until 40 ro_done "$C_URL" .state rolled_back
reason=$(cur "$C_URL" .reason)
diag "reason: $reason"
check "... naming a node of the follower and the NACK" sh -c "echo '$reason' | grep -q 'node f-.*NACK'"
check "... before the last stage (touched $(cur "$C_URL" .touched) of $((2 * N)))" \
	[ "$(cur "$C_URL" .touched)" -lt $((2 * N)) ]
rv=$(cur "$C_URL" .revert_version)
check "every node gets the revert (version $rv)" wait_until 20 acked_all "$C_URL" "$rv"
check "the follower serves the revert: bad.txt is gone there" sh -c \
	"curl -fsS '$F_URL/v1/resources' | jq -e '[.resources[] | select(.name == \"file/bad\")] | length == 0' >/dev/null"

# ---- the controller dies mid-rollout -------------------------------------------------------------
id0=$(cur "$C_URL" .id)
PLANE_URL=$F_URL put file/three '{"path":"three.txt","content":"3\n"}' >/dev/null
v3=$(curl -fsS "$F_URL/v1/resources" | jq -r .version)
check "a rollout of version $v3 starts" wait_until 20 ro_done "$C_URL" .to_version "$v3"
at_stage2() { [ "$(cur "$C_URL" .stage_index)" -ge 2 ] 2>/dev/null; }
check "... and reaches its second stage" wait_until 20 at_stage2
rid=$(cur "$C_URL" .id)
stage=$(cur "$C_URL" .stage)
check "it is a new rollout" [ "$rid" -gt "$id0" ]
kill -KILL "$C_PID"
untrack_pid "$C_PID"
t0=$(date +%s.%N)
follower_leads() { [ "$(ctl_of "$F_URL")" = 1 ]; }
check "the survivor becomes the controller" wait_until $((TTL + 5)) follower_leads
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
diag "took over $took s after the kill (lease TTL $TTL s)"
check "... within the lease's TTL plus one keep-alive period ($took s)" \
	awk -v t="$took" -v l=$TTL 'BEGIN {exit !(t <= l + l / 4 + 1)}'
F=$([ $C = a ] && echo b || echo a)
check "... and resumes the same rollout at the stage the store says ($stage%)" \
	wait_until 5 grep -q "rollout $rid: resumed at stage $stage%" "$WORK/$F.log"
check "the rollout completes on the survivor" wait_until 40 ro_done "$F_URL" .state completed
check_eq "... the same rollout, not a new one" "$rid" "$(cur "$F_URL" .id)"
check "every node (the dead replica's ones failed over) ACKed version $v3" wait_until 20 acked_all "$F_URL" "$v3"
check_eq "one controller: the survivor" 1 "$(ctl_of "$F_URL")"

# ---- a replica stopped cleanly hands over at once (its lease is revoked) ------------------------
start_plane c "${E[@]}"
G_URL=$PLANE_URL
stop_pid "$([ $F = a ] && echo "$A_PID" || echo "$B_PID")"
t0=$(date +%s.%N)
g_leads() { [ "$(ctl_of "$G_URL")" = 1 ]; }
check "after a clean stop, the other replica leads" wait_until $((TTL + 5)) g_leads
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
diag "took over $took s after the clean stop"
check "... well within the TTL: the lease was revoked ($took s)" awk -v t="$took" -v l=$TTL 'BEGIN {exit !(t < l)}'

# ---- etcd loses its quorum: the controller steps down, and leads again after ---------------------
PLANE_URL=$G_URL
for i in 2 3; do
	kill -KILL "${ETCD_PID[$i]}"
	untrack_pid "${ETCD_PID[$i]}"
done
g_idle() { [ "$(ctl_of "$G_URL")" = 0 ]; }
check "without quorum the controller steps down (within the TTL)" wait_until $((TTL + 3)) g_idle
check_eq "... and a write gets 503" 503 "$(api_status PUT /v1/resources/file/four --data-binary '{"path":"four.txt","content":"4\n"}' -m 20)"
for i in 2 3; do
	etcd_member_start "$i"
done
check "with the quorum back it leads again" wait_until 30 g_leads
check "... and a write goes out as a rollout that completes" wait_until 30 sh -c \
	"curl -fsS -X PUT --data-binary '{\"path\":\"five.txt\",\"content\":\"5\\n\"}' '$G_URL/v1/resources/file/five' >/dev/null"
v5=$(curl -fsS "$G_URL/v1/resources" | jq -r .version)
check "... rollout to version $v5 completed" wait_until 30 sh -c \
	"[ \"\$(curl -fsS '$G_URL/v1/rollouts/current' | jq -r '.to_version, .state' | tr '\n' ' ')\" = '$v5 completed ' ]"

# ---- history keys in etcd stay bounded: once a rollout is released, each name keeps only its
# newest state at or below the released version -------------------------------------------------
hist_of_five() {
	etcdv3 1 /v3/kv/range "{\"key\":\"$(printf /t0840/hist/ | base64)\",\"range_end\":\"$(printf /t0840/hist0 | base64)\",\"keys_only\":true}" |
		jq '[.kvs // [] | .[] | .key | @base64d | select(endswith("/file/five"))] | length'
}
for i in 1 2 3 4; do
	curl -fsS -X PUT --data-binary "{\"path\":\"five.txt\",\"content\":\"5.$i\\n\"}" "$G_URL/v1/resources/file/five" >/dev/null
	vi=$(curl -fsS "$G_URL/v1/resources" | jq -r .version)
	wait_until 20 sh -c "[ \"\$(curl -fsS '$G_URL/v1/rollouts/current' | jq -r '.to_version, .state' | tr '\n' ' ')\" = '$vi completed ' ]" ||
		diag "rollout to $vi did not complete"
done
check "four more versions of file/five, each released" sh -c \
	"[ \"\$(curl -fsS '$G_URL/v1/rollouts/current' | jq -r .state)\" = completed ]"
n=$(hist_of_five)
diag "history keys of file/five in etcd: $n"
check "... leave at most one history key of it in etcd (the newest at or below the floor)" [ "$n" -le 1 ]

done_testing
