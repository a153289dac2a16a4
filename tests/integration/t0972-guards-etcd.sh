#!/usr/bin/env bash
# t0972-guards-etcd.sh: guards and overrides with --store etcd, two
# replicas signing with one key. A guard written on a holds on b (422); an
# override made on a is in b's log; a node with --trust streaming from b
# takes the overridden version (b signs "overridden", learnt from the
# watch before the version reached its store), and refuses by the guard a
# state signed with the same key that crosses it with no override behind
# it (a third plane on another prefix). After b restarts it still signs
# the override (read back from the log).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-guards.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd jq curl

# overridden_on URL: the "overridden" of the statement b signs for its version
overridden_on() {
	curl -fsS "$1/v1/config?node=probe&version=0" | jq -r .statement | cut -d. -f1 |
		tr '_-' '/+' | { s=$(cat); while [ $((${#s} % 4)) -ne 0 ]; do s="$s="; done; echo "$s"; } |
		base64 -d 2>/dev/null | jq -r '.overridden // 0'
}

"$CTL_BIN" keygen "$WORK/plane.key" >/dev/null || bail "keygen failed"
etcd_cluster_start 1
check "an etcd member is healthy" etcd_healthy 1
PREFIX=/t0972-$$/
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "$PREFIX" --heartbeat 0.5 --signing-key "$WORK/plane.key")
start_plane a "${E[@]}"
A_URL=$PLANE_URL
start_plane b "${E[@]}"
B_URL=$PLANE_URL
B_PID=$PLANE_PID
B_PORT=$PLANE_PORT

eps 4 | on "$A_URL" ctl put cluster/web >/dev/null
echo '{"match":"cluster/web","max_shrink":0.5}' | on "$A_URL" ctl put guard/shrink >/dev/null
V=$(on "$A_URL" plane_version)
check "b follows to version $V" wait_until 10 sh -c "[ \"\$(curl -fsS '$B_URL/healthz' | jq -r .version)\" = $V ]"
check_eq "a guard written on a holds on b" 422 \
	"$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X PUT --data-binary "$(eps 1)" "$B_URL/v1/resources/cluster/web")"
check "... naming it" grep -qF "guard/shrink: cluster/web: 4 -> 1 endpoints loses 75% (max_shrink 0.5)" "$WORK/answer"

start_agent n1 --plane "$B_URL" --trust "$WORK/plane.key.pub" --backoff-min 0.1 --backoff-max 0.5
check "n1 (--trust, on b) runs version $V" wait_until 15 agent_at n1 "$V"
eps 2 >"$WORK/web2.json"
on "$A_URL" ctl put cluster/web "$WORK/web2.json" --override "drain half" >/dev/null || bail "override on a failed"
OV=$(on "$A_URL" plane_version)
check_eq "b's log has a's override" '{"passed":[],"reason":"drain half"}' \
	"$(curl -fsS "$B_URL/v1/history" | jq -c ".versions[] | select(.version == $OV) | .override")"
eps 0 >"$WORK/web0.json"
on "$A_URL" ctl put cluster/web "$WORK/web0.json" --override "drain all" >/dev/null || bail "override on a failed"
OV=$(on "$A_URL" plane_version)
check_eq "... with the guards it passed" '{"passed":["guard/shrink"],"reason":"drain all"}' \
	"$(curl -fsS "$B_URL/v1/history" | jq -c ".versions[] | select(.version == $OV) | .override")"
check "n1 on b takes the overridden shrink (b signs it)" wait_until 15 agent_at n1 "$OV"
check "... under the signed override" grep -q "push $OV crosses guards under the plane's override of version $OV (signed)" "$WORK/n1.log"
check_eq "b's statement of version $OV says overridden $OV" "$OV" "$(overridden_on "$B_URL")"

stop_pid "$B_PID"
start_plane b "${E[@]}" --listen "127.0.0.1:$B_PORT"
check_eq "after a restart b still signs it (read back from the log)" "$OV" "$(overridden_on "$B_URL")"

# the same key, another prefix: a state that crosses the guard, no override behind it
eps 4 | on "$A_URL" ctl put cluster/web >/dev/null
V=$(on "$A_URL" plane_version)
check "n1 runs version $V (4 endpoints)" wait_until 15 agent_at n1 "$V"
start_plane rogue --store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "/t0972-rogue-$$/" --heartbeat 0.5 \
	--signing-key "$WORK/plane.key"
R_URL=$PLANE_URL
eps 1 | on "$R_URL" ctl put cluster/web >/dev/null
echo '{"match":"cluster/web","max_shrink":0.5}' | on "$R_URL" ctl put guard/shrink >/dev/null
while [ "$(on "$R_URL" plane_version)" -le "$((V + 1))" ]; do
	echo "{\"path\":\"pad.txt\",\"content\":\"$RANDOM\"}" | on "$R_URL" ctl put file/pad >/dev/null || break
done
RV=$(on "$R_URL" plane_version)
stop_pid "${APID[n1]}"
ALOG=n1-rogue start_agent n1 --plane "$R_URL" --trust "$WORK/plane.key.pub" --backoff-min 0.1 --backoff-max 0.5
check "n1 refuses version $RV signed with the key but crossing the guard" \
	wait_until 20 on "$R_URL" nack_has n1 "guard/shrink: cluster/web: 4 -> 1 endpoints loses 75% (max_shrink 0.5)"
check "... and keeps serving version $V" agent_at n1 "$V"

done_testing
