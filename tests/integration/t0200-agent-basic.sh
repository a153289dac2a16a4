#!/usr/bin/env bash
# t0200-agent-basic.sh: real tetherd agents against the real plane: twenty
# nodes converge, changes and removals reach all of them (content and
# mode), an unchanged re-put rewrites nothing, --once, --check-config, the
# config file (-c, [agent]) under the command line, --transport poll,
# SIGHUP, SIGTERM, and the --check / --reload hooks with their environment.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# ---- helpers of this test ---------------------------------------------------

# acked_all VERSION NAME...: the plane records every one of them ACKed at
# VERSION with lag 0
acked_all() {
	local v=$1
	shift
	local names
	names=$(printf '%s\n' "$@" | jq -R . | jq -s -c .)
	curl -s "$PLANE_URL/v1/nodes" | jq -e --argjson names "$names" --argjson v "$v" '
		[.[] | select(.node as $n | $names | index($n)) | select(.acked_version == $v and .lag == 0)]
		| length == ($names | length)' >/dev/null
}

# ---- a plane with some configuration ------------------------------------------
# file/motd's x-note: a field this schema does not know, as a newer plane's would be (the plane takes
# it only with --allow-unknown-fields, a migration), for --strict to refuse below
start_plane p --heartbeat 1 --allow-unknown-fields

