#!/usr/bin/env bash
# t0957-report-api.sh: the plane's side of traffic reports, and bad input
# of every kind: POST /v1/report records a node's traffic (GET /v1/nodes
# shows it, /metrics its sums); an ACK's "traffic" is recorded too; a
# report for an unknown node is 404; malformed JSON, a body that is not an
# object, a missing or wrong traffic member (errors above requests, a
# bucket out of range, a route name with a quote, a negative count) are
# refused with an error naming the field and change nothing (an ACK with
# good traffic and a wrong field records none of it); an oversized
# body is 413; GET is 405. On a secure plane a report needs the node's own
# credential (401 anonymous, 403 another node's token).
. "$(dirname "$0")/lib.sh"
need_cmd jq

start_plane p --heartbeat 1
report() { # report BODY: the status of POST /v1/report
	curl -sS -o "$WORK/resp" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$1" \
		"${CURL_OPTS[@]}" "$PLANE_URL/v1/report"
}
resp_says() {
	grep -q -- "$1" "$WORK/resp"
}
T='{"version":0,"gen":"g1","since":1000,"until":1010,"dropped":2,"routes":[{"route":"route/api","requests":100,"errors":7,"p50":1,"p99":2,"hist":[[10,93],[20,7]]}]}'

check_eq "a report for an unknown node is 404" 404 "$(report "{\"node\":\"a\",\"version\":0,\"traffic\":$T}")"
check "... saying to connect first" resp_says "connect first"
curl -s -o /dev/null "$PLANE_URL/v1/config?node=a&version=0"   # node a is known now (a poll)
check_eq "a report of node a is recorded" 200 "$(report "{\"node\":\"a\",\"version\":0,\"traffic\":$T}")"
check "... answering recorded" resp_says '"recorded"'
check "GET /v1/nodes/a shows the traffic per route" sh -c \
	"curl -s '$PLANE_URL/v1/nodes/a' | jq -e '.traffic.routes[0] | .route == \"route/api\" and .requests == 100 and .errors == 7'"
check "... with its window and generation" sh -c \
	"curl -s '$PLANE_URL/v1/nodes/a' | jq -e '.traffic | .since == 1000 and .until == 1010 and .gen == \"g1\" and .dropped == 2'"
check "... and a p99 the plane computed from the histogram (not the node's claim)" sh -c \
	"curl -s '$PLANE_URL/v1/nodes/a' | jq -e '.traffic.routes[0].p99 > 50'"
check "/metrics shows node a's requests" sh -c "curl -s '$PLANE_URL/metrics' | grep -q '^tether_node_traffic_requests{node=\"a\"} 100\$'"
check "/metrics shows node a's errors" sh -c "curl -s '$PLANE_URL/metrics' | grep -q '^tether_node_traffic_errors{node=\"a\"} 7\$'"

# ---- bad input: refused, naming the field, nothing changed ---------------------------
bad() { # bad DESC STATUS WANT BODY
	check_eq "$1 is $2" "$2" "$(report "$4")"
	check "... saying '$3'" resp_says "$3"
}
bad "malformed JSON" 400 "report:" '{"node":"a",'
bad "a body that is not an object" 422 "must be a JSON object" '[1,2]'
bad "a report without a node" 422 "node must be" "{\"version\":0,\"traffic\":$T}"
bad "a node id with a slash" 422 "node must be" "{\"node\":\"../a\",\"version\":0,\"traffic\":$T}"
bad "a report whose version is not its traffic's" 422 "version 5, but its traffic is of version 0" \
	"{\"node\":\"a\",\"version\":5,\"traffic\":$T}"
bad "a report without traffic" 422 "traffic is missing" '{"node":"a","version":0}'
bad "a version that is a string" 422 "version must be" "{\"node\":\"a\",\"version\":\"0\",\"traffic\":$T}"
bad "traffic that is a string" 422 "traffic must be an object" '{"node":"a","version":0,"traffic":"x"}'
bad "more errors than requests" 422 "exceed requests" \
	'{"node":"a","version":0,"traffic":{"version":0,"since":1,"until":2,"routes":[{"route":"r","requests":1,"errors":2,"hist":[]}]}}'
bad "a bucket out of range" 422 "hist\[0\]" \
	'{"node":"a","version":0,"traffic":{"version":0,"since":1,"until":2,"routes":[{"route":"r","requests":1,"errors":0,"hist":[[40,1]]}]}}'
bad "a route name with a quote" 422 "routes\[0\].route" \
	'{"node":"a","version":0,"traffic":{"version":0,"since":1,"until":2,"routes":[{"route":"r\"x","requests":1,"errors":0,"hist":[]}]}}'
