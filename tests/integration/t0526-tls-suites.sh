#!/bin/bash
# t0526-tls-suites.sh: what the plane's TLS negotiates. The plane's order
# decides: an OpenSSL client (tetherd's libcurl) that prefers AES-256 gets
# TLS 1.3 with AES-128-GCM-SHA256 (its key schedule on SHA-256) and X25519;
# a client that offers only AES-256 or only P-256 still gets in, and a
# client whose only key share is P-256 gets X25519 after a retry; TLS 1.2
# is ECDHE with an AEAD cipher; a TLS 1.2 client with only CBC suites, a
# TLS 1.1 client and a client with only finite-field groups are refused;
# a resumed session keeps the suite.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-tls.sh"
need_cmd openssl

PKI=$WORK/pki
make_pki "$PKI" n1
export TETHER_CA_FILE=$PKI/ca.pem
CURL_OPTS=(--cacert "$PKI/ca.pem")

# shake [OPENSSL ARGS...]: one handshake with the plane; prints
# "PROTOCOL SUITE GROUP"; "refused" when the plane answered with an alert
shake() {
	local out
	out=$(openssl s_client -connect "127.0.0.1:$PLANE_PORT" -CAfile "$PKI/ca.pem" "$@" </dev/null 2>&1)
	if ! grep -q 'Verify return code: 0 (ok)' <<<"$out" || ! grep -q '^\(New\|Reused\), TLS' <<<"$out"; then
		# refused = the plane answered (an alert), not a client that
		# could not even start
		if grep -q 'SSL handshake has read [1-9][0-9]* bytes' <<<"$out"; then
			echo refused
		else
			echo "no answer"
		fi
		return
	fi
	# the "New, ..." line comes right after the handshake (the session's
	# block only once a ticket came, which a closed stdin can beat)
	printf '%s %s\n' \
		"$(sed -n 's/^\(New\|Reused\), \([^,]*\), Cipher is /\2 /p' <<<"$out" | head -n 1)" \
		"$(sed -n 's/^\(Server Temp Key\|Negotiated TLS1.3 group\): \([^,]*\).*/\2/p' <<<"$out" | head -n 1)"
}

start_plane p --tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key"

check_eq "an OpenSSL client's defaults: TLS 1.3, AES-128-GCM-SHA256, X25519" \
	"TLSv1.3 TLS_AES_128_GCM_SHA256 X25519" "$(shake)"
check_eq "the plane's order, not the client's: AES-256 first in the client's list" \
	"TLSv1.3 TLS_AES_128_GCM_SHA256 X25519" \
	"$(shake -ciphersuites TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256)"
check_eq "a client with only AES-256-GCM gets it" \
	"TLSv1.3 TLS_AES_256_GCM_SHA384 X25519" "$(shake -ciphersuites TLS_AES_256_GCM_SHA384)"
check_eq "a client with only ChaCha20-Poly1305 gets it" \
	"TLSv1.3 TLS_CHACHA20_POLY1305_SHA256 X25519" "$(shake -ciphersuites TLS_CHACHA20_POLY1305_SHA256)"
check_eq "a client with only P-256 gets P-256" \
	"TLSv1.3 TLS_AES_128_GCM_SHA256 ECDH" "$(shake -groups P-256)"
check_eq "a client whose one key share is P-256, with X25519 listed too, gets X25519" \
	"TLSv1.3 TLS_AES_128_GCM_SHA256 X25519" "$(shake -groups P-256:X25519)"
check_eq "TLS 1.2: ECDHE with AES-128-GCM" \
	"TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256 X25519" "$(shake -tls1_2)"
check_eq "a TLS 1.2 client with only CBC suites is refused" \
	refused "$(shake -tls1_2 -cipher ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384)"
check_eq "a TLS 1.1 client is refused" refused "$(shake -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0')"
check_eq "a client with only finite-field groups is refused" refused "$(shake -groups ffdhe2048:ffdhe3072)"

# a session resumes with the suite it was made with
printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' |
	openssl s_client -connect "127.0.0.1:$PLANE_PORT" -CAfile "$PKI/ca.pem" -ign_eof \
		-sess_out "$WORK/s.pem" >/dev/null 2>&1
check "the first session was kept" test -s "$WORK/s.pem"
out=$(openssl s_client -connect "127.0.0.1:$PLANE_PORT" -CAfile "$PKI/ca.pem" -sess_in "$WORK/s.pem" \
	</dev/null 2>&1)
check_eq "it resumes, with AES-128-GCM-SHA256" "Reused, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256" \
	"$(grep -o '^Reused, TLSv1.3, Cipher is [A-Z0-9_]*' <<<"$out")"

# tetherd (libcurl, OpenSSL) gets the same and works
start_agent n1 --ca-file "$PKI/ca.pem"
put file/a '{"path":"a.txt","content":"one\n"}' >/dev/null
check "tetherd applies over the plane's TLS" wait_until 10 agent_at n1 1
done_testing
