#!/usr/bin/env bash
# t0110-plane-bad-input.sh: every kind of bad input gets a clear error (the
# right status, a JSON {"error"} naming what is wrong) and loses nothing:
# after each refusal the store's version and every resource are unchanged.
# Malformed JSON, non-object bodies, size and nesting limits (Content-Length
# and chunked), duplicate keys, NUL bytes, invalid UTF-8, bad \u escapes and
# lone surrogates, raw control characters, lenient numbers, wrong types and
# ranges of every field of every type, bad names, bad batches, the resource
# limit, bad sync queries, wrong methods, unknown endpoints, the admin token.
. "$(dirname "$0")/lib.sh"

# ---- helpers ------------------------------------------------------------------

# snapshot: the version nodes see (/healthz) and every resource with its
# version and body (the list is sorted by name and bodies are canonical).
snapshot() {
	curl -sS "$PLANE_URL/healthz" "$PLANE_URL/v1/resources"
}

# rebase: the store moved on purpose; later refusals compare against this.
rebase() {
	BASE=$(snapshot)
}

# refused DESC STATUS PATTERN METHOD PATH [CURL ARGS...]: one test point. The
# answer must have STATUS and a JSON body whose "error" string contains
# PATTERN (a fixed string), and the store must be exactly as before.
refused() {
	local desc=$1 want=$2 pat=$3 method=$4 path=$5
	shift 5
	local out code body err why="" now
	out=$(curl -sS -m 10 --path-as-is -X "$method" -w '\n%{http_code}' "$@" "$PLANE_URL$path" 2>&1)
	code=${out##*$'\n'}
	body=${out%$'\n'*}
	if ! err=$(printf '%s' "$body" | jq -er '.error | strings' 2>/dev/null) || [ -z "$err" ]; then
		why="the answer is not JSON with a non-empty error string"
	fi
	[ "$code" = "$want" ] || why="status $code, expected $want. $why"
	if [ -z "$why" ]; then
		case $err in *"$pat"*) ;; *) why="the error does not contain '$pat'" ;; esac
	fi
	now=$(snapshot)
	if [ "$now" != "$BASE" ]; then
		why="$why the store changed: $(printf '%s' "$now" | head -c 300)"
		BASE=$now   # report the change once, not in every later check
	fi
	if [ -z "$why" ]; then
		ok "$desc"
	else
		not_ok "$desc"
		diag "$why"
		diag "answer: $(printf '%s' "$body" | head -c 400)"
	fi
}

# bad DESC NAME TEMPLATE JQ PATTERN: PUT NAME with the template body changed by
# the jq expression; expect 422 naming the field.
bad() {
	local body
	body=$(jq -c "$4" <<<"$3") || bail "jq: $4"
	refused "$1" 422 "$5" PUT "/v1/resources/$2" --data-binary "$body"
}

