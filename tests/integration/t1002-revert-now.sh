#!/usr/bin/env bash
# t1002-revert-now.sh: `tetherctl revert VERSION --now`, an emergency
# revert (POST /v1/revert {"version":V,"now":true}): on a staged plane
# with a bake of ten minutes, a bad version baking at its first stage and
# a write queued behind it, the revert is ACKed by every node at once (no
# stage, no bake) while a normal write would still be baking; the rollout
# in progress ends "aborted", superseded, and the queued version's
# content is replaced (log: REVERTED BY). It is recorded as an emergency:
# log (a "!" before its message), show ("emergency: yes"), the history
# JSON, the SQLite vlog column, and the etcd vlog record. Nodes still
# check and ACK it (a NACKing check keeps the node where it was and the
# plane records the NACK). Roles: a reader may not (403), an operator may
# to the baseline of the current or last rollout only (any other version
# is an admin's: 403, and an admin's revert --now to another version is
# tested below), an operator's plain revert stays an admin's (403); under
# a freeze it needs an admin's --override (423 without). After a kill -9
# and a start, the records the revert committed with it hold (rollout 2
# superseded, version 4 released); an operator's baseline moves with the
# next rollout, and holds for the last one when none is in progress.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

need_cmd jq curl sqlite3
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

echo "admin-$$-secret-token-0123456789" >"$WORK/admin.tok"
SECURE=1 start_plane p --admin-token-file "$WORK/admin.tok" --rollout staged --stages 50,100 --bake 600 \
	--heartbeat 1 --ack-timeout 60
for who in admin:alice operator:oscar reader:rita; do
	TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --role "${who%%:*}" --name "${who#*:}" >"$WORK/${who#*:}.tok" ||
		bail "cannot create ${who#*:}'s token"
done
for n in a1 a2; do
	TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --node "$n" >"$WORK/$n.tok" || bail "cannot create $n's token"
done
as() {
	local who=$1
	shift
	TETHER_TOKEN_FILE=$WORK/$who.tok ctl "$@"
}
CURL_OPTS=(-H "Authorization: Bearer $(cat "$WORK/admin.tok")")

as alice put file/motd - <<<'{"path":"motd.txt","content":"motd-1\n"}' >/dev/null || bail "cannot write version 1"
wait_until 10 ro_ended 1 || bail "rollout 1 did not end"
NODES=(a1 a2)
for n in "${NODES[@]}"; do
	start_agent "$n" --token-file "$WORK/$n.tok" --backoff-max 1 --stream-timeout 30
done
check "both agents reach version 1" wait_until 30 all_at 1 "${NODES[@]}"

# ---- a bad version bakes at its first stage, a write queued behind it -------------

as alice put file/motd - --message "bad" <<<'{"path":"motd.txt","content":"motd-2 BAD\n"}' >/dev/null ||
	bail "cannot write version 2"
first_stage() { ro_is '.id == 2 and .state == "in_progress" and .stage_index == 1 and .acked == 1'; }
check "rollout 2 reaches its first stage and bakes (ten minutes)" wait_until 20 first_stage
out=$(as alice put file/other - <<<'{"path":"other.txt","content":"o\n"}')
check_eq "version 3 is queued behind it" "version 3: queued behind rollout 2 (stage 1 of 2)" "$out"
check_eq "one node has version 2, the other 1" "1 2" "$(for n in "${NODES[@]}"; do st "$n" version; done | sort | xargs)"

# ---- roles ------------------------------------------------------------------------

as rita revert 1 --now >/dev/null 2>"$WORK/err"
check_eq "a reader may not revert --now (exit 1)" 1 "$?"
check "... 403" grep -q "403\|operator" "$WORK/err"
as oscar revert 2 --now >/dev/null 2>"$WORK/err"
check_eq "an operator's revert --now to a version other than the rollout's baseline is refused (exit 1)" 1 "$?"
diag "$(cat "$WORK/err")"
check "... it says: only to version 1, the baseline of rollout 2; another needs the admin role" grep -q \
	"an operator may revert at once only to version 1, the baseline of rollout 2 (the version released before it); another version needs the admin role" \
	"$WORK/err"
code=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$WORK/oscar.tok")" -X POST \
	--data '{"version":2,"now":true}' "$PLANE_URL/v1/revert")
check_eq "... 403" 403 "$code"
check "... and the rollout goes on (rollout 2 still at its first stage)" first_stage
as oscar revert 1 >/dev/null 2>"$WORK/err"
check_eq "an operator's plain revert is an admin's (exit 1)" 1 "$?"
check "... 403 admin" grep -q "admin" "$WORK/err"
check_eq "nothing was written" 3 "$(curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/healthz" | jq .version)"
code=$(curl -sS -o "$WORK/body" -w '%{http_code}' "${CURL_OPTS[@]}" -X POST --data '{"version":1,"now":"yes"}' \
	"$PLANE_URL/v1/revert")
check_eq "now must be a boolean (422)" 422 "$code"
check "... and the error says so" grep -q "now must be true or false" "$WORK/body"

