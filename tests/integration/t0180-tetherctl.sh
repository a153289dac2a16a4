#!/usr/bin/env bash
# t0180-tetherctl.sh: tetherctl against the real plane: every command, exit
# codes 0/1/2 with their messages on stderr, TETHER_PLANE vs --plane,
# --token-file with an admin token, stdin for put, an unreachable plane,
# apply with a batch, and status on a sample status.json.
. "$(dirname "$0")/lib.sh"

[ -x "$CTL_BIN" ] || bail "no $CTL_BIN: build first"

# ctl ARGS...: runs tetherctl; sets RC, OUT (stdout) and ERR (stderr).
ctl() {
	"$CTL_BIN" "$@" >"$WORK/ctl.out" 2>"$WORK/ctl.err" </dev/null
	RC=$?
	OUT=$(cat "$WORK/ctl.out")
	ERR=$(cat "$WORK/ctl.err")
}

# ctl_in INPUT ARGS...: the same with INPUT on standard input.
ctl_in() {
	local input=$1
	shift
	printf '%s' "$input" | "$CTL_BIN" "$@" >"$WORK/ctl.out" 2>"$WORK/ctl.err"
	RC=$?
	OUT=$(cat "$WORK/ctl.out")
	ERR=$(cat "$WORK/ctl.err")
}

# has TEXT PATTERN: true when TEXT holds the fixed string PATTERN.
has() {
	case $1 in *"$2"*) return 0 ;; esac
	return 1
}

# check_has DESCRIPTION TEXT PATTERN
check_has() {
	if has "$2" "$3"; then
		ok "$1"
	else
		not_ok "$1"
		diag "expected to find: $3"
		diag "in: $2"
	fi
}

plane_version() {
	curl -s "$PLANE_URL/healthz" | json .version
}

unset TETHER_PLANE TETHER_TOKEN_FILE

# ---- a plane that is gone: its port is free --------------------------------
start_plane dead
DEAD_URL=$PLANE_URL
stop_pid "$PLANE_PID"

start_plane p
export TETHER_PLANE=$PLANE_URL

# ---- help, version, usage errors ------------------------------------------
ctl --version
check_eq "--version exits 0" 0 "$RC"
check_has "--version names the program" "$OUT" "tetherctl "
ctl --help
check_eq "--help exits 0" 0 "$RC"
check_has "--help prints the usage on stdout" "$OUT" "usage: tetherctl [--plane URL] [--token-file FILE] [--ca-file FILE] [--cert FILE --key FILE] COMMAND"
check_has "--help lists the commands" "$OUT" "rollout status"
ctl help
check_eq "help exits 0" 0 "$RC"
check_has "help prints the usage" "$OUT" "usage: tetherctl"
ctl help put
check_eq "help put shows the command's usage" "0 yes" "$RC $(has "$OUT" 'put NAME [FILE|-]' && echo yes)"
ctl
check_eq "no command is a usage error (2)" 2 "$RC"
check_has "no command prints the usage line on stderr" "$ERR" "usage: tetherctl"
ctl frobnicate
check_eq "an unknown command exits 2" 2 "$RC"
check_has "an unknown command is named" "$ERR" "unknown command 'frobnicate'"
ctl --frob ls
check_eq "an unknown option exits 2" 2 "$RC"
check_has "an unknown option is named" "$ERR" "unknown option '--frob'"
ctl get
check_eq "get without NAME exits 2" 2 "$RC"
check_has "get without NAME shows the command's usage" "$ERR" "usage: tetherctl [global options] get NAME"
ctl rm a/b c/d
check_eq "rm with two names exits 2" 2 "$RC"
ctl ls a b
check_eq "ls with two prefixes exits 2" 2 "$RC"
ctl rollout
check_eq "rollout without a subcommand exits 2" 2 "$RC"
ctl rollout restart
check_eq "an unknown rollout subcommand exits 2" 2 "$RC"
ctl export "$WORK/nowhere" --json
check_eq "--json on export exits 2" 2 "$RC"
ctl --plane
check_eq "--plane without a URL exits 2" 2 "$RC"
ctl get ""
check_eq "an empty name exits 2" 2 "$RC"
check_eq "usage errors wrote nothing" 0 "$(plane_version)"

