#!/usr/bin/env bash
# t0230-agent-crash.sh: kill -9 tetherd at random moments while it applies
# a large push, many times over, and check that what it left behind always
# boots as exactly one version: restarted with the plane unreachable, the
# agent loads its newest good last-good, and its output then equals all 200
# files of the old version or all 200 of the new one (content, mode, no
# extra file), the one its status.json names; its version never goes back.
#
# T0230_ITERATIONS (default 100) sets the number of kills. The kill comes
# after a random delay from the agent's start, uniform over a window that
# covers a whole apply on this machine (measured first; at least 300 ms),
# so kills land in every phase: connect, staging, swap, last-good, ACK, and
# after.
. "$(dirname "$0")/lib.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

ITER=${T0230_ITERATIONS:-100}
NFILES=200
BUDGET_S=170        # stop early rather than overrun the time limit

# ---- helpers of this test ---------------------------------------------------
# booted_offline PID: status.json was written by PID, state offline (its
# boot, last-good and output repair, is over)
booted_offline() {
	[ "$(st node pid)" = "$1" ] && [ "$(st node state)" = offline ]
}

# digest DIR: one hash over every entry but directories under DIR (the
# agent's work area left out): names, types, modes, sizes and contents
digest() {
	(
		cd "$1" || exit 1
		find . -path ./.tether-work -prune -o ! -type d -printf '%P %y %m %s\n' | sort
		find . -path ./.tether-work -prune -o -type f -print0 | sort -z | xargs -0 -r cat
	) | md5sum | cut -d' ' -f1
}

# make_version TAG MODE: writes the reference tree $WORK/ref.TAG and the
# batch $WORK/TAG.json of NFILES file resources (every file differs
# between the tags, in content and mode)
make_version() {
	local tag=$1 mode=$2 d
	for d in 0 1 2 3 4 5 6 7 8 9; do mkdir -p "$WORK/ref.$tag/d$d"; done
	awk -v tag="$tag" -v mode="$mode" -v dir="$WORK/ref.$tag" -v n="$NFILES" -v json="$WORK/$tag.json" 'BEGIN {
		printf "{\"upserts\":[" > json
		for (i = 0; i < n; i++) {
			path = sprintf("d%d/f%03d.conf", i % 10, i)
			c = ""
			for (k = 0; k < 40; k++)
				c = c sprintf("%s: line %d of file %d\n", tag, k, i)
			printf "%s", c > (dir "/" path)
			close(dir "/" path)
			gsub(/\n/, "\\n", c)
			printf "%s{\"name\":\"file/f%03d\",\"body\":{\"path\":\"%s\",\"content\":\"%s\",\"mode\":\"%s\"}}", \
				(i ? "," : ""), i, path, c, mode > json
		}
		printf "]}\n" > json
	}'
	find "$WORK/ref.$tag" -type f -exec chmod "$mode" {} +
}

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# ---- two versions of a large configuration ---------------------------------------
make_version A 0644
make_version B 0640
mkdir -p "$WORK/ref.EMPTY"
declare -A DIGEST=([A]=$(digest "$WORK/ref.A") [B]=$(digest "$WORK/ref.B") [EMPTY]=$(digest "$WORK/ref.EMPTY"))
check "the two reference versions differ" test "${DIGEST[A]}" != "${DIGEST[B]}"
check_eq "each reference version has $NFILES files" "$NFILES $NFILES" \
	"$(find "$WORK/ref.A" -type f | wc -l) $(find "$WORK/ref.B" -type f | wc -l)"

start_plane p
declare -A CONTENT=([0]=EMPTY)   # version -> A, B or EMPTY
PLANE_HAS=EMPTY

# batch TAG: makes the plane hold version TAG (one new version)
batch() {
	local out v
	out=$(curl -sS -X POST --data-binary "@$WORK/$1.json" "$PLANE_URL/v1/batch") || bail "batch $1: $out"
	v=$(echo "$out" | jq -r .version)
	[ "$(echo "$out" | jq -r .changed)" = true ] || bail "batch $1 changed nothing: $out"
	CONTENT[$v]=$1
	PLANE_HAS=$1
	PLANE_V=$v
}

# ---- calibration: how long does one whole apply take here? --------------------------
# a node that holds A starts and applies B, as in the loop below
batch A
"$AGENT_BIN" --plane "$PLANE_URL" --node calib --state-dir "$WORK/calib.state" --output-dir "$WORK/calib.out" \
	>>"$WORK/calib.log" 2>&1 &
CAL_PID=$!
track_pid "$CAL_PID"
wait_until 30 grep -q "applied version $PLANE_V" "$WORK/calib.log" || bail "the calibration agent did not apply A"
stop_pid "$CAL_PID" TERM
check_eq "the calibration agent's output is version A" "${DIGEST[A]}" "$(digest "$WORK/calib.out")"
batch B
t0=$(now_ms)
"$AGENT_BIN" --plane "$PLANE_URL" --node calib --state-dir "$WORK/calib.state" --output-dir "$WORK/calib.out" \
	>>"$WORK/calib.log" 2>&1 &
CAL_PID=$!
track_pid "$CAL_PID"
wait_until 30 grep -q "applied version $PLANE_V" "$WORK/calib.log" || bail "the calibration agent did not apply B"
APPLY_MS=$(($(now_ms) - t0))
stop_pid "$CAL_PID" TERM
check_eq "then version B" "${DIGEST[B]}" "$(digest "$WORK/calib.out")"
WINDOW=$((APPLY_MS * 2))
[ "$WINDOW" -ge 300 ] || WINDOW=300
diag "starting and applying $NFILES changed files takes $APPLY_MS ms here; kills within 0..$WINDOW ms"

