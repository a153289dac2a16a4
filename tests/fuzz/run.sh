#!/bin/sh
# run.sh: `make fuzz`: builds every libFuzzer target with clang and the
# sanitizers into BUILDDIR/fuzz/, then runs each for FUZZ_SECONDS (default
# 30) over a copy of its seed corpus. Exits non-zero if any target crashes
# (77 if clang, or its libFuzzer runtime, is missing).
# Usage: run.sh SRCDIR BUILDDIR [TARGET...]
#        run.sh --list SRCDIR   (print the default targets, one a line)
# The default targets are the files SRCDIR/tests/fuzz/fuzz_NAME.c; a target's
# seeds are SRCDIR/tests/fuzz/corpus/NAME/ (created empty if missing).
# For each target it prints one line "run.sh: RESULT NAME STATUS", STATUS one
# of ok, crash (the fuzzer stopped on an input), error (it did not build or
# run) or skip (no clang); scripts/test counts those.
# Environment: CLANG (default clang), FUZZ_SECONDS, FUZZ_FLAGS (extra
# libFuzzer flags, e.g. -max_len=65536 or -seed=1), FUZZ_BUILD_JOBS (parallel
# compiles, default nproc), FUZZ_RUN_JOBS (targets fuzzed at a time, default
# nproc).
# (flag lists are split on purpose)
# shellcheck disable=SC2086
set -eu

