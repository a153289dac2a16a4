# lib-opts.sh: the route and cluster options' scenario (t0990 with nginx,
# t0991 with haproxy), sourced after lib.sh and lib-proxy.sh: one backend
# (tests/tools/opts-backend.mjs, which answers with what it saw), a port
# where nothing listens (a dead endpoint), and every option on a route or
# cluster of its own, each observed in behaviour through the real proxy.
# The test sets LP (the listener's port) and a function live_version V
# (the proxy serves the generation of version V).

opts_backends() {
	start_tool ob opts-backend.mjs 0 ob
	OB=$TOOL_PORT
	free_port DEAD
	# a port whose connections never complete (its accept queue held full)
	python3 "$TOOLS/deaf-listener.py" >"$WORK/deaf.port" 2>>"$WORK/deaf.log" &
	track_pid $!
	wait_until 10 grep -q '^listening ' "$WORK/deaf.port" || bail "deaf-listener.py did not start"
	DEAF=$(awk '/^listening /{print $2; exit}' "$WORK/deaf.port")
}

# the longest header name a route may set (128 bytes): longer than nginx's
# default proxy_headers_hash bucket (64) holds
LONG_HEADER=X-Long-$(printf 'n%.0s' $(seq 1 121))

# opts_state: every resource of the scenario, as a batch
opts_state() {
	local ob="{\"address\":\"127.0.0.1\",\"port\":$OB}" dead="{\"address\":\"127.0.0.1\",\"port\":$DEAD}"
	cat <<EOF
{"upserts":[
 {"name":"cluster/app","body":{"endpoints":[$ob]}},
 {"name":"cluster/flaky0","body":{"endpoints":[$dead,$ob]}},
 {"name":"cluster/flaky1","body":{"endpoints":[$dead,$ob]}},
 {"name":"cluster/sick","body":{"endpoints":[$dead,$ob],"health":{"max_fails":3,"fail_timeout":60}}},
 {"name":"cluster/pool","body":{"endpoints":[$ob],"keepalive":4}},
 {"name":"cluster/nopool","body":{"endpoints":[$ob],"keepalive":0}},
 {"name":"cluster/deaf","body":{"endpoints":[{"address":"127.0.0.1","port":$DEAF}]}},
 {"name":"listener/web","body":{"address":"127.0.0.1","port":$LP}},
 {"name":"route/root","body":{"listener":"web","path":"/","cluster":"app"}},
 {"name":"route/slow","body":{"listener":"web","path":"/slow","cluster":"app","timeout":{"read":0.5},
   "headers":{"response":{"set":{"X-Route":"slow"}}}}},
 {"name":"route/conn","body":{"listener":"web","path":"/conn","cluster":"app","timeout":{"connect":0.2,"send":2}}},
 {"name":"route/deaf","body":{"listener":"web","path":"/deaf","cluster":"deaf","timeout":{"connect":0.2}}},
 {"name":"route/patient","body":{"listener":"web","path":"/patient","cluster":"deaf"}},
 {"name":"route/strip","body":{"listener":"web","path":"/strip","cluster":"app","strip_prefix":true}},
 {"name":"route/old","body":{"listener":"web","path":"/old","cluster":"app","rewrite":"/new"}},
 {"name":"route/hdr","body":{"listener":"web","host":"hdr.test","path":"/hdr","cluster":"app","headers":{
   "request":{"set":{"X-Req":"a%20b c","Host":"backend.test","$LONG_HEADER":"long"},"remove":["X-Drop"]},
   "response":{"set":{"X-Resp":"yes"},"remove":["X-Backend-Secret"]}}}},
 {"name":"route/ws","body":{"listener":"web","path":"/ws","cluster":"app","websocket":true}},
 {"name":"route/try0","body":{"listener":"web","path":"/try0","cluster":"flaky0","retries":0}},
 {"name":"route/try1","body":{"listener":"web","path":"/try1","cluster":"flaky1","retries":1}},
 {"name":"route/sick","body":{"listener":"web","path":"/sick","cluster":"sick","retries":0}},
 {"name":"route/body","body":{"listener":"web","path":"/body","cluster":"app","max_body":1000}},
 {"name":"route/gap","body":{"listener":"web","path":"/gap","cluster":"app","max_body":20000}},
 {"name":"route/huge","body":{"listener":"web","path":"/huge","cluster":"app","max_body":1099511627776}},
 {"name":"route/pool","body":{"listener":"web","path":"/pool","cluster":"pool"}},
 {"name":"route/nopool","body":{"listener":"web","path":"/nopool","cluster":"nopool"}}
]}
EOF
}

