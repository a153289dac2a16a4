#!/usr/bin/env bash
# bench/nemesis.sh: a randomized fault run with a history checker, in the
# style of etcd's robustness tests and Jepsen (issue 10 section 6; the
# partitions: issue 22).
#
#   bench/nemesis.sh SRCDIR BUILDDIR [SECONDS]     (default 120)
#
# Sets up a three-member etcd cluster on loopback (tests/integration/
# lib-etcd.sh), three tether-plane replicas on it (r1 reaches every etcd
# member through tests/tools/blackhole-proxy.mjs, r2 through an alias
# address nftables can cut, r3 directly), a relay q1 following r3, then r2
# (through an alias of each), and seven tetherd agents (files consumer):
# n1-n5 list the three replicas in different orders (n1 through aliases of
# its own; n3 polls, n4 and n5 subscribe to part of the names; n4's output
# and n5's state directory are small tmpfs mounts when run as root), n6 and
# n7 list q1 first, then r3 or r2 (n7 subscribes to part). For SECONDS,
# tests/tools/nemesis-load.py writes at random (PUTs, batches, DELETEs,
# each body naming its request) through random replicas, while faults
# come one after another at random: kill -9 and restart of a replica, an
# etcd member (now and then two: quorum lost for a moment) or an agent;
# a black hole between r1 and etcd (the live connections go silent, then
# every new request is answered with headers and nothing more) on one or
# all of its endpoints; a full disk under n4's output or n5's state; and,
# a third of them, partitions (tests/integration/lib-partition.sh; root
# and nftables, else the run goes on without them and says so): r2 cut
# off from etcd, q1 from the upstream it follows or from both, n1 from
# the replica it is on; both ways or one (only the dialer's packets
# dropped, or only the answers), established connections included. A
# partition is healed after 1-8 s, or once the process it cuts off says
# so (the plane logs "stale:", n1 moves) and 0-3 s more (15 s at most).
# Then everything is healed and every node, replica and the relay must
# converge within 30 s.
#
# Records (under BUILDDIR/nemesis/tether-nemesis.XXXXXX, kept): every
# write's answer (writes.jsonl), what each agent made live at each version,
# with content (records/NODE.applied: tetherd's --reload hook lists the
# output after every swap, with TETHER_VERSION), the agents' logs per
# incarnation and the planes each lists (agents/NODE.planes), the faults
# (faults.log), the planes' settings (params.txt), etcd's whole event
# history of the prefix from revision 1 (history.jsonl; nothing is
# compacted during the run), the replicas' and the relay's final state
# and logs. tests/tools/nemesis-check.py checks them, among others that no
# node with a healthy path (its agent running, no full disk under it,
# etcd's quorum, one plane it lists up and reachable) went longer without a
# write than the bound: lease TTL + 3 heartbeats + the agents'
# --backoff-max = 15 s, plus tetherd's back-off of moves off stale planes
# when it made one.
#
# Prints key=value results, then TAP lines (ok/not ok, one per check) and
# the plan; exits non-zero on any violation. Results also in
# BUILDDIR/bench-nemesis.txt. Knobs: NEMESIS_SEED (the faults' and the
# load's random seed), NEMESIS_CONVERGE (30 s).
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u

SRCDIR=$(cd "${1:?usage: nemesis.sh SRCDIR BUILDDIR [SECONDS]}" && pwd)
BUILDDIR=$(cd "${2:?usage: nemesis.sh SRCDIR BUILDDIR [SECONDS]}" && pwd)
DURATION=${3:-120}
CONVERGE=${NEMESIS_CONVERGE:-30}
SEED=${NEMESIS_SEED:-$(( $(date +%s) % 100000 ))}
RESULTS=$BUILDDIR/bench-nemesis.txt

# the integration harness (process tracking, waits, TAP) and its etcd
# cluster; the work directory under the build directory, always kept
export TOP_SRCDIR=$SRCDIR TOP_BUILDDIR=$BUILDDIR
mkdir -p "$BUILDDIR/nemesis"
export TMPDIR=$BUILDDIR/nemesis
KEEP_WORK=1
. "$SRCDIR/tests/integration/lib.sh"
. "$SRCDIR/tests/integration/lib-etcd.sh"
. "$SRCDIR/tests/integration/lib-partition.sh"
ln -sfn "$WORK" "$BUILDDIR/nemesis/last"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
need_cmd jq curl node python3 etcdctl
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
RANDOM=$SEED

