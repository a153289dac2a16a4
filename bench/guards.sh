#!/usr/bin/env bash
# bench/guards.sh: what guards cost a write (`bash bench/guards.sh SRCDIR
# BUILDDIR`; docs/BENCHMARKS.md, "Guards"). A tree of 1,000 resources --
# BENCH_GUARDS_N/2 clusters of 4 endpoints and as many files of about 200
# bytes -- is synced (tetherctl sync, one batch, one version) with every
# resource changed, BENCH_GUARDS_RUNS times (default 11) after a warm-up,
# on a fresh lab plane per case:
#   none     no guard
#   guards   10 guards, five over cluster/ (min_endpoints, max_shrink), five
#            over file/ (max_bytes, max_growth), none of them crossed: every
#            changed resource is judged by five guards
# Per run: the sync's wall time (tetherctl's whole process: read, diff,
# POST, the plane's validation and commit) and the plane's CPU over it
# (every thread's schedstat). Medians go to BUILDDIR/bench-guards.txt,
# per-run figures to BUILDDIR/bench-out/guards/.
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: guards.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: guards.sh SRCDIR BUILDDIR}
BENCH_NAME=bench-guards
. "$SRCDIR/bench/lib.sh"
PLANE_BIN=$BUILDDIR/tether-plane
CTL_BIN=$BUILDDIR/tetherctl
need "$PLANE_BIN" "$CTL_BIN"
N=${BENCH_GUARDS_N:-1000}
RUNS=${BENCH_GUARDS_RUNS:-11}
OUT=$BUILDDIR/bench-out/guards
RESULTS=$BUILDDIR/bench-guards.txt
rm -rf "$OUT"
mkdir -p "$OUT"

# tree DIR ROUND: N/2 clusters and N/2 files, every body different from
# the previous round's (a weight and a character change)
tree() {
	local dir=$1 round=$2
	mkdir -p "$dir/cluster" "$dir/file"
	awk -v n="$((N / 2))" -v r="$round" -v d="$dir" 'BEGIN {
		pad = sprintf("%0180d", 0)
		for (i = 0; i < n; i++) {
			f = d "/cluster/c" i ".json"
			printf "{\"endpoints\":[" > f
			for (e = 1; e <= 4; e++)
				printf "%s{\"address\":\"10.%d.%d.%d\",\"port\":80,\"weight\":%d}", (e > 1 ? "," : ""),
					int(i / 256) % 256, i % 256, e, 1 + (r % 100) > f
			printf "]}\n" > f
			close(f)
			f = d "/file/f" i ".json"
			printf "{\"path\":\"f/%d.txt\",\"content\":\"round %d %s\"}\n", i, r, pad > f
			close(f)
		}
	}'
}

guards() {
	local dir=$1 g
	mkdir -p "$dir/guard"
	for g in 0 1 2 3 4; do
		echo "{\"match\":\"cluster/\",\"min_endpoints\":$((g % 4 + 1)),\"max_shrink\":0.5}" >"$dir/guard/c$g.json"
		echo "{\"match\":\"file/\",\"max_bytes\":$((65536 + g)),\"max_growth\":3}" >"$dir/guard/f$g.json"
	done
}

{
	bench_header "guards on a sync"
	echo "resources: $N ($((N / 2)) clusters of 4 endpoints, $((N / 2)) files of ~200 B), every one changed per sync"
	echo "runs: $RUNS per case after a warm-up; medians (wall: tetherctl's whole process; plane CPU: all threads)"
	printf '%-8s %12s %16s\n' case wall_ms plane_cpu_ms
} >"$RESULTS"

for case in none guards; do
	dir=$OUT/tree-$case
	rm -rf "$dir" "$OUT/data-$case"
	tree "$dir" 0
	[ "$case" = guards ] && guards "$dir"
	"$PLANE_BIN" $PLANE_LAB_FLAGS --listen 127.0.0.1:0 --data "$OUT/data-$case" \
		>"$OUT/plane-$case.log" 2>&1 &
	pid=$!
	track "$pid"
	wait_until 10 grep -q 'listening on ' "$OUT/plane-$case.log" || die "the plane did not start"
	url=http://127.0.0.1:$(grep -o 'listening on [^ ]*' "$OUT/plane-$case.log" | sed 's/.*://')
	wait_until 10 curl -fsS "$url/healthz" || die "the plane is not healthy"
	"$CTL_BIN" --plane "$url" sync "$dir" >>"$OUT/cmd.log" 2>&1 || die "the first sync failed"
	for r in $(seq 0 "$RUNS"); do
		tree "$dir" $((r + 1))
		c0=$(cpu_ns "$pid")
		t0=$EPOCHREALTIME
		"$CTL_BIN" --plane "$url" sync "$dir" >>"$OUT/cmd.log" 2>&1 || die "sync failed ($case, run $r)"
		t1=$EPOCHREALTIME
		c1=$(cpu_ns "$pid")
		wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }')
		cpu=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f\n", (b - a) / 1e6 }')
		[ "$r" -eq 0 ] && continue   # the warm-up
		echo "$case $wall $cpu" >>"$OUT/runs.txt"
		log "$case, run $r: sync $wall ms, plane CPU $cpu ms"
	done
	want=$N
	[ "$case" = guards ] && want=$((N + 10))
	n=$(curl -fsS "$url/v1/resources?bodies=0" | jq '.resources | length')
	[ "$n" = "$want" ] || die "$case: the plane holds $n resources, not $want"
	stop_pid "$pid"
	col() { awk -v c="$case" -v k="$1" '$1 == c { print $k }' "$OUT/runs.txt" | median; }
	printf '%-8s %12s %16s\n' "$case" "$(col 2)" "$(col 3)" >>"$RESULTS"
done
cat "$RESULTS"
