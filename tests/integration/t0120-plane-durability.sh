#!/usr/bin/env bash
# t0120-plane-durability.sh: every acknowledged write survives kill -9 (one by
# one, in a batch, and under a stream of writes cut at a random point), with
# its version, body and tombstones; a SIGTERM with a stream open exits 0 in
# a few seconds and keeps the node records (acked version, last NACK); the
# tombstone horizon (--tombstone-keep) turns old nodes' deltas into
# snapshots, across restarts too; a second plane on the same data directory
# refuses to start; a write the disk cannot take (a full tmpfs, when run as
# root) is refused with 5xx, changes nothing, and the plane keeps serving.
. "$(dirname "$0")/lib.sh"

FULL_MNT=""
FULL_PID=""
finish() {
	if [ -n "$FULL_MNT" ]; then
		if [ -n "$FULL_PID" ]; then
			kill -KILL "$FULL_PID" 2>/dev/null
			wait "$FULL_PID" 2>/dev/null
		fi
		umount "$FULL_MNT" 2>/dev/null || umount -l "$FULL_MNT" 2>/dev/null
	fi
	cleanup
}
trap finish EXIT

# exited PID: the process is gone (or a zombie waiting to be reaped).
exited() {
	! kill -0 "$1" 2>/dev/null || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

version() {
	curl -sS "$PLANE_URL/healthz" | jq -r .version
}

# poll NODE VERSION: the poll answer for a node at VERSION.
poll() {
	curl -sS "$PLANE_URL/v1/config?node=$1&version=$2"
}

# push_data FILE N: the data of the N-th push event in an SSE capture.
push_data() {
	awk -v n="$2" '/^event: push/ {p = 1; next} p && /^data: / {c++; if (c == n) {sub(/^data: /, ""); print}; p = 0}' "$1"
}

cl() { # cl PORT: a cluster body
	printf '{"lb":"round_robin","endpoints":[{"address":"10.0.0.1","port":%d,"weight":1}]}' "$1"
}

# ---- kill -9 after writes one by one and a batch -----------------------------------

start_plane d
DATA=$WORK/d.data
seq_ok=1
for i in $(seq 1 20); do
	v=$(put "cluster/c$i" "$(cl $((9000 + i)))" | jq -r .version)
	[ "$v" = "$i" ] || seq_ok=0
done
check_eq "twenty writes one by one make versions 1..20" 1 "$seq_ok"
out=$(curl -sS -X POST "$PLANE_URL/v1/batch" --data-binary '{"upserts":[
	{"name":"listener/l1","body":{"address":"127.0.0.1","port":8080}},
	{"name":"route/r1","body":{"listener":"l1","cluster":"c1","host":"*","path":"/"}},
	{"name":"file/f1","body":{"path":"a/b.conf","content":"x\n","mode":"0600"}}],
	"removes":["cluster/c19","cluster/c20"]}')
check_eq "a batch of five changes is version 21" 21 "$(echo "$out" | jq -r .version)"
curl -sS -o /dev/null -X DELETE "$PLANE_URL/v1/resources/cluster/c18"
curl -sS -o /dev/null -X DELETE "$PLANE_URL/v1/resources/cluster/c17"
put cluster/c1 "$(cl 9999)" >/dev/null
before=$(curl -sS "$PLANE_URL/v1/resources")
tombs_before=$(metric tether_tombstones)
check_eq "two deletes and a change later the store is at version 24" 24 "$(echo "$before" | jq -r .version)"
# the last write is acknowledged, then the plane dies at once
v=$(put cluster/last "$(cl 7777)" | jq -r .version)
stop_pid "$PLANE_PID" KILL
check_eq "the last write was acknowledged as version 25" 25 "$v"

start_plane d2 --data "$DATA"
check_eq "after kill -9 the version is the last acknowledged one" 25 "$(version)"
after=$(curl -sS "$PLANE_URL/v1/resources")
check_eq "after kill -9 every resource has its version and body" \
	"$(echo "$before" | jq -cS '.resources')" \
	"$(echo "$after" | jq -cS '[.resources[] | select(.name != "cluster/last")]')"
check_eq "the write acknowledged just before kill -9 is there" "25 7777" \
	"$(curl -sS "$PLANE_URL/v1/resources/cluster/last" | jq -r '"\(.version) \(.body.endpoints[0].port)"')"
check_eq "the four tombstones survived kill -9" "4 4" "$tombs_before $(metric tether_tombstones)"
out=$(poll x 21)
check_eq "a node at version 21 gets a delta after the restart" "false 21 25" \
	"$(echo "$out" | jq -r '"\(.full) \(.base) \(.version)"')"