# ---- kill -9 at random moments -------------------------------------------------------
AGENT_V=0          # the version the node booted with last
n_old=0 n_new=0 n_done=0 bad=0 backwards=0 lost=0
START=$(date +%s)
for it in $(seq 1 "$ITER"); do
	if [ $(($(date +%s) - START)) -ge $BUDGET_S ]; then
		diag "time budget spent after $n_done kills"
		break
	fi
	# the plane must hold the other content than the node
	if [ "${CONTENT[$AGENT_V]}" = A ]; then want=B; else want=A; fi
	[ "$PLANE_HAS" = "$want" ] || batch "$want"
	target=$PLANE_V

	delay=$((RANDOM % (WINDOW + 1)))
	"$AGENT_BIN" --plane "$PLANE_URL" --node node --state-dir "$WORK/node.state" --output-dir "$WORK/node.out" \
		--backoff-min 0.05 --backoff-max 0.2 >>"$WORK/crash.log" 2>&1 &
	pid=$!
	track_pid "$pid"
	sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
	stop_pid "$pid" KILL

	# boot from last-good alone: the plane is unreachable
	echo "--- iteration $it: killed after $delay ms; booting offline" >>"$WORK/verify.log"
	"$AGENT_BIN" --plane http://127.0.0.1:1 --node node --state-dir "$WORK/node.state" \
		--output-dir "$WORK/node.out" --backoff-min 1 --backoff-max 5 >>"$WORK/verify.log" 2>&1 &
	vpid=$!
	track_pid "$vpid"
	if ! wait_until 20 booted_offline "$vpid"; then
		not_ok "iteration $it: the agent boots offline after kill -9 at $delay ms"
		diag "$(tail -n 5 "$WORK/verify.log")"
		bad=$((bad + 1))
		stop_pid "$vpid" KILL
		break
	fi
	v=$(st node version)
	tag=${CONTENT[$v]:-unknown}
	got=$(digest "$WORK/node.out")
	stop_pid "$vpid" TERM
	n_done=$((n_done + 1))
	if [ "$tag" = unknown ] || [ "$got" != "${DIGEST[$tag]}" ]; then
		bad=$((bad + 1))
		not_ok "iteration $it: after kill -9 at $delay ms the output is exactly version $v ($tag)"
		diag "the output's digest $got; A ${DIGEST[A]}, B ${DIGEST[B]}, EMPTY ${DIGEST[EMPTY]}"
		diag "$(diff -r "$WORK/ref.$tag" "$WORK/node.out" 2>&1 | grep -v tether-work | head -n 5)"
		diag "$(tail -n 8 "$WORK/verify.log")"
		[ $bad -ge 3 ] && break
		continue
	fi
	# the agent logs "applied" only after last-good is durable
	if grep -q "tetherd\[$pid\] info: applied version $target " "$WORK/crash.log" && [ "$v" != "$target" ]; then
		lost=$((lost + 1))
		diag "iteration $it: the killed agent had applied version $target (logged), but the node booted at $v"
		diag "$(grep "^--- iteration $it:" -A 3 "$WORK/verify.log" | grep 'last-good' | head -n 2)"
	fi
	if [ "$v" != "$AGENT_V" ] && [ "$v" != "$target" ]; then
		backwards=$((backwards + 1))
		diag "iteration $it: booted at version $v, neither the version before ($AGENT_V) nor the one pushed ($target)"
	fi
	if [ "$v" = "$target" ] && [ "$target" != "$AGENT_V" ]; then n_new=$((n_new + 1)); else n_old=$((n_old + 1)); fi
	AGENT_V=$v
done
diag "kills: $n_done in $(($(date +%s) - START)) s: $n_old kept the old version, $n_new had the new one"
diag "$(grep -c 'an interrupted push was cleaned up' "$WORK/verify.log") boots cleaned up an interrupted push"

check_eq "every boot after kill -9 gave exactly one version, the one status.json names" 0 "$bad"
check_eq "no boot came up at a version other than the old or the new one (never backwards)" 0 "$backwards"
check_eq "no boot lost a version the killed agent had applied (newest last-good loads)" 0 "$lost"
check "at least half of the $ITER kills ran within the time budget ($n_done)" test "$n_done" -ge $((ITER / 2))
check "some kills left the old version ($n_old)" test "$n_old" -ge 1
check "some kills came after the new version was safe ($n_new)" test "$n_new" -ge 1
check "no last-good was ever unusable" sh -c "! grep -q 'last-good unusable\|last-good: .*starting empty' '$WORK/verify.log'"

# ---- and the node then syncs normally from there ---------------------------------------
"$AGENT_BIN" --plane "$PLANE_URL" --node node --state-dir "$WORK/node.state" --output-dir "$WORK/node.out" \
	--backoff-max 0.5 >>"$WORK/final.log" 2>&1 &
FINAL_PID=$!
track_pid "$FINAL_PID"
check "after all that the node syncs to the plane's version $PLANE_V" \
	wait_until 20 sh -c "[ \"\$(jq -r .version '$WORK/node.state/status.json')\" = $PLANE_V ]"
check_eq "and its output is exactly the plane's content ($PLANE_HAS)" "${DIGEST[$PLANE_HAS]}" "$(digest "$WORK/node.out")"
stop_pid "$FINAL_PID" TERM
check_eq "it exits 0" 0 "$?"

check "no sanitizer report in any log" sh -c "! grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' '$WORK'/*.log"

done_testing