say() {
	echo "# nemesis: $*"
}

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# rand LO HI: an integer in LO..HI
rand() {
	echo $(($1 + RANDOM % ($2 - $1 + 1)))
}

# pause_ms LO HI: sleeps LO..HI ms
pause_ms() {
	local ms
	ms=$(rand "$1" "$2")
	sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
}

fault() {
	echo "$(now_ms) $*" >>"$WORK/faults.log"
	say "$*"
}

declare -A FAULTS
count_fault() {
	FAULTS[$1]=$((${FAULTS[$1]:-0} + 1))
}

mkdir -p "$WORK/records" "$WORK/agents" "$WORK/final"
# a checker that cannot fail is no checker: doctored histories first
python3 "$TOOLS/nemesis-check.py" --self-test >"$WORK/selftest.out" 2>&1
SELFTEST_RC=$?
: >"$WORK/faults.log"

# ---- mounts (the full-disk faults; root only; lib.sh's trap stops the
# processes, then unmounts MOUNTS) ------------------------------------------------------
small_fs() {
	mkdir -p "$1"
	[ "$(id -u)" = 0 ] || return 1
	mount -t tmpfs -o size=1m,mode=0755 tether-nemesis "$1" 2>>"$WORK/mount.err" || return 1
	MOUNTS="$MOUNTS $1"
}

# ---- partitions (root and nftables; lib.sh's trap removes the table) -----------------------
# Without them the run goes on with the other faults and says so.
if part_try_init; then
	PARTS=1
else
	PARTS=0
	PARTS_WHY=$PART_WHY
	say "no partitions: $PARTS_WHY"
fi
ALIASES=""
# alias_of VAR PORT...: an alias the nemesis can cut (127.0.0.1 without partitions)
alias_of() {
	local var=$1
	shift
	if [ "$PARTS" = 1 ]; then
		part_alias "$var" "$@"
		while [[ " $ALIASES " == *" ${!var} "* ]]; do
			part_alias "$var" "$@"   # drawn twice: another
		done
		ALIASES="$ALIASES ${!var}"
	else
		printf -v "$var" 127.0.0.1
	fi
}

# ---- etcd and the proxies between r1 and etcd ------------------------------------------
etcd_cluster_start 3
declare -a PPORT PPID_
for i in 1 2 3; do
	free_port "PPORT[$i]"
done

# proxy_start I MODE: the proxy to member I on its fixed port, forwarding
# (forward) or answering every request with headers and then silence (dark)
proxy_start() {
	local i=$1 mode=$2 args
	if [ "$mode" = dark ]; then
		args=(--mode swallow-after-headers --match "" --nth "$(seq -s, 1 10000)")
	else
		args=(--mode forward)
	fi
	node "$TOOLS/blackhole-proxy.mjs" --target "127.0.0.1:${ETCD_CLIENT[$i]}" --listen "127.0.0.1:${PPORT[$i]}" \
		"${args[@]}" >"$WORK/proxy-$i.port" 2>>"$WORK/proxy-$i.log" &
	PPID_[$i]=$!
	track_pid "${PPID_[$i]}"
	wait_until 10 grep -q '^listening ' "$WORK/proxy-$i.port" || bail "proxy $i ($mode) did not start"
	PMODE[$i]=$mode
}

proxy_stop() {
	local i=$1
	kill -TERM "${PPID_[$i]}" 2>/dev/null
	wait "${PPID_[$i]}" 2>/dev/null
	untrack_pid "${PPID_[$i]}"
}
declare -a PMODE
for i in 1 2 3; do
	proxy_start "$i" forward
done

# ---- replicas ----------------------------------------------------------------------------
declare -a RPORT RPID RURL RETCD
for r in 1 2 3; do
	free_port "RPORT[$r]"
	RURL[$r]=http://127.0.0.1:${RPORT[$r]}
