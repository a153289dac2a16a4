#!/usr/bin/env bash
# t0964-sealed-ctl.sh: tetherctl's sealed secrets against a real plane
# (--sealed-secrets) and real agents. keygen --recovery writes the key pair
# (0600 / 0644); the nodes' keys show in `nodes` (KEY); put --seal stores
# an envelope wrapped for exactly the nodes whose subscription reaches the
# secret (the PEM in no stored byte), and the nodes apply it; a node that
# registers later is listed by `secrets status` as missing and held, until
# `secrets reseal` (one version, the envelope unchanged) wraps it; export
# writes the envelope alone and sync of it changes nothing; a plaintext
# file against a sealed copy needs --recovery-key (an error naming the
# file and the option without it), is unchanged when the same and sealed
# anew when not; `secrets revoke` clears a node's KEY; after the plane
# restarts with a new recovery key, sync seals the secret to it. Refusals:
# put --seal of a non-secret or to another recovery key than the plane's,
# reseal with the public half, a revoke with no key.
# Also: the man page's examples as written (put --seal from standard input,
# the leaked key: revoke, tetherd --rotate-key, reseal, a new certificate
# put --seal; a sealed file in git: put --seal --output, commit, sync with
# no recovery key); a sealed file without the wraps it needs (refused
# without the recovery key's secret half, wrapped with it); an older
# export (a replayed envelope, said what to do); reseal's 409 (--base) and
# its per-secret refusal of a secret sealed to the replaced recovery key;
# --json outputs; with --approve-relay-keys, a key through a relay pending
# (nodes, secrets status, put --seal leaves it out) until secrets approve
# (a wrong id, a bad id, an unknown node, at the relay: refused), then
# reseal wraps for it and the node applies it; and on a plane with tokens and without --sealed-secrets:
# put --seal needs --recovery-key (sealed to the .pub, a warning when no
# node can open it), and a reader's sync --dry-run prints no plaintext
# and leaves every secret out.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
[ -x "$CTL_BIN" ] || bail "no $CTL_BIN: build first"
need_cmd openssl
need_cmd git

# the man page's examples run as written
tetherctl() {
	"$CTL_BIN" --plane "$PLANE_URL" "$@"
}

# cert N: a self-signed certificate and key, $WORK/N.crt and $WORK/N.key
cert() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" -days 1 \
		-keyout "$WORK/$1.key" -out "$WORK/$1.crt" >/dev/null 2>&1 || bail "openssl cannot make a certificate"
}
# body N: the plaintext body of a secret holding certificate N
body() {
	jq -cn --rawfile cert "$WORK/$1.crt" --rawfile key "$WORK/$1.key" '{cert:$cert,key:$key}'
}
# keyline N: one line of N's private key, to grep for
keyline() {
	sed -n '2p' "$WORK/$1.key"
}
stored() {
	curl -sS "$PLANE_URL/v1/resources/secret/web" | jq -c .body
}
kid_of() {
	node_field "$1" '.key_id // empty'
}
has_kid() {
	[ -n "$(kid_of "$1")" ]
}
all_acked() {
	node_acked a "$1" && node_acked c "$1"
}
missing() {
	curl -sS "$PLANE_URL/v1/secrets" | jq -r '.secrets[] | select(.name == "secret/web") | .missing | join(",")'
}

# ---- the recovery key ----------------------------------------------------------------

OUT=$("$CTL_BIN" keygen --recovery "$WORK/recovery" 2>&1)
check "keygen --recovery succeeds" test $? -eq 0
check_eq "the secret half is 0600" "600" "$(stat -c %a "$WORK/recovery")"
check_eq "the public half is 0644" "644" "$(stat -c %a "$WORK/recovery.pub")"
check_eq "the .pub line: tag, key, id" "tether-x25519" "$(cut -d' ' -f1 "$WORK/recovery.pub")"
RKID=$(cut -d' ' -f3 "$WORK/recovery.pub")
check "it says what to keep offline" grep -q "keep $WORK/recovery offline" <<<"$OUT"
"$CTL_BIN" keygen --recovery "$WORK/recovery" >/dev/null 2>&1
check_eq "keygen --recovery refuses an existing file (exit 1)" "1" "$?"

# ---- a plane and two nodes: a reaches every name, b only cluster/ ------------------------

start_plane p --sealed-secrets "$WORK/recovery.pub"
start_agent a --consumer files
start_agent b --consumer files --sub cluster/
check "node a registers its key" wait_until 20 has_kid a
check "node b registers its key" wait_until 20 has_kid b
KA=$(kid_of a)
KB=$(kid_of b)
OUT=$(ctl nodes)
check_eq "nodes: a KEY column" "NODE TARGET ACKED LAG CONNECTED KEY VIA LAST NACK LABELS" "$(head -n 1 <<<"$OUT" | tr -s ' ')"
check_eq "nodes: a's key id" "$KA" "$(awk '$1 == "a" {print $6}' <<<"$OUT")"