ctl apply - >/dev/null <<'EOF' || bail "cannot load the initial configuration"
{"upserts":[
 {"name":"cluster/web","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9001}]}},
 {"name":"listener/main","body":{"address":"127.0.0.1","port":8080}},
 {"name":"route/web","body":{"listener":"main","cluster":"web","host":"*","path":"/"}},
 {"name":"file/motd","body":{"path":"motd.txt","content":"hello, fleet\n","mode":"0644"}},
 {"name":"file/app","body":{"path":"conf/app.conf","content":"key = value\nsecret = 42\n","mode":"0600"}}
]}
EOF
V1=$(plane_version)
check_eq "the plane holds the initial configuration at version 1" 1 "$V1"

# ---- twenty agents converge ----------------------------------------------------
NODES=()
for i in $(seq -w 1 20); do
	NODES+=("n$i")
	start_agent "n$i" --backoff-max 1
done
if wait_until 20 all_at "$V1" "${NODES[@]}"; then
	ok "20 agents reach the plane's version $V1 (status.json)"
else
	not_ok "20 agents reach the plane's version $V1 (status.json)"
	for n in "${NODES[@]}"; do agent_at "$n" "$V1" || diag "$n: $(cat "$WORK/$n.state/status.json" 2>&1)"; done
fi
states=$(for n in "${NODES[@]}"; do st "$n" state; done | sort | uniq -c | awk '{print $2 "=" $1}' | xargs)
check_eq "every status.json says synced" "synced=20" "$states"
check "the plane sees all 20 ACKed at $V1 with lag 0" wait_until 10 acked_all "$V1" "${NODES[@]}"
table=$(ctl nodes)
check_eq "tetherctl nodes lists 20 nodes with lag 0" 20 \
	"$(echo "$table" | awk 'NR > 1 && $1 ~ /^n[0-9][0-9]$/ && $2 == '"$V1"' && $3 == '"$V1"' && $4 == 0 && $5 == "yes"' | wc -l)"
bad=""
for n in "${NODES[@]}"; do
	[ "$(cat "$WORK/$n.out/motd.txt" 2>/dev/null)" = "hello, fleet" ] || bad="$bad $n:motd"
	[ "$(cat "$WORK/$n.out/conf/app.conf" 2>/dev/null)" = "$(printf 'key = value\nsecret = 42')" ] || bad="$bad $n:app"
	[ "$(stat -c %a "$WORK/$n.out/motd.txt" 2>/dev/null)" = 644 ] || bad="$bad $n:motd-mode"
	[ "$(stat -c %a "$WORK/$n.out/conf/app.conf" 2>/dev/null)" = 600 ] || bad="$bad $n:app-mode"
done
check_eq "every output holds both files with their content and mode" "" "$bad"
extra=$(cd "$WORK/n01.out" && find . -path ./.tether-work -prune -o -type f -print | sort | xargs)
check_eq "only file resources become files" "./conf/app.conf ./motd.txt" "$extra"

# ---- a change reaches all 20 ------------------------------------------------------
ctl apply - >/dev/null <<'EOF'
{"upserts":[
 {"name":"file/motd","body":{"path":"motd.txt","content":"hello again\n","mode":"0640"}},
 {"name":"file/new","body":{"path":"sub/dir/new.sh","content":"#!/bin/sh\necho new\n","mode":"0755"}}
]}
EOF
V2=$(plane_version)
check_eq "the change is version 2" 2 "$V2"
check "all 20 agents apply version $V2" wait_until 15 all_at "$V2" "${NODES[@]}"
bad=""
for n in "${NODES[@]}"; do
	[ "$(cat "$WORK/$n.out/motd.txt" 2>/dev/null)" = "hello again" ] || bad="$bad $n:motd"
	[ "$(stat -c %a "$WORK/$n.out/motd.txt" 2>/dev/null)" = 640 ] || bad="$bad $n:motd-mode"
	[ "$(cat "$WORK/$n.out/sub/dir/new.sh" 2>/dev/null)" = "$(printf '#!/bin/sh\necho new')" ] || bad="$bad $n:new"
	[ "$(stat -c %a "$WORK/$n.out/sub/dir/new.sh" 2>/dev/null)" = 755 ] || bad="$bad $n:new-mode"
done
check_eq "the changed and the new file are right on every node (content and mode)" "" "$bad"
check "the plane sees all 20 ACKed at $V2" wait_until 10 acked_all "$V2" "${NODES[@]}"
check "the agent logged the change as a delta" grep -q "applied version $V2 (delta, 2 changes" "$WORK/n07.log"

# ---- a removal removes the file everywhere -----------------------------------------
ctl rm file/new >/dev/null
V3=$(plane_version)
check "all 20 agents apply the removal (version $V3)" wait_until 15 all_at "$V3" "${NODES[@]}"
left=$(for n in "${NODES[@]}"; do [ -e "$WORK/$n.out/sub/dir/new.sh" ] && echo "$n"; done | xargs)
check_eq "the removed file is gone on every node" "" "$left"
kept=$(for n in "${NODES[@]}"; do [ -f "$WORK/$n.out/motd.txt" ] || echo "$n"; done | xargs)
check_eq "the other files stay" "" "$kept"

# ---- identical content rewrites nothing --------------------------------------------------
declare -A BEFORE
for n in "${NODES[@]}"; do BEFORE[$n]=$(ident "$WORK/$n.out/motd.txt"); done
out=$(put file/motd '{"mode":"0640","content":"hello again\n","path":"motd.txt"}')
check_eq "re-putting the same body (other key order) makes no version" "$V3 false" \
	"$(echo "$out" | json '"\(.version) \(.changed)"')"
# a body that changes only an unknown field: a new version whose file is the same
out=$(put file/motd '{"mode":"0640","content":"hello again\n","path":"motd.txt","x-note":"same file"}')
V4=$(echo "$out" | json .version)
check_eq "a body with a new unknown field is a new version" "$((V3 + 1)) true" "$V4 $(echo "$out" | json .changed)"
# a barrier: one more real change, so every agent has seen everything before
put file/barrier '{"path":"barrier.txt","content":"b\n"}' >/dev/null
V5=$(plane_version)
check "all 20 agents apply versions $V4 and $V5" wait_until 15 all_at "$V5" "${NODES[@]}"
moved=""
for n in "${NODES[@]}"; do
	[ "$(ident "$WORK/$n.out/motd.txt")" = "${BEFORE[$n]}" ] || moved="$moved $n"
done
check_eq "motd.txt was not rewritten on any node (inode and mtime unchanged)" "" "$moved"
check_eq "no version was made for the unchanged re-put (versions 4 and 5 only)" "5" "$V5"
check "the agent counted the unknown-field version as applied, with one change" \
	grep -q "applied version $V4 (delta, 1 changes" "$WORK/n01.log"

# ---- SIGTERM: a clean, quick exit --------------------------------------------------------
t0=$(date +%s%N)
stop_pid "${APID[n20]}" TERM
rc=$?
t1=$(date +%s%N)
check_eq "SIGTERM: the agent exits 0" 0 "$rc"
check "SIGTERM: the agent exits within 2 s (took $(((t1 - t0) / 1000000)) ms)" test $(((t1 - t0) / 1000000)) -lt 2000
check "SIGTERM: the agent logged its stop" grep -q "stopping at version $V5" "$WORK/n20.log"
check_eq "SIGTERM: the output stays" "hello again" "$(cat "$WORK/n20.out/motd.txt")"

# ---- --once -------------------------------------------------------------------------
"$AGENT_BIN" --once --plane "$PLANE_URL" --node once1 --state-dir "$WORK/once1.state" \
	--output-dir "$WORK/once1.out" >>"$WORK/once1.log" 2>&1
check_eq "--once against the plane exits 0" 0 "$?"
check_eq "--once wrote the files" "hello again" "$(cat "$WORK/once1.out/motd.txt" 2>/dev/null)"
check_eq "--once wrote the mode" 640 "$(stat -c %a "$WORK/once1.out/motd.txt" 2>/dev/null)"
check_eq "--once left status.json at the plane's version" "$V5" "$(st once1 version)"
check "--once ACKed its version" wait_until 5 acked_all "$V5" once1
"$AGENT_BIN" --once --plane "$PLANE_URL" --node once1 --state-dir "$WORK/once1.state" \
	--output-dir "$WORK/once1.out" >>"$WORK/once1.log" 2>&1
check_eq "a second --once, already up to date, exits 0" 0 "$?"
"$AGENT_BIN" --once --strict --plane "$PLANE_URL" --node once3 --state-dir "$WORK/once3.state" \
	--output-dir "$WORK/once3.out" >>"$WORK/once3.log" 2>&1
check_eq "--once --strict against a body with an unknown field (file/motd's x-note) exits 1" 1 "$?"
check "--once --strict wrote nothing" test ! -e "$WORK/once3.out/motd.txt"
check "--once --strict NACKed it" wait_until 5 sh -c "curl -s '$PLANE_URL/v1/nodes/once3' | jq -e '.last_nack.error | test(\"x-note\")'"
t0=$(date +%s%N)
timeout 30 "$AGENT_BIN" --once --plane http://127.0.0.1:1 --node once2 --state-dir "$WORK/once2.state" \
	--output-dir "$WORK/once2.out" --backoff-max 0.5 >>"$WORK/once2.log" 2>&1
rc=$?
t1=$(date +%s%N)
check "--once against an unreachable plane exits non-zero (rc $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "--once against an unreachable plane gives up within 15 s" test $(((t1 - t0) / 1000000)) -lt 15000
check "--once said why" grep -q "cannot sync" "$WORK/once2.log"

# ---- --check-config and bad option values -----------------------------------------------
out=$("$AGENT_BIN" --check-config --plane "$PLANE_URL" --node cc --state-dir "$WORK/cc.state" \
	--output-dir "$WORK/cc.out" 2>&1)
rc=$?
check_eq "--check-config exits 0" 0 "$rc"
check_eq "--check-config prints 'configuration OK'" "configuration OK" "$out"
for bad in "--transport carrier-pigeon" "--stream-timeout soon" "--stream-timeout 0" "--backoff-min 5 --backoff-max 1" \
	"--plane ftp://x" "--node bad/name" "--labels =x" "--no-such-option"; do
	# shellcheck disable=SC2086
	"$AGENT_BIN" --check-config --plane "$PLANE_URL" --node cc --state-dir "$WORK/cc.state" \
		--output-dir "$WORK/cc.out" $bad >"$WORK/cc.out.txt" 2>"$WORK/cc.err.txt"
	rc=$?
	check_eq "--check-config $bad exits 2" 2 "$rc"
	check "--check-config $bad explains itself on stderr" test -s "$WORK/cc.err.txt"
done
check "--check-config touched no state directory" test ! -e "$WORK/cc.state"
# no plane named anywhere: nothing to dial, so not configured (the unit's
# ExecCondition skips the start on this)
printf '[agent]\n; plane = https://plane.example:7070\nnode = cc\n' >"$WORK/noplane.conf"
"$AGENT_BIN" -c "$WORK/noplane.conf" --check-config >"$WORK/np.out" 2>"$WORK/np.err"
check_eq "--check-config with no plane exits 2" 2 "$?"
check "... and says the plane is not set" grep -q "plane: not set" "$WORK/np.err"

# ---- a config file ([agent]); the command line wins --------------------------------------
cat >"$WORK/cf.conf" <<EOF
; written by $T_NAME
[agent]
plane = $PLANE_URL
node = cfnode
state_dir = $WORK/cf.state
output_dir = $WORK/cf.out
labels = origin=file,tier=web
backoff_max = 1
log_level = info
EOF
out=$("$AGENT_BIN" -c "$WORK/cf.conf" --check-config 2>&1)
check_eq "--check-config -c FILE: configuration OK" "configuration OK" "$out"
printf '[agent]\ntransport = pigeon\n' >"$WORK/bad.conf"
"$AGENT_BIN" -c "$WORK/bad.conf" --check-config >/dev/null 2>&1
check_eq "--check-config with a bad value in the file exits 2" 2 "$?"
printf '[agent]\nno_such_key = 1\n' >"$WORK/bad2.conf"
"$AGENT_BIN" -c "$WORK/bad2.conf" --check-config >/dev/null 2>&1
check_eq "--check-config with an unknown key in the file exits 2" 2 "$?"

"$AGENT_BIN" -c "$WORK/cf.conf" --labels origin=cli >>"$WORK/cf.log" 2>&1 &
CF_PID=$!
track_pid "$CF_PID"
check "the agent configured by file syncs (state_dir and output_dir from the file)" \
	wait_until 10 agent_at cf "$V5"
check_eq "its node id comes from the file" cfnode "$(st cf node)"
check_eq "its files are in the file's output_dir" "hello again" "$(cat "$WORK/cf.out/motd.txt" 2>/dev/null)"
check "the plane knows it with the command line's labels (the command line wins)" \
	wait_until 5 sh -c "curl -s '$PLANE_URL/v1/nodes/cfnode' | jq -e '.labels == {\"origin\":\"cli\"}'"

# ---- SIGHUP re-reads the config file ------------------------------------------------------
cat >"$WORK/hup.conf" <<EOF
[agent]
plane = $PLANE_URL
labels = gen=one
backoff_max = 1
EOF
start_agent hup1 -c "$WORK/hup.conf"
HUP_PID=$AGENT_PID
check "the agent with labels from its file syncs" wait_until 10 agent_at hup1 "$V5"
check "the plane shows its labels gen=one" \
	wait_until 5 sh -c "curl -s '$PLANE_URL/v1/nodes/hup1' | jq -e '.labels.gen == \"one\"'"
sed -i 's/gen=one/gen=two,zone=b/' "$WORK/hup.conf"
kill -HUP "$HUP_PID"
check "after SIGHUP the agent logs the reload" wait_until 5 grep -q "SIGHUP: configuration reloaded" "$WORK/hup1.log"
check "after SIGHUP the plane shows the new labels" \
	wait_until 10 sh -c "curl -s '$PLANE_URL/v1/nodes/hup1' | jq -e '.labels == {\"gen\":\"two\",\"zone\":\"b\"}'"
check "tetherctl nodes shows the new labels" wait_until 5 sh -c "'$CTL_BIN' --plane '$PLANE_URL' nodes | grep '^hup1 ' | grep -q 'gen=two'"
printf '[agent]\ntransport = pigeon\n' >"$WORK/hup.conf"
kill -HUP "$HUP_PID"
check "a SIGHUP with a bad file keeps the running configuration" \
	wait_until 5 grep -q "SIGHUP: .*keeping the running configuration" "$WORK/hup1.log"
check "the agent still runs" kill -0 "$HUP_PID"
put file/after-hup '{"path":"after-hup.txt","content":"x\n"}' >/dev/null
V6=$(plane_version)
check "and still applies changes" wait_until 10 agent_at hup1 "$V6"

# ---- --transport poll ------------------------------------------------------------------
start_agent poll1 --transport poll --poll-wait 2 --backoff-max 1
check "a polling agent converges" wait_until 10 agent_at poll1 "$V6"
check_eq "its files are there" "hello again" "$(cat "$WORK/poll1.out/motd.txt" 2>/dev/null)"
check "the plane records it as a poll node" \
	wait_until 5 sh -c "curl -s '$PLANE_URL/v1/nodes/poll1' | jq -e '.transport == \"poll\" and .lag == 0'"
put file/motd '{"path":"motd.txt","content":"polled\n","mode":"0644"}' >/dev/null
V7=$(plane_version)
check "a polling agent gets a new change (long poll)" wait_until 10 agent_at poll1 "$V7"
check_eq "with its content" polled "$(cat "$WORK/poll1.out/motd.txt" 2>/dev/null)"
check "and ACKs it" wait_until 5 acked_all "$V7" poll1
check_eq "a polling agent says synced" synced "$(st poll1 state)"

# ---- --check and --reload: environment and order ----------------------------------------
REC=$WORK/hooks
mkdir -p "$REC"
cat >"$WORK/check.sh" <<EOF
{
echo "check staging=\$TETHER_STAGING output=\$TETHER_OUTPUT version=\$TETHER_VERSION"
echo "check staged=\$(cat "\$TETHER_STAGING/hook.txt" 2>/dev/null)"
echo "check live=\$(cat "\$TETHER_OUTPUT/hook.txt" 2>/dev/null)"
} >>"$REC/log"
EOF
cat >"$WORK/reload.sh" <<EOF
{
echo "reload staging=\$TETHER_STAGING output=\$TETHER_OUTPUT version=\$TETHER_VERSION"
echo "reload live=\$(cat "\$TETHER_OUTPUT/hook.txt" 2>/dev/null)"
} >>"$REC/log"
EOF
put file/hook '{"path":"hook.txt","content":"first\n"}' >/dev/null
V8=$(plane_version)
start_agent hook1 --check "sh $WORK/check.sh" --reload "sh $WORK/reload.sh"
check "the agent with hooks syncs" wait_until 10 agent_at hook1 "$V8"
: >"$REC/log"
put file/hook '{"path":"hook.txt","content":"second\n"}' >/dev/null
V9=$(plane_version)
check "the agent with hooks applies version $V9" wait_until 10 agent_at hook1 "$V9"
check "the reload hook ran" wait_until 5 grep -q '^reload ' "$REC/log"
log=$(cat "$REC/log")
check_eq "the check saw TETHER_STAGING, TETHER_OUTPUT and TETHER_VERSION" \
	"check staging=$WORK/hook1.out/.tether-work/staging output=$WORK/hook1.out version=$V9" \
	"$(echo "$log" | grep '^check staging=')"
check_eq "the check saw the new file in TETHER_STAGING" "check staged=second" "$(echo "$log" | grep '^check staged=')"
check_eq "the check ran before the swap (the old file was live)" "check live=first" "$(echo "$log" | grep '^check live=')"
check_eq "the reload saw TETHER_OUTPUT and TETHER_VERSION" "output=$WORK/hook1.out version=$V9" \
	"$(echo "$log" | grep '^reload staging=' | sed 's/.* output=/output=/')"
check_eq "the reload ran after the swap (the new file was live)" "reload live=second" "$(echo "$log" | grep '^reload live=')"
check_eq "check first, then reload" "check check check reload reload" "$(echo "$log" | awk '{print $1}' | xargs)"

# ---- the rest stop cleanly ------------------------------------------------------------------
rcs=""
for n in "${NODES[@]}"; do
	[ "$n" = n20 ] && continue
	stop_pid "${APID[$n]}" TERM || rcs="$rcs $n"
done
for p in "$CF_PID" "${APID[hup1]}" "${APID[poll1]}" "${APID[hook1]}"; do
	stop_pid "$p" TERM || rcs="$rcs pid$p"
done
check_eq "every agent exits 0 on SIGTERM" "" "$rcs"
check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
