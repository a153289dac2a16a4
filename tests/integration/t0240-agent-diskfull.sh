#!/usr/bin/env bash
# t0240-agent-diskfull.sh: a full disk is a NACK, not a torn node. With a
# small tmpfs as the agent's state directory (last-good cannot be persisted)
# and then as its output directory (the new files cannot be staged): the
# push too big for it is NACKed with the ENOSPC message, the old version
# and files stay, the agent keeps running, and a later push that fits
# applies. Needs root (mount); skipped otherwise.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
[ "$(id -u)" = 0 ] || skip_all "needs root to mount a tmpfs"
command -v mount >/dev/null 2>&1 && command -v umount >/dev/null 2>&1 || skip_all "no mount/umount"

# ---- helpers of this test ---------------------------------------------------

# small_fs DIR: mounts a 256 KiB tmpfs on DIR (skips the test when it cannot)
small_fs() {
	mkdir -p "$1"
	mount -t tmpfs -o size=256k,mode=0700 tether-t0240 "$1" 2>"$WORK/mount.err" ||
		skip_all "cannot mount a tmpfs: $(cat "$WORK/mount.err")"
	MOUNTS="$MOUNTS $1"
}

# (lib.sh's trap stops the processes, then unmounts MOUNTS)

# big_body PATH BYTES: a file resource body of BYTES random bytes in base64
# (incompressible enough that zlib cannot save it)
big_body() {
	printf '{"path":"%s","content":"%s"}' "$1" "$(head -c "$2" /dev/urandom | base64 -w0)" >"$WORK/big.json"
}

# both mounts first: a skip must come before any test point
small_fs "$WORK/ds1.state"
small_fs "$WORK/do1.out"
small_fs "$WORK/dr1.state"

# ---- the state directory on a small tmpfs ---------------------------------------------
start_plane p --heartbeat 1
put file/s1 '{"path":"s1.txt","content":"small\n"}' >/dev/null
put file/s2 '{"path":"conf/s2.conf","content":"also small\n","mode":"0600"}' >/dev/null
V1=$(plane_version)
# every reload leaves the version it made live in ds1.reloads
start_agent ds1 --backoff-min 0.1 --backoff-max 0.5 --reload "echo \$TETHER_VERSION >>'$WORK/ds1.reloads'"
check "an agent whose state directory is a 256k tmpfs syncs" wait_until 10 agent_at ds1 "$V1"
check "its reload hook ran for version $V1" wait_until 5 grep -qx "$V1" "$WORK/ds1.reloads"
S1=$(ident "$WORK/ds1.out/s1.txt")
big_body big.bin 300000
curl -sS -X PUT --data-binary "@$WORK/big.json" "$PLANE_URL/v1/resources/file/big" >/dev/null
V2=$(plane_version)
check_eq "the plane took the big change" $((V1 + 1)) "$V2"
check "the agent NACKs what it cannot persist" wait_until 15 has_nack ds1 "$V2"
err=$(node_field ds1 .last_nack.error)
diag "ds1's NACK: $err"
check "the NACK says No space left on device" grep -q "No space left on device" <<<"$err"
check_eq "the agent keeps its version" "$V1" "$(st ds1 version)"
check_eq "status.json says degraded" degraded "$(st ds1 state)"
check "status.json's last_error says No space left on device" grep -q "No space left on device" <<<"$(st ds1 last_error)"
# the last-good write is readied (its room reserved) before the swap: the
# big file never went live, not even while the agent retries the push
check_eq "the output is the old version's (the big file never went live)" "./conf/s2.conf ./s1.txt" "$(files_of "$WORK/ds1.out")"
check "the agent retried the push" wait_until 10 count_ge 2 "push $V2 failed on I/O" "$WORK/ds1.log"
check "the big file was never reloaded, through every retry" sh -c "! grep -qx '$V2' '$WORK/ds1.reloads'"
check_eq "and is still not there" "./conf/s2.conf ./s1.txt" "$(files_of "$WORK/ds1.out")"
check_eq "the old files are unchanged" "small" "$(cat "$WORK/ds1.out/s1.txt" 2>/dev/null)"
check_eq "and were not rewritten" "$S1" "$(ident "$WORK/ds1.out/s1.txt")"
check "the agent keeps running" kill -0 "${APID[ds1]}"
check "no temp file is left on the full state directory" sh -c "! ls -A '$WORK/ds1.state' | grep -q tmp"