# ---- put --seal -------------------------------------------------------------------------------

cert one
body one >"$WORK/one.json"
cp "$WORK/one.crt" "$WORK/web.crt"
cp "$WORK/one.key" "$WORK/web.key"
# tetherctl.1, EXAMPLES: from standard input
OUT=$(cd "$WORK" && jq -n --rawfile c web.crt --rawfile k web.key '{cert:$c,key:$k}' |
    tetherctl put secret/web --seal 2>&1)
check "put --seal from standard input succeeds" test $? -eq 0
V1=$(sed -n 's/^version \([0-9]*\)$/\1/p' <<<"$OUT")
check "it prints the version" test -n "$V1"
check_eq "the keys it wrapped for" "wrapped for a (key $KA)" "$(sed -n 2p <<<"$OUT")"
check_eq "and whom it sealed to" "secret/web sealed to recovery key $RKID and 1 node key" "$(tail -n 1 <<<"$OUT")"
S=$(stored)
check_eq "the stored body: sealed and wraps" '["sealed","wraps"]' "$(jq -c keys <<<"$S")"
check_eq "wrapped for a only (b's subscription does not reach it)" "[\"$KA\"]" "$(jq -c '.wraps | keys' <<<"$S")"
check_eq "sealed to the recovery key" "$RKID" "$(jq -r .sealed.rk <<<"$S")"
check "no byte of the key in the stored body" bash -c "! grep -qF -- '$(keyline one)' <<<'$S'"
check "node a applies it" wait_until 20 node_acked a "$V1"

# refusals
OUT=$(ctl put cluster/x --seal "$WORK/one.json" 2>&1)
check_eq "put --seal of a non-secret: a usage error" "2" "$?"
check "naming the rule" grep -q "only secret/NAME is sealed" <<<"$OUT"
OUT=$(echo '{"cert":"x","key":"y"}' | ctl put secret/bad --seal 2>&1)
check_eq "a body that is no secret's is refused here" "1" "$?"
check "with the field" grep -q "secret/bad: cert must be a PEM text" <<<"$OUT"
OUT=$(ctl put secret/plain "$WORK/one.json" 2>&1)
check_eq "the plane refuses plaintext" "1" "$?"
check "and says how to seal" grep -q "tetherctl put secret/plain --seal" <<<"$OUT"
OUT=$(ctl put secret/web --recovery-key "$WORK/recovery.pub" "$WORK/one.json" 2>&1)
check_eq "--recovery-key without --seal: a usage error" "2" "$?"
check "saying it goes with --seal" grep -q "put: --recovery-key goes with --seal" <<<"$OUT"
OUT=$(ctl put secret/web --output "$WORK/x.json" "$WORK/one.json" 2>&1)
check_eq "--output without --seal: a usage error" "2" "$?"
check "nothing written" test ! -e "$WORK/x.json"

# ---- a node that registers later: missing, then resealed ------------------------------------

start_agent c --consumer files --sub secret/
check "node c registers its key" wait_until 20 has_kid c
KC=$(kid_of c)
check_eq "secret/web misses a wrap for c" "c" "$(missing)"
OUT=$(ctl secrets status)
check_eq "secrets status: the header" "SECRET VERSION SEALED MISSING" "$(head -n 1 <<<"$OUT" | tr -s ' ')"
check_eq "secrets status: secret/web, sealed, c missing" "secret/web $V1 yes c" \
	"$(awk '$1 == "secret/web"' <<<"$OUT" | tr -s ' ')"
check "it says what to run" grep -q "tetherctl secrets reseal --recovery-key FILE" <<<"$OUT"
OUT=$(ctl secrets reseal --recovery-key "$WORK/recovery.pub" 2>&1)
check_eq "reseal with the public half: refused" "1" "$?"
check "saying so" grep -q "is a public key" <<<"$OUT"
OUT=$(ctl secrets reseal 2>&1)
check_eq "reseal without --recovery-key: a usage error" "2" "$?"
OUT=$(ctl secrets status --json)
check_eq "secrets status --json: the plane's answer" "secret/web c $RKID" \
	"$(jq -r '(.secrets[] | select(.name == "secret/web") | .name + " " + (.missing | join(","))) + " " + .recovery.key_id' <<<"$OUT")"