# ---- put, get -------------------------------------------------------------
printf '%s' '{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9001,"weight":2}]}' >"$WORK/web.json"
ctl put cluster/web "$WORK/web.json"
check_eq "put FILE exits 0 (plane from TETHER_PLANE)" 0 "$RC"
check_eq "put prints the new version" "version 1" "$OUT"
check_eq "put wrote nothing on stderr" "" "$ERR"
ctl_in '{"endpoints":[{"weight":2,"port":9001,"address":"127.0.0.1"}],"lb":"round_robin"}' put cluster/web
check_eq "put from stdin without FILE exits 0" 0 "$RC"
check_eq "the same body again says no change" "version 1 (no change)" "$OUT"
ctl_in '{"lb":"least_conn","endpoints":[{"address":"127.0.0.1","port":9002}]}' put cluster/web -
check_eq "put - reads stdin" "0 version 2" "$RC $OUT"

ctl get cluster/web
check_eq "get exits 0" 0 "$RC"
check_eq "get prints the body" '{"endpoints":[{"address":"127.0.0.1","port":9002}],"lb":"least_conn"}' \
	"$(echo "$OUT" | jq -c .)"
check_has "get pretty-prints the body" "$OUT" '    {
      "address": "127.0.0.1",'
ctl get cluster/nope
check_eq "get of an absent resource exits 1" 1 "$RC"
check_has "get of an absent resource names it" "$ERR" "no resource 'cluster/nope'"
check_eq "get of an absent resource prints nothing on stdout" "" "$OUT"

ctl_in '{"lb":' put cluster/bad
check_eq "put of malformed JSON exits 1" 1 "$RC"
check_has "put of malformed JSON says so" "$ERR" "malformed JSON"
# a file as an operator writes it: the error points at the line and column
printf '{\n  "endpoints": [{"address": "127.0.0.1", "port": 80}]\n  "lb": "round_robin"\n}\n' >"$WORK/bad.json"
ctl put cluster/bad "$WORK/bad.json"
check_has "put of a file names the file, the line and column and what was expected" "$ERR" \
	"'$WORK/bad.json': malformed JSON at line 3, column 3 (byte 58): expected ',' or '}', found '\"'"
printf '{"upserts": [\n  {"name": "cluster/x", "body": {"endpoints": []}},\n]}\n' >"$WORK/badbatch.json"
ctl apply "$WORK/badbatch.json"
check_eq "apply of a malformed file exits 1" 1 "$RC"
check_has "apply of a file points at the line and column" "$ERR" \
	"malformed JSON at line 3, column 1 (byte 66): expected a value, found ']'"
ctl_in '[1,2]' put cluster/bad
check_eq "put of a JSON array exits 1" 1 "$RC"
check_has "put of a JSON array says a body is an object" "$ERR" "must be a JSON object"
ctl put cluster/bad "$WORK/no-such-file.json"
check_eq "put of a missing file exits 1" 1 "$RC"
check_has "put of a missing file names it" "$ERR" "cannot open '$WORK/no-such-file.json'"
truncate -s 65M "$WORK/huge.json"
ctl put cluster/bad "$WORK/huge.json"
check_eq "put of a file over 64 MiB exits 1" 1 "$RC"
check_has "put of a file over 64 MiB says why" "$ERR" "larger than 64 MiB"
ctl_in '{"listener":"l9","cluster":"web"}' put route/r9
check_eq "put refused by the plane exits 1" 1 "$RC"
check_eq "put refused by the plane prints its error" "tetherctl: route/r9: unknown listener 'l9'" "$ERR"
ctl_in '{}' put 'nosuchtype/x'
check_eq "put of a bad name exits 1 with the plane's answer" 1 "$RC"
check_eq "nothing was stored by refused writes" 2 "$(plane_version)"

# ---- apply ----------------------------------------------------------------
cat >"$WORK/batch.json" <<'EOF'
{"upserts":[
  {"name":"route/r1","body":{"listener":"l1","cluster":"web","host":"example.com","path":"/api"}},
  {"name":"listener/l1","body":{"address":"127.0.0.1","port":8080}}],
 "removes":[]}
EOF
ctl apply "$WORK/batch.json"
check_eq "apply exits 0" 0 "$RC"
check_eq "apply prints the one new version" "version 3" "$OUT"
check_eq "both resources of the batch carry its version" "3 3" \
	"$(curl -s "$PLANE_URL/v1/resources" | json '[.resources[] | select(.name=="route/r1" or .name=="listener/l1") | .version] | map(tostring) | join(" ")')"