# accepted DESC METHOD PATH [CURL ARGS...]: one test point, expect 200, rebase.
accepted() {
	local desc=$1 method=$2 path=$3
	shift 3
	local out code
	out=$(curl -sS -m 10 --path-as-is -X "$method" -w '\n%{http_code}' "$@" "$PLANE_URL$path" 2>&1)
	code=${out##*$'\n'}
	if [ "$code" = 200 ]; then
		ok "$desc"
	else
		not_ok "$desc"
		diag "status $code: ${out%$'\n'*}"
	fi
	rebase
}

# not_allowed METHOD PATH ALLOW: 405 with the Allow header and a JSON error.
not_allowed() {
	local hdr body code allow why=""
	body=$(curl -sS -m 10 -X "$1" -D "$WORK/hdr" -o - -w '\n%{http_code}' "$PLANE_URL$2" 2>&1)
	code=${body##*$'\n'}
	body=${body%$'\n'*}
	allow=$(tr -d '\r' <"$WORK/hdr" | sed -n 's/^[Aa]llow: //p')
	[ "$code" = 405 ] || why="status $code."
	[ "$allow" = "$3" ] || why="$why Allow is '$allow', expected '$3'."
	printf '%s' "$body" | jq -e '.error | strings' >/dev/null 2>&1 || why="$why no JSON error."
	[ "$(snapshot)" = "$BASE" ] || { why="$why the store changed."; rebase; }
	if [ -z "$why" ]; then
		ok "$1 $2 is 405 with Allow: $3"
	else
		not_ok "$1 $2 is 405 with Allow: $3"
		diag "$why answer: $body"
	fi
}

# nest N: a JSON array nested N deep ([[...]]).
nest() {
	local i s="" e=""
	for ((i = 0; i < $1; i++)); do
		s="${s}["
		e="$e]"
	done
	printf '%s%s' "$s" "$e"
}

# ---- plane with small limits ----------------------------------------------------

# --allow-unknown-fields: the bodies below carry their payload (escapes, padding,
# nesting) in fields the schema does not know (note, pad, x), to test the JSON
# layer and the size limits apart from the schema (t0100 and t0987 test the default)
start_plane p --max-body 1024 --max-request 4096 --max-depth 8 --allow-unknown-fields

CL='{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9001,"weight":1}]}'
LS='{"address":"127.0.0.1","port":8443,"tls":{"secret":"s1"}}'
RT='{"listener":"l1","host":"example.com","path":"/api","cluster":"web"}'
pem_pair s1   # the plane parses a secret's certificate and key
SC="{\"cert\":\"$PAIR_CERT\",\"key\":\"$PAIR_KEY\"}"
FL='{"path":"conf.d/app.conf","content":"x=1\n","mode":"0644"}'

# the valid templates every bad variant below starts from
out=$(curl -sS -X POST "$PLANE_URL/v1/batch" --data-binary "{\"upserts\":[
	{\"name\":\"cluster/web\",\"body\":$CL}, {\"name\":\"secret/s1\",\"body\":$SC},
	{\"name\":\"listener/l1\",\"body\":$LS}, {\"name\":\"route/r1\",\"body\":$RT},
	{\"name\":\"file/f1\",\"body\":$FL}]}")
check_eq "the valid template of every type is accepted" 1 "$(echo "$out" | json .version)"
rebase

# ---- malformed JSON ---------------------------------------------------------------

refused "an unterminated object is 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary '{'
refused "a missing value is 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary '{"lb":}'
refused "a bare word is 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary 'endpoints'
refused "a trailing comma is 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary '{"endpoints":[],}'
refused "single quotes are 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary "{'endpoints':[]}"
refused "an empty body is 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary ''
refused "garbage after the object is 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary '{"endpoints":[]} x'
refused "two objects are 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary '{"endpoints":[]}{"endpoints":[]}'
refused "an unterminated string is 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary '{"endpoints":[],"x":"abc'
refused "a bad escape is 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary '{"endpoints":[],"x":"\q"}'
refused "a lone surrogate escape is 400" 400 "malformed JSON" PUT /v1/resources/cluster/web --data-binary '{"endpoints":[],"x":"\ud800"}'
refused "a malformed body names the resource" 400 "cluster/web: " PUT /v1/resources/cluster/web --data-binary '{"lb":'
refused "a malformed batch is 400" 400 "malformed JSON" POST /v1/batch --data-binary '{"upserts":['
refused "a malformed ack is 400" 400 "malformed JSON" POST /v1/ack --data-binary '{"node":'
# a body as an operator writes it, over lines: the line and column and what was expected
refused "a multi-line body's error names its line and column" 400 \
	"malformed JSON at line 3, column 3 (byte 35): expected ',' or '}', found '\"'" \
	PUT /v1/resources/cluster/web --data-binary $'{\n  "endpoints": ["10.0.0.1:80"]\n  "lb": "round_robin"\n}\n'

refused "a body that is an array is 422" 422 "body must be a JSON object" PUT /v1/resources/cluster/web --data-binary '[]'
refused "a body that is a string is 422" 422 "body must be a JSON object" PUT /v1/resources/cluster/web --data-binary '"x"'
refused "a body that is a number is 422" 422 "body must be a JSON object" PUT /v1/resources/cluster/web --data-binary '42'
refused "a body that is null is 422" 422 "body must be a JSON object" PUT /v1/resources/cluster/web --data-binary 'null'
refused "a batch body that is not an object is 422" 422 "body must be a JSON object" POST /v1/batch --data-binary '[]'
refused "a batch upsert whose body is not an object is 422" 422 "cluster/x: body must be a JSON object" \
	POST /v1/batch --data-binary '{"upserts":[{"name":"cluster/x","body":"text"}]}'

# ---- duplicate keys, NUL bytes, encoding -----------------------------------------------

refused "a duplicate top-level key is 400 naming it" 400 "duplicate key 'lb'" \
	PUT /v1/resources/cluster/web --data-binary '{"lb":"random","endpoints":[],"lb":"least_conn"}'
refused "a duplicate nested key is 400 naming its place" 400 "duplicate key 'port' in endpoints[0]" \
	PUT /v1/resources/cluster/web --data-binary '{"endpoints":[{"address":"127.0.0.1","port":1,"port":2}]}'
refused "a duplicate key inside a batch body is 400" 400 "duplicate key 'endpoints'" \
	POST /v1/batch --data-binary '{"upserts":[{"name":"cluster/x","body":{"endpoints":[],"endpoints":[]}}]}'
refused "a duplicate key in the batch itself is 400" 400 "duplicate key 'removes'" \
	POST /v1/batch --data-binary '{"removes":[],"removes":["cluster/web"]}'

printf '{"endpoints":[],"x":"a\0b"}' >"$WORK/nul.json"
refused "a raw NUL byte is 400" 400 "NUL" PUT /v1/resources/cluster/web --data-binary "@$WORK/nul.json"
refused "an escaped NUL (\\u0000) is 400" 400 "u0000" \
	PUT /v1/resources/cluster/web --data-binary '{"endpoints":[],"x":"a\u0000b"}'
printf '{"upserts":[{"name":"cluster/x","body":{"endpoints":[],"x":"\0"}}]}' >"$WORK/nulbatch.json"
refused "a raw NUL byte in a batch is 400" 400 "NUL" POST /v1/batch --data-binary "@$WORK/nulbatch.json"
printf '{"endpoints":[],"note":"a\377b"}' >"$WORK/utf8.json"
refused "invalid UTF-8 is 400 (JSON text is UTF-8)" 400 "UTF-8" PUT /v1/resources/cluster/web --data-binary "@$WORK/utf8.json"
printf '{"endpoints":[],"note":"a\300\257b"}' >"$WORK/overlong.json"
refused "an overlong UTF-8 sequence is 400" 400 "UTF-8" PUT /v1/resources/cluster/web --data-binary "@$WORK/overlong.json"

# ---- \u escapes, control characters, strict numbers (cJSON would take them) ------------------

# cJSON decodes a \u escape with a bad hex digit as U+0000 and cuts the string there
refused "a \\u escape with a bad hex digit is 400 naming it and its byte" 400 \
	'cluster/esc: malformed JSON at line 1, column 26 (byte 25): \u escape without 4 hex digits' \
	PUT /v1/resources/cluster/esc --data-binary '{"endpoints":[],"note":"a\u12G4b"}'
check_eq "nothing was stored under cluster/esc" 404 "$(api_status GET /v1/resources/cluster/esc)"
refused "\\uZZZZ is 400" 400 'malformed JSON at line 1, column 26 (byte 25): \u escape without 4 hex digits' \
	PUT /v1/resources/cluster/esc --data-binary '{"endpoints":[],"note":"a\uZZZZb"}'
refused "a short \\u escape is 400" 400 '\u escape without 4 hex digits' \
	PUT /v1/resources/cluster/esc --data-binary '{"endpoints":[],"note":"\u12"}'
refused "a bad \\u escape in a key is 400" 400 'malformed JSON at line 1, column 19 (byte 18): \u escape without 4 hex digits' \
	PUT /v1/resources/cluster/esc --data-binary '{"endpoints":[],"k\u00G0":1}'
refused "a high surrogate without its low one is 400" 400 \
	'malformed JSON at line 1, column 25 (byte 24): \u escape of a high surrogate (\uD800-\uDBFF) not followed by a \u escape of a low surrogate' \
	PUT /v1/resources/cluster/esc --data-binary '{"endpoints":[],"note":"\uD83D\u0041"}'
refused "a lone low surrogate is 400" 400 'malformed JSON at line 1, column 25 (byte 24): \u escape of a lone low surrogate' \
	PUT /v1/resources/cluster/esc --data-binary '{"endpoints":[],"note":"\uDE00"}'
refused "a bad \\u escape inside a batch body is 400" 400 '\u escape without 4 hex digits' \
	POST /v1/batch --data-binary '{"upserts":[{"name":"cluster/esc","body":{"endpoints":[],"note":"\uZZZZ"}}]}'
refused "a bad \\u escape in an ack is 400" 400 '\u escape without 4 hex digits' \
	POST /v1/ack --data-binary '{"node":"n\u00Z1","version":1,"nonce":"x","status":"ack"}'
refused "an invalid escape (\\x) is 400 naming it" 400 'malformed JSON at line 1, column 25 (byte 24): invalid escape in a string' \
	PUT /v1/resources/cluster/esc --data-binary '{"endpoints":[],"note":"\x41"}'
refused "a raw tab in a string is 400" 400 'malformed JSON at line 1, column 26 (byte 25): raw control character 0x09 in a string' \
	PUT /v1/resources/cluster/esc --data-binary $'{"endpoints":[],"note":"a\tb"}'
refused "a number with a leading zero is 400" 400 'malformed JSON at line 1, column 23 (byte 22): a number cannot start with 0' \
	PUT /v1/resources/cluster/esc --data-binary '{"endpoints":[{"port":080,"address":"10.0.0.1"}]}'
refused "a form feed between values is 400" 400 'malformed JSON at line 1, column 15 (byte 14): expected a value or' \
	PUT /v1/resources/cluster/esc --data-binary $'{"endpoints":[\f]}'
check_eq "after every refusal cluster/esc is still absent" 404 "$(api_status GET /v1/resources/cluster/esc)"
accepted "valid \\u escapes and a surrogate pair are accepted" PUT /v1/resources/cluster/esc \
	--data-binary '{"endpoints":[],"note":"caf\u00e9 \uD83D\uDE00 \u20AC\/"}'
check_eq "they are stored decoded, whole" "café 😀 €/" \
	"$(curl -sS "$PLANE_URL/v1/resources/cluster/esc" | jq -r '.body.note')"

# ---- size limits: --max-body 1024, --max-request 4096 ------------------------------------

pad() { # pad N: a valid cluster body of about N bytes
	printf '{"endpoints":[],"pad":"%s"}' "$(head -c "$1" /dev/zero | tr '\0' x)"
}
pad 2000 >"$WORK/2k.json"
pad 5000 >"$WORK/5k.json"
pad 900 >"$WORK/900.json"
refused "a body over --max-body is 413" 413 "max-body" PUT /v1/resources/cluster/web --data-binary "@$WORK/2k.json"
refused "a body over --max-request is 413" 413 "max-request" PUT /v1/resources/cluster/web --data-binary "@$WORK/5k.json"
refused "a chunked body over --max-request (no Content-Length) is 413" 413 "max-request" \
	PUT /v1/resources/cluster/web -H 'Transfer-Encoding: chunked' --data-binary "@$WORK/5k.json"
refused "a chunked body over --max-body is 413" 413 "max-body" \
	PUT /v1/resources/cluster/web -H 'Transfer-Encoding: chunked' --data-binary "@$WORK/2k.json"
refused "a batch over --max-request is 413" 413 "max-request" POST /v1/batch \
	--data-binary "{\"upserts\":[{\"name\":\"cluster/big\",\"body\":$(cat "$WORK/5k.json")}]}"
refused "a batch with one body over --max-body is 413 naming it" 413 "cluster/big: body of" POST /v1/batch \
	--data-binary "{\"upserts\":[{\"name\":\"cluster/big\",\"body\":$(cat "$WORK/2k.json")}]}"
refused "a chunked batch over --max-request is 413" 413 "max-request" POST /v1/batch -H 'Transfer-Encoding: chunked' \
	--data-binary "{\"upserts\":[{\"name\":\"cluster/big\",\"body\":$(cat "$WORK/5k.json")}]}"
accepted "a chunked body under the limits is accepted" PUT /v1/resources/cluster/chunked \
	-H 'Transfer-Encoding: chunked' --data-binary "@$WORK/900.json"
check_eq "the chunked body was stored whole" 900 \
	"$(curl -sS "$PLANE_URL/v1/resources/cluster/chunked" | jq -r '.body.pad | length')"

# ---- nesting: --max-depth 8 ---------------------------------------------------------------

# {"endpoints":[],"x":[[...]]}: the object is one level, the array N more
accepted "a body nested exactly --max-depth deep is accepted" PUT /v1/resources/cluster/deep \
	--data-binary "{\"endpoints\":[],\"x\":$(nest 7)}"
refused "a body nested deeper than --max-depth is 400" 400 "nesting deeper than 8" \
	PUT /v1/resources/cluster/web --data-binary "{\"endpoints\":[],\"x\":$(nest 8)}"
refused "very deep nesting is 400 (and the plane survives it)" 400 "nesting deeper than 8" \
	PUT /v1/resources/cluster/web --data-binary "$(nest 500)"
refused "a batch body nested deeper than --max-depth is 400" 400 "nesting deeper than" POST /v1/batch \
	--data-binary "{\"upserts\":[{\"name\":\"cluster/deep2\",\"body\":{\"endpoints\":[],\"x\":$(nest 8)}}]}"
# the same body a PUT accepts must be accepted in a batch: the limit is on a
# body's nesting, not on the envelope around it
accepted "a batch carrying a body nested exactly --max-depth deep is accepted" POST /v1/batch \
	--data-binary "{\"upserts\":[{\"name\":\"cluster/deep2\",\"body\":{\"endpoints\":[],\"x\":$(nest 7)}}]}"

# ---- every field of every type ----------------------------------------------------------------

bad "cluster: missing endpoints" cluster/web "$CL" 'del(.endpoints)' "endpoints"
bad "cluster: endpoints not an array" cluster/web "$CL" '.endpoints={}' "endpoints must be an array"
bad "cluster: an endpoint not an object" cluster/web "$CL" '.endpoints=["127.0.0.1:9001"]' "endpoints[0] must be an object"
bad "cluster: endpoint address missing" cluster/web "$CL" '.endpoints[0]|=del(.address)' "endpoints[0].address"
bad "cluster: endpoint address a number" cluster/web "$CL" '.endpoints[0].address=127001' "endpoints[0].address"
bad "cluster: endpoint address with a space" cluster/web "$CL" '.endpoints[0].address="my host"' "endpoints[0].address"
bad "cluster: endpoint address with a leading dash" cluster/web "$CL" '.endpoints[0].address="-a.example"' "endpoints[0].address"
bad "cluster: endpoint address empty" cluster/web "$CL" '.endpoints[0].address=""' "endpoints[0].address"
bad "cluster: endpoint address with a 64-byte label" cluster/web "$CL" ".endpoints[0].address=\"$(head -c 64 /dev/zero | tr '\0' a).example\"" "endpoints[0].address"
bad "cluster: endpoint port missing" cluster/web "$CL" '.endpoints[0]|=del(.port)' "endpoints[0].port"
bad "cluster: endpoint port 0" cluster/web "$CL" '.endpoints[0].port=0' "endpoints[0].port"
bad "cluster: endpoint port 65536" cluster/web "$CL" '.endpoints[0].port=65536' "endpoints[0].port"
bad "cluster: endpoint port -1" cluster/web "$CL" '.endpoints[0].port=-1' "endpoints[0].port"
bad "cluster: endpoint port 80.5" cluster/web "$CL" '.endpoints[0].port=80.5' "endpoints[0].port"
bad "cluster: endpoint port a string" cluster/web "$CL" '.endpoints[0].port="9001"' "endpoints[0].port"
bad "cluster: endpoint port null" cluster/web "$CL" '.endpoints[0].port=null' "endpoints[0].port"
bad "cluster: endpoint port true" cluster/web "$CL" '.endpoints[0].port=true' "endpoints[0].port"
bad "cluster: the second endpoint's port is named" cluster/web "$CL" '.endpoints+=[{"address":"10.0.0.2","port":70000}]' "endpoints[1].port"
bad "cluster: endpoint weight 0" cluster/web "$CL" '.endpoints[0].weight=0' "endpoints[0].weight"
bad "cluster: endpoint weight 257" cluster/web "$CL" '.endpoints[0].weight=257' "endpoints[0].weight"
bad "cluster: endpoint weight 1.5" cluster/web "$CL" '.endpoints[0].weight=1.5' "endpoints[0].weight"
bad "cluster: endpoint weight a string" cluster/web "$CL" '.endpoints[0].weight="1"' "endpoints[0].weight"
bad "cluster: lb unknown" cluster/web "$CL" '.lb="fastest"' "lb must be one of"
bad "cluster: lb a number" cluster/web "$CL" '.lb=1' "lb must be a string"
bad "cluster: lb null" cluster/web "$CL" '.lb=null' "lb"

bad "listener: address a host name" listener/l1 "$LS" '.address="localhost"' "address must be"
bad "listener: address out of range" listener/l1 "$LS" '.address="256.1.1.1"' "address must be"
bad "listener: address a number" listener/l1 "$LS" '.address=127' "address must be a string"
bad "listener: port missing" listener/l1 "$LS" 'del(.port)' "port"
bad "listener: port 0" listener/l1 "$LS" '.port=0' "port must be an integer in 1..65535"
bad "listener: port 65536" listener/l1 "$LS" '.port=65536' "port must be an integer in 1..65535"
bad "listener: port a string" listener/l1 "$LS" '.port="8443"' "port must be an integer in 1..65535"
bad "listener: port 80.5" listener/l1 "$LS" '.port=80.5' "port must be an integer in 1..65535"
bad "listener: tls a string" listener/l1 "$LS" '.tls="s1"' "tls must be an object"
bad "listener: tls without secret" listener/l1 "$LS" '.tls={}' "tls.secret"
bad "listener: tls.secret a number" listener/l1 "$LS" '.tls.secret=1' "tls.secret must be a string"
bad "listener: tls.secret a traversal" listener/l1 "$LS" '.tls.secret="../x"' "tls.secret must be a resource name"
bad "listener: tls.secret dangling" listener/l1 "$LS" '.tls.secret="nope"' "unknown secret 'nope'"

bad "route: listener missing" route/r1 "$RT" 'del(.listener)' "listener"
bad "route: listener a number" route/r1 "$RT" '.listener=1' "listener must be a string"
bad "route: listener with a slash" route/r1 "$RT" '.listener="a/b"' "listener must be a resource name"
bad "route: listener dangling" route/r1 "$RT" '.listener="nope"' "unknown listener 'nope'"
bad "route: host with a space" route/r1 "$RT" '.host="bad host"' "host must be"
bad "route: host with a leading dash" route/r1 "$RT" '.host="-a.example"' "host must be"
bad "route: host with an empty label" route/r1 "$RT" '.host="a..example"' "host must be"
bad "route: host empty" route/r1 "$RT" '.host=""' "host must be"
bad "route: host a double wildcard" route/r1 "$RT" '.host="*.*.example"' "host must be"
bad "route: host a number" route/r1 "$RT" '.host=1' "host must be a string"
bad "route: path without a leading slash" route/r1 "$RT" '.path="api"' "path must start with '/'"
bad "route: path with a space" route/r1 "$RT" '.path="/a b"' "path must start with '/'"
bad "route: path with a semicolon" route/r1 "$RT" '.path="/a;b"' "path must start with '/'"
bad "route: path with braces" route/r1 "$RT" '.path="/a{b}"' "path must start with '/'"
bad "route: path empty" route/r1 "$RT" '.path=""' "path must start with '/'"
bad "route: path a list" route/r1 "$RT" '.path=["/"]' "path must be a string"
bad "route: cluster missing" route/r1 "$RT" 'del(.cluster)' "cluster"
bad "route: cluster an array" route/r1 "$RT" '.cluster=[]' "cluster must be a string"
bad "route: cluster dangling" route/r1 "$RT" '.cluster="nope"' "unknown cluster 'nope'"

bad "secret: cert missing" secret/s1 "$SC" 'del(.cert)' "cert"
bad "secret: cert a number" secret/s1 "$SC" '.cert=1' "cert must be a string"
bad "secret: cert not PEM" secret/s1 "$SC" '.cert="hello"' "cert must be a PEM"
bad "secret: key missing" secret/s1 "$SC" 'del(.key)' "key"
bad "secret: key a boolean" secret/s1 "$SC" '.key=true' "key must be a string"
bad "secret: a PEM header and garbage is no certificate" secret/s1 "$SC" \
	'.cert="-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU@@@garbage!!!***\n-----END CERTIFICATE-----\n"' \
	"secret/s1: cert: not a PEM certificate"
bad "secret: a PEM header and garbage is no key" secret/s1 "$SC" \
	'.key="-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"' "secret/s1: key: not a PEM private key"
pem_pair other
bad "secret: another certificate's key is refused" secret/s1 "$SC" ".key=\"$PAIR_KEY\"" \
	"secret/s1: key: does not match cert ("
bad "secret: key not PEM" secret/s1 "$SC" '.key="x"' "key must be a PEM"

bad "file: path a traversal ../x" file/f1 "$FL" '.path="../x"' "path must be relative"
bad "file: path absolute /abs" file/f1 "$FL" '.path="/abs"' "path must be relative"
bad "file: path with .. inside" file/f1 "$FL" '.path="a/../../b"' "path must be relative"
bad "file: path with a . component" file/f1 "$FL" '.path="a/./b"' "path must be relative"
bad "file: path with an empty component" file/f1 "$FL" '.path="a//b"' "path must be relative"
bad "file: path with a trailing slash" file/f1 "$FL" '.path="a/"' "path must be relative"
bad "file: path ." file/f1 "$FL" '.path="."' "path must be relative"
bad "file: path empty" file/f1 "$FL" '.path=""' "path must be relative"
bad "file: path with a backslash" file/f1 "$FL" '.path="a\\..\\b"' "path must be relative"
bad "file: path with a control character" file/f1 "$FL" '.path="a\nb"' "path must be relative"
bad "file: path a number" file/f1 "$FL" '.path=1' "path must be a string"
bad "file: path missing" file/f1 "$FL" 'del(.path)' "path"
bad "file: content missing" file/f1 "$FL" 'del(.content)' "content"
bad "file: content an object" file/f1 "$FL" '.content={}' "content must be a string"
bad "file: mode 0888" file/f1 "$FL" '.mode="0888"' "mode must be"
bad "file: mode 1777 (beyond 0777)" file/f1 "$FL" '.mode="1777"' "mode must be"
bad "file: mode 644x" file/f1 "$FL" '.mode="644x"' "mode must be"
bad "file: mode 7" file/f1 "$FL" '.mode="7"' "mode must be"
bad "file: mode a number" file/f1 "$FL" '.mode=644' "mode must be a string"

# ---- names --------------------------------------------------------------------------------------

long200=$(head -c 200 /dev/zero | tr '\0' n)
refused "PUT cluster/.. is 400" 400 "name '..'" PUT /v1/resources/cluster/.. --data-binary "$CL"
refused "GET cluster/.. is 400" 400 "name '..'" GET /v1/resources/cluster/..
refused "DELETE cluster/.. is 400" 400 "name '..'" DELETE /v1/resources/cluster/..
refused "PUT cluster/. is 400" 400 "name '.'" PUT /v1/resources/cluster/. --data-binary "$CL"
refused "PUT cluster/a%2Fb is 400" 400 "name 'a/b'" PUT /v1/resources/cluster/a%2Fb --data-binary "$CL"
refused "PUT cluster/a/b is 400" 400 "name 'a/b'" PUT /v1/resources/cluster/a/b --data-binary "$CL"
refused "PUT cluster/a%20b is 400" 400 "must match" PUT /v1/resources/cluster/a%20b --data-binary "$CL"
refused "PUT an unknown type is 400" 400 "unknown resource type 'widget'" PUT /v1/resources/widget/x --data-binary "$CL"
refused "PUT a type in another case is 400" 400 "unknown resource type 'Cluster'" PUT /v1/resources/Cluster/x --data-binary "$CL"
refused "PUT a name without a type is 400" 400 "must be 'type/name'" PUT /v1/resources/web --data-binary "$CL"
refused "PUT an empty name is 400" 400 "name ''" PUT /v1/resources/cluster/ --data-binary "$CL"
refused "PUT a 201-byte name is 400" 400 "must match" PUT "/v1/resources/cluster/${long200}n" --data-binary "$CL"
accepted "PUT a 200-byte name is accepted" PUT "/v1/resources/cluster/$long200" --data-binary "$CL"
refused "a NUL in the URL is not cut off: PUT cluster/a%00b is 400" 400 "must match" \
	PUT /v1/resources/cluster/a%00b --data-binary "$CL"
refused "a batch upsert named cluster/.. is 422" 422 "name '..'" \
	POST /v1/batch --data-binary "{\"upserts\":[{\"name\":\"cluster/..\",\"body\":$CL}]}"
refused "a batch remove of an unknown type is 422" 422 "unknown resource type" \
	POST /v1/batch --data-binary '{"removes":["widget/x"]}'
refused "a batch remove of a 201-byte name is 422" 422 "must match" \
	POST /v1/batch --data-binary "{\"removes\":[\"cluster/${long200}n\"]}"

code=$(curl -sS -o /dev/null -w '%{http_code}' "$PLANE_URL/v1/resources/cluster/$(head -c 20000 /dev/zero | tr '\0' a)")
case $code in 4??) ok "a 20 kB URL is refused with 4xx ($code)" ;; *) not_ok "a 20 kB URL is refused with 4xx"; diag "status $code" ;; esac
check "the plane is healthy after the long URL" curl -fsS "$PLANE_URL/healthz"

# ---- batches -----------------------------------------------------------------------------------

refused "a batch with an unknown field is 422 naming it" 422 "unknown field 'extra'" \
	POST /v1/batch --data-binary '{"upserts":[],"extra":1}'
refused "a batch with upserts not an array is 422" 422 "upserts must be an array" \
	POST /v1/batch --data-binary '{"upserts":{}}'
refused "a batch with removes not an array is 422" 422 "removes must be an array" \
	POST /v1/batch --data-binary '{"removes":"cluster/web"}'
refused "a batch upsert that is a string is 422" 422 "upserts[0] must be an object" \
	POST /v1/batch --data-binary '{"upserts":["cluster/web"]}'
refused "a batch upsert with an unknown field is 422" 422 "upserts[0]: unknown field 'version'" \
	POST /v1/batch --data-binary "{\"upserts\":[{\"name\":\"cluster/x\",\"body\":$CL,\"version\":3}]}"
refused "a batch upsert without a name is 422" 422 "upserts[0].name" \
	POST /v1/batch --data-binary "{\"upserts\":[{\"body\":$CL}]}"
refused "a batch upsert whose name is a number is 422" 422 "upserts[1].name must be a string" \
	POST /v1/batch --data-binary "{\"upserts\":[{\"name\":\"cluster/x\",\"body\":$CL},{\"name\":7,\"body\":$CL}]}"
refused "a batch upsert without a body is 422" 422 "upserts[0].body is missing" \
	POST /v1/batch --data-binary '{"upserts":[{"name":"cluster/x"}]}'
refused "a batch remove that is a number is 422" 422 "removes[0] must be a string" \
	POST /v1/batch --data-binary '{"removes":[1]}'
refused "a batch remove that is null is 422" 422 "removes[1] must be a string" \
	POST /v1/batch --data-binary '{"removes":["cluster/x",null]}'
refused "a batch whose second upsert is invalid stores neither" 422 "endpoints[0].port" \
	POST /v1/batch --data-binary "{\"upserts\":[{\"name\":\"cluster/ok\",\"body\":$CL},{\"name\":\"cluster/bad\",\"body\":{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":0}]}}]}"
