#!/usr/bin/env bash
# bench/drain.sh: nginx's old workers under long-lived connections, with
# the drain guard and without it, in one run (run by `make bench`, or
# `bash bench/drain.sh SRCDIR BUILDDIR`). For each: nginx (2 workers) with
# BENCH_DRAIN_HELD answers held open through it (tests/tools/holder.mjs;
# each lasts BENCH_DRAIN_HOLD_MS and is replaced as it ends, so every
# generation gets some), and BENCH_DRAIN_CHANGES writes on the plane spread
# over BENCH_DRAIN_SECONDS; a sampler reads /proc every 100 ms: the old
# workers still draining (children of the master titled "worker process is
# shutting down"), their VmRSS summed (what tetherd reports) and their Pss
# summed (smaps_rollup: shared pages divided among their users). Reported:
# the peaks, the SIGHUPs, the applies, the deferrals, the time until the
# last version serves, failed held answers. "guard" runs tetherd's
# defaults; "no guard" runs --max-draining 100000, which never holds.
# Results go to BUILDDIR/bench-drain.txt.

# $EPOCHREALTIME (bench/lib.sh) is bash's
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: drain.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: drain.sh SRCDIR BUILDDIR}
HELD=${BENCH_DRAIN_HELD:-500}
HOLD_MS=${BENCH_DRAIN_HOLD_MS:-10000}
CHANGES=${BENCH_DRAIN_CHANGES:-100}
SECONDS_=${BENCH_DRAIN_SECONDS:-10}
OUT=$BUILDDIR/bench-out/drain
RESULTS=$BUILDDIR/bench-drain.txt
rm -rf "$OUT"
mkdir -p "$OUT"
chmod 755 "$OUT" "$BUILDDIR/bench-out"
NGINX_STOP=""
BENCH_NAME=drain.sh
BENCH_ON_EXIT='eval "$NGINX_STOP"'
BENCH_POLL=0.05
. "$(dirname "$0")/lib.sh"
need "$BUILDDIR/tether-plane" "$BUILDDIR/tetherd"
command -v nginx >/dev/null || die "nginx is not installed"
command -v node >/dev/null || die "node is not installed"