bad "a negative count" 422 "non-negative" \
	'{"node":"a","version":0,"traffic":{"version":0,"since":1,"until":2,"routes":[{"route":"r","requests":-1,"errors":0,"hist":[]}]}}'
bad "a window that ends before it starts" 422 "since <= until" \
	'{"node":"a","version":0,"traffic":{"version":0,"since":5,"until":2,"routes":[]}}'
check "after every refusal node a's traffic is what it was" sh -c \
	"curl -s '$PLANE_URL/v1/nodes/a' | jq -e '.traffic.routes[0].requests == 100 and .traffic.until == 1010'"
head -c 300000 /dev/zero | tr '\0' ' ' >"$WORK/big"
check_eq "an oversized body is 413" 413 "$(curl -sS -o /dev/null -w '%{http_code}' --data-binary @"$WORK/big" "$PLANE_URL/v1/report")"
check_eq "GET /v1/report is 405" 405 "$(curl -sS -o /dev/null -w '%{http_code}' "$PLANE_URL/v1/report")"

# ---- an ACK's traffic (a poll's nonce names its version: p<version>-<base>) --------------
T2='{"version":0,"gen":"g2","since":2000,"until":2001,"routes":[{"route":"route/web","requests":3,"errors":0,"hist":[[5,3]]}]}'
ACKBAD="{\"node\":\"a\",\"version\":0,\"nonce\":\"p0-0\",\"status\":\"ack\",\"traffic\":{\"version\":0}}"
check_eq "an ACK with broken traffic is 422" 422 "$(curl -sS -o "$WORK/resp" -w '%{http_code}' --data-binary "$ACKBAD" "$PLANE_URL/v1/ack")"
check "... naming the field" resp_says "ack: traffic.since"
ACKBAD2="{\"node\":\"a\",\"version\":0,\"nonce\":\"p0-0\",\"status\":\"ack\",\"healthy\":\"yes\",\"traffic\":$T2}"
check_eq "an ACK with good traffic but a wrong field is 422" 422 "$(curl -sS -o "$WORK/resp" -w '%{http_code}' --data-binary "$ACKBAD2" "$PLANE_URL/v1/ack")"
check "... and its traffic is not recorded" sh -c \
	"curl -s '$PLANE_URL/v1/nodes/a' | jq -e '.traffic.gen == \"g1\"'"
ACK="{\"node\":\"a\",\"version\":0,\"nonce\":\"p0-0\",\"status\":\"ack\",\"traffic\":$T2}"
code=$(curl -sS -o "$WORK/resp" -w '%{http_code}' --data-binary "$ACK" "$PLANE_URL/v1/ack")
check "an ACK carrying traffic is taken ($code: $(cat "$WORK/resp"))" test "$code" = 200
check "the ACK's traffic is the node's last" sh -c \
	"curl -s '$PLANE_URL/v1/nodes/a' | jq -e '.traffic.gen == \"g2\" and .traffic.routes[0].route == \"route/web\"'"

# ---- a secure plane: the node's own credential ------------------------------------------
stop_pid "$PLANE_PID"
head -c 32 /dev/urandom | base64 | tr -d '/+=' >"$WORK/admin.tok"
SECURE=1 start_plane s --admin-token-file "$WORK/admin.tok" --heartbeat 1
export TETHER_TOKEN_FILE=$WORK/admin.tok
ctl token create --node a >"$WORK/a.tok" || bail "cannot create a node token"
ctl token create --node b >"$WORK/b.tok" || bail "cannot create a node token"
curl -s -o /dev/null -H "Authorization: Bearer $(cat "$WORK/a.tok")" "$PLANE_URL/v1/config?node=a&version=0"
BODY="{\"node\":\"a\",\"version\":0,\"traffic\":$T}"
check_eq "an anonymous report is 401" 401 "$(report "$BODY")"
CURL_OPTS=(-H "Authorization: Bearer $(cat "$WORK/b.tok")")
check_eq "a report for node a with node b's token is 403" 403 "$(report "$BODY")"
CURL_OPTS=(-H "Authorization: Bearer $(cat "$WORK/a.tok")")
check_eq "node a's own token is taken" 200 "$(report "$BODY")"
CURL_OPTS=()
check "no token appears in the plane's log" sh -c "! grep -qF \"\$(cat '$WORK/a.tok')\" '$PLANE_LOG' && ! grep -qF \"\$(cat '$WORK/admin.tok')\" '$PLANE_LOG'"

done_testing
