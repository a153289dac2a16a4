#!/usr/bin/env bash
# t0235-agent-finish-apply.sh: an apply cut short is finished at boot, not
# undone (issue 21). tetherd is killed (SIGKILL) at every step of its apply
# pipeline -- inside a --check or --reload hook that blocks until the test
# kills it, or at a fault point of the test build tests/tools/tetherd-faults
# (agent/fault.h) -- and booted again, with the plane away or up, many
# times over. After each boot:
#  - what the consumer serves (the files consumer's output; nginx's answers
#    and marker in the second part) is exactly the version status.json
#    reports;
#  - with the plane away, that version is the one the apply was making live
#    when the candidate had gone live (swapped in, whole) and the version
#    before otherwise;
#  - the versions the consumer was reloaded to (a --reload hook logs each)
#    never go down: a backwards reload is counted, and the goal is 0;
#  - the plane never holds an ACK of a version the killed agent had not
#    committed.
# Also: a boot whose check refuses the live candidate again puts last-good
# back and reports the refusal (status.json, and a NACK when the plane
# pushes it again); a state directory without the record of the apply in
# flight (written by an agent from before it) or with a torn or damaged one
# boots last-good, as before; a kill during the finishing boot is finished
# by the next boot.
#
# T0235_RUNS (default 100) kills of the files agent, as many as fit in
# T0235_BUDGET seconds (default 60); T0235_NGINX_RUNS (default 36) kills of
# an nginx agent within T0235_NGINX_BUDGET seconds (default 30).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

FAULTD=$TOP_BUILDDIR/tests/tools/tetherd-faults
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
[ -x "$FAULTD" ] || bail "no $FAULTD: build first (make check builds it)"
trap t_cleanup EXIT

RUNS=${T0235_RUNS:-100}
BUDGET_S=${T0235_BUDGET:-60}
NGINX_RUNS=${T0235_NGINX_RUNS:-36}
NGINX_BUDGET_S=${T0235_NGINX_BUDGET:-30}
NFILES=8

# where the agent dies: in a blocking hook (check-hook, reload-hook) or at
# a fault point (apply.c, consumer/files.c), in the pipeline's order
STEPS=(staged check-hook checked prepared pending swapping swapped reload-hook reloaded confirmed probed
	committed applied)
# what an offline boot must then serve: the version before the apply, or
# the one it was making live (the candidate went live whole: finished)
declare -A EXPECT=([staged]=old [check-hook]=old [checked]=old [prepared]=old [pending]=old [swapping]=old
	[swapped]=new [reload-hook]=new [reloaded]=new [confirmed]=new [probed]=new [committed]=new
	[applied]=new)

