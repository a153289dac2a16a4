#!/usr/bin/env bash
# t0962-sealed-agent.sh: sealed secrets at a real nginx node. A plane with
# --sealed-secrets and tetherd --consumer nginx: the node makes its key
# (STATE_DIR/node.key, 0600) and registers it; a TLS listener's sealed
# secret is opened in memory and nginx serves its certificate (compared
# with what was sealed); the secret files are 0600, wraps.json holds the
# wrap, and the key's text is in no log, status.json or last-good, which
# keeps the sealed body. The node's key revoked, a new version sealed
# without it is held (one "held" NACK, the node keeps serving the old
# certificate); a restart's registration of the revoked key is refused
# (403, logged with the plane's words); tetherd --rotate-key registers a
# new key id (node.key.old kept until the plane took it and the state's
# wraps are for the new key), and the version sealed to it applies. A wrap
# swapped for another envelope's is a verification NACK, and the node
# keeps serving. 450 more sealed secrets with long names arrive in one
# push: their wraps come in batches the plane takes (names, URL length).
# A version with a new envelope refused by --check leaves wraps.json able
# to open last-good. A rotation with no revocation: the plane takes the
# new key, node.key.old stays while last-good's wraps are for the old key,
# a restart with the plane unreachable still boots on last-good, and once
# a writer reseals the node fetches the new key's wraps and node.key.old
# goes. With the plane down and the output wiped, a boot from last-good
# (with wraps.json) serves the sealed secret again, and removes a secret
# temp file a crash left; --secrets-dir puts the secret files on a real
# tmpfs (the log says "tmpfs") or a plain directory (the log says whether
# it is one), made 0700, named by the configuration.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
SEALTOOL=$TOP_BUILDDIR/tests/tools/sealtool
[ -x "$SEALTOOL" ] || bail "no $SEALTOOL: build first (make check builds it)"
need_cmd nginx node openssl

trap t_cleanup EXIT

# ---- helpers of this test ---------------------------------------------------------

# cert N: a self-signed certificate for localhost, $WORK/N.crt and N.key
cert() {
	openssl req -x509 -newkey rsa:2048 -nodes -subj "/CN=localhost/O=$1" -addext subjectAltName=DNS:localhost \
		-days 1 -keyout "$WORK/$1.key" -out "$WORK/$1.crt" >/dev/null 2>&1 || bail "openssl cannot make a certificate"
}
# sealed N [NODEKEY...]: the stored body of secret/tls holding certificate N,
# sealed to the recovery key and wrapped for each node key file
sealed() {
	local n=$1
	shift
	jq -cn --rawfile cert "$WORK/$n.crt" --rawfile key "$WORK/$n.key" '{cert:$cert,key:$key}' |
		"$SEALTOOL" seal secret/tls "$WORK/recovery.pub" "$@"
}
# put_secret FILE: PUT secret/tls's stored body; prints the new version
put_secret() {
	curl -sS -X PUT --data-binary "@$1" "$PLANE_URL/v1/resources/secret/tls" | jq -r .version
}
# fp FILE: a certificate's SHA-256 fingerprint
fp() {
	openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2
}
# served_fp: the fingerprint of the certificate nginx serves on the TLS listener
served_fp() {
	openssl s_client -connect "127.0.0.1:$LTLS" -servername localhost </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 2>/dev/null | cut -d= -f2
}
serves() {
	[ "$(served_fp)" = "$(fp "$WORK/$1.crt")" ]
}
# through N: a request over TLS, verified against certificate N, reaches A
through() {
	[ "$(curl -s --max-time 3 --cacert "$WORK/$1.crt" --resolve "localhost:$LTLS:127.0.0.1" \
		"https://localhost:$LTLS/t")" = "A /t" ]
}
keyline() {
	sed -n '10p' "$WORK/$1.key"
}
st_ng() {
	jq -r "$1" "$WORK/ng.state/status.json" 2>/dev/null
}

# ---- plane, nginx, the node ------------------------------------------------------------
start_tool ba backend.mjs 0 A
PA=$TOOL_PORT
free_port LTLS
free_port MARK
OUT=$WORK/ng.out
STATE=$WORK/ng.state
"$SEALTOOL" recovery "$WORK/recovery" >/dev/null || bail "sealtool cannot make a recovery key"
cert one
cert two
check "the two certificates differ" test "$(fp "$WORK/one.crt")" != "$(fp "$WORK/two.crt")"
AGENT_ARGS=(--consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" --reload-timeout 5
	--backoff-min 0.1 --backoff-max 1 --check "test ! -e '$WORK/refuse'")

start_plane p --heartbeat 1 --sealed-secrets "$WORK/recovery.pub"
write_nginx_conf "$OUT"
start_nginx
put cluster/a "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$PA}]}" >/dev/null
V0=$(plane_version)

start_agent ng "${AGENT_ARGS[@]}"
check "the agent applies version $V0" wait_until 20 agent_at ng "$V0"
check "the node made its key, STATE_DIR/node.key" test -f "$STATE/node.key"
check_eq "node.key is 0600" 600 "$(stat -c %a "$STATE/node.key")"
KID1=$("$SEALTOOL" key "$STATE/node.key")
check "its id is a key id ($KID1)" sh -c "echo '$KID1' | grep -Eq '^[0-9a-f]{16}\$'"
check "the log says it made it" grep -qF "node key $KID1 made" "$WORK/ng.log"
check "the plane has the node's key (registered at the connection)" \
	wait_until 10 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/ng' | jq -r .key_id)\" = '$KID1' ]"
check_eq "a plaintext secret is refused by this plane (422)" 422 \
	"$(jq -cn --rawfile cert "$WORK/one.crt" --rawfile key "$WORK/one.key" '{cert:$cert,key:$key}' |
		curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary @- "$PLANE_URL/v1/resources/secret/plain")"

