# lib-attack.sh: helpers of the tests that put a hostile middle box
# (tests/tools/attack-proxy.mjs) between a trusting agent and a plane or a
# relay (t0510, t0908): switching the proxy's mode, the agent's own counts
# of what it refused (its --metrics-file $WORK/NODE.prom), the plane's
# record of those refusals, and what the agent serves. Source it after
# lib.sh.

# vf NODE: the plane's count of NODE's verification failures
vf() {
	node_field "$1" .verify_failures
}

# vf_above NODE N: the plane has recorded more than N of them
vf_above() {
	[ "$(vf "$1")" -gt "$2" ]
}

# am NODE NAME: a value of NODE's --metrics-file, by its whole name
am() {
	awk -v m="$2" '$1 == m {print $2}' "$WORK/$1.prom" 2>/dev/null
}

# reason NODE REASON: NODE's count of verification failures for REASON
reason() {
	local n
	n=$(am "$1" "tetherd_verify_failures_total{reason=\"$2\"}")
	echo "${n:-0}"
}

reason_above() {
	[ "$(reason "$1" "$2")" -gt "$3" ]
}

# mode PROXYPORT MODE [ARG]: switches an attack proxy
mode() {
	local port=$1
	shift
	[ "$(curl -fsS -X POST --data "$*" "http://127.0.0.1:$port/__mode")" = "mode $*" ] ||
		bail "attack proxy on $port refused mode '$*'"
}

# contents NODE: the output's text files, name=content, on one line
contents() {
	(cd "$WORK/$1.out" && for f in $(find . -path ./.tether-work -prune -o -type f -print | sort); do
		printf '%s=%s ' "${f#./}" "$(cat "$f")"
	done)
}
