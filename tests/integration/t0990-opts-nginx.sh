#!/usr/bin/env bash
# t0990-opts-nginx.sh: route and cluster options through a real nginx
# driven by tetherd (lib-opts.sh's scenario): timeout.read turns a slow
# backend into a 504, timeout.connect gives up on an endpoint that never
# accepts, strip_prefix and rewrite change the path the backend
# sees, headers set and removed are seen by backend and client, a websocket
# upgrades and echoes, retries reach the live endpoint past a dead one,
# max_body answers 413, keepalive reuses upstream connections, health's
# max_fails takes a dead endpoint out after exactly that many failures
# (nginx's default is one); and the lines each option renders to.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
. "$(dirname "$0")/lib-opts.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node ss python3

trap t_cleanup EXIT

opts_backends
free_port LP
free_port MARK
OUT=$WORK/ng.out
start_plane p --heartbeat 1
write_nginx_conf "$OUT"
start_nginx
start_agent ng --consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" --reload-timeout 5 \
	--backoff-min 0.1 --backoff-max 1

live_version() {
	agent_at ng "$1" && marker_is_current
}

opts_scenario
check_eq "strip_prefix: nginx decodes the path it matches: /strip/a%2Fb goes up as /a/b" "/a/b" \
	"$(seen '/strip/a%2Fb' .url)"
head -c 40000 /dev/zero | tr '\0' a >"$WORK/huge"
check_eq "max_body 20000: a chunked 40000-byte body is a 413 (nginx counts every body)" 413 \
	"$(code /gap/x -X POST -H 'Transfer-Encoding: chunked' --data-binary @"$WORK/huge")"
check_eq "max_body 20000: 40000 bytes in 1000-byte chunks are a 413 too (haproxy's gap is not nginx's)" 413 \
	"$(python3 "$TOOLS/chunked-post.py" "$LP" /gap/x 40000 1000 | cut -d' ' -f1)"
conf=$OUT/current/tether.conf

out=$(node "$TOOLS/ws-roundtrip.mjs" "http://127.0.0.1:$LP/plain-ws" 2>&1)
check_eq "a route without websocket does not upgrade (nginx drops Upgrade)" "no upgrade: status 200" "$out"

f=$(fails 20 /sick/x)
check_eq "health max_fails 3: exactly 3 of 20 requests fail ($(xargs <"$WORK/codes"))" 3 "$f"
check_eq "then the dead endpoint is out (the last 10 answered)" "200 200 200 200 200 200 200 200 200 200" \
	"$(tail -n 10 "$WORK/codes" | xargs)"

# what the options render to
loc() {
	awk -v want="        # route/$1" '$0 == want {on = 1} on {print} on && /^    }/ {exit}' "$conf"
}
check "the map for websocket routes is rendered once" test "$(grep -c '^map \$http_upgrade \$tether_connection_upgrade {' "$conf")" = 1
check "route/ws: Upgrade and Connection from the map, an hour's read timeout" sh -c \
	"printf '%s\n' \"\$1\" | grep -q 'proxy_set_header Upgrade \$http_upgrade;' && printf '%s\n' \"\$1\" | grep -q 'proxy_set_header Connection \$tether_connection_upgrade;' && printf '%s\n' \"\$1\" | grep -q 'proxy_read_timeout 3600s;'" _ "$(loc ws)"
check "route/conn: proxy_connect_timeout 200ms and proxy_send_timeout 2s" sh -c \
	"printf '%s\n' \"\$1\" | grep -q 'proxy_connect_timeout 200ms;' && printf '%s\n' \"\$1\" | grep -q 'proxy_send_timeout 2s;'" _ "$(loc conn)"
check "route/try1: proxy_next_upstream error timeout, 2 tries" sh -c \
	"printf '%s\n' \"\$1\" | grep -q 'proxy_next_upstream_tries 2;'" _ "$(loc try1)"
check "route/strip: a rewrite ... break before proxy_pass's upstream" sh -c \
	"printf '%s\n' \"\$1\" | grep -qF 'rewrite \"(?s)^/strip(/(.*))?\$\" /\$2 break;'" _ "$(loc strip)"
check "cluster/sick: max_fails=3 fail_timeout=60s on each server" \
	test "$(grep -c 'max_fails=3 fail_timeout=60s;' "$conf")" = 2
check "cluster/pool: keepalive 4" sh -c "awk '/^upstream tether_c_pool \\{/,/^\\}/' '$conf' | grep -q '^    keepalive 4;'"
check "a route without options renders as before (the three proxy headers, nothing else)" sh -c \
	"[ \"\$(printf '%s\n' \"\$1\" | grep -c '^        proxy_')\" = 5 ]" _ "$(loc root)"
check "nginx -t accepted every generation (no failed reload in its log)" sh -c "! grep -q '\\[emerg\\]' '$WORK/nginx-error.log'"
done_testing