# ---- the hooks -------------------------------------------------------------------
# --check: blocks (until released) while block-check exists; refuses while
# refuse exists. --reload: logs the version it reloads to, then blocks
# while block-reload exists; for nginx it then signals nginx.
cat >"$WORK/check.sh" <<'EOF'
W=@W@
if [ -e "$W/block-check" ]; then
	echo $$ >"$W/hook.pid"
	echo check >"$W/hook.at"
	i=0
	while [ ! -e "$W/release" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
	exit 1
fi
if [ -e "$W/refuse" ]; then
	echo "check: refused by the test" >&2
	exit 1
fi
exit 0
EOF
cat >"$WORK/reload.sh" <<'EOF'
W=@W@
echo "$TETHER_VERSION" >>"$W/$1.log"
if [ -e "$W/block-reload" ]; then
	echo $$ >"$W/hook.pid"
	echo reload >"$W/hook.at"
	i=0
	while [ ! -e "$W/release" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
	exit 1
fi
if [ "$1" = nreloads ]; then
	kill -HUP "$(cat "$W/nginx.pid")" || exit 1
fi
exit 0
EOF
sed -i "s|@W@|'$WORK'|" "$WORK/check.sh" "$WORK/reload.sh"
: >"$WORK/reloads.log"
: >"$WORK/nreloads.log"
: >"$WORK/treloads.log"

# ---- helpers of this test -------------------------------------------------------
now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# gone PID: the process has exited (a zombie counts)
gone() {
	[ ! -e "/proc/$1" ] || [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" = Z ]
}

# booted NAME PID: NAME's status.json was written by PID after its boot,
# with the plane away (offline, or degraded after a refusal)
booted() {
	[ "$(st "$1" pid)" = "$2" ] && case $(st "$1" state) in offline|degraded) true ;; *) false ;; esac
}

# synced NAME PID VERSION
synced() {
	[ "$(st "$1" pid)" = "$2" ] && [ "$(st "$1" state)" = synced ] && [ "$(st "$1" version)" = "$3" ]
}

# digest DIR: one hash over every entry but directories under DIR (the
# agent's work area left out): names, types, modes, sizes and contents
digest() {
	(
		cd "$1" || exit 1
		find . -path ./.tether-work -prune -o ! -type d -printf '%P %y %m %s\n' | sort
		find . -path ./.tether-work -prune -o -type f -print0 | sort -z | xargs -0 -r cat
	) | md5sum | cut -d' ' -f1
}

# tag K: the reference tree $WORK/ref.K and the batch $WORK/tag.K.json of
# content K: NFILES files, every one different from the other tags', and
# extra.conf for odd K only (a file added, then removed); sets DIGEST[K]
declare -A DIGEST
make_tag() {
	local k=$1 i up="" rm='"file/extra"'
	mkdir -p "$WORK/ref.$k"
	for i in $(seq 0 $((NFILES - 1))); do
		printf 'tag %s file %s\n' "$k" "$i" >"$WORK/ref.$k/f$i.conf"
		up="$up{\"name\":\"file/f$i\",\"body\":{\"path\":\"f$i.conf\",\"content\":\"tag $k file $i\\n\"}},"
	done
	if [ $((k % 2)) = 1 ]; then
		printf 'extra of tag %s\n' "$k" >"$WORK/ref.$k/extra.conf"
		up="$up{\"name\":\"file/extra\",\"body\":{\"path\":\"extra.conf\",\"content\":\"extra of tag $k\\n\"}},"
		rm=""
	fi
	echo "{\"upserts\":[${up%,}],\"removes\":[$rm]}" >"$WORK/tag.$k.json"
	DIGEST[$k]=$(digest "$WORK/ref.$k")
}

# batch K: the plane holds content K, one new version (PLANE_V); TAG[v] = K
declare -A TAG
NEXT_TAG=1
batch() {
	local k=$NEXT_TAG out
	NEXT_TAG=$((NEXT_TAG + 1))
	make_tag "$k"
	out=$(curl -sS -X POST --data-binary "@$WORK/tag.$k.json" "$PLANE_URL/v1/batch") || bail "batch $k: $out"
	PLANE_V=$(echo "$out" | jq -r .version)
	[ "$(echo "$out" | jq -r .changed)" = true ] || bail "batch $k changed nothing: $out"
	TAG[$PLANE_V]=$k
}

# serves_version V [NAME]: the files agent's (node's, or NAME's) output is
# exactly version V's
serves_version() {
	[ -n "${TAG[$1]:-}" ] && [ "$(digest "$WORK/${2:-node}.out")" = "${DIGEST[${TAG[$1]}]}" ]
}

# reload log NAME: the versions reloaded to never go down. Reads the lines
# added since the last call; counts BACKWARDS (and names the run).
declare -A RL_SEEN RL_LAST
BACKWARDS=0
check_reloads() {
	local log=$1 what=$2 n=0 v
	local seen=${RL_SEEN[$log]:-0} last=${RL_LAST[$log]:-0}
	while read -r v; do
		n=$((n + 1))
		[ "$n" -le "$seen" ] && continue
		if [ "$v" -lt "$last" ]; then
			BACKWARDS=$((BACKWARDS + 1))
			diag "$what: the consumer was reloaded backwards, from version $last to $v"
		fi
		last=$v
	done <"$WORK/$log.log"
	RL_SEEN[$log]=$n
	RL_LAST[$log]=$last
}

# release_hook: a blocked hook of a killed agent exits (nothing waits for it)
release_hook() {
	local hp
	touch "$WORK/release"
	hp=$(cat "$WORK/hook.pid" 2>/dev/null)
	[ -z "$hp" ] || wait_until 10 gone "$hp" || diag "the blocked hook $hp did not exit"
	rm -f "$WORK/release" "$WORK/hook.pid" "$WORK/hook.at" "$WORK/block-check" "$WORK/block-reload"
}

# kill_at NAME STEP ARGS...: starts the test build of tetherd as NAME with
# ARGS and has it die at STEP: in a blocking hook (killed there with
# kill -9) or at a fault point (it kills itself, and its trail of fault
# points ends with "kill STEP"). Returns 1 when it did not die there
# within 20 s. (Disowned: the shell reports no killed job.)
kill_at() {
	local name=$1 step=$2 fpid at=0
	shift 2
	rm -f "$WORK/hook.at" "$WORK/trail"
	case $step in
	check-hook) touch "$WORK/block-check" ;;
	reload-hook) touch "$WORK/block-reload" ;;
	esac
	case $step in
	*-hook) "$FAULTD" --node "$name" --state-dir "$WORK/$name.state" --output-dir "$WORK/$name.out" "$@" \
			>>"$WORK/$name-killed.log" 2>&1 & ;;
	*) TETHERD_FAULT=$step TETHERD_FAULT_LOG=$WORK/trail "$FAULTD" --node "$name" \
			--state-dir "$WORK/$name.state" --output-dir "$WORK/$name.out" "$@" >>"$WORK/$name-killed.log" 2>&1 & ;;
	esac
	fpid=$!
	disown "$fpid"
	track_pid "$fpid"
	case $step in
	*-hook)
		wait_until 20 test -s "$WORK/hook.at" && at=1
		kill -KILL "$fpid"
		wait_until 10 gone "$fpid"
		untrack_pid "$fpid"
		release_hook
		[ $at = 1 ] || return 1
		;;
	*)
		if ! wait_until 20 gone "$fpid"; then
			kill -KILL "$fpid"
			wait_until 10 gone "$fpid"
			untrack_pid "$fpid"
			return 1
		fi
		untrack_pid "$fpid"
		[ "$(tail -n 1 "$WORK/trail" 2>/dev/null)" = "kill $step" ] || {
			diag "it did not die at its fault point (its trail: $(xargs <"$WORK/trail" 2>/dev/null))"
			return 1
		}
		;;
	esac
	return 0
}