ctl apply "$WORK/batch.json"
check_eq "the same batch again is no change" "0 version 3 (no change)" "$RC $OUT"
echo '{"upserts":[],"removes":[],"extra":1}' >"$WORK/bad-batch.json"
ctl apply "$WORK/bad-batch.json"
check_eq "a batch the plane refuses exits 1" 1 "$RC"
check_has "a refused batch prints the plane's error" "$ERR" "batch: unknown field 'extra'"
ctl apply
check_eq "apply without FILE exits 2" 2 "$RC"

# ---- ls -------------------------------------------------------------------
ctl ls
check_eq "ls exits 0" 0 "$RC"
check_eq "ls prints names and versions, aligned" "cluster/web 2
listener/l1 3
route/r1    3" "$OUT"
ctl ls listener/
check_eq "ls PREFIX filters" "listener/l1 3" "$OUT"
ctl ls nothing/
check_eq "ls with no match prints nothing and exits 0" "0 " "$RC $OUT"

# ---- rm -------------------------------------------------------------------
ctl rm cluster/web
check_eq "rm of a referenced resource exits 1" 1 "$RC"
check_has "rm of a referenced resource prints the plane's error" "$ERR" "route/r1 refers to it"
ctl rm route/r1
check_eq "rm exits 0 and prints the version" "0 version 4" "$RC $OUT"
ctl rm route/r1
check_eq "rm of an absent resource exits 1" 1 "$RC"
check_eq "rm of an absent resource says so" "tetherctl: no resource 'route/r1'" "$ERR"

# ---- --plane and TETHER_PLANE ---------------------------------------------
TETHER_PLANE=$DEAD_URL ctl --plane "$PLANE_URL" ls listener/
check_eq "--plane wins over TETHER_PLANE" "0 listener/l1 3" "$RC $OUT"
TETHER_PLANE=$PLANE_URL ctl --plane "$DEAD_URL" ls
check_eq "--plane to a dead plane fails even with a good TETHER_PLANE" 1 "$RC"
ctl ls --plane="$PLANE_URL/"
check_eq "--plane=URL after the command, trailing slash" "0 2" "$RC $(echo "$OUT" | wc -l | tr -d ' ')"
TETHER_PLANE=$DEAD_URL ctl ls
check_eq "an unreachable plane exits 1" 1 "$RC"
check_has "an unreachable plane is named on stderr" "$ERR" "cannot reach the plane at $DEAD_URL: "
TETHER_PLANE=$DEAD_URL ctl_in '{}' put cluster/x
check_eq "put to an unreachable plane exits 1" 1 "$RC"

# ---- nodes ----------------------------------------------------------------
poll=$(curl -s "$PLANE_URL/v1/config?node=edge-1&version=0&labels=zone=eu,role=edge")
nonce=$(echo "$poll" | json .nonce)
pv=$(echo "$poll" | json .version)
long=$(printf 'nginx: [emerg] unknown directive "frob" in /etc/nginx/conf.d/web.conf:%s' "$(printf '%0200d' 0)")
curl -s -X POST "$PLANE_URL/v1/ack" --data "$(jq -cn --arg n "$nonce" --arg e "$long" \
	--argjson v "$pv" '{node:"edge-1",version:$v,nonce:$n,status:"nack",error:$e}')" >/dev/null
curl -s "$PLANE_URL/v1/config?node=edge-2&version=0" >/dev/null
ctl nodes
check_eq "nodes exits 0" 0 "$RC"
check_eq "nodes prints a header and one line per node" 3 "$(echo "$OUT" | wc -l | tr -d ' ')"
check_eq "the header names the columns" "NODE TARGET ACKED LAG CONNECTED KEY VIA LAST NACK LABELS" "$(echo "$OUT" | head -n 1 | tr -s ' ')"
line=$(echo "$OUT" | grep '^edge-1 ')
check_eq "a node's target and acked version, lag and connection" "edge-1 4 0 4 yes" "$(echo "$line" | awk '{print $1, $2, $3, $4, $5}')"
check_has "a node's last NACK is shown" "$line" 'v4: nginx: [emerg] unknown directive'
check_has "a long NACK is truncated for the table" "$line" '...'
check "a long NACK is not printed whole" test "${#line}" -lt 200
check_has "a node's labels are shown" "$line" "role=edge,zone=eu"
check_eq "a node without a key or a NACK shows -" "edge-2 - - -" "$(echo "$OUT" | grep '^edge-2 ' | awk '{print $1, $6, $7, $8}')"
ctl nodes --json
check_eq "nodes --json exits 0" 0 "$RC"
check_eq "nodes --json prints the plane's JSON" "$(curl -s "$PLANE_URL/v1/nodes" | jq -c '[.[] | {node, acked_version, last_nack}]')" \
	"$(echo "$OUT" | jq -c '[.[] | {node, acked_version, last_nack}]')"

