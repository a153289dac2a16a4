#!/usr/bin/env bash
# bench/boot.sh: how fast tetherd boots from last-good (run by `make bench`,
# or as `bash bench/boot.sh SRCDIR BUILDDIR`). A plane holds
# BENCH_BOOT_FILES `file` resources of BENCH_BOOT_BYTES bytes each (default
# 1,000 of 100, in 10 directories); a tetherd (files consumer) syncs them
# into last-good, then the plane is stopped and every measured boot is
# offline, from last-good alone (a closed port). The cases
# (BENCH_BOOT_CASES, default "intact lost"):
#   intact   the output is as the last boot left it: from the exec until
#            the log line `node N at version V (...)` tetherd prints right
#            after its boot, where it sends READY=1 under systemd
#   lost     the output directory is gone (moved aside, then `sync`, so no
#            earlier write-back is counted): until the same line, when all
#            files are back and durable (boot returns only then)
#   deleted  the same, but the output was deleted (rm -rf, sync) just before
#            the boot: on ext4 without a journal, each file created within
#            a minute (up to 5 while the inode table is dirty) of many
#            deletions is slower (the allocator checks every inode freed in
#            that time: recently_deleted() in fs/ext4/ialloc.c). Not in the
#            default cases, since it slows every case after it for a while.
#   cold     intact, after a reboot: the page cache dropped first (sync;
#            echo 3 >/proc/sys/vm/drop_caches: root only), so tetherd, its
#            libraries, last-good and every output file come from the disk.
#            Not in the default cases (root, and it slows the whole machine).
# After every boot the output is compared with the seeded one (names,
# contents, modes). Times are CLOCK_MONOTONIC, taken by a small perl
# wrapper that starts tetherd with its stderr on a pipe and reads it line by
# line (no polling). Each figure is the median of BENCH_RUNS runs (default
# 7). With BENCH_BOOT_BASE=PATH (another tetherd, e.g. the parent commit's)
# both are measured in the same run, interleaved (base new, new base, ...),
# each with its own last-good and output. BENCH_BOOT_DIR=DIR puts the
# last-good and the outputs on another file system (default
# BUILDDIR/bench-out/boot/data); BENCH_KEEP=1 keeps them. Results go to
# BUILDDIR/bench-boot.txt, per-run logs to BUILDDIR/bench-out/boot/.

# $EPOCHREALTIME (bench/lib.sh) is bash's
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: boot.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: boot.sh SRCDIR BUILDDIR}
FILES=${BENCH_BOOT_FILES:-1000}
BYTES=${BENCH_BOOT_BYTES:-100}
RUNS=${BENCH_RUNS:-7}
CASES=${BENCH_BOOT_CASES:-intact lost}
PLANE=$BUILDDIR/tether-plane
AGENT=$BUILDDIR/tetherd
BASE=${BENCH_BOOT_BASE:-}
OUT=$BUILDDIR/bench-out/boot
DATA=${BENCH_BOOT_DIR:-$OUT/data}
RESULTS=$BUILDDIR/bench-boot.txt
BENCH_NAME=boot.sh
. "$(dirname "$0")/lib.sh"
need "$PLANE" "$AGENT"
[ -z "$BASE" ] || need "$BASE"
command -v perl >/dev/null || die "needs perl (Time::HiRes) for the monotonic clock"
rm -rf "$OUT"
mkdir -p "$OUT"
[ ! -e "$DATA" ] || DATA=$DATA/boot.$$
mkdir -p "$DATA/trash" || die "cannot create $DATA"
# (BENCH_KEEP=1 keeps it, for a look at what a run left)
[ "${BENCH_KEEP:-0}" = 1 ] || BENCH_AFTER_EXIT='rm -rf "$DATA"' 