# boot_version PID NAME: the version the agent PID logged it booted at
boot_version() {
	sed -n "s/.*tetherd\[$1\] info: node $2 at version \([0-9]*\) .*/\1/p" "$WORK/$2-boot.log" | head -n 1
}

# ---- part 1: the files consumer ---------------------------------------------------------
start_plane p --heartbeat 1
FILES_ARGS=(--check "sh $WORK/check.sh" --reload "sh $WORK/reload.sh reloads" --backoff-min 0.05
	--backoff-max 0.2)
batch
"$AGENT_BIN" --node node --state-dir "$WORK/node.state" --output-dir "$WORK/node.out" --plane "$PLANE_URL" \
	"${FILES_ARGS[@]}" --once >>"$WORK/node-boot.log" 2>&1 || bail "the first apply failed"
serves_version "$PLANE_V" || bail "the first apply's output is not version $PLANE_V"
NODE_V=$PLANE_V

acked_is() { [ "$(node_field node '.acked_version // 0')" = "$1" ]; }
declare -A KILLS
bad=0 runs=0 up_boots=0 unacked=0 acked_early=0 not_reached=0 finished=0 kept_old=0
START=$(date +%s)
for run in $(seq 1 "$RUNS"); do
	if [ $(($(date +%s) - START)) -ge "$BUDGET_S" ]; then
		diag "time budget spent after $runs runs"
		break
	fi
	step=${STEPS[$(((run - 1) % ${#STEPS[@]}))]}
	if [ $((run % 2)) = 1 ]; then mode=away; else mode=up; fi
	old=$NODE_V
	batch
	target=$PLANE_V
	echo "--- run $run: $step, plane $mode, $old -> $target" >>"$WORK/node-boot.log"
	if ! kill_at node "$step" --plane "$PLANE_URL" "${FILES_ARGS[@]}"; then
		not_reached=$((not_reached + 1))
		not_ok "run $run: the agent applying $old -> $target dies at $step"
		diag "$(tail -n 5 "$WORK/node-killed.log")"
		[ $not_reached -ge 3 ] && break
		NODE_V=$(st node version)
		continue
	fi
	KILLS[$step]=$((${KILLS[$step]:-0} + 1))
	runs=$((runs + 1))
	# no ACK of what the killed agent had not committed
	case $step in
	committed|applied) ;;
	*) acked=$(node_field node '.acked_version // 0')
	   if [ "${acked:-0}" -ge "$target" ]; then
		acked_early=$((acked_early + 1))
		diag "run $run: the plane holds an ACK of $acked after a kill at $step, before the commit"
	   fi ;;
	esac
	if [ "${EXPECT[$step]}" = new ]; then want=$target; else want=$old; fi
	if [ $mode = away ]; then
		"$AGENT_BIN" --node node --state-dir "$WORK/node.state" --output-dir "$WORK/node.out" \
			--plane http://127.0.0.1:1 "${FILES_ARGS[@]}" --backoff-min 5 --backoff-max 5 \
			>>"$WORK/node-boot.log" 2>&1 &
		bpid=$!
		track_pid "$bpid"
		ok_boot=0
		wait_until 20 booted node "$bpid" && ok_boot=1
		v=$(st node version)
	else
		"$AGENT_BIN" --node node --state-dir "$WORK/node.state" --output-dir "$WORK/node.out" \
			--plane "$PLANE_URL" "${FILES_ARGS[@]}" >>"$WORK/node-boot.log" 2>&1 &
		bpid=$!
		track_pid "$bpid"
		ok_boot=0
		wait_until 20 synced node "$bpid" "$target" && ok_boot=1
		v=$(st node version)
		# the plane learns what the node runs: its ACK of the version
		# (a re-ACK when it finished the apply at boot, which ACKs nothing)
		if [ $ok_boot = 1 ]; then
			up_boots=$((up_boots + 1))
			wait_until 10 acked_is "$v" ||
				{ unacked=$((unacked + 1)); diag "run $run ($step): the plane holds no ACK of version $v"; }
		fi
	fi
	bv=$(boot_version "$bpid" node)
	if [ $ok_boot != 1 ] || ! serves_version "$v" || [ "$bv" != "$want" ]; then
		bad=$((bad + 1))
		not_ok "run $run: killed at $step ($old -> $target), booted with the plane $mode: at version $bv" \
			"(want $want), then serving exactly version $v"
		diag "status: $(jq -c '{version, state, last_error}' "$WORK/node.state/status.json" 2>/dev/null)"
		diag "output: $(digest "$WORK/node.out"); version $v's: ${DIGEST[${TAG[$v]:-0}]:-none}"
		diag "$(grep -A 12 -- "^--- run $run:" "$WORK/node-boot.log" | tail -n 12)"
	fi
	grep -q "tetherd\[$bpid\] info: boot: finished the apply of version $target:" "$WORK/node-boot.log" &&
		finished=$((finished + 1))
	[ "$bv" = "$old" ] && kept_old=$((kept_old + 1))
	stop_pid "$bpid" TERM
	check_reloads reloads "run $run ($step, plane $mode)"
	NODE_V=$v
	[ $bad -ge 3 ] && break
done
per_step=""
for step in "${STEPS[@]}"; do per_step="$per_step $step=${KILLS[$step]:-0}"; done
diag "files agent: $runs kills in $(($(date +%s) - START)) s:$per_step"
diag "boots: $finished finished the apply in flight, $kept_old kept the version before; \
$(wc -l <"$WORK/reloads.log") reloads logged, $BACKWARDS backwards"
check "at least ${#STEPS[@]} kills, one at each step ($runs)" test "$runs" -ge "${#STEPS[@]}"
check_eq "every kill happened at its step" 0 "$not_reached"
check_eq "after every boot the output is exactly the version status.json reports, the expected one" 0 "$bad"
check_eq "the consumer was never reloaded backwards" 0 "$BACKWARDS"
check_eq "the plane never held an ACK of a version the killed agent had not committed" 0 "$acked_early"
check_eq "after each boot with the plane up, the plane holds the node's ACK of the version it runs ($up_boots boots)" \
	0 "$unacked"
check "boots finished applies in flight ($finished), kept the version before when nothing went live ($kept_old)" \
	test "$finished" -ge 1 -a "$kept_old" -ge 1
check "no record of an apply in flight was ever found damaged" \
	sh -c "! grep -q 'apply in flight is damaged\|does not parse\|does not apply on' '$WORK/node-boot.log'"

# ---- the check refuses the live candidate at boot ------------------------------------------
old=$NODE_V
batch
target=$PLANE_V
kill_at node swapped --plane "$PLANE_URL" "${FILES_ARGS[@]}" || bail "no kill at swapped"
touch "$WORK/refuse"
echo "--- refused at boot: $old -> $target" >>"$WORK/node-boot.log"
"$AGENT_BIN" --node node --state-dir "$WORK/node.state" --output-dir "$WORK/node.out" \
	--plane http://127.0.0.1:1 "${FILES_ARGS[@]}" --backoff-min 5 --backoff-max 5 >>"$WORK/node-boot.log" 2>&1 &
bpid=$!
track_pid "$bpid"
check "a boot whose check refuses the live version $target comes up" wait_until 20 booted node "$bpid"
check_eq "it comes up at last-good's version $old" "$old" "$(st node version)"
check "its output is version $old's again" serves_version "$old"
check_eq "status.json says degraded" degraded "$(st node state)"
check "and why: version $target refused at boot, with the check's message" \
	sh -c "jq -r .last_error '$WORK/node.state/status.json' |
		grep -q 'version $target refused at boot: check command failed.*refused by the test'"
check_eq "it counts the refusal" 1 "$(st node pushes_rejected)"
check "its log says last-good comes back" \
	grep -q "boot: version $target refused: check command failed.*; last-good version $old comes back" \
	"$WORK/node-boot.log"
check_eq "the consumer was reloaded back to last-good's version (the one reload back, as before)" "$old" \
	"$(tail -n 1 "$WORK/reloads.log")"
stop_pid "$bpid" TERM
RL_SEEN[reloads]=$(wc -l <"$WORK/reloads.log")
RL_LAST[reloads]=$old
start_agent node --plane "$PLANE_URL" "${FILES_ARGS[@]}"
check "with the plane up, the version is pushed again and NACKed" wait_until 20 has_nack node "$target"
check_eq "the NACK says why" "check command failed" \
	"$(node_field node .last_nack.error | grep -o 'check command failed')"
check "the node serves version $old all along" serves_version "$old"
rm -f "$WORK/refuse"
batch
check "once the check accepts again the next version applies" wait_until 20 agent_at node "$PLANE_V"
check "and is served" serves_version "$PLANE_V"
stop_pid "$AGENT_PID" TERM
check_reloads reloads "after the refusal"
NODE_V=$PLANE_V

# ---- a state directory from before the change, or a damaged record --------------------------
# an agent from before wrote no record of the apply in flight: a kill after
# its swap boots last-good, as it did
for how in absent torn flipped; do
	old=$NODE_V
	batch
	target=$PLANE_V
	kill_at node reloaded --plane "$PLANE_URL" "${FILES_ARGS[@]}" || bail "no kill at reloaded"
	pf=$WORK/node.state/lastgood.pending
	size=$(stat -c %s "$pf")
	case $how in
	absent) rm -f "$pf" ;;
	torn) truncate -s $((size - 5)) "$pf" ;;
	flipped) printf '\377' | dd of="$pf" bs=1 seek=$((size / 2)) conv=notrunc status=none ;;
	esac
	echo "--- record $how: $old -> $target" >>"$WORK/node-boot.log"
	"$AGENT_BIN" --node node --state-dir "$WORK/node.state" --output-dir "$WORK/node.out" \
		--plane http://127.0.0.1:1 "${FILES_ARGS[@]}" --backoff-min 5 --backoff-max 5 \
		>>"$WORK/node-boot.log" 2>&1 &
	bpid=$!
	track_pid "$bpid"
	wait_until 20 booted node "$bpid"
	check_eq "record of the apply in flight $how: the boot serves last-good's version $old" "$old $old" \
		"$(st node version) $(boot_version "$bpid" node)"
	check "record $how: the output is exactly version $old's" serves_version "$old"
	stop_pid "$bpid" TERM
	RL_SEEN[reloads]=$(wc -l <"$WORK/reloads.log")
	RL_LAST[reloads]=$old
	NODE_V=$old
