#!/usr/bin/env bash
# t0965-sealed-fleet.sh: sealed secrets end to end (issue 26). An origin
# with --sealed-secrets, two relays (r1, and r2 behind r1), an nginx agent
# behind r2 serving TLS from a sealed key, and a files agent behind r1.
# tetherctl seals on this machine; the key's PEM body is then looked for in
# every byte the relays hold (their memory, data directories and caches),
# the origin's SQLite files, every log, and a backup: it is in none of
# them, and nginx serves with it. The same on an etcd-backed origin: no
# etcd value holds it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
need_cmd nginx node openssl python3 sqlite3

trap t_cleanup EXIT

# grep_mem PID NEEDLE: 0 when NEEDLE is anywhere in the readable memory of
# PID (read through /proc/PID/mem, region by region)
grep_mem() {
	python3 - "$1" "$2" <<'EOF'
import re, sys
pid, needle = int(sys.argv[1]), sys.argv[2].encode()
found = False
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", line)
        lo, hi, perm = int(m.group(1), 16), int(m.group(2), 16), m.group(3)
        if perm[0] != "r" or "[vvar]" in line or "[vsyscall]" in line:
            continue
        if hi - lo > (1 << 30):   # a sanitizer's shadow: reserved, never data
            continue
        pos, tail = lo, b""
        while pos < hi and not found:
            try:
                mem.seek(pos)
                chunk = mem.read(min(hi - pos, 1 << 24))
            except (OSError, ValueError, OverflowError):
                break
            if not chunk:
                break
            found = needle in tail + chunk
            tail = chunk[-len(needle):]
            pos += len(chunk)
        if found:
            break
sys.exit(0 if found else 1)
EOF
}
# mem_readable PID: the probe works at all (a region we know is there)
mem_readable() {
	grep_mem "$1" "tether"
}
# in_files NEEDLE PATH...: 0 when some file under the paths holds NEEDLE
in_files() {
	local n=$1
	shift
	grep -rqaF -- "$n" "$@" 2>/dev/null
}
served_fingerprint() {
	openssl s_client -connect "127.0.0.1:$1" -servername localhost </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 2>/dev/null
}

# ---- keys and a certificate ------------------------------------------------------
"$CTL_BIN" keygen "$WORK/sign" >/dev/null || bail "keygen failed"
"$CTL_BIN" keygen --recovery "$WORK/rec" >/dev/null || bail "keygen --recovery failed"
check "keygen --recovery writes the secret 0600" test "$(stat -c %a "$WORK/rec")" = 600
check "keygen --recovery writes RECOVERY.pub" grep -q '^tether-x25519 ' "$WORK/rec.pub"
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext subjectAltName=DNS:localhost -days 1 \
	-keyout "$WORK/tls.key" -out "$WORK/tls.crt" >/dev/null 2>&1 || bail "openssl cannot make a certificate"
jq -n --rawfile cert "$WORK/tls.crt" --rawfile key "$WORK/tls.key" '{cert:$cert, key:$key}' >"$WORK/site.json"
# the needles: two lines from the middle of the key's PEM body
NEEDLE1=$(sed -n 5p "$WORK/tls.key")
NEEDLE2=$(sed -n 20p "$WORK/tls.key")
WANT_FP=$(openssl x509 -in "$WORK/tls.crt" -noout -fingerprint -sha256)

# ---- origin, r1, r2 ----------------------------------------------------------------
start_plane origin --heartbeat 1 --signing-key "$WORK/sign" --sealed-secrets "$WORK/rec.pub"
ORIGIN=$PLANE_URL
ORIGIN_PID=$PLANE_PID
start_plane r1 --upstream "$ORIGIN" --relay-id r1 --heartbeat 1
R1=$PLANE_URL
R1_PID=$PLANE_PID
start_plane r2 --upstream "$R1" --relay-id r2 --heartbeat 1
R2=$PLANE_URL
R2_PID=$PLANE_PID
PLANE_URL=$ORIGIN

free_port LTLS
free_port MARK
OUT=$WORK/ng.out
write_nginx_conf "$OUT"
start_nginx
"$CTL_BIN" keygen "$WORK/unused" >/dev/null
start_agent ng --plane "$R2" --consumer nginx --pidfile "$WORK/nginx.pid" --marker "127.0.0.1:$MARK" \
	--trust "$WORK/sign.pub" --reload-timeout 5 --backoff-min 0.1 --backoff-max 1
start_agent fl --plane "$R1" --trust "$WORK/sign.pub" --backoff-min 0.1 --backoff-max 1
key_of() {
	curl -sS "$ORIGIN/v1/nodes/$1" | jq -r '.key_id // empty'
}
check "the nginx agent behind r2 registers its key at the origin, through both relays" wait_until 20 sh -c "curl -sS '$ORIGIN/v1/nodes/ng' | jq -e '.key_id | length == 16'"
check "the files agent behind r1 registers its key" wait_until 20 sh -c "curl -sS '$ORIGIN/v1/nodes/fl' | jq -e '.key_id | length == 16'"
KNG=$(key_of ng)
check "the nginx agent's node.key is 0600" test "$(stat -c %a "$WORK/ng.state/node.key")" = 600
check "tetherctl nodes shows each node's key id" sh -c "'$CTL_BIN' --plane '$ORIGIN' nodes | grep -w ng | grep -qw '$KNG'"