# The default targets: one per SRCDIR/tests/fuzz/fuzz_NAME.c, in name order.
list_targets() {
	for f in "$1"/tests/fuzz/fuzz_*.c; do
		[ -f "$f" ] || continue
		f=${f##*/fuzz_}
		echo "${f%.c}"
	done
}

if [ "${1:-}" = "--list" ] && [ $# -eq 2 ]; then
	list_targets "$2"
	exit 0
fi
if [ $# -lt 2 ]; then
	echo "usage: $0 SRCDIR BUILDDIR [TARGET...]" >&2
	echo "       $0 --list SRCDIR" >&2
	exit 2
fi
SRCDIR=$(cd "$1" && pwd)
BUILDDIR=$(cd "$2" && pwd)
shift 2
if [ $# -gt 0 ]; then
	TARGETS=$*
else
	TARGETS=$(list_targets "$SRCDIR")
fi
if [ -z "$TARGETS" ]; then
	echo "run.sh: no targets (no $SRCDIR/tests/fuzz/fuzz_*.c)" >&2
	exit 2
fi
for t in $TARGETS; do
	if [ ! -f "$SRCDIR/tests/fuzz/fuzz_$t.c" ]; then
		echo "run.sh: no target '$t' ($SRCDIR/tests/fuzz/fuzz_$t.c missing)" >&2
		exit 2
	fi
done
CLANG=${CLANG:-clang}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}
JOBS=${FUZZ_BUILD_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $JOBS in '' | *[!0-9]* | 0) JOBS=1 ;; esac
OUT=$BUILDDIR/fuzz

# result TARGET STATUS: the line scripts/test reads
result() {
	echo "run.sh: RESULT $1 $2"
}

# Every target gets STATUS; then exit with CODE.
all_results() {
	for t in $TARGETS; do
		result "$t" "$1"
	done
	exit "$2"
}

if [ ! -f "$BUILDDIR/config.h" ]; then
	echo "run.sh: $BUILDDIR/config.h missing: run configure first" >&2
	all_results error 2
fi
mkdir -p "$OUT/obj" "$OUT/artifacts"

# No clang, or a clang without its libFuzzer runtime, is a missing tool:
# every target is skipped, with the reason.
if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "run.sh: skipped: $CLANG not found; install clang (and libclang-rt-dev)"
	all_results skip 77
fi
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n);\n%s\n' \
	'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' \
	>"$OUT/probe.c"
if ! $CLANG -fsanitize=fuzzer,address,undefined "$OUT/probe.c" -o "$OUT/probe" >"$OUT/probe.log" 2>&1; then
	echo "run.sh: skipped: $CLANG cannot link -fsanitize=fuzzer (install libclang-rt-dev); see $OUT/probe.log"
	all_results skip 77
fi

# The libraries are the modules configure.ac requires (PKG_CHECK_MODULES
# without an action-if-not-found), so a new dependency needs no edit here.
PKGS=$(sed -n 's/^PKG_CHECK_MODULES(\[[A-Za-z0-9_]*\], *\[\([^] ]*\)[^]]*\])$/\1/p' "$SRCDIR/configure.ac")
if [ -z "$PKGS" ] || ! PKG_CFLAGS=$(pkg-config --cflags $PKGS) || ! PKG_LIBS=$(pkg-config --libs $PKGS); then
	echo "run.sh: pkg-config cannot find the libraries configure.ac requires:" $PKGS
	all_results error 1
fi
# and the ones configure found without pkg-config (http-parser)
PKG_LIBS="$PKG_LIBS $(sed -n 's/^HTTP_PARSER_LIBS = //p' "$BUILDDIR/Makefile")"

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-std=gnu11 -g -O1 -Wall -Wno-unused-parameter $SAN"
CPPFLAGS="-include $BUILDDIR/config.h -I$SRCDIR/common -I$SRCDIR/plane -I$SRCDIR/agent -I$SRCDIR/ctl -I$SRCDIR/tests/fuzz"

# The library sources are the ones Makefile.am (and the wings' local.mk it
# includes) lists for libcommon and libplane, libagent and libctl (a file
# not yet listed stays out).
lib_sources() {
	awk -v var="$1" '
		$1 == var && ($2 == "=" || $2 == "+=") { on = 1; $1 = ""; $2 = "" }
		on {
			cont = sub(/\\[ \t]*$/, "")
			for (i = 1; i <= NF; i++) if ($i ~ /\.c$/) print $i
			if (!cont) on = 0
		}' "$SRCDIR/Makefile.am" "$SRCDIR"/*/local.mk
}

# Library objects carry coverage (fuzzer-no-link); the archive lets the
# linker pull only what a target needs. JOBS compiles at a time, each with
# its own log; a failed one leaves OBJ.failed.
echo "run.sh: compiling the library sources with $CLANG ($JOBS at a time)"
objs=""
n=0
# (and the sources the build generates: the console's files, nodist_*)
[ -f "$BUILDDIR/plane/ui_assets.c" ] || make -C "$BUILDDIR" plane/ui_assets.c >/dev/null 2>&1
for src in $(lib_sources libcommon_la_SOURCES) $(lib_sources libplane_la_SOURCES) \
	$(lib_sources libagent_la_SOURCES) $(lib_sources libctl_la_SOURCES) @plane/ui_assets.c; do
	case $src in
	@*) src=${src#@}; path=$BUILDDIR/$src ;;   # generated in the build directory
	*) path=$SRCDIR/$src ;;
	esac
	obj=$OUT/obj/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')
	rm -f "$obj" "$obj.failed"
	(
		$CLANG $CFLAGS -fsanitize=fuzzer-no-link $CPPFLAGS $PKG_CFLAGS -c "$path" \
			-o "$obj" >"$obj.log" 2>&1 || echo "$src" >"$obj.failed"
	) &
	objs="$objs $obj"
	n=$((n + 1))
	[ $((n % JOBS)) -ne 0 ] || wait
done
wait
bad=""
for obj in $objs; do
	if [ -f "$obj.failed" ]; then
		cat "$obj.log" >&2
		bad="$bad $(cat "$obj.failed")"
	fi
done
if [ -n "$bad" ]; then
	echo "run.sh: the library did not compile:$bad"
	all_results error 1
fi
rm -f "$OUT/libfuzzdeps.a"
ar rcs "$OUT/libfuzzdeps.a" $objs

built=""
failed=""
for t in $TARGETS; do
	echo "run.sh: building fuzz_$t"
	rm -f "$OUT/fuzz_$t"
	if $CLANG $CFLAGS -fsanitize=fuzzer $CPPFLAGS $PKG_CFLAGS \
		"$SRCDIR/tests/fuzz/fuzz_$t.c" "$OUT/libfuzzdeps.a" $PKG_LIBS -lpthread -lm \
		-o "$OUT/fuzz_$t" >"$OUT/fuzz_$t.build.log" 2>&1; then
		built="$built $t"
	else
		cat "$OUT/fuzz_$t.build.log" >&2
		echo "run.sh: $t: did not build; see $OUT/fuzz_$t.build.log"
		result "$t" error
		failed="$failed $t"
	fi
done

# fuzz_one TARGET: fuzzes one target; its lines go to OUT/fuzz_TARGET.out,
# and OUT/fuzz_TARGET.failed exists when it failed.
fuzz_one() {
	t=$1
	rm -f "$OUT/fuzz_$t.failed"
	corpus=$OUT/corpus/$t
	mkdir -p "$corpus"
	seeds=$SRCDIR/tests/fuzz/corpus/$t
	if [ -d "$seeds" ]; then
		cp "$seeds/"* "$corpus/" 2>/dev/null || true
	elif mkdir -p "$seeds" 2>/dev/null; then
		echo "run.sh: $t: created the missing seed corpus $seeds/ (empty: add seeds there)"
	else
		echo "run.sh: $t: no seed corpus $seeds/ (and cannot create it); starting empty"
	fi
	dict=""
	case $t in
	json|resource) dict="-dict=$SRCDIR/tests/fuzz/corpus/json.dict" ;;
	esac
	log=$OUT/fuzz_$t.log
	echo "run.sh: fuzzing $t for $SECONDS_PER_TARGET s (log: $log)"
	rc=0
	"$OUT/fuzz_$t" $dict -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=512 -timeout=5 \
		-print_final_stats=1 -artifact_prefix="$OUT/artifacts/$t-" ${FUZZ_FLAGS:-} \
		"$corpus" >"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | sed -n 's/.*\(cov: [0-9]*\).*\(ft: [0-9]*\).*/\1 \2/p')
	units=$(find "$corpus" -type f | wc -l)
	if [ "$rc" -ne 0 ] && grep -q 'Test unit written to' "$log"; then
		echo "run.sh: $t: CRASH (exit $rc) after ${execs:-?} runs; see $log and $OUT/artifacts/"
		grep -E '^(==[0-9]+== ?ERROR|SUMMARY|fuzz_[a-z_]+:|  [a-z]+: )' "$log" | head -n 6 | sed 's/^/    /'
		result "$t" crash
		: >"$OUT/fuzz_$t.failed"
	elif [ "$rc" -ne 0 ]; then
		echo "run.sh: $t: the fuzzer failed (exit $rc) without a crashing input; see $log"
		tail -n 5 "$log" | sed 's/^/    /'
		result "$t" error
		: >"$OUT/fuzz_$t.failed"
	else
		echo "run.sh: $t: ok, ${execs:-?} runs, ${speed:-?} exec/s, ${cov:-cov: ?}, corpus $units files"
		result "$t" ok
	fi
}

# FUZZ_RUN_JOBS targets fuzz at a time (default nproc); their lines are
# printed in target order once each batch is done.
RUN_JOBS=${FUZZ_RUN_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $RUN_JOBS in '' | *[!0-9]* | 0) RUN_JOBS=1 ;; esac
batch=""
n=0
for t in $built; do
	(fuzz_one "$t" >"$OUT/fuzz_$t.out" 2>&1 || true) &
	batch="$batch $t"
	n=$((n + 1))
	if [ $((n % RUN_JOBS)) -eq 0 ]; then
		wait
		for b in $batch; do
			cat "$OUT/fuzz_$b.out"
			[ ! -f "$OUT/fuzz_$b.failed" ] || failed="$failed $b"
		done
		batch=""
	fi
done
wait
for b in $batch; do
	cat "$OUT/fuzz_$b.out"
	[ ! -f "$OUT/fuzz_$b.failed" ] || failed="$failed $b"
done

if [ -n "$failed" ]; then
	echo "run.sh: failed:$failed (reproduce a crash: tests/fuzz/replay_NAME FILE, or $OUT/fuzz_NAME FILE)"
	exit 1
fi
echo "run.sh: no crash"
