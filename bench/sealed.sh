#!/usr/bin/env bash
# bench/sealed.sh: what sealed secrets cost (`bash bench/sealed.sh SRCDIR
# BUILDDIR`; docs/BENCHMARKS.md, "Sealed secrets"). Three parts:
#
#   micro   bench/seal_micro: a node opening 1, 10 and 100 secrets of one
#           push (unwrap, key commitment, decrypt), a writer sealing one and
#           wrapping one, and reseal's crypto for 1,000 secrets x 10 nodes
#   bytes   a change of one secret reaching BENCH_SEALED_NODES (1,000) nodes
#           through a relay: an origin and one relay, the nodes as sse_load
#           streams on the relay. Plaintext (today: a plane without
#           --sealed-secrets, the secret written in clear) against sealed
#           (--sealed-secrets, every node's key registered, tetherctl put
#           --seal): the bytes the relay read from the origin for the write
#           (tcp_info's bytes_received of its connections to the origin), the bytes
#           of pushes the relay sent its nodes (tether_push_bytes_total),
#           and, sealed, each node's one GET /v1/wraps through the relay
#           (curl's header and body sizes, summed)
#   reseal  1,000 sealed secrets (tetherctl sync of 1,000 secret files),
#           then 10 new nodes register: the wall time of tetherctl secrets
#           reseal --recovery-key, and of the sync that sealed them
#
# Results go to BUILDDIR/bench-sealed.txt, logs to BUILDDIR/bench-out/sealed/.
# Knobs: BENCH_SEALED_PARTS ("micro bytes reseal"), BENCH_SEALED_NODES
# (1000), BENCH_SEALED_SECRETS (1000), BENCH_SEALED_NEW (10), BENCH_RUNS (3).
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: sealed.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: sealed.sh SRCDIR BUILDDIR}
BENCH_NAME=sealed
. "$SRCDIR/bench/lib.sh"
PLANE_BIN=$BUILDDIR/tether-plane
CTL_BIN=$BUILDDIR/tetherctl
LOAD_BIN=$BUILDDIR/bench/sse_load
MICRO_BIN=$BUILDDIR/bench/seal_micro
SEALTOOL=$BUILDDIR/tests/tools/sealtool
need "$PLANE_BIN" "$CTL_BIN" "$LOAD_BIN" "$MICRO_BIN" "$SEALTOOL"
command -v openssl >/dev/null || die "sealed.sh needs openssl"
PARTS=${BENCH_SEALED_PARTS:-micro bytes reseal}
NODES=${BENCH_SEALED_NODES:-1000}
SECRETS=${BENCH_SEALED_SECRETS:-1000}
NEW=${BENCH_SEALED_NEW:-10}
RUNS=${BENCH_RUNS:-3}
OUT=$BUILDDIR/bench-out/sealed
RESULTS=$BUILDDIR/bench-sealed.txt
rm -rf "$OUT"
mkdir -p "$OUT"

bench_header "Sealed secrets" >"$RESULTS"

# start NAME ARGS...: a lab plane; sets URL and PID
start() {
	local name=$1
	shift
	# removed here, not by the child's redirection: a wait could read the
	# last run's log before the child truncates it
	rm -f "$OUT/$name.log"
	"$PLANE_BIN" $PLANE_LAB_FLAGS --listen 127.0.0.1:0 --data "$OUT/$name.data" --heartbeat 3600 "$@" \
		>"$OUT/$name.log" 2>&1 &
	PID=$!
	track "$PID"
	wait_until 10 grep -aEq 'listening on [0-9.]+:[0-9]+ ' "$OUT/$name.log" || die "plane $name did not start"
	URL=http://127.0.0.1:$(grep -ao 'listening on [^ ]*' "$OUT/$name.log" | tail -n 1 | sed 's/.*://')
	wait_until 10 curl -fsS -o /dev/null "$URL/healthz" ||
		die "plane $name is not healthy: $(curl -sS "$URL/healthz" 2>&1; tail -n 3 "$OUT/$name.log")"
}
version_of() {
	curl -fsS "$1/healthz" | sed 's/.*"version":\([0-9]*\).*/\1/'
}
metric_of() {
	curl -fsS "$1/metrics" | awk -v m="$2" '$1 == m {print $2}'
}
# rx_from PORT: bytes received so far on the established connections to
# loopback port PORT (tcp_info's bytes_received, summed): what the relay
# read from the origin
rx_from() {
	ss -tinH state established "( dport = :$1 )" | grep -o 'bytes_received:[0-9]*' |
		awk -F: '{ s += $2 } END { print s + 0 }'
}
# cert N: a certificate and key as a secret's body in $OUT/secret-N.json
cert() {
	openssl req -x509 -newkey rsa:2048 -nodes -subj "/CN=bench$1" -days 1 \
		-keyout "$OUT/k$1.pem" -out "$OUT/c$1.pem" >/dev/null 2>&1 || die "openssl failed"
	printf '{"cert":%s,"key":%s}\n' "$(jq -Rs . <"$OUT/c$1.pem")" "$(jq -Rs . <"$OUT/k$1.pem")" \
		>"$OUT/secret-$1.json"
}
command -v jq >/dev/null || die "sealed.sh needs jq"

