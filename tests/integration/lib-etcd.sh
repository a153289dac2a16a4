# lib-etcd.sh: a real etcd cluster for the tests of --store etcd, sourced
# after lib.sh: members of Debian's etcd-server on free loopback ports,
# each with its own data directory and log, stopped by lib.sh's trap.
. "$(dirname "${BASH_SOURCE[0]}")/lib-proxy.sh"   # free_port

ETCD_BIN=${ETCD_BIN:-$(command -v etcd || echo /usr/bin/etcd)}
declare -a ETCD_PID ETCD_CLIENT ETCD_PEER
ETCD_ENDPOINTS=""

# etcd_member_start I: starts (or restarts) member I of the cluster
# etcd_cluster_start wrote down
etcd_member_start() {
	local i=$1 state=${2:-new}
	"$ETCD_BIN" --name "m$i" --data-dir "$WORK/etcd-$i" \
		--listen-client-urls "http://127.0.0.1:${ETCD_CLIENT[$i]}" \
		--advertise-client-urls "http://127.0.0.1:${ETCD_CLIENT[$i]}" \
		--listen-peer-urls "http://127.0.0.1:${ETCD_PEER[$i]}" \
		--initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER[$i]}" \
		--initial-cluster "$ETCD_INITIAL" --initial-cluster-state "$state" \
		--initial-cluster-token "tether-$T_NAME-$$" \
		--max-txn-ops 10000 --heartbeat-interval 50 --election-timeout 500 \
		>>"$WORK/etcd-$i.log" 2>&1 &
	ETCD_PID[$i]=$!
	track_pid "${ETCD_PID[$i]}"
}

# etcd_healthy I: member I answers /health with true
etcd_healthy() {
	curl -fsS -m 2 "http://127.0.0.1:${ETCD_CLIENT[$1]}/health" 2>/dev/null | grep -q '"health":"true"'
}

# etcd_cluster_start N: N members; ETCD_ENDPOINTS lists their client URLs
etcd_cluster_start() {
	local n=$1 i
	ETCD_INITIAL=""
	for i in $(seq 1 "$n"); do
		free_port "ETCD_CLIENT[$i]"
		free_port "ETCD_PEER[$i]"
		ETCD_INITIAL="${ETCD_INITIAL:+$ETCD_INITIAL,}m$i=http://127.0.0.1:${ETCD_PEER[$i]}"
		ETCD_ENDPOINTS="${ETCD_ENDPOINTS:+$ETCD_ENDPOINTS,}http://127.0.0.1:${ETCD_CLIENT[$i]}"
	done
	for i in $(seq 1 "$n"); do
		etcd_member_start "$i"
	done
	for i in $(seq 1 "$n"); do
		wait_until 30 etcd_healthy "$i" || bail "etcd member $i did not become healthy (see $WORK/etcd-$i.log)"
	done
}

# etcdv3 I PATH JSON: one call to member I's JSON gateway
etcdv3() {
	curl -sS -m 5 "http://127.0.0.1:${ETCD_CLIENT[$1]}$2" -d "$3"
}

# etcd_revision I: the cluster's current revision, asked of member I
etcd_revision() {
	etcdv3 "$1" /v3/kv/range "{\"key\":\"$(printf x | base64)\"}" | jq -r '.header.revision'
}
