#!/usr/bin/env bash
# t0016-docs.sh: the docs render and point only at what users have.
# scripts/check-docs passes on the tree: every man page lints clean under
# mandoc -T lint and groff -ww, no .TP entry's synopsis spills into its
# text (tetherctl(1)'s log and revert once did), and no doc names a .md
# file or a ../shared path that is not in the tree. Then the check is
# shown to catch each fault, on broken copies in a temporary folder, and
# man -l renders tetherctl(1)'s log and revert entries on one line each.
# Needs no binaries.
. "$(dirname "$0")/lib.sh"

SRC=$TOP_SRCDIR
T=$WORK

out=$("$SRC/scripts/check-docs" 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q '^check-docs: 0 problems$' <<<"$out"; then
	ok "scripts/check-docs: 0 problems in the man pages and docs"
else
	not_ok "scripts/check-docs: 0 problems in the man pages and docs (exit $rc)"
	diag "$(head -n 60 <<<"$out")"
fi

# a synopsis split over two lines after .TP (the old log entry)
cat >"$T/split.1" <<'PAGE'
.TH SPLIT 1
.SH NAME
split \- a test page
.SH COMMANDS
.TP
.BR "log " [\fINAME\fR] " " [ \-n
.IR N ]
The versions.
PAGE
out=$("$SRC/scripts/check-docs" "$T/split.1" 2>&1)
check "a .TP synopsis split over two lines fails the check" \
	test $? -eq 1 -a -n "$(grep 'split.1:6: a .TP tag runs past its line' <<<"$out")"

# two .TP in a row: mandoc's "line scope broken" (the old tetherd(8))
cat >"$T/twice.8" <<'PAGE'
.TH TWICE 8
.SH NAME
twice \- a test page
.SH OPTIONS
.TP
.TP
.B \-\-x
The x.
PAGE
out=$("$SRC/scripts/check-docs" "$T/twice.8" 2>&1)
check "mandoc's warnings fail the check" \
	test $? -eq 1 -a -n "$(grep 'line scope broken' <<<"$out")"

# groff -ww's warnings fail it too (an unknown request)
printf '.TH W 1\n.SH NAME\nw \\- a test page\n.nosuchrequest\n' >"$T/w.1"
out=$("$SRC/scripts/check-docs" "$T/w.1" 2>&1)
check "groff -ww's warnings fail the check" test $? -eq 1 -a -n "$(grep 'w.1: groff: .*warning' <<<"$out")"

# a doc naming a file users do not have (a copy of the tree's layout)
mkdir -p "$T/tree/scripts" "$T/tree/docs/man"
cp "$SRC/scripts/check-docs" "$T/tree/scripts/"
cp "$SRC/docs/man/"*.[1-8] "$T/tree/docs/man/"
printf 'tether\n' >"$T/tree/README"
printf 'NEWS\n' >"$T/tree/NEWS"
printf '# P\nThe contract is INTERFACE.md; see ../shared/notes and protocol.md.\n' >"$T/tree/docs/protocol.md"
out=$("$T/tree/scripts/check-docs" 2>&1)
rc=$?
check "a doc naming INTERFACE.md fails the check" \
	test $rc -eq 1 -a -n "$(grep 'docs/protocol.md:2: names INTERFACE.md, which is not in the tree' <<<"$out")"
check "a doc naming ../shared fails the check" test -n "$(grep 'names ../shared/notes, which users do not have' <<<"$out")"
check "a doc naming a page that exists passes" test -z "$(grep 'names protocol.md' <<<"$out")"

# what a user sees: man -l puts each synopsis on its own line
if command -v man >/dev/null 2>&1; then
	page=$(MANWIDTH=100 man -l "$SRC/docs/man/tetherctl.1" 2>/dev/null)
	check "man -l: log's synopsis on one line" grep -qE '^ +log \[NAME\] \[-n N\] \[--json\]$' <<<"$page"
	check "man -l: revert's synopsis on one line" \
		grep -qE '^ +revert VERSION \[--now\] \[--message TEXT\] \[--override REASON\] \[--json\]$' <<<"$page"
fi

done_testing