# draining MASTER: "COUNT RSS_BYTES PSS_BYTES" of the master's old workers
draining() {
	local pid n=0 rss=0 pss=0 kb
	for pid in $(ps --ppid "$1" -o pid= 2>/dev/null); do
		{ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q 'worker process is shutting down' || continue
		n=$((n + 1))
		kb=$(awk '$1 == "VmRSS:" {print $2}' "/proc/$pid/status" 2>/dev/null)
		rss=$((rss + ${kb:-0}))
		kb=$(awk '$1 == "Pss:" {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null)
		pss=$((pss + ${kb:-0}))
	done
	echo "$n $((rss * 1024)) $((pss * 1024))"
}
# metric PORT NAME: a series of the agent's scrape
metric() {
	curl -s -m 3 "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'
}
mib() {
	awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'
}

LINES=$OUT/lines.txt
: >"$LINES"

run() {
	local label=$1
	shift
	local dir=$OUT/${label// /-}
	mkdir -p "$dir"
	chmod 755 "$dir"
	"$BUILDDIR/tether-plane" --listen 127.0.0.1:0 --data "$dir/plane" --heartbeat 3600 $PLANE_LAB_FLAGS \
		>"$dir/plane.log" 2>&1 &
	track "$!"
	wait_until 10 grep -q 'listening on' "$dir/plane.log" || die "plane did not start"
	local url
	url=http://127.0.0.1:$(grep -o 'listening on [^ ]*' "$dir/plane.log" | sed 's/.*://')
	node "$SRCDIR/tests/tools/stream-backend.mjs" 0 sb >"$dir/sb.port" 2>"$dir/sb.log" &
	track "$!"
	wait_until 10 grep -q listening "$dir/sb.port" || die "stream backend did not start"
	local sb http marker
	sb=$(awk '{print $2}' "$dir/sb.port")
	http=$(free_port)
	marker=$(free_port)
	local i body="{\"upserts\":[{\"name\":\"cluster/s\",\"body\":{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$sb}]}},"
	body+="{\"name\":\"listener/web\",\"body\":{\"address\":\"127.0.0.1\",\"port\":$http}},"
	body+="{\"name\":\"route/stream\",\"body\":{\"listener\":\"web\",\"host\":\"*\",\"path\":\"/stream\",\"cluster\":\"s\"}}"
	for i in 0 1 2 3 4; do
		body+=",{\"name\":\"route/r$i\",\"body\":{\"listener\":\"web\",\"host\":\"*\",\"path\":\"/r$i/init\",\"cluster\":\"s\"}}"
	done
	curl -sS -X POST "$url/v1/batch" --data "$body]}" >/dev/null || die "cannot load the configuration"
	cat >"$dir/nginx.conf" <<NGINX
pid $dir/nginx.pid;
error_log $dir/nginx-error.log notice;
worker_processes 2;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
    access_log off;
    include $dir/out/current/*.conf;
}
NGINX
	# --traffic-listen off: the figures published in docs/BENCHMARKS.md
	# were measured before tetherd counted traffic by default
	"$BUILDDIR/tetherd" --plane "$url" --node bench --consumer nginx --state-dir "$dir/state" \
		--output-dir "$dir/out" --pidfile "$dir/nginx.pid" --marker "127.0.0.1:$marker" \
		--metrics-listen 127.0.0.1:0 --traffic-listen off "$@" >"$dir/agent.log" 2>&1 &
	track "$!"
	wait_until 20 grep -q 'applied version 1 ' "$dir/agent.log" || die "the agent did not apply"
	local mport
	mport=$(grep -o 'metrics: serving http://127.0.0.1:[0-9]*' "$dir/agent.log" | sed 's/.*://')
	nginx -p "$dir" -c "$dir/nginx.conf" || die "nginx did not start"
	NGINX_STOP="nginx -p '$dir' -c '$dir/nginx.conf' -s stop 2>/dev/null"
	wait_until 10 test -s "$dir/nginx.pid" || die "no nginx pid"
	local master
	master=$(cat "$dir/nginx.pid")
	wait_until 10 sh -c "[ \"\$(curl -s http://127.0.0.1:$marker/tether-generation)\" = \"\$(readlink '$dir/out/current' | sed 's/^gen-//')\" ]" ||
		die "nginx does not serve the agent's generation"
	node "$SRCDIR/tests/tools/holder.mjs" "$dir/hold.json" --url "http://127.0.0.1:$http" --streams "$HELD" \
		--hold "$HOLD_MS" >"$dir/hold.port" 2>"$dir/hold.log" &
	local holder=$!
	track "$holder"
	held() { [ "$(jq -r .streams_answered "$dir/hold.json" 2>/dev/null)" -ge "$HELD" ]; }
	wait_until 30 held || die "$HELD answers are not held"

	# the sampler: draining workers every 100 ms
	(
		while :; do
			echo "$EPOCHREALTIME $(draining "$master")"
			sleep 0.1
		done
	) >"$dir/samples" &
	local sampler=$!
	track "$sampler"
	local h0 t0 v last
	h0=$(grep -c 'signal 1 (SIGHUP) received' "$dir/nginx-error.log")
	t0=$EPOCHREALTIME
	for i in $(seq 0 $((CHANGES - 1))); do
		v=$(curl -sS -X PUT "$url/v1/resources/route/r$((i % 5))" \
			--data "{\"listener\":\"web\",\"host\":\"*\",\"path\":\"/r$((i % 5))/w$i\",\"cluster\":\"s\"}" |
			sed -n 's/.*"version":\([0-9]*\).*/\1/p')
		# the next write at its time: CHANGES spread over SECONDS_
		local next
		next=$(awk -v t0="$t0" -v i="$i" -v n="$CHANGES" -v s="$SECONDS_" -v now="$EPOCHREALTIME" \
			'BEGIN {d = t0 + (i + 1) * s / n - now; if (d > 0) printf "%.3f", d; else print 0}')
		sleep "$next"
	done
	last=$v
	wait_until 120 grep -q "applied version $last " "$dir/agent.log" || die "version $last was not applied"
	local t_last
	t_last=$(awk -v t0="$t0" -v now="$EPOCHREALTIME" 'BEGIN {printf "%.1f", now - t0}')
	# the draining after the last reload: until the held answers of every
	# old generation ended (HOLD_MS after it at most)
	sleep "$(awk -v ms="$HOLD_MS" 'BEGIN {printf "%.1f", ms / 1000 + 1}')"
	stop_pid "$sampler"
	local hups applies deferred forced held_s peak peak_rss peak_pss
	hups=$(($(grep -c 'signal 1 (SIGHUP) received' "$dir/nginx-error.log") - h0))
	applies=$(grep -c 'applied version' "$dir/agent.log")
	applies=$((applies - 1))
	deferred=$(metric "$mport" tetherd_reloads_deferred_total)
	forced=$(metric "$mport" tetherd_reloads_forced_total)
	held_s=$(metric "$mport" tetherd_reload_defer_seconds_total)
	peak=$(awk '$2 > m {m = $2} END {print m + 0}' "$dir/samples")
	peak_rss=$(awk '$3 > m {m = $3} END {print m + 0}' "$dir/samples")
	peak_pss=$(awk '$4 > m {m = $4} END {print m + 0}' "$dir/samples")
	stop_pid "$holder"
	local failed
	failed=$(jq -r '.streams_failed + .fresh_failed' "$dir/hold.json")
	printf '%s (%s): peak %s old workers draining, %s MiB VmRSS summed (%s MiB Pss); %s SIGHUPs and applies for %s versions; %s deferrals (%s s held, %s forced); last version served %s s after the first write; %s held answers failed; %s samples\n' \
		"$label" "${*:-defaults}" "$peak" "$(mib "$peak_rss")" "$(mib "$peak_pss")" "$hups" "$CHANGES" \
		"${deferred:-?}" "${held_s:-?}" "${forced:-?}" "$t_last" "$failed" "$(wc -l <"$dir/samples")" |
		tee -a "$LINES"
	[ "$hups" = "$applies" ] || log "$label: $hups SIGHUPs but $applies applies"
	eval "$NGINX_STOP"
	NGINX_STOP=""
	local p
	for p in $PIDS; do
		stop_pid "$p"
	done
}

run guard
run "no guard" --max-draining 100000
{
	bench_header "drain.sh: nginx's old workers draining under $HELD held answers (each ${HOLD_MS} ms) and $CHANGES changes in $SECONDS_ s"
	echo "nginx: $(nginx -v 2>&1 | sed 's/.*: //'), worker_processes 2; node $(node --version)"
	cat "$LINES"
} >"$RESULTS"
log "results in $RESULTS"
