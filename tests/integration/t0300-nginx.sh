#!/usr/bin/env bash
# t0300-nginx.sh: tetherd driving a real nginx (the nginx consumer): traffic
# through the proxy follows every change (cluster switch, a route with a
# host and a path, a removed route), the marker answers the live generation,
# weights and least_conn are rendered, a TLS listener from a secret serves
# (secrets 0600, never in a log), an unchanged render makes no generation
# and no reload, generations are pruned to --generations, the agent boots
# from last-good with the plane down and its output wiped (nginx restarted
# serves it), and the ACK of a healthy apply carries healthy:true.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node openssl ss

# ---- helpers of this test ---------------------------------------------------------

trap t_cleanup EXIT

# ---- backends, ports, plane, nginx ------------------------------------------------
start_tool ba backend.mjs 0 A
PA=$TOOL_PORT
start_tool bb backend.mjs 0 B
PB=$TOOL_PORT
free_port LMAIN
free_port LOPS
free_port LTLS
free_port MARK
OUT=$WORK/ng.out
AGENT_ARGS=(--consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" --generations 2
	--reload-timeout 5 --health "http://127.0.0.1:$LOPS/health" --health-timeout 1 --health-retries 3
	--backoff-min 0.1 --backoff-max 1)

# --allow-unknown-fields: route/api's and cluster/a's x-note below reach nginx's renderer, which ignores them
start_plane p --heartbeat 1 --allow-unknown-fields
write_nginx_conf "$OUT"
start_nginx
check "nginx runs the operator's configuration (nothing of ours live yet)" kill -0 "$NGINX_PID"

ctl apply - >/dev/null <<EOF || bail "cannot load the initial configuration"
{"upserts":[
 {"name":"cluster/a","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":$PA}]}},
 {"name":"cluster/b","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":$PB}]}},
 {"name":"listener/main","body":{"address":"127.0.0.1","port":$LMAIN}},
 {"name":"listener/ops","body":{"address":"127.0.0.1","port":$LOPS}},
 {"name":"route/root","body":{"listener":"main","host":"*","path":"/","cluster":"a"}},
 {"name":"route/ops","body":{"listener":"ops","host":"*","path":"/","cluster":"a"}}
]}
EOF
V1=$(plane_version)

start_agent ng "${AGENT_ARGS[@]}"
check "the nginx agent applies version $V1" wait_until 20 agent_at ng "$V1"
check "traffic through nginx reaches backend A" wait_until 10 answers "A /x" "$LMAIN" /x
c1=$(current)
check "current is a symlink to gen-<id> ($c1)" sh -c "[ -L '$OUT/current' ] && echo '$c1' | grep -Eq '^gen-[0-9a-f]{16}\$'"
check "the live generation holds tether.conf" test -f "$OUT/current/tether.conf"
check "the marker answers the live generation id (readlink current)" wait_until 5 marker_is "$c1"
check "the plane records the ACK as healthy (--health)" wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.acked_version == $V1 and .healthy == true'"
check "nginx was reloaded by signal (SIGHUP in its error log)" test "$(hups)" -ge 1

# ---- traffic follows each change ------------------------------------------------------
put route/root '{"listener":"main","host":"*","path":"/","cluster":"b"}' >/dev/null
V2=$(plane_version)
check "switching the route to cluster b: curl sees B" wait_until 10 answers "B /x" "$LMAIN" /x
check "the agent is at version $V2" wait_until 10 agent_at ng "$V2"
c2=$(current)
check "a new generation is live ($c1 -> $c2)" test -n "$c2" -a "$c2" != "$c1"
check "the marker answers the new generation" wait_until 5 marker_is "$c2"

put route/api '{"listener":"main","host":"api.test","path":"/api","cluster":"a"}' >/dev/null
V3=$(plane_version)
check "a route with a host and a path: Host api.test /api/v reaches A" \
	wait_until 10 answers "A /api/v" "$LMAIN" /api/v -H 'Host: api.test'
