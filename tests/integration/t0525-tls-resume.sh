#!/bin/bash
# t0525-tls-resume.sh: TLS sessions survive a restart of the plane. A
# session (its ticket) from before a kill -9 resumes after it, for
# openssl and for tetherd, which offers its session when it reconnects
# (the plane counts tether_tls_handshakes_total{resumed="true"}); the
# ticket keys are in the data directory's database (0600), never in a
# log, a metric, /v1/status or an export; a ticket from another
# deployment, and one past its lifetime, get a full handshake (the
# connection works); after a rotation the previous key still resumes;
# a client that shows a certificate, and a TLS 1.2 client, get no ticket;
# tetherd empties its session cache on a 401; --tls-ticket-rotation 0
# issues no tickets.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-tls.sh"
need_cmd openssl python3

# stored_keys DB: the ticket_keys row's text ("" when none)
stored_keys() {
	python3 -c 'import sqlite3, sys
r = sqlite3.connect(sys.argv[1]).execute("SELECT keys FROM ticket_keys").fetchone()
print(r[0] if r else "")' "$1"
}

PKI=$WORK/pki
make_pki "$PKI" n1
TLS=(--tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key")
export TETHER_CA_FILE=$PKI/ca.pem
CURL_OPTS=(--cacert "$PKI/ca.pem")
RESUMED='tether_tls_handshakes_total{resumed="true"}'


start_plane p "${TLS[@]}" --heartbeat 0.5
PORT=$PLANE_PORT
check_eq "a first connection is a full handshake" New "$(hello "$PORT" -sess_out "$WORK/s1.pem")"
check_eq "its session resumes" Reused "$(hello "$PORT" -sess_in "$WORK/s1.pem")"
check_eq "the plane counts the resumed handshake" 1 "$(metric "$RESUMED")"

start_agent n1 --ca-file "$PKI/ca.pem"
put file/a '{"path":"a.txt","content":"one\n"}' >/dev/null
check "tetherd applies version 1" wait_until 10 agent_at n1 1

# ---- kill -9 and a restart on the same data ------------------------------------
stop_pid "$PLANE_PID" KILL
start_plane p "${TLS[@]}" --heartbeat 0.5 --listen "127.0.0.1:$PORT"
resumed_ge() { [ "$(metric "$RESUMED")" -ge "$1" ]; }
# start_plane's own wait (curl -k) was a full handshake; the node's is the
# first resumed one
check "tetherd reconnects to the restarted plane and resumes its session" wait_until 20 resumed_ge 1
put file/a '{"path":"a.txt","content":"two\n"}' >/dev/null
check "tetherd applies version 2 over the resumed session" wait_until 10 agent_at n1 2
check_eq "a session from before the kill resumes after it" Reused "$(hello "$PORT" -sess_in "$WORK/s1.pem")"

# a refusal (401) empties tetherd's session cache: no session from before
# into the next attempt
echo tt1_000000000000_nope >"$WORK/bad.token"
start_agent n9 --ca-file "$PKI/ca.pem" --token-file "$WORK/bad.token"
check "tetherd empties its TLS session cache when the plane refuses it" \
	wait_until 15 grep -q "session cache is emptied (the plane refused" "$WORK/n9.log"
stop_pid "$AGENT_PID"

# ---- the keys at rest, and nowhere else --------------------------------------------
DB=$WORK/p.data/tether.db
check_eq "the database holding the keys is 0600" 600 "$(stat -c %a "$DB")"
KEYS=$(stored_keys "$DB")
CUR=$(awk '{print $4}' <<<"$KEYS")
check "one key of 64 bytes is stored" bash -c "[[ '$CUR' =~ ^[0-9a-f]{128}\$ ]]"
ctl export "$WORK/export" >/dev/null 2>&1
{
	cat "$PLANE_LOG" "$WORK/n1.log"
	curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/metrics"
	curl -sS "${CURL_OPTS[@]}" "$PLANE_URL/v1/status"
	cat "$WORK"/export/*/* 2>/dev/null
} >"$WORK/seen"
check "the export ran" test -d "$WORK/export"
check "the key is in no log, metric, status or export" bash -c "! grep -qi -e '${CUR:0:32}' -e '${CUR:64:32}' '$WORK/seen'"

# ---- another deployment's ticket -----------------------------------------------------
start_plane other "${TLS[@]}"
check_eq "a ticket from another deployment gets a full handshake" New \
	"$(hello "$PLANE_PORT" -sess_in "$WORK/s1.pem")"
check "and the connection works" curl -fsS "${CURL_OPTS[@]}" "$PLANE_URL/healthz"
check_eq "the other plane resumed nothing" 0 "$(metric "$RESUMED")"

# ---- rotation: the previous key for one more period, then a full handshake --------------
start_plane rot "${TLS[@]}" --tls-ticket-rotation 3
R=$PLANE_PORT
check_eq "a session on a plane rotating every 3 s" New "$(hello "$R" -sess_out "$WORK/s3.pem")"
check "the key rotates" wait_until 10 grep -q "the key rotated" "$PLANE_LOG"
check_eq "a ticket the previous key made resumes" Reused "$(hello "$R" -sess_in "$WORK/s3.pem")"
check "the key rotates again" wait_until 10 bash -c "[ \$(grep -c 'the key rotated' '$PLANE_LOG') -ge 2 ]"
check_eq "an expired ticket (older than its period, its key gone) gets a full handshake" New \
	"$(hello "$R" -sess_in "$WORK/s3.pem")"
check "the rotations are counted" test "$(metric tether_tls_ticket_key_rotations_total)" -ge 2
check_eq "the plane says nothing of a key" 0 "$(grep -ci 'ticket.*[0-9a-f]\{32\}' "$PLANE_LOG")"

# ---- a client certificate: no ticket, no resumption ------------------------------------------
# A ticket carries the client's chain, and the ticket keys' holder could
# forge one with any real chain: a client that shows a certificate gets no
# ticket, so it always does a full handshake; a token client still resumes.
start_plane certs "${TLS[@]}" --client-ca "$PKI/ca.pem"
C=$PLANE_PORT
check_eq "a client with a certificate: a full handshake" New \
	"$(hello "$C" -cert "$PKI/n1.pem" -key "$PKI/n1.key" -sess_out "$WORK/s5.pem")"
check "and no ticket to resume with" test ! -s "$WORK/s5.pem"
check_eq "a client without one on the same plane" New "$(hello "$C" -sess_out "$WORK/s6.pem")"
check_eq "gets a ticket and resumes" Reused "$(hello "$C" -sess_in "$WORK/s6.pem")"
check_eq "the plane resumed only that one" 1 "$(metric "$RESUMED")"
# TLS 1.2 gets no ticket (one holds the master secret itself)
check_eq "a TLS 1.2 client: a full handshake" New "$(hello "$C" -tls1_2 -sess_out "$WORK/s7.pem")"
check_eq "and it does not resume" New "$(hello "$C" -tls1_2 -sess_in "$WORK/s7.pem")"

# ---- no tickets ----------------------------------------------------------------------------
start_plane none "${TLS[@]}" --tls-ticket-rotation 0
check_eq "--tls-ticket-rotation 0: a full handshake" New "$(hello "$PLANE_PORT" -sess_out "$WORK/s4.pem")"
check "and no ticket to resume with" test ! -s "$WORK/s4.pem"
check "and no key is stored" test -z "$(stored_keys "$WORK/none.data/tether.db")"

done_testing
