#!/usr/bin/env bash
# t0994-snippet-plane.sh: what the plane refuses of a snippet (issue 28, 3),
# before anything is stored: each forbidden directive family of nginx
# (files, code, the process, logs, new scopes, proxy_pass, mirror) and of
# haproxy (sections, Lua, files, the environment, servers and routing,
# logs, sockets), a '}' that would close tether's own block, an
# unterminated quote, a missing ';', a route's haproxy rule with its own
# condition, a size over 16384 bytes, a mistyped consumer; each a 422
# naming the resource, "snippet.CONSUMER", the line and what to do, and
# nothing stored; a dry run (the API's and tetherctl put --dry-run, exit
# 4) reports the same. What passes is stored as written. Then the roles,
# on a plane with credentials: an admin writes a snippet; an operator
# (writes need admin), a reader, a relay and a node are refused 403
# (batch and PUT), anonymous 401, nothing stored. An anonymous write of an
# --insecure plane without an admin token is taken, as any write of such a
# lab is (docs/security.md).
. "$(dirname "$0")/lib.sh"

need_cmd jq curl

# try NAME BODY: PUT it; the status, the answer in $WORK/answer
try() {
	curl -sS -o "$WORK/answer" -w '%{http_code}' -X PUT "${CURL_OPTS[@]}" --data-binary "$2" \
		"$PLANE_URL/v1/resources/$1"
}
answer_error() {
	jq -r .error "$WORK/answer"
}
# refused DESCRIPTION NAME BODY WANT: a 422 whose error holds WANT, nothing stored
refused() {
	local v0 code err
	v0=$(plane_version)
	code=$(try "$2" "$3")
	err=$(answer_error)
	if [ "$code" = 422 ] && [[ $err == *"$4"* ]] && [ "$(plane_version)" = "$v0" ]; then
		ok "$1"
	else
		not_ok "$1"
		diag "status $code, version $v0 -> $(plane_version)"
		diag "error: $err"
		diag "want:  $4"
	fi
}
# route_with CONSUMER TEXT: a route body with that snippet
route_with() {
	jq -nc --arg c "$1" --arg t "$2" '{listener:"main", path:"/api", cluster:"web", snippet:{($c): $t}}'
}
listener_with() {
	jq -nc --arg c "$1" --arg t "$2" '{address:"127.0.0.1", port:8080, snippet:{($c): $t}}'
}
cluster_with() {
	jq -nc --arg c "$1" --arg t "$2" '{endpoints:[{address:"127.0.0.1", port:9001}], snippet:{($c): $t}}'
}

start_plane p
put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9001}]}' >/dev/null
put listener/main '{"address":"127.0.0.1","port":8080}' >/dev/null

# ---- nginx: each family -----------------------------------------------------------------------
while IFS='|' read -r text why; do
	[ -n "$text" ] || continue
	refused "nginx '$text': refused ($why)" route/api "$(route_with nginx "$text")" \
		"route/api: snippet.nginx: line 1: "
	check "... the message says why ($why)" grep -qF "$why" <<<"$(answer_error)"
done <<'EOF'
include /etc/nginx/secrets.conf;|'include' is refused in a snippet: it reads or writes files on the node
load_module /tmp/evil.so;|'load_module' is refused in a snippet: it changes the consumer's process
content_by_lua_block { os.execute("id") }|'content_by_lua_block' is refused in a snippet: it runs code
access_by_lua_file /tmp/x.lua;|'access_by_lua_file' is refused in a snippet: it runs code
lua_package_path /tmp/?.lua;|'lua_package_path' is refused in a snippet: it runs code
perl 'sub { 1 }';|'perl' is refused in a snippet: it runs code
js_content main.handler;|'js_content' is refused in a snippet: it runs code
root /;|'root' is refused in a snippet: it reads or writes files
alias /etc/;|'alias' is refused in a snippet: it reads or writes files
ssl_certificate /etc/ssl/private/other.crt;|'ssl_certificate' is refused
ssl_certificate_key /etc/ssl/private/other.key;|'ssl_certificate_key' is refused
auth_basic_user_file /etc/shadow;|'auth_basic_user_file' is refused
access_log /tmp/all-requests.log;|'access_log' is refused in a snippet: it writes logs
error_log /tmp/errors.log;|'error_log' is refused in a snippet: it writes logs
client_body_temp_path /tmp/bodies;|'client_body_temp_path' is refused
proxy_cache_path /tmp/c keys_zone=c:1m;|'proxy_cache_path' is refused
env LD_PRELOAD;|'env' is refused in a snippet: it changes the consumer's process
user root;|'user' is refused
worker_processes 64;|'worker_processes' is refused
proxy_pass http://10.0.0.9;|'proxy_pass' is refused in a snippet: it sends requests past the route's cluster
mirror /copy;|'mirror' is refused in a snippet: it sends requests outside the route
location /admin { return 200; }|'location' is refused in a snippet: it opens a new scope
set $tether_route route/other;|'tether_' names are tether's own
if (-f /etc/shadow) { return 200; }|'if (-f ...)' is refused in a snippet: it tests the node's files
EOF