# a later push that fits applies (the big one removed, a small change)
"$CTL_BIN" --plane "$PLANE_URL" rm file/big >/dev/null
put file/s1 '{"path":"s1.txt","content":"small v2\n"}' >/dev/null
V4=$(plane_version)
check "a later small push applies" wait_until 15 agent_at ds1 "$V4"
check_eq "with its content" "small v2" "$(cat "$WORK/ds1.out/s1.txt" 2>/dev/null)"
check_eq "the big file never appears" "./conf/s2.conf ./s1.txt" "$(files_of "$WORK/ds1.out")"
check "the agent says synced again" wait_until 5 sh -c "[ \"\$(jq -r .state '$WORK/ds1.state/status.json')\" = synced ]"
check "the plane has its ACK" wait_until 5 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/ds1' | jq -r .acked_version)\" = $V4 ]"
stop_pid "${APID[ds1]}" TERM
check_eq "it exits 0" 0 "$?"
# what it persisted after the failure loads
"$AGENT_BIN" --node ds1 --state-dir "$WORK/ds1.state" --output-dir "$WORK/ds1.out" --plane http://127.0.0.1:1 \
	--backoff-min 1 >>"$WORK/ds1-offline.log" 2>&1 &
OFF_PID=$!
track_pid "$OFF_PID"
check "restarted offline it boots from its last-good at $V4" \
	wait_until 10 sh -c "[ \"\$(jq -r .pid '$WORK/ds1.state/status.json')\" = $OFF_PID ] && [ \"\$(jq -r .version '$WORK/ds1.state/status.json')\" = $V4 ]"
stop_pid "$OFF_PID" TERM

# ---- the output directory on a small tmpfs ----------------------------------------------
V=$(plane_version)
start_agent do1 --backoff-min 0.1 --backoff-max 0.5
check "an agent whose output directory is a 256k tmpfs syncs" wait_until 10 agent_at do1 "$V"
used_before=$(df -k --output=used "$WORK/do1.out" | tail -n 1 | tr -d ' ')
S1=$(ident "$WORK/do1.out/s1.txt")
big_body big2.bin 225000
curl -sS -X PUT --data-binary "@$WORK/big.json" "$PLANE_URL/v1/resources/file/big2" >/dev/null
V5=$(plane_version)
check "the agent NACKs files it cannot write" wait_until 15 has_nack do1 "$V5"
err=$(node_field do1 .last_nack.error)
diag "do1's NACK: $err"
check "the NACK says No space left on device" grep -q "No space left on device" <<<"$err"
check_eq "the agent keeps its version" "$V" "$(st do1 version)"
check_eq "status.json says degraded" degraded "$(st do1 state)"
check_eq "the output holds exactly the old files" "./conf/s2.conf ./s1.txt" "$(files_of "$WORK/do1.out")"
check_eq "unchanged" "small v2" "$(cat "$WORK/do1.out/s1.txt" 2>/dev/null)"
check_eq "not rewritten" "$S1" "$(ident "$WORK/do1.out/s1.txt")"
check_eq "no temp file is left anywhere in the output" "" \
	"$(cd "$WORK/do1.out" && find . -name '.tether-tmp*' | xargs)"
check_eq "the staging area is empty again" "" "$(ls -A "$WORK/do1.out/.tether-work/staging" 2>/dev/null)"
used_after=$(df -k --output=used "$WORK/do1.out" | tail -n 1 | tr -d ' ')
check "the space is given back ($used_before KiB used before, $used_after after)" test "$used_after" -le $((used_before + 8))
check "the agent keeps running" kill -0 "${APID[do1]}"

"$CTL_BIN" --plane "$PLANE_URL" rm file/big2 >/dev/null
put file/s2 '{"path":"conf/s2.conf","content":"fits\n","mode":"0600"}' >/dev/null
V7=$(plane_version)
check "a later small push applies" wait_until 15 agent_at do1 "$V7"
check_eq "with its content" fits "$(cat "$WORK/do1.out/conf/s2.conf" 2>/dev/null)"
check_eq "and its mode" 600 "$(stat -c %a "$WORK/do1.out/conf/s2.conf" 2>/dev/null)"
check_eq "the big file never appears" "./conf/s2.conf ./s1.txt" "$(files_of "$WORK/do1.out")"
stop_pid "${APID[do1]}" TERM
check_eq "it exits 0" 0 "$?"

# ---- a failure of the disk, not of the push, is retried ------------------------
V=$(plane_version)
start_agent dr1 --backoff-min 0.1 --backoff-max 0.5
check "an agent on a third small tmpfs syncs" wait_until 10 agent_at dr1 "$V"
big_body big/retry.bin 300000
curl -sS -X PUT --data-binary @"$WORK/big.json" "$PLANE_URL/v1/resources/file/retry" >/dev/null
VR=$(plane_version)
check "it NACKs the push it cannot persist" wait_until 15 has_nack dr1 "$VR"
check_eq "and keeps its version" "$V" "$(st dr1 version)"
mount -o remount,size=8m "$WORK/dr1.state"
check "once the disk has room the same push is retried and applies, with no new write" \
	wait_until 20 agent_at dr1 "$VR"
check_eq "the plane's version did not move" "$VR" "$(plane_version)"
check "the log says it retried" grep -q "failed on I/O: retrying it" "$WORK/dr1.log"
check "the plane has its ACK" wait_until 5 sh -c "[ \"\$(curl -s '$PLANE_URL/v1/nodes/dr1' | jq -r .acked_version)\" = $VR ]"
stop_pid "${APID[dr1]}" TERM

check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