refused "a batch upserting one name twice is 422" 422 "cluster/x: named twice" \
	POST /v1/batch --data-binary "{\"upserts\":[{\"name\":\"cluster/x\",\"body\":$CL},{\"name\":\"cluster/x\",\"body\":$CL}]}"
refused "a batch upserting and removing one name is 422" 422 "cluster/web: named twice" \
	POST /v1/batch --data-binary "{\"upserts\":[{\"name\":\"cluster/web\",\"body\":$CL}],\"removes\":[\"cluster/web\"]}"
refused "a batch removing one name twice is 422" 422 "file/f1: named twice" \
	POST /v1/batch --data-binary '{"removes":["file/f1","file/f1"]}'
refused "a batch leaving a dangling reference is 422" 422 "cannot remove cluster/web: route/r1 refers to it" \
	POST /v1/batch --data-binary '{"removes":["cluster/web"]}'
refused "a DELETE leaving a dangling reference is 422" 422 "cannot remove listener/l1: route/r1 refers to it" \
	DELETE /v1/resources/listener/l1
refused "a DELETE of an absent resource is 404" 404 "no resource 'cluster/absent'" DELETE /v1/resources/cluster/absent

# ---- sync queries ------------------------------------------------------------------------------

for ep in stream config; do
	refused "/v1/$ep without node is 400" 400 "node: required" GET "/v1/$ep?version=0"
	refused "/v1/$ep with an empty node is 400" 400 "node: required" GET "/v1/$ep?node=&version=0"
	refused "/v1/$ep with node a/b is 400" 400 "node: required" GET "/v1/$ep?node=a/b&version=0"
	refused "/v1/$ep with a 201-byte node is 400" 400 "node: required" GET "/v1/$ep?node=${long200}n"
	refused "/v1/$ep with version=-1 is 400" 400 "version: '-1'" GET "/v1/$ep?node=n1&version=-1"
	refused "/v1/$ep with version=abc is 400" 400 "version: 'abc'" GET "/v1/$ep?node=n1&version=abc"
	refused "/v1/$ep with version=1.5 is 400" 400 "version: '1.5'" GET "/v1/$ep?node=n1&version=1.5"
	refused "/v1/$ep with a 20-digit version is 400" 400 "is not a non-negative integer" \
		GET "/v1/$ep?node=n1&version=99999999999999999999"
	refused "/v1/$ep with an empty version is 400" 400 "version: ''" GET "/v1/$ep?node=n1&version="
	refused "/v1/$ep with a space in sub is 400" 400 "sub: prefix" GET "/v1/$ep?node=n1&sub=cluster/%20x"
	refused "/v1/$ep with a * in sub is 400" 400 "sub: prefix 'clu*'" GET "/v1/$ep?node=n1&sub=route/,clu*"
	refused "/v1/$ep with a label without = is 400" 400 "labels: label 'foo' must be key=value" \
		GET "/v1/$ep?node=n1&labels=foo"
	refused "/v1/$ep with a label given twice is 400" 400 "label 'a' given twice" \
		GET "/v1/$ep?node=n1&labels=a%3Db%2Ca%3Dc"
	refused "/v1/$ep with an empty label key is 400" 400 "keys are 1..63 bytes" GET "/v1/$ep?node=n1&labels=%3Db"
	refused "/v1/$ep with a space in a label value is 400" 400 "label value 'b c'" \
		GET "/v1/$ep?node=n1&labels=a%3Db%20c"
