# lib.sh: the integration tests' harness. Sourced by every t*.sh test.
# Gives TAP output (ok/not ok, counted by automake's tap-driver), a private
# work directory, the real binaries on free loopback ports, readiness
# handshakes (log lines and /healthz, never a bare sleep), and a trap that
# stops every process the test started. Exit 77 skips, 99 is a hard error.
set -u

T_NAME=$(basename "$0" .sh)
TOP_BUILDDIR=${TOP_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
TOP_SRCDIR=${TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PLANE_BIN=$TOP_BUILDDIR/tether-plane
CTL_BIN=$TOP_BUILDDIR/tetherctl
AGENT_BIN=$TOP_BUILDDIR/tetherd
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tether-$T_NAME.XXXXXX")
T_COUNT=0
T_FAILED=0
T_PIDS=""

MOUNTS=""   # tmpfs mounts a test made (root only), unmounted by the trap
T_CLEANUPS=""   # functions the trap calls once the processes are gone (lib-partition.sh)

# stop_tracked: TERM every tracked process, KILL what is left after 5 s,
# and reap them all.
stop_tracked() {
	local pid
	for pid in $T_PIDS; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in $T_PIDS; do
		# bounded wait, then force
		local i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.05
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	T_PIDS=""
}

# the trap: the processes first (they hold the mounts), then the mounts,
# then the work directory
cleanup() {
	local m
	stop_tracked
	for m in $T_CLEANUPS; do
		"$m"
	done
	T_CLEANUPS=""
	for m in $MOUNTS; do
		mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	MOUNTS=""
	if [ "${KEEP_WORK:-0}" = 1 ] || [ "$T_FAILED" -gt 0 ]; then
		echo "# work directory kept: $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 99' INT TERM

# ---- TAP -------------------------------------------------------------------

ok() {
	T_COUNT=$((T_COUNT + 1))
	echo "ok $T_COUNT - $*"
}

not_ok() {
	T_COUNT=$((T_COUNT + 1))
	T_FAILED=$((T_FAILED + 1))
	echo "not ok $T_COUNT - $*"
}

diag() {
	echo "$*" | sed 's/^/# /'
}

# check DESCRIPTION COMMAND...: one test point, ok when the command succeeds.
check() {
	local desc=$1
	shift
	local out
	if out=$("$@" 2>&1); then
		ok "$desc"
	else
		not_ok "$desc"
		diag "command: $*"
		diag "$out"
	fi
}

# check_eq DESCRIPTION EXPECTED ACTUAL
check_eq() {
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1"
		diag "expected: $2"
		diag "actual:   $3"
	fi
}

# The TAP plan says why and the driver counts a SKIP; exit 0, since the
# TAP driver counts any other exit as an ERROR (77 too).
skip_all() {
	echo "1..0 # SKIP $*"
	exit 0
}

bail() {
	echo "Bail out! $*"
	for f in "$WORK"/*.log; do
		[ -f "$f" ] && { echo "# --- $f"; tail -n 30 "$f" | sed 's/^/# /'; }
	done
	exit 99
}

# sanitizer_build: this suite's binaries are the sanitizer build's
sanitizer_build() {
	grep -q -- '-fsanitize' "$TOP_BUILDDIR/Makefile" 2>/dev/null
}

# sanitizer_check: stops every tracked process (so leaks are reported at
# their exit) and fails a test point when a log of this test holds an
# AddressSanitizer, LeakSanitizer or UBSan report (the sanitizer build).
sanitizer_check() {
	local pid f found=""
	for pid in $T_PIDS; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in $T_PIDS; do
		local i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 200 ]; do
			sleep 0.05
			i=$((i + 1))
		done
	done
	for f in "$WORK"/*.log "$WORK"/*/*.log; do
		[ -f "$f" ] || continue
		if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: ' "$f"; then
			found="$found $f"
		fi
	done
	if [ -n "$found" ]; then
		not_ok "no sanitizer report in the logs"
		for f in $found; do
			diag "$f:"
			diag "$(grep -E -A12 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: ' "$f" | head -n 40)"
		done
	elif sanitizer_build; then
		ok "no sanitizer report in the logs"
	fi
}

# done_testing: print the plan; exit non-zero when anything failed.
done_testing() {
	sanitizer_check
	echo "1..$T_COUNT"
	[ "$T_FAILED" -eq 0 ] || {
		for f in "$WORK"/*.log; do
			[ -f "$f" ] && { echo "# --- $f"; tail -n 30 "$f" | sed 's/^/# /'; }
		done
		exit 1
	}
	exit 0
}

# ---- waiting ----------------------------------------------------------------

# wait_until SECONDS COMMAND...: polls the command every 50 ms until it
# succeeds; returns 1 when it never did.
wait_until() {
	local limit=$1
	shift
	local deadline=$(($(date +%s%N) / 1000000 + limit * 1000))
	while ! "$@" >/dev/null 2>&1; do
		if [ $(($(date +%s%N) / 1000000)) -ge $deadline ]; then
			return 1
		fi
		sleep 0.05
	done
	return 0
}

# ---- processes --------------------------------------------------------------

track_pid() {
	T_PIDS="$T_PIDS $1"
}

untrack_pid() {
	local out="" p
	for p in $T_PIDS; do
		[ "$p" = "$1" ] || out="$out $p"
	done
	T_PIDS=$out
}

# start_plane NAME [ARGS...]: starts tether-plane with a private data
# directory $WORK/NAME.data (unless ARGS give --data), log $WORK/NAME.log,
# on a free port (unless ARGS give --listen). The tests that are not about
# credentials run it --insecure (a lab on loopback); SECURE=1 leaves that
# out. Waits for /healthz. Sets PLANE_PID, PLANE_URL, PLANE_PORT,
# PLANE_LOG (PLANE_URL is https:// when ARGS give --tls-cert).
start_plane() {
	local name=$1
	shift
	local args=("$@") has_listen=0 has_data=0 has_tls=0 a
	for a in "${args[@]}"; do
		case $a in
		--listen|--listen=*) has_listen=1 ;;
		--data|--data=*) has_data=1 ;;
		--tls-cert|--tls-cert=*) has_tls=1 ;;
		esac
	done
	[ $has_listen = 1 ] || args+=(--listen 127.0.0.1:0)
	[ $has_data = 1 ] || args+=(--data "$WORK/$name.data")
	[ "${SECURE:-0}" = 1 ] || args+=(--insecure)
	PLANE_LOG=$WORK/$name.log
	# a plane started again under the same name appends to its log: wait
	# for a "listening on" line after the ones already there
	local before
	before=$(grep -ac 'listening on [0-9.]*:[0-9][0-9]* ' "$PLANE_LOG" 2>/dev/null)
	"$PLANE_BIN" "${args[@]}" >>"$PLANE_LOG" 2>&1 &
	PLANE_PID=$!
	track_pid "$PLANE_PID"
	if ! wait_until 10 sh -c "[ \"\$(grep -ac 'listening on [0-9.]*:[0-9][0-9]* ' '$PLANE_LOG')\" -gt ${before:-0} ]"; then
		bail "plane $name did not start"
	fi
	PLANE_PORT=$(grep -ao 'listening on [0-9.]*:[0-9]*' "$PLANE_LOG" | tail -n 1 | sed 's/.*://')
	if [ $has_tls = 1 ]; then
		PLANE_URL=https://127.0.0.1:$PLANE_PORT
		# -k only to see it is up: the tests check the certificate
		if ! wait_until 10 curl -kfsS "$PLANE_URL/healthz"; then
			bail "plane $name is not healthy"
		fi
	else
		PLANE_URL=http://127.0.0.1:$PLANE_PORT
		if ! wait_until 10 curl -fsS "$PLANE_URL/healthz"; then
			bail "plane $name is not healthy"
		fi
	fi
}

# pem_pair NAME: a self-signed P-256 certificate and its key (the plane
# parses a plaintext secret's and matches them) in $WORK/NAME.crt and
# $WORK/NAME.key, and as the insides of JSON strings (newlines escaped,
# no quotes) in PAIR_CERT and PAIR_KEY.
pem_pair() {
	[ -s "$WORK/$1.key" ] ||
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/$1.key" \
			-out "$WORK/$1.crt" -days 3650 -subj "/CN=$1.test" 2>/dev/null ||
		bail "openssl cannot make a test certificate"
	PAIR_CERT=$(jq -Rs . <"$WORK/$1.crt" | sed 's/^"//; s/"$//')
	PAIR_KEY=$(jq -Rs . <"$WORK/$1.key" | sed 's/^"//; s/"$//')
}

# weak_pair NAME: the same with a 1024-bit RSA key: the plane parses and
# matches it, and a node's OpenSSL (security level 2) refuses it ("ee key
# too small"): a certificate only the canary's check can catch.
weak_pair() {
	[ -s "$WORK/$1.key" ] ||
		openssl req -x509 -newkey rsa:1024 -nodes -keyout "$WORK/$1.key" -out "$WORK/$1.crt" -days 3650 \
			-subj "/CN=$1.test" 2>/dev/null ||
		bail "openssl cannot make a test certificate"
	PAIR_CERT=$(jq -Rs . <"$WORK/$1.crt" | sed 's/^"//; s/"$//')
	PAIR_KEY=$(jq -Rs . <"$WORK/$1.key" | sed 's/^"//; s/"$//')
}

# stop_pid PID [SIGNAL]: signals a tracked process and waits for it.
# A process that has not ended 60 s after the signal (a stuck exit, such
# as LeakSanitizer's stop-the-world waiting forever) is killed and fails
# the test, which cannot hang the run then.
stop_pid() {
	local pid=$1 sig=${2:-TERM} i=0
	kill -"$sig" "$pid" 2>/dev/null
	while [ $i -lt 1200 ] && [ -e "/proc/$pid" ] && [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)" != Z ]; do
		sleep 0.05
		i=$((i + 1))
	done
	if [ $i -ge 1200 ]; then
		not_ok "process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)) did not end 60 s after SIG$sig: killed"
		kill -KILL "$pid" 2>/dev/null
		pkill -KILL -P "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	local rc=$?
	untrack_pid "$pid"
	return $rc
}

# ---- HTTP -------------------------------------------------------------------

# CURL_OPTS: what every helper below adds to curl against a secure plane,
# e.g. CURL_OPTS=(-H "Authorization: Bearer $ADMIN" --cacert "$PKI/ca.pem").
CURL_OPTS=()

# api METHOD PATH [CURL ARGS...]: prints the body, then a line with the
# status code; use api_status / api_body to split them.
api() {
	local method=$1 path=$2
	shift 2
	curl -sS -X "$method" -w '\n%{http_code}' "${CURL_OPTS[@]}" "$@" "$PLANE_URL$path"
}

# api_status METHOD PATH [ARGS...]: prints only the status code.
api_status() {
	local method=$1 path=$2
	shift 2
	curl -sS -o /dev/null -X "$method" -w '%{http_code}' "${CURL_OPTS[@]}" "$@" "$PLANE_URL$path"
}

# put NAME JSON: PUT a resource; prints the body.
put() {
	curl -sS -X PUT "${CURL_OPTS[@]}" --data-binary "$2" "$PLANE_URL/v1/resources/$1"
}

json() {
	jq -r "$@"
}

need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip_all "$c is not installed"
	done
}

# metric NAME: the value of an unlabelled metric (or a labelled one given
# whole, like 'tether_node_lag{node="n1"}') from /metrics.
metric() {
	curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/metrics" | awk -v m="$1" '$1 == m {print $2}'
}

# ctl ARGS...: tetherctl against the test's plane.
ctl() {
	"$CTL_BIN" --plane "$PLANE_URL" "$@"
}

# ro FILTER: a jq filter over GET /v1/rollouts/current.
ro() {
	curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/rollouts/current" | jq -r "$1"
}

# ro_is JQ-CONDITION: the current rollout satisfies it.
ro_is() {
	curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/rollouts/current" | jq -e "$1" >/dev/null
}

# ---- node modules ---------------------------------------------------------------

# eventsource_dir: sets ES_DIR to a node_modules holding the pinned
# eventsource client (NODE_PATH, the build's, the source tree's build), or
# installs it into $WORK with scripts/npm-deps.
eventsource_dir() {
	local d
	ES_DIR=""
	for d in ${NODE_PATH:+$(echo "$NODE_PATH" | tr ':' ' ')} "$TOP_BUILDDIR/node_modules" \
		"$TOP_SRCDIR/build/node_modules"; do
		if [ -f "$d/eventsource/package.json" ]; then
			ES_DIR=$d
			break
		fi
	done
	if [ -z "$ES_DIR" ]; then
		"$TOP_SRCDIR/scripts/npm-deps" "$WORK" >"$WORK/npm.log" 2>&1 ||
			bail "cannot install eventsource: $(tail -n 5 "$WORK/npm.log")"
		ES_DIR=$WORK/node_modules
	fi
	diag "eventsource $(jq -r .version "$ES_DIR/eventsource/package.json") from $ES_DIR, node $(node --version)"
}

# ---- a fleet of agents, named in NODES ----------------------------------------

# ro_ended ID: rollout ID is the current one and is no longer in progress.
ro_ended() {
	curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/rollouts/current" |
		jq -e --argjson id "$1" '.id == $id and .state != "in_progress"' >/dev/null
}

# nodes_not_at VERSION: the agents whose status.json is not at VERSION
# (one jq for the whole fleet), as node:version on one line.
nodes_not_at() {
	local n out="" f files=()
	declare -A seen
	for n in "${NODES[@]}"; do
		files+=("$WORK/$n.state/status.json")
	done
	while read -r n f; do
		seen[$n]=$f
	done < <(jq -r '"\(.node) \(.version)"' "${files[@]}" 2>/dev/null)
	for n in "${NODES[@]}"; do
		[ "${seen[$n]:-}" = "$1" ] || out="$out $n:${seen[$n]:-none}"
	done
	echo $out
}

# fleet_at VERSION: every agent of the fleet is at VERSION.
fleet_at() {
	[ -z "$(nodes_not_at "$1")" ]
}

# wrong_content FILE EXPECTED: the nodes whose FILE (under the output
# directory) does not hold EXPECTED, on one line.
wrong_content() {
	local n out=""
	for n in "${NODES[@]}"; do
		[ "$(cat "$WORK/$n.out/$1" 2>/dev/null)" = "$2" ] || out="$out $n"
	done
	echo $out
}

# bad_check FILE: writes an agent --check script (run it with sh FILE)
# that refuses any rendered file holding BAD: "check: BAD content refused".
bad_check() {
	cat >"$1" <<'EOF'
if grep -rq BAD "$TETHER_STAGING"; then
	echo "check: BAD content refused" >&2
	exit 1
fi
exit 0
EOF
}

# versions: "node:version" from every agent's status.json, on one line.
versions() {
	local n out=""
	for n in "${NODES[@]}"; do
		out="$out $n:$(st "$n" version)"
	done
	echo $out
}

# ---- agents and test tools ---------------------------------------------------

TOOLS=$TOP_SRCDIR/tests/tools
declare -A APID

# start_agent NAME [ARGS...]: starts tetherd as node NAME with state
# $WORK/NAME.state and output $WORK/NAME.out, logging to
# $WORK/${ALOG:-NAME}.log, against $PLANE_URL unless ARGS give --plane or -c.
# Sets AGENT_PID and APID[NAME].
start_agent() {
	local name=$1
	shift
	local args=("$@") has_plane=0 a
	for a in "${args[@]}"; do
		case $a in --plane|--plane=*|-c) has_plane=1 ;; esac
	done
	[ $has_plane = 1 ] || args+=(--plane "$PLANE_URL")
	"$AGENT_BIN" --node "$name" --state-dir "$WORK/$name.state" --output-dir "$WORK/$name.out" \
		"${args[@]}" >>"$WORK/${ALOG:-$name}.log" 2>&1 &
	AGENT_PID=$!
	APID[$name]=$AGENT_PID
	track_pid "$AGENT_PID"
}

# puppeteer_try: sets PP_DIR to a node_modules with puppeteer-core (for a
# headless chromium): $NODE_PATH's, the build's or the tree's, or installed
# (pinned) into the build directory by scripts/npm-deps, once; returns 1
# with PP_WHY when there is no chromium, or npm cannot install it.
# puppeteer_dir: the same, skipping the test then.
puppeteer_try() {
	local d
	PP_WHY=""
	CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
	if [ -z "$CHROMIUM" ] || [ ! -x "$CHROMIUM" ]; then
		PP_WHY="chromium is not installed (scripts/deps installs it)"
		return 1
	fi
	export CHROMIUM
	PP_DIR=""
	for d in ${NODE_PATH:+$(echo "$NODE_PATH" | tr ':' ' ')} "$TOP_BUILDDIR/node_modules" "$TOP_SRCDIR/build/node_modules"; do
		if [ -f "$d/puppeteer-core/package.json" ]; then
			PP_DIR=$d
			return 0
		fi
	done
	if ! "$TOP_SRCDIR/scripts/npm-deps" "$TOP_BUILDDIR" >"$WORK/npm.log" 2>&1; then
		PP_WHY="cannot install puppeteer-core from npm: $(tail -n 3 "$WORK/npm.log" | tr '\n' ' ')"
		return 1
	fi
	PP_DIR=$TOP_BUILDDIR/node_modules
}

puppeteer_dir() {
	puppeteer_try || skip_all "$PP_WHY"
}

# start_tool NAME SCRIPT [ARGS...]: runs a node tool from tests/tools that
# prints "listening PORT"; sets TOOL_PID and TOOL_PORT.
start_tool() {
	local name=$1 script=$2
	shift 2
	node "$TOOLS/$script" "$@" >"$WORK/$name.port" 2>>"$WORK/$name.log" &
	TOOL_PID=$!
	track_pid "$TOOL_PID"
	wait_until 10 grep -q '^listening ' "$WORK/$name.port" || bail "$name ($script) did not start"
	TOOL_PORT=$(awk '/^listening /{print $2; exit}' "$WORK/$name.port")
}

# st NAME FIELD: a field of agent NAME's status.json.
st() {
	jq -r ".$2" "$WORK/$1.state/status.json" 2>/dev/null
}

# agent_at NAME VERSION: the agent's status.json says it runs VERSION.
agent_at() {
	[ "$(st "$1" version)" = "$2" ]
}

# all_at VERSION NAME...: every one of the agents is at VERSION.
all_at() {
	local v=$1 n
	shift
	for n in "$@"; do
		agent_at "$n" "$v" || return 1
	done
}

# staged_fleet_at_1 NAME...: on a staged plane with no node yet, writes
# version 1 (its rollout has no member and ends at once), starts the
# agents NAME... (streaming) and waits until each runs version 1 and the
# plane sees all of them connected; bails otherwise.
staged_fleet_at_1() {
	local n
	ctl put file/motd - <<<'{"path":"motd.txt","content":"motd-1\n"}' >/dev/null || bail "cannot write version 1"
	wait_until 10 ro_ended 1 || bail "rollout 1 did not end"
	for n in "$@"; do
		start_agent "$n" --backoff-max 1 --stream-timeout 30
	done
	check "the agents reach version 1" wait_until 30 all_at 1 "$@"
	wait_until 20 nodes_connected $# || bail "the plane does not see the $# agents connected"
}

# nodes_connected N: the plane sees N nodes connected.
nodes_connected() {
	[ "$(curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/nodes" | jq '[.[] | select(.connected)] | length')" = "$1" ]
}

plane_version() {
	curl -s "${CURL_OPTS[@]}" "$PLANE_URL/healthz" | jq -r .version
}

# node_field NODE JQ: a field of the plane's record of NODE.
node_field() {
	curl -s "${CURL_OPTS[@]}" "$PLANE_URL/v1/nodes/$1" | jq -r "$2"
}

# node_acked NODE VERSION: the plane's record says NODE acked VERSION.
node_acked() {
	[ "$(node_field "$1" .acked_version)" = "$2" ]
}

# has_nack NODE VERSION: the plane's last NACK of NODE is of VERSION.
has_nack() {
	[ "$(node_field "$1" '.last_nack.version // empty')" = "$2" ]
}

# ident FILE: inode and mtime, to see that a file was not rewritten.
ident() {
	stat -c '%i %y' "$1" 2>/dev/null
}

# files_of DIR: every entry but directories under DIR, the agent's work
# area left out, sorted, on one line.
files_of() {
	(cd "$1" && find . -path ./.tether-work -prune -o ! -type d -print | sort | xargs)
}

# inflated FILE...: every zlib stream in the files, inflated, one after the
# other (last-good's snapshots and journal records are compressed: what a
# test looks for in them).
inflated() {
	node -e '
const fs = require("fs"), zlib = require("zlib");
for (const f of process.argv.slice(1)) {
	const b = fs.readFileSync(f);
	for (let i = 0; i + 2 <= b.length; i++) {
		if (b[i] !== 0x78 || ((b[i] << 8) | b[i + 1]) % 31 !== 0)
			continue;
		try {
			process.stdout.write(zlib.inflateSync(b.subarray(i), { finishFlush: zlib.constants.Z_SYNC_FLUSH }));
		} catch (e) {}
	}
}' "$@"
}

# count_ge N PATTERN FILE: FILE has at least N lines matching PATTERN.
count_ge() {
	[ "$(grep -c -- "$2" "$3" 2>/dev/null)" -ge "$1" ]
}

need_cmd curl jq
[ -x "$PLANE_BIN" ] || bail "no $PLANE_BIN: build first"