check_eq "the delta carries the removals made after 21" "cluster/c17 cluster/c18" \
	"$(echo "$out" | jq -r '.removed | sort | join(" ")')"
check_eq "the delta carries the changes made after 21" "cluster/c1 cluster/last" \
	"$(echo "$out" | jq -r '[.upserts[].name] | sort | join(" ")')"
out=$(poll y 18)
check_eq "a node at version 18 also gets the batch's removals" "cluster/c17 cluster/c18 cluster/c19 cluster/c20" \
	"$(echo "$out" | jq -r '.removed | sort | join(" ")')"
check_eq "the version counter goes on from 25" 26 "$(put cluster/c2 "$(cl 1234)" | jq -r .version)"

# ---- kill -9 in the middle of a stream of writes ---------------------------------------------

# a writer records every acknowledged write; the plane is killed while it runs
(
	for i in $(seq 1 400); do
		out=$(curl -sS -m 5 -X PUT --data-binary "$(cl $((20000 + i)))" "$PLANE_URL/v1/resources/cluster/w$i" 2>/dev/null) || break
		v=$(printf '%s' "$out" | jq -r '.version // empty' 2>/dev/null)
		[ -n "$v" ] || break
		echo "$i $v" >>"$WORK/acked"
	done
) &
WRITER=$!
track_pid "$WRITER"
acked_at_least() {
	[ "$(wc -l <"$WORK/acked" 2>/dev/null || echo 0)" -ge "$1" ]
}
wait_until 20 acked_at_least 25 || bail "the writer made no progress"
stop_pid "$PLANE_PID" KILL
wait "$WRITER" 2>/dev/null
untrack_pid "$WRITER"
acked=$(wc -l <"$WORK/acked")
last=$(tail -n 1 "$WORK/acked" | cut -d' ' -f2)
diag "$acked writes were acknowledged before kill -9 (last version $last)"
start_plane d3 --data "$DATA"
now=$(version)
check "the version after kill -9 is the last acknowledged one or one more ($now, $last)" \
	test "$now" -ge "$last" -a "$now" -le $((last + 1))
missing=0
all=$(curl -sS "$PLANE_URL/v1/resources?prefix=cluster/w")
while read -r i v; do
	got=$(echo "$all" | jq -r --arg n "cluster/w$i" '.resources[] | select(.name == $n) | "\(.version) \(.body.endpoints[0].port)"')
	[ "$got" = "$v $((20000 + i))" ] || { missing=$((missing + 1)); diag "cluster/w$i: expected '$v $((20000 + i))', got '$got'"; }
done <"$WORK/acked"
check_eq "every acknowledged write of the stream survived kill -9 ($acked)" 0 "$missing"

# ---- SIGTERM with a stream open; node records survive -----------------------------------------

V=$(version)
curl -sSN "$PLANE_URL/v1/stream?node=s1&version=0&labels=zone%3Da" >"$WORK/s1.sse" 2>/dev/null &
S1=$!
track_pid "$S1"
wait_until 10 grep -q '^event: push' "$WORK/s1.sse" || bail "no push on the stream"
nonce=$(push_data "$WORK/s1.sse" 1 | jq -r .nonce)
check_eq "the stream's ack is accepted" accepted "$(curl -sS -X POST "$PLANE_URL/v1/ack" \
	--data "{\"node\":\"s1\",\"version\":$V,\"nonce\":\"$nonce\",\"status\":\"ack\"}" | jq -r .result)"
pnonce=$(poll n2 0 | jq -r .nonce)
check_eq "the poller's nack is accepted" accepted "$(curl -sS -X POST "$PLANE_URL/v1/ack" \
	--data "{\"node\":\"n2\",\"version\":$V,\"nonce\":\"$pnonce\",\"status\":\"nack\",\"error\":\"check failed: line 3\"}" | jq -r .result)"
# no pause: the records must be written at exit, not only by the 200 ms flush
t0=$(date +%s%N)
kill -TERM "$PLANE_PID"
if wait_until 10 exited "$PLANE_PID"; then
	ms=$((($(date +%s%N) - t0) / 1000000))
	check "SIGTERM with a stream open exits within 5 s (${ms} ms)" test "$ms" -le 5000
else
	not_ok "SIGTERM with a stream open exits within 5 s"
fi
wait "$PLANE_PID"
rc=$?
untrack_pid "$PLANE_PID"
check_eq "SIGTERM exits 0" 0 "$rc"
check "the stream's client saw the end of the stream" wait_until 5 exited "$S1"
untrack_pid "$S1"
check "the plane logged a clean stop" grep -q 'stopped' "$WORK/d3.log"
check "no sanitizer report in the plane's log" bash -c "! grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK/d3.log'"