done
refused "/v1/config with wait=abc is 400" 400 "wait: 'abc'" GET "/v1/config?node=n1&wait=abc"
refused "/v1/config with wait=301 is 400" 400 "wait: '301'" GET "/v1/config?node=n1&wait=301"
check_eq "no bad sync query created a node" "[]" "$(curl -sS "$PLANE_URL/v1/nodes" | jq -c .)"
refused "/v1/config?node=a%00b is 400, not node 'a'" 400 "node" GET "/v1/config?node=a%00b&version=0"
refused "/v1/stream?node=a%00b is 400, not node 'a'" 400 "node" GET "/v1/stream?node=a%00b&version=0" -m 3
refused "/v1/resources with a prefix over 220 bytes is 400" 400 "prefix" GET "/v1/resources?prefix=cluster/${long200}${long200}"
refused "/v1/nodes/ID with a bad id is 400" 400 "node id" GET "/v1/nodes/a%20b"
refused "/v1/nodes/ID of an unknown node is 404" 404 "no node 'ghost'" GET /v1/nodes/ghost

# ---- ack bodies ---------------------------------------------------------------------------------

refused "an ack that is not an object is 422" 422 "ack: body must be a JSON object" POST /v1/ack --data-binary '[1]'
refused "an ack without node is 422" 422 "ack: node" POST /v1/ack --data-binary '{"version":1,"nonce":"x","status":"ack"}'
refused "an ack with node a/b is 422" 422 "ack: node" POST /v1/ack --data-binary '{"node":"a/b","version":1,"nonce":"x","status":"ack"}'
refused "an ack with version -1 is 422" 422 "ack: version" POST /v1/ack --data-binary '{"node":"n1","version":-1,"nonce":"x","status":"ack"}'
refused "an ack with version a string is 422" 422 "ack: version" POST /v1/ack --data-binary '{"node":"n1","version":"1","nonce":"x","status":"ack"}'
refused "an ack with version 1.5 is 422" 422 "ack: version" POST /v1/ack --data-binary '{"node":"n1","version":1.5,"nonce":"x","status":"ack"}'
refused "an ack with an empty nonce is 422" 422 "ack: nonce" POST /v1/ack --data-binary '{"node":"n1","version":1,"nonce":"","status":"ack"}'
refused "an ack with a 100-byte nonce is 422" 422 "ack: nonce" POST /v1/ack \
	--data-binary "{\"node\":\"n1\",\"version\":1,\"nonce\":\"$(head -c 100 /dev/zero | tr '\0' x)\",\"status\":\"ack\"}"
