#!/usr/bin/env bash
# bench/agent.sh: the agent's costs (run by `make bench` after run.sh, or as
# `bash bench/agent.sh SRCDIR BUILDDIR`). For each state size N (default
# 1,000 and 100,000 clusters): a plane holds N clusters; a tetherd (files
# consumer, no reload) syncs them; its RSS is read idle (VmRSS, and RssAnon:
# the private part, without the shared pages of libcurl and its libraries),
# once after the snapshot arrived and once after a restart from last-good;
# then BENCH_PUSHES one-resource writes are pushed one at a time and the CPU
# time of each apply (decode, validate, apply, persist: the agent logs it)
# is collected: median and p90. Results go to BUILDDIR/bench-agent.txt.

# $EPOCHREALTIME (bench/lib.sh) is bash's
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: agent.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: agent.sh SRCDIR BUILDDIR}
SIZES=${BENCH_AGENT_SIZES:-1000 100000}
PUSHES=${BENCH_PUSHES:-100}
PLANE=$BUILDDIR/tether-plane
AGENT=$BUILDDIR/tetherd
OUT=$BUILDDIR/bench-out/agent
RESULTS=$BUILDDIR/bench-agent.txt
BENCH_NAME=agent.sh
. "$(dirname "$0")/lib.sh"
need "$PLANE" "$AGENT"
rm -rf "$OUT"
mkdir -p "$OUT"
status_version() { sed -n 's/.*"version":\([0-9]*\),"state".*/\1/p' "$1/status.json" 2>/dev/null; }
rss() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

: >"$RESULTS"
printf '%-8s %-12s %10s %10s %10s %10s %12s %12s\n' resources phase "RSS KiB" "anon KiB" "state KiB" "goal KiB" "cpu p50 ms" "cpu p90 ms" |
	tee -a "$RESULTS"
for n in $SIZES; do
	dir=$OUT/n$n
	mkdir -p "$dir"
	"$PLANE" --listen 127.0.0.1:0 --data "$dir/plane" --heartbeat 3600 $PLANE_LAB_FLAGS >"$dir/plane.log" 2>&1 &
	ppid=$!
	track "$ppid"
	wait_until 10 grep -q 'listening on' "$dir/plane.log" || { echo "plane did not start" >&2; exit 1; }
	port=$(grep -o 'listening on [^ ]*' "$dir/plane.log" | sed 's/.*://')
	url=http://127.0.0.1:$port
	clusters_batch "$n" >"$dir/batch.json"
	want=$(curl -sS -X POST --data-binary @"$dir/batch.json" "$url/v1/batch" | sed -n 's/.*"version":\([0-9]*\).*/\1/p')

	"$AGENT" --plane "$url" --node bench --state-dir "$dir/state" --output-dir "$dir/out" >"$dir/agent.log" 2>&1 &
	apid=$!
	track "$apid"
	synced() { [ "$(status_version "$dir/state")" = "$want" ]; }
	wait_until 120 synced || { echo "agent did not sync" >&2; exit 1; }
	sleep 5   # the idle period being measured
	state_kib=$(( $(sed -n 's/.*"state_bytes":\([0-9]*\).*/\1/p' "$dir/state/status.json") / 1024 ))
	goal=$((4096 + 2 * state_kib))
	printf '%-8s %-12s %10s %10s %10s %10s %12s %12s\n' "$n" after-sync "$(rss $apid VmRSS)" "$(rss $apid RssAnon)" \
		"$state_kib" "$goal" - - | tee -a "$RESULTS"
	kill -TERM $apid
	wait $apid

	: >"$dir/agent2.log"
	"$AGENT" --plane "$url" --node bench --state-dir "$dir/state" --output-dir "$dir/out" >"$dir/agent2.log" 2>&1 &
	apid=$!
	track "$apid"
	wait_until 120 grep -q 'node bench at version' "$dir/agent2.log" || { echo "agent did not boot" >&2; exit 1; }
	sleep 5   # the idle period being measured
	boot_rss=$(rss $apid VmRSS)
	boot_anon=$(rss $apid RssAnon)
	# one-resource pushes, one at a time
	for i in $(seq 1 "$PUSHES"); do
		v=$(curl -sS -X PUT "$url/v1/resources/cluster/c7" \
			--data "{\"endpoints\":[{\"address\":\"10.200.$((i / 256 % 256)).$((i % 256))\",\"port\":80}]}" |
			sed -n 's/.*"version":\([0-9]*\).*/\1/p')
		want=$v
		wait_until 30 synced || { echo "push $v not applied" >&2; exit 1; }
	done
	grep 'applied version' "$dir/agent2.log" | grep '(delta, 1 changes' |
		sed -n 's/.*, \([0-9.]*\) ms cpu.*/\1/p' >"$dir/cpu.txt"
	p50=$(percentile 0.5 <"$dir/cpu.txt")
	p90=$(percentile 0.9 <"$dir/cpu.txt")
	printf '%-8s %-12s %10s %10s %10s %10s %12s %12s\n' "$n" boot+pushes "$boot_rss" "$boot_anon" "$state_kib" "$goal" \
		"$p50" "$p90" | tee -a "$RESULTS"
	kill -TERM $apid $ppid
	wait $apid $ppid 2>/dev/null
done
echo "agent.sh: $(cat "$OUT"/n*/cpu.txt | wc -l) pushes measured; raw logs in $OUT"
