#!/usr/bin/env bash
# t1005-ui-session.sh: console sessions (POST /v1/ui/session, tetherctl ui)
# on both stores: a secure plane on SQLite and two replicas on a real etcd.
# tetherctl ui prints one link, PLANE/ui/#s=TOKEN; readers, operators and
# admins may open a session, nodes, relays, sessions and nobody may not;
# ttl's bounds; the session reads and never writes; token ls shows it as a
# ui session with its expiry; the token is in no log; a restart, the
# other replica and a relay honour it (a relay makes none: 421); at its end it is refused as expired (401) and
# the event stream it opened is closed; a record long expired is dropped
# from the database and from etcd.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
need_cmd jq curl sqlite3

echo "admin-$$-ui-session-token-0123456789abcdef" >"$WORK/admin.token"
ADMIN=$(cat "$WORK/admin.token")
etcd_cluster_start 1
PREFIX=/t1005-$$/
E=(--store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "$PREFIX")
SECURE=1 start_plane s --heartbeat 1 --admin-token-file "$WORK/admin.token"
S_URL=$PLANE_URL S_PID=$PLANE_PID
SECURE=1 start_plane e1 "${E[@]}" --heartbeat 1 --admin-token-file "$WORK/admin.token"
E1_URL=$PLANE_URL E1_PID=$PLANE_PID
SECURE=1 start_plane e2 "${E[@]}" --heartbeat 1 --admin-token-file "$WORK/admin.token"
E2_URL=$PLANE_URL E2_PID=$PLANE_PID