SEALED_BEFORE=$(stored | jq -c .sealed)
# a write in between (the plane is past --base): 409, nothing written
OUT=$(ctl secrets reseal --recovery-key "$WORK/recovery" --base $((V1 - 1)) 2>&1)
check_eq "reseal against an older version: exit 1" "1" "$?"
check "saying someone wrote in between and to run it again" \
	grep -q "no longer at version $((V1 - 1)) (someone wrote in between): nothing was written; run secrets reseal again" <<<"$OUT"
check_eq "nothing written: c still missing" "c" "$(missing)"
OUT=$(ctl secrets reseal --recovery-key "$WORK/recovery" 2>&1)
check "reseal succeeds" test $? -eq 0
check_eq "it names what it wrapped, with the key" "secret/web: wrapped for c (key $KC)" "$(head -n 1 <<<"$OUT")"
V2=$(sed -n 's/^version \([0-9]*\): 1 secret resealed, 1 wrap added.*/\1/p' <<<"$OUT")
check "in one version" test -n "$V2"
S=$(stored)
check_eq "the envelope is the same (nothing re-encrypted)" "$SEALED_BEFORE" "$(jq -c .sealed <<<"$S")"
check_eq "wraps for a and c" "$(jq -cn --arg a "$KA" --arg c "$KC" '[$a,$c] | sort')" "$(jq -c '.wraps | keys' <<<"$S")"
check_eq "nothing missing now" "" "$(missing)"
check "node c applies it" wait_until 20 node_acked c "$V2"
OUT=$(ctl secrets reseal --recovery-key "$WORK/recovery" 2>&1)
check_eq "a second reseal has nothing to do" "nothing to reseal: every sealed secret has a wrap for each node key it reaches" "$OUT"

# ---- export and sync --------------------------------------------------------------------------

ctl export "$WORK/desired" >/dev/null 2>&1
check_eq "export writes the envelope alone" '["sealed"]' "$(jq -c keys "$WORK/desired/secret/web.json")"
check_eq "sealed as on the plane" "$(stored | jq -c .sealed)" "$(jq -c .sealed "$WORK/desired/secret/web.json")"
check "never the key" bash -c "! grep -rqF -- '$(keyline one)' '$WORK/desired'"
OUT=$(ctl sync "$WORK/desired" --dry-run 2>&1)
check_eq "sync of the export: nothing to do (exit 0)" "0" "$?"

mkdir -p "$WORK/plain/secret"
cp "$WORK/one.json" "$WORK/plain/secret/web.json"
OUT=$(ctl sync "$WORK/plain" 2>&1)
check_eq "a plaintext file against a sealed copy without --recovery-key: exit 1" "1" "$?"
check "naming the file and the option" grep -q "'$WORK/plain/secret/web.json': secret/web is sealed on the plane.*--recovery-key" <<<"$OUT"
OUT=$(ctl sync "$WORK/plain" --recovery-key "$WORK/recovery" 2>&1)
check_eq "the same plaintext with --recovery-key: nothing to do" "0" "$?"
check "says so" grep -q "^nothing to do" <<<"$OUT"
cert two
body two >"$WORK/plain/secret/web.json"
OUT=$(ctl sync "$WORK/plain" --recovery-key "$WORK/recovery" 2>&1)
check "another plaintext is sealed and sent" grep -q "^version [0-9]*: 0 created, 1 changed, 0 deleted" <<<"$OUT"
V3=$(sed -n 's/^version \([0-9]*\):.*/\1/p' <<<"$OUT")
S=$(stored)
check "a new envelope" test "$(jq -c .sealed <<<"$S")" != "$SEALED_BEFORE"
check "no byte of the new key stored" bash -c "! grep -qF -- '$(keyline two)' <<<'$S'"
check "nodes a and c apply it" wait_until 20 all_acked "$V3"
mkdir -p "$WORK/new/secret"
body one >"$WORK/new/secret/db.json"
OUT=$(ctl sync "$WORK/new" 2>&1)
check "a new plaintext secret file is sealed (the plane requires it)" grep -q "^version [0-9]*: 1 created" <<<"$OUT"
check_eq "secret/db is stored sealed" "true" "$(curl -sS "$PLANE_URL/v1/resources/secret/db" | jq '.body | has("sealed")')"

# ---- a sealed file in git: put --seal --output, then sync with no recovery key -------------------

mkdir -p "$WORK/repo"
(cd "$WORK/repo" && tetherctl export desired >/dev/null && git init -q desired && git -C desired add . &&
	git -C desired -c user.name=t -c user.email=t@t commit -qm import) || bail "cannot make the git directory"
