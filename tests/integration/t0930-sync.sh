#!/usr/bin/env bash
# t0930-sync.sh: tetherctl sync DIR and export DIR against the real plane:
# create, change and prune as one version with --message; --dry-run's diff,
# its node counts (subscriptions from polls, kept across a restart), colours on a terminal (not
# with NO_COLOR) and exit codes 0/3; a batch
# whose base moved (--base, or a write landing between sync's read and its
# batch, held by a proxy) is 409 and applies nothing; broken files (bad JSON,
# duplicate keys, a bad name, an unknown type, a symlink out of DIR, a
# field the plane refuses) abort with the file named; an export and sync
# round trip; 1,000 files synced as one version; secrets: an admin syncs and
# exports them (0600), a reader's sync and export leave them out.
. "$(dirname "$0")/lib.sh"

[ -x "$CTL_BIN" ] || bail "no $CTL_BIN: build first"
need_cmd jq

# sync ARGS...: runs tetherctl; sets RC, OUT and ERR.
run() {
	"$CTL_BIN" --plane "$PLANE_URL" "$@" >"$WORK/ctl.out" 2>"$WORK/ctl.err" </dev/null
	RC=$?
	OUT=$(cat "$WORK/ctl.out")
	ERR=$(cat "$WORK/ctl.err")
}

# check_has DESCRIPTION TEXT PATTERN
check_has() {
	case $2 in
	*"$3"*) ok "$1" ;;
	*) not_ok "$1"; diag "expected to find: $3"; diag "in: $2" ;;
	esac
}

body() {
	curl -sS "$PLANE_URL/v1/resources/$1" | jq -c .body
}

names() {
	curl -sS "$PLANE_URL/v1/resources?bodies=0" | jq -r '[.resources[].name] | join(" ")'
}

start_plane p
D=$WORK/desired
mkdir -p "$D/cluster" "$D/route" "$D/listener"
cat >"$D/cluster/web.json" <<'J'
{ "lb": "round_robin",
  "endpoints": [ { "address": "10.0.0.1", "port": 80 } ] }
J
echo '{"address":"127.0.0.1","port":8080}' >"$D/listener/l1.json"
echo '{"listener":"l1","cluster":"web","host":"*","path":"/"}' >"$D/route/r1.json"
echo 'not part of the layout' >"$D/README"

# ---- dry run on an empty plane: changes, exit 3, nothing applied -----------
v0=$(plane_version)
run sync "$D" --dry-run
check_eq "dry-run with changes exits 3" 3 "$RC"
check_has "dry-run shows a create" "$OUT" "+ create cluster/web ($D/cluster/web.json)"
check_has "dry-run shows the body" "$OUT" '+  "lb": "round_robin"'
check_has "dry-run sums up" "$OUT" "3 changes against version $v0: 3 to create, 0 to change, 0 to delete"
check_has "README is skipped with a warning" "$ERR" "skipping '$D/README'"
check_eq "dry-run applied nothing" "$v0" "$(plane_version)"
case $OUT in *$'\033['*) not_ok "no colours when stdout is not a terminal" ;; *) ok "no colours when stdout is not a terminal" ;; esac

# ---- create ---------------------------------------------------------------
run sync "$D" --message "first sync"
check_eq "sync exits 0" 0 "$RC"
v1=$(plane_version)
check_eq "one version for three creates" $((v0 + 1)) "$v1"
check_has "sync says what it did" "$OUT" "version $v1: 3 created, 0 changed, 0 deleted"
check_eq "the cluster is stored" '{"endpoints":[{"address":"10.0.0.1","port":80}],"lb":"round_robin"}' "$(body cluster/web)"
check_eq "the history records the sync's message and the three names" "first sync 3" \
	"$(curl -sS "$PLANE_URL/v1/history/$v1" | jq -r '"\(.message) \(.names | length)"')"
