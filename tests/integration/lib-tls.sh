# lib-tls.sh: a throwaway PKI for the tests that speak TLS, made with
# openssl: a CA, a server certificate for 127.0.0.1, client certificates
# for nodes, and a second CA nobody trusts. Sourced after lib.sh.

# make_pki DIR NODE...: DIR/ca.pem, DIR/other-ca.pem, DIR/server.{pem,key}
# (SAN IP:127.0.0.1, DNS:localhost), DIR/NODE.{pem,key} (CN=NODE, client
# auth) for each NODE, and DIR/rogue.{pem,key}: CN of the first NODE, signed
# by the other CA.
make_pki() {
	local dir=$1 n
	shift
	mkdir -p "$dir"
	(
		cd "$dir" || exit 1
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
			-days 2 -subj /CN=tether-test-ca || exit 1
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout other-ca.key \
			-out other-ca.pem -days 2 -subj /CN=tether-other-ca || exit 1
		pki_cert server localhost "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth" ca || exit 1
		for n in "$@"; do
			pki_cert "$n" "$n" "extendedKeyUsage=clientAuth" ca || exit 1
		done
		pki_cert rogue "$1" "extendedKeyUsage=clientAuth" other-ca || exit 1
	) >"$dir/pki.log" 2>&1 || bail "cannot make a test PKI (see $dir/pki.log)"
}

# pki_cert NAME CN EXTENSIONS CA: NAME.{pem,key} signed by CA (in the cwd).
pki_cert() {
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" \
		-subj "/CN=$2" &&
		printf '%s\n' "$3" >"$1.ext" &&
		openssl x509 -req -in "$1.csr" -CA "$4.pem" -CAkey "$4.key" -CAcreateserial -out "$1.pem" -days 1 \
			-extfile "$1.ext"
}

# served_serial PORT: the serial of the certificate a new TLS connection
# to 127.0.0.1:PORT is shown.
served_serial() {
	openssl s_client -connect "127.0.0.1:$1" </dev/null 2>/dev/null | openssl x509 -noout -serial 2>/dev/null
}

# hello PORT [OPENSSL ARGS...]: one TLS connection to the plane on PORT
# (GET /healthz), trusting $PKI/ca.pem; prints "Reused" or "New"
hello() {
	local port=$1
	shift
	# a request, and its answer read to the end: the session's ticket
	# (sent right after the handshake) is in before the connection closes
	printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' |
		openssl s_client -connect "127.0.0.1:$port" -CAfile "$PKI/ca.pem" -ign_eof "$@" 2>&1 |
		sed -n 's/^\(Reused\|New\), TLS.*/\1/p'
}