SEALED_SYNCED=$(stored | jq -c .sealed)
cert three
cp "$WORK/three.crt" "$WORK/repo/web.crt"
cp "$WORK/three.key" "$WORK/repo/web.key"
# tetherctl.1, EXAMPLES: a new certificate for a sealed secret in that directory
OUT=$(cd "$WORK/repo" && jq -n --rawfile c web.crt --rawfile k web.key '{cert:$c,key:$k}' |
    tetherctl put secret/web --seal --output desired/secret/web.json 2>&1)
check "put --seal --output succeeds" test $? -eq 0
check_eq "saying where" "secret/web sealed to recovery key $RKID and 2 node keys: written to 'desired/secret/web.json'" \
	"$(tail -n 1 <<<"$OUT")"
F=$WORK/repo/desired/secret/web.json
check_eq "the file: the stored form, wrapped for a and c" "$(jq -cn --arg a "$KA" --arg c "$KC" '[$a,$c] | sort')" \
	"$(jq -c '.wraps | keys' "$F")"
check "no byte of the key in it" bash -c "! grep -qF -- '$(keyline three)' '$F'"
check_eq "the plane is not written" "$SEALED_SYNCED" "$(stored | jq -c .sealed)"
check_eq "the file is 0600" "600" "$(stat -c %a "$F")"
OUT=$(cd "$WORK/repo" && git -C desired -c user.name=t -c user.email=t@t commit -qam "web: new certificate" 2>&1 &&
	tetherctl sync desired --prune 2>&1)
check "sync of it, no recovery key: applied" grep -q "^version [0-9]*: 0 created, 1 changed, 0 deleted" <<<"$OUT"
V4=$(sed -n 's/^version \([0-9]*\):.*/\1/p' <<<"$OUT")
check_eq "the plane holds the file's envelope" "$(jq -c .sealed "$F")" "$(stored | jq -c .sealed)"
check "nodes a and c apply it" wait_until 20 all_acked "$V4"

# ---- a sealed file without the wraps it needs -------------------------------------------------------

cert four
body four | ctl put secret/web --seal --output "$WORK/four.json" >/dev/null 2>&1 || bail "put --seal --output failed"
mkdir -p "$WORK/nowrap/secret"
jq '{sealed}' "$WORK/four.json" >"$WORK/nowrap/secret/web.json"
OUT=$(ctl sync "$WORK/nowrap" 2>&1)
check_eq "an envelope without wraps, no --recovery-key: exit 1" "1" "$?"
check "naming the file, the nodes and both ways out" grep -qF "'$WORK/nowrap/secret/web.json': secret/web: the file's envelope has no wraps for 2 nodes it reaches (a, c): give --recovery-key FILE (the secret half) to wrap them, or write the file with 'tetherctl put secret/web --seal --output FILE'" <<<"$OUT"
OUT=$(ctl sync "$WORK/nowrap" --recovery-key "$WORK/recovery.pub" 2>&1)
check_eq "the same with the .pub: exit 1" "1" "$?"
check "the same error" grep -q "has no wraps for 2 nodes" <<<"$OUT"
check_eq "nothing was sent" "$(jq -c .sealed "$F")" "$(stored | jq -c .sealed)"
OUT=$(ctl sync "$WORK/nowrap" --recovery-key "$WORK/recovery" 2>&1)
check "with the secret half: wrapped and applied" grep -q "^version [0-9]*: 0 created, 1 changed, 0 deleted" <<<"$OUT"
S=$(stored)
check_eq "the file's envelope" "$(jq -c .sealed "$WORK/four.json")" "$(jq -c .sealed <<<"$S")"
check_eq "wrapped for a and c" "$(jq -cn --arg a "$KA" --arg c "$KC" '[$a,$c] | sort')" "$(jq -c '.wraps | keys' <<<"$S")"

# ---- an older export: a replayed envelope, and what to do -------------------------------------------

OUT=$(ctl sync "$WORK/desired" --recovery-key "$WORK/recovery" 2>&1)
check_eq "an export of a replaced envelope: refused (exit 1)" "1" "$?"
check "the plane's words, on the file" grep -q "'$WORK/desired/secret/web.json': secret/web: envelope .* was replaced before: a replayed envelope" <<<"$OUT"
check "and what to do" grep -qF "'$WORK/desired/secret/web.json' holds an envelope the plane has replaced since; to restore that value, sync its plaintext (with --recovery-key) or put it with --seal: a new envelope" <<<"$OUT"

# ---- reseal while a node registers: the plane's 422, and what to do -----------------------------------

