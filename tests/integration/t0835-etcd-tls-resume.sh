#!/usr/bin/env bash
# t0835-etcd-tls-resume.sh: TLS sessions survive a failover. Two replicas
# on one etcd share the session-ticket keys (the key ticket_keys under the
# prefix): a session made on one resumes on the other, before and after
# the first is killed; a rotation on one is the other's too (the previous
# key still resumes on both); a third plane on another prefix (another
# deployment) gives a full handshake to the same ticket.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"
. "$(dirname "$0")/lib-tls.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
need_cmd openssl jq curl

PKI=$WORK/pki
make_pki "$PKI" n1
TLS=(--tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key")
CURL_OPTS=(--cacert "$PKI/ca.pem")

etcd_cluster_start 1
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix /t0835/ --tls-ticket-rotation 6)
start_plane a "${E[@]}" "${TLS[@]}"
A_PID=$PLANE_PID A_PORT=$PLANE_PORT A_LOG=$PLANE_LOG
start_plane b "${E[@]}" "${TLS[@]}"
B_PORT=$PLANE_PORT B_LOG=$PLANE_LOG
stored=$(etcdv3 1 /v3/kv/range "{\"key\":\"$(printf /t0835/ticket_keys | base64)\"}" | jq -r '.kvs | length')
check_eq "one key set is in etcd, under the prefix" 1 "$stored"

check_eq "a session on replica a" New "$(hello "$A_PORT" -sess_out "$WORK/a.pem")"
check_eq "resumes on replica b" Reused "$(hello "$B_PORT" -sess_in "$WORK/a.pem")"
# the other way: a ticket replica b made resumes on a
check_eq "a session on replica b" New "$(hello "$B_PORT" -sess_out "$WORK/b.pem")"
check_eq "and one from b on a" Reused "$(hello "$A_PORT" -sess_in "$WORK/b.pem")"

# ---- a rotation on one replica is the other's ---------------------------------------
check "a replica rotates the key" wait_until 15 grep -q "the key rotated" "$A_LOG" "$B_LOG"
check "the other reads the rotation from etcd" \
	wait_until 10 bash -c "grep -q 'the key rotated' '$A_LOG' && grep -q 'the key rotated' '$B_LOG'"
check_eq "a ticket of the previous key resumes on a" Reused "$(hello "$A_PORT" -sess_in "$WORK/a.pem")"
check_eq "and on b" Reused "$(hello "$B_PORT" -sess_in "$WORK/a.pem")"

# ---- the failover ---------------------------------------------------------------------
hello "$A_PORT" -sess_out "$WORK/a2.pem" >/dev/null
stop_pid "$A_PID" KILL
check_eq "after a kill -9 of a, its session resumes on b" Reused "$(hello "$B_PORT" -sess_in "$WORK/a2.pem")"
PLANE_URL=https://127.0.0.1:$B_PORT
check "b counts it" test "$(metric 'tether_tls_handshakes_total{resumed="true"}')" -ge 3

# ---- another deployment -------------------------------------------------------------------
start_plane c --store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix /t0835-other/ "${TLS[@]}"
check_eq "a plane on another prefix gives the ticket a full handshake" New \
	"$(hello "$PLANE_PORT" -sess_in "$WORK/a2.pem")"

done_testing