refused "an ack with status maybe is 422" 422 "ack: status" POST /v1/ack --data-binary '{"node":"n1","version":1,"nonce":"x","status":"maybe"}'
refused "an ack with error a number is 422" 422 "ack: error must be a string" POST /v1/ack --data-binary '{"node":"n1","version":1,"nonce":"x","status":"nack","error":5}'
refused "an ack with healthy a string is 422" 422 "ack: healthy" POST /v1/ack --data-binary '{"node":"n1","version":1,"nonce":"x","status":"ack","healthy":"yes"}'
refused "an ack from an unknown node is 404" 404 "no node 'n1'" POST /v1/ack --data-binary '{"node":"n1","version":1,"nonce":"x","status":"ack"}'

# ---- methods and endpoints ----------------------------------------------------------------------

not_allowed POST /v1/resources/cluster/web "GET, PUT, DELETE"
not_allowed PATCH /v1/resources/cluster/web "GET, PUT, DELETE"
not_allowed DELETE /v1/resources "GET"
not_allowed POST /v1/resources "GET"
not_allowed GET /v1/batch "POST"
not_allowed PUT /v1/batch "POST"
not_allowed GET /v1/ack "POST"
not_allowed POST /v1/stream "GET"
not_allowed PUT /v1/config "GET"
not_allowed DELETE /v1/nodes "GET"
not_allowed POST /v1/nodes/n1 "GET"
not_allowed DELETE /healthz "GET"
not_allowed POST /metrics "GET"
not_allowed GET /v1/rollouts/current/abort "POST"
not_allowed POST /v1/rollouts/current "GET"
out=$(curl -sS -X 'X"Y' "$PLANE_URL/healthz")
check "an odd method name still gets a JSON error" jq -e '.error | strings' <<<"$out"