# a pass-through to the plane that holds POST /v1/batch until told (files:
# the events): the real plane answers everything
cat >"$WORK/hold.py" <<'PY'
import http.client, http.server, os, sys, time
up, held, release, portfile = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if self.command == "POST" and self.path.startswith("/v1/batch"):
            open(held, "w").close()
            while not os.path.exists(release):
                time.sleep(0.02)
        c = http.client.HTTPConnection("127.0.0.1", up, timeout=60)
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "expect")}
        c.request(self.command, self.path, body, hdrs)
        r = c.getresponse()
        data = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
    do_GET = do_POST = do_PUT = do_DELETE = do
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
PY
need_cmd python3
python3 "$WORK/hold.py" "$PLANE_PORT" "$WORK/held" "$WORK/release" "$WORK/hold.port" >>"$WORK/hold.log" 2>&1 &
HOLD_PID=$!
track_pid "$HOLD_PID"
check "the pass-through is up" wait_until 10 test -s "$WORK/hold.port"
start_agent e --consumer files --sub secret/
check "node e registers its key" wait_until 20 has_kid e
KE=$(kid_of e)
"$CTL_BIN" --plane "http://127.0.0.1:$(cat "$WORK/hold.port")" secrets reseal --recovery-key "$WORK/recovery" \
	>"$WORK/reseal.out" 2>&1 &
RESEAL_PID=$!
check "reseal sends its batch (held)" wait_until 20 test -e "$WORK/held"
start_agent f --consumer files --sub secret/
check "node f registers its key in between" wait_until 20 has_kid f
KF=$(kid_of f)
touch "$WORK/release"
wait "$RESEAL_PID"
check_eq "the plane refuses the reseal (422): exit 1" "1" "$?"
check "the plane's words, and to run it again" \
	grep -q "the plane refused the reseal (HTTP 422): nothing was written; if a node registered a key in between, run secrets reseal again" "$WORK/reseal.out"
check "nothing written: e still misses secret/web" grep -q "e" <<<"$(missing)"
stop_pid "$HOLD_PID"
OUT=$(ctl secrets reseal --recovery-key "$WORK/recovery" 2>&1)
check "run again, it wraps both" grep -qF "secret/web: wrapped for e (key $KE), f (key $KF)" <<<"$OUT"
# e and f leave: their keys revoked, so what follows seals to a and c only
stop_pid "${APID[e]}" TERM
stop_pid "${APID[f]}" TERM
ctl secrets revoke e >/dev/null 2>&1 && ctl secrets revoke f >/dev/null 2>&1 || bail "cannot revoke e and f"

# ---- a key that leaked (tetherctl.1, EXAMPLES) ------------------------------------------------------

ID_BEFORE=$(stored | jq -r .sealed.id)
OUT=$(tetherctl secrets revoke c 2>&1)
check "secrets revoke succeeds" test $? -eq 0
check "naming the key" grep -q "node c: key $KC revoked" <<<"$OUT"
check_eq "nodes: c's KEY is -" "-" "$(ctl nodes | awk '$1 == "c" {print $6}')"
check_eq "nodes: a's VIA is - (registered directly)" "-" "$(ctl nodes | awk '$1 == "a" {print $7}')"
OUT=$(ctl secrets revoke c 2>&1)
check_eq "a node without a live key: exit 1" "1" "$?"
check "the plane's 404" grep -q "no live key" <<<"$OUT"
body one | ctl put secret/rv --seal >/dev/null 2>&1
check_eq "put --seal after the revoke: no wrap for the revoked key" "[\"$KA\"]" \
	"$(curl -sS "$PLANE_URL/v1/resources/secret/rv" | jq -c '.body.wraps | keys')"
stop_pid "${APID[c]}" TERM
start_agent c --consumer files --sub secret/ --rotate-key
new_kid_c() {
	[ -n "$(kid_of c)" ] && [ "$(kid_of c)" != "$KC" ]
}
check "tetherd --rotate-key registers a new key" wait_until 20 new_kid_c
KC2=$(kid_of c)
OUT=$(tetherctl secrets reseal --recovery-key "$WORK/recovery" 2>&1)
check "reseal wraps the secrets for the new key" grep -qF "secret/web: wrapped for c (key $KC2)" <<<"$OUT"
check "the leaked key still has its wrap in history: the example goes on" test "$(stored | jq -r .sealed.id)" = "$ID_BEFORE"
(cd "$WORK" && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=web \
    -days 90 -keyout web.key -out web.crt) >/dev/null 2>&1 || bail "openssl failed"
OUT=$(cd "$WORK" && jq -n --rawfile c web.crt --rawfile k web.key '{cert:$c,key:$k}' |
    tetherctl put secret/web --seal 2>&1)
