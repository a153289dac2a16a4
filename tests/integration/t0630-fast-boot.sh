#!/usr/bin/env bash
# t0630-fast-boot.sh: tetherd's boot from last-good with the plane down
# compares the output with last-good and writes only what differs. Files
# consumer: an intact output is left untouched (same inode, mtime and ctime
# for every file, no reload); a file changed in place at the same size, one
# with another mode, a deleted one, one replaced by a symlink (even to the
# right bytes) and a lost directory are put back, and nothing else is
# touched (a file no resource names stays: pushes leave it too); a lost
# output directory is rebuilt; kill -9 at random moments of a rebuild always
# leaves an output the next boot completes exactly, with no temp file left.
# nginx consumer: an intact live generation is not rewritten and nginx is
# not reloaded; a changed or extra file in it, a damaged secret, a lost
# generation directory and a lost output are repaired, and reload once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"

[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"

# ---- helpers of this test -----------------------------------------------------

# digest DIR: one hash over every entry but directories under DIR (the
# agent's work area left out): names, types, modes, sizes and contents
digest() {
	(
		cd "$1" || exit 1
		find . -path ./.tether-work -prune -o ! -type d -printf '%P %y %m %s\n' | sort
		find . -path ./.tether-work -prune -o -type f -print0 | sort -z | xargs -0 -r cat
	) | md5sum | cut -d' ' -f1
}

# idents DIR: inode, mtime and ctime of every file under DIR (work area
# left out), sorted: equal before and after means nothing was rewritten,
# renamed over or chmod'ed
idents() {
	(cd "$1" && find . -path ./.tether-work -prune -o ! -type d -printf '%P %i %T@ %C@\n' | sort)
}

# temps DIR: the temp files a write leaves behind if it did not finish
temps() {
	(cd "$1" && find . -name '.tether-tmp-*' -print | sort | xargs)
}

# reloads NAME: how often NAME's --reload hook ran
reloads() {
	wc -l <"$WORK/$1.reloads" 2>/dev/null | tr -d ' '
}

BOOTS=0
# boot NAME ARGS...: one boot from last-good with the plane down (a closed
# port), logged to $WORK/NAME.bootN.log; waits until the agent says it
# runs (the line it logs right after its boot), then stops it. Sets BOOTLOG.
boot() {
	local name=$1
	shift
	BOOTS=$((BOOTS + 1))
	BOOTLOG=$WORK/$name.boot$BOOTS.log
	ALOG=$name.boot$BOOTS start_agent "$name" --plane "http://127.0.0.1:$DEAD_PORT" --backoff-min 5 \
		--backoff-max 10 "$@"
	if ! wait_until 20 grep -q "node $name at version" "$BOOTLOG"; then
		not_ok "boot $BOOTS of $name reaches 'node $name at version'"
		diag "$(tail -n 5 "$BOOTLOG")"
	fi
	stop_pid "$AGENT_PID" TERM
}

# ---- a plane with 60 files (and, below, an nginx configuration) ------------------
start_plane p --heartbeat 1
jq -n '{upserts: [range(60) as $i | {
	name: "file/f\($i)",
	body: {
		path: (if $i == 59 then "top.conf" else "d\($i % 4)/f\($i).conf" end),
		content: "file \($i): \("x" * (50 + $i))\n",
		mode: (if $i % 5 == 0 then "0600" elif $i % 7 == 0 then "0755" else "0644" end)
	}}]}' >"$WORK/files.json"
ctl apply "$WORK/files.json" >/dev/null || bail "cannot load the files"
V1=$(plane_version)

