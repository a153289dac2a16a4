#!/usr/bin/env bash
# bench/consumer.sh: the nginx and haproxy consumers (run by `make bench`,
# or `bash bench/consumer.sh SRCDIR BUILDDIR`). For each consumer: (a) the
# time from a write on the plane (just before the PUT) until the proxy
# serves the new upstream, over BENCH_CHANGES changes that flip a cluster
# between two backends (curl polls through the proxy); (b) with 1,000
# clusters and 1,000 routes loaded, the agent's own account of one
# one-cluster change: render (stage), check (nginx -t / haproxy -c),
# reload (signal + the marker showing the new generation), persist.
# Results go to BUILDDIR/bench-consumer.txt.

# $EPOCHREALTIME (bench/lib.sh) is bash's
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: consumer.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: consumer.sh SRCDIR BUILDDIR}
CHANGES=${BENCH_CHANGES:-50}
BIG=${BENCH_BIG_CLUSTERS:-1000}
CONSUMERS=${BENCH_CONSUMERS:-nginx haproxy}
OUT=$BUILDDIR/bench-out/consumer
RESULTS=$BUILDDIR/bench-consumer.txt
rm -rf "$OUT"
mkdir -p "$OUT"
chmod 755 "$OUT" "$BUILDDIR/bench-out"
PROXY_STOP=""
BENCH_NAME=consumer.sh
BENCH_ON_EXIT='eval "$PROXY_STOP"'
BENCH_POLL=0.005   # the latencies are measured by polling: poll often
. "$(dirname "$0")/lib.sh"
need "$BUILDDIR/tether-plane" "$BUILDDIR/tetherd"
ms() { echo $(($(date +%s%N) / 1000000)); }
median_of() { percentile 0.5; }

