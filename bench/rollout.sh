# bench/rollout.sh: the staged-rollout benchmark (`make bench` runs it as
# `$SHELL bench/rollout.sh SRCDIR BUILDDIR`). A plane runs with
# `--rollout staged --stages 1,10,100 --bake B`; then
#   (a) BENCH_ROLLOUT_AGENTS (100) real tetherd agents (files consumer, a
#       --check that refuses any file containing BAD, private directories
#       in a temporary directory removed on exit), and
#   (b) BENCH_ROLLOUT_SIM (1,000) simulated nodes: bench/sse_load --ack,
#       which ACKs every push and NACKs one that carries the marker BAD,
# each get a one-resource good change: the time from the write's answer
# until /v1/rollouts/current says completed and every node holds the new
# version, and the rollout's messages; then a change every node rejects:
# the time until rolled_back and until every node holds the revert
# version, and the messages of the bad version, revert_messages and
# version_only_messages. Every wait polls an endpoint or a file (no sleep
# decides anything). The summary (medians of BENCH_ROLLOUT_RUNS runs) is
# printed and written to BUILDDIR/bench-rollout.txt; per-run figures, plane
# logs and the load client's output stay in BUILDDIR/bench-out/rollout/.
#
# Knobs (environment): BENCH_ROLLOUT_RUNS (3), BENCH_ROLLOUT_BAKES (bake
# times for the agents, "0 1 5"), BENCH_ROLLOUT_SIM_BAKES ("0 1"),
# BENCH_ROLLOUT_AGENTS (100), BENCH_ROLLOUT_SIM (1000), BENCH_ROLLOUT_STAGES
# (1,10,100), BENCH_ROLLOUT_ZONES (10: node i has the label zone=z(i mod 10)),
# BENCH_ROLLOUT_CLUSTERS (100 clusters in the baseline), BENCH_KEEP=1 keeps
# the temporary directory.

# $EPOCHREALTIME is bash's
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u

SRCDIR=${1:?usage: rollout.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: rollout.sh SRCDIR BUILDDIR}
PLANE_BIN=${BENCH_PLANE:-$BUILDDIR/tether-plane}
AGENT_BIN=$BUILDDIR/tetherd
LOAD_BIN=$BUILDDIR/bench/sse_load
RUNS=${BENCH_ROLLOUT_RUNS:-3}
BAKES=${BENCH_ROLLOUT_BAKES:-0 1 5}
SIM_BAKES=${BENCH_ROLLOUT_SIM_BAKES:-0 1}
AGENTS=${BENCH_ROLLOUT_AGENTS:-100}
SIM=${BENCH_ROLLOUT_SIM:-1000}
STAGES=${BENCH_ROLLOUT_STAGES:-1,10,100}
ZONES=${BENCH_ROLLOUT_ZONES:-10}
CLUSTERS=${BENCH_ROLLOUT_CLUSTERS:-100}
OUT=$BUILDDIR/bench-out/rollout
RESULTS=$BUILDDIR/bench-rollout.txt
NSTAGES=$(echo "$STAGES" | tr ',' '\n' | grep -c .)
# what every agent runs before new files go live: a file containing BAD is
# refused (a NACK)
CHECK='! grep -rq BAD "$TETHER_STAGING"'

BENCH_NAME=rollout
. "$(dirname "$0")/lib.sh"
need "$PLANE_BIN" "$AGENT_BIN" "$LOAD_BIN"
command -v curl >/dev/null || { echo "rollout.sh: needs curl" >&2; exit 2; }

rm -rf "$OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tether-rollout-bench.XXXXXX")
# after the processes stopped: the work directory
if [ "${BENCH_KEEP:-0}" = 1 ]; then
	BENCH_AFTER_EXIT='echo "rollout.sh: work directory kept: $WORK" >&2'
else
	BENCH_AFTER_EXIT='rm -rf "$WORK"'
fi

# jfield JSON KEY: a scalar of a flat JSON object (numbers and simple strings)
jfield() {
	printf '%s' "$1" | sed -n "s/.*\"$2\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}

# sub A B: A - B in seconds, 3 decimals
sub() {
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'
}

max() {
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (a > b ? a : b) }'
}