done
# r2 dials etcd through an alias (partition r2-etcd); the relay q1 each of
# its upstreams (q1-r3, q1-r2); n1 each replica (n1-r1, n1-r2, n1-r3)
alias_of R2_ETCD "${ETCD_CLIENT[1]}" "${ETCD_CLIENT[2]}" "${ETCD_CLIENT[3]}"
declare -A ALIAS
ALIAS[r2-etcd]=$R2_ETCD
for r in 3 2; do
	alias_of "A_Q1_R$r" "${RPORT[$r]}"
	av=A_Q1_R$r
	ALIAS[q1-r$r]=${!av}
done
for r in 1 2 3; do
	alias_of "A_N1_R$r" "${RPORT[$r]}"
	av=A_N1_R$r
	ALIAS[n1-r$r]=${!av}
done
RETCD[1]="http://127.0.0.1:${PPORT[1]},http://127.0.0.1:${PPORT[2]},http://127.0.0.1:${PPORT[3]}"
RETCD[2]="http://$R2_ETCD:${ETCD_CLIENT[2]},http://$R2_ETCD:${ETCD_CLIENT[3]},http://$R2_ETCD:${ETCD_CLIENT[1]}"
RETCD[3]="http://127.0.0.1:${ETCD_CLIENT[3]},http://127.0.0.1:${ETCD_CLIENT[1]},http://127.0.0.1:${ETCD_CLIENT[2]}"

replica_up() {
	curl -fsS -m 1 "${RURL[$1]}/healthz" >/dev/null 2>&1
}

# replica_start R: starts replica R on its port; 1 when it is not healthy in 15 s
replica_start() {
	local r=$1
	"$PLANE_BIN" --listen "127.0.0.1:${RPORT[$r]}" --data "$WORK/r$r.data" --store etcd --etcd "${RETCD[$r]}" \
		--insecure --heartbeat 1 >>"$WORK/r$r.log" 2>&1 &
	RPID[$r]=$!
	track_pid "${RPID[$r]}"
	wait_until 15 replica_up "$r"
}

replica_alive() {
	[ -n "${RPID[$1]:-}" ] && kill -0 "${RPID[$1]}" 2>/dev/null
}

for r in 1 2 3; do
	replica_start "$r" || bail "replica r$r did not start (see $WORK/r$r.log)"
done
REPLICAS="${RURL[1]},${RURL[2]},${RURL[3]}"

# ---- the relay q1: follows r3, then r2 -------------------------------------------------------
free_port QPORT
QURL=http://127.0.0.1:$QPORT
QUPS="http://${ALIAS[q1-r3]}:${RPORT[3]},http://${ALIAS[q1-r2]}:${RPORT[2]}"
relay_start() {
	"$PLANE_BIN" --listen "127.0.0.1:$QPORT" --data "$WORK/q1.data" --upstream "$QUPS" --relay-id q1 \
		--insecure --heartbeat 1 >>"$WORK/q1.log" 2>&1 &
	QPID=$!
	track_pid "$QPID"
	wait_until 15 curl -fsS -m 1 "$QURL/healthz"
}
relay_alive() {
	[ -n "${QPID:-}" ] && kill -0 "$QPID" 2>/dev/null
}
relay_start || bail "the relay q1 did not start (see $WORK/q1.log)"
# what the checker needs to know of the planes (tests/tools/nemesis-check.py)
{
	echo "lease_ttl_s=10"      # the replicas' default --lease-ttl
	echo "heartbeat_s=1"       # every plane's --heartbeat
	echo "backoff_max_s=2"     # the agents' --backoff-max
	echo "planes=r1,r2,r3,q1"
	echo "relay.q1=r3,r2"
	echo "relay.q1.urls=$QUPS"
	echo "partitions=$PARTS"
} >"$WORK/params.txt"

