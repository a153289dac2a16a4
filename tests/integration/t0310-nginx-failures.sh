#!/usr/bin/env bash
# t0310-nginx-failures.sh: tetherd driving a real nginx through failures,
# with a client loop (a request every ~20 ms through nginx) that must see
# no failed request in any of them: (1) a push nginx -t refuses (a
# certificate OpenSSL finds too weak) is NACKed naming the secret and the
# field, then nginx's message, current stays, nginx keeps serving; a
# "certificate" of a PEM header round garbage is refused by the plane
# with the agent's own check ("secret/NAME: cert: not a PEM certificate",
# common/pemcheck.c) and never reaches the node; an upstream
# nginx -t cannot resolve is NACKed naming its cluster first; (2) a reload that fails after the switch (a listener
# on a port another process holds is refused before it goes live; one on an
# address this host does not have: nginx -t passes, the reload does not
# take) is reverted and NACKed; (3) a failed health probe is reverted,
# NACKed naming the probe, and the plane shows healthy:false; (4) an
# operator --check that fails NACKs a change nginx -t would pass; (5) after
# each failure a later good push applies and traffic follows.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node openssl ss

# ---- helpers of this test ---------------------------------------------------------

trap t_cleanup EXIT

# the client loop: one request through nginx every ~20 ms; each answer's
# body and status code (000: no answer) go to $WORK/loop.codes
client_loop() {
	local r
	while :; do
		r=$(curl -s --max-time 2 -w ' %{http_code}' "http://127.0.0.1:$LMAIN/loop" | tr -d '\n')
		echo "$r" >>"$WORK/loop.codes"
		sleep 0.02
	done
}
loop_total() {
	wc -l <"$WORK/loop.codes"
}
# loop_failures: answers that were not a 200 from a backend
loop_failures() {
	grep -Evc '^[AB] /loop 200$' "$WORK/loop.codes"
}
# loop_sees NAME: the loop's latest answer came from backend NAME
loop_sees() {
	[ "$(tail -n 1 "$WORK/loop.codes")" = "$1 /loop 200" ]
}
# loop_mark, then loop_more N: the loop made N more requests since the mark
LOOP_MARK=0
loop_mark() {
	LOOP_MARK=$(loop_total)
}
loop_more() {
	[ $(($(loop_total) - LOOP_MARK)) -ge "$1" ]
}

# the plane's last NACK of node ng, as tetherctl nodes --json shows it
nack_error() {
	"$CTL_BIN" --plane "$PLANE_URL" nodes --json | jq -r '.[] | select(.node == "ng") | .last_nack.error // empty'
}

# ---- backends, ports, plane, nginx, agent ------------------------------------------------
start_tool ba backend.mjs 0 A
PA=$TOOL_PORT
start_tool bb backend.mjs 0 B
PB=$TOOL_PORT
free_port LMAIN
free_port LOPS
free_port LBAD
free_port MARK
free_port PDEAD   # nothing listens there: a cluster on it answers 502
OUT=$WORK/ng.out
AGENT_ARGS=(--consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" --reload-timeout 2
	--health "http://127.0.0.1:$LOPS/health" --health-timeout 1 --health-retries 2
	--backoff-min 0.1 --backoff-max 1)

start_plane p --heartbeat 1
write_nginx_conf "$OUT"
start_nginx

ctl apply - >/dev/null <<EOF || bail "cannot load the initial configuration"
{"upserts":[
 {"name":"cluster/a","body":{"endpoints":[{"address":"127.0.0.1","port":$PA}]}},
 {"name":"cluster/b","body":{"endpoints":[{"address":"127.0.0.1","port":$PB}]}},
 {"name":"cluster/dead","body":{"endpoints":[{"address":"127.0.0.1","port":$PDEAD}]}},
 {"name":"listener/main","body":{"address":"127.0.0.1","port":$LMAIN}},
 {"name":"listener/ops","body":{"address":"127.0.0.1","port":$LOPS}},
 {"name":"route/root","body":{"listener":"main","path":"/","cluster":"a"}},
 {"name":"route/ops","body":{"listener":"ops","path":"/","cluster":"a"}}
]}
EOF
V=$(plane_version)
start_agent ng "${AGENT_ARGS[@]}"
check "the nginx agent applies version $V" wait_until 20 agent_at ng "$V"
check "traffic through nginx reaches A" wait_until 10 answers "A /x" "$LMAIN" /x
check "the plane records the ACK as healthy" wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.acked_version == $V and .healthy == true'"

