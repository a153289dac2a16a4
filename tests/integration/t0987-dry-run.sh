#!/usr/bin/env bash
# t0987-dry-run.sh: validation before anything is written (issue 28, 2).
# POST /v1/batch?dry_run=1 runs a write's checks (references, schema and
# unknown fields, guards, base, names, a secret's certificate and key) and
# stores nothing: 200 with what would change, or the 422 a write gets; a
# freeze does not refuse it and it says so. tetherctl sync --dry-run and
# put --dry-run ask it: exit 4 would be refused (the plane's reason),
# 3 would change, 0 nothing to do. Unknown fields are refused by default
# with the nearest known one; --allow-unknown-fields takes them. With
# --store etcd (the writer thread) a dry run stores nothing either.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-etcd.sh"

need_cmd jq
need_cmd openssl

# run ARGS...: tetherctl; RC, OUT, ERR
run() {
	"$CTL_BIN" --plane "$PLANE_URL" "$@" >"$WORK/ctl.out" 2>"$WORK/ctl.err" </dev/null
	RC=$?
	OUT=$(cat "$WORK/ctl.out")
	ERR=$(cat "$WORK/ctl.err")
}
# has DESCRIPTION TEXT PATTERN
has() {
	case $2 in
	*"$3"*) ok "$1" ;;
	*) not_ok "$1"; diag "expected to find: $3"; diag "in: $2" ;;
	esac
}
# dry BODY: POST /v1/batch?dry_run=1; the status, the answer in $WORK/answer
dry() {
	curl -sS -o "$WORK/answer" -w '%{http_code}' -X POST --data-binary "$1" "$PLANE_URL/v1/batch?dry_run=1"
}
answer() {
	jq -r "$1" "$WORK/answer"
}
history_count() {
	curl -sS "$PLANE_URL/v1/history" | jq '.versions | length'
}

start_plane p
put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9001,"weight":2}]}' >/dev/null
put listener/main '{"address":"127.0.0.1","port":8080}' >/dev/null
put guard/shrink '{"match":"cluster/web","max_shrink":0.5}' >/dev/null
V0=$(plane_version)
H0=$(history_count)
R0=$(metric tether_writes_refused_total)

# ---- the API -----------------------------------------------------------------------------------
check_eq "a dry run of a good batch: 200" 200 "$(dry '{"upserts":[{"name":"route/r1","body":{"listener":"main","cluster":"web"}},
	{"name":"cluster/web","body":{"endpoints":[{"address":"127.0.0.1","port":9001,"weight":2}]}}],"removes":["cluster/none"]}')"
check_eq "... says it is one, against the version, what would change (the same body and a missing remove do not)" \
	"true $V0 true route/r1=create" \
	"$(answer '"\(.dry_run) \(.version) \(.changed) \([.changes[] | "\(.name)=\(.change)"] | join(","))"')"
check_eq "... and stored nothing" "$V0 404" "$(plane_version) $(api_status GET /v1/resources/route/r1)"
check_eq "a route to a cluster that does not exist: the 422 a write gets" \
	"422 route/r2: unknown cluster 'nope'" \
	"$(dry '{"upserts":[{"name":"route/r2","body":{"listener":"main","cluster":"nope"}}]}') $(answer .error)"
real=$(curl -sS -X POST --data-binary '{"upserts":[{"name":"route/r2","body":{"listener":"main","cluster":"nope"}}]}' \
	"$PLANE_URL/v1/batch" | jq -r .error)
check_eq "... word for word the real write's refusal" "route/r2: unknown cluster 'nope'" "$real"
check_eq "a mistyped field: 422 with the nearest known one" \
	"422 cluster/web: endpoints[0]: unknown field 'wieght' (did you mean 'weight'?)" \
	"$(dry '{"upserts":[{"name":"cluster/web","body":{"endpoints":[{"address":"127.0.0.1","port":9001,"wieght":5}]}}]}') $(answer .error)"
