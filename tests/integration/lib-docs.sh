# lib-docs.sh: running a doc's commands as written (t0018 the README's,
# t0019 the man pages'), sourced after lib.sh. A block of commands becomes
# a session script run by one bash, the way a person types it into one
# terminal: one command at a time (a line and its continuations after `\`
# or `|`), each one's exit status a test point, the environment and the
# directory carried from command to command.
#
# What the session does that a person would do, and nothing else:
#  - a command ending in `&` (a server started in the background) is
#    waited for as a person waits: tether-plane until /healthz of the port
#    it names answers, tetherd until its --state-dir has status.json;
#  - a command that runs until Ctrl-C (the test's doc_forever_kind names
#    it: `curl -N`, `tetherctl watch`, a tetherd in the foreground) runs
#    until the harness has seen what it is for (doc_forever_KIND), then
#    gets SIGINT;
#  - the doc's text is adapted by DOC_SUBST (sed expressions: ports and
#    paths only), which each test lists at its top.
#
# Results land in $WORK/doc.results as "PASS|FAIL|SKIP WHERE TEXT" lines;
# doc_report turns them into test points, and fails when fewer came than
# the session was made to report (it died on the way).

DOC_SUBST=()
DOC_EXPECT=0
DOC_RESULTS=$WORK/doc.results
: >"$DOC_RESULTS"

