#!/usr/bin/env bash
# t0510-trust-attacks.sh: a hostile middle box (tests/tools/attack-proxy.mjs)
# between a trusting tetherd (--trust) and a signing plane, in plain HTTP,
# so that only the signed statements can catch it. It changes a body inside
# a valid push, drops an upsert from a delta, adds a removal, mixes
# resources of two versions, replays an old push (also to an agent that
# restarted: the high-water mark is in last-good), freezes a node on old
# heartbeats until their statement expires, raises the version far ahead
# unsigned (and with another version's statement), sends an endless event,
# and re-signs statements with a key nobody trusts (and forges the trusted
# key's signature). Every case ends the same way: refused or flagged,
# nothing goes live (the output, last-good and the version stay as they
# were), the plane's record of the node shows the refusal; and once the
# proxy passes again, the node converges to the plane's newest version.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-attack.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
command -v node >/dev/null 2>&1 || skip_all "node is not installed (tests/tools need it)"
command -v sha256sum >/dev/null 2>&1 || skip_all "sha256sum is not installed"

# ---- helpers of this test ---------------------------------------------------

ADMIN=$WORK/admin.token
BIG=1125899906842624   # 2^50

# actl ARGS...: tetherctl as the admin
actl() {
	"$CTL_BIN" --plane "$PLANE_URL" --token-file "$ADMIN" "$@"
}

# wfile NAME CONTENT: the plane's file/NAME becomes NAME.txt holding
# CONTENT and a newline
wfile() {
	printf '{"path":"%s.txt","content":"%s\\n"}' "$1" "$2" | actl put "file/$1" >/dev/null ||
		bail "cannot write file/$1"
}

# wbatch A B: one version: a.txt holds A, b.txt holds B
wbatch() {
	printf '{"upserts":[{"name":"file/a","body":{"path":"a.txt","content":"%s\\n"}},' "$1" >"$WORK/batch.json"
	printf '{"name":"file/b","body":{"path":"b.txt","content":"%s\\n"}}]}\n' "$2" >>"$WORK/batch.json"
	actl apply "$WORK/batch.json" >/dev/null || bail "cannot apply a batch"
}

# vf_error_has NODE TEXT: the plane's last verification failure of NODE
# says TEXT
vf_error_has() {
	node_field "$1" .last_verify_failure.error | grep -qF -- "$2"
}

# fp NODE: what NODE serves and keeps: its output files and its last-good
# files checksummed, its version and its verified version
fp() {
	(cd "$WORK/$1.out" && find . -path ./.tether-work -prune -o -type f -print | sort | xargs -r sha256sum)
	(cd "$WORK/$1.state" && find . -name 'lastgood-*' -type f | sort | xargs -r sha256sum)
	jq -r '"version \(.version), verified \(.trust.verified_version)"' "$WORK/$1.state/status.json"
}

count() {
	local n
	n=$(grep -c -- "$1" "$2" 2>/dev/null)
	echo "${n:-0}"
}

# state_is NODE "STATE STALE": status.json's state and .trust.stale
state_is() {
	[ "$(jq -r '"\(.state) \(.trust.stale)"' "$WORK/$1.state/status.json" 2>/dev/null)" = "$2" ]
}

# alive PID
alive() {
	kill -0 "$1" 2>/dev/null
}

# before NODE: notes what NODE serves, keeps and has been told, before an
# attack: FP0, V0, VF0, AP0 (applied lines in its log), NACK0 (the plane's
# last_nack), STALE0 (the plane's stale ACK count)
before() {
	FP0=$(fp "$1")
	V0=$(st "$1" version)
	VF0=$(vf "$1")
	AP0=$(count "applied version" "$WORK/${ALOG:-$1}.log")
	NACK0=$(node_field "$1" '.last_nack | tojson')
	STALE0=$(node_field "$1" .stale_acks)
}