# ---- nginx: syntax that would escape the block ----------------------------------------------------
refused "a '}' that closes tether's location, then a server of the writer's" route/api \
	"$(route_with nginx $'add_header X-A 1;\n} server { listen 9999; location / { root /; }')" \
	"route/api: snippet.nginx: line 2: '}' closes a block the snippet did not open (it would close tether's own)"
refused "an unterminated quote" listener/main "$(listener_with nginx 'add_header X-A "1;')" \
	"listener/main: snippet.nginx: line 1: unterminated double quote"
refused "a statement without its ';'" cluster/web "$(cluster_with nginx 'keepalive 8')" \
	"cluster/web: snippet.nginx: line 1: the last statement lacks its ';'"
refused "a block left open" route/api "$(route_with nginx $'if ($http_x) {\n  return 403;')" \
	"route/api: snippet.nginx: line 2: 1 block(s) left open: a '}' is missing"
refused "a quoted directive name" route/api "$(route_with nginx '"include" /etc/passwd;')" \
	"a directive's name must be a bare word"
refused "a carriage return" route/api "$(route_with nginx $'add_header X-A 1;\r')" \
	"line 1: control character 0x0d"

# ---- haproxy ------------------------------------------------------------------------------------
while IFS='|' read -r name text why; do
	[ -n "$name" ] || continue
	case $name in
	route/*) body=$(route_with haproxy "$text") ;;
	listener/*) body=$(listener_with haproxy "$text") ;;
	cluster/*) body=$(cluster_with haproxy "$text") ;;
	esac
	refused "haproxy '$text' in $name: refused" "$name" "$body" "$name: snippet.haproxy: line 1: "
	check "... the message says why ($why)" grep -qF "$why" <<<"$(answer_error)"
done <<'EOF'
listener/main|backend evil|'backend' is refused in a snippet: it starts a new section
listener/main|global|'global' is refused in a snippet: it starts a new section
cluster/web|lua-load /tmp/x.lua|'lua-load' is refused in a snippet: it runs Lua code
route/api|http-request lua.evil|'lua.evil' is refused in a snippet: it runs Lua code
listener/main|errorfile 503 /etc/shadow|'errorfile' is refused
route/api|http-request return status 200 file /etc/shadow|'file' is refused in a snippet: it reads files on the node
route/api|http-request return status 200 lf-file /etc/shadow|'lf-file' is refused
listener/main|acl bad path -f /etc/shadow|'-f' is refused
route/api|http-response set-header X-Leak %[env(TETHER_TOKEN)]|it reads the consumer's environment
route/api|http-response set-header X-Leak "${HOME}"|'$' expands the consumer's environment
cluster/web|server evil 10.0.0.9:80|'server' is refused in a snippet: it routes past
listener/main|use_backend tether_c_web|'use_backend' is refused
listener/main|bind :9999|'bind' is refused
listener/main|log 10.0.0.9:514 local0|'log' is refused in a snippet: it sends logs
listener/main|setenv X y|'setenv' is refused
listener/main|stats socket /tmp/admin.sock level admin|'stats' is refused
cluster/web|external-check command /bin/sh|'external-check' is refused
route/api|http-request use-service prometheus-exporter|'use-service' is refused
route/api|http-request deny if TRUE|'if': a route's rule takes the route's condition, which tether adds
route/api|acl a path /a|'acl': a route's haproxy snippet holds only http-request and http-response rules
route/api|http-response set-header X-A 1 # why|a comment after a route's rule
listener/main|http-request set-header X-A "1|unterminated double quote
listener/main|acl p_api always_true|'h_' and 'p_' ACL names are tether's own
route/api|http-response set-header X-Leak %[e\x6ev(HOME)]|'\x' escapes are refused in a snippet
cluster/web|http-request \x6cua.evil|'\x' escapes are refused in a snippet
route/api|http-request deny "if" { path -m sub|'if': a route's rule takes the route's condition
route/api|http-response set-header X-Leak "$.FILE"|'$' expands the consumer's environment
EOF

# ---- sizes, the field's shape --------------------------------------------------------------------
big=$(printf '#%.0s' $(seq 1 16385))
refused "a snippet of 16385 bytes" route/api "$(route_with nginx "$big")" \
	"route/api: snippet.nginx: 16385 bytes, more than 16384"
refused "a snippet that is not an object" route/api '{"listener":"main","cluster":"web","snippet":"gzip on;"}' \
	"route/api: snippet must be an object"
refused "a mistyped consumer" route/api '{"listener":"main","cluster":"web","snippet":{"ngnix":"gzip on;"}}' \
	"route/api: snippet: unknown field 'ngnix' (known: nginx, haproxy)"
refused "a secret has no snippet" secret/s '{"cert":"-----BEGIN C","key":"-----BEGIN K","snippet":{}}' \
	"unknown field 'snippet'"

# ---- dry runs report the same ---------------------------------------------------------------------
V0=$(plane_version)
code=$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST --data-binary \
	"{\"upserts\":[{\"name\":\"route/api\",\"body\":$(route_with nginx 'include /etc/passwd;')}]}" \
	"$PLANE_URL/v1/batch?dry_run=1")
check_eq "a dry run of a forbidden snippet: the 422 a write gets" \
	"422 route/api: snippet.nginx: line 1: 'include' is refused in a snippet: it reads or writes files on the node (docs/protocol.md lists what is)" \
	"$code $(answer_error)"
route_with haproxy 'http-request deny if TRUE' >"$WORK/r.json"
ctl put route/api "$WORK/r.json" --dry-run >"$WORK/ctl.out" 2>"$WORK/ctl.err"
check_eq "tetherctl put --dry-run: would be refused (exit 4)" 4 "$?"
check "... with the plane's reason" grep -qF "route/api: snippet.haproxy: line 1: 'if'" "$WORK/ctl.err"
check_eq "... nothing stored" "$V0" "$(plane_version)"

# ---- what passes is stored as written ---------------------------------------------------------------
GOOD_NGINX=$'add_header X-Snip "a;}{b" always;   # a quoted brace\nif ($request_method = DELETE) {\n    return 405;\n}'
GOOD_HAPROXY='http-response set-header X-Snip route-api'
body=$(jq -nc --arg n "$GOOD_NGINX" --arg h "$GOOD_HAPROXY" \
	'{listener:"main", path:"/api", cluster:"web", snippet:{nginx:$n, haproxy:$h}}')
check_eq "a good snippet (anonymous, --insecure, no admin token): stored" 200 "$(try route/api "$body")"
check_eq "... as written" "$GOOD_NGINX|$GOOD_HAPROXY" \
	"$(curl -sS "$PLANE_URL/v1/resources/route/api" | jq -r '.body.snippet | "\(.nginx)|\(.haproxy)"')"
ok16k=$(printf '#%.0s' $(seq 1 16384))
check_eq "a snippet of exactly 16384 bytes: stored" 200 "$(try listener/main "$(listener_with nginx "$ok16k")")"

# ---- roles -------------------------------------------------------------------------------------
stop_pid "$PLANE_PID"
echo "admin-$$-secret-token-0123456789" >"$WORK/admin.tok"
SECURE=1 start_plane q --admin-token-file "$WORK/admin.tok"
as() {
	local who=$1
	shift
	TETHER_TOKEN_FILE=$WORK/$who.tok ctl "$@"
}
for r in admin operator reader relay; do
	as admin token create --role "$r" --name "$r-user" >"$WORK/$r-user.tok" || bail "cannot create a $r token"
done
as admin token create --node n1 >"$WORK/node.tok" || bail "cannot create a node token"
bearer() { echo "Authorization: Bearer $(cat "$WORK/$1.tok")"; }
as admin apply - >/dev/null <<'EOF' || bail "cannot load the base resources"
{"upserts":[{"name":"cluster/web","body":{"endpoints":[{"address":"127.0.0.1","port":9001}]}},
 {"name":"listener/main","body":{"address":"127.0.0.1","port":8080}}]}
EOF
V0=$(plane_version)
SNIP=$(route_with nginx 'add_header X-Snip 1;')
for who in operator-user reader-user relay-user node; do
	code=$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X PUT -H "$(bearer "$who")" --data-binary "$SNIP" \
		"$PLANE_URL/v1/resources/route/api")
	check_eq "a snippet written by $who: 403" 403 "$code"
	code=$(curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST -H "$(bearer "$who")" \
		--data-binary "{\"upserts\":[{\"name\":\"route/api\",\"body\":$SNIP}]}" "$PLANE_URL/v1/batch")
	check_eq "... in a batch: 403" 403 "$code"
done
check_eq "anonymous: 401" 401 "$(api_status PUT /v1/resources/route/api --data-binary "$SNIP")"
check_eq "nothing was stored" "$V0" "$(curl -sS -H "$(bearer admin)" "$PLANE_URL/healthz" | jq -r .version)"
check_eq "an admin writes it" 200 "$(api_status PUT /v1/resources/route/api -H "$(bearer admin-user)" --data-binary "$SNIP")"
check_eq "... the reader sees it" "add_header X-Snip 1;" \
	"$(curl -sS -H "$(bearer reader-user)" "$PLANE_URL/v1/resources/route/api" | jq -r .body.snippet.nginx)"
done_testing
