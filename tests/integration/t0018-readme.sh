#!/usr/bin/env bash
# t0018-readme.sh: every command block of the README runs as written. The
# blocks come from the README itself (scripts/doc-blocks, checked first on
# a known text); each is run, checked or named below with the reason it
# cannot run here, and a block this test does not know fails it. The quick
# start by hand, the agent with its files, the nginx and haproxy agent
# lines (a real nginx and a real haproxy, the operator's part written by
# the harness, marked as such) run as one terminal session, adapted only
# by DOC_SUBST (ports and paths; docs/HACKING.md, "Docs are code"); the
# option lists name only options the binaries take; the documentation
# list names only what is in the tree; Building runs in a scratch copy of
# the tree (make check aside: it runs this suite), and scripts/demo in it,
# in the plain pass of the suite only (a full build: once is enough).
# The package blocks (apt, systemctl) are run by tests/system/boot.sh from
# the README's text; scripts/test is this suite.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-proxy.sh"
. "$(dirname "$0")/lib-docs.sh"

need_cmd curl jq nginx haproxy ss awk sed
[ -x "$AGENT_BIN" ] || bail "no $AGENT_BIN: build first"
SRC=$TOP_SRCDIR
README=$SRC/README
DB=$SRC/scripts/doc-blocks

# ---- the extractor, on a known text and a known page -------------------------------
cat >"$WORK/known.txt" <<'EOF'
Title
=====

    one block
    its second line

    and its third, after a blank line
Some text:
    not a block (no blank line before it)

Section
-------

    two
EOF
check_eq "doc-blocks finds the 2 blocks of a known text" 2 "$("$DB" --count "$WORK/known.txt")"
check_eq "doc-blocks gives a block its line, section and lines, the indent removed" \
	"@@block $WORK/known.txt:4 Title|one block|its second line||and its third, after a blank line|@@block $WORK/known.txt:14 Section|two" \
	"$("$DB" "$WORK/known.txt" | paste -sd '|')"