: >"$WORK/loop.codes"
client_loop &
LOOP_PID=$!
track_pid "$LOOP_PID"
check "the client loop runs (20 answers)" wait_until 10 loop_more 20

# ---- (1) nginx -t refuses: an unloadable certificate -------------------------------------------
# one the plane parses, with its key, and nginx's OpenSSL refuses (a 1024-bit RSA key)
weak_pair weak
KEYTEXT=$(sed -n 2p "$WORK/weak.key")
H=$(hups)
C=$(current)
G=$(gens)
V0=$V
jq -n --argjson port "$LBAD" --rawfile c "$WORK/weak.crt" --rawfile k "$WORK/weak.key" '{upserts:[
 {name:"secret/bad", body:{cert:$c, key:$k}},
 {name:"listener/badtls", body:{address:"127.0.0.1", port:$port, tls:{secret:"bad"}}},
 {name:"route/badtls", body:{listener:"badtls", path:"/", cluster:"a"}}]}' >"$WORK/bad.json"
ctl apply "$WORK/bad.json" >/dev/null
VBAD=$(plane_version)
check "(1) the plane stores the weak secret (version $VBAD)" test "$VBAD" -gt "$V0"
check "(1) the agent NACKs version $VBAD" wait_until 15 has_nack ng "$VBAD"
err=$(nack_error)
check "(1) tetherctl nodes --json: last_nack.error names the secret and field, then nginx's message ($err)" \
	sh -c 'case "$1" in "secret/bad: cert: "*nginx*"refused the new configuration"*"ee key too small"*) ;; *) exit 1 ;; esac' _ "$err"
check "(1) tetherctl nodes shows the NACK of version $VBAD" \
	sh -c "'$CTL_BIN' --plane '$PLANE_URL' nodes | grep '^ng ' | grep -q 'v$VBAD: '"
check_eq "(1) the agent stays at version $V0" "$V0" "$(st ng version)"
check "(1) status.json says degraded with the reason" \
	sh -c "[ \"\$(jq -r .state '$WORK/ng.state/status.json')\" = degraded ] && jq -r .last_error '$WORK/ng.state/status.json' | grep -q 'secret/bad: cert: .*ee key too small'"
check_eq "(1) current is unchanged" "$C" "$(current)"
check_eq "(1) the marker answers the same generation" "$C" "gen-$(marker)"
check_eq "(1) no generation was left behind" "$G" "$(gens)"
check_eq "(1) nginx was not reloaded" "$H" "$(hups)"
check "(1) nothing listens on the bad TLS port" sh -c "! curl -sk --max-time 2 https://127.0.0.1:$LBAD/"
check "(1) nginx keeps serving A" answers "A /x" "$LMAIN" /x
check_eq "(1) the refused key's text appears in no log" "" \
	"$(grep -lF "$KEYTEXT" "$WORK"/*.log "$WORK/ng.state/status.json" | xargs)"
check_eq "(1) the client loop saw no failure" 0 "$(loop_failures)"

# (5) a good push after it: the bad parts removed, the route switched to B
ctl apply - >/dev/null <<'EOF'
{"upserts":[{"name":"route/root","body":{"listener":"main","path":"/","cluster":"b"}}],
 "removes":["route/badtls","listener/badtls","secret/bad"]}
EOF
V=$(plane_version)
check "(5) after (1) a good push applies (version $V)" wait_until 15 agent_at ng "$V"
check "(5) traffic follows: the client loop sees B" wait_until 10 loop_sees B
check "(5) the marker answers the live generation" marker_is_current
check "(5) the ACK is recorded healthy" wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.acked_version == $V and .healthy == true'"
check_eq "(5) the refused secret's files are gone" "" "$(find "$OUT/secrets" -type f | xargs)"
check_eq "(5) status.json says synced" synced "$(st ng state)"