done
check "the torn and the damaged record were logged and ignored" \
	test "$(grep -c 'apply in flight is damaged.*ignored: last-good version' "$WORK/node-boot.log")" = 2

# ---- killed again while the boot finishes --------------------------------------------------
old=$NODE_V
batch
target=$PLANE_V
kill_at node swapped --plane "$PLANE_URL" "${FILES_ARGS[@]}" || bail "no kill at swapped"
kill_at node boot-checked --plane http://127.0.0.1:1 "${FILES_ARGS[@]}" ||
	not_ok "the boot finishing version $target dies at its fault point"
"$AGENT_BIN" --node node --state-dir "$WORK/node.state" --output-dir "$WORK/node.out" \
	--plane http://127.0.0.1:1 "${FILES_ARGS[@]}" --backoff-min 5 --backoff-max 5 >>"$WORK/node-boot.log" 2>&1 &
bpid=$!
track_pid "$bpid"
wait_until 20 booted node "$bpid"
check_eq "killed while finishing version $target at boot: the next boot finishes it" "$target" "$(st node version)"
check "and serves it" serves_version "$target"
stop_pid "$bpid" TERM
check_reloads reloads "finishing twice"
check_eq "still no backwards reload" 0 "$BACKWARDS"
stop_pid "$PLANE_PID" TERM