# start_plane DIR BAKE: sets PLANE_PID, URL
start_plane() {
	local dir=$1
	mkdir -p "$dir"
	# heartbeats once an hour: nothing but the rollout moves on the streams
	"$PLANE_BIN" --listen 127.0.0.1:0 --data "$dir/data" --heartbeat 3600 $PLANE_LAB_FLAGS \
		--rollout staged --stages "$STAGES" --bake "$2" >"$dir/plane.log" 2>&1 &
	PLANE_PID=$!
	track "$PLANE_PID"
	wait_until 10 grep -q 'listening on ' "$dir/plane.log" || { cat "$dir/plane.log" >&2; die "the plane did not start"; }
	URL=http://127.0.0.1:$(grep -o 'listening on [^ ]*' "$dir/plane.log" | tail -n 1 | sed 's/.*://')
	wait_until 10 curl -fsS "$URL/healthz" || die "the plane is not healthy"
}

rollout_json() {
	curl -sS "$URL/v1/rollouts/current"
}

# rollout_is STATE TO: the current rollout, of version TO, is in STATE
rollout_is() {
	local j
	j=$(rollout_json) || return 1
	[ "$(jfield "$j" state)" = "$1" ] && [ "$(jfield "$j" to_version)" = "$2" ]
}

connected_nodes() {
	curl -sS "$URL/v1/nodes" | grep -o '"connected":true' | wc -l
}

# all_connected N: the plane counts N nodes connected
all_connected() {
	[ "$(connected_nodes)" = "$1" ]
}

# baseline: CLUSTERS clusters and file/x, one version; waits until its
# rollout (no node connected yet) has completed. Prints the version.
baseline() {
	local dir=$1 v
	awk -v n="$CLUSTERS" 'BEGIN {
		printf "{\"upserts\":[{\"name\":\"file/x\",\"body\":{\"path\":\"x.txt\",\"content\":\"base\"}}"
		for (i = 0; i < n; i++)
			printf ",{\"name\":\"cluster/c%d\",\"body\":{\"endpoints\":[{\"address\":\"10.0.%d.%d\",\"port\":80,\"weight\":1}],\"lb\":\"round_robin\"}}", \
				i, int(i / 250), i % 250
		print "]}"
	}' >"$dir/batch.json"
	v=$(curl -sS -f -X POST --data-binary "@$dir/batch.json" "$URL/v1/batch" | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
	[ -n "$v" ] || die "the baseline did not load"
	wait_until 10 rollout_is completed "$v" || die "the baseline's rollout did not complete"
	echo "$v"
}