FILES_ARGS=(--reload "echo reload >>'$WORK/fb.reloads'")
start_agent fb "${FILES_ARGS[@]}"
check "the agent applies version $V1" wait_until 20 agent_at fb "$V1"
stop_pid "${APID[fb]}" TERM
OUT=$WORK/fb.out
mkdir -p "$WORK/ref"
cp -a "$OUT/." "$WORK/ref/"
rm -rf "$WORK/ref/.tether-work"
REF=$(digest "$WORK/ref")
check_eq "the output holds the 60 files" 60 "$(find "$WORK/ref" -type f | wc -l)"
check_eq "with their modes (0600, 0755, 0644)" "12 7 41" \
	"$(echo $(find "$WORK/ref" -type f -perm 0600 | wc -l) $(find "$WORK/ref" -type f -perm 0755 | wc -l) \
		$(find "$WORK/ref" -type f -perm 0644 | wc -l))"
: >"$WORK/fb.reloads"

# every boot below is offline: the plane's port, closed
DEAD_PORT=$PLANE_PORT
HAVE_NGINX=0
command -v nginx >/dev/null && command -v openssl >/dev/null && command -v ss >/dev/null && HAVE_NGINX=1

# ---- nginx: a second agent on the same plane, synced before the plane stops -------
if [ "$HAVE_NGINX" = 1 ]; then
	openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 \
		-keyout "$WORK/tls.key" -out "$WORK/tls.crt" >/dev/null 2>&1 || bail "openssl cannot make a certificate"
	free_port LMAIN
	free_port LTLS
	jq -n --rawfile cert "$WORK/tls.crt" --rawfile key "$WORK/tls.key" --argjson pm "$LMAIN" --argjson pt "$LTLS" '{upserts:[
	 {name:"cluster/a", body:{lb:"round_robin", endpoints:[{address:"127.0.0.1", port:9001}]}},
	 {name:"listener/main", body:{address:"127.0.0.1", port:$pm}},
	 {name:"route/root", body:{listener:"main", host:"*", path:"/", cluster:"a"}},
	 {name:"secret/tls", body:{cert:$cert, key:$key}},
	 {name:"listener/tls", body:{address:"127.0.0.1", port:$pt, tls:{secret:"tls"}}},
	 {name:"route/tls", body:{listener:"tls", host:"*", path:"/", cluster:"a"}}]}' >"$WORK/nginx.json"
	ctl apply "$WORK/nginx.json" >/dev/null || bail "cannot load the nginx configuration"
	V2=$(plane_version)
	NG_ARGS=(--consumer nginx --marker off --reload "echo reload >>'$WORK/ng.reloads'")
	start_agent ng "${NG_ARGS[@]}"
	check "the nginx agent applies version $V2" wait_until 30 agent_at ng "$V2"
	stop_pid "${APID[ng]}" TERM
fi
stop_pid "$PLANE_PID" TERM

# ---- files: the output intact ------------------------------------------------------
before=$(idents "$OUT")
boot fb "${FILES_ARGS[@]}"
check "intact: the boot logs that it wrote nothing" grep -q "files: output matches version $V1 (0 files written, 60 already right)" "$BOOTLOG"
check_eq "intact: no file was rewritten, renamed over or chmod'ed (inode, mtime, ctime)" "$before" "$(idents "$OUT")"
check_eq "intact: no reload" 0 "$(reloads fb)"
check_eq "intact: the output is still exactly last-good" "$REF" "$(digest "$OUT")"