# ---- with --trust: the statement kept with the candidate verifies it -------------------------
"$CTL_BIN" keygen "$WORK/signing" >/dev/null || bail "keygen failed"
cp "$WORK/signing.pub" "$WORK/trust"
start_plane s --signing-key "$WORK/signing" --heartbeat 1
TAG=()
TRUST_ARGS=(--trust "$WORK/trust" --check "sh $WORK/check.sh" --reload "sh $WORK/reload.sh treloads"
	--backoff-min 0.05 --backoff-max 0.2)
batch
"$AGENT_BIN" --node tn --state-dir "$WORK/tn.state" --output-dir "$WORK/tn.out" --plane "$PLANE_URL" \
	"${TRUST_ARGS[@]}" --once >>"$WORK/tn-boot.log" 2>&1 || bail "the first apply with --trust failed"
old=$PLANE_V
batch
target=$PLANE_V
kill_at tn probed --plane "$PLANE_URL" "${TRUST_ARGS[@]}" || bail "no kill at probed with --trust"
"$AGENT_BIN" --node tn --state-dir "$WORK/tn.state" --output-dir "$WORK/tn.out" --plane http://127.0.0.1:1 \
	"${TRUST_ARGS[@]}" --backoff-min 5 --backoff-max 5 >>"$WORK/tn-boot.log" 2>&1 &
