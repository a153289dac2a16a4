#!/usr/bin/env bash
# t0920-history.sh: the version log: who made each version, when and why
# (X-Tether-Message, a batch's "message", tetherctl --message), the names
# it touched; log, show, diff and get --at through the API and tetherctl;
# a batch's "base" (and If-Match) refused with 409 when the store moved,
# nothing applied; bad messages refused; revert, immediate and staged (a
# rollout's own revert marks what it reverted); retention by count (410
# past it); the history survives a restart; retention by age with no write
# to trim it (--history-max-age; a fraction of a second refused); the
# author from a named token and from a client certificate beside it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-tls.sh"
need_cmd openssl

web() { printf '{"lb":"%s","endpoints":[{"address":"127.0.0.1","port":%s}]}' "$1" "$2"; }
hist() { curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/history$1"; }

# ---- an immediate plane keeping 6 versions -----------------------------------
start_plane p --history-keep 6

out=$(curl -sS -X PUT -H 'X-Tether-Message: first web' --data "$(web round_robin 9001)" "$PLANE_URL/v1/resources/cluster/web")
check_eq "a put with X-Tether-Message makes version 1" 1 "$(echo "$out" | json .version)"
web least_conn 9002 | ctl put cluster/web --message "least conn for web" >/dev/null
out=$(curl -sS -X POST --data '{"message":"add the db","base":2,"upserts":[{"name":"cluster/db","body":{"endpoints":[{"address":"127.0.0.1","port":5432}]}}]}' "$PLANE_URL/v1/batch")
check_eq "a batch with a message and the right base makes version 3" 3 "$(echo "$out" | json .version)"

out=$(api POST /v1/batch --data '{"message":"late","base":2,"upserts":[{"name":"cluster/late","body":{"endpoints":[{"address":"127.0.0.1","port":1}]}}]}')
check_eq "a batch on a stale base is refused with 409" 409 "$(tail -n1 <<<"$out")"
check_eq "the refusal says where the plane is" \
	"the plane is at version 3, not 2: someone wrote in between; nothing was applied" \
	"$(head -n -1 <<<"$out" | json .error)"
check_eq "nothing of it was applied" "3 404" "$(plane_version) $(api_status GET /v1/resources/cluster/late)"
check_eq "If-Match with a stale version is 409 too" 409 \
	"$(api_status POST /v1/batch -H 'If-Match: 1' --data '{"removes":["cluster/db"]}')"
check_eq "a bad base is 422" 422 "$(api_status POST /v1/batch --data '{"base":"x","removes":["cluster/db"]}')"
check_eq "a message with a control character is refused (400)" 400 \
	"$(api_status PUT /v1/resources/cluster/x -H "X-Tether-Message: a$(printf '\t')b" --data "$(web round_robin 1)")"
long=$(head -c 1100 /dev/zero | tr '\0' m)
check_eq "a batch message over 1024 bytes is refused (422)" 422 \
	"$(api_status POST /v1/batch --data "{\"message\":\"$long\",\"removes\":[\"cluster/db\"]}")"
check_eq "tetherctl refuses a multi-line message itself (usage, 2)" 2 \
	"$(ctl rm cluster/db --message "$(printf 'a\nb')" >/dev/null 2>&1; echo $?)"
check_eq "nothing was written by the refusals" 3 "$(plane_version)"
ctl rm cluster/db --message "db gone" >/dev/null

out=$(hist '?limit=10')
check_eq "the log lists the versions newest first" "4 3 2 1" "$(echo "$out" | json '[.versions[].version] | map(tostring) | join(" ")')"
check_eq "... with their messages" "db gone|add the db|least conn for web|first web" \
	"$(echo "$out" | json '[.versions[].message] | join("|")')"
check_eq "... their authors (anonymous under --insecure)" anonymous "$(echo "$out" | json '[.versions[].author] | unique | join(",")')"
check_eq "... and the names each touched" "cluster/db cluster/db cluster/web cluster/web" \
	"$(echo "$out" | json '[.versions[].names[]] | join(" ")')"
check "... and when" bash -c "[ \$(jq -r '.versions[0].time' <<<'$out') -ge \$(( \$(date +%s) - 600 )) ]"
check_eq "the log of one name" "3 4" "$(hist '?name=cluster/db' | json '[.versions[].version] | reverse | map(tostring) | join(" ")')"
check_eq "-n limits it" 1 "$(ctl log -n 1 --json | json '.versions | length')"
check "tetherctl log prints a table with the message" bash -c "'$CTL_BIN' --plane '$PLANE_URL' log | grep -E '^2 .*least conn for web +cluster/web'"

out=$(hist /2)
check_eq "show: a version's change, before and after" "cluster/web round_robin least_conn" \
	"$(echo "$out" | json '.changes[0] | "\(.name) \(.before.lb) \(.after.lb)"')"
check_eq "show: a removal has no after" "cluster/db null" "$(hist /4 | json '.changes[0] | "\(.name) \(.after)"')"
out=$(ctl show 2)
check "tetherctl show names the author and the message" grep -q '^message: *least conn for web' <<<"$out"
check "... and diffs the body" bash -c "grep -q '^-   \"lb\": \"round_robin\"' <<<'$out' && grep -q '^+   \"lb\": \"least_conn\"' <<<'$out'"
out=$(curl -sS "$PLANE_URL/v1/diff?from=1&to=4")
check_eq "diff 1 4: web changed, db came and went (not shown)" "cluster/web 9001 9002" \
	"$(echo "$out" | json '[.changes[] | "\(.name) \(.before.endpoints[0].port) \(.after.endpoints[0].port)"] | join(";")')"
check_eq "diff 4 2: what undoing 3..4 would do (nothing for db: absent at both)" "" \
	"$(curl -sS "$PLANE_URL/v1/diff?from=4&to=2" | json '[.changes[].name] | join(" ")')"
check "tetherctl diff 1 3 shows db added" bash -c "'$CTL_BIN' --plane '$PLANE_URL' diff 1 3 | grep -q '^added cluster/db'"
check_eq "get --at 1: the body as it was" round_robin "$(ctl get cluster/web --at 1 | json .lb)"
check_eq "get --at 3: the db as it was" 5432 "$(ctl get cluster/db --at 3 | json '.endpoints[0].port')"
check_eq "?at= a version where it did not exist is 404" 404 "$(api_status GET '/v1/resources/cluster/db?at=4')"
check_eq "?at= a version beyond the store is 404" 404 "$(api_status GET '/v1/resources/cluster/web?at=99')"
check_eq "show of a version beyond the store is 404" 404 "$(api_status GET /v1/history/99)"

# ---- revert, immediate -------------------------------------------------------
out=$(ctl revert 1 --message "back to the start")
check_eq "revert 1 makes version 5" "version 5" "$out"
check_eq "the state is version 1's" "round_robin 9001 404" \
	"$(curl -sS "$PLANE_URL/v1/resources/cluster/web" | json '"\(.body.lb) \(.body.endpoints[0].port)"') $(api_status GET /v1/resources/cluster/db)"
check_eq "its message names the version" "revert to version 1: back to the start" "$(hist /5 | json .message)"
check_eq "a manual revert marks what it reverted: 2, 3 and 4 reverted by 5, 1 not" "1:0 2:5 3:5 4:5" \
	"$(hist '?limit=10' | json '[.versions[] | select(.version < 5) | "\(.version):\(.reverted_by)"] | reverse | join(" ")')"
check "tetherctl log shows it in REVERTED BY" bash -c \
	"'$CTL_BIN' --plane '$PLANE_URL' log | grep -E '^4 .*db gone +cluster/db +5\$'"
check "... and a version it did not revert shows -" bash -c \
	"'$CTL_BIN' --plane '$PLANE_URL' log | grep -E '^1 .*first web +cluster/web +-\$'"
check_eq "a revert to the current state changes nothing" "version 5 (no change)" "$(ctl revert 5)"
check_eq "a revert of a version beyond the store is 404" 404 "$(api_status POST /v1/revert --data '{"version":50}')"
check_eq "a revert without a version is 422" 422 "$(api_status POST /v1/revert --data '{"message":"x"}')"

# ---- retention by count, and a restart ---------------------------------------
for i in 1 2 3; do web round_robin $((9100 + i)) | ctl put cluster/web >/dev/null; done
check_eq "the plane is at version 8" 8 "$(plane_version)"
out=$(hist '?limit=100')
check_eq "6 versions kept (--history-keep 6)" "8 7 6 5 4 3" "$(echo "$out" | json '[.versions[].version] | map(tostring) | join(" ")')"
check_eq "the floor moved to 2" 2 "$(echo "$out" | json .floor)"
check_eq "show of a version past it is 410" 410 "$(api_status GET /v1/history/2)"
check "... saying it is past the history kept" bash -c "curl -sS '$PLANE_URL/v1/history/1' | jq -r .error | grep -q 'past the history kept'"
check_eq "get --at past it is 410" 410 "$(api_status GET '/v1/resources/cluster/web?at=1')"
check_eq "a revert past it is 410" 410 "$(api_status POST /v1/revert --data '{"version":1}')"
check_eq "get --at the floor still answers" 9002 "$(ctl get cluster/web --at 2 | json '.endpoints[0].port')"
stop_pid "$PLANE_PID"
start_plane p2 --data "$WORK/p.data" --history-keep 6
check_eq "after a restart the log is there" "8 first-message:add the db" \
	"$(hist '?limit=100' | json '"\(.versions[0].version) first-message:\(.versions[-1].message)"')"
check_eq "... and get --at still rebuilds old states" 5432 "$(ctl get cluster/db --at 3 | json '.endpoints[0].port')"
stop_pid "$PLANE_PID"

# ---- retention by age, with no write coming to trim it ---------------------
bad_age() { "$PLANE_BIN" --insecure --data "$WORK/bad.data" --history-max-age "$1" 2>&1 | head -n 1; }
check_eq "a --history-max-age under a second is refused, saying why" \
	"tether-plane: history-max-age (0.5) must be 0 (no age limit) or at least 1 second" "$(bad_age 0.5)"
check_eq "... and a negative one" "tether-plane: history-max-age: '-1' is not a number of seconds in 0..3.1536e+08" \
	"$(bad_age -1)"
check_eq "a --tombstone-max-age under a second is refused the same way" \
	"tether-plane: tombstone-max-age (0.2) must be 0 (no age limit) or at least 1 second" \
	"$("$PLANE_BIN" --insecure --data "$WORK/bad.data" --tombstone-max-age 0.2 2>&1 | head -n 1)"
start_plane age --history-max-age 3
web round_robin 9301 | ctl put cluster/web --message "aging 1" >/dev/null
web round_robin 9302 | ctl put cluster/web --message "aging 2" >/dev/null
check_eq "both versions are in the log at first" "aging 2|aging 1" "$(hist "" | json '[.versions[].message] | join("|")')"
check "past the age, with no write since, both are dropped (the floor is the version)" wait_until 15 bash -c \
	"[ \"\$(curl -sS '$PLANE_URL/v1/history' | jq -c '[.floor, (.versions | length)]')\" = '[2,0]' ]"
check_eq "tetherctl log lists none of them" "" "$(ctl log | grep aging)"
check_eq "show 1 is past the history kept (410)" 410 "$(api_status GET /v1/history/1)"
check_eq "get --at the floor (the current version) still answers" 9302 \
	"$(ctl get cluster/web --at 2 | json '.endpoints[0].port')"
check "the plane says what it dropped" grep -q 'history: dropped the versions through 2, older than 3s' "$PLANE_LOG"
web round_robin 9303 | ctl put cluster/web --message "after the trim" >/dev/null
check_eq "the next write starts the log again, the floor where it was" "3 after the trim 2" \
	"$(hist "" | json '"\(.versions[0].version) \(.versions[0].message) \(.floor)"')"
stop_pid "$PLANE_PID"

# ---- a staged plane: a rollout's revert, and a revert rolled out -------------
printf '%s\n' 'if grep -rq BAD "$TETHER_STAGING"; then' '	echo "check: BAD content refused" >&2' '	exit 1' 'fi' \
	'exit 0' >"$WORK/check.sh"
start_plane s --rollout staged --stages 50,100 --bake 1 --heartbeat 1 --ack-timeout 20
NODES=(n1 n2)
for n in "${NODES[@]}"; do
	start_agent "$n" --backoff-max 1 --check "sh $WORK/check.sh"
done
wait_until 20 bash -c "[ \$(curl -sS '$PLANE_URL/v1/nodes' | jq '[.[] | select(.connected)] | length') = 2 ]" ||
	diag "the agents did not connect"
ctl put file/motd - --message "motd 1" >/dev/null <<<'{"path":"motd.txt","content":"good-1\n"}'
check "version 1 rolls out to both agents" wait_until 30 fleet_at 1
ctl put file/motd - --message "bad motd" >/dev/null <<<'{"path":"motd.txt","content":"BAD\n"}'
check "the bad version's rollout is rolled back" wait_until 30 bash -c "curl -sS '$PLANE_URL/v1/rollouts/current' | jq -e '.to_version == 2 and .state == \"rolled_back\"' >/dev/null"
rv=$(ro .revert_version)
check_eq "the rollout's revert is version 3" 3 "$rv"
out=$(hist /3)
check_eq "its author is the rollout" "rollout 2" "$(echo "$out" | json .author)"
check "its message names the reverted version" grep -q '^revert of version 2 (rollout 2 rolled_back)' <<<"$(echo "$out" | json .message)"
check_eq "version 2 is marked reverted by it" 3 "$(hist /2 | json .reverted_by)"
check_eq "version 1 is not" 0 "$(hist /1 | json .reverted_by)"
check "tetherctl log shows it" bash -c "'$CTL_BIN' --plane '$PLANE_URL' log | grep -E '^2 .*bad motd +file/motd +3\$'"
check "the fleet is back on the good content" wait_until 30 bash -c "[ -z \"\$(cd '$WORK' && for n in n1 n2; do grep -q good-1 \$n.out/motd.txt || echo \$n; done)\" ]"
ctl put file/motd - --message "motd 2" >/dev/null <<<'{"path":"motd.txt","content":"good-2\n"}'
check "version 4 rolls out" wait_until 30 fleet_at 4
# (version 4's rollout may still bake at its last stage: the revert waits behind it, and says so)
check "a revert to version 1 under staged makes version 5" grep -Eq '^version 5(: queued behind rollout [0-9]+ \(stage 2 of 2\))?$' \
	<<<"$(ctl revert 1 --message "motd 1 again")"
check_eq "it marks 3 and 4 reverted by 5 (2 stays the rollout's)" "2:3 3:5 4:5" \
	"$(hist '?limit=10' | json '[.versions[] | select(.version > 1 and .version < 5) | "\(.version):\(.reverted_by)"] | reverse | join(" ")')"
check "it is rolled out like any change" wait_until 30 bash -c "curl -sS '$PLANE_URL/v1/rollouts/current' | jq -e '.to_version == 5 and .state == \"completed\" and .members == 2' >/dev/null"
check "both agents run it" wait_until 30 fleet_at 5
check_eq "with version 1's content" "good-1 good-1" "$(cat "$WORK/n1.out/motd.txt") $(cat "$WORK/n2.out/motd.txt")"
for n in "${NODES[@]}"; do stop_pid "${APID[$n]}"; done
stop_pid "$PLANE_PID"

# ---- authors from a token and from a client certificate ---------------------
PKI=$WORK/pki
make_pki "$PKI" ops1
# a person's certificate: its OU names the role (--cert-roles)
(cd "$PKI" && pki_cert carol "carol/OU=tether-admin" "extendedKeyUsage=clientAuth" ca) >>"$PKI/pki.log" 2>&1 ||
	bail "cannot make carol's certificate"
head -c 32 /dev/urandom | base64 | tr -d '/+=' >"$WORK/admin.tok"
SECURE=1 start_plane sec --admin-token-file "$WORK/admin.tok" --tls-cert "$PKI/server.pem" \
	--tls-key "$PKI/server.key" --client-ca "$PKI/ca.pem" --cert-roles
export TETHER_CA_FILE=$PKI/ca.pem
TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --role admin --name alice >"$WORK/alice.tok"
TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --role admin >"$WORK/anon-admin.tok"
TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --role reader --name rita >"$WORK/reader.tok"
export TETHER_TOKEN_FILE=$WORK/alice.tok
web round_robin 9001 | ctl put cluster/web --message "by alice" >/dev/null
web round_robin 9002 | ctl --cert "$PKI/ops1.pem" --key "$PKI/ops1.key" put cluster/web >/dev/null
web round_robin 9003 | TETHER_TOKEN_FILE=$WORK/anon-admin.tok ctl put cluster/web >/dev/null
web round_robin 9004 | TETHER_TOKEN_FILE=$WORK/admin.tok ctl put cluster/web >/dev/null
CURL_OPTS=(--cacert "$PKI/ca.pem" -H "Authorization: Bearer $(cat "$WORK/reader.tok")")
out=$(hist '?limit=10')
check_eq "the author of a named token's write is its name and role" "alice (admin token)" \
	"$(echo "$out" | json '.versions[] | select(.version == 1) | .author')"
check_eq "with a client certificate beside it, its subject too" "alice (admin token) with certificate CN=ops1" \
	"$(echo "$out" | json '.versions[] | select(.version == 2) | .author')"
check "a token without a name is its role and id (never the token)" bash -c \
	"jq -r '.versions[] | select(.version == 3) | .author' <<<'$out' | grep -Eq '^admin token [0-9a-f]+\$'"
check_eq "the bootstrap token is 'admin token'" "admin token" "$(echo "$out" | json '.versions[] | select(.version == 4) | .author')"
check "no token appears in the log" bash -c "! grep -qF -e '$(cat "$WORK/alice.tok")' -e '$(cat "$WORK/admin.tok")' <<<'$out'"
check_eq "a reader reads the log" 200 "$(api_status GET /v1/history)"
# secret NAME: a real pair's body (the plane parses and matches them)
secret() {
	pem_pair "$1"
	printf '{"cert":"%s","key":"%s"}' "$PAIR_CERT" "$PAIR_KEY"
}
secret s1a | TETHER_TOKEN_FILE=$WORK/alice.tok ctl put secret/s1 >/dev/null
secret s1b | TETHER_TOKEN_FILE=$WORK/alice.tok ctl put secret/s1 >/dev/null
# 16 characters of version 6's private scalar (after the P-256 key's fixed header)
KEY_MATERIAL=$(sed -n 2p "$WORK/s1b.key" | cut -c 49-)
check_eq "a reader sees a secret's change with the key redacted" "[redacted] [redacted] MIIB" \
	"$(hist /6 | json '.changes[0] | "\(.before.key) \(.after.key) \(.after.cert[28:32])"')"
out=$(curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/diff?from=4&to=6" "$PLANE_URL/v1/resources/secret/s1?at=5")
check_eq "... in a diff and get --at too" "[redacted] [redacted]" \
	"$(jq -r '.changes[0].after.key // .body.key' <<<"$out" | paste -sd ' ' -)"
check "... never the key" bash -c "! grep -q '$KEY_MATERIAL' <<<'$out'"
check "an admin sees the key" bash -c "TETHER_TOKEN_FILE='$WORK/alice.tok' '$CTL_BIN' --plane '$PLANE_URL' show 6 | grep -q '$KEY_MATERIAL'"
check "the key is in no log line" bash -c "! grep -q '$KEY_MATERIAL' '$PLANE_LOG'"
check_eq "a reader may not revert (403)" 403 "$(api_status POST /v1/revert --data '{"version":1}')"
CURL_OPTS=(--cacert "$PKI/ca.pem")
check_eq "an anonymous caller may not read it (401)" 401 "$(api_status GET /v1/history)"

# a write by a person's certificate alone (no token): its CN and role
(unset TETHER_TOKEN_FILE; web round_robin 9005 | ctl --cert "$PKI/carol.pem" --key "$PKI/carol.key" \
	put cluster/web --message "by carol's certificate" >/dev/null) || not_ok "carol's certificate could not write"
VC=$(curl -sS --cacert "$PKI/ca.pem" -H "Authorization: Bearer $(cat "$WORK/reader.tok")" "$PLANE_URL/healthz" |
	json .version)
check_eq "the author of a certificate's write is its CN and the role its OU names" \
	"carol (admin certificate) by carol's certificate" \
	"$(curl -sS --cacert "$PKI/ca.pem" -H "Authorization: Bearer $(cat "$WORK/reader.tok")" \
		"$PLANE_URL/v1/history/$VC" | json '"\(.author) \(.message)"')"
check_eq "a person's certificate is no node's (403 on a node endpoint)" 403 \
	"$(api_status GET "/v1/config?node=carol&version=0" --cert "$PKI/carol.pem" --key "$PKI/carol.key")"
check_eq "a node's certificate (no OU) may not write (403)" 403 \
	"$(api_status PUT /v1/resources/cluster/x --cert "$PKI/ops1.pem" --key "$PKI/ops1.key" \
		--data '{"endpoints":[{"address":"10.0.0.1","port":1}]}')"

done_testing
