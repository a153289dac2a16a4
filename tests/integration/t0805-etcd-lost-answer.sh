#!/usr/bin/env bash
# t0805-etcd-lost-answer.sh: a commit that reached etcd but whose answer was
# lost (a proxy forwards the txn and swallows etcd's answer) is sent again to
# the next endpoint; that attempt fails its compare on the commit's own
# version. The plane must see that its first attempt landed: the write is
# answered as stored and changed, stored once, and not made again.
# (bench/nemesis.sh found the write made twice, undoing writes between.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

[ -x "$ETCD_BIN" ] || skip_all "etcd is not installed (Debian's etcd-server; scripts/deps installs it)"
need_cmd jq curl node

etcd_cluster_start 1
# the plane's 1st txn at start sets the history pin; the 2nd is the first
# write; the 3rd, the second write, reaches etcd and its answer is lost
start_tool lost blackhole-proxy.mjs --target "127.0.0.1:${ETCD_CLIENT[1]}" --match /v3/kv/txn --nth 3
start_plane a --store etcd --etcd "http://127.0.0.1:$TOOL_PORT,http://127.0.0.1:${ETCD_CLIENT[1]}" \
	--etcd-prefix /t0805/
put file/one '{"path":"one.txt","content":"1\n"}' >"$WORK/one.out"
check_eq "the first write makes version 1" '{"version":1,"changed":true}' "$(cat "$WORK/one.out")"
put file/two '{"path":"two.txt","content":"2\n"}' >"$WORK/two.out"
check "the proxy swallowed the answer to the second write's txn" grep -q "swallowed" "$WORK/lost.log"
check_eq "the second write, its answer lost, is answered stored and changed at version 2" \
	'{"version":2,"changed":true}' "$(cat "$WORK/two.out")"
check "... the plane saying its first attempt landed" grep -q "version 2 landed at revision .* stored once" "$PLANE_LOG"
key_b64() { printf %s "$1" | base64 -w0; }
kv() { etcdv3 1 /v3/kv/range "{\"key\":\"$(key_b64 "$1")\"}" | jq -r ".kvs[0].$2 // empty"; }
check_eq "etcd's version key is 2" 2 "$(kv /t0805/version value | base64 -d)"
check_eq "... and was written twice in all (versions 1 and 2, nothing more)" 2 "$(kv /t0805/version version)"
check_eq "file/two was stored once" 1 "$(kv /t0805/res/file/two version)"
check_eq "the plane serves version 2" 2 "$(curl -fsS "$PLANE_URL/v1/resources" | jq -r .version)"
put file/three '{"path":"three.txt","content":"3\n"}' >"$WORK/three.out"
check_eq "a write after it makes version 3" '{"version":3,"changed":true}' "$(cat "$WORK/three.out")"

done_testing