check "the new certificate is put --seal" test $? -eq 0
V5=$(sed -n 's/^version \([0-9]*\)$/\1/p' <<<"$OUT")
S=$(stored)
check "a new envelope (sealed.id changed)" test "$(jq -r .sealed.id <<<"$S")" != "$ID_BEFORE"
check_eq "wrapped for a and c's new key, never the revoked one" \
	"$(jq -cn --arg a "$KA" --arg c "$KC2" '[$a,$c] | sort')" "$(jq -c '.wraps | keys' <<<"$S")"
check "nodes a and c apply it" wait_until 20 all_acked "$V5"
OUT=$(ctl secrets revoke c --json 2>&1)
check_eq "secrets revoke --json: the plane's answer" "$KC2" "$(jq -r .key_id <<<"$OUT")"

# ---- a new recovery key: the plane restarted with it, sync seals again -------------------------

"$CTL_BIN" keygen --recovery "$WORK/recovery2" >/dev/null 2>&1 || bail "keygen --recovery failed"
RKID2=$(cut -d' ' -f3 "$WORK/recovery2.pub")
stop_pid "$PLANE_PID"
# another name (its own log: p.log's "listening on" is the old port), the same data
start_plane p2 --data "$WORK/p.data" --sealed-secrets "$WORK/recovery2.pub"
OUT=$(ctl sync "$WORK/plain" 2>&1)
check "a copy sealed to the replaced recovery key is sealed anew, no --recovery-key needed" \
	grep -q "^version [0-9]*: 0 created, 1 changed, 0 deleted" <<<"$OUT"
check_eq "to the new recovery key" "$RKID2" "$(stored | jq -r .sealed.rk)"
OUT=$(ctl sync "$WORK/plain" --recovery-key "$WORK/recovery2" 2>&1)
check "and then it matches" grep -q "^nothing to do" <<<"$OUT"
OUT=$(ctl put secret/web --seal --recovery-key "$WORK/recovery.pub" "$WORK/one.json" 2>&1)
check_eq "put --seal with another recovery key than the plane's: exit 1" "1" "$?"
check "naming both" grep -q "the plane's recovery key is $RKID2, --recovery-key's is $RKID" <<<"$OUT"

# reseal: the plane's recovery key first; then, per secret, what it can
OUT=$(ctl secrets reseal --recovery-key "$WORK/recovery" 2>&1)
check_eq "reseal with the replaced recovery key: exit 1" "1" "$?"
check "naming both keys" grep -qF "secrets reseal: the plane's recovery key is $RKID2, --recovery-key's is $RKID: give the plane's" <<<"$OUT"
start_agent d --consumer files --sub secret/
check "node d registers its key" wait_until 20 has_kid d
KD=$(kid_of d)
OUT=$(ctl secrets reseal --recovery-key "$WORK/recovery2" 2>&1)
check_eq "reseal with a secret sealed to the old recovery key: exit 1" "1" "$?"
check "the others are resealed" grep -qF "secret/web: wrapped for d (key $KD)" <<<"$OUT"
check "and written" grep -q "^version [0-9]*: 1 secret resealed, 1 wrap added" <<<"$OUT"
check "the old one is named, with what to do" grep -qF "secret/db: sealed to recovery key $RKID (not the plane's $RKID2): seal it again (tetherctl put secret/db --seal, or sync its plaintext); left alone" <<<"$OUT"
check "d has its wrap of secret/web" test "$(stored | jq -r --arg d "$KD" '.wraps[$d] // empty')" != ""
check_eq "secret/db still misses d" "d" \
	"$(curl -sS "$PLANE_URL/v1/secrets" | jq -r '.secrets[] | select(.name == "secret/db") | .missing | join(",")')"

# ---- --approve-relay-keys: a key through a relay waits for an admin's secrets approve -------------

start_plane o --heartbeat 1 --sealed-secrets "$WORK/recovery.pub" --approve-relay-keys
O=$PLANE_URL
start_plane r --upstream "$O" --relay-id r --heartbeat 1
R=$PLANE_URL
PLANE_URL=$O
check "r follows o" wait_until 10 grep -q "relay r: following" "$WORK/o.log"
pending_of() {
	node_field "$1" '.key_pending // empty'
}
has_pending() {
	[ -n "$(pending_of "$1")" ]
}
start_agent g --consumer files --sub secret/ --plane "$R"
check "g's key, through r, waits at o" wait_until 20 has_pending g
KG=$(pending_of g)
check_eq "no live key while it waits" "" "$(kid_of g)"
check "tetherd logged the key id the admin checks" grep -q "node key $KG" "$WORK/g.log"
OUT=$(ctl nodes)
check_eq "nodes: KEY shows it pending, VIA the relay" "$KG (pending) r" "$(awk '$1 == "g" {print $6, $7, $8}' <<<"$OUT")"
OUT=$(ctl secrets status 2>&1)
check "secrets status: a line for it, the relay and the command to approve it" grep -qF \
	"  node g: key $KG via r: check it is the key the node logged (tetherd says \"node key $KG\"), then run 'tetherctl secrets approve g $KG'" <<<"$OUT"