# ---- a TLS listener from a sealed secret --------------------------------------------------
sealed one "$STATE/node.key" >"$WORK/s1.json" || bail "sealtool cannot seal"
ID1=$(jq -r .sealed.id "$WORK/s1.json")
jq -n --slurpfile s "$WORK/s1.json" --argjson port "$LTLS" '{upserts:[
 {name:"secret/tls", body:$s[0]},
 {name:"listener/tls", body:{address:"127.0.0.1", port:$port, tls:{secret:"tls"}}},
 {name:"route/tls", body:{listener:"tls", host:"*", path:"/", cluster:"a"}}]}' >"$WORK/tls.json"
ctl apply "$WORK/tls.json" >/dev/null || bail "the plane refused the sealed secret"
V1=$(plane_version)
check "the agent applies version $V1 (a sealed secret)" wait_until 20 agent_at ng "$V1"
check "https:// through nginx, verified against the sealed certificate, reaches A" wait_until 10 through one
check_eq "nginx serves the certificate that was sealed" "$(fp "$WORK/one.crt")" "$(served_fp)"
check "the plane has the ACK of $V1" wait_until 10 node_acked ng "$V1"
crt=$(grep -o 'ssl_certificate [^;]*' "$OUT/current/tether.conf" | awk '{print $2}')
keyf=$(grep -o 'ssl_certificate_key [^;]*' "$OUT/current/tether.conf" | awk '{print $2}')
check "the certificate file is what was sealed" cmp -s "$crt" "$WORK/one.crt"
check "the key file is what was sealed" cmp -s "$keyf" "$WORK/one.key"
check_eq "every secret file is 0600" "" "$(find "$OUT/secrets" -type f ! -perm 0600 | xargs)"
check_eq "wraps.json is 0600" 600 "$(stat -c %a "$STATE/wraps.json" 2>/dev/null)"
check_eq "wraps.json holds secret/tls's wrap for the node's key" "$KID1 $ID1" \
	"$(jq -r '.kid + " " + .wraps["secret/tls"].id' "$STATE/wraps.json")"
inflated "$STATE"/lastgood-* >"$WORK/lastgood.txt"
check "last-good keeps the sealed body (its envelope id)" grep -qF "$ID1" "$WORK/lastgood.txt"
check "last-good holds no plaintext secret body" sh -c "! grep -qF 'BEGIN PRIVATE KEY' '$WORK/lastgood.txt'"

