#!/bin/sh
# run.sh: `make fuzz`: builds every libFuzzer target with clang and the
# sanitizers into BUILDDIR/fuzz/, then runs each for FUZZ_SECONDS (default
# 30) over a copy of its seed corpus. Exits non-zero if any target crashes.
# Usage: run.sh SRCDIR BUILDDIR [TARGET...]
# Environment: CLANG (default clang), FUZZ_SECONDS, FUZZ_FLAGS (extra
# libFuzzer flags, e.g. -max_len=65536 or -seed=1).
# (flag lists are split on purpose)
# shellcheck disable=SC2086
set -eu

if [ $# -lt 2 ]; then
	echo "usage: $0 SRCDIR BUILDDIR [TARGET...]" >&2
	exit 2
fi
SRCDIR=$(cd "$1" && pwd)
BUILDDIR=$(cd "$2" && pwd)
shift 2
TARGETS=${*:-json resource labels sub numbers sse push lastgood render stages}
CLANG=${CLANG:-clang}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}
OUT=$BUILDDIR/fuzz

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "run.sh: $CLANG not found; install clang (and libclang-rt-dev)" >&2
	exit 77
fi
if [ ! -f "$BUILDDIR/config.h" ]; then
	echo "run.sh: $BUILDDIR/config.h missing: run configure first" >&2
	exit 2
fi

PKGS="libcjson zlib libmicrohttpd sqlite3 inih libsodium libcurl"
PKG_CFLAGS=$(pkg-config --cflags $PKGS)
PKG_LIBS=$(pkg-config --libs $PKGS)

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-std=gnu11 -g -O1 -Wall -Wno-unused-parameter $SAN"
CPPFLAGS="-include $BUILDDIR/config.h -I$SRCDIR/common -I$SRCDIR/plane -I$SRCDIR/agent -I$SRCDIR/tests/fuzz"

# The library sources are the ones Makefile.am lists for libcommon and
# libplane and libagent (a file not yet listed stays out).
lib_sources() {
	awk -v var="$1" '
		$1 == var && $2 == "=" { on = 1; $1 = ""; $2 = "" }
		on {
			cont = sub(/\\[ \t]*$/, "")
			for (i = 1; i <= NF; i++) if ($i ~ /\.c$/) print $i
			if (!cont) on = 0
		}' "$SRCDIR/Makefile.am"
}

mkdir -p "$OUT/obj" "$OUT/artifacts"

# Library objects carry coverage (fuzzer-no-link); the archive lets the
# linker pull only what a target needs.
echo "run.sh: compiling the library sources with $CLANG"
objs=""
for src in $(lib_sources libcommon_la_SOURCES) $(lib_sources libplane_la_SOURCES) \
	$(lib_sources libagent_la_SOURCES); do
	obj=$OUT/obj/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')
	$CLANG $CFLAGS -fsanitize=fuzzer-no-link $CPPFLAGS $PKG_CFLAGS -c "$SRCDIR/$src" -o "$obj"
	objs="$objs $obj"
done
rm -f "$OUT/libfuzzdeps.a"
ar rcs "$OUT/libfuzzdeps.a" $objs

for t in $TARGETS; do
	echo "run.sh: building fuzz_$t"
	$CLANG $CFLAGS -fsanitize=fuzzer $CPPFLAGS $PKG_CFLAGS \
		"$SRCDIR/tests/fuzz/fuzz_$t.c" "$OUT/libfuzzdeps.a" $PKG_LIBS -lpthread -lm \
		-o "$OUT/fuzz_$t"
done

failed=""
for t in $TARGETS; do
	corpus=$OUT/corpus/$t
	mkdir -p "$corpus"
	cp "$SRCDIR/tests/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
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
	if [ "$rc" -ne 0 ]; then
		echo "run.sh: $t: CRASH (exit $rc) after ${execs:-?} runs; see $log and $OUT/artifacts/"
		grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz_[a-z]+:)' "$log" | head -n 5 | sed 's/^/    /'
		failed="$failed $t"
	else
		echo "run.sh: $t: ok, ${execs:-?} runs, ${speed:-?} exec/s, ${cov:-cov: ?}, corpus $units files"
	fi
done

if [ -n "$failed" ]; then
	echo "run.sh: crashes in:$failed (reproduce: tests/fuzz/replay_NAME FILE, or $OUT/fuzz_NAME FILE)"
	exit 1
fi
echo "run.sh: no crash"