bpid=$!
track_pid "$bpid"
wait_until 20 booted tn "$bpid"
check_eq "with --trust, a kill after the probe: the boot finishes version $target (its statement verifies)" \
	"$target $target" "$(st tn version) $(st tn trust.verified_version)"
check "and serves it" serves_version "$target" tn
check "its log says so" grep -q "tetherd\[$bpid\] info: boot: finished the apply of version $target:" \
	"$WORK/tn-boot.log"
stop_pid "$bpid" TERM
start_agent tn --plane "$PLANE_URL" "${TRUST_ARGS[@]}"
batch
check "and it goes on applying signed versions from there (version $PLANE_V)" wait_until 20 agent_at tn "$PLANE_V"
check "served" serves_version "$PLANE_V" tn
stop_pid "$AGENT_PID" TERM
check_reloads treloads "with --trust"
check_eq "no backwards reload with --trust either" 0 "$BACKWARDS"
stop_pid "$PLANE_PID" TERM

# ---- part 2: nginx ---------------------------------------------------------------------------
if ! command -v nginx >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	diag "nginx or node is not installed: the nginx part is left out"
	done_testing
fi
start_tool ba backend.mjs 0 A
PA=$TOOL_PORT
start_tool bb backend.mjs 0 B
PB=$TOOL_PORT
free_port LMAIN
free_port MARK
OUT=$WORK/ng.out
start_plane q --heartbeat 1
write_nginx_conf "$OUT"
start_nginx
NG_ARGS=(--consumer nginx --marker "127.0.0.1:$MARK" --reload "sh $WORK/reload.sh nreloads" --reload-timeout 5
	--health "http://127.0.0.1:$LMAIN/health" --health-timeout 1 --health-retries 3 --backoff-min 0.05
	--backoff-max 0.2)