# ---- files: some damage -------------------------------------------------------------
before=$(idents "$OUT")
sed -i 's/x/y/' "$OUT/d1/f1.conf"                      # same size, other bytes
chmod 0644 "$OUT/d0/f20.conf"                           # was 0600
rm "$OUT/d2/f2.conf"
echo "planted" >"$OUT/d2/.tether-tmp-f2.conf"          # as a crash would leave it
cp -a "$OUT/d3/f3.conf" "$WORK/outside.conf"
rm "$OUT/d3/f3.conf"
ln -s "$WORK/outside.conf" "$OUT/d3/f3.conf"            # the right bytes, behind a symlink
echo "not ours" >"$OUT/d0/stray.txt"
outside=$(ident "$WORK/outside.conf")
boot fb "${FILES_ARGS[@]}"
check "damaged: the boot logs 4 files written" grep -q "(4 files written, 56 already right)" "$BOOTLOG"
check_eq "damaged: the file changed in place is back" "$(cat "$WORK/ref/d1/f1.conf")" "$(cat "$OUT/d1/f1.conf")"
check_eq "damaged: the mode is back" 600 "$(stat -c %a "$OUT/d0/f20.conf")"
check "damaged: the deleted file is back" cmp -s "$WORK/ref/d2/f2.conf" "$OUT/d2/f2.conf"
check "damaged: the symlink is replaced by a regular file" sh -c "[ -f '$OUT/d3/f3.conf' ] && [ ! -L '$OUT/d3/f3.conf' ]"
check_eq "damaged: the symlink's target outside was not touched" "$outside" "$(ident "$WORK/outside.conf")"
check_eq "damaged: a file no resource names is left alone" "not ours" "$(cat "$OUT/d0/stray.txt")"
rm "$OUT/d0/stray.txt"
check_eq "damaged: the output is exactly last-good again" "$REF" "$(digest "$OUT")"
check_eq "damaged: no temp file is left" "" "$(temps "$OUT")"
untouched() {
	diff <(echo "$before" | grep -v -E '^(d1/f1|d0/f20|d2/f2|d3/f3)\.conf |^d0/stray|tether-tmp') \
		<(idents "$OUT" | grep -v -E '^(d1/f1|d0/f20|d2/f2|d3/f3)\.conf ')
}
check "damaged: the 56 other files were not touched" untouched
check_eq "damaged: one reload" 1 "$(reloads fb)"

# ---- files: a lost directory (a few files and a directory to make) -----------------------
rm -rf "$OUT/d3"
boot fb "${FILES_ARGS[@]}"
check "lost directory: its 14 files written" grep -q "(14 files written, 46 already right)" "$BOOTLOG"
check_eq "lost directory: the output is exactly last-good" "$REF" "$(digest "$OUT")"
check_eq "lost directory: one more reload" 2 "$(reloads fb)"

# ---- files: the whole output lost ---------------------------------------------------------
rm -rf "$OUT"
boot fb "${FILES_ARGS[@]}"
check "lost output: all 60 files written" grep -q "(60 files written, 0 already right)" "$BOOTLOG"
check_eq "lost output: rebuilt exactly (names, modes, contents)" "$REF" "$(digest "$OUT")"
check_eq "lost output: no temp file is left" "" "$(temps "$OUT")"
check_eq "lost output: one more reload" 3 "$(reloads fb)"
before=$(idents "$OUT")
boot fb "${FILES_ARGS[@]}"
check_eq "and the next boot leaves the rebuilt output untouched" "$before" "$(idents "$OUT")"
check_eq "without a reload" 3 "$(reloads fb)"

# ---- files: kill -9 during a rebuild ---------------------------------------------------------
bad=0
for it in $(seq 1 12); do
	rm -rf "$OUT"
	"$AGENT_BIN" --node fb --state-dir "$WORK/fb.state" --output-dir "$OUT" --plane "http://127.0.0.1:$DEAD_PORT" \
		--backoff-min 5 --backoff-max 10 >>"$WORK/fb.kill.log" 2>&1 &
	pid=$!
	track_pid "$pid"
	# 0 to 55 ms: from before last-good is read to after the rebuild
	sleep "0.0$((it * 5 % 60 / 10))$((it * 5 % 10))"
	stop_pid "$pid" KILL
	boot fb
	if [ "$(digest "$OUT")" != "$REF" ] || [ -n "$(temps "$OUT")" ]; then
		bad=$((bad + 1))
		diag "kill $it: $(diff -r "$WORK/ref" "$OUT" 2>&1 | grep -v tether-work | head -n 3) temps: $(temps "$OUT")"
	fi