refused "GET /v1/nothing is 404" 404 "no such endpoint: /v1/nothing" GET /v1/nothing
refused "GET / is 404" 404 "no such endpoint" GET /
refused "GET /v2/resources is 404" 404 "no such endpoint" GET /v2/resources
refused "PUT /v1/resourcesx/cluster/web is 404" 404 "no such endpoint" PUT /v1/resourcesx/cluster/web --data-binary "$CL"

refused_metric() {
	curl -sS "$PLANE_URL/metrics" | awk '$1 == "tether_writes_refused_total" {print $2}'
}
r0=$(refused_metric)
refused "(metrics) a dangling reference" 422 "unknown cluster" PUT /v1/resources/route/r2 \
	--data-binary '{"listener":"l1","cluster":"nope"}'
check_eq "a write refused for a reference is counted in tether_writes_refused_total" $((r0 + 1)) "$(refused_metric)"
refused "(metrics) a field out of range" 422 "endpoints[0].port" PUT /v1/resources/cluster/web \
	--data-binary '{"endpoints":[{"address":"10.0.0.1","port":0}]}'
check_eq "a write refused for a field is counted in tether_writes_refused_total" $((r0 + 2)) "$(refused_metric)"
stop_pid "$PLANE_PID"

# ---- admin token, --max-resources ----------------------------------------------------------------