check_eq "the backend saw the client's Host header" "api.test" \
	"$(curl -s -D - -o /dev/null -H 'Host: api.test' "http://127.0.0.1:$LMAIN/api/v" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-seen-host" {print $2}')"
check_eq "other hosts still reach B on /api/v" "B /api/v" "$(get "$LMAIN" /api/v)"
# (waited for: a worker of the generation before, where the catch-all
# route answers every host, may take one more connection while it drains)
check "Host api.test outside /api is 404" wait_until 10 code_is 404 "$LMAIN" /other -H 'Host: api.test'
check "the agent is at version $V3" wait_until 10 agent_at ng "$V3"

ctl rm route/root >/dev/null
V4=$(plane_version)
check "removing the catch-all route: / answers 404" wait_until 10 code_is 404 "$LMAIN" /x
check_eq "the host route stays" "A /api/v" "$(get "$LMAIN" /api/v -H 'Host: api.test')"
check "the agent is at version $V4" wait_until 10 agent_at ng "$V4"
ctl rm route/api >/dev/null
put route/root '{"listener":"main","host":"*","path":"/","cluster":"b"}' >/dev/null
V5=$(plane_version)
check "removing the host route and putting the catch-all back: Host api.test /api/v reaches B" \
	wait_until 10 answers "B /api/v" "$LMAIN" /api/v -H 'Host: api.test'
check "the agent is at version $V5" wait_until 10 agent_at ng "$V5"
check "the marker answers the live generation id (readlink current)" wait_until 5 marker_is_current

# ---- weights, least_conn, random -------------------------------------------------------
ctl apply - >/dev/null <<EOF
{"upserts":[
 {"name":"cluster/w","body":{"lb":"least_conn","endpoints":[{"address":"127.0.0.1","port":$PA,"weight":3},{"address":"127.0.0.1","port":$PB,"weight":1}]}},
 {"name":"cluster/r","body":{"lb":"random","endpoints":[{"address":"127.0.0.1","port":$PA}]}},
 {"name":"route/w","body":{"listener":"main","host":"w.test","path":"/","cluster":"w"}}
]}
EOF
V6=$(plane_version)
check "the weighted cluster is live (version $V6)" wait_until 10 agent_at ng "$V6"
conf=$OUT/current/tether.conf
ups=$(awk '/^upstream tether_c_w \{/,/^\}/' "$conf")
check_eq "upstream w is rendered with least_conn and the weights" \
	"upstream tether_c_w { least_conn; server 127.0.0.1:$PA weight=3; server 127.0.0.1:$PB weight=1; }" \
	"$(echo "$ups" | xargs)"
check "upstream r is rendered with random" sh -c "awk '/^upstream tether_c_r \\{/,/^\\}/' '$conf' | grep -q '^ *random;'"
out=$(for i in 1 2 3 4 5 6 7 8; do get "$LMAIN" /w -H 'Host: w.test'; done | sort | uniq -c | awk '{print $2 "=" $1}' | xargs)
na=$(echo "$out" | grep -o 'A=[0-9]*' | cut -d= -f2)
nb=$(echo "$out" | grep -o 'B=[0-9]*' | cut -d= -f2)
check "Host w.test spreads over both backends, A (weight 3) more than B ($out)" \
	test "${na:-0}" -gt "${nb:-0}" -a "${nb:-0}" -ge 1

# ---- a TLS listener from a secret ---------------------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext subjectAltName=DNS:localhost -days 1 \
	-keyout "$WORK/tls.key" -out "$WORK/tls.crt" >/dev/null 2>&1 || bail "openssl cannot make a certificate"
jq -n --rawfile cert "$WORK/tls.crt" --rawfile key "$WORK/tls.key" --argjson port "$LTLS" '{upserts:[
 {name:"secret/tls", body:{cert:$cert, key:$key}},
 {name:"listener/tls", body:{address:"127.0.0.1", port:$port, tls:{secret:"tls"}}},
 {name:"route/tls", body:{listener:"tls", host:"*", path:"/", cluster:"a"}}]}' >"$WORK/tls.json"
