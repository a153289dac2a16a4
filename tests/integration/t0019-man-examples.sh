#!/usr/bin/env bash
# t0019-man-examples.sh: every example block of the man pages
# (docs/man/*.[1-8]: .nf/.fi and .EX/.EE, found by scripts/doc-blocks) is
# run or checked, adapted only by DOC_SUBST (ports and paths, and the one
# id an example copies from an output before it; docs/HACKING.md, "Docs
# are code"). Transcripts ("$ " prompts) run as a terminal session against
# a real plane over HTTPS with an admin token and three real nodes (the
# fleet the examples show), each block from a fresh directory; a JSON body
# under a resource type's heading goes through `tetherctl put --dry-run`;
# an nginx.conf excerpt passes nginx -t; a unit drop-in's ExecStart runs.
# A command the doc elides ("...") runs as the harness's stand-in; one it
# has none for fails. A block that is a schematic of a format is a SKIP. A block this test cannot classify fails it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-tls.sh"
. "$(dirname "$0")/lib-docs.sh"

need_cmd curl jq openssl nginx git awk sed
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
SRC=$TOP_SRCDIR
DOC_BLOCKS=$WORK/man.blocks
: >"$DOC_BLOCKS"
total=0
for p in "$SRC"/docs/man/*.[1-8]; do
	rel=docs/man/$(basename "$p")
	(cd "$SRC" && scripts/doc-blocks "$rel") >>"$DOC_BLOCKS" || bail "scripts/doc-blocks failed on $rel"
	n=$(cd "$SRC" && scripts/doc-blocks --count "$rel")
	total=$((total + n))
done
check "doc-blocks finds the man pages' example blocks (at least 12, found $total)" test "$total" -ge 12

# ---- the fleet the examples talk about: a plane over HTTPS, nodes edge1..3 --------------
make_pki "$WORK/pki" edge-cert   # (a client certificate make_pki wants; unused)
mkdir -p "$WORK/etc/tether" "$WORK/media/offline" "$WORK/run" "$WORK/ex"
cp "$WORK/pki/ca.pem" "$WORK/etc/tether/ca.pem"
head -c 32 /dev/urandom | base64 >"$WORK/etc/tether/admin.token"
chmod 600 "$WORK/etc/tether/admin.token"
PLANE_ARGS=(--tls-cert "$WORK/pki/server.pem" --tls-key "$WORK/pki/server.key"
	--admin-token-file "$WORK/etc/tether/admin.token" --heartbeat 1 --approve-relay-keys)
SECURE=1 start_plane p "${PLANE_ARGS[@]}"
export TETHER_PLANE=https://localhost:$PLANE_PORT TETHER_CA_FILE=$WORK/etc/tether/ca.pem
export TETHER_TOKEN_FILE=$WORK/etc/tether/admin.token
for e in edge1 edge2 edge3; do
	"$CTL_BIN" token create --node "$e" >"$WORK/$e.token" || bail "cannot make a token for $e"
	start_agent "$e" --plane "$TETHER_PLANE" --ca-file "$TETHER_CA_FILE" --token-file "$WORK/$e.token" \
		--backoff-min 0.1 --backoff-max 1
done
nodes_with_keys() {
	[ "$("$CTL_BIN" nodes --json | jq '[.[] | select(.key_id != null and .key_id != "")] | length')" = 3 ]
}
wait_until 30 nodes_with_keys || bail "nodes edge1..3 did not register their keys"
# relay1, near the nodes (node edge4 comes through it for the approval example)
"$CTL_BIN" token create --role relay --name relay1 >"$WORK/relay1.token" || bail "cannot make a relay token"
ORIGIN_URL=$PLANE_URL ORIGIN_PID=$PLANE_PID ORIGIN_PORT=$PLANE_PORT
start_plane relay1 --upstream "$TETHER_PLANE" --upstream-ca "$TETHER_CA_FILE" \
	--upstream-token-file "$WORK/relay1.token" --relay-id relay1 --heartbeat 1
RELAY_URL=$PLANE_URL
PLANE_URL=$ORIGIN_URL PLANE_PID=$ORIGIN_PID PLANE_PORT=$ORIGIN_PORT
"$CTL_BIN" token create --node edge4 >"$WORK/edge4.token" || bail "cannot make a token for edge4"
# the operator's certificate the sealed-secret examples put
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=web -days 90 \
	-keyout "$WORK/ex/web.key" -out "$WORK/ex/web.crt" 2>/dev/null || bail "openssl"
# the batch the HTTPS example applies, and cluster/api, which ls shows
echo '{"upserts":[{"name":"cluster/db","body":{"endpoints":[{"address":"10.0.0.8","port":5432}]}}]}' \
	>"$WORK/ex/batch.json"
echo '{"endpoints":[{"address":"10.0.0.7","port":9001}]}' | "$CTL_BIN" put cluster/api - >/dev/null ||
	bail "cannot put cluster/api"

# ---- ports, paths, and the id an example copies from an output --------------------
DOC_SUBST=(
	"s|/etc/|$WORK/etc/|g"
	"s|/media/|$WORK/media/|g"
	"s|/run/|$WORK/run/|g"
	"s|plane\.example\.net:7443|localhost:$PLANE_PORT|g"
	# ids an example copies from an output before it: token revoke ID (the
	# id token ls printed for alice), secrets approve NODE ID (the key id
	# edge4 logged, pending at the plane)
	"s|token revoke 66529f5eaa0d|token revoke \$(tetherctl token ls \| awk '\$3 == \"alice\" {print \$1}')|"
	"s|secrets approve edge4 6a2f0d9e81c7b354|secrets approve edge4 \$(doc_logged_key edge4)|"
)

# ---- the session: each transcript from a fresh directory ----------------------------
doc_session_begin "$WORK/man-session.sh"
doc_session_raw "doc_logged_key() { sed -n 's/.*node key \\([0-9a-f]*\\) .*/\\1/p' '$WORK'/\$1.log | head -n 1; }   # the key id a node logged"
doc_session_raw "export PATH='$TOP_BUILDDIR':\$PATH GIT_AUTHOR_NAME=doc GIT_AUTHOR_EMAIL=doc@example.net GIT_COMMITTER_NAME=doc GIT_COMMITTER_EMAIL=doc@example.net"
PLANE_CMD="$PLANE_BIN ${PLANE_ARGS[*]} --listen 127.0.0.1:$PLANE_PORT --data $WORK/p.data"
doc_elided() { # WHERE TEXT: the harness's stand-in for an elided command
	case $2 in
	"tether-plane --sealed-secrets "*)
		# the test's plane started again with the option the example adds
		local key=${2#tether-plane --sealed-secrets }
		key=${key%% *}
		# the one running now stops first (not in the background: an
		# "a && b &" list would run in a subshell whose PID, not the
		# server's, is the one kept); DOC_PID_plane is the current one
		echo "p=\${DOC_PID_plane:-$PLANE_PID}; kill -TERM \$p; __wait 10 sh -c \"! kill -0 \$p\"
$PLANE_CMD --sealed-secrets $key >>'$WORK/p.log' 2>&1 &
DOC_PID_plane=\$!; echo \$! >>\"\$DOC_BG\"; __wait 20 curl -fsS --cacert '$TETHER_CA_FILE' '$TETHER_PLANE/healthz'"
		;;
	"@edge"[0-9]" tetherd "*)
		# on a node of the fleet: its agent started again with the options
		# the example gives (before the ...), then its key registered
		local host=${2%% *} opts=${2#* tetherd }
		host=${host#@}
		opts=${opts%...*}
		[ -n "${APID[$host]:-}" ] || { DOC_WHY="no node $host in the fleet the test starts"; return 2; }
		# as the plane's above: the running agent stops, then the new one
		# starts, its PID kept (DOC_PID_HOST: the current one)
		echo "p=\${DOC_PID_$host:-${APID[$host]}}; kill -TERM \$p; __wait 10 sh -c \"! kill -0 \$p\"
'$AGENT_BIN' --node $host --state-dir '$WORK/$host.state' --output-dir '$WORK/$host.out' --plane '$TETHER_PLANE' \\
	--ca-file '$TETHER_CA_FILE' --token-file '$WORK/$host.token' --backoff-min 0.1 --backoff-max 1 $opts >>'$WORK/$host.log' 2>&1 &
DOC_PID_$host=\$!; echo \$! >>\"\$DOC_BG\"; __wait 20 sh -c \"tetherctl nodes --json | jq -e '.[] | select(.node == \\\"$host\\\") | .key_id != null'\""
		;;
	*)
		DOC_WHY=$DOC_ELIDED_WHY
		return 2 ;;
	esac
}
# the outputs shown that this run's story cannot print, and why
doc_output_differs() { # TEXT WANT
	case $2 in
	"secret/web: wrapped for edge3 "*)
		echo "edge3 registered its key before the seal here (the example's came later, through a relay that needs no approval; the next example turns approval on)" ;;
	"wrapped for edge1 "*", edge2 "*)
		echo "the fleet here has more node keys by then (edge3, edge4, the drop-in's agent)" ;;
	*) return 1 ;;
	esac
}
types="cluster listener route secret file guard"
for w in $(grep '^@@block ' "$DOC_BLOCKS" | awk '{print $2}'); do
	text=$(doc_block "$w")
	sect=$(grep "^@@block $w " "$DOC_BLOCKS" | head -n 1 | cut -d' ' -f3-)
	type=$(awk '{print tolower($1)}' <<<"$sect")
	if grep -q '^\$ ' <<<"$text"; then
		doc_session_raw "cd '$WORK/ex'"
		if grep -q 'secrets approve' <<<"$text"; then
			# the node whose first key comes through relay1: waiting for an admin
			doc_session_raw "'$AGENT_BIN' --plane '$RELAY_URL' --node edge4 --token-file '$WORK/edge4.token' \
	--state-dir '$WORK/edge4.state' --output-dir '$WORK/edge4.out' --backoff-min 0.1 --backoff-max 1 >>'$WORK/edge4.log' 2>&1 &