check_eq "a guard crossed: 422 naming it" 422 \
	"$(dry '{"upserts":[{"name":"cluster/web","body":{"endpoints":[]}}]}')"
has "... the guard and the resource" "$(answer .error)" "guard/shrink"
check_eq "a bad name: 422" "422" "$(dry '{"removes":["cluster/a b"]}')"
check_eq "an old base: 409, as a write" 409 "$(dry "{\"base\":$((V0 - 1)),\"upserts\":[]}")"
check_eq "a delete of the listener (nothing refers to it yet): a change" \
	"200 listener/main=delete" "$(dry '{"removes":["listener/main"]}') $(answer '[.changes[] | "\(.name)=\(.change)"] | join(",")')"
check_eq "a PUT with ?dry_run=1 is a bad request, not a write" "400 404" \
	"$(api_status PUT '/v1/resources/route/r1?dry_run=1' --data '{"listener":"main","cluster":"web"}') $(api_status GET /v1/resources/route/r1)"
check_eq "dry_run=2 is a bad request" 400 \
	"$(curl -sS -o /dev/null -w '%{http_code}' -X POST --data '{}' "$PLANE_URL/v1/batch?dry_run=2")"

# a secret: the certificate parsed, the key matched
pem_pair a
A_CERT=$PAIR_CERT
A_KEY=$PAIR_KEY
pem_pair b
check_eq "a secret whose certificate is a PEM header and garbage: 422" \
	"422 secret/site: cert: not a PEM certificate" \
	"$(dry '{"upserts":[{"name":"secret/site","body":{"cert":"-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU@@@garbage\n-----END CERTIFICATE-----\n","key":"'"$A_KEY"'"}}]}') $(answer .error | cut -d'(' -f1 | sed 's/ $//')"
check_eq "a key that is not the certificate's: 422" \
	"422 secret/site: key: does not match cert" \
	"$(dry '{"upserts":[{"name":"secret/site","body":{"cert":"'"$A_CERT"'","key":"'"$PAIR_KEY"'"}}]}') $(answer .error | cut -d'(' -f1 | sed 's/ $//')"
check "... the key's text in no answer" sh -c "! grep -qF '$(sed -n 2p "$WORK/b.key" | cut -c 49-)' '$WORK/answer'"
check_eq "a matching pair: would create it" "200 secret/site=create" \
	"$(dry '{"upserts":[{"name":"secret/site","body":{"cert":"'"$A_CERT"'","key":"'"$A_KEY"'"}}]}') $(answer '[.changes[] | "\(.name)=\(.change)"] | join(",")')"
check_eq "the same refusals on a real write: a bad certificate" 422 \
	"$(api_status PUT /v1/resources/secret/site --data-binary '{"cert":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n","key":"'"$A_KEY"'"}')"
check_eq "... a mismatched key" 422 \
	"$(api_status PUT /v1/resources/secret/site --data-binary '{"cert":"'"$A_CERT"'","key":"'"$PAIR_KEY"'"}')"

check_eq "no dry run made a version or a history entry" "$V0 $H0" "$(plane_version) $(history_count)"
check_eq "dry runs are not counted as refused writes (the two real ones are)" "$((R0 + 3))" \
	"$(metric tether_writes_refused_total)"

# ---- a freeze does not refuse a dry run; it says the write would be ------------------------------
ctl freeze --until 1h --message "release week" >/dev/null || bail "cannot set a freeze"
check_eq "a frozen plane refuses a write (423)" 423 \
	"$(api_status PUT /v1/resources/route/r1 --data '{"listener":"main","cluster":"web"}')"
check_eq "a dry run on it: 200, naming the freeze" 200 \
	"$(dry '{"upserts":[{"name":"route/r1","body":{"listener":"main","cluster":"web"}}]}')"
