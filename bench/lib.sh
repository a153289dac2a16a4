# bench/lib.sh: what every benchmark script shares (sourced by run.sh,
# agent.sh, consumer.sh, rollout.sh, trust.sh and sync.sh): process tracking and the
# exit trap, logging, the flags of a lab plane, processes' memory and CPU,
# polling waits, the small statistics and the results header.
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

# Every plane a benchmark starts is a lab on loopback: --insecure, since the
# plane refuses to start without a credential otherwise (the scripts send
# none), and --statement-ttl 10800, since they run it with --heartbeat 3600
# and the plane wants a statement's TTL to cover three heartbeats (a check
# it makes with or without --signing-key).
PLANE_LAB_FLAGS="--insecure --statement-ttl 10800"

# ---- processes' costs -----------------------------------------------------------

# rss_kb PID: VmRSS in KiB
rss_kb() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# cpu_ticks PID: user + system time in clock ticks (getconf CLK_TCK)
cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# cpu_ns PID: nanoseconds on a CPU of every live thread of PID
# (/proc/PID/task/*/schedstat): finer than cpu_ticks, for costs of a
# fraction of a millisecond; threads that have exited are not counted
cpu_ns() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# log_epoch FILE REGEX: the time of the last line of a tether log matching
# REGEX, in epoch seconds (the log's UTC timestamp, millisecond precision)
log_epoch() {
	local ts
	ts=$(grep -- "$2" "$1" | tail -n 1 | cut -d' ' -f1)
	[ -n "$ts" ] && date -u -d "$ts" +%s.%N | cut -c1-14
}

# clusters_batch N: a POST /v1/batch body of N clusters, cluster/c0..,
# one endpoint each (10.a.b.c, distinct up to 16M)
clusters_batch() {
	awk -v n="$1" 'BEGIN {
		printf "{\"upserts\":["
		for (i = 0; i < n; i++)
			printf "%s{\"name\":\"cluster/c%d\",\"body\":{\"endpoints\":[{\"address\":\"10.%d.%d.%d\",\"port\":80,\"weight\":1}],\"lb\":\"round_robin\"}}",
				(i ? "," : ""), i, int(i / 65536) % 256, int(i / 256) % 256, i % 256
		printf "]}"
	}'
}

# ---- timed writes ---------------------------------------------------------------

# timed_put NAME BODY STARTFILE: one PUT to the plane on 127.0.0.1:$PORT
# (plain HTTP) on a connection opened first; the start time, taken just
# before the request goes out, is appended to STARTFILE. Prints the new
# version.
timed_put() {
	local name=$1 body=$2 startfile=$3 reply
	exec 3<>"/dev/tcp/127.0.0.1/$PORT" || return 1
	local nl=$'\r\n'
	local req="PUT /v1/resources/$name HTTP/1.1${nl}Host: 127.0.0.1:$PORT${nl}"
	req+="Content-Type: application/json${nl}Content-Length: ${#body}${nl}Connection: close${nl}${nl}$body"
	local t0=$EPOCHREALTIME
	printf '%s' "$req" >&3
	printf '%s\n' "$t0" >>"$startfile"
	reply=$(cat <&3)
	exec 3>&-
	case $reply in
	"HTTP/1.1 200"*) ;;
	*) log "PUT $name failed: $(printf '%s' "$reply" | head -n 1)"; return 1 ;;
	esac
	printf '%s' "$reply" | sed -n 's/.*"version":\([0-9]*\).*/\1/p'
}

# cluster_body I: the body of a one-resource write, different for each I
cluster_body() {
	printf '{"endpoints":[{"address":"10.9.%d.%d","port":8080,"weight":2}],"lb":"least_conn"}' \
		$(($1 / 250)) $(($1 % 250))
}

# ---- waiting --------------------------------------------------------------------

# wait_until SECONDS COMMAND...: polls every BENCH_POLL seconds until the
# command succeeds; returns 1 when it never did
wait_until() {
	local deadline=$((${EPOCHREALTIME/./} / 1000 + $1 * 1000))
	shift
	while ! "$@" >/dev/null 2>&1; do
		[ $((${EPOCHREALTIME/./} / 1000)) -ge $deadline ] && return 1
		nap "${BENCH_POLL:-0.02}"
	done
	return 0
}

# nap SECONDS: a sleep that starts no process (a read that times out on a
# pipe nobody writes): a wait loop must not spend the CPU it measures
nap() {
	[ -n "${BENCH_NAP_FD:-}" ] || exec {BENCH_NAP_FD}<> <(:)
	read -r -t "$1" -u "$BENCH_NAP_FD" _ || :
}

# wait_for FILE REGEX SECONDS: until a line of FILE matches REGEX (an ERE,
# bash's =~), reading only what was added since the last look and starting
# no process: a grep and a sleep every 20 ms cost a few percent of a core,
# charged to whatever the bench is measuring meanwhile (a reconnect storm
# on 2 cores); 1 when no line matched in time
wait_for() {
	local file=$1 re=$2 deadline=$((${EPOCHREALTIME/./} / 1000 + $3 * 1000)) fd='' line part=''
	while :; do
		[ -z "$fd" ] && [ -e "$file" ] && exec {fd}<"$file"
		if [ -n "$fd" ]; then
			while IFS= read -r -u "$fd" line; do
				line=$part$line part=''
				if [[ $line =~ $re ]]; then
					exec {fd}<&-
					return 0
				fi
			done
			# a line still being written: kept for the next look
			part=$part$line
		fi
		if [ $((${EPOCHREALTIME/./} / 1000)) -ge "$deadline" ]; then
			[ -n "$fd" ] && exec {fd}<&-
			return 1
		fi
		nap "${BENCH_POLL:-0.02}"
	done
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

# free_port: a loopback TCP port in use by no socket in any state, below the
# kernel's ephemeral range (32768+: an outgoing connection's local port
# would make a proxy's bind fail later)
free_port() {
	local p
	while :; do
		p=$((10000 + RANDOM % 20000))
		ss -Htan "( sport = :$p )" | grep -q . || { echo "$p"; return; }
	done
}
