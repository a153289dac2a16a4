#!/usr/bin/env bash
# bench/dry_run.sh: the time a dry run of a 1,000-file sync takes
# (`flock /tmp/tether-heavy.lock nice -n 19 bash bench/dry_run.sh SRCDIR
# BUILDDIR`; docs/BENCHMARKS.md, "Dry runs"). A tree of N files (default
# 1000: N/4 clusters, N/4 routes to them over one listener, N/2 files of
# about 200 bytes; BENCH_DRY_N), on a fresh lab plane (SQLite) per run
# (BENCH_DRY_RUNS, default 7), the wall time of tetherctl's whole process:
#   new       sync --dry-run, every file new: the plane checks N creates
#             (schema, unknown fields, references on the candidate, guards)
#   changed   sync --dry-run, every file changed, against the N stored
#   refused   the same with one route to a missing cluster (exit 4)
#   sync      the real sync of the changed tree (one version), for scale
# and the plane's side alone: POST /v1/batch?dry_run=1 of the changed
# tree's batch with curl (api). Medians in milliseconds go to
# BUILDDIR/bench-dry-run.txt, per-run figures to BUILDDIR/bench-out/dry-run/.
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: dry_run.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: dry_run.sh SRCDIR BUILDDIR}
BENCH_NAME=bench-dry-run
. "$SRCDIR/bench/lib.sh"
PLANE_BIN=$BUILDDIR/tether-plane
CTL_BIN=$BUILDDIR/tetherctl
need "$PLANE_BIN" "$CTL_BIN"
N=${BENCH_DRY_N:-1000}
RUNS=${BENCH_DRY_RUNS:-7}
OUT=$BUILDDIR/bench-out/dry-run
RESULTS=$BUILDDIR/bench-dry-run.txt
rm -rf "$OUT"
mkdir -p "$OUT"

# ms WANT CMD...: runs CMD (output to $OUT/cmd.log), prints its wall time
# in ms; its exit status must be WANT
ms() {
	local want=$1 t0=$EPOCHREALTIME rc
	shift
	"$@" >>"$OUT/cmd.log" 2>&1
	rc=$?
	awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }'
	[ $rc -eq "$want" ] || die "exit $rc, not $want: $*"
}

# the tree: N/4 clusters, N/4 routes, one listener, the rest files
tree=$OUT/tree
mkdir -p "$tree/cluster" "$tree/route" "$tree/listener" "$tree/file"
q=$((N / 4))
echo '{"address":"127.0.0.1","port":8080}' >"$tree/listener/main.json"
for i in $(seq 1 "$q"); do
	printf '{"endpoints":[{"address":"10.%d.%d.1","port":%d,"weight":2}],"lb":"round_robin"}\n' \
		$((i / 256 % 256)) $((i % 256)) $((1000 + i)) >"$tree/cluster/c$i.json"
	printf '{"listener":"main","host":"h%d.example.com","path":"/round_robin","cluster":"c%d"}\n' "$i" "$i" >"$tree/route/r$i.json"
done
pad=$(head -c 160 /dev/zero | tr '\0' x)
for i in $(seq 1 $((N - 2 * q - 1))); do
	printf '{"path":"conf.d/f%d.conf","content":"%s round_robin\\n","mode":"0644"}\n' "$i" "$pad" >"$tree/file/f$i.json"
done
files=$(find "$tree" -name '*.json' | wc -l)

{
	bench_header "dry runs"
	echo "$files files ($q clusters, $q routes, 1 listener, $((files - 2 * q - 1)) files); runs: $RUNS; medians in ms"
	echo "(wall, tetherctl's whole process; api: the plane's POST /v1/batch?dry_run=1 alone, curl)"
	printf '%-8s %10s %10s %10s %10s %10s\n' files new changed refused api sync
} >"$RESULTS"

for r in $(seq 1 "$RUNS"); do
	rm -rf "$OUT/data"
	"$PLANE_BIN" $PLANE_LAB_FLAGS --listen 127.0.0.1:0 --data "$OUT/data" >"$OUT/plane.log" 2>&1 &
	pid=$!
	track "$pid"
	# the whole line (a trailing space after the port): not a line half written
	wait_until 10 grep -q 'listening on [0-9.]*:[0-9][0-9]* ' "$OUT/plane.log" || die "the plane did not start"
	url=http://127.0.0.1:$(grep -o 'listening on [0-9.]*:[0-9]*' "$OUT/plane.log" | sed 's/.*://')
	wait_until 10 curl -fsS "$url/healthz" || die "the plane is not healthy"
	sed -i 's/least_conn/round_robin/' "$tree"/*/*.json   # the files as created
	rm -f "$tree/route/zz-refused.json"
	a=$(ms 3 "$CTL_BIN" --plane "$url" sync "$tree" --dry-run)
	"$CTL_BIN" --plane "$url" sync "$tree" --message bench >>"$OUT/cmd.log" 2>&1 || die "the first sync failed"
	sed -i 's/round_robin/least_conn/' "$tree"/*/*.json
	b=$(ms 3 "$CTL_BIN" --plane "$url" sync "$tree" --dry-run)
	echo '{"listener":"main","host":"refused.example.com","cluster":"missing"}' >"$tree/route/zz-refused.json"
	c=$(ms 4 "$CTL_BIN" --plane "$url" sync "$tree" --dry-run)
	rm -f "$tree/route/zz-refused.json"
	# the batch the changed tree makes, as tetherctl sends it
	jq -n -c --arg dir "$tree" '{upserts: [inputs | {name: (input_filename | ltrimstr($dir + "/") | rtrimstr(".json")), body: .}]}' \
		"$tree"/*/*.json >"$OUT/batch.json"
	t0=$EPOCHREALTIME
	code=$(curl -sS -o "$OUT/answer.json" -w '%{http_code}' -X POST --data-binary "@$OUT/batch.json" "$url/v1/batch?dry_run=1")
	d=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }')
	[ "$code" = 200 ] || die "the dry run's answer is $code: $(cat "$OUT/answer.json")"
	[ "$(jq '.changes | length' "$OUT/answer.json")" -ge $((files - 1)) ] || die "the dry run does not see the changes"
	e=$(ms 0 "$CTL_BIN" --plane "$url" sync "$tree")
	echo "$files $a $b $c $d $e" >>"$OUT/runs.txt"
	log "$files files, run $r: new $a ms, changed $b ms, refused $c ms, api $d ms, sync $e ms"
	stop_pid "$pid"
done
col() { awk -v k="$1" '{ print $k }' "$OUT/runs.txt" | median; }
printf '%-8s %10s %10s %10s %10s %10s\n' "$files" "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)" >>"$RESULTS"
cat "$RESULTS"