has "... with the freeze's words" "$(answer .frozen)" "release week"
mkdir -p "$WORK/d/route"
echo '{"listener":"main","cluster":"web"}' >"$WORK/d/route/r1.json"
run sync "$WORK/d" --dry-run
check_eq "sync --dry-run while frozen: would change (exit 3)" 3 "$RC"
has "... with a note of the freeze" "$OUT" "note: "
ctl freeze --off >/dev/null || bail "cannot thaw"

# ---- tetherctl sync --dry-run ----------------------------------------------------------------------
D=$WORK/desired
mkdir -p "$D/cluster" "$D/listener" "$D/route"
echo '{"endpoints":[{"address":"127.0.0.1","port":9001,"weight":2}]}' >"$D/cluster/web.json"
echo '{"address":"127.0.0.1","port":8080}' >"$D/listener/main.json"
echo '{"listener":"main","cluster":"nope"}' >"$D/route/r1.json"
run sync "$D" --dry-run
check_eq "sync --dry-run of a route to a missing cluster: would be refused (exit 4)" 4 "$RC"
has "... the plane's reason, with its file" "$ERR" "'$D/route/r1.json': route/r1: unknown cluster 'nope'"
has "... said as a dry run" "$ERR" "the plane would refuse the batch (HTTP 422)"
has "... after the diff" "$OUT" "+ create route/r1"
run sync "$D"
check_eq "the real sync is refused as the dry run said (exit 1)" 1 "$RC"
echo '{"listener":"main","cluster":"web","hots":"a.example"}' >"$D/route/r1.json"
run sync "$D" --dry-run
check_eq "sync --dry-run of a mistyped field: exit 4" 4 "$RC"
has "... naming the field and the nearest" "$ERR" "route/r1: unknown field 'hots' (did you mean 'host'?)"
echo '{"listener":"main","cluster":"web","host":"a.example"}' >"$D/route/r1.json"
run sync "$D" --dry-run
check_eq "sync --dry-run of a good change: exit 3" 3 "$RC"
has "... checked by the plane" "$OUT" "the plane would take it"
check_eq "... nothing stored" "$V0" "$(plane_version)"
run sync "$D"
check_eq "the sync" 0 "$RC"
run sync "$D" --dry-run
check_eq "sync --dry-run with nothing to do: exit 0" 0 "$RC"
V1=$(plane_version)

# a reader's token: the diff, unchecked, said so
stop_pid "$PLANE_PID"
head -c 32 /dev/urandom | base64 | tr -d '/+=' >"$WORK/admin.tok"
SECURE=1 start_plane p --admin-token-file "$WORK/admin.tok"
"$CTL_BIN" --plane "$PLANE_URL" --token-file "$WORK/admin.tok" token create --role reader >"$WORK/reader.tok" ||
	bail "cannot make a reader token"
echo '{"listener":"main","cluster":"web","host":"b.example"}' >"$D/route/r1.json"
run --token-file "$WORK/reader.tok" sync "$D" --dry-run
check_eq "a reader's sync --dry-run with a change: exit 3" 3 "$RC"
has "... warned that the plane did not check it" "$ERR" "the plane checks a dry run only for a token that may write"
run --token-file "$WORK/admin.tok" sync "$D" --dry-run
check_eq "an admin's: checked, exit 3" 3 "$RC"