# intact NODE WHAT: nothing of the attack went live on NODE: the output,
# last-good and the version are as before(), no apply happened, and no
# file holds the proxy's words
intact() {
	check_eq "$2: output, last-good and version unchanged" "$FP0" "$(fp "$1")"
	check_eq "$2: the agent applied nothing meanwhile" "$AP0" "$(count "applied version" "$WORK/${ALOG:-$1}.log")"
	check "$2: no output file holds the proxy's words" \
		sh -c "! grep -rqE 'attack-proxy|xxxxxxxx' '$WORK/$1.out' --exclude-dir=.tether-work"
	check "$2: the agent still runs" alive "${APID[$1]}"
}

# converge NODE PROXYPORT WHAT: the proxy passes again and a new write
# reaches NODE with the plane's content
converge() {
	mode "$2" pass
	wfile conv "after $3"
	local v
	v=$(plane_version)
	check "$3: after the proxy passes again $1 converges to version $v" wait_until 10 agent_at "$1" "$v"
	check_eq "$3: and serves the plane's content" "$(plane_contents)" "$(contents "$1")"
	check "$3: the plane has $1's ACK of version $v" wait_until 5 node_acked "$1" "$v"
}

# plane_contents: the plane's file resources as contents prints them
plane_contents() {
	curl -s "${CURL_OPTS[@]}" "$PLANE_URL/v1/resources?prefix=file/" |
		jq -r '[.resources[].body | {p: .path, c: .content}] | sort_by(.p) |
			map("\(.p)=\(.c | rtrimstr("\n")) ") | join("")'
}

# agent_args PROXYPORT NODE: the agents' options into AARGS
agent_args() {
	AARGS=(--plane "http://127.0.0.1:$1" --trust "$WORK/plane.key.pub" --token-file "$WORK/$2.token"
		--metrics-file "$WORK/$2.prom" --backoff-min 0.1 --backoff-max 0.5 --max-push-bytes 1048576)
}