# ---- under a freeze: an admin's --override only ----------------------------------------

as oscar freeze --until 1h --message "hold" >/dev/null || not_ok "cannot freeze"
as oscar revert 1 --now >/dev/null 2>"$WORK/err"
check_eq "frozen: an operator's revert --now is refused (exit 1)" 1 "$?"
check "... 423" grep -q "423\|frozen\|freeze" "$WORK/err"
check_eq "... nothing was written" 3 "$(curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/healthz" | jq .version)"
as oscar freeze --off >/dev/null || not_ok "cannot end the freeze"

# ---- the emergency revert --------------------------------------------------------------

out=$(as oscar revert 1 --now --message "stop the bleeding")
check_eq "an operator's revert --now: version 4, every node at once, rollout 2 superseded" \
	"version 4: emergency revert, sent to every node at once (no stages, no bakes); rollout 2 superseded" "$out"
check "both agents ACK version 4 (no stage, no bake)" wait_until 20 all_at 4 "${NODES[@]}"
check "... both recorded ACKed by the plane" wait_until 10 sh -c \
	"[ \"\$(curl -sS -H 'Authorization: Bearer $(cat "$WORK/admin.tok")' '$PLANE_URL/v1/nodes' | jq '[.[] | select(.acked_version == 4)] | length')\" = 2 ]"
check "no agent serves the bad content" sh -c "! grep -rq BAD '$WORK/a1.out' '$WORK/a2.out'"
check "... nor the queued version's file (its content was replaced)" sh -c "! test -e '$WORK/a1.out/other.txt'"
check "rollout 2 ended aborted, superseded by version 4" \
	ro_is '.id == 2 and .state == "aborted" and .revert_version == 4 and (.reason | test("superseded by the emergency revert, version 4"))'
check_eq "... and rollout 2 was still within its bake (a normal write would bake on)" true \
	"$(ro "(.stage_started_at + 600) > $(date +%s)")"
check_eq "nothing is queued" 0 "$(ro .queued)"
check "the plane's log says so" grep -q "rollout 2: superseded: the emergency revert, version 4, goes to every node at once" "$PLANE_LOG"

# ---- recorded as an emergency ------------------------------------------------------------

check_eq "history JSON: emergency, by oscar, reverting 2 and 3" "true|oscar (operator token)|emergency revert to version 1: stop the bleeding" \
	"$(curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/history/4" | jq -r '"\(.emergency)|\(.author)|\(.message)"')"
check_eq "versions 2 and 3 are REVERTED BY 4" "4 4" \
	"$(curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/history" | jq -r '[.versions[] | select(.version == 2 or .version == 3) | .reverted_by] | map(tostring) | join(" ")')"
check_eq "version 1 has no emergency member" null \
	"$(curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/history/1" | jq .emergency)"
out=$(as alice log)
diag "$out"
check "log: a '!' before the emergency's message" grep -Eq '^4 +.*! emergency revert to version 1: stop the bleeding' <<<"$out"
check "log: versions 2 and 3 reverted by 4" grep -Eq '^3 .* 4 *$' <<<"$out"
out=$(as alice show 4)
check "show: emergency: yes" grep -Eq '^emergency: +yes' <<<"$out"
check_eq "SQLite: the vlog's emergency column" "0 0 0 1" \
	"$(sqlite3 "$WORK/p.data/tether.db" 'SELECT emergency FROM vlog ORDER BY version' | xargs)"

# ---- a restart (kill -9): what the revert's commit recorded, with it ----------------------

PORT=$PLANE_PORT
stop_pid "$PLANE_PID" KILL
SECURE=1 start_plane p2 --admin-token-file "$WORK/admin.tok" --rollout staged --stages 50,100 --bake 600 \
	--heartbeat 1 --ack-timeout 60 --listen "127.0.0.1:$PORT" --data "$WORK/p.data"
[ "$PLANE_PORT" = "$PORT" ] || bail "the plane came back on port $PLANE_PORT, not $PORT"
check "after kill -9 and a start: rollout 2 still aborted, superseded by version 4" \
	ro_is '.id == 2 and .state == "aborted" and .revert_version == 4'
check "... version 4 released: nothing queued, nothing waits" ro_is '.queued == 0 and (has("waiting") | not)'
check "... and the agents stay at version 4" wait_until 20 all_at 4 "${NODES[@]}"

# ---- a node's check still decides: a NACK of an emergency revert is recorded ----------------