declare -A BACKEND   # version -> A or B
# nbatch: a new version whose route goes to the other backend than the
# node's version's (two backends: two generations, which versions share)
nbatch() {
	local to=a
	[ "${BACKEND[${NODE_V:-0}]:-B}" = A ] && to=b
	ctl apply - >/dev/null <<EOF || bail "cannot write the nginx configuration"
{"upserts":[
 {"name":"cluster/a","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":$PA}]}},
 {"name":"cluster/b","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":$PB}]}},
 {"name":"listener/main","body":{"address":"127.0.0.1","port":$LMAIN}},
 {"name":"route/root","body":{"listener":"main","host":"*","path":"/","cluster":"$to"}}
]}
EOF
	PLANE_V=$(plane_version)
	BACKEND[$PLANE_V]=$(echo "$to" | tr a-z A-Z)
}
# nginx_serves V: nginx answers with version V's backend, and its marker
# says the generation current points at
nginx_serves() {
	answers "${BACKEND[$1]} /x" "$LMAIN" /x && marker_is_current
}
NODE_V=0
nbatch
"$AGENT_BIN" --node ng --state-dir "$WORK/ng.state" --output-dir "$OUT" --plane "$PLANE_URL" "${NG_ARGS[@]}" \
	--once >>"$WORK/ng-boot.log" 2>&1 || bail "the nginx agent's first apply failed"