# ---- agents ------------------------------------------------------------------------------
# the --reload hook: after every swap (TETHER_STAGING set), every revert and
# boot that rewrote files (no staging), and once at the end (final), one
# line in records/NODE.applied: incarnation, kind, TETHER_VERSION, time,
# then per file (sorted by path) its path, mode and first line
cat >"$WORK/hook.sh" <<'EOF'
#!/bin/sh
# tetherd --reload hook of bench/nemesis.sh (see there)
kind=${NEMESIS_KIND:-apply}
[ -n "${TETHER_STAGING:-}" ] || [ "$kind" = final ] || kind=back
cd "${TETHER_OUTPUT:?}" || exit 0
files=$(find . -path ./.tether-work -prune -o -name '.nemesis-fill*' -prune -o -type f -printf '%m %P\n' |
	LC_ALL=C sort -k2 | awk '{ c = ""; if ((getline c < $2) < 0) c = "?"; close($2); printf "\t%s\t%s\t%s", $2, $1, c }')
printf '@\t%s\t%s\t%s\t%s%s\n' "$NEMESIS_INC" "$kind" "$TETHER_VERSION" "$(date +%s%N)" "$files" \
	>>"$NEMESIS_RECORDS/$NEMESIS_NODE.applied"
exit 0
EOF
NODES="n1 n2 n3 n4 n5 n6 n7"
declare -A APLANES PNAMES AEXTRA ASUB INC
# n1 reaches the replicas through its own aliases (partitions n1-rR)
APLANES[n1]="http://${ALIAS[n1-r1]}:${RPORT[1]},http://${ALIAS[n1-r2]}:${RPORT[2]},http://${ALIAS[n1-r3]}:${RPORT[3]}"
PNAMES[n1]=r1,r2,r3
APLANES[n2]="${RURL[2]},${RURL[3]},${RURL[1]}"
PNAMES[n2]=r2,r3,r1
APLANES[n3]="${RURL[3]},${RURL[1]},${RURL[2]}"
PNAMES[n3]=r3,r1,r2
APLANES[n4]="${RURL[1]},${RURL[3]},${RURL[2]}"
PNAMES[n4]=r1,r3,r2
APLANES[n5]="${RURL[2]},${RURL[1]},${RURL[3]}"
PNAMES[n5]=r2,r1,r3
# n6 and n7 behind the relay, each with a replica to move to
APLANES[n6]="$QURL,${RURL[3]}"
PNAMES[n6]=q1,r3
APLANES[n7]="$QURL,${RURL[2]}"
PNAMES[n7]=q1,r2
AEXTRA[n3]="--transport poll --poll-wait 5"
ASUB[n4]="file/k1,file/k2"
ASUB[n5]="file/k0,file/x"
ASUB[n7]="file/k3,file/x"
DISKFULL=""
if small_fs "$WORK/n4.out"; then
	DISKFULL="$DISKFULL $WORK/n4.out"
fi
if small_fs "$WORK/n5.state"; then
	DISKFULL="$DISKFULL $WORK/n5.state"
fi
[ -n "$DISKFULL" ] || say "no tmpfs (not root?): no full-disk faults"
for n in $NODES; do
	INC[$n]=0
	echo "${ASUB[$n]:-}" >"$WORK/agents/$n.sub"
	echo "${PNAMES[$n]}" >"$WORK/agents/$n.planes"
	: >"$WORK/agents/$n.incs"
done

# agent_start NODE: a new incarnation of the node's agent
agent_start() {
	local n=$1 inc args=()
	inc=$((INC[$n] + 1))
	INC[$n]=$inc
	[ -z "${ASUB[$n]:-}" ] || args+=(--sub "${ASUB[$n]}")
	# shellcheck disable=SC2206
	[ -z "${AEXTRA[$n]:-}" ] || args+=(${AEXTRA[$n]})
	NEMESIS_INC=$inc NEMESIS_NODE=$n NEMESIS_RECORDS=$WORK/records \
		"$AGENT_BIN" --node "$n" --state-dir "$WORK/$n.state" --output-dir "$WORK/$n.out" \
		--plane "${APLANES[$n]}" --reload "sh $WORK/hook.sh" --backoff-min 0.1 --backoff-max 2 \
		"${args[@]}" >>"$WORK/agents/$n.$inc.log" 2>&1 &
	APID[$n]=$!
	track_pid "${APID[$n]}"
	echo "$inc start $(now_ms) ${APID[$n]}" >>"$WORK/agents/$n.incs"
}