# ---- micro ---------------------------------------------------------------------
if [[ " $PARTS " == *" micro "* ]]; then
	cert 0
	bytes=$(wc -c <"$OUT/secret-0.json")
	"$MICRO_BIN" --ms 1000 --bytes "$bytes" >"$OUT/micro.txt" || die "seal_micro failed"
	{
		echo
		echo "micro (bench/seal_micro --ms 1000 --bytes $bytes: a 2048-bit RSA certificate and key)"
		sed 's/^/  /' "$OUT/micro.txt"
	} >>"$RESULTS"
	log "micro: $(xargs <"$OUT/micro.txt")"
fi

# ---- bytes ---------------------------------------------------------------------
# one_run MODE R: origin + relay + NODES streams on the relay (nodes n0..,
# every name); sealed: each node's key registered; secret/s written twice,
# the second write measured
one_run() {
	local mode=$1 r=$2 origin opid oport relay rpid lpid v rc0 rc1 pb0 pb1 wraps_b=0 f
	rm -rf "$OUT/o.data" "$OUT/r.data" "$OUT/keys"
	mkdir -p "$OUT/keys"
	if [ "$mode" = sealed ]; then
		start o --sealed-secrets "$OUT/rec.pub"
	else
		start o
	fi
	origin=$URL opid=$PID
	oport=${origin##*:}
	start r --upstream "$origin" --relay-id r1
	relay=$URL rpid=$PID
	v=$(version_of "$origin")
	f=$OUT/load-$mode-$r.txt
	"$LOAD_BIN" -n "$NODES" --prefix n --version "$v" --wait-push $((v + 1)) --rounds 2 --timeout 120 \
		"${relay#http://}" >"$f" 2>&1 &
	lpid=$!
	track "$lpid"
	wait_until 60 grep -q '^ready=1' "$f" || die "the streams did not connect"
	# the origin knows every node (through the relay) before a key is sealed to
	wait_until 30 sh -c "[ \"\$(curl -fsS '$origin/v1/nodes' | jq '[.[] | select(.node | startswith(\"n\"))] | length')\" = $NODES ]" ||
		die "the origin does not list the $NODES nodes"
	if [ "$mode" = sealed ]; then
		# every node's key, registered (as tetherd does)
		for i in $(seq 0 $((NODES - 1))); do
			"$SEALTOOL" key "$OUT/keys/n$i.key" >/dev/null
			"$SEALTOOL" reg "n$i" "$OUT/keys/n$i.key" >"$OUT/keys/n$i.reg"
			curl -fsS -o /dev/null -X POST --data-binary "@$OUT/keys/n$i.reg" "$origin/v1/nodes/n$i/key" ||
				die "registration of n$i failed"
		done
		"$CTL_BIN" --plane "$origin" put secret/s "$OUT/secret-1.json" --seal >>"$OUT/cmd.log" 2>&1 ||
			die "put --seal failed"
	else
		"$CTL_BIN" --plane "$origin" put secret/s "$OUT/secret-1.json" >>"$OUT/cmd.log" 2>&1 || die "put failed"
	fi
	wait_until 60 grep -q '^round.1.complete=' "$f" || die "the first write did not reach every node"
	rc0=$(rx_from "$oport")
	pb0=$(metric_of "$relay" tether_push_bytes_total)
	if [ "$mode" = sealed ]; then
		"$CTL_BIN" --plane "$origin" put secret/s "$OUT/secret-2.json" --seal >>"$OUT/cmd.log" 2>&1 ||
			die "put --seal failed"
	else
		"$CTL_BIN" --plane "$origin" put secret/s "$OUT/secret-2.json" >>"$OUT/cmd.log" 2>&1 || die "put failed"
	fi
	wait "$lpid" || die "sse_load failed (see $f)"
	untrack "$lpid"
	rc1=$(rx_from "$oport")
	pb1=$(metric_of "$relay" tether_push_bytes_total)
	stored=$(curl -fsS "$origin/v1/resources/secret/s" | wc -c)
	if [ "$mode" = sealed ]; then
		nw=$(curl -fsS "$origin/v1/resources/secret/s" | jq '.body.wraps // {} | length')
		[ "$nw" -ge "$NODES" ] || die "the sealed secret holds $nw wraps, not $NODES"
		for i in $(seq 0 $((NODES - 1))); do
			kid=$("$SEALTOOL" key "$OUT/keys/n$i.key")
			curl -fsS -o "$OUT/wrap.json" -w '%{size_header} %{size_download} %{size_request}\n' \
				"$relay/v1/wraps?kid=$kid&names=secret/s"
			jq -e '.wraps["secret/s"].wrap' "$OUT/wrap.json" >/dev/null || die "no wrap for n$i at the relay"
		done >"$OUT/wraps-$r.txt"
		wraps_b=$(awk '{ s += $1 + $2 + $3 } END { print s }' "$OUT/wraps-$r.txt")
	fi
	echo "$mode $r $((rc1 - rc0)) $((pb1 - pb0)) $wraps_b $(kv "$f" round.2.wire_bytes.total) $stored" >>"$OUT/bytes.txt"
	log "$mode run $r: origin -> relay $((rc1 - rc0)) B, relay -> $NODES nodes $((pb1 - pb0)) B (pushes), wraps $wraps_b B, stored body $stored B"
	stop_pid "$rpid"
	stop_pid "$opid"
}
if [[ " $PARTS " == *" bytes "* ]]; then
	cert 1
	cert 2
	rm -f "$OUT/rec" "$OUT/rec.pub"
	"$CTL_BIN" keygen --recovery "$OUT/rec" >/dev/null || die "keygen --recovery failed"
	for r in $(seq 1 "$RUNS"); do
		one_run plain "$r"
		one_run sealed "$r"
	done
	col() { awk -v m="$1" -v k="$2" '$1 == m { print $k }' "$OUT/bytes.txt" | median; }
	{
		echo
		echo "bytes: a change of one secret (2048-bit RSA certificate and key) reaching $NODES nodes through one relay; medians of $RUNS runs"
		printf '  %-10s %14s %22s %22s %22s %22s\n' "" "stored body" "origin->relay (write)" "relay->nodes (pushes)" "nodes' wire (sse_load)" "wraps (GET /v1/wraps)"
		printf '  %-10s %14s %22s %22s %22s %22s\n' plaintext "$(col plain 7)" "$(col plain 3)" "$(col plain 4)" "$(col plain 6)" "-"
		printf '  %-10s %14s %22s %22s %22s %22s\n' sealed "$(col sealed 7)" "$(col sealed 3)" "$(col sealed 4)" "$(col sealed 6)" "$(col sealed 5)"
	} >>"$RESULTS"
fi

# ---- reseal ----------------------------------------------------------------------
if [[ " $PARTS " == *" reseal "* ]]; then
	[ -f "$OUT/secret-1.json" ] || cert 1
	[ -f "$OUT/rec" ] || "$CTL_BIN" keygen --recovery "$OUT/rec" >/dev/null
	mkdir -p "$OUT/tree/secret"
	for i in $(seq 1 "$SECRETS"); do
		cp "$OUT/secret-1.json" "$OUT/tree/secret/s$i.json"
	done
	for r in $(seq 1 "$RUNS"); do
		rm -rf "$OUT/o.data" "$OUT/keys"
		mkdir -p "$OUT/keys"
		start o --sealed-secrets "$OUT/rec.pub"
		origin=$URL opid=$PID
		t0=$EPOCHREALTIME
		"$CTL_BIN" --plane "$origin" sync "$OUT/tree" --recovery-key "$OUT/rec" >>"$OUT/cmd.log" 2>&1 ||
			die "sync failed"
		sync_ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", (b - a) * 1000 }')
		"$LOAD_BIN" -n "$NEW" --prefix m --linger 3600 "${origin#http://}" >"$OUT/load-m.txt" 2>&1 &
		mpid=$!
		track "$mpid"
		wait_until 60 grep -q '^ready=1' "$OUT/load-m.txt" || die "the new nodes' streams did not connect"
		for i in $(seq 0 $((NEW - 1))); do
			"$SEALTOOL" key "$OUT/keys/m$i.key" >/dev/null
			"$SEALTOOL" reg "m$i" "$OUT/keys/m$i.key" >"$OUT/keys/m$i.reg"
			curl -fsS -o /dev/null -X POST --data-binary "@$OUT/keys/m$i.reg" "$origin/v1/nodes/m$i/key" ||
				die "registration of m$i failed"
		done
		t0=$EPOCHREALTIME
		"$CTL_BIN" --plane "$origin" secrets reseal --recovery-key "$OUT/rec" >>"$OUT/cmd.log" 2>&1 ||
			die "reseal failed"
		reseal_ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", (b - a) * 1000 }')
		missing=$(curl -fsS "$origin/v1/secrets" | jq '[.secrets[].missing | length] | add')
		[ "$missing" = 0 ] || die "after reseal, $missing wraps are still missing"
		wrapped=$(curl -fsS "$origin/v1/resources/secret/s1" | jq '.body.wraps | length')
		[ "$wrapped" -ge "$NEW" ] || die "after reseal, secret/s1 holds $wrapped wraps, not $NEW"
		echo "$r $sync_ms $reseal_ms" >>"$OUT/reseal.txt"
		log "reseal run $r: sync (seal $SECRETS) $sync_ms ms, reseal for $NEW new nodes $reseal_ms ms"
		stop_pid "$mpid"
		stop_pid "$opid"
	done
	{
		echo
		echo "reseal: $SECRETS sealed secrets, $NEW new nodes; medians of $RUNS runs, wall ms of tetherctl's process (the plane's write included)"
		echo "  sync sealing $SECRETS plaintext files: $(awk '{print $2}' "$OUT/reseal.txt" | median) ms"
		echo "  secrets reseal --recovery-key: $(awk '{print $3}' "$OUT/reseal.txt" | median) ms"
	} >>"$RESULTS"
fi
cat "$RESULTS"
