#!/usr/bin/env bash
# t0100-plane-api.sh: the admin API's happy paths against the real plane:
# put, get, list, delete, batch, versions, no-op writes, references.
. "$(dirname "$0")/lib.sh"

start_plane p

check_eq "empty store is at version 0" 0 "$(curl -s "$PLANE_URL/healthz" | json .version)"

out=$(put cluster/web '{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9001,"weight":2}]}')
check_eq "first put makes version 1" 1 "$(echo "$out" | json .version)"
check_eq "first put reports a change" true "$(echo "$out" | json .changed)"

out=$(put cluster/web '{"endpoints":[{"weight":2,"port":9001,"address":"127.0.0.1"}],"lb":"round_robin"}')
check_eq "same content in another key order makes no version" "1 false" "$(echo "$out" | json '"\(.version) \(.changed)"')"

out=$(curl -s "$PLANE_URL/v1/resources/cluster/web")
check_eq "get returns name, version and body" "cluster/web 1 9001" \
	"$(echo "$out" | json '"\(.name) \(.version) \(.body.endpoints[0].port)"')"

check_eq "a body with an unknown field is refused (422) by default" 422 \
	"$(api_status PUT /v1/resources/cluster/web --data '{"endpoints":[],"lb":"least_conn","x-new":{"a":1}}')"
check_eq "... naming it and the fields known (t0987 covers --allow-unknown-fields)" \
	"cluster/web: unknown field 'x-new' (known: endpoints, lb, health, keepalive, snippet)" \
	"$(curl -s -X PUT --data '{"endpoints":[],"x-new":1}' "$PLANE_URL/v1/resources/cluster/web" | json .error)"
out=$(put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9001}],"lb":"least_conn"}')
check_eq "a changed body makes version 2" 2 "$(echo "$out" | json .version)"

check_eq "a route to a missing listener is refused with 422" 422 \
	"$(api_status PUT /v1/resources/route/r1 --data '{"listener":"l1","cluster":"web"}')"
check_eq "the refusal names the missing reference" "route/r1: unknown listener 'l1'" \
	"$(curl -s -X PUT --data '{"listener":"l1","cluster":"web"}' "$PLANE_URL/v1/resources/route/r1" | json .error)"
check_eq "nothing was stored by the refused write" 404 "$(api_status GET /v1/resources/route/r1)"
check_eq "the version did not move" 2 "$(curl -s "$PLANE_URL/healthz" | json .version)"

out=$(curl -s -X POST "$PLANE_URL/v1/batch" --data '{"upserts":[
	{"name":"route/r1","body":{"listener":"l1","cluster":"web","host":"example.com","path":"/api"}},
	{"name":"listener/l1","body":{"address":"127.0.0.1","port":8080}}],"removes":[]}')
check_eq "a batch whose route comes before its listener is one version" 3 "$(echo "$out" | json .version)"
check_eq "both resources of the batch carry its version" "3 3" \
	"$(curl -s "$PLANE_URL/v1/resources" | json '[.resources[] | select(.name=="route/r1" or .name=="listener/l1") | .version] | map(tostring) | join(" ")')"

check_eq "removing a referenced cluster is refused" 422 "$(api_status DELETE /v1/resources/cluster/web)"
check_eq "the refusal names the referrer" "cannot remove cluster/web: route/r1 refers to it" \
	"$(curl -s -X DELETE "$PLANE_URL/v1/resources/cluster/web" | json .error)"

out=$(curl -s -X POST "$PLANE_URL/v1/batch" --data '{"removes":["route/r1","cluster/web"]}')
check_eq "removing the referrer and the cluster together works" 4 "$(echo "$out" | json .version)"
check_eq "a removed resource is gone" 404 "$(api_status GET /v1/resources/cluster/web)"
check_eq "deleting an absent resource is 404" 404 "$(api_status DELETE /v1/resources/cluster/web)"

check_eq "list by prefix" "listener/l1" "$(curl -s "$PLANE_URL/v1/resources?prefix=listener/" | json '[.resources[].name] | join(",")')"
check_eq "list carries the store version" 4 "$(curl -s "$PLANE_URL/v1/resources" | json .version)"

done_testing
