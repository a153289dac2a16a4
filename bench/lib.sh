# bench/lib.sh: what every benchmark script shares (sourced by run.sh,
# agent.sh, consumer.sh and rollout.sh): process tracking and the exit
# trap, logging, polling waits, the small statistics and the results header.
#
# Needs bash ($EPOCHREALTIME): each script re-executes itself under bash
# first. A script sets BENCH_NAME (the log prefix) before sourcing, may set
# BENCH_ON_EXIT (shell code run at exit before the tracked processes are
# stopped), BENCH_AFTER_EXIT (run after they stopped) and BENCH_POLL
# (seconds between two polls, default 0.02).

PIDS=""
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
MACHINE="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), kernel $(uname -r)"

log() {
	echo "$BENCH_NAME: $*" >&2
}

die() {
	log "$*"
	exit 1
}

# need FILE...: every file is an executable, or the script stops (exit 2)
need() {
	local f
	for f in "$@"; do
		[ -x "$f" ] || { echo "$BENCH_NAME: $f is missing; run 'make bench'" >&2; exit 2; }
	done
}

# ---- processes ------------------------------------------------------------------

track() {
	PIDS="$PIDS $1"
}

untrack() {
	local out="" p
	for p in $PIDS; do
		[ "$p" = "$1" ] || out="$out $p"
	done
	PIDS=$out
}

stop_pid() {
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	untrack "$1"
}

bench_exit() {
	local p
	eval "${BENCH_ON_EXIT:-}"
	for p in $PIDS; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in $PIDS; do
		wait "$p" 2>/dev/null
	done
	[ -z "${BENCH_AFTER_EXIT:-}" ] || eval "$BENCH_AFTER_EXIT"
}
trap bench_exit EXIT
trap 'exit 1' INT TERM

# every stream is a descriptor in the plane and in the client
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null

# ---- waiting --------------------------------------------------------------------

# wait_until SECONDS COMMAND...: polls every BENCH_POLL seconds until the
# command succeeds; returns 1 when it never did
wait_until() {
	local deadline=$((${EPOCHREALTIME/./} / 1000 + $1 * 1000))
	shift
	while ! "$@" >/dev/null 2>&1; do
		[ $((${EPOCHREALTIME/./} / 1000)) -ge $deadline ] && return 1
		sleep "${BENCH_POLL:-0.02}"
	done
	return 0
}

# ---- figures --------------------------------------------------------------------

# kv FILE KEY: the value of the last KEY=... line in FILE (the load client's output)
kv() {
	sed -n "s/^$2=//p" "$1" | tail -n 1
}

# median: of the numbers on stdin ("-" when there are none)
median() {
	sort -g | awk '{ v[NR] = $1 }
		END {
			if (NR == 0) print "-"
			else if (NR % 2) print v[(NR + 1) / 2]
			else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
		}'
}

# percentile P: the nearest-rank P-quantile (0..1) of the numbers on stdin
percentile() {
	sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int((NR - 1) * p + 0.5) + 1; print v[i] }'
}

# bench_header TITLE: the first lines of a results file: what ran, where,
# at which commit, under which load
bench_header() {
	local rev
	echo "$1 ($(date -u +%Y-%m-%dT%H:%MZ))"
	echo "machine: $MACHINE"
	if rev=$(git -C "$SRCDIR" rev-parse --short HEAD 2>/dev/null); then
		git -C "$SRCDIR" diff --quiet HEAD 2>/dev/null || rev="$rev (with local changes)"
	else
		rev="unknown (not a git checkout)"
	fi
	echo "commit: $rev"
	echo "load average at start: $LOAD_START; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
}