done
check_eq "kill -9 during a rebuild: the next boot always completes the output exactly, no temp file left" 0 "$bad"

# ---- nginx --------------------------------------------------------------------------------------
if [ "$HAVE_NGINX" = 1 ]; then
	NOUT=$WORK/ng.out
	: >"$WORK/ng.reloads"
	LIVE=$(readlink "$NOUT/current")
	check "nginx: current names a generation ($LIVE)" sh -c "echo '$LIVE' | grep -Eq '^gen-[0-9a-f]{16}\$'"
	mkdir -p "$WORK/ngref"
	cp -a "$NOUT/$LIVE" "$WORK/ngref/gen"
	cp -a "$NOUT/secrets" "$WORK/ngref/secrets"
	GREF=$(digest "$WORK/ngref/gen")
	SREF=$(digest "$WORK/ngref/secrets")
	ngok() {
		[ "$(readlink "$NOUT/current")" = "$LIVE" ] && [ "$(digest "$NOUT/$LIVE")" = "$GREF" ] &&
			[ "$(digest "$NOUT/secrets")" = "$SREF" ] && [ -z "$(cd "$NOUT" && ls -d ./*.tmp 2>/dev/null)" ]
	}

	before="$(idents "$NOUT") $(stat -c %i "$NOUT/$LIVE")"
	boot ng "${NG_ARGS[@]}"
	check "nginx intact: the boot says current already serves it" grep -q "current already serves version $V2 ($LIVE)" "$BOOTLOG"
	check_eq "nginx intact: nothing rewritten (files and the generation directory)" "$before" \
		"$(idents "$NOUT") $(stat -c %i "$NOUT/$LIVE")"
	check_eq "nginx intact: no reload" 0 "$(reloads ng)"

	echo "# changed by hand" >>"$NOUT/$LIVE/tether.conf"
	boot ng "${NG_ARGS[@]}"
	check "nginx changed file: the boot says it repaired the live generation" grep -q "current repaired: serves version $V2 ($LIVE)" "$BOOTLOG"
	check "nginx changed file: the live generation is exactly what it was" ngok
	check_eq "nginx changed file: one reload" 1 "$(reloads ng)"

	echo "server { listen 127.0.0.1:$LMAIN; return 200 evil; }" >"$NOUT/$LIVE/evil.conf"
	boot ng "${NG_ARGS[@]}"
	check "nginx extra file: gone from the live generation (nginx includes current/*.conf)" test ! -e "$NOUT/$LIVE/evil.conf"
	check "nginx extra file: the live generation is exactly what it was" ngok
	check_eq "nginx extra file: one more reload" 2 "$(reloads ng)"

	key=$(find "$NOUT/secrets" -name '*.key' | head -n 1)
	: >"$key"
	chmod 0644 "$key"
	boot ng "${NG_ARGS[@]}"
	check "nginx damaged secret: back, with its bytes and 0600" ngok
	check_eq "nginx damaged secret: one more reload" 3 "$(reloads ng)"

	rm -rf "${NOUT:?}/$LIVE"
	boot ng "${NG_ARGS[@]}"
	check "nginx lost generation (current dangling): written again under the same name" ngok
	check_eq "nginx lost generation: one more reload" 4 "$(reloads ng)"

	rm -rf "$NOUT"
	boot ng "${NG_ARGS[@]}"
	check "nginx lost output: rebuilt, the same generation" ngok
	check_eq "nginx lost output: one more reload" 5 "$(reloads ng)"

	before="$(idents "$NOUT") $(stat -c %i "$NOUT/$LIVE")"
	boot ng "${NG_ARGS[@]}"
	check_eq "nginx: the next boot leaves it untouched" "$before" "$(idents "$NOUT") $(stat -c %i "$NOUT/$LIVE")"
	check_eq "nginx: without a reload" 5 "$(reloads ng)"
else
	diag "nginx, openssl or ss missing: the nginx consumer's boot is not tested"
fi

done_testing