# hb_through PORT N: the proxy on PORT forwarded N heartbeats (what a
# freeze replays is the last of them)
hb_through() {
	[ "$(curl -s "http://127.0.0.1:$1/__state" | jq -r .heartbeats)" -ge "$2" ]
}

# ---- keys, tokens, a signing plane ---------------------------------------------------
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$ADMIN"
chmod 600 "$ADMIN"
# lib.sh's helpers (node_field, node_acked, ...) read the plane as the admin
CURL_OPTS=(-H "Authorization: Bearer $(cat "$ADMIN")")
"$CTL_BIN" keygen "$WORK/plane.key" >/dev/null || bail "keygen failed"
"$CTL_BIN" keygen "$WORK/attacker.key" >/dev/null || bail "keygen failed"
PLANE_KID=$(awk '{print $3}' "$WORK/plane.key.pub")
ATTACKER_KID=$(awk '{print $3}' "$WORK/attacker.key.pub")
# --statement-ttl 10 (its least): the freeze is seen within 10 s
SECURE=1 start_plane p --admin-token-file "$ADMIN" --signing-key "$WORK/plane.key" --heartbeat 0.5 \
	--statement-ttl 10
check "the plane signs with its key $PLANE_KID" grep -q "statements are signed with key $PLANE_KID" "$PLANE_LOG"
for n in n1 n2; do
	actl token create --node "$n" >"$WORK/$n.token" || bail "cannot make $n's token"
done

wfile a a1
wfile b b1
wfile c c1
V=$(plane_version)

# n1 behind the attack proxy; n2 behind another one, for the freeze
start_tool atk attack-proxy.mjs --target "127.0.0.1:$PLANE_PORT" --key "$WORK/attacker.key"
ATK=$TOOL_PORT
start_tool frz attack-proxy.mjs --target "127.0.0.1:$PLANE_PORT"
FRZ=$TOOL_PORT
agent_args "$ATK" n1
start_agent n1 "${AARGS[@]}"
agent_args "$FRZ" n2
start_agent n2 "${AARGS[@]}"
check "n1 and n2 sync to version $V through the proxies" wait_until 10 all_at "$V" n1 n2
check "n1 verifies pushes (trusts key $PLANE_KID)" grep -q "trust: pushes must carry statements signed by $PLANE_KID" "$WORK/n1.log"
check_eq "n1 holds version $V vouched for by $PLANE_KID" "$V $PLANE_KID false" \
	"$(jq -r '"\(.trust.verified_version) \(.trust.key_id) \(.trust.stale)"' "$WORK/n1.state/status.json")"
check "the proxy forwarded n1's snapshot as it was" grep -q "stream 1 (n1): push $V (nonce [^,]*, snapshot, 3 upserts, 0 removed): forwarded" "$WORK/atk.log"
check_eq "n1 serves a, b and c" "a.txt=a1 b.txt=b1 c.txt=c1 " "$(contents n1)"
check "the plane has n1's ACK of $V" wait_until 5 node_acked n1 "$V"
check_eq "no verification failure so far" "0 0" "$(vf n1) $(vf n2)"

# ---- freeze (n2): old heartbeats replayed until the statement expires ------------------
# it takes up to the TTL (10 s): it runs while n1 is attacked, and is
# looked at at the end
check "n2 is fresh and synced before the freeze" wait_until 5 state_is n2 "synced false"
check "n2's proxy forwarded heartbeats" wait_until 5 hb_through "$FRZ" 2
mode "$FRZ" freeze
check "the freeze begins on n2's stream" wait_until 5 grep -q "freeze: swallowing the plane's events" "$WORK/frz.log"
N2_FP=$(fp n2)
N2_V=$(st n2 version)
N2_AP=$(count "applied version" "$WORK/n2.log")

# ---- one body changed inside a valid push -------------------------------------------
before n1
mode "$ATK" tamper-body file/a
wfile a a2
V=$(plane_version)
check "tamper: the proxy changed file/a inside push $V" wait_until 5 grep -q "push $V .*tamper-body: file/a.content changed" "$WORK/atk.log"
check "tamper: n1 refuses it as a digest mismatch" wait_until 10 reason_above n1 digest 0
check "tamper: the plane records the refusal" wait_until 10 vf_above n1 "$VF0"
check "tamper: n1 logged why" grep -q "push $V refused: state digest mismatch: version $V as pushed is not the state its statement signs" "$WORK/n1.log"
check_eq "tamper: status.json says so (last_error)" "version $V refused: state digest mismatch" \
	"$(st n1 last_error | cut -d: -f1-2)"
check_eq "tamper: the plane's last verification failure is of version $V" "$V" "$(node_field n1 .last_verify_failure.version)"
check_eq "tamper: and its last NACK too (the nonce was the latest)" "$V state digest mismatch" \
	"$(node_field n1 '"\(.last_nack.version) \(.last_nack.error)"' | cut -d: -f1)"
check "tamper: n1 asks for a snapshot (reconnects with version=0)" wait_until 5 grep -q "opened (/v1/stream?node=n1&version=0[&)]" "$WORK/atk.log"
check "tamper: the tampered snapshot is refused too" wait_until 5 grep -q "push $V (nonce [^,]*, snapshot): tamper-body" "$WORK/atk.log"
intact n1 tamper
converge n1 "$ATK" tamper
check_eq "tamper: a.txt holds the plane's a2" a2 "$(cat "$WORK/n1.out/a.txt")"

# ---- a body changed so that it does not validate: still tampering, not a bad change -------
before n1
D0=$(reason n1 digest)
mode "$ATK" tamper-body file/e path=../escape.txt
wfile e e1
V=$(plane_version)
check "invalid: the proxy made file/e's path escape in push $V" wait_until 5 grep -q "push $V .*file/e.path set to" "$WORK/atk.log"
check "invalid: n1 refuses it as a digest mismatch, not as a bad change" wait_until 10 reason_above n1 digest "$D0"
check "invalid: n1 logged that it was changed in transit" grep -q "push $V refused: state digest mismatch.*changed in transit" "$WORK/n1.log"
check "invalid: the plane records a verification failure" wait_until 10 vf_above n1 "$VF0"
check "invalid: n1 asks for a snapshot" wait_until 5 count_ge 2 "opened (/v1/stream?node=n1&version=0[&)]" "$WORK/atk.log"
intact n1 invalid
converge n1 "$ATK" invalid

# ---- an upsert dropped from a delta -----------------------------------------------------
before n1
D0=$(reason n1 digest)
mode "$ATK" drop-upsert file/b
wbatch a3 b3
V=$(plane_version)
check "drop: the proxy dropped file/b from push $V" wait_until 5 grep -q "push $V (nonce [^,]*, base [0-9]*): drop-upsert: file/b dropped" "$WORK/atk.log"
check "drop: n1 refuses it as a digest mismatch" wait_until 10 reason_above n1 digest "$D0"
check "drop: the plane records the refusal" wait_until 10 vf_above n1 "$VF0"
check_eq "drop: of version $V, a digest mismatch" "$V state digest mismatch" \
	"$(node_field n1 '"\(.last_verify_failure.version) \(.last_verify_failure.error)"' | cut -d: -f1)"
check_eq "drop: the plane's last NACK is of version $V" "$V" "$(node_field n1 .last_nack.version)"
intact n1 drop
check_eq "drop: a.txt did not take a3 alone" "a2 b1" "$(cat "$WORK/n1.out/a.txt" "$WORK/n1.out/b.txt" | xargs)"
converge n1 "$ATK" drop
check_eq "drop: a and b arrive together" "a3 b3" "$(cat "$WORK/n1.out/a.txt" "$WORK/n1.out/b.txt" | xargs)"

# ---- a removal added --------------------------------------------------------------------
before n1
D0=$(reason n1 digest)
mode "$ATK" add-removal file/c
wfile a a4
V=$(plane_version)
check "add-removal: the proxy added file/c's removal to push $V" wait_until 5 grep -q "push $V (nonce [^,]*, base [0-9]*): add-removal: file/c removed" "$WORK/atk.log"
check "add-removal: n1 refuses it as a digest mismatch" wait_until 10 reason_above n1 digest "$D0"
check "add-removal: the plane records the refusal" wait_until 10 vf_above n1 "$VF0"
check_eq "add-removal: of version $V" "$V" "$(node_field n1 .last_verify_failure.version)"
check_eq "add-removal: the plane's last NACK is of version $V" "$V" "$(node_field n1 .last_nack.version)"
check "add-removal: the snapshot without file/c is refused too" wait_until 5 grep -q "push $V (nonce [^,]*, snapshot): add-removal: file/c left out" "$WORK/atk.log"
intact n1 add-removal
check_eq "add-removal: c.txt is still served" c1 "$(cat "$WORK/n1.out/c.txt" 2>&1)"
converge n1 "$ATK" add-removal
check_eq "add-removal: c.txt is still there, a.txt has a4" "a4 c1" "$(cat "$WORK/n1.out/a.txt" "$WORK/n1.out/c.txt" | xargs)"

# ---- resources of two versions mixed ----------------------------------------------------
before n1
D0=$(reason n1 digest)
mode "$ATK" mix file/a
wbatch a5 b5
V=$(plane_version)
check "mix: the proxy put an older file/a into push $V" wait_until 5 grep -q "push $V (nonce [^,]*, base [0-9]*): mix: file/a of version [0-9]* mixed into version $V" "$WORK/atk.log"
check "mix: n1 refuses it as a digest mismatch" wait_until 10 reason_above n1 digest "$D0"
check "mix: the plane records the refusal" wait_until 10 vf_above n1 "$VF0"
check_eq "mix: of version $V" "$V" "$(node_field n1 .last_verify_failure.version)"
check_eq "mix: the plane's last NACK is of version $V" "$V" "$(node_field n1 .last_nack.version)"
intact n1 mix
check_eq "mix: b.txt did not take b5 next to an old a" "a4 b3" "$(cat "$WORK/n1.out/a.txt" "$WORK/n1.out/b.txt" | xargs)"
converge n1 "$ATK" mix
check_eq "mix: a5 and b5 arrive together" "a5 b5" "$(cat "$WORK/n1.out/a.txt" "$WORK/n1.out/b.txt" | xargs)"

# ---- a statement signed by an unknown key ---------------------------------------------
before n1
mode "$ATK" unknown-key
wfile a a6
V=$(plane_version)
check "unknown-key: the proxy re-signed push $V with its key $ATTACKER_KID" wait_until 5 grep -q "push $V .*unknown-key: statement re-signed by key $ATTACKER_KID" "$WORK/atk.log"
check "unknown-key: n1 refuses it (reason unknown_key)" wait_until 10 reason_above n1 unknown_key 0
check "unknown-key: the plane records the refusal" wait_until 10 vf_above n1 "$VF0"
check_eq "unknown-key: the plane's record is of version $V" "$V" "$(node_field n1 .last_verify_failure.version)"
check "unknown-key: and names the unknown key" vf_error_has n1 "statement signed by an unknown key '$ATTACKER_KID'"
check_eq "unknown-key: the plane's last NACK is of version $V" "$V" "$(node_field n1 .last_nack.version)"
intact n1 unknown-key
check_eq "unknown-key: a.txt did not take a6 (a push otherwise genuine)" a5 "$(cat "$WORK/n1.out/a.txt")"
# the trusted kid, the proxy's signature
before n1
mode "$ATK" forged-sig
wfile a a7
V=$(plane_version)
check "forged-sig: the proxy forged push $V's signature" wait_until 5 grep -q "push $V .*forged-sig: statement signature forged" "$WORK/atk.log"
check "forged-sig: n1 refuses it (reason bad_signature)" wait_until 10 reason_above n1 bad_signature 0
check "forged-sig: the plane records the refusal" wait_until 10 vf_above n1 "$VF0"
check_eq "forged-sig: the plane's record is of version $V" "$V" "$(node_field n1 .last_verify_failure.version)"
check "forged-sig: and says bad signature" vf_error_has n1 "statement: bad signature (key '$PLANE_KID')"
intact n1 forged-sig
converge n1 "$ATK" unknown-key
check_eq "unknown-key: a.txt has a7" a7 "$(cat "$WORK/n1.out/a.txt")"

# ---- the version raised far ahead, unsigned ---------------------------------------------
before n1
mode "$ATK" fast-forward
check "fast-forward: the proxy injected push $BIG, unsigned" wait_until 5 grep -q "fast-forward: push $BIG injected (unsigned" "$WORK/atk.log"
check "fast-forward: n1 refuses it (reason unsigned)" wait_until 10 reason_above n1 unsigned 0
check "fast-forward: the plane records the refusal whatever the nonce" wait_until 10 vf_above n1 "$VF0"
check_eq "fast-forward: of version $BIG" \
	"$BIG unsigned push refused (this node runs with --trust)" \
	"$(node_field n1 '"\(.last_verify_failure.version) \(.last_verify_failure.error)"')"
check_eq "fast-forward: the NACK's forged nonce is stale: last_nack unchanged" "$NACK0" "$(node_field n1 '.last_nack | tojson')"
check_eq "fast-forward: counted as a stale ACK" "$((STALE0 + 1))" "$(node_field n1 .stale_acks)"
check_eq "fast-forward: n1 does not believe the plane is at $BIG" "$V0" "$(st n1 plane_version)"
intact n1 fast-forward
check "fast-forward: no ff.txt" test ! -e "$WORK/n1.out/ff.txt"
# the same with a real statement, of another version
before n1
mode "$ATK" fast-forward signed
check "fast-forward signed: injected with version $V0's statement" wait_until 5 grep -q "fast-forward: push $BIG injected (with the statement of version $V0" "$WORK/atk.log"
check "fast-forward signed: n1 refuses it (reason mismatch)" wait_until 10 reason_above n1 mismatch 0
check "fast-forward signed: the plane records the refusal" wait_until 10 vf_above n1 "$VF0"
check_eq "fast-forward signed: the plane's record says why" \
	"$BIG the statement is for version $V0, the push brings version $BIG" \
	"$(node_field n1 '"\(.last_verify_failure.version) \(.last_verify_failure.error)"')"
check_eq "fast-forward signed: n1's plane_version stays $V0" "$V0" "$(st n1 plane_version)"
intact n1 "fast-forward signed"
converge n1 "$ATK" fast-forward

# ---- an old push replayed -------------------------------------------------------------
wfile a a8
VOLD=$(plane_version)
check "replay: n1 applies version $VOLD" wait_until 10 agent_at n1 "$VOLD"
wfile a a9
VNEW=$(plane_version)
check "replay: then version $VNEW" wait_until 10 agent_at n1 "$VNEW"
check "replay: the plane has n1's ACK of $VNEW" wait_until 5 node_acked n1 "$VNEW"
before n1
R0=$(reason n1 rollback)
mode "$ATK" replay "$VOLD"
check "replay: the proxy sends push $VOLD again" wait_until 5 grep -q "replay: push $VOLD (nonce [^,]*, base [0-9]*) sent again" "$WORK/atk.log"
check "replay: n1 refuses it as a rollback" wait_until 10 reason_above n1 rollback "$R0"
check "replay: n1 logged why" grep -q "push $VOLD refused: rollback refused: version $VOLD is below the highest version verified ($VNEW)" "$WORK/n1.log"
check "replay: the plane records the refusal whatever the nonce" wait_until 10 vf_above n1 "$VF0"
check_eq "replay: of version $VOLD" "$VOLD" "$(node_field n1 .last_verify_failure.version)"
check_eq "replay: the old nonce is stale: last_nack unchanged" "$NACK0" "$(node_field n1 '.last_nack | tojson')"
check_eq "replay: the plane still has n1 at $VNEW" "$VNEW" "$(node_field n1 .acked_version)"
intact n1 replay
check_eq "replay: a.txt keeps a9" a9 "$(cat "$WORK/n1.out/a.txt")"
# the high-water mark survives a restart: it is kept with last-good
stop_pid "${APID[n1]}" TERM
ALOG=n1-restarted before n1
agent_args "$ATK" n1
ALOG=n1-restarted start_agent n1 "${AARGS[@]}"
check "replay: n1 restarted from last-good at $VNEW" wait_until 10 grep -q "node n1 at version $VNEW " "$WORK/n1-restarted.log"
check "replay: the restarted n1 is sent push $VOLD again" \
	wait_until 10 count_ge 2 "replay: push $VOLD (nonce [^,]*, base [0-9]*) sent again" "$WORK/atk.log"
check "replay: the restarted n1 refuses it as a rollback below $VNEW" wait_until 10 grep -q \
	"push $VOLD refused: rollback refused: version $VOLD is below the highest version verified ($VNEW)" "$WORK/n1-restarted.log"
check_eq "replay: its metrics say rollback, verified version $VNEW" "1 $VNEW" \
	"$(reason n1 rollback) $(am n1 tetherd_verified_version)"
check "replay: the plane records that refusal too" wait_until 10 vf_above n1 "$VF0"
ALOG=n1-restarted intact n1 "replay after a restart"
ALOG=n1-restarted converge n1 "$ATK" replay

# ---- an endless event -----------------------------------------------------------------
ALOG=n1-restarted before n1
mode "$ATK" endless
check "endless: the proxy starts an event without end" wait_until 5 grep -q "endless: an event without end starts" "$WORK/atk.log"
check "endless: n1 closes the stream at its cap (--max-push-bytes 1048576)" wait_until 10 grep -q \
	"stream: an event exceeds 1048576 bytes: closing" "$WORK/n1-restarted.log"
check "endless: the proxy sees n1 close it" wait_until 5 grep -q "endless: the client closed the stream" "$WORK/atk.log"
check "endless: n1 reconnects (and gets another endless event)" wait_until 10 count_ge 2 \
	"endless: an event without end starts" "$WORK/atk.log"
# no push was ever decoded: there is nothing to NACK, the plane records
# nothing; the agent only logs and reconnects
check_eq "endless: no NACK: the plane's verify failures stay at $VF0" "$VF0" "$(vf n1)"
check_eq "endless: and its last NACK is unchanged" "$NACK0" "$(node_field n1 '.last_nack | tojson')"
ALOG=n1-restarted intact n1 endless
check "endless: n1's memory stays bounded (VmRSS < 128 MiB)" \
	test "$(awk '/^VmRSS:/{print $2}' "/proc/${APID[n1]}/status")" -lt 131072
ALOG=n1-restarted converge n1 "$ATK" endless

# ---- an endless event, trickled: no complete event is no progress either -------------------
ALOG=n1-restarted before n1
mode "$ATK" endless slow
wfile a "trickled"
check "trickle: n1 gives up on an event that never completes" wait_until 15 grep -q \
	"stream: no complete event for .* reconnecting from version $(st n1 version)" "$WORK/n1-restarted.log"
# the plane's write that the trickle held back comes with the next stream
# (the proxy forwards the plane's first event before it trickles again)
check "trickle: the write it held back arrives once n1 reconnected" wait_until 15 \
	grep -qx trickled "$WORK/n1.out/a.txt"
check "trickle: nothing of the trickled event went live" \
	sh -c "! grep -rq xxxx '$WORK/n1.out' --exclude-dir=.tether-work && ! test -e '$WORK/n1.out/endless.txt'"
ALOG=n1-restarted converge n1 "$ATK" trickle

# ---- pushes withheld, heartbeats passed: behind, not fresh, asking again ---------------------
ALOG=n1-restarted before n1
mode "$ATK" withhold
wfile a "withheld"
check "withhold: the proxy swallows the push" wait_until 10 grep -q "withhold: push $(plane_version) swallowed" "$WORK/atk.log"
check "withhold: n1 asks again for the version the plane stands by" wait_until 20 grep -q \
	"the plane stands by version $(plane_version), no verified push of it came: asking again" "$WORK/n1-restarted.log"
check "withhold: heartbeats of a newer version do not keep n1 fresh: it turns stale" wait_until 20 state_is n1 "stale true"
ALOG=n1-restarted intact n1 withhold
ALOG=n1-restarted converge n1 "$ATK" withhold
check "withhold: fresh again once the push arrives" wait_until 10 state_is n1 "synced false"

# ---- refusals while an ACK is in flight: each one reaches the plane --------------------------
ALOG=n1-restarted before n1
VF0=$(vf n1)
U0=$(reason n1 unsigned)
curl -fsS -X POST --data 1000 "http://127.0.0.1:$ATK/__ack-delay" >/dev/null || bail "ack-delay refused"
mode "$ATK" fast-forward next
wfile a "forged-1"
wfile a "forged-2"
check "queued: n1 refuses both forged pushes" wait_until 15 reason_above n1 unsigned $((U0 + 1))
check "queued: the plane records both refusals, not only the last" wait_until 15 vf_above n1 $((VF0 + 1))
curl -fsS -X POST --data 0 "http://127.0.0.1:$ATK/__ack-delay" >/dev/null || bail "ack-delay refused"
ALOG=n1-restarted converge n1 "$ATK" queued

# ---- freeze (n2), the end ---------------------------------------------------------------
PV=$(plane_version)
check "freeze: n2 turns stale (status.json: state stale, .trust.stale true)" wait_until 15 state_is n2 "stale true"
check "freeze: n2's metrics count the expired statements it was fed" test "$(reason n2 expired)" -gt 0
check_eq "freeze: its metrics say stale" 1 "$(am n2 tetherd_stale)"
check "freeze: n2 logged it" grep -q "warn: trust: stale: .* serving version $N2_V as it is" "$WORK/n2.log"
check "freeze: the proxy swallowed the plane's new pushes to n2" grep -q "freeze: push $PV swallowed" "$WORK/frz.log"
check "freeze: the replayed heartbeats kept n2's stream alive (never silent)" sh -c "! grep -q 'stream: silent' '$WORK/n2.log'"
check_eq "freeze: n2 kept serving what it had (output, last-good, version)" "$N2_FP" "$(fp n2)"
check_eq "freeze: n2 applied nothing" "$N2_AP" "$(count "applied version" "$WORK/n2.log")"
check "freeze: n2 still runs" alive "${APID[n2]}"
# nothing reached n2 to NACK: the plane sees it behind its target
check_eq "freeze: the plane sees n2 connected but behind: acked $N2_V of target $PV" "true $N2_V $PV" \
	"$(node_field n2 '"\(.connected) \(.acked_version) \(.target_version)"')"
mode "$FRZ" pass
check "freeze: when the proxy passes again, n2 converges to $PV" wait_until 10 agent_at n2 "$PV"
check "freeze: and is fresh again" wait_until 5 state_is n2 "synced false"
check_eq "freeze: n2 serves the plane's content" "$(plane_contents)" "$(contents n2)"
check_eq "freeze: no NACK was due: the plane recorded no verification failure of n2" 0 "$(vf n2)"

done_testing