start_plane d4 --data "$DATA"
nodes=$(curl -sS "$PLANE_URL/v1/nodes")
check_eq "after a SIGTERM restart s1 keeps its acked version and labels" "$V 1 a" \
	"$(echo "$nodes" | jq -r '.[] | select(.node == "s1") | "\(.acked_version) \(.acks) \(.labels.zone)"')"
check_eq "after a SIGTERM restart n2 keeps its last NACK" "$V $pnonce check failed: line 3 1" \
	"$(echo "$nodes" | jq -r '.[] | select(.node == "n2") | "\(.last_nack.version) \(.last_nack.nonce) \(.last_nack.error) \(.nacks)"')"
check "the NACK keeps its time" test "$(echo "$nodes" | jq -r '.[] | select(.node == "n2") | .last_nack.time')" -gt 1600000000
check_eq "nobody is connected after the restart" "false false" \
	"$(echo "$nodes" | jq -r '[.[] | select(.node == "s1" or .node == "n2") | .connected | tostring] | join(" ")')"

# ---- a second plane on the same data directory ------------------------------------------------

timeout 20 "$PLANE_BIN" --listen 127.0.0.1:0 --data "$DATA" >"$WORK/second.log" 2>&1
rc=$?
check_eq "a second plane on the same --data exits 1" 1 "$rc"
check "it says the directory is in use" grep -q "in use by another tether-plane" "$WORK/second.log"
check "it never listened" bash -c "! grep -q 'listening on' '$WORK/second.log'"
check_eq "the first plane still serves, unchanged" "$now" "$(version)"
stop_pid "$PLANE_PID"

# ---- tombstone horizon: --tombstone-keep 2 -------------------------------------------------------

start_plane h --tombstone-keep 2
for i in 1 2 3 4; do put "cluster/r$i" "$(cl $((100 + i)))" >/dev/null; done
for i in 1 2 3; do curl -sS -o /dev/null -X DELETE "$PLANE_URL/v1/resources/cluster/r$i"; done
check_eq "three deletes later the store is at 7" 7 "$(version)"
check_eq "two tombstones are kept; the horizon is the dropped one's version" "2 5" \
	"$(metric tether_tombstones) $(metric tether_tombstone_horizon)"
horizon_checks() { # horizon_checks WHEN
	local out
	out=$(poll old 4)
	check_eq "$1: a node at 4 (below the horizon) gets a snapshot" "true 0 7 cluster/r4 0" \
		"$(echo "$out" | jq -r '"\(.full) \(.base) \(.version) \([.upserts[].name] | join(",")) \(.removed | length)"')"
	out=$(poll edge 5)
	check_eq "$1: a node at 5 (the horizon) gets a delta with the kept removals" "false 5 cluster/r2,cluster/r3" \
		"$(echo "$out" | jq -r '"\(.full) \(.base) \(.removed | sort | join(","))"')"
	out=$(poll recent 6)
	check_eq "$1: a node at 6 gets a delta with one removal" "false 6 cluster/r3 0" \
		"$(echo "$out" | jq -r '"\(.full) \(.base) \(.removed | join(",")) \(.upserts | length)"')"
}
horizon_checks "live"
stop_pid "$PLANE_PID" KILL
start_plane h2 --data "$WORK/h.data" --tombstone-keep 2
check_eq "after kill -9 the horizon is the same" "7 2 5" \
	"$(version) $(metric tether_tombstones) $(metric tether_tombstone_horizon)"
horizon_checks "after kill -9"
stop_pid "$PLANE_PID"

# ---- a write the disk cannot take --------------------------------------------------------------------

if [ "$(id -u)" != 0 ]; then
	echo "ok $((T_COUNT + 1)) # SKIP full disk: needs root to mount a tmpfs"
	T_COUNT=$((T_COUNT + 1))
	done_testing
fi
mkdir -p "$WORK/full.mnt"
if ! mount -t tmpfs -o size=3m,mode=0700 tmpfs "$WORK/full.mnt" 2>"$WORK/mount.err"; then
	echo "ok $((T_COUNT + 1)) # SKIP full disk: cannot mount a tmpfs: $(head -n 1 "$WORK/mount.err")"
	T_COUNT=$((T_COUNT + 1))
	done_testing
fi
FULL_MNT=$WORK/full.mnt
start_plane f --data "$FULL_MNT/d"
FULL_PID=$PLANE_PID
for i in 1 2 3; do put "cluster/k$i" "$(cl $((300 + i)))" >/dev/null; done
before=$(curl -sS "$PLANE_URL/v1/resources")
check_eq "three writes on the small tmpfs" 3 "$(echo "$before" | jq -r .version)"

