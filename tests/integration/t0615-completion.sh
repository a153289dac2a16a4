#!/usr/bin/env bash
# t0615-completion.sh: contrib/bash-completion/tetherctl, sourced into this
# bash and driven through COMP_WORDS/COMP_CWORD as readline would: commands,
# sub-commands, global and per-command options, option values (files,
# directories, roles, "--opt=value" split at '=' and ':' as readline
# splits), resource names, node ids and token ids from a real plane, and
# nothing (quickly) from an absent or silent plane. Every command,
# sub-command and option 'tetherctl --help' lists is completed, and nothing
# it does not list, so the two cannot drift apart.
. "$(dirname "$0")/lib.sh"

COMPL=$TOP_SRCDIR/contrib/bash-completion/tetherctl
[ -f "$COMPL" ] || bail "no $COMPL"
[ -x "$CTL_BIN" ] || bail "no $CTL_BIN: build first"
# the completion asks 'tetherctl' on the PATH (COMP_WORDS[0])
PATH=$TOP_BUILDDIR:$PATH
# shellcheck source=/dev/null
. "$COMPL" || bail "cannot source $COMPL"
check_eq "it registers _tetherctl for tetherctl" "complete -F _tetherctl tetherctl" "$(complete -p tetherctl 2>&1)"

# comp WORD...: completes with COMP_WORDS=(tetherctl WORD...), the cursor on
# the last word; prints COMPREPLY sorted, on one line.
comp() {
	COMP_WORDS=(tetherctl "$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMP_LINE="${COMP_WORDS[*]}"
	COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	_tetherctl
	printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | one_line
}

# one_line: the lines of stdin sorted (bytewise), on one line (no xargs:
# it would run echo --help)
one_line() {
	LC_ALL=C sort | paste -sd ' ' -
}

# has_all LIST WORD...: every WORD is in the space-separated LIST
has_all() {
	local list=" $1 " w
	shift
	for w in "$@"; do
		[[ $list == *" $w "* ]] || return 1
	done
}

# ---- commands and sub-commands -----------------------------------------------------

check_eq "the commands" "apply approve diff explain export freeze get help keygen log ls nodes put reject revert rm rollout secrets show status sync token ui watch" "$(comp '')"
check_eq "a command by its start" "reject revert rm rollout" "$(comp r)"
check_eq "log takes --json" "--json" "$(comp log --j)"
check_eq "log takes -n" "-n" "$(comp log -n)"
check_eq "get takes --at" "--at" "$(comp get --a)"
check_eq "revert takes --message" "--message" "$(comp revert --m)"
check_eq "rollout's sub-commands" "abort status" "$(comp rollout '')"
check_eq "token's sub-commands" "create ls revoke" "$(comp token '')"
check_eq "token's by their start" "revoke" "$(comp token re)"
check_eq "after global options" "abort status" "$(comp --plane http://h:1 -v rollout '')"
check_eq "help names a command" "token" "$(comp help to)"
check_eq "help names a sub-command" "abort status" "$(comp help rollout '')"
check_eq "nothing after a complete command" "" "$(comp rollout abort '')"
check_eq "explain: the types" "cluster file guard listener route secret" "$(comp explain '')"
check_eq "explain: a type by its start" "route" "$(comp explain ro)"
check_eq "explain: TYPE. and the fields of the table (no plane asked)" \
	"route.timeout route.timeout.connect route.timeout.read route.timeout.send" "$(comp explain route.ti)"
check_eq "explain: an array's members without []" "cluster.endpoints.port" "$(comp explain cluster.endpoints.p)"
check_eq "explain takes --json and --man" "--json --man" "$( (comp explain --j; comp explain --m) | one_line)"

# ---- options --------------------------------------------------------------------------------

GLOBAL="--ca-file --cert --help --key --plane --token-file --verbose --version"
check_eq "the global options" "$GLOBAL" "$(comp --)"
check_eq "an option by its start" "--token-file" "$(comp --to)"
# shellcheck disable=SC2086
check_eq "nodes takes --json too" "$(printf '%s\n' $GLOBAL --json | one_line)" "$(comp nodes --)"
check "token create takes --node, --role, --name and --json" has_all "$(comp token create --)" --node --role --name --json
check_eq "status: --state-dir and --json" "--state-dir" "$(comp status --st)"
# shellcheck disable=SC2086
check_eq "rollout abort takes --json" "$(printf '%s\n' $GLOBAL --json | one_line)" "$(comp rollout abort --)"
check_eq "revert takes --now" "--now" "$(comp revert --no)"
check_eq "export takes only --force" "$(printf '%s\n' $GLOBAL --force | one_line)" "$(comp export x --)"
check_eq "options after a global option and its value" "--json" "$(comp --plane http://h:1 token ls --j)"
check_eq "'--' ends the options" "" "$(comp ls -- --j)"

# ---- option values --------------------------------------------------------------------------

check_eq "--role's values" "admin operator reader relay" "$(comp token create --role '')"
check_eq "--role's values by their start" "operator" "$(comp token create --role op)"
check_eq "--role=VALUE in one word" "reader relay" "$(comp token create --role=r)"
# readline splits at '=' and ':' (COMP_WORDBREAKS)
check_eq "--role = VALUE, as readline splits it" "admin" "$(comp token create --role = ad)"
check_eq "--role = (nothing yet)" "admin operator reader relay" "$(comp token create --role =)"
check_eq "a URL split at ':' is one value" "--json" "$(comp --plane = http : //h : 7070 nodes --j)"
check_eq "--plane's value is the user's" "" "$(comp --plane '')"

mkdir -p "$WORK/files/dir1" "$WORK/files/dir2"
: >"$WORK/files/tok.a"
: >"$WORK/files/tok.b"
: >"$WORK/files/batch.json"
cd "$WORK/files" || bail "no $WORK/files"
check_eq "--token-file: files" "tok.a tok.b" "$(comp --token-file tok)"
check_eq "--ca-file=FILE in one word" "batch.json" "$(comp --ca-file=ba)"
check_eq "--state-dir: directories only" "dir1 dir2" "$(comp status --state-dir '')"
check_eq "apply: a file" "batch.json" "$(comp apply b)"
check_eq "apply: or -" "-" "$(comp apply -)"
check_eq "put NAME: then a file" "tok.a tok.b" "$(comp put cluster/web tok)"
check_eq "keygen: a file" "batch.json" "$(comp keygen ba)"
check_eq "a file under a directory" "dir1/x" "$(: >dir1/x; comp apply dir1/)"
cd "$WORK" || bail "no $WORK"

# ---- names from the plane ---------------------------------------------------------------------

check_eq "a name starts with its type" "cluster/ file/ guard/ listener/ route/ secret/" "$(comp get '')"
check_eq "a type by its start" "cluster/" "$(comp rm cl)"
start_plane p
put cluster/web '{"endpoints":[{"address":"127.0.0.1","port":9001}]}' >/dev/null
put cluster/api '{"endpoints":[{"address":"127.0.0.1","port":9002}]}' >/dev/null
put file/f1 '{"path":"f1","content":"x"}' >/dev/null
check_eq "get: the plane's names of a type" "cluster/api cluster/web" "$(comp --plane "$PLANE_URL" get cluster/)"
check_eq "rm: a name by its start" "cluster/web" "$(comp --plane "$PLANE_URL" rm cluster/w)"
check_eq "put: with the URL as readline splits it" "file/f1" \
	"$(comp --plane = http : //127.0.0.1 : "$PLANE_PORT" put file/)"
check_eq "TETHER_PLANE when the line has no --plane" "cluster/api cluster/web" \
	"$(TETHER_PLANE=$PLANE_URL comp ls cluster/)"
check_eq "TETHERCTL_COMPLETION_REMOTE=0 never asks" "" \
	"$(TETHERCTL_COMPLETION_REMOTE=0 comp --plane "$PLANE_URL" get cluster/)"
check_eq "no name where a command takes none" "" "$(comp --plane "$PLANE_URL" get cluster/web cl)"

start_agent n1 --consumer files
check "the agent connects" wait_until 10 node_acked n1 3
check_eq "token create --node: the plane's nodes" "n1" "$(comp --plane "$PLANE_URL" token create --node '')"
check_eq "secrets revoke: the plane's nodes" "n1" "$(comp --plane "$PLANE_URL" secrets revoke '')"
check_eq "secrets' sub-commands" "approve reseal revoke status" "$(comp secrets '')"
check_eq "--recovery-key: files" "batch.json" "$(cd "$WORK/files" && comp secrets reseal --recovery-key ba)"
TOK=$("$CTL_BIN" --plane "$PLANE_URL" token create --role reader --json 2>/dev/null | jq -r .id)
check "a token was made to revoke" test -n "$TOK" -a "$TOK" != null
check_eq "token revoke: the plane's token ids" "$TOK" "$(comp --plane "$PLANE_URL" token revoke '')"

# nothing, and soon, from a plane that is not there or never answers
t0=$(date +%s%N)
out=$(comp --plane http://127.0.0.1:1 get cluster/)
t1=$(date +%s%N)
check_eq "nothing from a plane that is not there" "" "$out"
check "and at once (under 2 s)" test $(((t1 - t0) / 1000000)) -lt 2000
if command -v node >/dev/null 2>&1; then
	node -e 'const s = require("net").createServer(() => {}); s.listen(0, "127.0.0.1", () => console.log("listening " + s.address().port))' \
		>"$WORK/silent.port" 2>&1 &
	track_pid $!
	wait_until 10 grep -q '^listening ' "$WORK/silent.port" || bail "the silent server did not start"
	SILENT=$(awk '/^listening /{print $2}' "$WORK/silent.port")
	t0=$(date +%s%N)
	out=$(TETHERCTL_COMPLETION_TIMEOUT=1 comp --plane "http://127.0.0.1:$SILENT" get cluster/)
	t1=$(date +%s%N)
	check_eq "nothing from a plane that never answers" "" "$out"
	check "within TETHERCTL_COMPLETION_TIMEOUT (1 s, under 4 s)" test $(((t1 - t0) / 1000000)) -lt 4000
else
	ok "a silent plane # SKIP node is not installed"
fi

# ---- the same as tetherctl --help, both ways -------------------------------------------------------

HELP=$("$CTL_BIN" --help) || bail "tetherctl --help failed"
# "  NAME [SUB] ARGS   HELP" lines between "commands:" and the blank line
CMDS=$(awk '/^commands:/{on=1; next} on && /^$/{exit} on' <<<"$HELP")
[ -n "$CMDS" ] || bail "no commands in tetherctl --help"
names=$(awk '{print $1}' <<<"$CMDS" | LC_ALL=C sort -u | one_line)
diag "tetherctl --help lists: $names"
check_eq "every command tetherctl --help lists is completed, and no other" "$names" "$(comp '')"
while read -r cmd second rest; do
	sub=""
	[[ $second =~ ^[a-z][a-z-]*$ ]] && sub=$second
	words=("$cmd")
	[ -n "$sub" ] && words+=("$sub")
	if [ -n "$sub" ]; then
		helpsubs=$(awk -v c="$cmd" '$1 == c {print $2}' <<<"$CMDS" | LC_ALL=C sort -u | one_line)
		check_eq "'$cmd' completes the sub-commands --help lists" "$helpsubs" "$(comp "$cmd" '')"
	fi
	# the options in the usage, and the global ones
	want=$(grep -o -- '--[a-z][a-z-]*' <<<"$second $rest" | LC_ALL=C sort -u | one_line)
	got=$(comp "${words[@]}" --)
	# shellcheck disable=SC2086
	check "'${words[*]}' completes its options ($want)" has_all "$got" $want
	# shellcheck disable=SC2086
	extra=$(comm -13 <(printf '%s\n' $GLOBAL $want | LC_ALL=C sort -u) <(printf '%s\n' $got | LC_ALL=C sort -u) | one_line)
	check_eq "'${words[*]}' completes no option its usage in --help lacks" "" "$extra"
done < <(sed 's/^  //; s/ \{2,\}.*//' <<<"$CMDS")
OPTS=$(awk '/^options:/{on=1; next} on && /^$/{exit} on' <<<"$HELP" | grep -o -- '--[a-z][a-z-]*' | LC_ALL=C sort -u | one_line)
check_eq "the global options are those tetherctl --help lists" "$OPTS" "$(comp --)"

done_testing