ctl apply "$WORK/tls.json" >/dev/null
V7=$(plane_version)
check "curl -k https:// through nginx reaches A" wait_until 10 sh -c "[ \"\$(curl -sk --max-time 3 https://127.0.0.1:$LTLS/t)\" = 'A /t' ]"
check_eq "nginx serves our certificate (verified against it)" "A /t" \
	"$(curl -s --max-time 3 --cacert "$WORK/tls.crt" --resolve "localhost:$LTLS:127.0.0.1" "https://localhost:$LTLS/t")"
check "the agent is at version $V7" wait_until 10 agent_at ng "$V7"
check_eq "the secrets directory is 0700" 700 "$(stat -c %a "$OUT/secrets" 2>/dev/null)"
check_eq "two secret files (certificate and key)" 2 "$(find "$OUT/secrets" -type f | wc -l)"
check_eq "every secret file is 0600" "" "$(find "$OUT/secrets" -type f ! -perm 0600 | xargs)"
crt=$(grep -o 'ssl_certificate [^;]*' "$OUT/current/tether.conf" | awk '{print $2}')
keyf=$(grep -o 'ssl_certificate_key [^;]*' "$OUT/current/tether.conf" | awk '{print $2}')
check_eq "the generation holds only tether.conf and check.nginx (no key material)" "check.nginx tether.conf" \
	"$(ls -A "$OUT/current/" | xargs)"