# timed_boot LOG AGENT ARGS...: starts the agent, prints the milliseconds
# (CLOCK_MONOTONIC) from just before the exec until it logs 'node ... at
# version', then stops it (SIGTERM) and waits; its output goes to LOG.
# Exit status 1 when the line never came (10 s) or the agent died first.
timed_boot() {
	perl -MTime::HiRes=clock_gettime,CLOCK_MONOTONIC -e '
		my $log = shift;
		open(my $lf, ">", $log) or die "$log: $!";
		pipe(my $r, my $w) or die "pipe: $!";
		my $t0 = clock_gettime(CLOCK_MONOTONIC);
		my $pid = fork() // die "fork: $!";
		if ($pid == 0) {
			close $r;
			open(STDERR, ">&", $w); open(STDOUT, ">&", $w);
			exec @ARGV or die "exec: $!";
		}
		close $w;
		my $ms;
		local $SIG{ALRM} = sub { kill "KILL", $pid; die "timeout\n" };
		alarm 10;
		while (my $line = <$r>) {
			print $lf $line;
			if ($line =~ / at version \d+ \(/) {
				$ms = (clock_gettime(CLOCK_MONOTONIC) - $t0) * 1000;
				last;
			}
		}
		alarm 0;
		kill "TERM", $pid;
		while (my $line = <$r>) { print $lf $line; }
		waitpid($pid, 0);
		defined $ms or exit 1;
		printf "%.1f\n", $ms;
	' "$@"
}

# file_batch N BYTES: a POST /v1/batch body of N file resources, file/fI
# at dI%10/fI.conf, content BYTES long (a line repeated and cut), mode 0644
file_batch() {
	awk -v n="$1" -v bytes="$2" 'BEGIN {
		printf "{\"upserts\":["
		for (i = 0; i < n; i++) {
			line = sprintf("key%d = value %d; ", i, i * 7919)
			c = ""
			while (length(c) < bytes - 1)
				c = c line
			c = substr(c, 1, bytes - 1)
			printf "%s{\"name\":\"file/f%d\",\"body\":{\"path\":\"d%d/f%d.conf\",\"content\":\"%s\\n\",\"mode\":\"0644\"}}",
				(i ? "," : ""), i, i % 10, i, c
		}
		printf "]}"
	}'
}

# out_ok DIR: DIR holds exactly the FILES files with their content (the
# plane's copy, in $DATA/expect) and mode
out_ok() {
	local d=$1
	[ "$(find "$d" -path "$d/.tether-work" -prune -o -type f -print | wc -l)" = "$FILES" ] || return 1
	[ "$(find "$d" -path "$d/.tether-work" -prune -o -type f ! -perm 0644 -print | wc -l)" = 0 ] || return 1
	diff -r -x .tether-work "$DATA/expect" "$d" >/dev/null
}