# ---- tetherctl put --dry-run -------------------------------------------------------------------------
echo '{"endpoints":[{"address":"127.0.0.1","port":9001,"wieght":5}]}' >"$WORK/typo.json"
run --token-file "$WORK/admin.tok" put cluster/web "$WORK/typo.json" --dry-run
check_eq "put --dry-run of a mistyped field: exit 4" 4 "$RC"
has "... the plane's reason" "$ERR" "cluster/web: endpoints[0]: unknown field 'wieght' (did you mean 'weight'?)"
echo '{"endpoints":[{"address":"127.0.0.1","port":9001,"weight":5}]}' >"$WORK/good.json"
run --token-file "$WORK/admin.tok" put cluster/web "$WORK/good.json" --dry-run
check_eq "put --dry-run of a change: exit 3" 3 "$RC"
has "... would update it" "$OUT" "cluster/web: would update it against version $V1"
echo '{"endpoints":[{"address":"127.0.0.1","port":9001,"weight":2}]}' >"$WORK/same.json"
run --token-file "$WORK/admin.tok" put cluster/web "$WORK/same.json" --dry-run
check_eq "put --dry-run of the same body: exit 0" 0 "$RC"
printf '{"cert":"%s","key":"%s"}' "$A_CERT" "$PAIR_KEY" >"$WORK/mismatch.json"
run --token-file "$WORK/admin.tok" put secret/site "$WORK/mismatch.json" --dry-run
check_eq "put --dry-run of a mismatched pair: exit 4" 4 "$RC"
has "... secret/site: key: does not match" "$ERR" "secret/site: key: does not match cert ("
run --token-file "$WORK/admin.tok" put secret/site "$WORK/mismatch.json" --dry-run --seal
check_eq "put --dry-run --seal is a usage error" 2 "$RC"
check_eq "no put --dry-run stored anything" "$V1" "$(curl -sS -H "Authorization: Bearer $(cat "$WORK/reader.tok")" \
	"$PLANE_URL/healthz" | jq -r .version)"

# ---- --allow-unknown-fields: today's behaviour, for a migration --------------------------------------
stop_pid "$PLANE_PID"
start_plane q --allow-unknown-fields
check_eq "with --allow-unknown-fields an unknown field is taken" 200 \
	"$(api_status PUT /v1/resources/cluster/web --data '{"endpoints":[],"x-new":{"a":1}}')"
check_eq "... and kept" 1 "$(curl -sS "$PLANE_URL/v1/resources/cluster/web" | jq -r '.body["x-new"].a')"
check_eq "... a dry run takes it too" 200 "$(dry '{"upserts":[{"name":"cluster/web","body":{"endpoints":[],"wieght":1}}]}')"
check_eq "... a known field's checks still hold" 422 \
	"$(api_status PUT /v1/resources/cluster/web --data '{"endpoints":[],"lb":"fastest"}')"
check_eq "... and a secret's pair is still checked" 422 \
	"$(api_status PUT /v1/resources/secret/site --data-binary '{"cert":"'"$A_CERT"'","key":"'"$PAIR_KEY"'"}')"

# ---- --store etcd: a dry run through the writer thread stores nothing either --------------------
if [ -x "$ETCD_BIN" ]; then
	stop_pid "$PLANE_PID"
	etcd_cluster_start 1
	start_plane e --store etcd --etcd "$ETCD_ENDPOINTS" --etcd-prefix "/t0987-$$/" --heartbeat 0.5
	put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9001}]}' >/dev/null
	VE=$(plane_version)
	check_eq "etcd: a dry run of a change: 200, would update" "200 cluster/web=update" \
		"$(dry '{"upserts":[{"name":"cluster/web","body":{"endpoints":[{"address":"127.0.0.1","port":9002}]}}]}') $(answer '[.changes[] | "\(.name)=\(.change)"] | join(",")')"
	check_eq "etcd: ... nothing stored" "$VE 9001" \
		"$(plane_version) $(curl -sS "$PLANE_URL/v1/resources/cluster/web" | jq -r '.body.endpoints[0].port')"
	check_eq "etcd: a refused dry run: the write's 422" \
		"422 cluster/web: endpoints[0]: unknown field 'prot' (did you mean 'port'?)" \
		"$(dry '{"upserts":[{"name":"cluster/web","body":{"endpoints":[{"address":"127.0.0.1","prot":1}]}}]}') $(answer .error)"
	check_eq "etcd: the real write after them is the next version" "$((VE + 1))" \
		"$(put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9002}]}' | jq -r .version)"
else
	diag "etcd is not installed: the --store etcd part is not run"
fi

done_testing