dd if=/dev/zero of="$FULL_MNT/filler" bs=4k >/dev/null 2>&1
check_eq "the tmpfs is full" 0 "$(df -P "$FULL_MNT" | awk 'NR == 2 {print $4}')"

# full_refused DESC METHOD PATH [ARGS]: 5xx, a JSON error saying nothing was stored
full_refused() {
	local desc=$1 method=$2 path=$3 out code
	shift 3
	out=$(curl -sS -m 10 -X "$method" -w '\n%{http_code}' "$@" "$PLANE_URL$path")
	code=${out##*$'\n'}
	case $code in
	5??) if printf '%s' "${out%$'\n'*}" | jq -e '.error | test("nothing was stored")' >/dev/null 2>&1; then
		ok "$desc ($code)"
	else
		not_ok "$desc"
		diag "answer: ${out%$'\n'*}"
	fi ;;
	*) not_ok "$desc"; diag "status $code: ${out%$'\n'*}" ;;
	esac
}
full_refused "a PUT on a full disk is refused with 5xx" PUT /v1/resources/cluster/new --data-binary "$(cl 400)"
full_refused "a change on a full disk is refused with 5xx" PUT /v1/resources/cluster/k2 --data-binary "$(cl 401)"
full_refused "a DELETE on a full disk is refused with 5xx" DELETE /v1/resources/cluster/k3
full_refused "a batch on a full disk is refused with 5xx" POST /v1/batch \
	--data-binary "{\"upserts\":[{\"name\":\"cluster/b1\",\"body\":$(cl 402)}],\"removes\":[\"cluster/k1\"]}"
check_eq "the refused writes changed nothing" "$before" "$(curl -sS "$PLANE_URL/v1/resources")"
check_eq "the version did not move" 3 "$(version)"
check_eq "reads go on: GET" "3 303" \
	"$(curl -sS "$PLANE_URL/v1/resources/cluster/k3" | jq -r '"\(.version) \(.body.endpoints[0].port)"')"
check_eq "reads go on: a poll" "3 3" "$(poll fnode 0 | jq -r '"\(.version) \(.upserts | length)"')"
check_eq "the failures are counted" 4 "$(metric tether_write_errors_total)"

# room for a little, not for a large batch: the WAL runs out mid-transaction
rm -f "$FULL_MNT/filler"
avail=$(df -P -k "$FULL_MNT" | awk 'NR == 2 {print $4}')
dd if=/dev/zero of="$FULL_MNT/filler" bs=1k count=$((avail - 48)) >/dev/null 2>&1
big=$(head -c 60000 /dev/zero | tr '\0' y)
batch='{"upserts":['
for i in 1 2 3 4 5 6; do
	batch="$batch{\"name\":\"file/big$i\",\"body\":{\"path\":\"big$i\",\"content\":\"$big\"}},"
done
printf '%s],"removes":["cluster/k3"]}' "${batch%,}" >"$WORK/big-batch.json"
full_refused "a batch larger than the space left is refused with 5xx" POST /v1/batch --data-binary "@$WORK/big-batch.json"
check_eq "the torn batch changed nothing" "$before" "$(curl -sS "$PLANE_URL/v1/resources")"

rm -f "$FULL_MNT/filler"
check_eq "with room again the next write is version 4 (no version was spent)" 4 \
	"$(put cluster/new "$(cl 400)" | jq -r .version)"
stop_pid "$PLANE_PID" KILL
start_plane f2 --data "$FULL_MNT/d"
FULL_PID=$PLANE_PID
check_eq "after kill -9 the store is version 4" 4 "$(version)"
check_eq "after kill -9 only the acknowledged writes are there" "cluster/k1 cluster/k2 cluster/k3 cluster/new" \
	"$(curl -sS "$PLANE_URL/v1/resources" | jq -r '[.resources[].name] | join(" ")')"
check_eq "and k2 has its old body" "2 302" \
	"$(curl -sS "$PLANE_URL/v1/resources/cluster/k2" | jq -r '"\(.version) \(.body.endpoints[0].port)"')"
stop_pid "$PLANE_PID"
FULL_PID=""

# a data directory the plane cannot write at all: it refuses to start
if mount -o remount,ro "$FULL_MNT" 2>"$WORK/mount.err"; then
	timeout 20 "$PLANE_BIN" --listen 127.0.0.1:0 --data "$FULL_MNT/d" >"$WORK/ro.log" 2>&1
	rc=$?
	check_eq "a plane on a read-only data directory exits 1" 1 "$rc"
	check "it says why" grep -q "Read-only file system" "$WORK/ro.log"
else
	not_ok "remount the tmpfs read-only"
	diag "$(cat "$WORK/mount.err")"
fi

done_testing
