#!/bin/bash
# t0520-key-rotation.sh: signing keys rotate without downtime. Agents trust
# the old and the new key; the plane switches keys on SIGHUP; agents keep
# applying and keep the new key's statement of what they run in last-good,
# so the old key can leave --trust, and an offline boot still verifies.
# A plane signing with a key nobody trusts is refused. A polling agent
# stays fresh on 304s and turns stale when the plane is gone.
. "$(dirname "$0")/lib.sh"

B=$TOP_BUILDDIR
"$CTL_BIN" keygen "$WORK/old" >/dev/null || bail "keygen failed"
"$CTL_BIN" keygen "$WORK/new" >/dev/null || bail "keygen failed"
"$CTL_BIN" keygen "$WORK/rogue" >/dev/null || bail "keygen failed"
OLD=$(awk '{print $3}' "$WORK/old.pub")
NEW=$(awk '{print $3}' "$WORK/new.pub")
check "keygen writes the secret key 0600" test "$(stat -c %a "$WORK/old")" = 600
check "keygen refuses to overwrite a key" bash -c "! '$CTL_BIN' keygen '$WORK/old' 2>/dev/null"
check "the two keys have different ids" test "$OLD" != "$NEW"
{ echo "# both while the plane switches"; cat "$WORK/old.pub" "$WORK/new.pub"; } >"$WORK/trust"
cp "$WORK/old" "$WORK/signing"
chmod 600 "$WORK/signing"

start_plane p --signing-key "$WORK/signing" --heartbeat 0.5
check "the plane signs with the old key" grep -q "signed with key $OLD" "$PLANE_LOG"
PORT=$PLANE_PORT   # restarts come back on it
start_agent n1 --trust "$WORK/trust"
start_agent n2 --trust "$WORK/trust" --transport poll --poll-wait 1 --max-staleness 4 --backoff-max 2
# n3 missed the first step of the rotation: it trusts the old key only
cp "$WORK/old.pub" "$WORK/trust3"
start_agent n3 --trust "$WORK/trust3"
put file/a '{"path":"a.txt","content":"one\n"}' >/dev/null
check "both agents apply the old key's version" wait_until 10 all_at 1 n1 n2
check_eq "n1 runs what the old key signed" "$OLD" "$(st n1 trust.key_id)"

# ---- the plane switches keys ---------------------------------------------------
cp "$WORK/new" "$WORK/signing"
kill -HUP "$PLANE_PID"
check "the plane signs with the new key after SIGHUP" wait_until 5 grep -q "signed with key $NEW" "$PLANE_LOG"
check "n1 keeps the new key's statement of its state" wait_until 10 grep -q "vouched for by key $NEW" "$WORK/n1.log"
check_eq "n1 says so" "$NEW" "$(st n1 trust.key_id)"
put file/a '{"path":"a.txt","content":"two\n"}' >/dev/null
check "both agents apply the new key's version" wait_until 10 all_at 2 n1 n2
check_eq "n1's output has it" "two" "$(cat "$WORK/n1.out/a.txt")"
check "n3, which does not trust the new key yet, refuses it" wait_until 10 grep -q "signed by an unknown key '$NEW'" "$WORK/n3.log"
check_eq "n3 stays at version 1" 1 "$(st n3 version)"
cat "$WORK/old.pub" "$WORK/new.pub" >"$WORK/trust3"
kill -HUP "${APID[n3]}"
check "n3, told to trust the new key, catches up without another write" wait_until 15 agent_at n3 2
check_eq "n3's output has it" "two" "$(cat "$WORK/n3.out/a.txt")"
stop_pid "${APID[n3]}"

# ---- the old key leaves trust ------------------------------------------------------
cp "$WORK/new.pub" "$WORK/trust"
kill -HUP "${APID[n1]}"
check "n1 reloads its trust" wait_until 5 grep -q "1 trusted keys loaded" "$WORK/n1.log"
put file/a '{"path":"a.txt","content":"three\n"}' >/dev/null
check "n1 keeps applying with the new key alone" wait_until 10 agent_at n1 3

# ---- an offline boot verifies last-good with the new key alone ------------------------
stop_pid "${APID[n1]}"
stop_pid "$PLANE_PID"
ALOG=n1-boot start_agent n1 --trust "$WORK/trust" --backoff-max 2
check "n1 boots from last-good with the plane down" wait_until 10 grep -q "loaded generation" "$WORK/n1-boot.log"
check_eq "it serves version 3" 3 "$(st n1 version)"
check "no generation was refused" bash -c "! grep -q refused '$WORK/n1-boot.log'"
check_eq "its output is intact" "three" "$(cat "$WORK/n1.out/a.txt")"

# ---- a polling agent goes stale when nothing vouches any more -------------------------------
check "the polling agent turns stale after --max-staleness without the plane" wait_until 15 bash -c \
	"[ \"\$(jq -r .state '$WORK/n2.state/status.json')\" = stale ]"
check_eq "it keeps serving" "three" "$(cat "$WORK/n2.out/a.txt")"
check "it says so in the log" grep -q "trust: stale" "$WORK/n2.log"

# ---- a plane signing with a key nobody trusts is refused ---------------------------------------
cp "$WORK/rogue" "$WORK/signing"
start_plane p2 --listen "127.0.0.1:$PORT" --data "$WORK/p.data" --signing-key "$WORK/signing" --heartbeat 0.5
put file/a '{"path":"a.txt","content":"rogue\n"}' >/dev/null
check "n1 refuses the unknown key's push" wait_until 10 grep -q "signed by an unknown key" "$WORK/n1-boot.log"
check_eq "n1 stays at version 3" 3 "$(st n1 version)"
check_eq "its output is untouched" "three" "$(cat "$WORK/n1.out/a.txt")"
check "the plane records the refusal" wait_until 10 bash -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/n1' | jq .verify_failures)\" -ge 1 ]"
check "the polling n2 refuses it too" wait_until 10 grep -q "signed by an unknown key" "$WORK/n2.log"

# ---- the freshness of a poll: the plane is back with the new key -------------------------------
stop_pid "$PLANE_PID"
cp "$WORK/new" "$WORK/signing"
start_plane p3 --listen "127.0.0.1:$PORT" --data "$WORK/p.data" --signing-key "$WORK/signing" --heartbeat 0.5
check "n2 is fresh again once 304s carry statements" wait_until 15 bash -c \
	"[ \"\$(jq -r .state '$WORK/n2.state/status.json')\" = synced ]"
# the same version 4 again, signed right: a poll refetches what it
# distrusted (its ETag names the content, not the signature)
check "n2 applies the newest version" wait_until 10 agent_at n2 4
check "n1 applies it too" wait_until 10 agent_at n1 4
check_eq "n1's output has it" "rogue" "$(cat "$WORK/n1.out/a.txt")"

done_testing