wait_until 10 nginx_serves "$PLANE_V" || bail "nginx does not serve version $PLANE_V"
NODE_V=$PLANE_V
BACKWARDS=0
NSTEPS=(staged checked pending swapped reload-hook reloaded confirmed probed committed)
declare -A NKILLS
nbad=0 nruns=0 nfinished=0 nnoreload=0
START=$(date +%s)
for run in $(seq 1 "$NGINX_RUNS"); do
	if [ $(($(date +%s) - START)) -ge "$NGINX_BUDGET_S" ]; then
		diag "nginx: time budget spent after $nruns runs"
		break
	fi
	step=${NSTEPS[$(((run - 1) % ${#NSTEPS[@]}))]}
	if [ $((run % 2)) = 1 ]; then mode=away; else mode=up; fi
	old=$NODE_V
	nbatch
	target=$PLANE_V
	echo "--- run $run: $step, plane $mode, $old -> $target" >>"$WORK/ng-boot.log"
	if ! kill_at ng "$step" --plane "$PLANE_URL" "${NG_ARGS[@]}"; then
		nbad=$((nbad + 1))
		not_ok "nginx run $run: the agent applying $old -> $target dies at $step"
		[ $nbad -ge 3 ] && break
		NODE_V=$(st ng version)
		continue
	fi
	NKILLS[$step]=$((${NKILLS[$step]:-0} + 1))
	nruns=$((nruns + 1))
	if [ "${EXPECT[$step]}" = new ]; then want=$target; else want=$old; fi
	hups0=$(hups)
	if [ $mode = away ]; then
		"$AGENT_BIN" --node ng --state-dir "$WORK/ng.state" --output-dir "$OUT" --plane http://127.0.0.1:1 \
			"${NG_ARGS[@]}" --backoff-min 5 --backoff-max 5 >>"$WORK/ng-boot.log" 2>&1 &
		bpid=$!
		track_pid "$bpid"
		ok_boot=0
		wait_until 20 booted ng "$bpid" && ok_boot=1
	else
		"$AGENT_BIN" --node ng --state-dir "$WORK/ng.state" --output-dir "$OUT" --plane "$PLANE_URL" \
			"${NG_ARGS[@]}" >>"$WORK/ng-boot.log" 2>&1 &
		bpid=$!
		track_pid "$bpid"
		ok_boot=0
		wait_until 20 synced ng "$bpid" "$target" && ok_boot=1
	fi
	v=$(st ng version)
	bv=$(boot_version "$bpid" ng)
	if [ $ok_boot != 1 ] || [ "$bv" != "$want" ] || ! wait_until 10 nginx_serves "$v"; then
		nbad=$((nbad + 1))
		not_ok "nginx run $run: killed at $step ($old -> $target), booted with the plane $mode: at version $bv" \
			"(want $want), then nginx serving version $v (${BACKEND[$v]:-?})"
		diag "nginx answers: $(get "$LMAIN" /x); marker $(marker), current $(current)"
		diag "$(grep -A 12 -- "^--- run $run:" "$WORK/ng-boot.log" | tail -n 12)"
	fi
	grep -q "tetherd\[$bpid\] info: boot: finished the apply of version $target:" "$WORK/ng-boot.log" &&
		nfinished=$((nfinished + 1))
	grep -q "tetherd\[$bpid\] info: boot: the consumer serves generation .* already: no reload" "$WORK/ng-boot.log" &&
		nnoreload=$((nnoreload + 1))
	stop_pid "$bpid" TERM
	check_reloads nreloads "nginx run $run ($step, plane $mode)"
	NODE_V=$v
	[ $nbad -ge 3 ] && break
done
per_step=""
for step in "${NSTEPS[@]}"; do per_step="$per_step $step=${NKILLS[$step]:-0}"; done
diag "nginx agent: $nruns kills in $(($(date +%s) - START)) s:$per_step"
diag "nginx boots: $nfinished finished the apply in flight ($nnoreload of them with nginx serving it already: \
no reload); $(wc -l <"$WORK/nreloads.log") reloads logged, $BACKWARDS backwards; nginx got $(hups) SIGHUPs"
check "nginx: at least ${#NSTEPS[@]} kills, one at each step ($nruns)" test "$nruns" -ge "${#NSTEPS[@]}"
check_eq "nginx: after every boot nginx serves exactly the version status.json reports, the expected one" 0 "$nbad"
check_eq "nginx was never reloaded backwards" 0 "$BACKWARDS"
check "nginx: boots finished applies in flight ($nfinished), some without a reload ($nnoreload)" \
	test "$nfinished" -ge 1 -a "$nnoreload" -ge 1
stop_nginx

done_testing