TOKEN=tether-test-token-0123456789
printf '%s\n' "$TOKEN" >"$WORK/token"
printf 'short\n' >"$WORK/short-token"
"$PLANE_BIN" --listen 127.0.0.1:0 --data "$WORK/short.data" --admin-token-file "$WORK/short-token" >"$WORK/short.log" 2>&1
rc=$?
check "a token shorter than 16 characters stops the plane (exit $rc)" test "$rc" -ne 0
check "the refusal says why" grep -q 'shorter than 16' "$WORK/short.log"

start_plane t --admin-token-file "$WORK/token" --max-resources 3
AUTH="Authorization: Bearer $TOKEN"
rebase
refused "PUT without a token is 401" 401 "Authorization: Bearer" PUT /v1/resources/cluster/a --data-binary "$CL"
refused "PUT with a wrong token is 401" 401 "admin token" PUT /v1/resources/cluster/a -H "Authorization: Bearer ${TOKEN}x" --data-binary "$CL"
refused "PUT with a token prefix is 401" 401 "admin token" PUT /v1/resources/cluster/a -H "Authorization: Bearer ${TOKEN%?}" --data-binary "$CL"
refused "PUT with the token in Basic is 401" 401 "admin token" PUT /v1/resources/cluster/a -H "Authorization: Basic $TOKEN" --data-binary "$CL"
refused "PUT with an empty bearer is 401" 401 "admin token" PUT /v1/resources/cluster/a -H "Authorization: Bearer " --data-binary "$CL"
refused "a batch without a token is 401" 401 "admin token" POST /v1/batch --data-binary "{\"upserts\":[{\"name\":\"cluster/a\",\"body\":$CL}]}"
refused "a batch with a wrong token is 401" 401 "admin token" POST /v1/batch -H "Authorization: Bearer nope-nope-nope-nope" --data-binary "{\"upserts\":[{\"name\":\"cluster/a\",\"body\":$CL}]}"
refused "rollout abort without a token is 401" 401 "admin token" POST /v1/rollouts/current/abort
hdr=$(curl -sS -o /dev/null -D - -X PUT --data-binary "$CL" "$PLANE_URL/v1/resources/cluster/a" | tr -d '\r')
check "a 401 carries WWW-Authenticate: Bearer" grep -q '^WWW-Authenticate: Bearer' <<<"$hdr"