# ---- rollout ---------------------------------------------------------------
ctl rollout status
check_eq "rollout status without a rollout exits 1" 1 "$RC"
check_has "rollout status prints the plane's error" "$ERR" "no rollout"
ctl rollout status --json
check_eq "rollout status --json without a rollout exits 1" 1 "$RC"
ctl rollout abort
check_eq "rollout abort without a rollout exits 1" 1 "$RC"
check_has "rollout abort prints the plane's error" "$ERR" "no rollout"

# ---- the admin token -------------------------------------------------------
printf '  s3cret-token-0123456789  \n' >"$WORK/token"
printf 'wrong-token-0123456789\n' >"$WORK/wrong"
start_plane q --admin-token-file "$WORK/token"
export TETHER_PLANE=$PLANE_URL
ctl_in '{"path":"a.txt","content":"hi"}' put file/a
check_eq "a write without a token is refused (1)" 1 "$RC"
check_has "the refusal asks for the token" "$ERR" "Authorization: Bearer"
ctl_in '{"path":"a.txt","content":"hi"}' --token-file "$WORK/wrong" put file/a
check_eq "a write with a wrong token is refused (1)" 1 "$RC"
ctl_in '{"path":"a.txt","content":"hi"}' --token-file "$WORK/token" put file/a
check_eq "--token-file sends the trimmed token" "0 version 1" "$RC $OUT"
TETHER_TOKEN_FILE=$WORK/token ctl rm file/a
check_eq "TETHER_TOKEN_FILE works too" "0 version 2" "$RC $OUT"
TETHER_TOKEN_FILE=$WORK/wrong ctl --token-file "$WORK/token" apply "$WORK/batch.json"
check_eq "--token-file wins over TETHER_TOKEN_FILE (the write passes auth)" \
	"tetherctl: route/r1: unknown cluster 'web'" "$ERR"
ctl --token-file "$WORK/no-token" ls
check_eq "a missing token file exits 1" 1 "$RC"
check_has "a missing token file is named" "$ERR" "cannot read token file '$WORK/no-token'"
: >"$WORK/empty-token"
ctl --token-file "$WORK/empty-token" ls
check_eq "an empty token file exits 1" 1 "$RC"
ctl --token-file "$WORK/token" ls
check_eq "reads work with a token" 0 "$RC"

# ---- status of the local agent ----------------------------------------------
mkdir -p "$WORK/state"
cat >"$WORK/state/status.json" <<'EOF'
{"node":"web-1","version":12,"state":"degraded","last_error":"check failed:\nnginx: [emerg] unknown directive","last_sync":1700000000,"transport":"sse"}
EOF
ctl status --state-dir "$WORK/state"
check_eq "status exits 0" 0 "$RC"
check_has "status shows the node" "$OUT" "node:       web-1"
check_has "status shows the version" "$OUT" "version:    12"
check_has "status shows the state" "$OUT" "state:      degraded"
check_has "status shows the last error, lines aligned" "$OUT" "last error: check failed:
            nginx: [emerg] unknown directive"
check_has "status shows the last sync as a local time" "$OUT" "last sync:  $(date -d @1700000000 +%Y-%m-%dT%H:%M:%S%:z) ("
check_has "status shows other fields" "$OUT" "transport:  sse"
ctl status --state-dir "$WORK/state" --json
check_eq "status --json prints the file" "$(jq -c . "$WORK/state/status.json")" "$(echo "$OUT" | jq -c .)"
echo '{"node":"web-1","version":3,"state":"synced","last_error":null,"last_sync":null}' >"$WORK/state/status.json"
ctl status --state-dir "$WORK/state"
check_has "a null last error reads none" "$OUT" "last error: none"
check_has "a null last sync reads never" "$OUT" "last sync:  never"
TETHER_PLANE=$DEAD_URL ctl status --state-dir "$WORK/state"
check_eq "status does not need the plane" 0 "$RC"
ctl status --state-dir "$WORK/nowhere"
check_eq "status without a status.json exits 1" 1 "$RC"
check_has "status without a status.json names the file" "$ERR" "cannot read '$WORK/nowhere/status.json'"
echo '{"node":' >"$WORK/state/status.json"
ctl status --state-dir "$WORK/state"
check_eq "a malformed status.json exits 1" 1 "$RC"
ctl status --state-dir
check_eq "--state-dir without a directory exits 2" 2 "$RC"

done_testing