run sync "$D" --dry-run
check_eq "dry-run after a sync exits 0" 0 "$RC"
check_has "and says nothing to do" "$OUT" "nothing to do"
run sync "$D"
check_eq "a sync with nothing to do exits 0" 0 "$RC"
check_eq "and makes no version" "$v1" "$(plane_version)"

# formatting is not a change
printf '{\n\t"port": 8080,\n\t"address": "127.0.0.1"\n}\n' >"$D/listener/l1.json"
run sync "$D" --dry-run
check_eq "key order and white space are not changes" 0 "$RC"

# ---- nodes reached: two nodes poll with subscriptions -----------------------
curl -sS -o /dev/null "$PLANE_URL/v1/config?node=n-cluster&sub=cluster/"
curl -sS -o /dev/null "$PLANE_URL/v1/config?node=n-route&sub=route/"
curl -sS -o /dev/null "$PLANE_URL/v1/config?node=n-all"
check_eq "/v1/nodes shows each node's sub (sorted by id)" '"" "cluster/" "route/"' \
	"$(curl -sS "$PLANE_URL/v1/nodes" | jq -c '.[].sub' | paste -sd ' ')"

# a restarted plane still knows them (the subscription is kept with the node's record)
stop_pid "$PLANE_PID"
start_plane p --listen "127.0.0.1:$PLANE_PORT"
check_eq "after a restart /v1/nodes still shows each node's sub" '"" "cluster/" "route/"' \
	"$(curl -sS "$PLANE_URL/v1/nodes" | jq -c '.[].sub' | paste -sd ' ')"

# ---- change and prune --------------------------------------------------------
sed -i 's/10.0.0.1/10.0.0.2/' "$D/cluster/web.json"
put cluster/old '{"endpoints":[{"address":"10.9.9.9","port":1}]}' >/dev/null
v2=$(plane_version)
run sync "$D" --dry-run
check_eq "dry-run: a change, exit 3" 3 "$RC"
check_has "a change shows a line diff" "$OUT" "~ change cluster/web ($D/cluster/web.json): reaches 2 nodes"
check_has "the removed line" "$OUT" '-      "address": "10.0.0.1",'
check_has "the added line" "$OUT" '+      "address": "10.0.0.2",'
check_has "without --prune, the extra is kept" "$OUT" "1 resource on the plane is not in '$D' (kept; --prune deletes them)"
check_has "nodes reached in the sum" "$OUT" "1 change against version $v2: 0 to create, 1 to change, 0 to delete; reaching 2 of 3 nodes"
run sync "$D" --dry-run --prune
check_has "--prune: a delete" "$OUT" "- delete cluster/old: reaches 2 nodes"
check_has "--prune: the sum" "$OUT" "2 changes against version $v2: 0 to create, 1 to change, 1 to delete; reaching 2 of 3 nodes"
# colours on a terminal (script(1) gives tetherctl a pty), none with NO_COLOR
if command -v script >/dev/null 2>&1; then
	tty_out=$(script -qc "'$CTL_BIN' --plane '$PLANE_URL' sync '$D' --dry-run" /dev/null </dev/null)
	check_has "a terminal gets colours (a change in yellow)" "$tty_out" $'\033[33m~ change cluster/web\033[0m'
	check_has "a terminal gets colours (a removed line in red)" "$tty_out" $'\033[31m-      "address": "10.0.0.1",\033[0m'
	tty_out=$(NO_COLOR=1 script -qc "'$CTL_BIN' --plane '$PLANE_URL' sync '$D' --dry-run" /dev/null </dev/null)
	case $tty_out in
	*$'\033['*) not_ok "NO_COLOR: no colours on a terminal" ;;
	*) ok "NO_COLOR: no colours on a terminal" ;;
	esac
fi
run sync "$D" --prune --message "change and prune"
check_eq "sync --prune exits 0" 0 "$RC"
check_eq "change and prune: one version" $((v2 + 1)) "$(plane_version)"
check_eq "the change is stored" '"10.0.0.2"' "$(body cluster/web | jq -c '.endpoints[0].address')"
check_eq "the extra is deleted" "cluster/web listener/l1 route/r1" "$(names)"

