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

# etcd_cluster_up N SCHEME START HEALTHY: N members on free ports, started
# with START I and waited for with HEALTHY I; ETCD_ENDPOINTS lists their
# SCHEME:// client URLs
etcd_cluster_up() {
	local n=$1 scheme=$2 start=$3 healthy=$4 i
	ETCD_INITIAL=""
	for i in $(seq 1 "$n"); do
		free_port "ETCD_CLIENT[$i]"
		free_port "ETCD_PEER[$i]"
		ETCD_INITIAL="${ETCD_INITIAL:+$ETCD_INITIAL,}m$i=$scheme://127.0.0.1:${ETCD_PEER[$i]}"
		ETCD_ENDPOINTS="${ETCD_ENDPOINTS:+$ETCD_ENDPOINTS,}$scheme://127.0.0.1:${ETCD_CLIENT[$i]}"
	done
	for i in $(seq 1 "$n"); do
		"$start" "$i"
	done
	for i in $(seq 1 "$n"); do
		wait_until 30 "$healthy" "$i" || bail "etcd member $i did not become healthy (see $WORK/etcd-$i.log)"
	done
}

# etcd_cluster_start N: N members; ETCD_ENDPOINTS lists their client URLs
etcd_cluster_start() {
	etcd_cluster_up "$1" http etcd_member_start etcd_healthy
}

# etcdv3 I PATH JSON: one call to member I's JSON gateway
etcdv3() {
	curl -sS -m 5 "http://127.0.0.1:${ETCD_CLIENT[$1]}$2" -d "$3"
}

# etcd_revision I: the cluster's current revision, asked of member I
etcd_revision() {
	etcdv3 "$1" /v3/kv/range "{\"key\":\"$(printf x | base64)\"}" | jq -r '.header.revision'
}

# ---- etcd over TLS, with client certificates and etcd's own auth -----------
# (t0830) New functions beside the ones above, which stay as they are.
declare -a ETCD_SECURE_ARGS=()   # more flags for every secure member
ETCD_PKI=""

# etcd_secure_pki DIR: a throwaway PKI for a secure etcd, made with openssl:
# DIR/ca.pem (the CA etcd and the plane trust), DIR/other-ca.pem (nobody
# trusts it), DIR/server.{pem,key} (SAN IP:127.0.0.1, DNS:localhost; server
# AND client usage: etcd's JSON gateway dials etcd's own gRPC with it; its
# CN is no etcd user), DIR/client.{pem,key} (O=tether, no CN: with
# --client-cert-auth and auth on, etcd's gateway refuses a client
# certificate that carries a CN), DIR/client-cn.{pem,key} (CN=tether, to
# see that refusal) and DIR/rogue.{pem,key} (like client, signed by the
# other CA). Sets ETCD_PKI.
etcd_secure_pki() {
	local dir=$1
	mkdir -p "$dir"
	(
		cd "$dir" || exit 1
		for ca in ca other-ca; do
			openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$ca.key" \
				-out "$ca.pem" -days 2 -subj "/CN=tether-etcd-test-$ca" || exit 1
		done
		etcd_pki_cert server /CN=tether-etcd-test-server "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth" ca || exit 1
		etcd_pki_cert client /O=tether "extendedKeyUsage=clientAuth" ca || exit 1
		etcd_pki_cert client-cn /CN=tether "extendedKeyUsage=clientAuth" ca || exit 1
		etcd_pki_cert rogue /O=tether "extendedKeyUsage=clientAuth" other-ca || exit 1
		chmod 600 ./*.key
	) >"$dir/pki.log" 2>&1 || bail "cannot make the etcd test PKI (see $dir/pki.log)"
	ETCD_PKI=$dir
}

# etcd_pki_cert NAME SUBJECT EXTENSIONS CA: NAME.{pem,key} signed by CA (cwd)
etcd_pki_cert() {
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" \
		-subj "$2" &&
		printf '%s\n' "$3" >"$1.ext" &&
		openssl x509 -req -in "$1.csr" -CA "$4.pem" -CAkey "$4.key" -CAcreateserial -out "$1.pem" -days 1 \
			-extfile "$1.ext"
}

# etcd_secure_member_start I [STATE]: member I over TLS: clients must show
# a certificate ETCD_PKI's CA signed (--client-cert-auth), peers too;
# ETCD_SECURE_ARGS are added (e.g. --auth-token-ttl)
etcd_secure_member_start() {
	local i=$1 state=${2:-new} p=$ETCD_PKI
	"$ETCD_BIN" --name "m$i" --data-dir "$WORK/etcd-$i" \
		--listen-client-urls "https://127.0.0.1:${ETCD_CLIENT[$i]}" \
		--advertise-client-urls "https://127.0.0.1:${ETCD_CLIENT[$i]}" \
		--listen-peer-urls "https://127.0.0.1:${ETCD_PEER[$i]}" \
		--initial-advertise-peer-urls "https://127.0.0.1:${ETCD_PEER[$i]}" \
		--initial-cluster "$ETCD_INITIAL" --initial-cluster-state "$state" \
		--initial-cluster-token "tether-$T_NAME-$$" \
		--cert-file "$p/server.pem" --key-file "$p/server.key" --client-cert-auth --trusted-ca-file "$p/ca.pem" \
		--peer-cert-file "$p/server.pem" --peer-key-file "$p/server.key" --peer-client-cert-auth \
		--peer-trusted-ca-file "$p/ca.pem" \
		--max-txn-ops 10000 --heartbeat-interval 50 --election-timeout 500 "${ETCD_SECURE_ARGS[@]}" \
		>>"$WORK/etcd-$i.log" 2>&1 &
	ETCD_PID[$i]=$!
	track_pid "${ETCD_PID[$i]}"
}

# etcd_secure_healthy I: member I answers /health with true (over TLS,
# with the client certificate)
etcd_secure_healthy() {
	curl -fsS -m 2 --cacert "$ETCD_PKI/ca.pem" --cert "$ETCD_PKI/client.pem" --key "$ETCD_PKI/client.key" \
		"https://127.0.0.1:${ETCD_CLIENT[$1]}/health" 2>/dev/null | grep -q '"health":"true"'
}

# etcd_secure_cluster_start N: N secure members (after etcd_secure_pki);
# ETCD_ENDPOINTS lists their https:// client URLs
etcd_secure_cluster_start() {
	etcd_cluster_up "$1" https etcd_secure_member_start etcd_secure_healthy
}

# etcdctl_secure ARGS...: etcdctl (gRPC) against the secure cluster with the
# test's client certificate; give --user USER:PASSWORD once auth is on
etcdctl_secure() {
	ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" --cacert "$ETCD_PKI/ca.pem" \
		--cert "$ETCD_PKI/client.pem" --key "$ETCD_PKI/client.key" --dial-timeout 5s --command-timeout 10s "$@"
}