# agent_end NODE HOW: the end of the node's current incarnation (kill9, term)
agent_end() {
	local n=$1 how=$2 sig=KILL
	[ "$how" = kill9 ] || sig=TERM
	kill -"$sig" "${APID[$n]}" 2>/dev/null
	wait "${APID[$n]}" 2>/dev/null
	untrack_pid "${APID[$n]}"
	echo "${INC[$n]} $how $(now_ms) ${APID[$n]}" >>"$WORK/agents/$n.incs"
	APID[$n]=""
}

for n in $NODES; do
	agent_start "$n"
done
wait_until 15 sh -c "for n in $NODES; do [ -f '$WORK/'\$n.state/status.json ] || exit 1; done" ||
	bail "the agents did not start"

# ---- load ----------------------------------------------------------------------------------
say "seed $SEED, $DURATION s, work directory $WORK"
T0=$(now_ms)
T_END=$((T0 + DURATION * 1000))
python3 "$TOOLS/nemesis-load.py" --replicas "$REPLICAS" --seconds "$DURATION" --out "$WORK/writes.jsonl" \
	--seed "$SEED" 2>>"$WORK/load.log" &
LOAD_PID=$!
track_pid "$LOAD_PID"

# ---- faults --------------------------------------------------------------------------------
etcd_alive() {
	[ -n "${ETCD_PID[$1]:-}" ] && kill -0 "${ETCD_PID[$1]}" 2>/dev/null
}

etcd_kill() {
	kill -KILL "${ETCD_PID[$1]}" 2>/dev/null
	wait "${ETCD_PID[$1]}" 2>/dev/null
	untrack_pid "${ETCD_PID[$1]}"
	ETCD_PID[$1]=""
}

etcd_restart() {
	etcd_member_start "$1"
	wait_until 30 etcd_healthy "$1" || say "etcd member $1 not healthy 30 s after its restart"
}

replica_kill() {
	kill -KILL "${RPID[$1]}" 2>/dev/null
	wait "${RPID[$1]}" 2>/dev/null
	untrack_pid "${RPID[$1]}"
	RPID[$1]=""
}

f_agent() {
	local n
	n=n$(rand 1 7)
	fault "agent-kill $n (incarnation ${INC[$n]})"
	agent_end "$n" kill9
	count_fault agent-kill
	pause_ms 100 3000
	agent_start "$n"
}

f_replica() {
	local r
	r=$(rand 1 3)
	fault "replica-kill r$r"
	replica_kill "$r"
	count_fault replica-kill
	pause_ms 500 5000
	replica_start "$r" || say "replica r$r not healthy 15 s after its restart"
	fault "replica-restart r$r"
}

f_etcd() {
	local i j
	i=$(rand 1 3)
	fault "etcd-kill m$i"
	etcd_kill "$i"
	count_fault etcd-kill
	if [ $((RANDOM % 6)) = 0 ]; then
		# a moment without quorum
		j=$((i % 3 + 1))
		pause_ms 200 1500
		fault "etcd-kill m$j (quorum lost)"
		etcd_kill "$j"
		count_fault etcd-quorum-loss
		pause_ms 500 2500
		etcd_restart "$j"
		fault "etcd-restart m$j"
	fi
	pause_ms 500 5000
	etcd_restart "$i"
	fault "etcd-restart m$i"
}

f_blackhole() {
	local which i
	if [ $((RANDOM % 2)) = 0 ]; then which="1"; else which="1 2 3"; fi
	fault "blackhole r1 -> etcd member(s) $which: live connections go silent"
	for i in $which; do kill -USR2 "${PPID_[$i]}" 2>/dev/null; done
	count_fault "blackhole-$( [ "$which" = 1 ] && echo one || echo all)"
	pause_ms 500 2500
	fault "blackhole r1 -> etcd member(s) $which: every new request too"
	for i in $which; do
		proxy_stop "$i"
		proxy_start "$i" dark
	done
	pause_ms 1000 6000
	for i in $which; do
		proxy_stop "$i"
		proxy_start "$i" forward
	done
	fault "blackhole r1 healed"
}