# ---- held: no wrap for the node's key ------------------------------------------------------
check_eq "an admin revokes the node's key (DELETE /v1/nodes/ng/key)" 200 "$(api_status DELETE /v1/nodes/ng/key)"
check_eq "the plane lists it revoked" "null $KID1" "$(node_field ng '(.key_id|tostring) + " " + (.key_revoked|join(","))')"
sealed two >"$WORK/s2.json"
V2=$(put_secret "$WORK/s2.json")
check "a version sealed to no node is taken ($V2)" test "$V2" -gt "$V1"
check "the plane records the node held at $V2" wait_until 20 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/ng' | jq -r .held.version)\" = '$V2' ]"
check "the reason names the secret and the node's key" \
	sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -r .held.reason | grep -qF 'secret/tls: no wrap for this node'\''s key $KID1'"
check "the node still runs $V1" agent_at ng "$V1"
check "and nginx still serves the old certificate" serves one
check "status.json says why" sh -c "jq -r .last_error '$STATE/status.json' | grep -qF 'version $V2 held: secret/tls'"
check "the agent logged the hold" grep -qF "push $V2 held" "$WORK/ng.log"

# a restart registers the revoked key again: refused, and said with the plane's words
stop_pid "${APID[ng]}" TERM
start_agent ng "${AGENT_ARGS[@]}"
check "the plane's refusal of the revoked key is logged as an error, with what to do" \
	wait_until 10 sh -c "grep -F 'error: key: ' '$WORK/ng.log' | grep -F 'refused node key $KID1 (HTTP 403)' | grep -qF 'tetherd --rotate-key'"
check "the node keeps serving the old certificate" serves one

# ---- --rotate-key: a new key, registered; the version sealed to it applies ------------------
stop_pid "${APID[ng]}" TERM
start_agent ng "${AGENT_ARGS[@]}" --rotate-key
check "the restarted agent says it made a new key" wait_until 10 grep -q "rotate-key: node key [0-9a-f]* made to replace $KID1" "$WORK/ng.log"
KID2=$("$SEALTOOL" key "$STATE/node.key")
check "the new key id differs ($KID1 -> $KID2)" test -n "$KID2" -a "$KID2" != "$KID1"
check "the plane has the new key" wait_until 10 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/ng' | jq -r .key_id)\" = '$KID2' ]"
check "node.key.old stays while last-good's wraps are for $KID1" test -e "$STATE/node.key.old"
check_eq "node.key is 0600" 600 "$(stat -c %a "$STATE/node.key")"
check "the node booted on last-good and still serves the old certificate" serves one
check "held again at $V2 (no wrap for the new key either)" \
	wait_until 20 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -r .held.reason | grep -qF '$KID2'"
sealed two "$STATE/node.key" >"$WORK/s3.json"
ID3=$(jq -r .sealed.id "$WORK/s3.json")
V3=$(put_secret "$WORK/s3.json")
check "the version sealed to the new key applies ($V3)" wait_until 20 agent_at ng "$V3"
check "node.key.old goes once the plane took the new key and the state's wraps are for it" \
	wait_until 10 test ! -e "$STATE/node.key.old"
check "nginx serves the new certificate" wait_until 10 serves two
check "https:// verified against it reaches A" wait_until 10 through two
check "the ACK of $V3 clears the hold" wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -e '.held == null and .acked_version == $V3' >/dev/null"
check_eq "one held NACK a version per agent process (three in all, for $V2)" 3 "$(grep -c "push $V2 held" "$WORK/ng.log")"
check_eq "wraps.json is pruned to the state's secret, for the new key" "$KID2 $ID3 1" \
	"$(jq -r '.kid + " " + .wraps["secret/tls"].id + " " + (.wraps|length|tostring)' "$STATE/wraps.json")"

# ---- a wrap swapped for another envelope's: a verification NACK -----------------------------
sealed one "$STATE/node.key" >"$WORK/a.json"
sealed one "$STATE/node.key" >"$WORK/b.json"
jq -c --slurpfile b "$WORK/b.json" --arg k "$KID2" '.wraps[$k] = $b[0].wraps[$k]' "$WORK/a.json" >"$WORK/swapped.json"
check "the swapped wrap is another envelope's" test "$(jq -r ".wraps[\"$KID2\"]" "$WORK/swapped.json")" != "$(jq -r ".wraps[\"$KID2\"]" "$WORK/a.json")"
VF0=$(node_field ng .verify_failures)
V4=$(put_secret "$WORK/swapped.json")
check "the plane took it ($V4: its form is right)" test "$V4" -gt "$V3"
check "the node NACKs it as a failed verification" \
	wait_until 20 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/ng' | jq -r .verify_failures)\" -gt '$VF0' ]"