# fs_of DIR: the file system DIR is on: type, device, mount point, and
# whether an ext4 has a journal (without one, ext4 will not reuse an inode
# freed in the last minute or more, and checks each on every create)
fs_of() {
	local type dev mnt j=""
	read -r dev type mnt < <(df -T "$1" | awk 'NR == 2 { print $1, $2, $7 }')
	if [ "$type" = ext4 ] && [ -r "/sys/fs/ext4/${dev##*/}/journal_task" ]; then
		if [ "$(cat "/sys/fs/ext4/${dev##*/}/journal_task")" = "<none>" ]; then
			j=", no journal"
		else
			j=", journal"
		fi
	fi
	echo "$type$j ($dev on $mnt)"
}

# ---- seed: a plane, one sync per binary, then the plane stops --------------------
"$PLANE" --listen 127.0.0.1:0 --data "$OUT/plane" --heartbeat 3600 $PLANE_LAB_FLAGS >"$OUT/plane.log" 2>&1 &
ppid=$!
track "$ppid"
wait_until 10 grep -q 'listening on' "$OUT/plane.log" || die "plane did not start"
port=$(grep -o 'listening on [^ ]*' "$OUT/plane.log" | sed 's/.*://')
url=http://127.0.0.1:$port
file_batch "$FILES" "$BYTES" >"$OUT/batch.json"
want=$(curl -sS -X POST --data-binary @"$OUT/batch.json" "$url/v1/batch" | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
[ -n "$want" ] || die "the plane refused the batch"
status_version() { sed -n 's/.*"version":\([0-9]*\),"state".*/\1/p' "$1/status.json" 2>/dev/null; }

builds="new"
[ -z "$BASE" ] || builds="base new"
bin_of() { if [ "$1" = base ]; then echo "$BASE"; else echo "$AGENT"; fi; }
for b in $builds; do
	"$(bin_of $b)" --plane "$url" --node boot --state-dir "$DATA/$b.state" --output-dir "$DATA/$b.out" \
		>"$OUT/$b.seed.log" 2>&1 &
	apid=$!
	track "$apid"
	synced() { [ "$(status_version "$DATA/$b.state")" = "$want" ]; }
	wait_until 60 synced || die "$b: the agent did not sync (log: $OUT/$b.seed.log)"
	stop_pid "$apid"
done
stop_pid "$ppid"
# what every output must hold
mkdir -p "$DATA/expect"
cp -a "$DATA/new.out/." "$DATA/expect/"
rm -rf "$DATA/expect/.tether-work"
out_ok "$DATA/new.out" || die "the seeded output does not hold the $FILES files"
# a closed port: every boot is offline
dead=http://127.0.0.1:$port

# ---- the runs ------------------------------------------------------------------------
for r in $(seq 1 "$RUNS"); do
	order=$builds
	[ -z "$BASE" ] || { [ $((r % 2)) = 1 ] && order="base new" || order="new base"; }
	for b in $order; do
		bin=$(bin_of $b)
		args=(--plane "$dead" --node boot --state-dir "$DATA/$b.state" --output-dir "$DATA/$b.out" --backoff-max 60)
		line="run $r $b:"
		for c in $CASES; do
			case $c in
			intact) ;;
			cold)
				sync
				echo 3 >/proc/sys/vm/drop_caches || die "the cold case needs root (drop_caches)"
				;;
			lost)
				# moved aside, not deleted (see "deleted" above)
				mv "$DATA/$b.out" "$DATA/trash/$b.$r"
				sync
				;;
			deleted)
				rm -rf "$DATA/$b.out"
				sync
				;;
			*) die "unknown case '$c' (intact, lost, deleted, cold)" ;;
			esac
			ms=$(timed_boot "$OUT/$b.$c.$r.log" "$bin" "${args[@]}") || die "$b: no boot ($c, run $r)"
			out_ok "$DATA/$b.out" || die "$b: wrong output after the boot ($c, run $r)"
			grep -q "files: output matches" "$OUT/$b.$c.$r.log" || die "$b: no files line ($c, run $r)"
			echo "$ms" >>"$OUT/$b.$c"
			line="$line $c $ms ms ($(sed -n 's/.*(\([0-9]*\) files written.*/\1/p' "$OUT/$b.$c.$r.log") written)"
		done
		log "$line"
	done
done

{
	bench_header "boot.sh: tetherd boot from last-good, $FILES file resources of $BYTES bytes, $RUNS runs"
	echo "command: ${BENCH_BOOT_BASE:+BENCH_BOOT_BASE=$BASE }${BENCH_BOOT_DIR:+BENCH_BOOT_DIR=$BENCH_BOOT_DIR }BENCH_RUNS=$RUNS BENCH_BOOT_CASES=\"$CASES\" bash bench/boot.sh SRCDIR BUILDDIR"
	echo "output file system: $(fs_of "$DATA")"
	printf '%-6s %-8s %10s %10s %10s   %s\n' build case "median ms" "min ms" "max ms" "goal"
	for b in $builds; do
		for c in $CASES; do
			goal="< 100 ms"
			[ $c = intact ] && goal="< 50 ms"
			[ $c = cold ] && goal="(none)"
			printf '%-6s %-8s %10s %10s %10s   %s\n' "$b" "$c" "$(median <"$OUT/$b.$c")" \
				"$(sort -g "$OUT/$b.$c" | head -n 1)" "$(sort -g "$OUT/$b.$c" | tail -n 1)" "$goal"
		done
	done
	for b in $builds; do
		for c in $CASES; do
			echo "$b $c, every run (ms): $(xargs <"$OUT/$b.$c")"
		done
	done
} | tee "$RESULTS"