as alice put file/motd - <<<'{"path":"motd.txt","content":"motd-5\n"}' >/dev/null || bail "cannot write version 5"
check "rollout of version 5 reaches its first stage" wait_until 20 ro_is '.to_version == 5 and .state == "in_progress" and .acked == 1'
stop_pid "${APID[a2]}"
bad_check "$WORK/check.sh"
start_agent a2 --token-file "$WORK/a2.tok" --backoff-max 1 --stream-timeout 30 --check "sh $WORK/check.sh"
as oscar revert 2 --now >/dev/null 2>"$WORK/err"
check_eq "an operator may not revert --now to version 2 (exit 1): the baseline is rollout 3's now" 1 "$?"
check "... which it names: version 4" grep -q "only to version 4, the baseline of rollout 3 " "$WORK/err"
# an admin's revert to version 2 (the BAD content) --now: a2's check refuses it
out=$(as alice revert 2 --now)
check "revert 2 --now: version 6" grep -q "^version 6: emergency revert" <<<"$out"
check "a1 takes version 6" wait_until 20 agent_at a1 6
check "a2 NACKs it (its check refuses BAD): the plane records the NACK" wait_until 20 has_nack a2 6
check "a2 keeps what it had (an older version, none of the BAD content)" sh -c \
	"[ \"\$(jq .version '$WORK/a2.state/status.json')\" -lt 6 ] && ! grep -rq BAD '$WORK/a2.out'"
out=$(as oscar revert 4 --now)
check_eq "an operator's revert --now to the baseline of the last rollout (3, superseded, not in progress)" \
	"version 7: emergency revert, sent to every node at once (no stages, no bakes)" "$out"
check "both agents take version 7" wait_until 20 all_at 7 "${NODES[@]}"

# ---- --rollout immediate: no rollout, so no baseline: an admin's only ------------------------

SECURE=1 start_plane i --admin-token-file "$WORK/admin.tok" --rollout immediate
TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --role operator --name olga >"$WORK/olga.tok" || bail "olga's token"
as admin put file/motd - <<<'{"path":"motd.txt","content":"i-1\n"}' >/dev/null || not_ok "immediate: version 1"
as admin put file/motd - <<<'{"path":"motd.txt","content":"i-2\n"}' >/dev/null || not_ok "immediate: version 2"
as olga revert 1 --now >/dev/null 2>"$WORK/err"
check_eq "immediate: an operator's revert --now is refused (exit 1)" 1 "$?"
check "... it says why: no rollout, --rollout immediate, the admin role" \
	grep -q "there has been none (the plane runs with --rollout immediate); this needs the admin role" "$WORK/err"
check_eq "immediate: an admin's revert --now" "version 3: emergency revert, sent to every node at once (no stages, no bakes)" \
	"$(as admin revert 1 --now)"

# ---- etcd: the emergency mark in the etcd vlog record ------------------------------------

if [ -x "$ETCD_BIN" ]; then
	etcd_cluster_start 1
	PREFIX=/t1002-$$/
	E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "$PREFIX" --heartbeat 1 --rollout staged --stages 50,100
		--bake 600)
	start_plane e "${E[@]}"
	E_URL=$PLANE_URL
	start_plane f "${E[@]}"
	F_URL=$PLANE_URL
	PLANE_URL=$E_URL
	check "etcd: e is the rollout controller (it started first)" wait_until 15 sh -c \
		"[ \"\$(curl -fsS '$E_URL/metrics' | awk '\$1 == \"tether_rollout_controller\" {print \$2}')\" = 1 ]"
	ctl put file/motd - <<<'{"path":"motd.txt","content":"e-1\n"}' >/dev/null || not_ok "etcd: version 1"
	ctl put file/motd - <<<'{"path":"motd.txt","content":"e-2\n"}' >/dev/null || not_ok "etcd: version 2"
	check "etcd: replica f has version 2" wait_until 10 sh -c "[ \"\$(curl -sS '$F_URL/healthz' | jq .version)\" = 2 ]"
	"$CTL_BIN" --plane "$F_URL" revert 1 --now >/dev/null 2>"$WORK/err"
	check_eq "etcd: revert --now on a replica that is not the controller is refused (exit 1)" 1 "$?"
	check "... 409, naming what to do" grep -q "not the rollout controller; send it to the controller" "$WORK/err"
	check_eq "... nothing was written" 2 "$(curl -sS "$E_URL/healthz" | jq .version)"
	out=$(ctl revert 1 --now)
	check "etcd: revert --now: version 3, an emergency" grep -q "^version 3: emergency revert" <<<"$out"
	check_eq "etcd: history JSON says emergency" true "$(curl -sS "$PLANE_URL/v1/history/3" | jq .emergency)"
	key=$(printf '%s' "${PREFIX}vlog/$(printf '%020d' 3)" | base64 -w0)
	rec=$(etcdv3 1 /v3/kv/range "{\"key\":\"$key\"}" | jq -r '.kvs[0].value' | base64 -d)
	check_eq "etcd: the vlog record carries emergency:true" true "$(jq .emergency <<<"$rec")"
	check "etcd: log shows the '!'" grep -Eq '^3 +.*! emergency revert to version 1' <<<"$(ctl log)"
	check "etcd: replica f follows: version 3 released (nothing queued), an emergency in its history" wait_until 10 sh -c \
		"curl -sS '$F_URL/v1/rollouts/current' | jq -e '.queued == 0' >/dev/null && curl -sS '$F_URL/v1/history/3' | jq -e '.emergency == true' >/dev/null"
else
	ok "etcd: the emergency mark in the etcd vlog record # SKIP etcd is not installed"
fi
done_testing