# ---- (1b) a PEM header round garbage: the plane refuses it with the agent's own check -----------
# (common/pemcheck.c, the one checker of both), so it never reaches the node; a sealed secret,
# which the plane cannot open, is the only way junk reaches it (the agent's words are the same)
H=$(hups)
C=$(current)
V0=$V
jq -n --argjson port "$LBAD" '{upserts:[
 {name:"secret/junk", body:{cert:"-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU@@@garbage!!!***\n-----END CERTIFICATE-----\n",
                            key:"-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5@@@garbage!!!***\n-----END PRIVATE KEY-----\n"}},
 {name:"listener/badtls", body:{address:"127.0.0.1", port:$port, tls:{secret:"junk"}}},
 {name:"route/badtls", body:{listener:"badtls", path:"/", cluster:"a"}}]}' >"$WORK/junk.json"
err=$(ctl apply "$WORK/junk.json" 2>&1) && bail "(1b) the plane took a PEM header round garbage"
check "(1b) the plane's refusal names the secret and the field ($err)" \
	sh -c 'case "$1" in *"secret/junk: cert: not a PEM certificate ("*) ;; *) exit 1 ;; esac' _ "$err"
check_eq "(1b) the plane stored nothing" "$V0" "$(plane_version)"
check_eq "(1b) the agent stays at version $V0" "$V0" "$(st ng version)"
check_eq "(1b) current is unchanged" "$C" "$(current)"
check_eq "(1b) nginx was not reloaded" "$H" "$(hups)"
check_eq "(1b) the refused key's text appears in no log" "" \
	"$(grep -lF 'bm90IGEga2V5@@@garbage' "$WORK"/*.log "$WORK/ng.state/status.json" | xargs)"

# ---- (1c) nginx -t refuses a line of tether's own configuration: the NACK names its resource ------
H=$(hups)
V0=$V
echo '{"upserts":[{"name":"cluster/ghost","body":{"endpoints":[{"address":"nosuch.invalid","port":9000}]}},
 {"name":"route/ghost","body":{"listener":"main","path":"/ghost","cluster":"ghost"}}]}' | ctl apply - >/dev/null
VBAD=$(plane_version)
check "(1c) the agent NACKs version $VBAD" wait_until 15 has_nack ng "$VBAD"
err=$(nack_error)
check "(1c) the NACK names the cluster first, then nginx's words ($err)" \
	sh -c 'case "$1" in "cluster/ghost: "*nginx*"host not found in upstream"*) ;; *) exit 1 ;; esac' _ "$err"
check_eq "(1c) the agent stays at version $V0" "$V0" "$(st ng version)"
check_eq "(1c) nginx was not reloaded" "$H" "$(hups)"
echo '{"removes":["route/ghost","cluster/ghost"]}' | ctl apply - >/dev/null
V=$(plane_version)
check "(1c) a good push after it applies (version $V)" wait_until 15 agent_at ng "$V"

# ---- (2a) a listener on a port another process holds: refused before going live -----------------
start_tool busy backend.mjs 0 C
PBUSY=$TOOL_PORT
H=$(hups)
C=$(current)
G=$(gens)
V0=$V
ctl apply - >/dev/null <<EOF
{"upserts":[
 {"name":"listener/busy","body":{"address":"127.0.0.1","port":$PBUSY}},
 {"name":"route/busy","body":{"listener":"busy","path":"/","cluster":"a"}}]}
EOF
VBAD=$(plane_version)
check "(2a) the agent NACKs version $VBAD" wait_until 20 has_nack ng "$VBAD"
err=$(nack_error)
check "(2a) the NACK names the listener and says its address is taken ($err)" \
	sh -c 'echo "$1" | grep -q "listener/busy: 127.0.0.1:$2 is already in use by another process"' _ "$err" "$PBUSY"
check_eq "(2a) current is unchanged" "$C" "$(current)"
check_eq "(2a) nginx was not reloaded" "$H" "$(hups)"
check_eq "(2a) no generation was left behind" "$G" "$(gens)"
check_eq "(2a) the agent stays at version $V0" "$V0" "$(st ng version)"
check_eq "(2a) the other process keeps its port" "C /" "$(get "$PBUSY" /)"
check "(2a) nginx keeps serving B" answers "B /x" "$LMAIN" /x

ctl apply - >/dev/null <<'EOF'
{"removes":["route/busy","listener/busy"]}
EOF
V=$(plane_version)
check "(5) after (2a) a good push applies (version $V)" wait_until 15 agent_at ng "$V"

