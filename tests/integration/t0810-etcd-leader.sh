#!/usr/bin/env bash
# t0810-etcd-leader.sh: the etcd leader is killed (kill -9) while writes
# go on through two plane replicas: no write that got a 2xx is lost (each
# is in the final state, at the version it was answered), the versions
# answered are all different, every node applies versions strictly
# increasing, and every state a node applied is one the plane signed (the
# agents verify each push against a signed digest of the state at that
# version: a state that never existed is refused, and none is).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
need_cmd jq curl

etcd_cluster_start 3
"$TOP_BUILDDIR/tetherctl" keygen "$WORK/signing" >/dev/null 2>&1 || bail "keygen failed"
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix /t0810/ --heartbeat 1 --signing-key "$WORK/signing")
start_plane a "${E[@]}"
A_URL=$PLANE_URL
start_plane b "${E[@]}"
B_URL=$PLANE_URL
start_agent n1 --plane "$A_URL,$B_URL" --trust "$WORK/signing.pub" --consumer files
start_agent n2 --plane "$B_URL,$A_URL" --trust "$WORK/signing.pub" --consumer files
check "two verifying agents, one on each replica, start" wait_until 10 all_at 0 n1 n2

# the leader: the member whose id is the leader its status names
leader=0
for i in 1 2 3; do
	st=$(etcdv3 "$i" /v3/maintenance/status '{}')
	if [ "$(echo "$st" | jq -r '.header.member_id')" = "$(echo "$st" | jq -r '.leader')" ]; then
		leader=$i
	fi
done
check "the etcd leader is found (member $leader)" test "$leader" -gt 0

# writers: 60 writes, alternating replicas, one at a time per writer, two writers
writer() {
	local w=$1 i url code
	for i in $(seq 1 30); do
		if [ $((i % 2)) = 0 ]; then url=$A_URL; else url=$B_URL; fi
		code=$(curl -sS -m 30 -o "$WORK/w$w-$i.json" -w '%{http_code}' -X PUT \
			-d "{\"path\":\"w$w-$i.txt\",\"content\":\"$w-$i\"}" "$url/v1/resources/file/w$w-$i")
		echo "$w $i $code $(cat "$WORK/w$w-$i.json" 2>/dev/null)" >>"$WORK/writes"
	done
}
: >"$WORK/writes"
writer 1 &
W1=$!
writer 2 &
W2=$!
sleep 0.5
kill -KILL "${ETCD_PID[$leader]}"
untrack_pid "${ETCD_PID[$leader]}"
wait "$W1" "$W2"
diag "$(awk '{print $3}' "$WORK/writes" | sort | uniq -c | tr '\n' ' ')"
ok_writes=$(awk '$3 ~ /^2/' "$WORK/writes" | wc -l)
check "most writes got a 2xx through the leader's death ($ok_writes of 60)" test "$ok_writes" -ge 30
check "every other write got a clear 503 (none a 500)" sh -c "! awk '\$3 !~ /^2/ && \$3 != 503' '$WORK/writes' | grep -q ."
check_eq "the versions answered are all different" "$ok_writes" \
	"$(awk '$3 ~ /^2/' "$WORK/writes" | grep -o '"version":[0-9]*' | sort -u | wc -l)"

# every acknowledged write is in the final state, on both replicas
final=$(curl -fsS "$A_URL/v1/resources" | jq -r '.version')
check "both replicas agree on the final version ($final)" wait_until 15 sh -c \
	"[ \"\$(curl -fsS '$B_URL/v1/resources' | jq -r .version)\" = '$final' ]"
lost=0
while read -r w i code _; do
	case $code in 2*) ;; *) continue ;; esac
	got=$(curl -fsS "$B_URL/v1/resources/file/w$w-$i" 2>/dev/null | jq -r '.body.content // empty')
	[ "$got" = "$w-$i" ] || { lost=$((lost + 1)); diag "lost: file/w$w-$i ($got)"; }
done <"$WORK/writes"
check_eq "no acknowledged write is lost" 0 "$lost"

# the nodes: strictly increasing versions, only signed states, all converge
check "both nodes converge to version $final" wait_until 20 all_at "$final" n1 n2
for n in n1 n2; do
	# "applied version V (KIND, [N pushes merged, ]C changes, ...)": V and C
	sed -n 's/.*applied version \([0-9]*\) (.* \([0-9]*\) changes,.*/\1 \2/p' "$WORK/$n.log" >"$WORK/$n.versions"
	check "$n applied versions strictly increasing ($(wc -l <"$WORK/$n.versions") applies with changes)" \
		awk '$2 > 0 { if (seen && $1 <= prev) bad = 1; prev = $1; seen = 1 } END {exit bad}' "$WORK/$n.versions"
	check "... never going back (an unchanged push after a move repeats its version, no lower)" \
		awk 'NR > 1 && $1 < prev {bad = 1} {prev = $1} END {exit bad}' "$WORK/$n.versions"
	check "$n's stream on its first replica did not go silent while etcd elected a leader" \
		sh -c "! grep -q 'stream: silent for' '$WORK/$n.log'"
	check "$n refused no push as unsigned or not what the plane signed" \
		sh -c "! grep -q 'digest\|not the state\|refused: statement' '$WORK/$n.log'"
	check_eq "$n holds every acknowledged write" "$ok_writes" \
		"$(ls "$WORK/$n.out" | grep -c '^w[12]-[0-9]*\.txt$')"
done

done_testing