# ---- a sealed secret serves -----------------------------------------------------------
check "tetherctl put --seal seals on this machine and writes" ctl put secret/site "$WORK/site.json" --seal
ctl apply - >/dev/null <<EOF || bail "cannot write the listener"
{"upserts":[
 {"name":"cluster/none","body":{"endpoints":[{"address":"127.0.0.1","port":9}]}},
 {"name":"listener/tls","body":{"address":"127.0.0.1","port":$LTLS,"tls":{"secret":"site"}}},
 {"name":"route/tls","body":{"listener":"tls","host":"*","path":"/","cluster":"none"}}
]}
EOF
V=$(plane_version)
check "both agents apply version $V" wait_until 30 all_at "$V" ng fl
check "nginx serves TLS with the sealed certificate" wait_until 10 sh -c "[ \"\$(openssl s_client -connect 127.0.0.1:$LTLS </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256)\" = '$WANT_FP' ]"
check "the rendered key file is 0600" sh -c "find '$OUT/secrets/' -type f -perm 0600 | grep -q ."
check "secrets status: secret/site is sealed and misses no node" sh -c \
	"'$CTL_BIN' --plane '$ORIGIN' secrets status | awk '\$1 == \"secret/site\"' | tr -s ' ' | grep -Eqx 'secret/site [0-9]+ yes -'"

# ---- where the key is not ----------------------------------------------------------
absent_mem() {
	! grep_mem "$@"
}
absent_files() {
	local n=$1
	shift
	! grep -rqaF -- "$n" "$@"
}
check "the probe reads a relay's memory (it finds a string r1 holds)" grep_mem "$R1_PID" "tether-plane"
# a backup: the store file copied by SQLite itself, and an export
sqlite3 "$WORK/origin.data/"*.db ".backup '$WORK/backup.db'" 2>"$WORK/backup.err" ||
	cp "$WORK/origin.data/"*.db "$WORK/backup.db"
check "a backup of the origin's store was made" test -s "$WORK/backup.db"
check "tetherctl export writes the secret (sealed)" ctl export "$WORK/export"
check "the exported secret holds the envelope" jq -e '.sealed.ct | length > 100' "$WORK/export/secret/site.json"
for n in 1 2; do
	nd=NEEDLE$n
	ndl=${!nd}
	check "r1's memory does not hold the key (line $n)" absent_mem "$R1_PID" "$ndl"
	check "r2's memory does not hold the key (line $n)" absent_mem "$R2_PID" "$ndl"
	check "the origin's memory does not hold the key (line $n)" absent_mem "$ORIGIN_PID" "$ndl"
	check "no relay's data directory holds it (line $n)" absent_files "$ndl" "$WORK/r1.data" "$WORK/r2.data"
	check "the origin's data directory (SQLite, WAL) does not hold it (line $n)" absent_files "$ndl" "$WORK/origin.data"
	check "the backup and the export do not hold it (line $n)" absent_files "$ndl" "$WORK/backup.db" "$WORK/export"
	check "no plane log holds it (line $n)" absent_files "$ndl" "$WORK/origin.log" "$WORK/r1.log" "$WORK/r2.log"
	check "the agents' state (last-good, wraps) does not hold it (line $n)" absent_files "$ndl" "$WORK/ng.state" "$WORK/fl.state"
	check "the agents' logs do not hold it (line $n)" absent_files "$ndl" "$WORK/ng.log" "$WORK/fl.log"
done
check "the key is where nginx reads it (the probe of the file search works)" sh -c "grep -rqF -- '$NEEDLE1' '$OUT/secrets/'"

# ---- a plaintext write is refused ------------------------------------------------------
# (after the memory checks: the refused body passed through the origin's memory)
check_eq "a plaintext secret is refused with 422" 422 \
	"$(curl -sS -o "$WORK/plain.out" -w '%{http_code}' -X PUT --data-binary @"$WORK/site.json" "$ORIGIN/v1/resources/secret/site")"
check "its error says how to seal it" grep -q -- '--seal' "$WORK/plain.out"
check "the refused write changed nothing (version $V)" test "$(plane_version)" = "$V"
check "the refusal logged no part of the key" absent_files "$NEEDLE1" "$WORK/origin.log" "$WORK/plain.out"
check "nor did it reach the store" absent_files "$NEEDLE1" "$WORK/origin.data"

# ---- an etcd-backed origin: no etcd value holds the key -------------------------------
. "$(dirname "$0")/lib-etcd.sh"
etcd_cluster_start 1
start_plane eorigin --store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix /t0965/ --sealed-secrets "$WORK/rec.pub"
EORIGIN=$PLANE_URL
check "put --seal on the etcd origin" ctl put secret/site "$WORK/site.json" --seal
# every key and value of the cluster: the range from "\0" to "\0" is all
etcdv3 1 /v3/kv/range '{"key":"AA==","range_end":"AA=="}' >"$WORK/etcd-all.json"
jq -r '.kvs[] | .key, .value' "$WORK/etcd-all.json" | while read -r b; do echo "$b" | base64 -d; echo; done >"$WORK/etcd-all.txt"
check "etcd holds the sealed secret" grep -q '"sealed"' "$WORK/etcd-all.txt"
check "no etcd value holds the key (line 1)" absent_files "$NEEDLE1" "$WORK/etcd-all.txt"
check "no etcd value holds the key (line 2)" absent_files "$NEEDLE2" "$WORK/etcd-all.txt"
check "the etcd origin's memory does not hold it" absent_mem "$PLANE_PID" "$NEEDLE1"

sanitizer_check
done_testing