f_diskfull() {
	local set d
	read -r -a set <<<"$DISKFULL"
	d=${set[$((RANDOM % ${#set[@]}))]}
	fault "diskfull $(basename "$d")"
	head -c 2000000 /dev/zero >"$d/.nemesis-fill" 2>/dev/null
	count_fault "diskfull"
	pause_ms 1000 6000
	rm -f "$d/.nemesis-fill"
	fault "diskfull $(basename "$d") healed"
}

# ---- partitions: a cut of an alias (both ways, or one: out drops the
# dialer's packets, back the answers), healed after 1-8 s, or once the
# process it cuts off says so (a plane logs "stale:", n1 moves) and 0-3 s
# more (15 s at most)
pick_way() {
	case $((RANDOM % 4)) in
	0) echo out ;;
	1) echo back ;;
	*) echo both ;;
	esac
}

# hold_cut NAME LOG PATTERN SEEN: the cut's duration; SEEN: the lines of
# LOG matching PATTERN before the cut
hold_cut() {
	local name=$1 log=$2 pat=$3 nlines=$4 t0
	if [ $((RANDOM % 2)) = 0 ]; then
		pause_ms 1000 8000
		return
	fi
	t0=$(now_ms)
	if wait_until 15 sh -c "[ \$(grep -c '$pat' '$log' 2>/dev/null) -gt $nlines ]"; then
		fault "partition $name: '$pat' after $(($(now_ms) - t0)) ms"
	else
		fault "partition $name: no '$pat' in 15 s"
	fi
	pause_ms 0 3000
}

# cut_alias NAME WAY WHAT: cuts the alias of partition NAME (r2-etcd, q1-rR, n1-rR)
cut_alias() {
	fault "partition-cut $1 $2: $3"
	part_cut "${ALIAS[$1]}" "$2"
}

heal_alias() {
	part_heal "${ALIAS[$1]}"
	fault "partition-heal $1"
}

f_part_etcd() {
	local way nlines pat='stale: this plane cannot vouch'
	way=$(pick_way)
	nlines=$(grep -c "$pat" "$WORK/r2.log")
	cut_alias r2-etcd "$way" "r2 <-> etcd"
	count_fault "part-etcd-$way"
	hold_cut r2-etcd "$WORK/r2.log" "$pat" "$nlines"
	heal_alias r2-etcd
}

# the relay's alias of the upstream it follows now, or both of them
f_part_relay() {
	local way nlines up cur which x pat='stale: this plane cannot vouch'
	way=$(pick_way)
	up=$(curl -sS -m 2 "$QURL/healthz" 2>/dev/null | jq -r '.upstream // empty' 2>/dev/null)
	case $up in
	*":${RPORT[2]}") cur=r2 ;;
	*) cur=r3 ;;
	esac
	if [ $((RANDOM % 3)) = 0 ]; then which="r3 r2"; else which=$cur; fi
	nlines=$(grep -c "$pat" "$WORK/q1.log")
	for x in $which; do
		cut_alias "q1-$x" "$way" "q1 <-> $x"
	done
	if [ "$which" = "$cur" ]; then count_fault "part-relay-$way"; else count_fault "part-relay-all-$way"; fi
	hold_cut "q1-${which// /,q1-}" "$WORK/q1.log" "$pat" "$nlines"
	for x in $which; do
		heal_alias "q1-$x"
	done
}

# n1's alias of the replica it is on
f_part_agent() {
	local way nlines p cur=r1 r log pat='plane: moving from'
	way=$(pick_way)
	p=$(jq -r .plane "$WORK/n1.state/status.json" 2>/dev/null)
	for r in 1 2 3; do
		[ "$p" != "http://${ALIAS[n1-r$r]}:${RPORT[$r]}" ] || cur=r$r
	done
	log=$WORK/agents/n1.${INC[n1]}.log
	nlines=$(grep -c "$pat" "$log")
	cut_alias "n1-$cur" "$way" "n1 <-> $cur"
	count_fault "part-agent-$way"
	hold_cut "n1-$cur" "$log" "$pat" "$nlines"
	heal_alias "n1-$cur"
}