# doc_subst: stdin with every DOC_SUBST expression applied
doc_subst() {
	local args=() e
	for e in "${DOC_SUBST[@]}"; do
		args+=(-e "$e")
	done
	if [ ${#args[@]} -gt 0 ]; then sed "${args[@]}"; else cat; fi
}

# doc_block WHERE: the lines of the block that starts at WHERE (FILE:LINE,
# as scripts/doc-blocks names it) in $DOC_BLOCKS
doc_block() {
	awk -v w="$1" '
		/^@@block / { on = ($2 == w); next }
		on { print }
	' "$DOC_BLOCKS"
}

# open_quote(TEXT), for the splitters' awk: TEXT leaves a single quote
# open (the command goes on on the next line); a # comment (after a blank,
# outside quotes) does not count
DOC_AWK_QUOTE='function open_quote(t,   i, n, q, c) {
	n = length(t); q = 0
	for (i = 1; i <= n; i++) {
		c = substr(t, i, 1)
		if (c == "\047") q = !q
		else if (c == "#" && !q && (i == 1 || substr(t, i - 1, 1) ~ /[ \t\n]/))
			while (i <= n && substr(t, i, 1) != "\n") i++
	}
	return q
}'

# doc_units WHERE: the block as commands, one per record, separated by
# NUL: "LINE<TAB>TEXT" (LINE the doc's line of the command's first line).
# Comment lines are left out; a line ending in \ or | continues.
doc_units() {
	local file=${1%:*} first=${1##*:}
	doc_block "$1" | awk -v f="$first" "$DOC_AWK_QUOTE"'
		{ ln = f + NR - 1 }
		cont { u = u "\n" $0 }
		!cont {
			if ($0 ~ /^[ \t]*#/ || $0 ~ /^[ \t]*$/) next
			u = $0; at = ln
		}
		{
			t = $0
			sub(/[ \t]+#[^\047"]*$/, "", t)
			cont = (t ~ /(\\|\|)[ \t]*$/) || open_quote(u)
			if (!cont) { printf "%s\t%s%c", at, u, 0 }
		}
	'
}

# doc_units_transcript WHERE: the commands of a man page's transcript
# ("$ " prompts; the lines between are the output shown), as doc_units
# gives them, the prompt removed. A command at another host's prompt
# ("edge2# ...") comes as "@HOST " and the command.
doc_units_transcript() {
	local first=${1##*:}
	doc_block "$1" | awk -v f="$first" "$DOC_AWK_QUOTE"'
		function emit() { if (pending) printf "%s\t%s\037%s%c", at, u, want, 0; pending = 0 }
		function done_cmd() { pending = 1; want = ""; seen = 0 }
		{ ln = f + NR - 1 }
		cont { u = u "\n" $0; cont = ($0 ~ /(\\|\|)[ \t]*$/) || open_quote(u); if (!cont) done_cmd(); next }
		/^\$ / || /^[a-z0-9-]+# / {
			emit()
			if ($0 ~ /^\$ /) u = substr($0, 3)
			else { h = $0; sub(/#.*/, "", h); u = "@" h " " substr($0, length(h) + 3) }
			at = ln
			cont = ($0 ~ /(\\|\|)[ \t]*$/) || open_quote(u)
			if (!cont) done_cmd()
			next
		}
		pending && !seen { if ($0 !~ /^# /) want = $0; seen = 1 }
		END { emit() }
	'
}

# doc_session_begin FILE: a session script's preamble (the helpers its
# commands report through)
doc_session_begin() {
	DOC_SESSION=$1
	cat >"$DOC_SESSION" <<EOF
# a session of doc commands, made by $T_NAME (lib-docs.sh)
set -o pipefail
DOC_RESULTS='$DOC_RESULTS'
DOC_BG='$WORK/doc.bg'
DOC_WORK='$WORK'
EOF
	cat >>"$DOC_SESSION" <<'EOF'
__ran() { # WHERE STATUS TEXT (its first line is shown)
	local t=${3%%$'\n'*}
	if [ "$2" -eq 0 ]; then echo "PASS $1 $t" >>"$DOC_RESULTS"
	else echo "FAIL $1 $t (exit $2)" >>"$DOC_RESULTS"; fi
}
__wait() { # SECONDS COMMAND...: as lib.sh's wait_until
	local end=$(( $(date +%s) + $1 )); shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.1
	done
}
__bg() { # WHERE PID TEXT: a server started with &, waited for as a person does
	echo "$2" >>"$DOC_BG"
	echo "$2" >"$DOC_WORK/bg.$(printf '%s' "$1" | tr -c 'A-Za-z0-9' _)"
	local port dir rc=0
	case $3 in
	*tether-plane*)
		port=$(printf '%s\n' "$3" | grep -o -- '--listen [0-9.]*:[0-9]*' | sed 's/.*://')
		__wait 20 curl -fsS "http://127.0.0.1:$port/healthz" || rc=1 ;;
	*tetherd*)
		dir=$(printf '%s\n' "$3" | grep -o -- '--state-dir [^ ]*' | sed 's/--state-dir //')
		__wait 20 test -s "$dir/status.json" || rc=1 ;;
	esac
	kill -0 "$2" 2>/dev/null || rc=1
	__ran "$1" "$rc" "${3%%$'\n'*} (started in the background)"
}
__norm() { # a line's shape: ids, keys and numbers made alike, blanks collapsed
	sed -E 's#[A-Za-z0-9+/]{20,}={0,2}#B#g; s/[0-9a-f]{6,}/H/g; s/[0-9]+/N/g; s/[[:space:]]+/ /g; s/^ //; s/ $//'
}
__out() { # WHERE WANT: the command's output (in $DOC_WORK/out) begins as the doc shows
	local want got rc=0
	cat "$DOC_WORK/out"
	want=$(printf '%s\n' "$2" | __norm)
	got=$(head -n 1 "$DOC_WORK/out" | __norm)
	case $want in
	*...*)   # the doc elides the rest: up to the word it cuts
		want=${want%%...*}
		want=${want% *}
		[[ $got == "$want"* ]] || rc=1 ;;
	*)
		[ "$got" = "$want" ] || rc=1 ;;
	esac
	[ "$rc" -eq 0 ] || printf -- '--- %s: the output shown: %s\n--- its first line here: %s\n' "$1" "$2" \
		"$(head -n 1 "$DOC_WORK/out")" >>"$DOC_WORK/doc.diag"
	__ran "$1" "$rc" "the output's first line is as shown: $2"
}
__forever() { # WHERE KIND TEXT: a command that runs until Ctrl-C
	local out pid rc=0
	out="$DOC_WORK/forever.$(printf '%s' "$1" | tr -c 'A-Za-z0-9' _).log"   # (.log: lib.sh's sanitizer check reads it)
	# its own process group, SIGINT not ignored (a job started with & in a
	# shell without job control ignores it), as a terminal's foreground
	# job: Ctrl-C signals the group (the bash that runs it, and what that
	# started)
	set -m
	bash -c "$3" >"$out" 2>&1 &
	pid=$!
	set +m
	echo "$pid" >>"$DOC_BG"
	doc_forever_"$2" "$out" "$pid" || rc=1
	if kill -0 "$pid" 2>/dev/null; then
		kill -INT -- "-$pid"
		if ! __wait 10 sh -c "! kill -0 $pid"; then
			kill -KILL -- "-$pid"
			echo "--- $1: Ctrl-C did not end it" >>"$DOC_WORK/doc.diag"
			rc=1
		fi
	else
		rc=1   # it ended by itself: it was for running until Ctrl-C
	fi
	wait "$pid" 2>/dev/null
	[ "$rc" -eq 0 ] || { echo "--- $1: its output"; tail -n 20 "$out"; } >>"$DOC_WORK/doc.diag"
	__ran "$1" "$rc" "${3%%$'\n'*} (until Ctrl-C: $2)"
}
EOF
}

# doc_session_add WHERE [transcript]: the block's commands, adapted, into
# the session. A command that elides its arguments ("...") goes to the
# test's doc_elided WHERE TEXT, which prints the harness's stand-in, or
# returns 1 (the command is a SKIP, its reason DOC_WHY: listed in the
# test) or 2 (a FAIL: an elision the test does not know); so does one at
# another host's prompt ("@HOST CMD").
doc_session_add() {
	local where=$1 file=${1%:*} line text kind q units=doc_units
	[ "${2:-}" = transcript ] && units=doc_units_transcript
	local want why
	while IFS=$'\t' read -r -d '' line text; do
		DOC_EXPECT=$((DOC_EXPECT + 1))
		want=""
		if [[ $text == *$'\037'* ]]; then
			want=${text#*$'\037'}
			text=${text%%$'\037'*}
			want=$(printf '%s\n' "$want" | doc_subst)
		fi
		text=$(printf '%s\n' "$text" | doc_subst)
		q=$(printf '%q' "$text")
		kind=$(doc_forever_kind "$text")
		if [[ $text == @* ]] || grep -qE '(^|[ ])\.\.\.([ ]|$)' <<<"$text"; then
			DOC_WHY=""
			local erc=0
			doc_elided "$file:$line" "$text" >>"$DOC_SESSION.elided" || erc=$?
			if [ "$erc" -eq 0 ]; then
				cat "$DOC_SESSION.elided" >>"$DOC_SESSION"
				printf '__ran %s $? %s\n' "$file:$line" "$(printf '%q' "${text%%$'\n'*} (the harness's stand-in for what the doc elides)")" >>"$DOC_SESSION"
			else
				printf 'echo %q >>"$DOC_RESULTS"\n' "$([ "$erc" -eq 1 ] && echo SKIP || echo FAIL) $file:$line ${text%%$'\n'*} ($DOC_WHY)" >>"$DOC_SESSION"
			fi
			rm -f "$DOC_SESSION.elided"
		elif [ -n "$kind" ]; then
			printf '__forever %s %s %s\n' "$file:$line" "$kind" "$q" >>"$DOC_SESSION"
		elif printf '%s' "$text" | sed 's/[ \t]#[^\x27"]*$//' | grep -q '&[ \t]*$'; then
			printf '%s\n__bg %s $! %s\n' "$text" "$file:$line" "$q" >>"$DOC_SESSION"
		elif [ -n "$want" ]; then
			# the output shown: its first line's shape is checked (__out)
			DOC_EXPECT=$((DOC_EXPECT + 1))
			printf '{ %s\n} >"$DOC_WORK/out" 2>&1\n__ran %s $? %s\n' "$text" "$file:$line" "$q" >>"$DOC_SESSION"
			if why=$(doc_output_differs "$text" "$want"); then
				printf 'cat "$DOC_WORK/out"; echo %q >>"$DOC_RESULTS"\n' \
					"SKIP $file:$line the output shown ($want): $why" >>"$DOC_SESSION"
			else
				printf '__out %s %q\n' "$file:$line" "$want" >>"$DOC_SESSION"
			fi
		else
			printf '%s\n__ran %s $? %s\n' "$text" "$file:$line" "$q" >>"$DOC_SESSION"
		fi
	done < <("$units" "$where")
}

# doc_session_raw TEXT [N]: lines of the harness's own (the operator's
# part a doc leaves to the reader: an nginx.conf, a free port), marked as
# such; N: how many results (__ran) they report
doc_session_raw() {
	printf '# -- the harness, not the doc:\n%s\n' "$1" >>"$DOC_SESSION"
	DOC_EXPECT=$((DOC_EXPECT + ${2:-0}))
}

# doc_session_run [DIR]: the session, from DIR, into $WORK/session.log; one
# that has not ended in 120 s is cut (a command that never returns: a
# server started without &), and doc_report says so
doc_session_run() {
	local rc=0
	(cd "${1:-.}" && timeout -k 5 120 bash "$DOC_SESSION") >"$WORK/session.log" 2>&1 </dev/null || rc=$?
	[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] ||
		echo "--- the session was cut after 120 s: its last command did not return (a server started without &?); see $(basename "$DOC_SESSION") and session.log" >>"$WORK/doc.diag"
}

# doc_report: the results as test points, and the session's diagnostics
doc_report() {
	local verdict where text got
	got=$(grep -c . "$DOC_RESULTS")
	[ "$got" -eq "$DOC_EXPECT" ] ||
		not_ok "the session reported $got of its $DOC_EXPECT results (it ended on the way: see $(basename "$DOC_SESSION") and its log)"
	DOC_EXPECT=0
	while read -r verdict where text; do
		case $verdict in
		PASS) ok "$where: $text" ;;
		SKIP) ok "$where: # SKIP $text" ;;
		*) not_ok "$where: $text" ;;
		esac
	done <"$DOC_RESULTS"
	[ -s "$WORK/doc.diag" ] && diag "$(cat "$WORK/doc.diag")"
	: >"$DOC_RESULTS"
	: >"$WORK/doc.diag"
}

# doc_stop_bg: stop what the session left running
doc_stop_bg() {
	local p
	[ -f "$WORK/doc.bg" ] || return 0
	for p in $(cat "$WORK/doc.bg"); do
		kill -TERM "$p" 2>/dev/null
	done
	for p in $(cat "$WORK/doc.bg"); do
		wait_until 5 sh -c "! kill -0 $p" || kill -KILL "$p" 2>/dev/null
	done
	: >"$WORK/doc.bg"
}
T_CLEANUPS="$T_CLEANUPS doc_stop_bg"

# the defaults a test overrides: no command runs until Ctrl-C, and a
# command that elides its arguments fails
doc_forever_kind() { :; }
DOC_ELIDED_WHY="the doc elides part of it: write it out, or give the test a stand-in or a reason to skip it (docs/HACKING.md, \"Docs are code\")"
doc_elided() {
	DOC_WHY=$DOC_ELIDED_WHY
	return 2
}
# doc_output_differs TEXT WANT: why this run's story cannot print the
# output the doc shows (printed; the check is a SKIP), or fail
doc_output_differs() { return 1; }