cat >"$WORK/known.1" <<'EOF'
.TH K 1
.SH EXAMPLES
.nf
$ tetherctl put cluster/web \-\-dry\-run \e
    \(aq{"a":1}\(aq \fBbold\fR
.fi
.SS "More"
.EX
x
.EE
EOF
check_eq "doc-blocks finds the 2 example blocks of a known man page" 2 "$("$DB" --count "$WORK/known.1")"
check_eq "doc-blocks undoes the man page's escapes" \
	"@@block $WORK/known.1:4 EXAMPLES|\$ tetherctl put cluster/web --dry-run \\|    '{\"a\":1}' bold|@@block $WORK/known.1:9 EXAMPLES / More|x" \
	"$("$DB" "$WORK/known.1" | paste -sd '|')"

DOC_BLOCKS=$WORK/readme.blocks
(cd "$SRC" && scripts/doc-blocks README) >"$DOC_BLOCKS" || bail "scripts/doc-blocks failed on the README"
n=$("$DB" --count "$README")
check "doc-blocks finds the README's blocks (at least 12, found $n)" test "$n" -ge 12

# ---- ports and paths: the substitution list (the only changes to the README's text) ----
free_port PORT   # the plane's 127.0.0.1:7070
free_port MARK   # the nginx agent's --marker 127.0.0.1:7099
free_port HP     # the operator's nginx server on port 80 (its /healthz)
DOC_SUBST=(
	"s|/tmp/|$WORK/tmp/|g"                # /tmp/tether, /tmp/agent, /tmp/out
	"s|/etc/|$WORK/etc/|g"                # /etc/tether, /etc/haproxy
	"s|/run/|$WORK/run/|g"                # the pidfiles
	"s|127\.0\.0\.1:7070|127.0.0.1:$PORT|g"
	"s|127\.0\.0\.1:7099|127.0.0.1:$MARK|g"
	"s|http://127\.0\.0\.1/|http://127.0.0.1:$HP/|g"
	"s|scripts/build build/plain|scripts/build $TOP_BUILDDIR|"   # the tree's build (make: nothing to do)
	"s|cd build/plain|cd $WORK/plain|"    # that build's binaries, linked: the keys and tokens go to the work dir
)
mkdir -p "$WORK/tmp" "$WORK/etc/tether" "$WORK/etc/haproxy" "$WORK/run" "$WORK/plain"
for b in tether-plane tetherd tetherctl; do
	ln -s "$TOP_BUILDDIR/$b" "$WORK/plain/$b"
done

# ---- the blocks, each one's kind --------------------------------------------------------
where_of() { # PATTERN: the block whose first line matches (grep -E)
	awk -v p="$1" '/^@@block / { w = $2; first = 1; next } first { if ($0 ~ p) print w; first = 0 }' "$DOC_BLOCKS" | head -n 1
}
block_has() { doc_block "$1" | grep -qE -- "$2"; }
QUICK=$(where_of '^scripts/build build/plain')
AGENT=$(where_of '^\./tetherd ')
NGINX="" HAPROXY=""
for w in $(grep '^@@block ' "$DOC_BLOCKS" | awk '{print $2}'); do
	doc_block "$w" | head -n 1 | grep -q '^tetherd ' || continue
	if block_has "$w" '--consumer nginx'; then NGINX=$w; fi
	if block_has "$w" '--consumer haproxy'; then HAPROXY=$w; fi
done
for v in QUICK AGENT NGINX HAPROXY; do
	[ -n "${!v}" ] || not_ok "the README has its $v block (its first line changed?)"
done

# the options a README list names, each taken by the binary (its --help)
options_taken() { # WHERE BINARY
	local help missing="" o
	help=$("$2" --help 2>&1)
	for o in $(doc_block "$1" | grep -oE '^-(-[a-z0-9]+)+|^--[a-z0-9-]+(, --[a-z0-9-]+)*|(^| )--[a-z0-9-]+' | grep -oE -- '--[a-z0-9-]+' | sort -u); do
		grep -qE -- "$o([ =,]|\$)" <<<"$help" || missing="$missing $o"
	done
	[ -z "$missing" ] || { echo "not in $(basename "$2") --help:$missing"; return 1; }
}
# the documentation list: each path in the tree, each man page named there
doc_list_exists() {
	local p missing=""
	for p in $(doc_block "$1" | awk '/^[^ ]/ {print $1}'); do   # (not a continued description)
		[ -e "$SRC/$p" ] || missing="$missing $p"
	done
	for p in $(doc_block "$1" | grep -oE '[a-z-]+\([1-8]\)' | sed 's/(\(.\))/.\1/'); do
		[ -e "$SRC/docs/man/$p" ] || missing="$missing docs/man/$p"
	done
	for p in "$SRC"/docs/man/*.[1-8]; do
		p=$(basename "$p")
		doc_block "$1" | grep -qF "${p%.*}(${p##*.})" || missing="$missing (docs/man/$p not named)"
	done
	[ -z "$missing" ] || { echo "missing:$missing"; return 1; }
}

BUILDING="" DEMO=""
for w in $(grep '^@@block ' "$DOC_BLOCKS" | awk '{print $2}'); do
	first=$(doc_block "$w" | head -n 1)
	case $w in "$QUICK"|"$AGENT"|"$NGINX"|"$HAPROXY") continue ;; esac
	case $first in
	'scripts/demo'*)
		DEMO=$w ;;
	'author --tetherctl'*)
		ok "$w: the picture of the parts (not a command)" ;;
	'scripts/package '*|'apt install '*)
		ok "$w: run by tests/system/boot.sh (packages under systemd; the apt blocks from the README's text) # SKIP needs a booted container" ;;
	'--listen '*)
		check "$w: every tether-plane option listed is one it takes" options_taken "$w" "$PLANE_BIN" ;;
	'--plane '*)
		check "$w: every tetherd option listed is one it takes" options_taken "$w" "$AGENT_BIN" ;;
	'docs/protocol.md'*)
		check "$w: the documentation list names what is in the tree, and every man page" doc_list_exists "$w" ;;
	'./autogen.sh'*)
		BUILDING=$w ;;
	*)
		not_ok "$w: a README block that no test runs: '$first' (add it to $T_NAME)" ;;
	esac
done

# ---- the session: quick start, the agent, nginx, haproxy --------------------------
nginx_include=$(grep -o 'include /etc/tether/current/\*\.conf;' "$README" | head -n 1 | doc_subst)
[ -n "$nginx_include" ] || not_ok "the README gives the include line of the operator's nginx.conf"
haproxy_cmd=$(tr '\n' ' ' <"$README" | grep -o '`haproxy -W [^`]*`' | head -n 1 | tr -d '`' | tr -s ' ' | doc_subst)
[ -n "$haproxy_cmd" ] || not_ok "the README gives the command that starts haproxy"

doc_session_begin "$WORK/readme-session.sh"
cat >>"$DOC_SESSION" <<'EOF'
# what each command that runs until Ctrl-C is for, seen before the Ctrl-C
doc_plane_version() { curl -fsS "$TETHER_PLANE/healthz" | jq -r .version; }
doc_node_is() { # JQ over the plane's record of web-1
	curl -fsS -H "Authorization: Bearer $(cat "$TETHER_TOKEN_FILE")" "$TETHER_PLANE/v1/nodes/web-1" | jq -e "$1"
}
doc_forever_stream() { __wait 20 grep -q '^event: ' "$1"; }
doc_forever_watch() {
	# a change made in another terminal once watch says it is subscribed
	# (events from then on), and watch shows it
	__wait 20 grep -q '^tetherctl: watching ' "$1" || return 1
	echo '{"path":"watched.txt","content":"seen\n","mode":"0644"}' |
		"$DOC_WORK/plain/tetherctl" put file/watched - >/dev/null &&
		__wait 20 grep -q "version $(doc_plane_version)" "$1"
}
doc_change() { # a change another terminal makes: cluster/web on another port
	echo "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":$1}],\"lb\":\"round_robin\"}" |
		"$DOC_WORK/plain/tetherctl" put cluster/web - >/dev/null
}
doc_synced() { # the agent and the plane agree it runs the plane's version
	local v
	v=$(doc_plane_version)
	[ "$(jq -r '.state + " " + (.version|tostring)' "$DOC_STATE/status.json")" = "synced $v" ] &&
		doc_node_is ".acked_version == $v${1:+ and $1}"
}
doc_marker_is_current() { # the marker answers the generation current points at
	[ "gen-$(curl -s --max-time 2 "http://127.0.0.1:$DOC_MARK/tether-generation")" = \
		"$(readlink "$DOC_WORK/etc/tether/current")" ]
}
doc_forever_nginx() { # a change reaches nginx: reloaded, its health probed, ACKed healthy
	__wait 30 doc_synced && __wait 10 doc_marker_is_current || return 1
	doc_change 9002 || return 1
	__wait 30 doc_synced ".healthy == true" && __wait 10 doc_marker_is_current &&
		grep -q 'server 127.0.0.1:9002' "$DOC_WORK"/etc/tether/current/*.conf
}
doc_forever_haproxy() { # haproxy started on the agent's first generation; a change reloads it
	__wait 30 test -f "$DOC_WORK/etc/tether/current/tether.cfg" || return 1
	$DOC_HAPROXY >>"$DOC_WORK/haproxy.log" 2>&1 &
	echo $! >>"$DOC_BG"
	__wait 10 test -s "$DOC_WORK/run/haproxy.pid" || return 1
	doc_change 9003 || return 1
	__wait 30 doc_synced && grep -q '127.0.0.1:9003' "$DOC_WORK/etc/tether/current/tether.cfg" &&
		__wait 10 grep -q 'Loading success' "$DOC_WORK/haproxy.log" &&
		kill -0 "$(head -n 1 "$DOC_WORK/run/haproxy.pid")"
}
EOF
doc_forever_kind() { # TEXT: the kind of a command that runs until Ctrl-C, or nothing
	case $1 in
	curl\ -N*) echo stream ;;
	*tetherctl\ watch*) echo watch ;;
	tetherd\ *--consumer\ nginx*) echo nginx ;;
	tetherd\ *--consumer\ haproxy*) echo haproxy ;;
	esac
}
doc_session_raw "cd '$SRC' && export PATH='$TOP_BUILDDIR':\$PATH DOC_STATE='$(echo /tmp/agent | doc_subst)' DOC_MARK=$MARK DOC_HAPROXY='$haproxy_cmd'"
[ -n "$QUICK" ] && doc_session_add "$QUICK"
if [ -n "$AGENT" ]; then
	doc_session_add "$AGENT"
	doc_session_raw "__wait 20 grep -qx hello '$WORK/tmp/out/motd.txt'; __ran $AGENT \$? 'the agent wrote motd.txt (hello) under /tmp/out'
kill -INT \$(cat '$WORK/bg.$(printf '%s' "$AGENT" | tr -c 'A-Za-z0-9' _)')   # Ctrl-C: the next agents are the same node" 1
fi
if [ -n "$NGINX" ]; then
	doc_session_raw "cat >'$WORK/nginx.conf' <<'NGINX'
pid $WORK/run/nginx.pid;
error_log $WORK/nginx-error.log notice;
events { worker_connections 64; }
http {
    access_log off;
    server { listen 127.0.0.1:$HP; location = /healthz { return 200 \"ok\\n\"; } }
    $nginx_include
}
NGINX
nginx -p '$WORK' -c '$WORK/nginx.conf'; __ran $NGINX \$? \"the operator's nginx starts\"
__wait 10 test -s '$WORK/run/nginx.pid' && cat '$WORK/run/nginx.pid' >>\"\$DOC_BG\"" 1
	doc_session_add "$NGINX"
	doc_session_raw "kill -QUIT \$(cat '$WORK/run/nginx.pid'); __wait 10 sh -c '! kill -0 \$(cat $WORK/run/nginx.pid)'
rm -rf '$WORK/etc/tether'; mkdir -p '$WORK/etc/tether'   # nginx's generations gone: haproxy starts on the agent's first"
fi
if [ -n "$HAPROXY" ]; then
	doc_session_raw "printf 'global\n    log stderr format raw local0\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n' >'$WORK/etc/haproxy/base.cfg'"
	doc_session_add "$HAPROXY"
fi

doc_session_run
doc_report
doc_stop_bg

# ---- the demo and Building, in a scratch copy of the tree ------------------------------
# A full build of the tree and the demo on it take most of this test's
# time: the plain pass runs them; the sanitizer pass (the same tree built
# with -fsanitize, which Building's plain configure would not make) says so.
if sanitizer_build; then
	for w in $BUILDING $DEMO; do
		ok "$w: $(doc_block "$w" | head -n 1) # SKIP run in the plain pass (a full build of the tree: once per suite)"
	done
	BUILDING="" DEMO=""
fi
if [ -n "$BUILDING" ]; then
	mkdir -p "$WORK/src"
	tar -C "$SRC" --exclude=./build --exclude=./.git --exclude=./autom4te.cache -cf - . | tar -C "$WORK/src" -xf -
	cmd=$(doc_block "$BUILDING")
	# make check runs the whole suite, this test included: scripts/test runs it
	run=${cmd% && make check}
	[ "$run" != "$cmd" ] && ok "$BUILDING: 'make check' runs the suite this test is part of # SKIP run by scripts/test"
	if (cd "$WORK/src" && unset MAKEFLAGS MFLAGS MAKELEVEL && nice -n 19 bash -c "$run") >"$WORK/building.log" 2>&1; then
		ok "$BUILDING: $run"
		for b in tether-plane tetherd tetherctl; do
			check "$BUILDING: the build made $b" test -x "$WORK/src/build/$b"
		done
	else
		not_ok "$BUILDING: $run"
		diag "$(tail -n 30 "$WORK/building.log")"
	fi
fi
if [ -n "$DEMO" ]; then
	ok "$DEMO: scripts/test runs the whole suite, this test included # SKIP run by hand and in CI"
	demo=$(doc_block "$DEMO" | grep -o '^scripts/demo\b' | head -n 1)
	if [ -z "$demo" ]; then
		not_ok "$DEMO: the README names scripts/demo"
	elif [ ! -x "$WORK/src/build/tether-plane" ]; then
		not_ok "$DEMO: scripts/demo: not run, Building made no tree to run it in"
	else
		# its build directory, build/demo, is the one Building made (a
		# link): the tree is built once; scripts/deps finds nothing missing
		# or says what is
		ln -s . "$WORK/src/build/demo"
		if (cd "$WORK/src" && unset MAKEFLAGS MFLAGS MAKELEVEL && nice -n 19 $demo) >"$WORK/demo.log" 2>&1 &&
			grep -q '^Demo finished' "$WORK/demo.log"; then
			ok "$DEMO: $demo runs to its end (Demo finished)"
		else
			not_ok "$DEMO: $demo runs to its end (Demo finished)"
			diag "$(tail -n 30 "$WORK/demo.log")"
		fi
	fi
fi

done_testing