# heal: every process running, every proxy forwarding, every disk with room,
# every partition healed
heal() {
	local i r n d a
	for a in $ALIASES; do part_heal "$a"; done
	for d in $DISKFULL; do rm -f "$d/.nemesis-fill"; done
	for i in 1 2 3; do
		etcd_alive "$i" || etcd_restart "$i"
	done
	for i in 1 2 3; do
		if [ "${PMODE[$i]}" != forward ] || ! kill -0 "${PPID_[$i]}" 2>/dev/null; then
			proxy_stop "$i"
			proxy_start "$i" forward
		fi
	done
	for r in 1 2 3; do
		if ! replica_alive "$r"; then
			replica_start "$r" || { say "replica r$r: a second try"; replica_kill "$r"; replica_start "$r"; }
		fi
	done
	if ! relay_alive; then
		say "the relay q1 is not running: it was never killed (see $WORK/q1.log)"
		fault "relay q1 found dead"
		relay_start || say "the relay q1 did not start again"
	fi
	for n in $NODES; do
		[ -n "${APID[$n]:-}" ] && kill -0 "${APID[$n]}" 2>/dev/null || agent_start "$n"
	done
}

while [ "$(now_ms)" -lt "$T_END" ]; do
	pause_ms 500 2500
	[ "$(now_ms)" -lt "$T_END" ] || break
	k=$((RANDOM % 100))
	# a third of the faults are partitions, when they can be made
	if [ "$PARTS" = 1 ] && [ $k -lt 34 ]; then
		if [ $k -lt 12 ]; then
			f_part_etcd
		elif [ $k -lt 23 ]; then
			f_part_relay
		else
			f_part_agent
		fi
		continue
	fi
	k=$((RANDOM % 100))
	if [ $k -lt 25 ]; then
		f_agent
	elif [ $k -lt 45 ]; then
		f_replica
	elif [ $k -lt 65 ]; then
		f_etcd
	elif [ $k -lt 85 ]; then
		f_blackhole
	elif [ -n "$DISKFULL" ]; then
		f_diskfull
	else
		f_agent
	fi
done
say "faults stop; waiting for the last writes"
wait "$LOAD_PID"
untrack_pid "$LOAD_PID"
heal
T_HEALED=$(now_ms)
fault "healed"

# ---- convergence -------------------------------------------------------------------------------
etcd_get() {
	ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" --command-timeout=5s get "$@"
}
FINAL=$(etcd_get /tether/version --print-value-only 2>/dev/null)
[ -n "$FINAL" ] || FINAL=0
all_converged() {
	local r n
	for r in 1 2 3; do
		[ "$(curl -fsS -m 1 "${RURL[$r]}/healthz" 2>/dev/null | jq -r .version)" = "$FINAL" ] || return 1
	done
	[ "$(curl -fsS -m 1 "$QURL/healthz" 2>/dev/null | jq -r .version)" = "$FINAL" ] || return 1
	for n in $NODES; do
		[ "$(jq -r .version "$WORK/$n.state/status.json" 2>/dev/null)" = "$FINAL" ] || return 1
	done
}
if wait_until "$CONVERGE" all_converged; then
	converged=1
else
	converged=0
fi
CONV_MS=$(($(now_ms) - T_HEALED))
{
	echo "final=$FINAL"
	echo "converged=$converged"
	echo "ms=$CONV_MS"
	echo "limit_ms=$((CONVERGE * 1000))"
	for r in 1 2 3; do
		echo "replica.r$r=$(curl -fsS -m 2 "${RURL[$r]}/healthz" 2>/dev/null | jq -r .version)"
	done
	echo "replica.q1=$(curl -fsS -m 2 "$QURL/healthz" 2>/dev/null | jq -r .version)"
	for n in $NODES; do
		echo "node.$n=$(jq -r .version "$WORK/$n.state/status.json" 2>/dev/null)"
	done
} >"$WORK/converge.txt"

# what each node shows at the end, as the hook lists it
for n in $NODES; do
	NEMESIS_KIND=final NEMESIS_INC=final NEMESIS_NODE=$n NEMESIS_RECORDS=$WORK/final \
		TETHER_OUTPUT=$WORK/$n.out TETHER_VERSION="$(jq -r .version "$WORK/$n.state/status.json" 2>/dev/null)" \
		sh "$WORK/hook.sh"
done
for r in 1 2 3; do
	curl -fsS -m 5 "${RURL[$r]}/v1/resources" >"$WORK/final/r$r.json" 2>/dev/null