# ---- a conflict: the plane moved since the version given ------------------------
v3=$(plane_version)
put cluster/other '{"endpoints":[{"address":"10.1.1.1","port":2}]}' >/dev/null
sed -i 's/10.0.0.2/10.0.0.3/' "$D/cluster/web.json"
run sync "$D" --base "$v3"
check_eq "a batch on a moved base exits 1" 1 "$RC"
check_has "it says someone wrote in between" "$ERR" "someone wrote in between"
check_eq "nothing applied" '"10.0.0.2"' "$(body cluster/web | jq -c '.endpoints[0].address')"
check_eq "the plane answers 409 to a stale base" 409 \
	"$(api_status POST /v1/batch --data-binary "{\"base\":$v3,\"upserts\":[{\"name\":\"cluster/x\",\"body\":{\"endpoints\":[]}}]}")"
check_eq "and applies nothing" "" "$(curl -sS "$PLANE_URL/v1/resources?bodies=0" | jq -r '.resources[] | select(.name == "cluster/x") | .name')"

# ---- a real race: a write lands between sync's read and its batch -----------------
# A proxy holds sync's POST /v1/batch until the test has written directly.
need_cmd python3
cat >"$WORK/hold.py" <<'PY'
import http.server, os, sys, time, urllib.error, urllib.request
upstream, held, release = sys.argv[1:4]
class H(http.server.BaseHTTPRequestHandler):
    def fwd(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if self.command == "POST" and self.path == "/v1/batch":
            open(held, "w").close()
            while not os.path.exists(release):
                time.sleep(0.02)
        req = urllib.request.Request(upstream + self.path, data=body, method=self.command)
        for k in ("Content-Type", "Authorization"):
            if self.headers.get(k):
                req.add_header(k, self.headers[k])
        try:
            r = urllib.request.urlopen(req)
            code, data = r.status, r.read()
        except urllib.error.HTTPError as e:
            code, data = e.code, e.read()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    do_GET = do_POST = do_PUT = do_DELETE = fwd
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print("listening", s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$WORK/hold.py" "$PLANE_URL" "$WORK/held" "$WORK/release" >"$WORK/hold.port" 2>"$WORK/hold.log" &
HOLD_PID=$!
track_pid "$HOLD_PID"
wait_until 10 grep -q '^listening ' "$WORK/hold.port" || bail "the holding proxy did not start"
HOLD_URL=http://127.0.0.1:$(awk '{print $2}' "$WORK/hold.port")
sed -i 's/10.0.0.3/10.0.0.5/' "$D/cluster/web.json"
vr=$(plane_version)
"$CTL_BIN" --plane "$HOLD_URL" sync "$D" --prune --message "raced" >"$WORK/race.out" 2>"$WORK/race.err" &
SYNC_PID=$!
wait_until 10 test -e "$WORK/held" || bail "sync's batch never reached the proxy"
put cluster/raced '{"endpoints":[{"address":"10.3.3.3","port":3}]}' >/dev/null
touch "$WORK/release"
wait "$SYNC_PID"
check_eq "a write between sync's read and its batch: exit 1" 1 "$?"
check_has "the plane's 409 is reported" "$(cat "$WORK/race.err")" "not $vr: someone wrote in between"
check_has "someone wrote in between, it says" "$(cat "$WORK/race.err")" "(someone wrote in between): nothing was applied; run sync again"
check_eq "nothing of the batch applied (the other write only)" $((vr + 1)) "$(plane_version)"
check_eq "the cluster is as before" '"10.0.0.2"' "$(body cluster/web | jq -c '.endpoints[0].address')"
stop_pid "$HOLD_PID"
sed -i 's/10.0.0.5/10.0.0.3/' "$D/cluster/web.json"
run sync "$D" --prune
check_eq "run again, it applies" 0 "$RC"
check_eq "the raced write and cluster/other are pruned" "cluster/web listener/l1 route/r1" "$(names)"

# ---- broken files abort before anything is sent -------------------------------
v4=$(plane_version)
broken() {   # broken DESCRIPTION FILE CONTENT EXPECTED-IN-STDERR
	local desc=$1 file=$2 content=$3 want=$4
	printf '%s' "$content" >"$file"
	run sync "$D" --prune
	check_eq "$desc: exit 1" 1 "$RC"
	check_has "$desc: the file is named" "$ERR" "$want"
	check_eq "$desc: nothing applied" "$v4" "$(plane_version)"
	rm -f "$file"
}
sed -i 's/10.0.0.3/10.0.0.4/' "$D/cluster/web.json"   # a change that must not go out
broken "bad JSON" "$D/cluster/bad.json" '{"endpoints": [' "'$D/cluster/bad.json'"
broken "duplicate keys" "$D/cluster/dup.json" '{"lb":"random","lb":"least_conn","endpoints":[]}' "'$D/cluster/dup.json'"
broken "not an object" "$D/cluster/arr.json" '[1,2]' "'$D/cluster/arr.json': cluster/arr must be a JSON object"
broken "a bad name" "$D/cluster/a b.json" '{}' "'$D/cluster/a b.json'"
broken "a field the plane refuses" "$D/cluster/port.json" '{"endpoints":[{"address":"10.0.0.9","port":70000}]}' \
	"'$D/cluster/port.json': cluster/port: endpoints[0].port"
mkdir "$D/clusters"
run sync "$D"
check_eq "an unknown type directory: exit 1" 1 "$RC"
check_has "an unknown type directory is named" "$ERR" "'$D/clusters': not a resource type"
rmdir "$D/clusters"
echo '{"endpoints":[]}' >"$WORK/outside.json"
ln -s "$WORK/outside.json" "$D/cluster/link.json"
run sync "$D"
check_eq "a symlink out of DIR: exit 1" 1 "$RC"
check_has "a symlink out of DIR is named" "$ERR" "'$D/cluster/link.json': a symlink that points out of the directory"
rm "$D/cluster/link.json"
check_eq "nothing applied by any broken sync" "$v4" "$(plane_version)"

# ---- usage -------------------------------------------------------------------
run sync
check_eq "sync without DIR: exit 2" 2 "$RC"
run sync "$D" --force
check_eq "export's option on sync: exit 2" 2 "$RC"
run sync "$D" --base x
check_eq "a bad --base: exit 2" 2 "$RC"

# ---- export and round trip -------------------------------------------------------
put file/motd '{"path":"motd","content":"hello\n","mode":"0644"}' >/dev/null
put .weird '{}' >/dev/null 2>&1   # (refused: not a name) nothing to export
E=$WORK/exported
run export "$E"
check_eq "export exits 0" 0 "$RC"
check_has "export says what it wrote" "$OUT" "exported 4 resources of version $(plane_version)"
check_eq "export writes the layout" "cluster/web.json file/motd.json listener/l1.json route/r1.json" \
	"$(cd "$E" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | paste -sd ' ')"
check_eq "pretty-printed, keys sorted, a trailing newline" \
	"$(printf '{\n  "address": "127.0.0.1",\n  "port": 8080\n}')" "$(cat "$E/listener/l1.json")"
check_eq "a trailing newline" "0a" "$(tail -c 1 "$E/listener/l1.json" | od -An -tx1 | tr -d ' ')"
run sync "$E" --dry-run --prune
check_eq "sync --dry-run --prune right after an export: nothing to do (exit 0)" 0 "$RC"
check_has "it says so" "$OUT" "nothing to do"
run export "$E"
check_eq "export into a non-empty directory is refused" 1 "$RC"
check_has "and says why" "$ERR" "is not empty"
rm "$E/file/motd.json"
echo '{"endpoints":[]}' >"$E/cluster/gone.json"
run export "$E" --force
check_eq "export --force exits 0" 0 "$RC"
check_eq "--force rewrites and removes stale files" "cluster/web.json file/motd.json listener/l1.json route/r1.json" \
	"$(cd "$E" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | paste -sd ' ')"

# ---- 1,000 files as one version ------------------------------------------------------
B=$WORK/bulk
mkdir -p "$B/cluster"
for i in $(seq 1 1000); do
	printf '{"endpoints":[{"address":"10.%d.%d.1","port":%d}]}\n' $((i / 256)) $((i % 256)) $((1000 + i)) \
		>"$B/cluster/c$i.json"
done
v5=$(plane_version)
start=$(date +%s%N)
run sync "$B" --message "a thousand"
ms=$((($(date +%s%N) - start) / 1000000))
check_eq "1,000 files: sync exits 0" 0 "$RC"
check_eq "1,000 files: one version" $((v5 + 1)) "$(plane_version)"
check_eq "1,000 files: all stored" 1000 "$(curl -sS "$PLANE_URL/v1/resources?prefix=cluster/c&bodies=0" | jq '.resources | length')"
diag "sync of 1,000 new files took ${ms} ms"
run sync "$B" --dry-run
check_eq "1,000 files: dry-run after it exits 0" 0 "$RC"

# ---- secrets: an admin syncs them, a reader's export and sync leave them out ----
stop_pid "$PLANE_PID"
head -c 32 /dev/urandom | base64 | tr -d '/+=' >"$WORK/admin.tok"
SECURE=1 start_plane s --admin-token-file "$WORK/admin.tok"
S=$WORK/secure
mkdir -p "$S/secret" "$S/listener"
pem_pair tls   # the plane parses a secret's certificate and key
printf '{"cert":"%s","key":"%s"}\n' "$PAIR_CERT" "$PAIR_KEY" >"$S/secret/tls.json"
echo '{"address":"127.0.0.1","port":8443,"tls":{"secret":"tls"}}' >"$S/listener/l2.json"
run --token-file "$WORK/admin.tok" sync "$S"
check_eq "an admin syncs a secret" 0 "$RC"
"$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.tok" token create --role reader >"$WORK/reader.tok"
run --token-file "$WORK/admin.tok" sync "$S" --dry-run --prune
check_eq "an admin's dry-run compares secrets in clear: nothing to do" 0 "$RC"
run --token-file "$WORK/reader.tok" sync "$S" --dry-run --prune
check_eq "a reader's dry-run: nothing to do (secrets left out)" 0 "$RC"
check_has "a reader is warned that secrets are left out" "$ERR" "redacts secrets for this token"
run --token-file "$WORK/reader.tok" export "$WORK/reader-export"
check_eq "a reader's export exits 0" 0 "$RC"
check_eq "a reader's export has no secret file" "listener/l2.json" \
	"$(cd "$WORK/reader-export" && find . -type f | sed 's|^\./||' | paste -sd ' ')"
run --token-file "$WORK/admin.tok" export "$WORK/admin-export"
check_eq "an admin's export writes the secret, mode 0600" 600 "$(stat -c %a "$WORK/admin-export/secret/tls.json")"
check_eq "the secret file holds the key in clear" "-----BEGIN PRIVATE KEY-----" \
	"$(jq -r .key "$WORK/admin-export/secret/tls.json" | head -n 1)"
run --token-file "$WORK/reader.tok" sync "$S" --message "not allowed"
check_eq "a reader's sync with nothing to do exits 0 (no batch sent)" 0 "$RC"
sed -i 's/8443/9443/' "$S/listener/l2.json"
run --token-file "$WORK/reader.tok" sync "$S"
check_eq "a reader's sync with a change is refused (403): exit 1" 1 "$RC"
check_has "it says the plane refused" "$ERR" "nothing was applied"

done_testing