# req PATH [CURL ARGS]: the answer's body
req() {
	local path=$1
	shift
	curl -s --max-time 5 "$@" "http://127.0.0.1:$LP$path"
}
# code PATH [CURL ARGS]: the answer's status
code() {
	local path=$1
	shift
	curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" "http://127.0.0.1:$LP$path"
}
# seen PATH JQ [CURL ARGS]: what the backend saw (a jq expression of its answer)
seen() {
	local path=$1 q=$2
	shift 2
	req "$path" "$@" | jq -r "$q" 2>/dev/null
}
# fails N PATH: how many of N requests in a row were not answered 200; the
# codes in order go to $WORK/codes
fails() {
	local n=$1 path=$2 i c bad=0
	: >"$WORK/codes"
	for i in $(seq 1 "$n"); do
		c=$(code "$path")
		echo "$c" >>"$WORK/codes"
		[ "$c" = 200 ] || bad=$((bad + 1))
	done
	echo "$bad"
}
# ports N PATH: how many distinct upstream connections N requests in a row came over
ports() {
	local n=$1 path=$2 i
	for i in $(seq 1 "$n"); do seen "$path" .port; done | sort -u | wc -l
}

# opts_scenario: the checks of every option, through the live proxy
opts_scenario() {
	local out
	ctl apply - >/dev/null <<<"$(opts_state)" || bail "the options' state is refused"
	V=$(plane_version)
	check "every option's route is live (version $V)" wait_until 20 live_version "$V"

	# timeout.read
	check_eq "timeout.read 0.5: a backend answering after 2 s is a 504" 504 "$(code '/slow/x?sleep=2000')"
	check_eq "timeout.read 0.5: one answering at once is a 200" 200 "$(code '/slow/x?sleep=1')"
	check_eq "headers.response.set on the proxy's own 504 too (nginx: always; haproxy: http-after-response)" "slow" \
		"$(curl -s -D - -o /dev/null --max-time 5 "http://127.0.0.1:$LP/slow/x?sleep=2000" | tr -d '\r' |
			awk -F': ' 'tolower($1) == "x-route" {print $2}')"
	check_eq "a route without timeouts waits 2 s for its backend" 200 "$(code '/x?sleep=2000')"
	check_eq "timeout.connect 0.2 with send 2: the route serves" "/conn/x" "$(seen /conn/x .url)"
	local c
	c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$LP/deaf/x")
	check "timeout.connect 0.2: an endpoint that never accepts is given up on within 3 s ($c)" \
		sh -c "[ '$c' = 502 ] || [ '$c' = 503 ] || [ '$c' = 504 ]"
	check_eq "without it, the proxy still waits for that endpoint after 3 s (curl gave up: 000)" 000 \
		"$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$LP/patient/x")"

	# strip_prefix and rewrite
	check_eq "strip_prefix: /strip/x?q=1 reaches the backend as /x?q=1" "/x?q=1" "$(seen '/strip/x?q=1' .url)"
	check_eq "strip_prefix: /strip reaches it as /" "/" "$(seen /strip .url)"
	check_eq "strip_prefix: /strip/ reaches it as /" "/" "$(seen /strip/ .url)"
	check_eq "strip_prefix: an encoded newline in the rest (/strip/a%0Ab) is stripped too" "/a%0Ab" \
		"$(seen '/strip/a%0Ab' .url)"
	check_eq "strip_prefix: an encoded space stays encoded" "/a%20b?q=%20" "$(seen '/strip/a%20b?q=%20' .url)"
	check_eq "rewrite /new: /old/x?q=1 reaches the backend as /new/x?q=1" "/new/x?q=1" "$(seen '/old/x?q=1' .url)"
	check_eq "rewrite /new: /old reaches it as /new" "/new" "$(seen /old .url)"
	# /strip-not/x is route/strip's (a path prefix is a string prefix, in
	# nginx's location and haproxy's path_beg alike), but not /strip nor
	# under /strip/: nothing is stripped
	check_eq "strip_prefix /strip: /strip-not/x (its prefix, not its path) passes as it came" "/strip-not/x" \
		"$(seen /strip-not/x .url)"
	check_eq "a route without them passes the path as it came" "/slow/x?sleep=1" "$(seen '/slow/x?sleep=1' .url)"

	# headers
	out=$(req /hdr/x -H 'Host: hdr.test' -H 'X-Drop: 1' -H 'X-Keep: 2')
	check_eq "headers.request.set: the backend sees X-Req (its '%' as written)" "a%20b c" \
		"$(echo "$out" | jq -r '.headers["x-req"]')"
	check_eq "headers.request.set Host: the backend sees the route's Host" "backend.test" \
		"$(echo "$out" | jq -r '.headers.host')"
	check_eq "headers.request.remove: the backend does not see X-Drop (X-Keep passes)" "null 2" \
		"$(echo "$out" | jq -r '"\(.headers["x-drop"]) \(.headers["x-keep"])"')"
	check_eq "headers.request.set: a 128-byte header name reaches the backend" "long" \
		"$(echo "$out" | jq -r --arg h "${LONG_HEADER,,}" '.headers[$h]')"
	out=$(curl -s -D - -o /dev/null --max-time 5 -H 'Host: hdr.test' "http://127.0.0.1:$LP/hdr/x" | tr -d '\r')
	check_eq "headers.response.set: the client sees X-Resp: yes" "yes" \
		"$(echo "$out" | awk -F': ' 'tolower($1) == "x-resp" {print $2}')"
	check_eq "headers.response.remove: the client does not see X-Backend-Secret" "" \
		"$(echo "$out" | awk -F': ' 'tolower($1) == "x-backend-secret" {print $2}')"
	check_eq "a route without headers passes X-Backend-Secret" "hidden" \
		"$(curl -s -D - -o /dev/null --max-time 5 "http://127.0.0.1:$LP/x" | tr -d '\r' |
			awk -F': ' 'tolower($1) == "x-backend-secret" {print $2}')"

	# websocket
	out=$(node "$TOOLS/ws-roundtrip.mjs" "http://127.0.0.1:$LP/ws/chat" 1500 2>&1)
	check "websocket: an upgrade through the proxy, and a line echoed over the tunnel 1.5 s later ($out)" \
		test "${out#upgraded /ws/chat echoed }" != "$out"

	# retries
	local f0 f1
	f0=$(fails 10 /try0/x)
	check "retries 0, one endpoint dead: some requests fail ($f0 of 10: $(xargs <"$WORK/codes"))" test "$f0" -ge 1
	f1=$(fails 10 /try1/x)
	check_eq "retries 1, one endpoint dead: every request is answered ($(xargs <"$WORK/codes"))" 0 "$f1"

	# max_body
	head -c 2000 /dev/zero | tr '\0' a >"$WORK/big"
	head -c 500 /dev/zero | tr '\0' a >"$WORK/small"
	check_eq "max_body 1000: a 2000-byte body is a 413" 413 \
		"$(code /body/x -X POST -H 'Content-Type: text/plain' --data-binary @"$WORK/big")"
	check_eq "max_body 1000: a 500-byte body reaches the backend whole" 500 \
		"$(seen /body/x .body -X POST -H 'Content-Type: text/plain' --data-binary @"$WORK/small")"
	check_eq "max_body 1000: a chunked 2000-byte body (no Content-Length) is a 413 too" 413 \
		"$(code /body/x -X POST -H 'Transfer-Encoding: chunked' --data-binary @"$WORK/big")"
	check_eq "max_body 1000: a chunked 500-byte body reaches the backend whole" 500 \
		"$(seen /body/x .body -X POST -H 'Transfer-Encoding: chunked' --data-binary @"$WORK/small")"
	check_eq "max_body 1099511627776 (the largest; haproxy's wait-for-body takes 32 bits): the body passes" 2000 \
		"$(seen /huge/x .body -X POST -H 'Transfer-Encoding: chunked' --data-binary @"$WORK/big")"
	check_eq "a route without max_body takes the 2000-byte body" 2000 \
		"$(seen /x .body -X POST -H 'Content-Type: text/plain' --data-binary @"$WORK/big")"

	# keepalive
	local kp kn
	kp=$(ports 6 /pool/x)
	kn=$(ports 6 /nopool/x)
	check "keepalive 4: 6 requests in a row reuse upstream connections ($kp distinct)" test "$kp" -lt 6
	check_eq "keepalive 0: 6 requests in a row take 6 upstream connections" 6 "$kn"
}

# opts_health: health.max_fails 3 with one endpoint dead: 3 failures (or
# fewer, where a check found it first), then the endpoint is out: every
# request is answered
opts_health() {
	local f
	f=$(fails 20 /sick/x)
	check "health max_fails 3: 1 to 3 of 20 requests fail ($(xargs <"$WORK/codes"))" test "$f" -ge 1 -a "$f" -le 3
	check_eq "health: then the dead endpoint is out (the last 10 answered)" "200 200 200 200 200 200 200 200 200 200" \
		"$(tail -n 10 "$WORK/codes" | xargs)"
}