: >"$RESULTS"
for consumer in $CONSUMERS; do
	dir=$OUT/$consumer
	mkdir -p "$dir"
	chmod 755 "$dir"
	"$BUILDDIR/tether-plane" --listen 127.0.0.1:0 --data "$dir/plane" --heartbeat 3600 $PLANE_LAB_FLAGS >"$dir/plane.log" 2>&1 &
	track "$!"
	wait_until 10 grep -q 'listening on' "$dir/plane.log" || { echo "plane did not start" >&2; exit 1; }
	url=http://127.0.0.1:$(grep -o 'listening on [^ ]*' "$dir/plane.log" | sed 's/.*://')
	for name in blue green; do
		node "$SRCDIR/tests/tools/backend.mjs" 0 "$name" >"$dir/$name.port" 2>&1 &
		track "$!"
		wait_until 10 grep -q listening "$dir/$name.port" || exit 1
	done
	blue=$(awk '{print $2}' "$dir/blue.port")
	green=$(awk '{print $2}' "$dir/green.port")
	http=$(free_port)
	marker=$(free_port)
	curl -sS -X POST "$url/v1/batch" --data "{\"upserts\":[
		{\"name\":\"cluster/web\",\"body\":{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$blue}]}},
		{\"name\":\"listener/http\",\"body\":{\"address\":\"127.0.0.1\",\"port\":$http}},
		{\"name\":\"route/web\",\"body\":{\"listener\":\"http\",\"path\":\"/\",\"cluster\":\"web\"}}]}" >/dev/null
	extra=()
	if [ "$consumer" = nginx ]; then
		cat >"$dir/proxy.conf" <<NGINX
pid $dir/proxy.pid;
error_log $dir/proxy-error.log;
events { worker_connections 1024; }
http {
    access_log off;
    include $dir/out/current/*.conf;
}
NGINX
	else
		cat >"$dir/proxy.conf" <<HAPROXY
global
    log stderr format raw local0 err
defaults
    timeout connect 5s
    timeout client 30s
    timeout server 30s
HAPROXY
		extra=(--base-config "$dir/proxy.conf")
	fi
	# --traffic-listen off: the figures published in docs/BENCHMARKS.md
	# were measured before tetherd counted traffic by default (what
	# counting costs: its "Traffic gates" section)
	"$BUILDDIR/tetherd" --plane "$url" --node bench --consumer "$consumer" --state-dir "$dir/state" \
		--output-dir "$dir/out" --pidfile "$dir/proxy.pid" --marker "127.0.0.1:$marker" "${extra[@]}" \
		--traffic-listen off >"$dir/agent.log" 2>&1 &
	track "$!"
	wait_until 20 test -L "$dir/out/current" || { echo "agent did not render" >&2; exit 1; }
	wait_until 20 grep -q 'applied version 1 ' "$dir/agent.log" || { echo "agent did not apply" >&2; exit 1; }
	if [ "$consumer" = nginx ]; then
		nginx -p "$dir" -c "$dir/proxy.conf" || exit 1
		PROXY_STOP="nginx -p '$dir' -c '$dir/proxy.conf' -s quit 2>/dev/null; $PROXY_STOP"
	else
		haproxy -W -D -p "$dir/proxy.pid" -f "$dir/proxy.conf" -f "$dir/out/current/" >"$dir/proxy.log" 2>&1 || exit 1
		PROXY_STOP="kill \$(cat '$dir/proxy.pid') 2>/dev/null; $PROXY_STOP"
	fi
	serves() { [ "$(curl -s "http://127.0.0.1:$http/x")" = "$1 /x" ]; }
	wait_until 10 serves blue || { echo "$consumer does not serve" >&2; exit 1; }

	# (a) write -> served
	: >"$dir/latency.txt"
	now_on=blue
	for i in $(seq 1 "$CHANGES"); do
		if [ $now_on = blue ]; then next=green port=$green; else next=blue port=$blue; fi
		t0=$(ms)
		curl -sS -X PUT "$url/v1/resources/cluster/web" \
			--data "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$port}]}" >/dev/null
		wait_until 30 serves $next || { echo "change $i not served" >&2; exit 1; }
		echo $(($(ms) - t0)) >>"$dir/latency.txt"
		now_on=$next
	done
	p50=$(percentile 0.5 <"$dir/latency.txt")
	p99=$(percentile 0.99 <"$dir/latency.txt")
	max=$(sort -n "$dir/latency.txt" | tail -n 1)
	printf '%s: write on the plane -> served by %s, %s changes: p50 %s ms, p99 %s ms, max %s ms\n' \
		"$consumer" "$consumer" "$CHANGES" "$p50" "$p99" "$max" | tee -a "$RESULTS"

	# (b) 1,000 clusters: what one change costs the agent
	awk -v n="$BIG" -v port="$blue" 'BEGIN {
		printf "{\"upserts\":["
		for (i = 0; i < n; i++) {
			printf "%s{\"name\":\"cluster/c%d\",\"body\":{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":%d,\"weight\":%d}]}}", \
				(i ? "," : ""), i, port, 1 + i % 5
			printf ",{\"name\":\"route/r%d\",\"body\":{\"listener\":\"http\",\"host\":\"c%d.example.com\",\"path\":\"/\",\"cluster\":\"c%d\"}}", i, i, i
		}
		printf "]}"
	}' >"$dir/big.json"
	v=$(curl -sS -X POST --data-binary @"$dir/big.json" "$url/v1/batch" | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
	wait_until 60 grep -q "applied version $v " "$dir/agent.log" || { echo "big batch not applied" >&2; exit 1; }
	: >"$dir/big-changes.log"
	for i in $(seq 1 10); do
		v=$(curl -sS -X PUT "$url/v1/resources/cluster/c$((i * 7))" \
			--data "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$green,\"weight\":$((1 + i % 3))}]}" |
			sed -n 's/.*"version":\([0-9]*\).*/\1/p')
		wait_until 60 grep -q "applied version $v " "$dir/agent.log" || { echo "change $v not applied" >&2; exit 1; }
		grep "applied version $v " "$dir/agent.log" >>"$dir/big-changes.log"
	done
	field() { sed -n "s/.* $1 \\([0-9]*\\)[^0-9].*/\\1/p" "$dir/big-changes.log" | median_of; }
	total=$(sed -n 's/.*changes, \([0-9]*\) ms,.*/\1/p' "$dir/big-changes.log" | median_of)
	conf_bytes=$(stat -L -c %s "$dir/out/current/tether."* | head -n 1)
	printf '%s: %s clusters + %s routes (config %s bytes), one cluster changed, median of 10: total %s ms = render %s + check %s + reload/confirm %s + persist %s\n' \
		"$consumer" "$BIG" "$BIG" "$conf_bytes" "$total" "$(field stage)" "$(field check)" "$(field reload)" \
		"$(field persist)" | tee -a "$RESULTS"
	eval "$PROXY_STOP"
	PROXY_STOP=""
done
