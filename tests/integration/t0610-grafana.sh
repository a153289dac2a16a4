#!/usr/bin/env bash
# t0610-grafana.sh: contrib/grafana/tether.json loads and asks for what
# exists. (1) Its structure is what Grafana's loader needs (unique panel ids,
# a 24-column grid without overlaps, datasource references to a declared
# Prometheus datasource variable, declared variables only); it type-checks
# against Grafana's own dashboard schema, the Dashboard type of the npm
# package @grafana/schema (generated from Grafana's dashboard kind), and
# each panel's options against that panel plugin's types, with the
# TypeScript compiler; every expression parses under Prometheus's PromQL
# grammar (@prometheus-io/lezer-promql). Those modules come pinned from
# scripts/npm-deps; without them those points are skipped, with the reason.
# (2) A real plane (signing) and a real agent (--trust, --metrics-file)
# apply changes, one of them NACKed; every metric an expression names has
# samples in the plane's /metrics or the agent's file (a histogram through
# its _bucket/_sum/_count series), and every label matched on is there.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || skip_all "node is not installed"
DASH=$TOP_SRCDIR/contrib/grafana/tether.json
CHECK=$TOOLS/grafana-check.mjs
[ -f "$DASH" ] || bail "no $DASH"
check "the dashboard is JSON" jq -e . "$DASH"

# the npm modules: $NODE_PATH, the tree's build/node_modules, else
# scripts/npm-deps into the work directory
need_mods() {
	local d m ok
	for d in ${NODE_PATH:+$(echo "$NODE_PATH" | tr ':' ' ')} "$TOP_SRCDIR/build/node_modules" "$WORK/node_modules"; do
		ok=1
		for m in "$@"; do
			[ -f "$d/$m/package.json" ] || ok=0
		done
		if [ $ok = 1 ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}
MODS=(typescript @grafana/schema @prometheus-io/lezer-promql @lezer/lr @lezer/highlight)
if ! need_mods "${MODS[@]}" >/dev/null; then
	"$TOP_SRCDIR/scripts/npm-deps" "$WORK" >"$WORK/npm.log" 2>&1 || diag "scripts/npm-deps failed: $(tail -n 3 "$WORK/npm.log")"
fi

# ---- (1) the dashboard --------------------------------------------------------------

if out=$(node "$CHECK" structure "$DASH" 2>&1); then
	ok "its structure is what Grafana's loader needs (${out#ok })"
else
	not_ok "its structure is what Grafana's loader needs"
	diag "$out"
fi

# a check that needs modules: ok, not ok, or a skip that says why
mod_check() {
	local desc=$1 mode=$2 dir
	shift 2
	if ! dir=$(need_mods "$@"); then
		ok "$desc # SKIP npm modules $* are not installed (scripts/npm-deps installs them)"
		return
	fi
	local out rc
	out=$(node "$CHECK" "$mode" "$DASH" "$dir" 2>&1)
	rc=$?
	case $rc in
	0)
		ok "$desc"
		diag "$out"
		;;
	3)
		ok "$desc # SKIP $(echo "$out" | sed -n 's/^missing //p' | head -n 1)"
		;;
	*)
		not_ok "$desc"
		diag "$out"
		;;
	esac
}
mod_check "it type-checks against @grafana/schema's Dashboard and its panels' option types" schema \
	typescript @grafana/schema
mod_check "every expression parses under Prometheus's PromQL grammar, naming the metrics the tokenizer finds" promql \
	@prometheus-io/lezer-promql @lezer/lr @lezer/highlight

if exprs=$(node "$CHECK" exprs "$DASH" 2>&1); then
	ok "every expression tokenizes"
else
	not_ok "every expression tokenizes"
	diag "$exprs"
fi
NAMES=$(echo "$exprs" | sed -n 's/^name //p')
diag "metric names in the dashboard's expressions ($(echo "$NAMES" | wc -l)):"
diag "$(echo "$NAMES" | awk '{printf "%-40s%s", $0, (NR % 3 ? "" : "\n")} END {if (NR % 3) print ""}')"
for m in tether_node_lag tether_nacks_total tether_rollout_stage_percent tetherd_apply_duration_seconds_bucket; do
	check "it charts $m" grep -qx "$m" <<<"$NAMES"
done

# ---- (2) a plane and an agent with everything the dashboard shows --------------------------

"$CTL_BIN" keygen "$WORK/key" >/dev/null || bail "keygen failed"
start_plane p --signing-key "$WORK/key" --heartbeat 1
# the check refuses a generation with BAD in it: a NACK with its stderr
start_agent n1 --consumer files --trust "$WORK/key.pub" --metrics-file "$WORK/n1.prom" \
	--check 'if grep -rqs BAD "$TETHER_STAGING"; then echo "refused: BAD" >&2; exit 1; fi'
put file/a '{"path":"a.txt","content":"one\n"}' >/dev/null
check "the agent applies version 1" wait_until 10 agent_at n1 1
put file/b '{"path":"b.txt","content":"two\n"}' >/dev/null
check "the agent applies version 2" wait_until 10 agent_at n1 2
put file/a '{"path":"a.txt","content":"BAD\n"}' >/dev/null
check "the agent NACKs version 3" wait_until 10 has_nack n1 3
put file/a '{"path":"a.txt","content":"three\n"}' >/dev/null
check "the agent applies version 4" wait_until 10 agent_at n1 4
check "the plane has the ACK of version 4" wait_until 10 node_acked n1 4
check "the agent's metrics file follows" wait_until 10 grep -q '^tetherd_version 4$' "$WORK/n1.prom"

curl -fsS "$PLANE_URL/metrics" >"$WORK/plane.prom" || bail "cannot scrape the plane"
cp "$WORK/n1.prom" "$WORK/agent.prom"
check_eq "the plane counted the NACK" 1 "$(awk '$1 == "tether_nacks_total" {print $2}' "$WORK/plane.prom")"
check_eq "the agent counted the NACK" 1 "$(awk '$1 == "tetherd_pushes_rejected_total" {print $2}' "$WORK/agent.prom")"

out=$(node "$CHECK" metrics "$DASH" "$WORK/plane.prom" "$WORK/agent.prom" 2>&1)
rc=$?
diag "$(echo "$out" | sed -n 's/^found //p' | wc -l) metrics found in the scrapes"
if [ $rc = 0 ]; then
	ok "every metric the dashboard names exists, with the labels it matches on"
else
	not_ok "every metric the dashboard names exists, with the labels it matches on"
	diag "$(echo "$out" | grep -v '^found ')"
fi

# the check can fail: a dashboard naming a metric nobody exports
jq '.panels[1].targets[0].expr = "max(tether_no_such_metric)"' "$DASH" >"$WORK/bad.json"
out=$(node "$CHECK" metrics "$WORK/bad.json" "$WORK/plane.prom" "$WORK/agent.prom" 2>&1)
check "a metric that does not exist is caught" grep -q '^missing tether_no_such_metric$' <<<"$out"
jq '.panels[1].targets[0].expr = "max(tetherd_state{state=\"sleeping\"})"' "$DASH" >"$WORK/bad.json"
out=$(node "$CHECK" metrics "$WORK/bad.json" "$WORK/plane.prom" "$WORK/agent.prom" 2>&1)
check "a label value that does not exist is caught" grep -q 'state="sleeping"' <<<"$out"

done_testing
