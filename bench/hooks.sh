#!/usr/bin/env bash
# bench/hooks.sh: what waiting for the --check and --reload hooks costs an
# apply (`bash bench/hooks.sh SRCDIR BUILDDIR`; docs/BENCHMARKS.md, "Hooks").
# One lab plane; a tetherd with the files consumer and `--check true
# --reload true` (hooks that cost nothing themselves, so what is measured
# is the agent's wait for them); BENCH_HOOKS_WRITES (50) one-file writes,
# each waited for until the agent has applied it. From the agent's own log
# line for each apply ("applied version N (..., T ms, ...; stage S, check
# C, reload R, persist P ms)"): the medians and p90 of the whole apply, of
# the check and of the reload. BENCH_AGENT_BASE=another tetherd runs the
# same writes with it first, in the same run (an earlier build: before and
# after). Results in BUILDDIR/bench-hooks.txt, logs in
# BUILDDIR/bench-out/hooks/.
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: hooks.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: hooks.sh SRCDIR BUILDDIR}
BENCH_NAME=bench-hooks
. "$SRCDIR/bench/lib.sh"
PLANE_BIN=$BUILDDIR/tether-plane
CTL=$BUILDDIR/tetherctl
WRITES=${BENCH_HOOKS_WRITES:-50}
OUT=$BUILDDIR/bench-out/hooks
RESULTS=$BUILDDIR/bench-hooks.txt
need "$PLANE_BIN" "$CTL" "$BUILDDIR/tetherd"
rm -rf "$OUT"
mkdir -p "$OUT"

# run NAME TETHERD: the writes against a fresh plane and agent
run() {
	local name=$1 agent=$2 dir=$OUT/$1 i
	mkdir -p "$dir"
	"$PLANE_BIN" $PLANE_LAB_FLAGS --listen 127.0.0.1:0 --data "$dir/plane.data" >"$dir/plane.log" 2>&1 &
	local ppid=$!
	track "$ppid"
	wait_until 10 grep -q 'listening on ' "$dir/plane.log" || die "the plane did not start"
	local url
	url=http://$(grep -o 'listening on [^ ]*' "$dir/plane.log" | sed 's/listening on //')
	"$agent" --plane "$url" --node bench --state-dir "$dir/state" --output-dir "$dir/out" \
		--consumer files --check true --reload true >"$dir/agent.log" 2>&1 &
	local apid=$!
	track "$apid"
	wait_until 10 grep -q 'applied version\|synced' "$dir/agent.log" || true
	for i in $(seq 1 "$WRITES"); do
		printf '{"path":"f.txt","content":"%d\\n","mode":"0644"}' "$i" |
			TETHER_PLANE=$url "$CTL" put file/f - >/dev/null || die "write $i failed"
		wait_until 10 grep -q "applied version $i " "$dir/agent.log" || die "$name: version $i was not applied"
	done
	stop_pid "$apid"
	stop_pid "$ppid"
	sed -n 's/.*applied version [0-9]* (.*, \([0-9]*\) ms, .*check \([0-9]*\), reload \([0-9]*\), persist.*/\1 \2 \3/p' \
		"$dir/agent.log" >"$dir/phases"
	local col label
	for col in 1 2 3; do
		label=$(echo "apply check reload" | cut -d' ' -f$col)
		printf '%-8s %-8s %8s %8s\n' "$name" "$label" \
			"$(awk -v c=$col '{ print $c }' "$dir/phases" | median)" \
			"$(awk -v c=$col '{ print $c }' "$dir/phases" | percentile 0.9)"
	done
}

{
	bench_header "Hooks: the agent's wait for --check and --reload"
	echo "$WRITES one-file writes, files consumer, --check true --reload true; ms from the agent's log"
	printf '%-8s %-8s %8s %8s\n' agent phase p50_ms p90_ms
	[ -n "${BENCH_AGENT_BASE:-}" ] && run before "$BENCH_AGENT_BASE"
	run after "$BUILDDIR/tetherd"
} | tee "$RESULTS"