check "the configuration names the certificate in secrets/ and it is ours" cmp -s "$crt" "$WORK/tls.crt"
check "the configuration names the key in secrets/ and it is ours" cmp -s "$keyf" "$WORK/tls.key"
check "both live under OUTPUT_DIR/secrets" sh -c "case '$crt$keyf' in '$OUT/secrets/'*'$OUT/secrets/'*) exit 0;; esac; exit 1"
# a line from the middle of the key: in no log, no generation, no status
KEYLINE=$(sed -n '10p' "$WORK/tls.key")
check "the key's text is long enough to look for ($KEYLINE)" test "${#KEYLINE}" -ge 40
leaks=$(grep -rlF -- "$KEYLINE" "$WORK"/*.log "$WORK/ng.state/status.json" "$OUT"/gen-* 2>/dev/null | xargs)
check_eq "the key's text appears in no log (agent, plane, nginx), generation or status.json" "" "$leaks"
check "the logs were there to look in" test -s "$WORK/ng.log" -a -s "$WORK/p.log" -a -s "$WORK/nginx-error.log"

# ---- an unchanged render: no generation, no reload ------------------------------------------
wait_until 10 node_acked ng "$V7"
H0=$(hups)
c7=$(current)
g7=$(gens)
out=$(put cluster/a "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$PA}],\"lb\":\"round_robin\"}")
check_eq "re-putting cluster/a unchanged (other key order) makes no version" "$V7 false" \
	"$(echo "$out" | json '"\(.version) \(.changed)"')"
out=$(put cluster/a "{\"lb\":\"round_robin\",\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$PA}],\"x-note\":\"nginx does not see this\"}")
V8=$(echo "$out" | json .version)
check_eq "a body with only a new unknown field is a new version" "$((V7 + 1))" "$V8"
check "the agent applies version $V8" wait_until 10 agent_at ng "$V8"
check "and ACKs it" wait_until 10 node_acked ng "$V8"
check_eq "current still points at the same generation" "$c7" "$(current)"
check_eq "no generation was made" "$g7" "$(gens)"
check "the agent counted it as applied" grep -q "applied version $V8 " "$WORK/ng.log"

# an agent restarted against the plane: current already serves, no reload
stop_pid "${APID[ng]}" TERM
start_agent ng "${AGENT_ARGS[@]}"
check "the restarted agent logs that current already serves version $V8" \
	wait_until 10 grep -q "current already serves version $V8" "$WORK/ng.log"
check "the restarted agent is connected and synced" \
	wait_until 10 sh -c "[ \"\$(jq -r .state '$WORK/ng.state/status.json')\" = synced ] && curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.connected == true' >/dev/null"
check_eq "current still points at the same generation after the restart" "$c7" "$(current)"
# a barrier: one real change makes exactly one reload; the no-op version
# and the restart would have made more
put route/root '{"listener":"main","host":"*","path":"/","cluster":"a"}' >/dev/null
V9=$(plane_version)
check "a real change after them goes live (curl sees A)" wait_until 10 answers "A /x" "$LMAIN" /x
check "the agent is at version $V9" wait_until 10 agent_at ng "$V9"
check "the marker answers the live generation id (readlink current)" wait_until 5 marker_is_current
check_eq "nginx got exactly one SIGHUP since version $V7 (for version $V9 only)" "$((H0 + 1))" "$(hups)"

# ---- pruning --------------------------------------------------------------------------------
g=$(gens)
check_eq "--generations 2: two generations on disk" 2 "$(echo "$g" | wc -w)"
check "one of them is the live one ($(current))" sh -c "echo ' $g ' | grep -qF ' $(current) '"
check_eq "no half-written generation is left" "" "$(cd "$OUT" && ls -d ./*.tmp 2>/dev/null | xargs)"

# ---- boot from last-good with the plane down and the output wiped ----------------------------
LIVE=$(current)
PPORT=$PLANE_PORT
stop_pid "${APID[ng]}" TERM
stop_pid "$PLANE_PID" TERM
stop_nginx
check "nginx stopped" test ! -e "$WORK/nginx.pid"
rm -rf "$OUT"
start_agent ng "${AGENT_ARGS[@]}"
check "the agent rebuilds current from last-good (plane down)" wait_until 10 test -f "$OUT/current/tether.conf"
check_eq "the same generation as before the wipe" "$LIVE" "$(current)"
check "the secrets are back, 0600" sh -c "[ \$(find '$OUT/secrets' -type f -perm 0600 | wc -l) = 2 ]"
check "status.json: offline at version $V9" wait_until 10 sh -c "[ \"\$(jq -r '.state + \" \" + (.version|tostring)' '$WORK/ng.state/status.json')\" = 'offline $V9' ]"
start_nginx
check "nginx restarted serves the last-good configuration (A on /)" wait_until 10 answers "A /x" "$LMAIN" /x
check "and the TLS listener" wait_until 5 sh -c "[ \"\$(curl -sk --max-time 3 https://127.0.0.1:$LTLS/t)\" = 'A /t' ]"
check "the marker answers the rebuilt generation" wait_until 5 marker_is "$LIVE"

# ---- the plane back: the agent reconnects; unused secrets are pruned ----------------------------
start_plane p --heartbeat 1 --listen "127.0.0.1:$PPORT"
check "the agent reconnects to the plane" \
	wait_until 20 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.connected == true and .acked_version == $V9' >/dev/null"
ctl apply - >/dev/null <<'EOF'
{"removes":["route/tls","listener/tls","secret/tls"]}
EOF
put route/root '{"listener":"main","host":"*","path":"/","cluster":"b"}' >/dev/null
V11=$(plane_version)
check "the later changes go live (curl sees B)" wait_until 10 answers "B /x" "$LMAIN" /x
check "the agent is at version $V11" wait_until 10 agent_at ng "$V11"
check "the TLS listener is gone" wait_until 5 sh -c "! curl -sk --max-time 2 https://127.0.0.1:$LTLS/t"
check_eq "no kept generation uses the secret: its files are pruned" "" "$(find "$OUT/secrets" -type f | xargs)"
check "the plane records the ACK as healthy" wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.acked_version == $V11 and .healthy == true'"
check "nginx logged no emergency or alert" sh -c "! grep -E '\\[(emerg|alert|crit)\\]' '$WORK/nginx-error.log'"

# ---- done ----------------------------------------------------------------------------------------
stop_pid "${APID[ng]}" TERM
check_eq "SIGTERM: the agent exits 0" 0 "$?"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
