#!/usr/bin/env bash
# t0015-layout.sh: the layout of the tree keeps to its picture. Every
# #include points down (scripts/check-includes, against the rules that
# docs/HACKING.md states), no two wings include each other, the picture
# (docs/architecture.dot) renders with a label for every folder of plane/
# and agent/, and docs/architecture.md names only files that exist, so its
# walk of one write cannot drift from the code. Needs no binaries.
. "$(dirname "$0")/lib.sh"

SRC=$TOP_SRCDIR
DOT_FILE=$SRC/docs/architecture.dot
DOC=$SRC/docs/architecture.md
FOLDERS="api http rollout core net persist sqlite etcd relay consumer traffic"

# diag_out TEXT: TEXT as TAP diagnostics, at most 80 lines of it
diag_out() {
	local n
	n=$(printf '%s\n' "$1" | wc -l)
	diag "$(printf '%s\n' "$1" | head -n 80)"
	[ "$n" -le 80 ] || diag "... ($((n - 80)) more lines)"
}

# ---- the include rules ---------------------------------------------------------------

out=$(cd "$SRC" && scripts/check-includes 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q 'check-includes: 0 includes against the rules' <<<"$out"; then
	ok "scripts/check-includes: 0 includes against the rules"
else
	not_ok "scripts/check-includes: 0 includes against the rules (exit $rc)"
	diag_out "$out"
fi

out=$(cd "$SRC" && scripts/check-includes --loops 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q '^0 include loops between wings' <<<"$out"; then
	ok "scripts/check-includes --loops: 0 include loops between wings"
else
	not_ok "scripts/check-includes --loops: 0 include loops between wings (exit $rc)"
	diag_out "$out"
fi

# the check can fail: with a rule that lets core/ include nothing below it,
# core's includes of persist/ and net/ are each reported, and it exits 1
sed 's#^    plane/core/ .*#    plane/core/            ->#' "$SRC/docs/HACKING.md" >"$WORK/HACKING.md"
out=$(cd "$SRC" && scripts/check-includes --rules "$WORK/HACKING.md" 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q '^plane/core/hub.c:[0-9]*: #include "persist/persist.h"' <<<"$out" &&
	grep -q '^plane/core/events.h:[0-9]*: #include "net/httpd.h"' <<<"$out"; then
	ok "a stricter rule is enforced: core's includes of persist/ and net/ reported, exit 1"
else
	not_ok "a stricter rule is enforced: core's includes of persist/ and net/ reported, exit 1 (exit $rc)"
	diag_out "$out"
fi

# ---- the picture ------------------------------------------------------------------------

SVG=$WORK/architecture.svg
if ! command -v dot >/dev/null 2>&1; then
	why="dot not found: scripts/deps installs graphviz"
	not_ok "docs/architecture.dot renders to svg: $why"
	not_ok "the svg is well-formed XML: $why"
	not_ok "the svg labels every folder ($FOLDERS): $why"
	not_ok "docs/architecture.svg is what make docs renders from the .dot: $why"
else
	if out=$(dot -Tsvg "$DOT_FILE" -o "$SVG" 2>&1) && [ -s "$SVG" ]; then
		ok "docs/architecture.dot renders to svg"
	else
		not_ok "docs/architecture.dot renders to svg"
		diag_out "$out"
	fi
	if out=$(python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$SVG" 2>&1); then
		ok "the svg is well-formed XML"
	else
		not_ok "the svg is well-formed XML"
		diag_out "$out"
	fi
	# a label is a word "NAME/" or "PARENT/NAME/" in one of the svg's texts
	# shellcheck disable=SC2086
	missing=$(python3 - "$SVG" $FOLDERS 2>&1 <<-'EOF'
		import sys
		import xml.etree.ElementTree as ET
		try:
		    root = ET.parse(sys.argv[1]).getroot()
		except Exception as e:
		    print('(no svg to read: %s)' % e)
		    sys.exit(0)
		words = set()
		for el in root.iter():
		    if el.tag.rsplit('}', 1)[-1] == 'text' and el.text:
		        for w in el.text.split():
		            w = w.strip('()[],;:')
		            if w.endswith('/'):
		                words.add(w.rstrip('/').rsplit('/', 1)[-1])
		print(' '.join(f for f in sys.argv[2:] if f not in words))
	EOF
	)
	check_eq "the svg labels every folder ($FOLDERS); missing:" "" "$missing"
	# the picture docs/architecture.md shows is the one `make docs` makes
	if cmp -s "$SVG" "$SRC/docs/architecture.svg"; then
		ok "docs/architecture.svg is what make docs renders from the .dot"
	else
		not_ok "docs/architecture.svg is what make docs renders from the .dot (run make docs, commit the svg)"
	fi
fi

# ---- the page names only files that exist ----------------------------------------------

if [ ! -f "$DOC" ]; then
	not_ok "docs/architecture.md names only files that exist: no $DOC"
else
	# plane/..., agent/..., ctl/..., common/... paths as they are; a wing's
	# own form (api/resources.c, sqlite/store.c, consumer/reload.c) under
	# plane/, plane/persist/ or agent/; a bare name (plane.c) anywhere in
	# the four trees
	out=$(python3 - "$SRC" "$DOC" 2>&1 <<-'EOF'
		import os
		import re
		import sys
		top, doc = sys.argv[1], sys.argv[2]
		roots = ('plane', 'agent', 'ctl', 'common')
		text = open(doc, encoding='utf-8').read()
		names = sorted(set(re.findall(r'(?<![\w./-])((?:[\w-]+/)*[\w-]+\.[ch])(?!\w|\.\w)', text)))
		bases = set()
		for r in roots:
		    for _d, _dirs, files in os.walk(os.path.join(top, r)):
		        bases.update(files)
		def resolves(n):
		    if n.split('/', 1)[0] in roots:
		        return os.path.isfile(os.path.join(top, n))
		    if '/' in n:
		        return any(os.path.isfile(os.path.join(top, pre, n)) for pre in ('plane', 'plane/persist', 'agent'))
		    return n in bases
		bad = [n for n in names if not resolves(n)]
		print('checked %d names' % len(names))
		for n in bad:
		    print('missing: ' + n)
	EOF
	)
	diag "$(head -n 1 <<<"$out")"
	bad=$(grep '^missing: ' <<<"$out" | sed 's/^missing: //' | paste -sd ' ' -)
	if grep -q '^checked [1-9]' <<<"$out" && [ -z "$bad" ]; then
		ok "docs/architecture.md names only files that exist"
	else
		not_ok "docs/architecture.md names only files that exist"
		diag_out "$(grep -v '^checked ' <<<"$out")"
	fi
fi

done_testing
