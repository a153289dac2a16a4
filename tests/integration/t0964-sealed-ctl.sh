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
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
[ -x "$CTL_BIN" ] || bail "no $CTL_BIN: build first"
need_cmd openssl

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
OUT=$(ctl put secret/web --seal "$WORK/one.json" 2>&1)
check "put --seal succeeds" test $? -eq 0
V1=$(sed -n 's/^version \([0-9]*\)$/\1/p' <<<"$OUT")
check "it prints the version" test -n "$V1"
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
SEALED_BEFORE=$(stored | jq -c .sealed)
OUT=$(ctl secrets reseal --recovery-key "$WORK/recovery" 2>&1)
check "reseal succeeds" test $? -eq 0
check_eq "it names what it wrapped" "secret/web: wrapped for c" "$(head -n 1 <<<"$OUT")"
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

# ---- revoke ---------------------------------------------------------------------------------------

OUT=$(ctl secrets revoke c 2>&1)
check "secrets revoke succeeds" test $? -eq 0
check "naming the key" grep -q "node c: key $KC revoked" <<<"$OUT"
check_eq "nodes: c's KEY is -" "-" "$(ctl nodes | awk '$1 == "c" {print $6}')"
OUT=$(ctl secrets revoke c 2>&1)
check_eq "a node without a live key: exit 1" "1" "$?"
check "the plane's 404" grep -q "no live key" <<<"$OUT"

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

done_testing