check "secrets status: no node key to seal to" grep -q ", 0 node keys$" <<<"$OUT"
check "secrets status: reseal once approved" grep -qF "once approved, run 'tetherctl secrets reseal --recovery-key FILE'" <<<"$OUT"
check_eq "secrets status --json: the plane's pending list" "g:$KG:r" \
	"$(ctl secrets status --json | jq -r '.pending | map("\(.node):\(.key_pending):\(.key_via)") | join(" ")')"
# contrib/bash-completion/tetherctl (as t0615 drives it): secrets approve
# completes the nodes whose key waits, then that node's key id
comp_approve() (
	PATH=$TOP_BUILDDIR:$PATH
	# shellcheck source=/dev/null
	. "$TOP_SRCDIR/contrib/bash-completion/tetherctl" || exit 1
	COMP_WORDS=(tetherctl --plane "$PLANE_URL" secrets approve "$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMP_LINE="${COMP_WORDS[*]}"
	COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	_tetherctl
	printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | LC_ALL=C sort | paste -sd ' ' -
)
check_eq "completion: secrets approve offers the waiting node" "g" "$(comp_approve '')"
check_eq "completion: then its key id" "$KG" "$(comp_approve g '')"
OUT=$(ctl put secret/gate --seal "$WORK/one.json" 2>&1)
check "put --seal succeeds" grep -q "^version [0-9]*$" <<<"$OUT"
check_eq "... and does not wrap for the pending key" "[]" \
	"$(curl -sS "$O/v1/resources/secret/gate" | jq -c '.body.wraps | keys')"
check "... warning that no node can open it" grep -q "warning: secret/gate reaches no node with a registered key" <<<"$OUT"
check "g is held: no wrap for its key" wait_until 20 grep -qF "secret/gate: no wrap for this node's key $KG" "$WORK/g.log"
OUT=$(ctl secrets approve g "$KA" 2>&1)
check_eq "approve with another key id: exit 1" "1" "$?"
check "the plane's reason: the key that waits and the one given" \
	grep -qF "secrets approve g $KA: node g: the key waiting for approval is $KG, not $KA" <<<"$OUT"
check "... its 409 and what to do" grep -qF "the plane refused the approval (HTTP 409): nothing was approved; 'tetherctl secrets status' lists the keys waiting for approval" <<<"$OUT"
check_eq "... still pending" "$KG" "$(pending_of g)"
OUT=$(ctl secrets approve g 0123 2>&1)
check_eq "approve with a malformed key id: a usage error" "2" "$?"
check "... naming it and the form" grep -qF "secrets approve g: '0123' is not a key id (16 lowercase hex digits" <<<"$OUT"
OUT=$(ctl secrets approve nosuch "$KG" 2>&1)
check_eq "approve for an unknown node: exit 1" "1" "$?"
check "... naming it" grep -qF "no node 'nosuch'" <<<"$OUT"
OUT=$("$CTL_BIN" --plane "$R" secrets approve g "$KG" 2>&1)
check_eq "approve at the relay: exit 1" "1" "$?"
check "... saying to approve at the origin" grep -qF "a relay never approves a key; approve it at the origin" <<<"$OUT"
# tetherctl.1, EXAMPLES: approve, then reseal
OUT=$(cd "$WORK" && tetherctl secrets approve g "$KG" 2>&1)
check_eq "approve with the right id" "node g: key $KG approved: run 'tetherctl secrets reseal --recovery-key FILE' to wrap the sealed secrets for it" "$OUT"
check_eq "... now live, nothing pending" "$KG " "$(kid_of g) $(pending_of g)"
check_eq "nodes: KEY the live key" "$KG r" "$(ctl nodes | awk '$1 == "g" {print $6, $7}')"
check_eq "secrets status: secret/gate misses g now" "secret/gate yes g" \
	"$(ctl secrets status | awk '$1 == "secret/gate" {print $1, $3, $4}')"
OUT=$(ctl secrets approve g "$KG" --json 2>&1)
check_eq "approving again: exit 1" "1" "$?"
check "... the key is live" grep -qF "node g has no key waiting for approval; its key is live: $KG" <<<"$OUT"
OUT=$(cd "$WORK" && tetherctl secrets reseal --recovery-key recovery 2>&1)
check "reseal wraps secret/gate for g, via r" grep -qF "secret/gate: wrapped for g (key $KG, via r)" <<<"$OUT"
VG=$(sed -n 's/^version \([0-9]*\): 1 secret resealed, 1 wrap added.*/\1/p' <<<"$OUT")
check "in one version" test -n "$VG"
check_eq "the stored body: a wrap for g" "[\"$KG\"]" "$(curl -sS "$O/v1/resources/secret/gate" | jq -c '.body.wraps | keys')"
check "g opens and applies it" wait_until 20 node_acked g "$VG"

# ---- a plane with tokens, without --sealed-secrets -----------------------------------------------------

head -c 32 /dev/urandom | base64 | tr -d '/+=' >"$WORK/admin.tok"
SECURE=1 start_plane q --admin-token-file "$WORK/admin.tok"
TETHER_TOKEN_FILE=$WORK/admin.tok ctl token create --role reader >"$WORK/reader.tok" || bail "no reader token"
adm() {
	TETHER_TOKEN_FILE=$WORK/admin.tok ctl "$@"
}
OUT=$(adm put secret/db --seal "$WORK/one.json" 2>&1)
check_eq "put --seal on a plane without a recovery key, no --recovery-key: exit 1" "1" "$?"
check "naming the option" grep -q "give one with --recovery-key FILE" <<<"$OUT"
OUT=$(adm put secret/db --seal --recovery-key "$WORK/recovery.pub" "$WORK/one.json" 2>&1)
check "with the .pub: sealed and stored" test $? -eq 0
check_eq "sealed to it" "$RKID" "$(curl -sS -H "Authorization: Bearer $(cat "$WORK/admin.tok")" "$PLANE_URL/v1/resources/secret/db" | jq -r .body.sealed.rk)"
check "a warning: no node can open it" grep -qF "warning: secret/db reaches no node with a registered key: no node can open it until one registers and 'tetherctl secrets reseal' runs" <<<"$OUT"
adm put secret/web "$WORK/one.json" >/dev/null 2>&1 || bail "cannot put a plaintext secret"
mkdir -p "$WORK/red/secret"
body two >"$WORK/red/secret/db.json"
OUT=$(TETHER_TOKEN_FILE=$WORK/reader.tok ctl sync "$WORK/red" --dry-run --prune 2>&1)
check_eq "a reader's dry run with a plaintext file for a sealed secret: nothing to do (exit 0)" "0" "$?"
check "no byte of the file's key printed" bash -c "! grep -qF -- '$(keyline two)' <<<'$OUT'"
check "nor of the plane's" bash -c "! grep -qF -- '$(keyline one)' <<<'$OUT'"
check_eq "the warning, once" "1" "$(grep -c "warning: the plane redacts secrets for this token" <<<"$OUT")"
check "no secret deleted by --prune" bash -c "! grep -q 'delete secret/' <<<'$OUT'"
mkdir -p "$WORK/red2/secret"
body two >"$WORK/red2/secret/web.json"
OUT=$(adm sync "$WORK/red2" --dry-run 2>&1)
check_eq "an admin's dry run: a change (exit 3)" "3" "$?"
check "the plaintext body is not shown" grep -q "(a plaintext secret: its body is not shown)" <<<"$OUT"
check "no byte of either key" bash -c "! grep -qF -e '$(keyline two)' -e '$(keyline one)' <<<'$OUT'"
OUT=$(TETHER_TOKEN_FILE=$WORK/reader.tok ctl export "$WORK/rexport" 2>&1)
check "a reader's export: the sealed secret, as its envelope" test "$(jq -c keys "$WORK/rexport/secret/db.json")" = '["sealed"]'
check "not the plaintext one" test ! -e "$WORK/rexport/secret/web.json"
check "saying so" grep -q "1 secret not exported" <<<"$OUT"

# a damaged sealed body in the store (edited behind the plane's back): export refuses it
need_cmd sqlite3
stop_pid "$PLANE_PID"
sqlite3 "$WORK/q.data/tether.db" \
	"UPDATE resources SET body = '{\"sealed\":{\"v\":1},\"wraps\":{},\"extra\":\"damaged-store-marker\"}' WHERE name = 'secret/db'" ||
	bail "cannot edit the store"
SECURE=1 start_plane q2 --data "$WORK/q.data" --admin-token-file "$WORK/admin.tok"
OUT=$(adm export "$WORK/damaged" 2>&1)
check_eq "export of a damaged sealed body: exit 1" "1" "$?"
check "naming it, not exported" grep -q "secret/db: the plane's sealed body is damaged: .*; not exported" <<<"$OUT"
check "the file is not written" test ! -e "$WORK/damaged/secret/db.json"
check "nothing of the stored text in the directory" bash -c "! grep -rqF damaged-store-marker '$WORK/damaged'"
check "the others are" test -e "$WORK/damaged/secret/web.json"

done_testing
