#!/usr/bin/env bash
# bench/approvals.sh: what approvals that nodes enforce cost (`bash
# bench/approvals.sh SRCDIR BUILDDIR`; docs/BENCHMARKS.md, "Approvals").
# Two parts, each one a value of BENCH_APPROVALS_PARTS:
#
#   micro  bench/approval_micro: a node's check of one push's approvals
#          (count of K = 1, 2, 3 tokens; one token's verify; a refusal),
#          and tetherctl's signature, in microseconds
#   fleet  a signing plane and N tetherd (files consumer, --trust,
#          --approvers of 2 keys, --approvals 2) on this machine, for each N
#          of BENCH_APPROVALS_AGENTS: per round a one-resource write, its
#          first approval (tetherctl approve --key a), then the second: the
#          time from the second `tetherctl approve` returning (its POST
#          answered) until the plane has every node's ACK of the version
#          (GET /v1/nodes, polled every BENCH_POLL s); and the wall time of
#          that `tetherctl approve` itself (fetch, diff, digest, sign,
#          post). Median and max of BENCH_APPROVALS_ROUNDS rounds. For
#          comparison, the same fleet without --approvers: the time from
#          the write (tetherctl put returning) to every node's ACK.
#
# Results go to BUILDDIR/bench-approvals.txt, logs to
# BUILDDIR/bench-out/approvals/. Knobs: BENCH_APPROVALS_PARTS ("micro
# fleet"), BENCH_APPROVALS_AGENTS ("10 100"), BENCH_APPROVALS_ROUNDS (5),
# BENCH_POLL (0.02).
if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi
set -u
SRCDIR=${1:?usage: approvals.sh SRCDIR BUILDDIR}
BUILDDIR=${2:?usage: approvals.sh SRCDIR BUILDDIR}
BENCH_NAME=approvals
. "$SRCDIR/bench/lib.sh"
trap bench_exit EXIT

PLANE_BIN=$BUILDDIR/tether-plane
CTL_BIN=$BUILDDIR/tetherctl
AGENT_BIN=$BUILDDIR/tetherd
MICRO_BIN=$BUILDDIR/bench/approval_micro
need "$PLANE_BIN" "$CTL_BIN" "$AGENT_BIN" "$MICRO_BIN"
command -v jq >/dev/null || die "approvals.sh needs jq"
PARTS=${BENCH_APPROVALS_PARTS:-micro fleet}
SIZES=${BENCH_APPROVALS_AGENTS:-10 100}
ROUNDS=${BENCH_APPROVALS_ROUNDS:-5}
OUT=$BUILDDIR/bench-out/approvals
RESULTS=$BUILDDIR/bench-approvals.txt
rm -rf "$OUT"
mkdir -p "$OUT"

bench_header "Approvals" >"$RESULTS"

# ---- micro -------------------------------------------------------------------------
if [[ " $PARTS " == *" micro "* ]]; then
	"$MICRO_BIN" --ms 1000 >"$OUT/micro.txt" || die "approval_micro failed"
	{
		echo
		echo "micro (bench/approval_micro --ms 1000: microseconds per operation; a token is $(kv "$OUT/micro.txt" token_bytes) bytes)"
		for k in sign verify count_1 count_2 count_3 count_2_bad; do
			printf '  %-12s %10s us\n' "$k" "$(kv "$OUT/micro.txt" "${k}_us")"
		done
	} >>"$RESULTS"
	log "micro: $(grep _us= "$OUT/micro.txt" | xargs)"
fi

# ---- fleet -------------------------------------------------------------------------
# all_acked URL V N: the plane has N nodes' ACK of version V
all_acked() {
	[ "$(curl -fsS "$1/v1/nodes" | jq --argjson v "$2" '[.[] | select(.acked_version == $v)] | length')" = "$3" ]
}
ms_now() {
	echo $((${EPOCHREALTIME/./} / 1000))
}

