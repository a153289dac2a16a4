# lib-partition.sh: network partitions between real processes on loopback,
# made with nftables; sourced after lib.sh. A process that is to be cut
# off dials its peer through an alias address (127.X.Y.Z:PORT, rewritten
# to 127.0.0.1:PORT by a DNAT rule in this test's own nftables table).
# Cutting an alias drops the packets of every connection made to it, both
# ways or one way, established connections included: the peers see a
# black hole, not a refusal. The table goes with the test (lib.sh's trap).
#
#   part_init                 skips the test unless root can use nftables
#   part_try_init             the same, but returns 1 instead (PART_WHY says
#                             why): for a run that goes on without partitions
#   part_alias VAR PORT...    VAR=a new alias; ALIAS:PORT reaches 127.0.0.1:PORT
#   part_cut ALIAS [both|out|back]   both (default); out: only the dialer's
#                             packets; back: only the answers
#   part_heal ALIAS           every cut of ALIAS undone
PART_TABLE="tether_${T_NAME//[^A-Za-z0-9]/_}_$$"
PART_READY=0

part_cleanup() {
	[ "$PART_READY" = 1 ] && nft delete table ip "$PART_TABLE" 2>/dev/null
	PART_READY=0
}

part_init() {
	part_try_init || skip_all "$PART_WHY"
}

part_try_init() {
	PART_WHY=""
	if [ "$(id -u)" != 0 ]; then
		PART_WHY="partitions need root (nftables rules)"
	elif ! command -v nft >/dev/null 2>&1; then
		PART_WHY="nft is not installed (scripts/deps installs nftables)"
	elif ! nft add table ip "$PART_TABLE" 2>"$WORK/nft.err"; then
		PART_WHY="nftables does not work here: $(head -c 200 "$WORK/nft.err")"
	fi
	[ -z "$PART_WHY" ] || return 1
	PART_READY=1
	T_CLEANUPS="$T_CLEANUPS part_cleanup"
	if ! nft add chain ip "$PART_TABLE" nat '{ type nat hook output priority -100; }' ||
		! nft add chain ip "$PART_TABLE" cut '{ type filter hook output priority 0; policy accept; }'; then
		PART_WHY="cannot make the nftables chains of $PART_TABLE"
		part_cleanup
		return 1
	fi
}

declare -A PART_PORTS   # alias -> its ports, comma-separated

part_alias() {
	local var=$1 addr port
	shift
	# one the test has not drawn yet (a cut matches the alias and its ports)
	addr="127.$((20 + $$ % 200)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 2))"
	while [ -n "${PART_PORTS[$addr]:-}" ]; do
		addr="127.$((20 + $$ % 200)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 2))"
	done
	PART_PORTS[$addr]=$(IFS=,; echo "$*")
	for port in "$@"; do
		nft add rule ip "$PART_TABLE" nat ip daddr "$addr" tcp dport "$port" dnat to "127.0.0.1:$port" ||
			bail "cannot alias $addr:$port"
	done
	printf -v "$var" '%s' "$addr"
}

part_cut() {
	local addr=$1 way=${2:-both} ports
	ports="{ ${PART_PORTS[$addr]:?part_cut: $1 is no alias of this test} }"
	case $way in both|out|back) ;; *) bail "part_cut: both, out or back, not $way" ;; esac
	# the dialer's packets carry the port as their destination, the answers
	# as their source; both belong to a connection first made to the alias
	if [ "$way" != back ]; then
		nft add rule ip "$PART_TABLE" cut ct direction original ct original ip daddr "$addr" tcp dport "$ports" counter \
			drop comment "\"cut $addr\"" || bail "cannot cut $addr"
	fi
	if [ "$way" != out ]; then
		nft add rule ip "$PART_TABLE" cut ct direction reply ct original ip daddr "$addr" tcp sport "$ports" counter \
			drop comment "\"cut $addr\"" || bail "cannot cut $addr"
	fi
}

part_heal() {
	local addr=$1 h
	for h in $(nft -a list chain ip "$PART_TABLE" cut | awk -v c="\"cut $addr\"" 'index($0, c) { print $NF }'); do
		nft delete rule ip "$PART_TABLE" cut handle "$h" || bail "cannot heal $addr (rule $h)"
	done
}