# put_x CONTENT: writes file/x; sets WROTE (the version) and ANSWERED (the
# wall clock just after the answer came back)
put_x() {
	local reply
	reply=$(curl -sS -f -X PUT --data-binary "{\"path\":\"x.txt\",\"content\":\"$1\"}" "$URL/v1/resources/file/x")
	ANSWERED=$EPOCHREALTIME
	WROTE=$(printf '%s' "$reply" | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
	[ -n "$WROTE" ] || die "PUT file/x failed: $reply"
}

# ---- (a) real agents ----------------------------------------------------------

# the version in every agent's status.json (one per line)
agent_versions() {
	awk 'FNR == 1 && match($0, /"version":[0-9]+/) { print substr($0, RSTART + 10, RLENGTH - 10) }' \
		"$ADIR"/a*/state/status.json 2>/dev/null
}

# all_agents_at V: every agent's status.json says version V
all_agents_at() {
	[ "$(agent_versions | awk -v v="$1" '$1 == v { n++ } END { print n + 0 }')" = "$AGENTS" ]
}

# the newest mtime among the agents' status.json, as epoch seconds
last_status_write() {
	stat -c '%.6Y' "$ADIR"/a*/state/status.json | sort -g | tail -n 1
}

# x_content_count CONTENT: agents whose out/x.txt holds CONTENT
x_content_count() {
	grep -lx -- "$1" "$ADIR"/a*/out/x.txt 2>/dev/null | wc -l
}

good_and_ready() {
	rollout_is completed "$1" && all_agents_at "$1"
}

reverted_and_ready() {
	local j r
	j=$(rollout_json) || return 1
	[ "$(jfield "$j" state)" = rolled_back ] && [ "$(jfield "$j" to_version)" = "$1" ] || return 1
	r=$(jfield "$j" revert_version)
	[ -n "$r" ] && [ "$r" != 0 ] && all_agents_at "$r"
}

# agents_run BAKE RUN: writes "key value" lines to $OUT/agents.BAKE.RUN.txt
agents_run() {
	local bake=$1 run=$2 dir=$WORK/agents.$1.$2 i v0 pids=""
	ADIR=$dir
	start_plane "$dir" "$bake"
	v0=$(baseline "$dir") || exit 1
	for i in $(seq 0 $((AGENTS - 1))); do
		mkdir -p "$dir/a$i"
		# a stream timeout longer than the run: the plane's heartbeat is hourly
		"$AGENT_BIN" --plane "$URL" --node "a$i" --labels "zone=z$((i % ZONES))" \
			--state-dir "$dir/a$i/state" --output-dir "$dir/a$i/out" --consumer files \
			--check "$CHECK" --stream-timeout 7200 >"$dir/a$i/agent.log" 2>&1 &
		pids="$pids $!"
	done
	track "$pids"
	wait_until 120 all_agents_at "$v0" || die "agents: not every agent synced version $v0 ($(agent_versions | sort | uniq -c | tr '\n' ' '))"
	wait_until 30 all_connected "$AGENTS" || die "agents: $(connected_nodes) of $AGENTS connected"

	# the good change
	put_x "good-$bake-$run"
	local v1=$WROTE t1=$ANSWERED
	wait_until $((60 + 4 * NSTAGES * bake)) good_and_ready "$v1" ||
		die "agents, bake $bake: version $v1 did not complete ($(rollout_json))"
	local seen1=$EPOCHREALTIME j1 held1
	j1=$(rollout_json)
	held1=$(last_status_write)
	[ "$(x_content_count "good-$bake-$run")" = "$AGENTS" ] || die "agents: not every x.txt holds the good change"

	# the bad change: every agent's check refuses it
	put_x BAD
	local v2=$WROTE t2=$ANSWERED
	wait_until 120 reverted_and_ready "$v2" ||
		die "agents, bake $bake: version $v2 was not rolled back everywhere ($(rollout_json); $(agent_versions | sort | uniq -c | tr '\n' ' '))"
	local seen2=$EPOCHREALTIME j2 held2
	j2=$(rollout_json)
	held2=$(last_status_write)
	[ "$(x_content_count "good-$bake-$run")" = "$AGENTS" ] || die "agents: not every x.txt is back to the good change"
	[ "$(x_content_count BAD)" = 0 ] || die "agents: an x.txt holds BAD"

	emit_run "$OUT/agents.$bake.$run.txt" "$AGENTS" "$t1" "$seen1" "$held1" "$j1" "$t2" "$seen2" "$held2" "$j2"
	for i in $pids; do
		stop_pid "$i"
	done
	stop_pid "$PLANE_PID"
	cp "$dir/plane.log" "$OUT/agents.$bake.$run.plane.log"
	grep -h 'refused\|NACK\|error' "$dir"/a*/agent.log >"$OUT/agents.$bake.$run.agent-errors.log" 2>/dev/null
	rm -rf "$dir"
}

# emit_run FILE NODES T1 SEEN1 HELD1 JSON1 T2 SEEN2 HELD2 JSON2
# T: the write's answer; SEEN: when the poll saw it done; HELD: when the
# last node had the version (status.json written, or the ACK answered)
emit_run() {
	local f=$1 n=$2 t1=$3 seen1=$4 held1=$5 j1=$6 t2=$7 seen2=$8 held2=$9 j2=${10}
	local fin1 fin2 start1 done1 done2
	fin1=$(jfield "$j1" finished_at)
	start1=$(jfield "$j1" started_at)
	fin2=$(jfield "$j2" finished_at)
	done1=$(max "$(sub "$fin1" "$t1")" "$(sub "$held1" "$t1")")
	done2=$(max "$(sub "$fin2" "$t2")" "$(sub "$held2" "$t2")")
	{
		echo "nodes $n"
		echo "members $(jfield "$j1" members)"
		echo "completed_s $(sub "$fin1" "$t1")"
		echo "started_to_completed_s $(sub "$fin1" "$start1")"
		echo "all_hold_s $(sub "$held1" "$t1")"
		echo "done_s $done1"
		echo "seen_s $(sub "$seen1" "$t1")"
		echo "messages $(jfield "$j1" messages)"
		echo "touched $(jfield "$j1" touched)"
		echo "rb_rolled_back_s $(sub "$fin2" "$t2")"
		echo "rb_all_hold_s $(sub "$held2" "$t2")"
		echo "rb_done_s $done2"
		echo "rb_seen_s $(sub "$seen2" "$t2")"
		echo "rb_to $(jfield "$j2" to_version)"
		echo "rb_revert $(jfield "$j2" revert_version)"
		echo "rb_messages $(jfield "$j2" messages)"
		echo "rb_touched $(jfield "$j2" touched)"
		echo "rb_revert_messages $(jfield "$j2" revert_messages)"
		echo "rb_version_only_messages $(jfield "$j2" version_only_messages)"
		echo "rb_reason $(printf '%s' "$j2" | sed -n 's/.*"reason":"\([^"]*\)".*/\1/p')"
	} >"$f"
}

# ---- (b) simulated nodes -------------------------------------------------------------

# sim_run BAKE RUN: writes "key value" lines to $OUT/sim.BAKE.RUN.txt
sim_run() {
	local bake=$1 run=$2 dir=$WORK/sim.$1.$2 v0 lp out
	start_plane "$dir" "$bake"
	v0=$(baseline "$dir") || exit 1
	out=$OUT/sim.$bake.$run.load.out
	: >"$dir/start"
	# round 1: the good change (v0 + 1); round 2: the bad one (v0 + 2),
	# which every node NACKs, so it ends with the revert's ACK
	"$LOAD_BIN" -n "$SIM" --version "$v0" --prefix s --zones "$ZONES" --ack --nack-marker BAD \
		--wait-push $((v0 + 1)) --rounds 2 --start-file "$dir/start" --per-stream \
		--timeout $((120 + 4 * NSTAGES * bake)) "127.0.0.1:${URL##*:}" >"$out" 2>"$OUT/sim.$bake.$run.load.err" &
	lp=$!
	track "$lp"
	wait_until 120 grep -q '^ready=1' "$out" || die "sim: the streams did not open"
	[ "$(kv "$out" connect.ok)" = "$SIM" ] || die "sim: $(kv "$out" connect.ok) of $SIM streams opened"
	wait_until 30 all_connected "$SIM" || die "sim: $(connected_nodes) of $SIM connected"

	put_x "good-$bake-$run"
	local v1=$WROTE t1=$ANSWERED
	[ "$v1" = $((v0 + 1)) ] || die "sim: the good change is version $v1, not $((v0 + 1))"
	printf '%s\n' "$t1" >>"$dir/start"
	wait_until $((60 + 4 * NSTAGES * bake)) rollout_is completed "$v1" ||
		die "sim, bake $bake: version $v1 did not complete ($(rollout_json))"
	wait_until 60 grep -q '^round\.1\.done=1' "$out" || die "sim: not every node ACKed version $v1"
	local seen1=$EPOCHREALTIME j1
	j1=$(rollout_json)
	[ "$(kv "$out" round.1.complete)" = 1 ] && [ "$(kv "$out" round.1.acked_id_min)" = "$v1" ] ||
		die "sim: round 1 incomplete or not at version $v1"

	put_x BAD
	local v2=$WROTE t2=$ANSWERED
	printf '%s\n' "$t2" >>"$dir/start"
	wait_until 120 rollout_is rolled_back "$v2" || die "sim, bake $bake: version $v2 was not rolled back ($(rollout_json))"
	wait_until 60 grep -q '^round\.2\.done=1' "$out" || die "sim: not every node ACKed the revert"
	local seen2=$EPOCHREALTIME j2 rv
	j2=$(rollout_json)
	rv=$(jfield "$j2" revert_version)
	[ "$(kv "$out" round.2.complete)" = 1 ] && [ "$(kv "$out" round.2.acked_id_min)" = "$rv" ] &&
		[ "$(kv "$out" round.2.acked_id_max)" = "$rv" ] || die "sim: not every node holds the revert version $rv"
	wait_until 30 grep -q '^finished=1' "$out"
	wait "$lp" || log "sim: the load client exited non-zero (see $OUT/sim.$bake.$run.load.err)"
	untrack "$lp"

	emit_run "$OUT/sim.$bake.$run.txt" "$SIM" "$t1" "$seen1" "$(kv "$out" round.1.last_ack_at)" "$j1" \
		"$t2" "$seen2" "$(kv "$out" round.2.last_ack_at)" "$j2"
	{
		echo "last_push_s $(sub "$(kv "$out" round.1.last_push_at)" "$t1")"
		echo "rb_last_push_s $(sub "$(kv "$out" round.2.last_push_at)" "$t2")"
		echo "client_pushes $(kv "$out" acks.pushes)"
		echo "client_nacks $(kv "$out" acks.nacks_sent)"
		echo "client_stale $(kv "$out" acks.stale)"
		echo "client_errors $(kv "$out" acks.errors)"
	} >>"$OUT/sim.$bake.$run.txt"
	stop_pid "$PLANE_PID"
	cp "$dir/plane.log" "$OUT/sim.$bake.$run.plane.log"
	rm -rf "$dir"
}

# med PATTERN KEY: the median over runs of one figure
med() {
	local f
	for f in $OUT/$1; do
		awk -v k="$2" '$1 == k { print $2 }' "$f"
	done | median
}

# runs PATTERN KEY: the figure of every run, comma-separated
runs() {
	local f
	for f in $OUT/$1; do
		awk -v k="$2" '$1 == k { print $2 }' "$f"
	done | paste -sd, -
}

# ---- run ------------------------------------------------------------------------

BEGAN=$EPOCHREALTIME
log "machine: $MACHINE"
for run in $(seq 1 "$RUNS"); do
	for b in $BAKES; do
		log "run $run/$RUNS: $AGENTS tetherd agents, bake $b"
		agents_run "$b" "$run"
	done
	for b in $SIM_BAKES; do
		log "run $run/$RUNS: $SIM simulated nodes, bake $b"
		sim_run "$b" "$run"
	done
done

{
	bench_header "tether rollout bench results"
	echo "plane: $PLANE_BIN --rollout staged --stages $STAGES --bake B --heartbeat 3600 $PLANE_LAB_FLAGS"
	echo "agents: tetherd --consumer files --labels zone=zK --check '$CHECK'"
	echo "simulated: $LOAD_BIN -n $SIM --zones $ZONES --ack --nack-marker BAD"
	echo "command: sh $SRCDIR/bench/rollout.sh $SRCDIR $BUILDDIR"
	echo "medians of $RUNS runs; seconds from the write's answer"
	echo
	echo "(1) a one-resource good change to 100 % ($NSTAGES stages; floor $NSTAGES x bake)"
	echo "    completed: the rollout's finished_at; all nodes: the last node holding the"
	echo "    version (its status.json written / its ACK answered); total: the later of the two"
	printf '    %-6s %-8s %5s %6s %10s %10s %10s %10s %9s\n' nodes kind bake floor completed "all nodes" total \
		"start->end" messages
	for kind in agents sim; do
		if [ $kind = agents ]; then bakes=$BAKES n=$AGENTS label=tetherd; else bakes=$SIM_BAKES n=$SIM label=sse_load; fi
		for b in $bakes; do
			p="$kind.$b.*[0-9].txt"
			printf '    %-6s %-8s %5s %6s %10s %10s %10s %10s %9s\n' "$n" "$label" "$b" "$((NSTAGES * b))" \
				"$(med "$p" completed_s)" "$(med "$p" all_hold_s)" "$(med "$p" done_s)" \
				"$(med "$p" started_to_completed_s)" "$(med "$p" messages)"
		done
	done
	echo
	echo "(2) a change every node rejects (NACK at the first stage) and its revert"
	echo "    rolled back: finished_at; all nodes: the last node holding the revert version"
	printf '    %-6s %-8s %5s %11s %10s %10s %9s %9s %13s\n' nodes kind bake "rolled back" "all nodes" total \
		messages "revert" "version-only"
	for kind in agents sim; do
		if [ $kind = agents ]; then bakes=$BAKES n=$AGENTS label=tetherd; else bakes=$SIM_BAKES n=$SIM label=sse_load; fi
		for b in $bakes; do
			p="$kind.$b.*[0-9].txt"
			printf '    %-6s %-8s %5s %11s %10s %10s %9s %9s %13s\n' "$n" "$label" "$b" \
				"$(med "$p" rb_rolled_back_s)" "$(med "$p" rb_all_hold_s)" "$(med "$p" rb_done_s)" \
				"$(med "$p" rb_messages)" "$(med "$p" rb_revert_messages)" "$(med "$p" rb_version_only_messages)"
		done
	done
	echo
	echo "per run (total to 100 %; total of the revert; messages; revert + version-only messages):"
	for kind in agents sim; do
		if [ $kind = agents ]; then bakes=$BAKES; else bakes=$SIM_BAKES; fi
		for b in $bakes; do
			p="$kind.$b.*[0-9].txt"
			echo "    $kind bake $b: total $(runs "$p" done_s); revert $(runs "$p" rb_done_s);" \
				"messages $(runs "$p" messages); revert $(runs "$p" rb_revert_messages)" \
				"+ $(runs "$p" rb_version_only_messages)"
		done
	done
	echo
	echo "rollout.sh ran $(awk -v a="$EPOCHREALTIME" -v b="$BEGAN" 'BEGIN { printf "%.0f", a - b }') s;" \
		"per-run figures and logs: $OUT"
} >"$RESULTS"
cat "$RESULTS"