echo \$! >>\"\$DOC_BG\"
__wait 20 sh -c \"tetherctl nodes --json | jq -e '.[] | select(.node == \\\"edge4\\\" and .key_pending != null)'\""
		fi
		doc_session_add "$w" transcript
	elif grep -q '\.\.\.}\|{\.\.\.}' <<<"$text"; then
		ok "$w: # SKIP a schematic of a format ({...} stands for a body), not an example"
	elif jq -e 'type == "object"' >/dev/null 2>&1 <<<"$text"; then
		# a resource body: its name is the TYPE/NAME the text just before
		# it gives ("The body of cluster/web:"), its type the section's
		name=$(head -n $((${w##*:} - 1)) "$SRC/${w%:*}" | tail -n 8 | sed 's/\\-/-/g' |
			grep -oE "\b($(tr ' ' '|' <<<"$types"))/[a-z0-9][a-z0-9_.-]*" | tail -n 1)
		if [ -z "$name" ] && [[ " $types " == *" $type "* ]]; then
			name=$type/doc-example
		fi
		if [ -z "$name" ]; then
			not_ok "$w: a JSON example under '$sect': which resource is it? (say 'The body of TYPE/NAME:' before it)"
		elif [ -e "$WORK/bodies/$name.json" ]; then
			not_ok "$w: a second example of $name (each example its own name, so they go to the plane together)"
		else
			mkdir -p "$WORK/bodies/${name%/*}"
			printf '%s\n' "$text" >"$WORK/bodies/$name.json"
			JSON_EXAMPLES="${JSON_EXAMPLES:-} $w=$name"
		fi
	elif grep -q 'include .*/current/\*\.conf;' <<<"$text"; then
		# an nginx.conf excerpt: nginx -t with it, and what nginx needs beyond it
		mkdir -p "$WORK/ng"
		{
			echo "pid $WORK/ng/nginx.pid; error_log $WORK/ng/error.log;"
			grep -q '^events' <<<"$text" || echo "events { }"
			printf '%s\n' "$text" | doc_subst
		} >"$WORK/ng/nginx.conf"
		check "$w: the nginx.conf excerpt passes nginx -t" nginx -t -q -p "$WORK/ng" -c "$WORK/ng/nginx.conf"
	elif grep -q '^\[Service\]' <<<"$text"; then
		# a drop-in: its ExecStart runs (the agent.conf it names, written here)
		exe=$(sed -n '/^ExecStart=./,/[^\\]$/p' <<<"$text" | sed 's/^ExecStart=//' | tr -d '\\\n' | tr -s ' ' | doc_subst)
		"$CTL_BIN" token create --node edge-unit >"$WORK/etc/tether/edge-unit.token"
		cat >"$WORK/etc/tether/agent.conf" <<EOF
[agent]
plane = $TETHER_PLANE
node = edge-unit
ca_file = $TETHER_CA_FILE
token_file = $WORK/etc/tether/edge-unit.token
state_dir = $WORK/unit.state
output_dir = $WORK/unit.out
EOF
		rt=$(grep -o '^RuntimeDirectory=.*' <<<"$text" | cut -d= -f2)
		mode=$(grep -o '^RuntimeDirectoryMode=.*' <<<"$text" | cut -d= -f2)
		[ -z "$rt" ] || install -d -m "${mode:-0755}" "$WORK/run/$rt"   # what systemd makes
		# shellcheck disable=SC2086
		${exe/\/usr\/sbin\/tetherd/$AGENT_BIN} >>"$WORK/unit.log" 2>&1 &
		upid=$!
		track_pid "$upid"
		check "$w: the drop-in's ExecStart runs: the agent syncs" \
			wait_until 20 sh -c "jq -e '.state == \"synced\"' '$WORK/unit.state/status.json'"
		UNIT_WHERE=$w UNIT_SECRETS=$(grep -o -- '--secrets-dir [^ ]*' <<<"$exe" | cut -d' ' -f2)
	else
		not_ok "$w: an example block this test does not know how to run: '$(head -n 1 <<<"$text")' (add it to $T_NAME)"
	fi
done

# the resource examples, together (a route's listener and cluster are
# examples too): every check of a write, nothing stored (sync --dry-run:
# exit 3 would change, 4 would refuse)
if [ -n "${JSON_EXAMPLES:-}" ]; then
	"$CTL_BIN" sync "$WORK/bodies" --dry-run >"$WORK/dry.out" 2>&1
	rc=$?
	check "the resource examples ($(echo $JSON_EXAMPLES | sed 's/[^ ]*=//g')) pass every check of the plane (sync --dry-run: exit $rc)" test $rc -eq 3
	[ $rc -eq 3 ] || diag "$(cat "$WORK/dry.out")"
fi

doc_forever_kind() { :; }
doc_session_run "$WORK/ex"
doc_report
doc_stop_bg
unit_acked() {
	"$CTL_BIN" nodes --json |
		jq -e '.[] | select(.node == "edge-unit") | .acked_version == .target_version and .last_nack == null'
}
if [ -n "${UNIT_WHERE:-}" ]; then
	# the transcripts sealed secret/web to every node key, the drop-in's agent's too
	check "$UNIT_WHERE: the drop-in's agent (--secrets-dir $UNIT_SECRETS) opens the sealed secret/web and ACKs" \
		wait_until 20 unit_acked
fi

done_testing