# ---- (3) a failed health probe ------------------------------------------------------------------
H=$(hups)
C=$(current)
V0=$V
put route/ops '{"listener":"ops","path":"/","cluster":"dead"}' >/dev/null
VBAD=$(plane_version)
check "(3) the agent NACKs version $VBAD" wait_until 20 has_nack ng "$VBAD"
err=$(nack_error)
check "(3) the NACK names the probe and its answer ($err)" \
	sh -c 'echo "$1" | grep -qF "$2"' _ "$err" "health probe http://127.0.0.1:$LOPS/health failed 2 times (last: HTTP 502)"
check "(3) the plane shows healthy:false" wait_until 5 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.healthy == false'"
check_eq "(3) current is put back" "$C" "$(current)"
check "(3) the old generation serves again: the probed URL answers A" wait_until 10 answers "A /health" "$LOPS" /health
check "(3) the marker answers the old generation" wait_until 10 sh -c "[ \"gen-\$(curl -s --max-time 2 http://127.0.0.1:$MARK/tether-generation)\" = '$C' ]"
check "(3) nginx was reloaded into the change and back" wait_until 10 hups_ge $((H + 2))
check_eq "(3) the agent stays at version $V0" "$V0" "$(st ng version)"
check_eq "(3) the client loop saw no failure" 0 "$(loop_failures)"

ctl apply - >/dev/null <<'EOF'
{"upserts":[{"name":"route/ops","body":{"listener":"ops","path":"/","cluster":"a"}},
            {"name":"route/root","body":{"listener":"main","path":"/","cluster":"b"}}]}
EOF
V=$(plane_version)
check "(5) after (3) a good push applies (version $V)" wait_until 15 agent_at ng "$V"
check "(5) traffic follows: the client loop sees B" wait_until 10 loop_sees B
check "(5) the plane shows healthy:true again" wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.acked_version == $V and .healthy == true'"

# ---- (4) the operator's --check refuses a change nginx -t would pass --------------------------------
cat >"$WORK/check.sh" <<EOF
if [ -e "$WORK/check-fails" ]; then
	echo "operator check refuses version \$TETHER_VERSION" >&2
	exit 3
fi
if [ -e "$WORK/check-grabs" ] && [ ! -e "$WORK/grabbed" ]; then
	touch "$WORK/grabbed"
	grep -q "listen 127.0.0.1:\$(cat $WORK/grab-port)" "\$TETHER_STAGING/tether.conf" || exit 0
	port=\$(cat "$WORK/grab-port")
	node "$TOOLS/backend.mjs" "\$port" G >"$WORK/grab.port" 2>&1 &
	echo \$! >"$WORK/grab.pid"
	while ! grep -q listening "$WORK/grab.port" 2>/dev/null; do sleep 0.02; done
fi
exit 0
EOF
stop_pid "${APID[ng]}" TERM
start_agent ng "${AGENT_ARGS[@]}" --check "sh $WORK/check.sh"
check "(4) the agent restarted with --check finds current serving version $V" \
	wait_until 10 grep -q "current already serves version $V" "$WORK/ng.log"
check "(4) and is connected" wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.connected == true' >/dev/null"
touch "$WORK/check-fails"
H=$(hups)
C=$(current)
V0=$V
put route/root '{"listener":"main","path":"/","cluster":"a"}' >/dev/null
VBAD=$(plane_version)
check "(4) the agent NACKs version $VBAD" wait_until 15 has_nack ng "$VBAD"
err=$(nack_error)
check "(4) the NACK carries the check's exit status and stderr ($err)" \
	sh -c 'echo "$1" | grep -q "exit 3" && echo "$1" | grep -q "operator check refuses version $2"' _ "$err" "$VBAD"
# the same change nginx -t passes: the live configuration with route/root on a
# (its proxy_pass follows the route's comment, after the line naming the
# route in the access log: the agent counts traffic by default)
d=$WORK/nginx-t
mkdir -p "$d"
sed '/# route\/root/,/proxy_pass/{s#proxy_pass http://tether_c_b;#proxy_pass http://tether_c_a;#}' "$OUT/current/tether.conf" >"$d/x.conf"
printf 'events {}\nhttp { include %s/x.conf; }\n' "$d" >"$d/n.conf"
check "(4) nginx -t would pass that change" \
	sh -c "grep -A2 '# route/root' '$d/x.conf' | grep -q 'proxy_pass http://tether_c_a;' && nginx -t -q -p '$d' -e stderr -c '$d/n.conf'"
