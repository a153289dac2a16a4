# lib-guards.sh: helpers of the guards' tests (t0970-t0974), sourced after lib.sh.

# eps N: a cluster body with N endpoints
eps() {
	local i out=""
	for i in $(seq 1 "$1"); do
		out="$out${out:+,}{\"address\":\"10.0.0.$i\",\"port\":80}"
	done
	echo "{\"endpoints\":[$out]}"
}

# nack_has NODE TEXT: the plane's last NACK of NODE holds TEXT
nack_has() {
	node_field "$1" '.last_nack.error // empty' | grep -qF -- "$2"
}

# on PLANEURL CMD...: lib.sh's helpers against another plane
on() {
	local PLANE_URL=$1
	shift
	"$@"
}
