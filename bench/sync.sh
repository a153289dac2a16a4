#!/usr/bin/env bash
# bench/sync.sh: tetherctl sync of a directory tree (`bash bench/sync.sh
# SRCDIR BUILDDIR`; docs/BENCHMARKS.md, "tetherctl sync"). For each size in
# BENCH_SYNC_SIZES (default "1000 10000") files DIR/cluster/cN.json, on a
# fresh lab plane each run (BENCH_SYNC_RUNS, default 5), the wall time of:
#   create   sync of N new files (one batch, one version)
#   noop     sync --dry-run with nothing to do (read, compare)
#   dryrun   sync --dry-run with every file changed (diff of N resources)
#   change   sync of N changed files
#   export   export of N resources into an empty directory
# Medians in milliseconds go to BUILDDIR/bench-sync.txt, per-run figures to
# BUILDDIR/bench-out/sync/.
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: sync.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: sync.sh SRCDIR BUILDDIR}
BENCH_NAME=bench-sync
. "$SRCDIR/bench/lib.sh"
PLANE_BIN=$BUILDDIR/tether-plane
CTL_BIN=$BUILDDIR/tetherctl
need "$PLANE_BIN" "$CTL_BIN"
SIZES=${BENCH_SYNC_SIZES:-1000 10000}
RUNS=${BENCH_SYNC_RUNS:-5}
OUT=$BUILDDIR/bench-out/sync
RESULTS=$BUILDDIR/bench-sync.txt
rm -rf "$OUT"
mkdir -p "$OUT"

# ms CMD...: runs CMD (output to $OUT/cmd.log) and prints its wall time in ms
ms() {
	local t0=$EPOCHREALTIME rc
	"$@" >>"$OUT/cmd.log" 2>&1
	rc=$?
	awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }'
	[ $rc -eq 0 ] || [ $rc -eq 3 ] || die "failed ($rc): $*"
}

{
	bench_header "tetherctl sync"
	echo "runs: $RUNS per size; medians in ms (wall, tetherctl's whole process)"
	printf '%-8s %10s %10s %10s %10s %10s\n' files create noop dryrun change export
} >"$RESULTS"

for n in $SIZES; do
	dir=$OUT/tree-$n
	rm -rf "$dir"
	mkdir -p "$dir/cluster"
	for i in $(seq 1 "$n"); do
		printf '{"endpoints":[{"address":"10.%d.%d.1","port":%d}],"lb":"round_robin"}\n' \
			$((i / 65536 % 256)) $((i / 256 % 256)) $((1000 + i % 60000)) >"$dir/cluster/c$i.json"
	done
	for r in $(seq 1 "$RUNS"); do
		rm -rf "$OUT/data" "$OUT/export"
		"$PLANE_BIN" $PLANE_LAB_FLAGS --listen 127.0.0.1:0 --data "$OUT/data" >"$OUT/plane.log" 2>&1 &
		pid=$!
		track "$pid"
		wait_until 10 grep -q 'listening on ' "$OUT/plane.log" || die "the plane did not start"
		url=http://127.0.0.1:$(grep -o 'listening on [^ ]*' "$OUT/plane.log" | sed 's/.*://')
		wait_until 10 curl -fsS "$url/healthz" || die "the plane is not healthy"
		sed -i 's/least_conn/round_robin/' "$dir"/cluster/*.json   # the files as created
		c=$(ms "$CTL_BIN" --plane "$url" sync "$dir" --message bench)
		o=$(ms "$CTL_BIN" --plane "$url" sync "$dir" --dry-run)
		sed -i 's/round_robin/least_conn/' "$dir"/cluster/*.json
		d=$(ms "$CTL_BIN" --plane "$url" sync "$dir" --dry-run)
		g=$(ms "$CTL_BIN" --plane "$url" sync "$dir")
		e=$(ms "$CTL_BIN" --plane "$url" export "$OUT/export")
		echo "$n $c $o $d $g $e" >>"$OUT/runs.txt"
		log "$n files, run $r: create $c ms, noop $o ms, dry-run $d ms, change $g ms, export $e ms"
		stop_pid "$pid"
	done
	col() { awk -v n="$n" -v k="$1" '$1 == n { print $k }' "$OUT/runs.txt" | median; }
	printf '%-8s %10s %10s %10s %10s %10s\n' "$n" "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)" >>"$RESULTS"
done
cat "$RESULTS"