accepted "PUT with the token is accepted" PUT /v1/resources/cluster/a -H "$AUTH" --data-binary "$CL"
accepted "a batch with the token is accepted" POST /v1/batch -H "$AUTH" \
	--data-binary "{\"upserts\":[{\"name\":\"cluster/b\",\"body\":$CL},{\"name\":\"cluster/c\",\"body\":$CL}]}"
refused "DELETE without a token is 401" 401 "admin token" DELETE /v1/resources/cluster/a
refused "DELETE with a wrong token is 401" 401 "admin token" DELETE /v1/resources/cluster/a -H "Authorization: Bearer ${TOKEN}x"
check_eq "reads need no token: GET" 200 "$(api_status GET /v1/resources/cluster/a)"
check_eq "reads need no token: list" 200 "$(api_status GET /v1/resources)"
check_eq "reads need no token: nodes" 200 "$(api_status GET /v1/nodes)"
check_eq "reads need no token: metrics" 200 "$(api_status GET /metrics)"
check_eq "reads need no token: poll" 200 "$(api_status GET '/v1/config?node=n1&version=0')"
rebase

refused "a fourth resource over --max-resources 3 is 422" 422 "the limit is 3" \
	PUT /v1/resources/cluster/d -H "$AUTH" --data-binary "$CL"
refused "a batch adding two over --max-resources is 422" 422 "limit is 3" POST /v1/batch -H "$AUTH" \
	--data-binary "{\"upserts\":[{\"name\":\"cluster/d\",\"body\":$CL},{\"name\":\"cluster/e\",\"body\":$CL}],\"removes\":[\"cluster/a\"]}"
accepted "replacing a resource at the limit is accepted" PUT /v1/resources/cluster/a -H "$AUTH" \
	--data-binary '{"endpoints":[{"address":"10.0.0.9","port":80}]}'
accepted "a batch swapping one resource at the limit is accepted" POST /v1/batch -H "$AUTH" \
	--data-binary "{\"upserts\":[{\"name\":\"cluster/d\",\"body\":$CL}],\"removes\":[\"cluster/a\"]}"
accepted "DELETE with the token is accepted" DELETE /v1/resources/cluster/b -H "$AUTH"
accepted "after a delete there is room again" PUT /v1/resources/cluster/e -H "$AUTH" --data-binary "$CL"
check_eq "the store holds what the accepted writes made" "cluster/c cluster/d cluster/e" \
	"$(curl -sS "$PLANE_URL/v1/resources" | jq -r '[.resources[].name] | join(" ")')"
check_eq "six accepted writes made six versions" 6 "$(curl -sS "$PLANE_URL/healthz" | json .version)"

done_testing