# fleet N MODE: N nodes; MODE approvals (--approvals 2) or plain
fleet() {
	local n=$1 mode=$2 i v t0 t1 a0 url pid extra=()
	rm -rf "$OUT/p.data" "$OUT"/n*.state "$OUT"/n*.out "$OUT/keys"
	mkdir -p "$OUT/keys"
	"$CTL_BIN" keygen "$OUT/keys/plane.key" >/dev/null || die "keygen failed"
	"$CTL_BIN" keygen --approver "$OUT/keys/a.key" >/dev/null || die "keygen --approver failed"
	"$CTL_BIN" keygen --approver "$OUT/keys/b.key" >/dev/null || die "keygen --approver failed"
	cat "$OUT/keys/a.key.pub" "$OUT/keys/b.key.pub" >"$OUT/keys/approvers"
	rm -f "$OUT/p.log"
	"$PLANE_BIN" $PLANE_LAB_FLAGS --listen 127.0.0.1:0 --data "$OUT/p.data" --heartbeat 5 \
		--signing-key "$OUT/keys/plane.key" >"$OUT/p.log" 2>&1 &
	pid=$!
	track "$pid"
	wait_until 10 grep -aEq 'listening on [0-9.]+:[0-9]+ ' "$OUT/p.log" || die "the plane did not start"
	url=http://127.0.0.1:$(grep -ao 'listening on [^ ]*' "$OUT/p.log" | tail -n 1 | sed 's/.*://')
	wait_until 10 curl -fsS -o /dev/null "$url/healthz" || die "the plane is not healthy"
	printf '{"path":"f.txt","content":"0\\n"}' | "$CTL_BIN" --plane "$url" put file/f >/dev/null || die "put failed"
	v=$(curl -fsS "$url/healthz" | jq -r .version)
	"$CTL_BIN" --plane "$url" approve "$v" --key "$OUT/keys/a.key" >/dev/null 2>>"$OUT/ctl.log" || die "approve failed"
	"$CTL_BIN" --plane "$url" approve "$v" --key "$OUT/keys/b.key" >/dev/null 2>>"$OUT/ctl.log" || die "approve failed"
	[ "$mode" = approvals ] && extra=(--approvers "$OUT/keys/approvers" --approvals 2)
	for i in $(seq 1 "$n"); do
		"$AGENT_BIN" --node "n$i" --plane "$url" --state-dir "$OUT/n$i.state" --output-dir "$OUT/n$i.out" \
			--trust "$OUT/keys/plane.key.pub" "${extra[@]}" --log-level warn >>"$OUT/agents.log" 2>&1 &
		track "$!"
	done
	wait_until 120 all_acked "$url" "$v" "$n" || die "the $n nodes did not reach version $v"
	for r in $(seq 1 "$ROUNDS"); do
		a0=$(ms_now)
		printf '{"path":"f.txt","content":"%s\\n"}' "$r" | "$CTL_BIN" --plane "$url" put file/f >/dev/null ||
			die "put failed"
		t0=$(ms_now)
		v=$(curl -fsS "$url/healthz" | jq -r .version)
		if [ "$mode" = plain ]; then
			wait_until 60 all_acked "$url" "$v" "$n" || die "the $n nodes did not take version $v"
			t1=$(ms_now)
			echo "$n $r $((t1 - t0)) $((t0 - a0))" >>"$OUT/plain.txt"
			log "$n plain nodes, round $r: all serving $((t1 - t0)) ms after the write returned"
			continue
		fi
		"$CTL_BIN" --plane "$url" approve "$v" --key "$OUT/keys/a.key" >/dev/null 2>>"$OUT/ctl.log" ||
			die "approve failed"
		all_acked "$url" "$v" 1 && die "a node took version $v on one approval"
		a0=$(ms_now)
		"$CTL_BIN" --plane "$url" approve "$v" --key "$OUT/keys/b.key" >/dev/null 2>>"$OUT/ctl.log" ||
			die "approve failed"
		t0=$(ms_now)
		wait_until 60 all_acked "$url" "$v" "$n" || die "the $n nodes did not take version $v"
		t1=$(ms_now)
		echo "$n $r $((t1 - t0)) $((t0 - a0))" >>"$OUT/fleet.txt"
		log "$n nodes, round $r: all serving $((t1 - t0)) ms after the second approval returned (tetherctl approve took $((t0 - a0)) ms)"
	done
	bench_exit_agents
	stop_pid "$pid"
}
bench_exit_agents() {
	local p
	for p in $PIDS; do
		[ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -d' ' -f1)" = "$AGENT_BIN" ] && stop_pid "$p"
	done
}

if [[ " $PARTS " == *" fleet "* ]]; then
	for n in $SIZES; do
		fleet "$n" approvals
		fleet "$n" plain
	done
	{
		echo
		echo "fleet: from the K-th (second) approval's POST answered to every approving node's ACK; $ROUNDS rounds per size"
		printf '  %-8s %18s %14s %24s\n' nodes "median (ms)" "max (ms)" "tetherctl approve (ms)"
		for n in $SIZES; do
			printf '  %-8s %18s %14s %24s\n' "$n" \
				"$(awk -v n="$n" '$1 == n { print $3 }' "$OUT/fleet.txt" | median)" \
				"$(awk -v n="$n" '$1 == n { print $3 }' "$OUT/fleet.txt" | sort -n | tail -n 1)" \
				"$(awk -v n="$n" '$1 == n { print $4 }' "$OUT/fleet.txt" | median)"
		done
		echo "without approvals (the same nodes, no --approvers): from the write (tetherctl put returning) to every node's ACK"
		printf '  %-8s %18s %14s\n' nodes "median (ms)" "max (ms)"
		for n in $SIZES; do
			printf '  %-8s %18s %14s\n' "$n" \
				"$(awk -v n="$n" '$1 == n { print $3 }' "$OUT/plain.txt" | median)" \
				"$(awk -v n="$n" '$1 == n { print $3 }' "$OUT/plain.txt" | sort -n | tail -n 1)"
		done
	} >>"$RESULTS"
fi
cat "$RESULTS"