check "naming the secret and what failed" sh -c "curl -s '$PLANE_URL/v1/nodes/ng' | jq -r .last_verify_failure.error | grep -F 'secret/tls: the wrap for key $KID2' | grep -qF 'a relay or the plane changed it'"
check "the node still runs $V3" agent_at ng "$V3"
check "and serves the same certificate" serves two
V5=$(put_secret "$WORK/a.json")
check "the right wrap applies ($V5)" wait_until 20 agent_at ng "$V5"
check "nginx serves it" wait_until 10 serves one

# ---- many sealed secrets in one push: the wraps come in batches -------------------------------
LONG=padding-padding-padding-padding-padding-padding-padding
for i in $(seq 1 450); do
	jq -cn --rawfile cert "$WORK/one.crt" --rawfile key "$WORK/one.key" '{cert:$cert,key:$key}' |
		"$SEALTOOL" seal "secret/b$i-$LONG" "$WORK/recovery.pub" "$STATE/node.key" |
		jq -c --arg n "secret/b$i-$LONG" '{name:$n, body:.}'
done | jq -s '{upserts:.}' >"$WORK/many.json"
check_eq "450 sealed secrets to put" 450 "$(jq '.upserts|length' "$WORK/many.json")"
check "their names, escaped, are more than the plane's 16 KiB request head" \
	test "$(jq -r '[.upserts[].name]|join(",")' "$WORK/many.json" | sed 's,/,%2F,g' | wc -c)" -gt 16384
ctl apply "$WORK/many.json" >/dev/null || bail "the plane refused the 450 sealed secrets"
VB=$(plane_version)
check "the agent applies them ($VB)" wait_until 30 agent_at ng "$VB"
check_eq "wraps.json holds 451 secrets' wraps" 451 "$(jq '.wraps|length' "$STATE/wraps.json")"
check "nginx still serves" serves one

# ---- a refused apply of a new envelope: wraps.json still opens last-good --------------------------
ID5=$(jq -r .sealed.id "$WORK/a.json")
touch "$WORK/refuse"
sealed two "$STATE/node.key" >"$WORK/s6.json"
V6=$(put_secret "$WORK/s6.json")
check "--check refuses version $V6" wait_until 20 grep -qF "push $V6 refused" "$WORK/ng.log"
check "the node still runs $VB" agent_at ng "$VB"
check_eq "wraps.json keeps last-good's envelope of secret/tls (and only it, after the failure)" "$ID5" \
	"$(jq -r '.wraps["secret/tls"] | if type == "array" then map(.id)|join(",") else .id end' "$STATE/wraps.json")"
rm -f "$WORK/refuse"
free_port DEAD
stop_pid "${APID[ng]}" TERM
PLANE_URL=http://127.0.0.1:$DEAD start_agent ng "${AGENT_ARGS[@]}"
check "a restart with no plane boots on last-good ($VB)" wait_until 10 sh -c "[ \"\$(jq -r '.state + \" \" + (.version|tostring)' '$STATE/status.json')\" = 'offline $VB' ]"
check "last-good's sealed secrets opened" sh -c "! grep -qF 'cannot be rendered here' '$WORK/ng.log'"
check "nginx serves last-good's certificate" serves one