check_eq "(4) current is unchanged" "$C" "$(current)"
check_eq "(4) nginx was not reloaded" "$H" "$(hups)"
check_eq "(4) the agent stays at version $V0" "$V0" "$(st ng version)"
check "(4) nginx keeps serving B" answers "B /x" "$LMAIN" /x
check_eq "(4) the client loop saw no failure" 0 "$(loop_failures)"

rm -f "$WORK/check-fails"
put cluster/spare "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$PA}]}" >/dev/null
V=$(plane_version)
check "(5) after (4) a good push applies (version $V, with the route to A)" wait_until 15 agent_at ng "$V"
check "(5) traffic follows: the client loop sees A" wait_until 10 loop_sees A
check "(5) the marker answers the live generation" marker_is_current
check "(5) the ACK is recorded" wait_until 10 node_acked ng "$V"

# ---- (2b) the reload fails after the switch ----------------------------------------------------
# The agent refuses a listener on an address another process holds before
# anything goes live, and nginx -t refuses an address this host lacks. To
# see the reload itself fail, the operator's check (which runs after the
# agent's address check, before the switch) hands the new listener's port
# to another process: nginx -t passes, the reload cannot bind, nginx keeps
# the old workers and the marker the old id.
free_port PGRAB
echo "$PGRAB" >"$WORK/grab-port"
touch "$WORK/check-grabs"
H=$(hups)
C=$(current)
G=$(gens)
V0=$V
ctl apply - >/dev/null <<EOF
{"upserts":[
 {"name":"listener/late","body":{"address":"127.0.0.1","port":$PGRAB}},
 {"name":"route/late","body":{"listener":"late","path":"/","cluster":"a"}}]}
EOF
VBAD=$(plane_version)
check "(2b) the agent NACKs version $VBAD" wait_until 20 has_nack ng "$VBAD"
[ -s "$WORK/grab.pid" ] && track_pid "$(cat "$WORK/grab.pid")"
err=$(nack_error)
check "(2b) the NACK says nginx did not take the generation ($err)" \
	sh -c 'echo "$1" | grep -q "did not take generation"' _ "$err"
check "(2b) the NACK names the generation the marker kept answering (${C#gen-})" \
	sh -c 'echo "$1" | grep -qF "says: generation $2"' _ "$err" "${C#gen-}"
check "(2b) the reload was tried (nginx's bind() failed)" \
	grep -q "bind() to 127.0.0.1:$PGRAB failed" "$WORK/nginx-error.log"
check_eq "(2b) current is put back" "$C" "$(current)"
check "(2b) the marker answers the old generation" wait_until 10 sh -c "[ \"gen-\$(curl -s --max-time 2 http://127.0.0.1:$MARK/tether-generation)\" = '$C' ]"
check_eq "(2b) the agent stays at version $V0" "$V0" "$(st ng version)"
check_eq "(2b) no generation was left behind" "$G" "$(gens)"
check "(2b) the agent reloaded nginx again after putting current back" wait_until 10 hups_ge $((H + 2))
check_eq "(2b) the other process keeps its port" "G /" "$(get "$PGRAB" /)"
check "(2b) nginx keeps serving A" answers "A /x" "$LMAIN" /x
check_eq "(2b) the client loop saw no failure" 0 "$(loop_failures)"
rm -f "$WORK/check-grabs"
ctl apply - >/dev/null <<'EOF'
{"removes":["route/late","listener/late"]}
EOF
V=$(plane_version)
check "(5) after (2b) a good push applies (version $V)" wait_until 15 agent_at ng "$V"
check "(5) the marker answers the live generation" marker_is_current

# ---- the client loop over all of it ------------------------------------------------------------
loop_mark
check "the client loop still runs" wait_until 10 loop_more 5
stop_pid "$LOOP_PID" TERM
total=$(loop_total)
check "the client loop made enough requests to mean something ($total)" test "$total" -ge 100
check_eq "the client loop saw zero failed requests in all cases" 0 "$(loop_failures)"
[ "$(loop_failures)" = 0 ] || diag "$(grep -Ev '^[AB] /loop 200$' "$WORK/loop.codes" | sort | uniq -c)"
check "the client loop saw both backends" sh -c "grep -q '^A /loop 200\$' '$WORK/loop.codes' && grep -q '^B /loop 200\$' '$WORK/loop.codes'"

stop_pid "${APID[ng]}" TERM
check_eq "SIGTERM: the agent exits 0" 0 "$?"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
