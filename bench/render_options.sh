#!/usr/bin/env bash
# bench/render_options.sh: what route and cluster options cost a render
# (`bash bench/render_options.sh SRCDIR BUILDDIR`; docs/BENCHMARKS.md,
# "Route options"). bench/render_micro renders the agent's state with the
# agent's renderers (agent/consumer/render_*.c, in-process, no I/O): 1,000
# and 10,000 routes (10 listeners, 100 hosts, a cluster per 10 routes),
# each with every option set (timeout, strip_prefix, headers, websocket,
# retries, max_body; clusters with health and keepalive) and with none,
# for nginx and haproxy; each case BENCH_RENDER_RUNS times (default 11),
# the median and the fastest in ms and the main file's size. Results go
# to BUILDDIR/bench-render-options.txt.
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: render_options.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: render_options.sh SRCDIR BUILDDIR}
BENCH_NAME=bench-render-options
. "$SRCDIR/bench/lib.sh"
MICRO=$BUILDDIR/bench/render_micro
need "$MICRO"
RUNS=${BENCH_RENDER_RUNS:-11}
RESULTS=$BUILDDIR/bench-render-options.txt

{
	bench_header "render time of routes with every option and with none"
	printf '%-8s %7s %8s %10s %10s %12s\n' consumer routes options median_ms min_ms bytes
	for consumer in nginx haproxy; do
		for n in 1000 10000; do
			for o in none all; do
				flag=()
				[ "$o" = all ] && flag=(--options)
				line=$("$MICRO" --consumer "$consumer" --routes "$n" --runs "$RUNS" "${flag[@]}") ||
					die "render_micro failed ($consumer, $n routes, options $o)"
				log "$line"
				r_median_ms=$(echo "$line" | sed -n 's/.* median_ms=\([^ ]*\).*/\1/p')
				r_min_ms=$(echo "$line" | sed -n 's/.* min_ms=\([^ ]*\).*/\1/p')
				r_bytes=$(echo "$line" | sed -n 's/.* bytes=\([^ ]*\).*/\1/p')
				printf '%-8s %7s %8s %10s %10s %12s\n' "$consumer" "$n" "$o" "$r_median_ms" "$r_min_ms" "$r_bytes"
			done
		done
	done
} >"$RESULTS"
cat "$RESULTS"