# ---- a rotation with no revocation: last-good opens offline until the new key's wraps come --------
# The plane's mark (the newest registration's at, whole seconds) set 2 s
# ahead by a registration of $KID2: the rotation's registration, made at
# once, is not above it (409 with the mark); the agent registers it again
# once its clock is past the mark (before, only a new connection did).
"$SEALTOOL" reg ng "$STATE/node.key" $(($(date +%s) + 2)) >"$WORK/reg.json" || bail "sealtool reg"
check_eq "a registration of $KID2 2 s ahead is taken (the plane's mark)" 200 \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @"$WORK/reg.json" "$PLANE_URL/v1/nodes/ng/key")"
stop_pid "${APID[ng]}" TERM
start_agent ng "${AGENT_ARGS[@]}" --rotate-key
check "a new key replaces $KID2" wait_until 10 grep -q "rotate-key: node key [0-9a-f]* made to replace $KID2" "$WORK/ng.log"
KID3=$("$SEALTOOL" key "$STATE/node.key")
check "the plane takes the rotation" wait_until 10 grep -qF "key: node key $KID3 rotated at" "$WORK/ng.log"
check "... after a 409 that gave the mark, registered again once the clock passed it" \
	grep -qF "refused node key $KID3 for now (HTTP 409)" "$WORK/ng.log"
check "the plane has $KID3" sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/ng' | jq -r .key_id)\" = '$KID3' ]"
check "the node applies $V6 (sealed before the rotation) with the old key's wrap, not held" \
	wait_until 30 agent_at ng "$V6"
check "nginx serves $V6's certificate" wait_until 10 serves two
check "node.key.old stays: last-good's wraps are for $KID2" test -e "$STATE/node.key.old"
stop_pid "${APID[ng]}" TERM
LINES=$(wc -l <"$WORK/ng.log")
PLANE_URL=http://127.0.0.1:$DEAD start_agent ng "${AGENT_ARGS[@]}"
check "after the rotation, a restart with no plane boots on last-good ($V6)" wait_until 10 sh -c "[ \"\$(jq -r '.state + \" \" + (.version|tostring)' '$STATE/status.json')\" = 'offline $V6' ]"
check "its sealed secrets opened with node.key.old" sh -c "! tail -n +$LINES '$WORK/ng.log' | grep -qF 'cannot be rendered here'"
check "nginx serves last-good's certificate" serves two
stop_pid "${APID[ng]}" TERM
start_agent ng "${AGENT_ARGS[@]}"
check "back online at $V6" wait_until 10 sh -c "[ \"\$(jq -r '.state + \" \" + (.version|tostring)' '$STATE/status.json')\" = 'synced $V6' ]"
ctl secrets reseal --recovery-key "$WORK/recovery" >"$WORK/reseal.out" 2>&1 || bail "tetherctl secrets reseal failed: $(cat "$WORK/reseal.out")"
check "once resealed, the node holds wraps for $KID3 only, and node.key.old goes" \
	wait_until 30 sh -c "test ! -e '$STATE/node.key.old' && ! grep -qF '$KID2' '$STATE/wraps.json'"
check "the log says the rotation is done" grep -qF "key: the rotation from $KID2 to $KID3 is done" "$WORK/ng.log"
check "nginx serves $V6's certificate" wait_until 10 serves two

# ---- what holds the key's text: nothing but the secret files --------------------------------
check "the key texts are long enough to look for" test "$(keyline one | wc -c)" -ge 40 -a "$(keyline two | wc -c)" -ge 40
inflated "$STATE"/lastgood-* >"$WORK/lastgood.txt"
check "last-good holds the sealed body of $V6" grep -qF "$(jq -r .sealed.id "$WORK/s6.json")" "$WORK/lastgood.txt"
for k in one two; do
	leaks=$(grep -lF -- "$(keyline $k)" "$WORK/ng.log" "$WORK/p.log" "$STATE/status.json" "$STATE/wraps.json" \
		"$WORK/lastgood.txt" "$STATE"/* "$OUT"/gen-*/* 2>/dev/null | xargs)
	check_eq "key $k's text is in no log, status.json, wraps.json or last-good" "" "$leaks"
done
check "the logs were there to look in" test -s "$WORK/ng.log" -a -s "$WORK/p.log"