actl() { "$CTL_BIN" --plane "$URL" --token-file "$WORK/admin.token" "$@"; }
# session URL TOKEN BODY: POST /v1/ui/session; prints the body, then the status
session() { curl -sS -X POST -w '\n%{http_code}' -H "Authorization: Bearer $2" --data-binary "$3" "$1/v1/ui/session"; }
status_of() { tail -n 1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
get_as() { curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $2" "$1$3"; }
absent() { ! test -e "$1"; }
lacks() { ! grep -q "$1" "$2"; }
b64() { printf %s "$1" | base64 -w0; }
etcd_count() { etcdv3 1 /v3/kv/range "{\"key\":\"$(b64 "${PREFIX}$1")\",\"count_only\":true}" | jq -r '.count // "0"'; }

declare -A SHORT
declare -a EV_PID
for store in sqlite etcd; do
	if [ $store = sqlite ]; then URL=$S_URL LOG=$WORK/s.log; else URL=$E1_URL LOG=$WORK/e1.log; fi
	diag "---- $store"
	actl token create --role reader --name "ui-$store" >"$WORK/reader.$store" || bail "cannot make a reader token"
	actl token create --role operator >"$WORK/operator.$store" || bail "cannot make an operator token"
	actl token create --role relay >"$WORK/relay.$store" || bail "cannot make a relay token"
	actl token create --node n1 >"$WORK/node.$store" || bail "cannot make a node token"

	out=$("$CTL_BIN" --plane "$URL" --token-file "$WORK/reader.$store" ui 2>"$WORK/ui.err")
	check_eq "$store: tetherctl ui prints one line" 1 "$(wc -l <<<"$out")"
	check "$store: ... the link PLANE/ui/#s=TOKEN" grep -Eq "^${URL//./\\.}/ui/#s=tt1_[0-9a-f]{12}_[A-Za-z0-9_-]{43}\$" <<<"$out"
	check "$store: ... and says on stderr until when, read-only" grep -q "a read-only console session until 20" "$WORK/ui.err"
	TOK=${out#*#s=}
	SECRET=${TOK##*_}
	check_eq "$store: the session reads" 200 "$(get_as "$URL" "$TOK" /v1/nodes)"
	check_eq "$store: ... and may not write (403)" 403 "$(curl -sS -o /dev/null -w '%{http_code}' -X PUT \
		-H "Authorization: Bearer $TOK" --data-binary '{"path":"x","content":"x"}' "$URL/v1/resources/file/x")"
	check_eq "$store: ... nor revert (403)" 403 "$(curl -sS -o /dev/null -w '%{http_code}' -X POST \
		-H "Authorization: Bearer $TOK" --data-binary '{"version":1}' "$URL/v1/revert")"
	check_eq "$store: ... nor list tokens (403)" 403 "$(get_as "$URL" "$TOK" /v1/tokens)"
	r=$(session "$URL" "$TOK" '{}')
	check_eq "$store: a session may not open another (403)" 403 "$(status_of "$r")"
	check "$store: ... saying why" grep -q "a console session may not open another" <<<"$r"

	ls_json=$(actl token ls --json)
	id=${TOK#tt1_}; id=${id%%_*}
	check "$store: GET /v1/tokens: a reader's session with its expiry" jq -e --arg id "$id" \
		'.[] | select(.id == $id) | .role == "reader" and .session == true and .expires > .created' <<<"$ls_json"
	check "$store: token ls shows it as a ui session with its expiry" \
		grep -Eq "^$id +ui session +ui session by ui-$store \\(reader token\\) .* 20[0-9-]+[T ][0-9:]+(Z|[+-][0-9:]+)\$" \
		<<<"$(actl token ls)"
	check_eq "$store: the token's secret is in no log line" 0 "$(grep -c -- "$SECRET" "$LOG")"
	check_eq "$store: ... nor in /metrics" 0 \
		"$(curl -sS -H "Authorization: Bearer $ADMIN" "$URL/metrics" | grep -c -- "$SECRET")"

	# revoked: refused at once, the event stream it opened closed (one
	# opened as the revocation lands is closed too: the stream looks again)
	r=$(session "$URL" "$(cat "$WORK/reader.$store")" '{}')
	RT=$(body_of "$r" | jq -r .token)
	curl -sS -N -H "Authorization: Bearer $RT" "$URL/v1/events" >/dev/null 2>&1 &
	RV_PID=$!
	track_pid $RV_PID
	check "$store: a session's event stream opens" wait_until 10 grep -q \
		"events: token $(body_of "$r" | jq -r .id) .* subscribed" "$LOG"
	actl token revoke "$(body_of "$r" | jq -r .id)" >/dev/null
	check_eq "$store: a revoked session is refused (401)" 401 "$(get_as "$URL" "$RT" /v1/nodes)"
	rv_closed() { ! kill -0 "$RV_PID" 2>/dev/null; }
	check "$store: ... and its event stream closed" wait_until 10 rv_closed
	stop_pid "$RV_PID"

	# who may open one
	for who in operator admin; do
		if [ $who = admin ]; then t=$ADMIN; else t=$(cat "$WORK/$who.$store"); fi
		r=$(session "$URL" "$t" '')
		check_eq "$store: an $who may open one (201)" 201 "$(status_of "$r")"
	done
	r=$(session "$URL" "$(cat "$WORK/node.$store")" '{}')
	check_eq "$store: a node's token may not (403)" 403 "$(status_of "$r")"
	r=$(session "$URL" "$(cat "$WORK/relay.$store")" '{}')
	check_eq "$store: a relay's may not (403)" 403 "$(status_of "$r")"
	check "$store: ... saying why" grep -q "a relay's credential may not open one" <<<"$r"
	check_eq "$store: nobody may not (401)" 401 "$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$URL/v1/ui/session")"

	# ttl
	R=$(cat "$WORK/reader.$store")
	r=$(session "$URL" "$R" '')
	check "$store: the default ttl is 900 s" jq -e '(.expires - now) > 880 and (.expires - now) <= 901' <<<"$(body_of "$r")"
	check "$store: ... its url is the console's, the token in the fragment" \
		jq -e --arg u "$URL" '.url == ($u + "/ui/#s=" + .token)' <<<"$(body_of "$r")"
	r=$(session "$URL" "$R" '{"ttl":86400}')
	check_eq "$store: ttl 86400 (the most)" 201 "$(status_of "$r")"
	for bad in '{"ttl":59}' '{"ttl":86401}' '{"ttl":"900"}' '{"ttl":90.5}' '[]'; do
		r=$(session "$URL" "$R" "$bad")
		check_eq "$store: $bad refused (422)" 422 "$(status_of "$r")"
	done
	r=$(session "$URL" "$R" '{"ttl":1}')
	check "$store: ... naming the field, its bounds" grep -q 'ttl: must be a whole number of seconds in 60..86400' <<<"$r"
	r=$(session "$URL" "$R" '{"tll":60}')
	check "$store: an unknown field is named" grep -q "unknown field 'tll'" <<<"$r"
	out=$("$CTL_BIN" --plane "$URL" --token-file "$WORK/reader.$store" ui --ttl 2h --json)
	check "$store: tetherctl ui --ttl 2h: 7200 s" jq -e '(.expires - now) > 7180 and (.expires - now) <= 7201' <<<"$out"
	"$CTL_BIN" --plane "$URL" --token-file "$WORK/reader.$store" ui --ttl 30s >/dev/null 2>"$WORK/ui.err"
	check_eq "$store: --ttl 30s: refused by the plane (exit 1)" 1 $?
	"$CTL_BIN" --plane "$URL" --token-file "$WORK/reader.$store" ui --ttl soon >/dev/null 2>"$WORK/ui.err"
	check_eq "$store: --ttl soon: a usage error (exit 2)" 2 $?

	# --open: $BROWSER gets a private page that moves on to the link, never
	# the link itself (a command line is in every local user's process list)
	cat >"$WORK/browser.sh" <<EOF
#!/bin/sh
printf '%s\n' "\$*" >"$WORK/argv.$store"
stat -c %a "\$1" >"$WORK/page-mode.$store"
stat -c %a "\$(dirname "\$1")" >"$WORK/dir-mode.$store"
printf '%s\n' "\$1" >"$WORK/page.$store"
sed -n 's/.*location.replace("\([^"]*\)").*/\1/p' "\$1" >"$WORK/opened.$store"
EOF
	chmod +x "$WORK/browser.sh"
	out=$(BROWSER=$WORK/browser.sh "$CTL_BIN" --plane "$URL" --token-file "$WORK/reader.$store" ui --open 2>/dev/null)
	check_eq "$store: --open: exit 0 (the opener did)" 0 $?
	check_eq "$store: --open: the page moves on to the printed link" "$out" "$(cat "$WORK/opened.$store" 2>/dev/null)"
	check "$store: --open: the printed link holds a session" grep -q '/ui/#s=tt1_' <<<"$out"
	check "$store: --open: the browser's command line holds no token" lacks tt1_ "$WORK/argv.$store"
	check_eq "$store: --open: only the user may read the page" 600 "$(cat "$WORK/page-mode.$store")"
	check_eq "$store: --open: ... in a directory only the user may open" 700 "$(cat "$WORK/dir-mode.$store")"
	page=$(cat "$WORK/page.$store")
	check "$store: --open: the page stays a while for a browser the opener handed it to" test -e "$page"
	check "$store: --open: the page is gone once read (10 s after)" wait_until 40 absent "$page"
	check "$store: --open: ... and its directory" absent "$(dirname "$page")"
	# a browser that fails
	cat >"$WORK/nobrowser.sh" <<EOF
#!/bin/sh
printf '%s\n' "\$1" >"$WORK/failed-page.$store"
exit 1
EOF
	chmod +x "$WORK/nobrowser.sh"
	BROWSER=$WORK/nobrowser.sh "$CTL_BIN" --plane "$URL" --token-file "$WORK/reader.$store" ui --open \
		>/dev/null 2>"$WORK/ui.err"
	check_eq "$store: --open: a browser that fails: exit 1" 1 $?
	check "$store: --open: ... saying to open the link by hand" grep -q "could not open the link.*open the link above yourself" "$WORK/ui.err"
	check "$store: --open: ... and its page is gone" absent "$(cat "$WORK/failed-page.$store")"

	# a short session, and the event stream it opens
	r=$(session "$URL" "$R" '{"ttl":60}')
	SHORT[$store]=$(body_of "$r" | jq -r .token)
	curl -sS -N -H "Authorization: Bearer ${SHORT[$store]}" "$URL/v1/events" >"$WORK/events.$store" 2>&1 &
	EV_PID+=("$!")
	track_pid $!
done

# every replica, a relay and a restart honour a session
check_eq "etcd: the other replica takes the session" 200 "$(get_as "$E2_URL" "${SHORT[etcd]}" /v1/status)"
SECURE=1 start_plane r --upstream "$S_URL" --relay-id r1 --upstream-token-file "$WORK/relay.sqlite" --heartbeat 1
R_URL=$PLANE_URL
relay_takes() { [ "$(get_as "$R_URL" "${SHORT[sqlite]}" /v1/status)" = 200 ]; }
check "sqlite: a relay takes the session (it follows the token records)" wait_until 20 relay_takes
r=$(session "$R_URL" "$(cat "$WORK/reader.sqlite")" '{}')
check_eq "sqlite: a relay makes no session (421: its upstream does)" 421 "$(status_of "$r")"
stop_pid "$S_PID"
SECURE=1 start_plane s --heartbeat 1 --admin-token-file "$WORK/admin.token" --listen "127.0.0.1:${S_URL##*:}"
S_PID=$PLANE_PID
check_eq "sqlite: a restarted plane takes the session" 200 "$(get_as "$S_URL" "${SHORT[sqlite]}" /v1/status)"
URL=$S_URL
check "sqlite: ... and still knows its end" jq -e --arg id "$(cut -d_ -f2 <<<"${SHORT[sqlite]}")" \
	'.[] | select(.id == $id) | .session and .expires > 0' <<<"$(actl token ls --json)"
stored=$(etcdv3 1 /v3/kv/range "{\"key\":\"$(b64 "${PREFIX}tokens/$(cut -d_ -f2 <<<"${SHORT[etcd]}")")\"}" |
	jq -r '.kvs[0].value' | base64 -d)
check "etcd: the record keeps its end, its role ui-session (older planes admit nothing with it), no token" \
	jq -e '.role == "ui-session" and .expires > .created and (has("token") | not)' <<<"$stored"

# the end: refused as expired, the stream closed
expired() { curl -sS -H "Authorization: Bearer $2" "$1/v1/status" | grep -q 'expired at'; }
check "sqlite: at its end the session is refused: expired" wait_until 90 expired "$S_URL" "${SHORT[sqlite]}"
check "etcd: at its end the session is refused: expired" wait_until 30 expired "$E1_URL" "${SHORT[etcd]}"
check "etcd: ... on the other replica too" expired "$E2_URL" "${SHORT[etcd]}"
check "sqlite: ... and on the relay" wait_until 10 expired "$R_URL" "${SHORT[sqlite]}"
check_eq "... 401" 401 "$(get_as "$E2_URL" "${SHORT[etcd]}" /v1/status)"
check "... saying how to get a new one" grep -q "tetherctl ui" <<<"$(curl -sS -H "Authorization: Bearer ${SHORT[etcd]}" "$E1_URL/v1/nodes")"
ev_closed() { ! kill -0 "${EV_PID[1]}" 2>/dev/null; }
check "etcd: the event stream it opened is closed" wait_until 10 ev_closed
check "the plane says so in its log" wait_until 10 grep -q "console session $(cut -d_ -f2 <<<"${SHORT[etcd]}") expired" "$WORK/e1.log"
PLANE_URL=$E1_URL CURL_OPTS=(-H "Authorization: Bearer $ADMIN")
check "refusals as expired are counted" test "$(metric 'tether_auth_refused_total{reason="expired"}')" -ge 1
URL=$E1_URL
check "an expired session is still listed (until it is dropped)" jq -e --arg id "$(cut -d_ -f2 <<<"${SHORT[etcd]}")" \
	'any(.[]; .id == $id)' <<<"$(actl token ls --json)"

# a record expired over a day ago is dropped, from the database and etcd
now=$(date +%s)
OLD=0123456789ab
stop_pid "$S_PID"
sqlite3 "$WORK/s.data/tether.db" "INSERT INTO tokens(id, hash, role, node, name, created, revoked, expires)
	VALUES('$OLD', '$(printf %064d 0)', 'ui-session', '', 'ui session by test', $((now - 200000)), 0, $((now - 90000)))" ||
	bail "cannot seed the database"
SECURE=1 start_plane s --heartbeat 1 --admin-token-file "$WORK/admin.token"
sq_gone() { [ "$(sqlite3 "$WORK/s.data/tether.db" "SELECT count(*) FROM tokens WHERE id='$OLD'")" = 0 ]; }
check "sqlite: a session expired over a day ago is dropped" wait_until 10 sq_gone
check_eq "sqlite: ... the others stay" 4 "$(sqlite3 "$WORK/s.data/tether.db" "SELECT count(*) FROM tokens WHERE role != 'ui-session'")"
stop_pid "$E1_PID"
stop_pid "$E2_PID"
rec=$(jq -nc --arg id "$OLD" --argjson now "$now" \
	'{id:$id, hash:("0" * 64), role:"ui-session", node:"", name:"ui session by test",
	  created:($now - 200000), revoked:0, expires:($now - 90000)}')
etcdv3 1 /v3/kv/put "{\"key\":\"$(b64 "${PREFIX}tokens/$OLD")\",\"value\":\"$(b64 "$rec")\"}" >/dev/null
check_eq "etcd: the old record is there" 1 "$(etcd_count "tokens/$OLD")"
SECURE=1 start_plane e1 "${E[@]}" --heartbeat 1 --admin-token-file "$WORK/admin.token"
et_gone() { [ "$(etcd_count "tokens/$OLD")" = 0 ]; }
check "etcd: a session expired over a day ago is dropped" wait_until 10 et_gone
check_eq "etcd: ... the short one, expired a minute ago, stays" 1 "$(etcd_count "tokens/$(cut -d_ -f2 <<<"${SHORT[etcd]}")")"
done_testing