done
curl -fsS -m 5 "$QURL/v1/resources" >"$WORK/final/q1.json" 2>/dev/null
for n in $NODES; do
	agent_end "$n" term
done

# etcd's history of the prefix from revision 1: the watch replays it;
# stopped once it holds the revision read before it started
REV=$(etcd_get /tether/version -w json 2>/dev/null | jq -r .header.revision)
echo "$REV" >"$WORK/history.rev"
ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" watch --rev=1 --prefix /tether/ -w json \
	>"$WORK/history.jsonl" 2>"$WORK/history.err" &
WPID=$!
track_pid "$WPID"
# history_whole: the dump's last line is complete and reaches REV (an
# empty file is not: jq -e on no input exits 0)
history_whole() {
	local f=$WORK/history.jsonl
	[ -s "$f" ] && [ -z "$(tail -c 1 "$f")" ] &&
		tail -n 1 "$f" | jq -e "[.Events[].kv.mod_revision] | max >= $REV" >/dev/null 2>&1
}
wait_until 300 history_whole || say "the history dump did not reach revision $REV in 300 s"
kill -TERM "$WPID" 2>/dev/null
wait "$WPID" 2>/dev/null
untrack_pid "$WPID"

relay_alive && stop_pid "$QPID" TERM
for r in 1 2 3; do
	replica_alive "$r" && stop_pid "${RPID[$r]}" TERM
done

# ---- the check ----------------------------------------------------------------------------------
python3 "$TOOLS/nemesis-check.py" "$WORK" >"$WORK/check.out" 2>&1
crc=$?
grep -E '^(violation|warning|note) ' "$WORK/check.out" | head -n 60 | sed 's/^/# /'

kvs() {
	sed -n 's/^result //p' "$WORK/check.out"
}
{
	echo "seed=$SEED"
	echo "seconds=$DURATION"
	echo "work=$WORK"
	for k in $(printf '%s\n' "${!FAULTS[@]}" | sort); do
		echo "faults.$k=${FAULTS[$k]}"
	done
	total=0
	for k in "${!FAULTS[@]}"; do total=$((total + FAULTS[$k])); done
	echo "faults.total=$total"
	echo "partitions=$PARTS"
	[ "$PARTS" = 1 ] || echo "partitions.none=$PARTS_WHY"
	echo "converged=$converged"
	echo "converge_ms=$CONV_MS"
	kvs
} | tee "$WORK/results.txt"
{
	echo "tether nemesis run ($(date -u +%Y-%m-%dT%H:%MZ)), $(nproc) cores, commit $(git -C "$SRCDIR" rev-parse --short HEAD 2>/dev/null)"
	echo "command: bench/nemesis.sh SRCDIR BUILDDIR $DURATION (NEMESIS_SEED=$SEED)"
	cat "$WORK/results.txt"
} >"$RESULTS"

# TAP: one test point per check
if [ "$SELFTEST_RC" = 0 ]; then
	ok "nemesis: the checker catches every doctored history ($(grep -c '^ok ' "$WORK/selftest.out") self-tests)"
else
	not_ok "nemesis: the checker's self-test (see $WORK/selftest.out)"
	grep '^not ok' "$WORK/selftest.out" | sed 's/^/# /'
fi
result() {
	sed -n "s/^result $1=//p" "$WORK/check.out"
}
while read -r name n; do
	more=""
	[ "$name" != staleness ] ||
		more="; the longest $(result staleness.max_ms) ms ($(result staleness.max_at)), bound $(result staleness.bound_ms) ms"
	if [ "$n" = 0 ]; then
		ok "nemesis: $name (0 violations$more)"
	else
		not_ok "nemesis: $name ($n violations$more; see $WORK/check.out)"
	fi
done < <(sed -n 's/^check \([a-z0-9_-]*\) \([0-9]*\)$/\1 \2/p' "$WORK/check.out")
[ "$crc" -le 1 ] || not_ok "nemesis: the checker ran (exit $crc; see $WORK/check.out)"
check_eq "nemesis: every node at the final version within ${CONVERGE} s of healing" 1 "$converged"
echo "1..$T_COUNT"
[ "$T_FAILED" -eq 0 ]