# ---- an offline boot from last-good ----------------------------------------------------------
stop_pid "${APID[ng]}" TERM
stop_pid "$PLANE_PID" TERM
stop_nginx
VL=$(jq -r .version "$STATE/status.json")
rm -rf "$OUT"
mkdir -p "$OUT/secrets"
echo "plaintext left by a crash" >"$OUT/secrets/.tether-tmp-secret-x-0123.key"
start_agent ng "${AGENT_ARGS[@]}"
check "the agent renders last-good with the plane down" wait_until 10 test -f "$OUT/current/tether.conf"
check "status.json: offline at version $VL" wait_until 10 sh -c "[ \"\$(jq -r '.state + \" \" + (.version|tostring)' '$STATE/status.json')\" = 'offline $VL' ]"
check_eq "two secret files, 0600" 2 "$(find "$OUT/secrets" -type f -perm 0600 | wc -l)"
check "the temp file a crash left in secrets/ is removed at start" test ! -e "$OUT/secrets/.tether-tmp-secret-x-0123.key"
start_nginx
check "nginx serves the sealed certificate from last-good" wait_until 10 serves two
check "https:// through it reaches A" wait_until 10 through two

# ---- --secrets-dir: a tmpfs, and a plain directory --------------------------------------------
TMPSEC=$WORK/tmpsec
mkdir -p "$TMPSEC"
if mount -t tmpfs -o size=4m,mode=0755 tmpfs "$TMPSEC" 2>"$WORK/mount.err"; then
	MOUNTS="$MOUNTS $TMPSEC"
	stop_pid "${APID[ng]}" TERM
	start_agent ng "${AGENT_ARGS[@]}" --secrets-dir "$TMPSEC/secrets"
	check "the log says the secrets directory is a tmpfs" wait_until 10 grep -qF "sealed secrets: their files go to $TMPSEC/secrets: tmpfs" "$WORK/ng.log"
	check "the configuration names the files there" wait_until 10 grep -qF "ssl_certificate_key $TMPSEC/secrets/" "$OUT/current/tether.conf"
	check_eq "the directory was made 0700" 700 "$(stat -c %a "$TMPSEC/secrets")"
	check_eq "two secret files there, 0600" 2 "$(find "$TMPSEC/secrets" -type f -perm 0600 | wc -l)"
	check "the key file holds what was sealed" cmp -s "$(grep -o 'ssl_certificate_key [^;]*' "$OUT/current/tether.conf" | awk '{print $2}')" "$WORK/two.key"
	check "nginx serves the certificate from the tmpfs" wait_until 10 serves two
	check "https:// through it reaches A" wait_until 10 through two
	# a reboot empties the tmpfs: the next start writes the files again
	stop_pid "${APID[ng]}" TERM
	rm -rf "$TMPSEC/secrets"
	start_agent ng "${AGENT_ARGS[@]}" --secrets-dir "$TMPSEC/secrets"
	check "an emptied tmpfs gets its secret files again at start" wait_until 10 sh -c "[ \"\$(find '$TMPSEC/secrets' -type f -perm 0600 | wc -l)\" = 2 ]"
	check "and nginx keeps serving" wait_until 10 through two
else
	ok "--secrets-dir on a tmpfs # SKIP mount -t tmpfs failed: $(head -c 200 "$WORK/mount.err" | tr '\n' ' ')"
fi
PLAIN=$WORK/plainsec
stop_pid "${APID[ng]}" TERM
start_agent ng "${AGENT_ARGS[@]}" --secrets-dir "$PLAIN/secrets"
if [ "$(stat -f -c %T "$WORK")" = tmpfs ]; then want="$PLAIN/secrets: tmpfs"; else want="$PLAIN/secrets: not tmpfs: secrets reach the disk"; fi
check "the log says what the plain directory is ($want)" wait_until 10 grep -qF "sealed secrets: their files go to $want" "$WORK/ng.log"
check "the configuration names the files there" wait_until 10 grep -qF "ssl_certificate_key $PLAIN/secrets/" "$OUT/current/tether.conf"
check_eq "made 0700" 700 "$(stat -c %a "$PLAIN/secrets")"
check "nginx serves the certificate from there" wait_until 10 through two
"$AGENT_BIN" --node x --plane http://127.0.0.1:1 --state-dir "$WORK/x.state" --output-dir "$WORK/x.out" \
	--consumer nginx --pidfile "$WORK/nginx.pid" --secrets-dir rel --once >"$WORK/rel.out" 2>&1
check_eq "a relative --secrets-dir is refused (exit 2)" 2 "$?"
check "saying why" grep -qF "secrets-dir: 'rel' is not an absolute path" "$WORK/rel.out"

stop_pid "${APID[ng]}" TERM
check_eq "SIGTERM: the agent exits 0" 0 "$?"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
