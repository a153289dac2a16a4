#!/usr/bin/env bash
# tests/system/boot.sh: tether's packages installed and booted under a real
# systemd, in a Debian 12 container (mmdebstrap + systemd-nspawn), checked
# the way an operator would use them. Run as root; prints TAP.
#
#  1. scripts/package builds the .deb and .rpm packages (lintian, rpmlint);
#     the packages of the previous commit are built too (cached by commit
#     id under build/system/prev/) for the upgrade.
#  2. A Debian 12 root file system with systemd, dbus, nginx, haproxy, rpm
#     and the packages' run-time dependencies, and without procps (nothing
#     of tether may need it; mmdebstrap, cached under
#     build/system/rootfs-HASH.tar, HASH of the package list and the apt
#     sources) is unpacked into a scratch directory and booted with
#     systemd-nspawn --boot (private network: everything runs on the
#     container's loopback); commands run in it through nsenter.
#  3. The previous commit's packages are installed and configured (the
#     plane with its generated admin token, a node token, agent.conf
#     edited, the nginx drop-in), then upgraded to the current ones: the
#     conffile edit and last-good stay. Without an earlier commit that
#     builds packages, the current ones are installed and the upgrade
#     checks are skipped, saying so.
#  4. Checks: the units verify and their exposure; systemctl reload works
#     without procps; the agent waits for its configuration (skipped, not
#     failed) and tetherd.path starts it; the sandbox is enforced; nginx,
#     started by its own unit, routes as the plane says; a change reaches
#     it; a change nginx refuses is NACKed while nginx serves on; the agent
#     boots from last-good with the plane stopped; systemd restarts it
#     after SIGKILL and after a stalled loop (watchdog), and the plane when
#     one of its threads stops turning; the agent switched to haproxy (the
#     haproxy drop-in) applies a version haproxy serves; remove keeps
#     state, purge leaves nothing behind.
#  5. The RPMs installed in the same container with Debian's rpm (--nodeps:
#     the libraries are dpkg's): their scriptlets, the plane and the waiting
#     agent as for the .debs, then rpm -e and what it keeps.
#
# A machine that cannot boot a container (not root, no systemd-nspawn or
# mmdebstrap, no Debian archive for mmdebstrap) gets "1..0 # SKIP reason".
# Everything runs in a scratch copy that the exit trap removes, after it
# powers the container off.
# Scripts for the container are single-quoted on purpose (they expand
# there), and package lists are split on purpose.
# shellcheck disable=SC2016,SC2046,SC2086
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
sys=${TETHER_SYSTEM_DIR:-$top/build/system}
t_start=$(date +%s)

skip_all() {
	echo "1..0 # SKIP $*"
	exit 0
}

[ "$(id -u)" = 0 ] || skip_all "not root (systemd-nspawn needs root)"
for c in systemd-nspawn mmdebstrap nsenter dpkg-deb git sha256sum openssl; do
	command -v "$c" >/dev/null 2>&1 || skip_all "no $c on this machine"
done
[ -d /sys/fs/cgroup ] || skip_all "no cgroup file system (systemd cannot boot in a container)"

mkdir -p "$sys"
log=$sys/boot.log
: >"$log"
say() { echo "[$(($(date +%s) - t_start))s] $*" >>"$log"; }

# ---- TAP ---------------------------------------------------------------------------
T_N=0
T_FAILED=0
ok() { T_N=$((T_N + 1)); echo "ok $T_N - $*"; }
not_ok() { T_N=$((T_N + 1)); T_FAILED=$((T_FAILED + 1)); echo "not ok $T_N - $*"; }
skip() { T_N=$((T_N + 1)); echo "ok $T_N # SKIP $*"; }
diag() { printf '%s\n' "$*" | sed 's/^/# /'; }
# check DESCRIPTION COMMAND...: ok when the command succeeds; its output
# goes to the diagnostics when it does not
check() {
	local desc=$1 out
	shift
	if out=$("$@" 2>&1); then
		ok "$desc"
	else
		not_ok "$desc"
		diag "$out"
	fi
	printf '%s\n' "$out" >>"$log"
}
check_eq() {
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1"
		diag "expected: $2"
		diag "actual:   $3"
	fi
}
bail() {
	echo "Bail out! $*"
	diag "details: $log"
	exit 1
}
phase_start=$t_start
timing() {
	local now
	now=$(date +%s)
	diag "timing: $1 $((now - phase_start)) s"
	phase_start=$now
}

# ---- the container's lifetime ------------------------------------------------------
run=""
NSPAWN=""
CT_PID=""
cleanup() {
	rm -f "$sys"/rootfs-*.tmp.tar
	if [ -n "$NSPAWN" ] && kill -0 "$NSPAWN" 2>/dev/null; then
		# SIGTERM makes systemd-nspawn power the container off
		kill -TERM "$NSPAWN" 2>/dev/null
		for _ in $(seq 1 100); do
			kill -0 "$NSPAWN" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$NSPAWN" 2>/dev/null
		wait "$NSPAWN" 2>/dev/null
	fi
	[ -z "$run" ] || rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ct CMD...: run CMD in the container (all its namespaces), with a clean
# environment; cts SCRIPT: run a bash script there, with the helpers of
# /usr/local/lib/tether-test.sh loaded
ct() {
	nsenter -t "$CT_PID" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive "$@"
}
cts() {
	ct bash -c ". /usr/local/lib/tether-test.sh
$1"
}

# ---- 1. the packages ------------------------------------------------------------------
pkgs=$sys/pkgs
rm -rf "$pkgs"
say "scripts/package $pkgs"
if ! "$top/scripts/package" "$pkgs" >"$sys/package.log" 2>&1; then
	echo "not ok 1 - scripts/package builds the packages"
	diag "$(tail -n 30 "$sys/package.log")"
	echo "1..1"
	exit 1
fi
t_package=$(($(date +%s) - phase_start))
phase_start=$(date +%s)
cur_debs=$(ls "$pkgs"/*.deb)

# ---- 2. the root file system's package list ----------------------------------------------
# systemd as init, dbus, nginx and haproxy (the consumers), rpm (to install
# the RPMs), the tools the checks use, and the packages' run-time
# dependencies (the first of each alternative, from the .debs). Not procps:
# a minimal Debian lacks it (and with it /bin/kill), so the units and the
# checks in the container do without it.
depends_of() {
	for f in "$@"; do dpkg-deb -f "$f" Depends; done |
		tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/[[:space:]]//g' | grep -v '^$' | sort -u
}
list=$(printf '%s\n' systemd systemd-sysv dbus nginx haproxy rpm curl ca-certificates jq iproute2 $(depends_of $cur_debs) |
	sort -u | xargs)
sources=""
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] && grep -q '^[^#]' "$f" && sources="$sources $f"
done
key=$( (echo "bookworm minbase $list"; cat $sources /dev/null) | sha256sum | cut -c1-16)
rootfs=$sys/rootfs-$key.tar

# ---- 3. the previous packages ----------------------------------------------------------
# The previous commit: HEAD's parent, or HEAD itself when the working tree
# has changes (scripts/package versions that build .dirty, newer than HEAD).
# Its packages are cached by commit id; a commit whose packages do not
# build is remembered (.failed) and the one before it tried.
prev=""
prev_why="no earlier commit builds packages"
if git -C "$top" rev-parse -q --verify HEAD >/dev/null; then
	if [ -n "$(git -C "$top" status --porcelain 2>/dev/null)" ]; then
		start=HEAD
	else
		start=HEAD~1
	fi
	tried=0
	for c in $(git -C "$top" rev-list --first-parent --max-count=30 "$start" 2>/dev/null); do
		git -C "$top" cat-file -e "$c:scripts/package" 2>/dev/null || break
		if [ -f "$sys/prev/$c.failed" ]; then
			prev_why="$prev_why (${c:0:7}'s packages did not build)"
			continue
		fi
		if ! ls "$sys/prev/$c"/*.deb >/dev/null 2>&1; then
			[ "$tried" -lt 2 ] || break
			tried=$((tried + 1))
			say "scripts/package --rev $c (previous packages)"
			rm -rf "$sys/prev/$c"
			if ! TETHER_PACKAGE_FORMATS=deb "$top/scripts/package" --rev "$c" "$sys/prev/$c" \
				>"$sys/prev-$c.log" 2>&1; then
				rm -rf "$sys/prev/$c"
				mkdir -p "$sys/prev"
				mv "$sys/prev-$c.log" "$sys/prev/$c.failed"
				prev_why="$prev_why (${c:0:7}'s packages did not build)"
				continue
			fi
			rm -f "$sys/prev-$c.log"
		fi
		prev=$c
		break
	done
	# the previous packages of other commits are not needed any more
	for d in "$sys"/prev/*/; do
		[ -d "$d" ] && [ "${d%/}" != "$sys/prev/$prev" ] && rm -rf "$d"
	done
fi
t_prev=$(($(date +%s) - phase_start))
phase_start=$(date +%s)
# the previous packages must install in the root file system too: what
# they need and the current ones do not (a library the new version
# dropped) goes into it, as it was on a host that ran them
if [ -n "$prev" ]; then
	missing=$(depends_of "$sys/prev/$prev"/*.deb | while read -r d; do
		case " $list " in *" $d "*) ;; *) echo "$d" ;; esac
	done | xargs)
	if [ -n "$missing" ]; then
		say "the previous packages (${prev:0:7}) also need: $missing"
		list=$(printf '%s\n' $list $missing | sort -u | xargs)
		key=$( (echo "bookworm minbase $list"; cat $sources /dev/null) | sha256sum | cut -c1-16)
		rootfs=$sys/rootfs-$key.tar
	fi
fi

# ---- 4. the root file system ---------------------------------------------------------------
# (made after the previous packages, not beside them: both want the CPU)
rootfs_how="cached"
if [ ! -f "$rootfs" ]; then
	rootfs_how="made"
	say "mmdebstrap: $list"
	if ! mmdebstrap --variant=minbase --include="$(echo "$list" | tr ' ' ',')" \
		--aptopt='Acquire::Retries "3"' bookworm "$rootfs.tmp.tar" ${sources:-http://deb.debian.org/debian} \
		>"$sys/mmdebstrap.log" 2>&1; then
		rm -f "$rootfs.tmp.tar"
		if grep -Eqi 'could not resolve|temporary failure|failed to fetch|unable to connect|network is unreachable|connection (refused|timed out)' \
			"$sys/mmdebstrap.log"; then
			skip_all "mmdebstrap cannot reach the Debian archive (see $sys/mmdebstrap.log)"
		fi
		echo "not ok 1 - mmdebstrap makes a Debian 12 root file system"
		diag "$(tail -n 20 "$sys/mmdebstrap.log")"
		echo "1..1"
		exit 1
	fi
	mv "$rootfs.tmp.tar" "$rootfs"
	# one root file system is enough: the others' package lists are gone
	for f in "$sys"/rootfs-*.tar; do
		[ "$f" = "$rootfs" ] || rm -f "$f"
	done
fi
t_rootfs=$(($(date +%s) - phase_start))
phase_start=$(date +%s)

# From here on the machine can boot a container: every step is a test point.
ok "scripts/package builds the .deb and .rpm packages in $t_package s ($(echo $cur_debs | wc -w) .debs)"
diag "$(grep -E '^  /' "$sys/package.log" | sed 's/^  //')"
if grep -q '^lintian: no errors, no warnings' "$sys/package.log"; then
	ok "lintian: no errors, no warnings"
else
	not_ok "lintian: no errors, no warnings"
	diag "$(sed -n '/^lintian:/,/^rpmlint:/p' "$sys/package.log")"
fi
if grep -q '^rpmlint: no errors' "$sys/package.log"; then
	ok "rpmlint: no errors"
else
	not_ok "rpmlint: no errors"
	diag "$(sed -n '/^rpmlint:/,$p' "$sys/package.log")"
fi
# the RPMs' contents, as Fedora would install them (section 14 installs
# them in the container)
rpm_files() {
	rpm -qp --qf '[%{FILENAMES} %{FILEFLAGS:fflags} %{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME}\n]' \
		"$pkgs"/*.rpm 2>/dev/null
}
want_rpm="/etc/tether/plane.conf cn -rw-r--r-- root:root
/etc/tether/agent.conf cn -rw-r--r-- root:root
/usr/sbin/tether-plane  -rwxr-xr-x root:root
/usr/sbin/tetherd  -rwxr-xr-x root:root
/usr/bin/tetherctl  -rwxr-xr-x root:root
/usr/lib/systemd/system/tether-plane.service  -rw-r--r-- root:root
/usr/lib/systemd/system/tetherd.service  -rw-r--r-- root:root
/usr/lib/systemd/system/tetherd.path  -rw-r--r-- root:root
/usr/lib/sysusers.d/tether-plane.conf  -rw-r--r-- root:root
/usr/share/tether/systemd/tetherd.service.d/nginx.conf  -rw-r--r-- root:root
/usr/share/tether/systemd/tetherd.service.d/haproxy.conf  -rw-r--r-- root:root
/var/lib/tether  drwx------ tether:tether
/var/lib/tetherd  drwx------ root:root"
if command -v rpm >/dev/null 2>&1 && ls "$pkgs"/*.rpm >/dev/null 2>&1; then
	have_rpm=$(rpm_files)
	missing_rpm=$(printf '%s\n' "$want_rpm" | while IFS= read -r l; do
		printf '%s\n' "$have_rpm" | grep -qxF -- "$l" || echo "$l"
	done)
	check_eq "the RPMs hold the programs, units, sysusers file, drop-ins, state directories and %config(noreplace) conffiles" \
		"" "$missing_rpm"
	check "the tether-plane RPM makes the user in %pre and the admin token in %post" \
		sh -c "rpm -qp --scripts '$(ls "$pkgs"/tether-plane-*.rpm)' | grep -q 'useradd -r -g tether' &&
		       rpm -qp --scripts '$(ls "$pkgs"/tether-plane-*.rpm)' | grep -q 'admin.token'"
else
	skip "the RPMs' contents: no rpm here"
	skip "the RPM's scriptlets: no rpm here"
fi
diag "timing: packages $t_package s, previous packages $t_prev s, root file system $t_rootfs s ($rootfs_how)"

run=$(mktemp -d "$sys/run.XXXXXX")
root=$run/root
mkdir -p "$root"
tar -xf "$rootfs" -C "$root" || bail "cannot unpack $rootfs"
mkdir -p "$root/root/pkgs/cur" "$root/root/pkgs/prev" "$root/root/pkgs/rpm"
cp $cur_debs "$root/root/pkgs/cur/"
cp "$pkgs"/*.rpm "$root/root/pkgs/rpm/" 2>/dev/null
[ -z "$prev" ] || cp "$sys/prev/$prev"/*.deb "$root/root/pkgs/prev/"

# the helpers the in-container scripts share
mkdir -p "$root/usr/local/lib"
cat >"$root/usr/local/lib/tether-test.sh" <<'EOF'
export TETHER_PLANE=http://127.0.0.1:7070 TETHER_TOKEN_FILE=/etc/tether/admin.token
# wait_until SECONDS COMMAND...
wait_until() {
	local end=$(($(date +%s) + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.2
	done
}
# what nginx answers on the tether listener (port 8080)
body() { curl -s --max-time 2 "http://127.0.0.1:8080${1:-/}"; }
answers() { [ "$(body "${2:-/}")" = "$1" ]; }
st() { jq -r "$1" /var/lib/tetherd/status.json 2>/dev/null; }
# agent_at VERSION [STATE]: status.json says so
agent_at() { [ "$(st .version)" = "$1" ] && [ "$(st .state)" = "${2:-synced}" ]; }
node() { tetherctl nodes --json | jq -c '.[] | select(.node == "web-1")'; }
acked() { node | jq -e --argjson v "$1" '.acked_version == $v' >/dev/null; }
mainpid() { systemctl show -p MainPID --value "$1"; }
restarts() { systemctl show -p NRestarts --value "$1"; }
# put_version NAME JSON: tetherctl put, prints the new version
put_version() { echo "$2" | tetherctl put "$1" - | sed -n 's/^version \([0-9]*\)$/\1/p'; }
# active_again UNIT OLDPID: active with another main pid
active_again() {
	local p
	p=$(mainpid "$1")
	[ "$(systemctl is-active "$1")" = active ] && [ "$p" != 0 ] && [ "$p" != "$2" ]
}
is_active() { [ "$(systemctl is-active "$1")" = active ]; }
# nacked VERSION: the plane shows the node's NACK of VERSION, from nginx
nacked() {
	node | jq -e --argjson v "$1" '.last_nack.version == $v and (.last_nack.error | test("nginx"))' >/dev/null
}
# version_of: the version tetherctl put/apply printed
version_of() { sed -n 's/^version \([0-9]*\)$/\1/p'; }
# exposure UNIT: systemd-analyze security's overall figure
exposure() {
	systemd-analyze security --offline=yes "$1" 2>/dev/null |
		sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}
# with_dropin none|nginx|haproxy COMMAND...: run with only that drop-in
with_dropin() {
	local d=/etc/systemd/system/tetherd.service.d want=$1 rc
	shift
	rm $d/nginx.conf
	[ "$want" = none ] || ln -s /usr/share/tether/systemd/tetherd.service.d/$want.conf $d/
	"$@"
	rc=$?
	rm -f $d/haproxy.conf $d/nginx.conf
	ln -s /usr/share/tether/systemd/tetherd.service.d/nginx.conf $d/nginx.conf
	return $rc
}
# ns PID COMMAND...: COMMAND in PID's mount namespace
ns() { local p=$1; shift; nsenter -t "$p" -m "$@"; }
field() { awk -v k="$2:" '$1 == k {print $2}' /proc/"$1"/status; }
EOF

# ---- 5. boot ------------------------------------------------------------------------------
say "systemd-nspawn --boot -D $root"
systemd-nspawn --boot --register=no --keep-unit --private-network --machine=tether-boot \
	--console=read-only -D "$root" </dev/null >"$run/console.log" 2>&1 &
NSPAWN=$!
for _ in $(seq 1 100); do
	# the container's init: nspawn's child running systemd (not the helper
	# process nspawn forks first)
	CT_PID=$(pgrep -P "$NSPAWN" -x systemd | head -n 1)
	[ -n "$CT_PID" ] && break
	kill -0 "$NSPAWN" 2>/dev/null || break
	sleep 0.1
done
[ -n "$CT_PID" ] || { cp "$run/console.log" "$sys/console.log"; bail "systemd-nspawn did not start a container (see $sys/console.log)"; }
# (until systemd listens, systemctl cannot connect: ask again)
end=$(($(date +%s) + 90))
while :; do
	state=$(timeout 60 nsenter -t "$CT_PID" -a systemctl is-system-running --wait 2>&1)
	case $state in *"connect to bus"* | *"No such file"*) ;; *) break ;; esac
	[ "$(date +%s)" -lt "$end" ] || break
	sleep 0.2
done
if [ "$state" = running ]; then
	ok "the container boots to 'running' under systemd (in $(($(date +%s) - phase_start)) s)"
else
	not_ok "the container boots to 'running' under systemd (it says '$state')"
	diag "$(ct systemctl --failed --no-legend 2>&1)"
	[ "$state" = degraded ] || bail "the container did not boot"
fi
check "nginx runs, started by its own unit (nginx.service's main pid is /run/nginx.pid's)" \
	cts '[ "$(systemctl is-active nginx)" = active ] && [ "$(mainpid nginx)" = "$(cat /run/nginx.pid)" ]'
check "no procps in the container (no ps, pgrep, /bin/kill): what tether runs must do without it" \
	cts '! dpkg-query -W -f="\${Status}" procps 2>/dev/null | grep -q "ok installed" &&
	     [ ! -e /bin/kill ] && [ ! -e /usr/bin/kill ] && ! command -v ps && ! command -v pgrep'
timing boot

# ---- 6. install (the previous packages first, when there are some) ---------------------------
if [ -n "$prev" ]; then
	first=prev
	prev_ver=$(dpkg-deb -f "$(ls "$sys/prev/$prev"/tetherd_*.deb)" Version)
	diag "the previous packages: commit ${prev:0:7}, version $prev_ver"
else
	first=cur
fi
cur_ver=$(dpkg-deb -f "$(ls "$pkgs"/tetherd_*.deb)" Version)
check "dpkg -i installs tether-plane, tetherd and tetherctl ($first: $([ $first = prev ] && echo "$prev_ver" || echo "$cur_ver"))" \
	ct sh -c "dpkg -i /root/pkgs/$first/*.deb"

check "the user tether exists (sysusers.d), with /var/lib/tether (tether, 0700)" \
	cts 'getent passwd tether >/dev/null && [ "$(stat -c "%U %a" /var/lib/tether)" = "tether 700" ]'
check "postinst generated /etc/tether/admin.token: 64 hex digits, root:tether 0640" \
	cts 'grep -Eqx "[0-9a-f]{64}" /etc/tether/admin.token && [ "$(stat -c "%U:%G %a" /etc/tether/admin.token)" = "root:tether 640" ]'
check "tether-plane.service is active (Type=notify: READY=1 came), as the user tether, with a STATUS= line" \
	cts 'wait_until 20 is_active tether-plane &&
	     [ "$(stat -c %U /proc/"$(mainpid tether-plane)")" = tether ] &&
	     systemctl show -p StatusText --value tether-plane | grep -q .'
check "the plane answers tetherctl with the admin token (TETHER_TOKEN_FILE)" \
	cts 'wait_until 10 tetherctl ls'
check "unconfigured, tetherd.service is skipped by ExecCondition (inactive, result exec-condition, no restarts), tetherd.path waits" \
	cts 'wait_until 10 sh -c "[ \"\$(systemctl show -p Result --value tetherd)\" = exec-condition ]" &&
	     [ "$(systemctl is-active tetherd)" = inactive ] && [ "$(restarts tetherd)" = 0 ] &&
	     [ "$(systemctl is-active tetherd.path)" = active ]'

# ---- 7. configure, as an operator would ---------------------------------------------------------
# two backends (nginx servers on other ports), nginx including the agent's
# generation, a node token, the nginx drop-in, then agent.conf (the edit
# tetherd.path reacts to)
cat >"$root/root/configure.sh" <<'EOF'
set -e
umask 077
tetherctl token create --node web-1 >/etc/tether/node.token
umask 022
cat >/etc/nginx/conf.d/backends.conf <<'N'
server { listen 127.0.0.1:9001; location / { return 200 "backend-a\n"; } }
server { listen 127.0.0.1:9002; location / { return 200 "backend-b\n"; } }
N
echo 'include /etc/nginx/tether/current/*.conf;' >/etc/nginx/conf.d/tether.conf
nginx -t -q
systemctl reload nginx
# a link, as docs/packaging.md says: an upgrade brings the drop-in's changes
mkdir -p /etc/systemd/system/tetherd.service.d
ln -s /usr/share/tether/systemd/tetherd.service.d/nginx.conf /etc/systemd/system/tetherd.service.d/nginx.conf
systemctl daemon-reload
tetherctl apply - <<'J' | version_of >/root/v1
{"upserts":[
 {"name":"cluster/a","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9001}]}},
 {"name":"cluster/b","body":{"lb":"round_robin","endpoints":[{"address":"127.0.0.1","port":9002}]}},
 {"name":"listener/main","body":{"address":"127.0.0.1","port":8080}},
 {"name":"route/root","body":{"listener":"main","host":"*","path":"/","cluster":"a"}}
]}
J
# the conffile edit (kept across the upgrade)
sed -i 's|^; plane = https://plane.example.net:7443$|plane = http://127.0.0.1:7070|' /etc/tether/agent.conf
cat >>/etc/tether/agent.conf <<'A'
; ---- this node (tests/system/boot.sh) ----
node = web-1
token_file = /etc/tether/node.token
consumer = nginx
output_dir = /etc/nginx/tether
pidfile = /run/nginx.pid
A
EOF
check "configuring: a node token, nginx including the generation, the nginx drop-in (linked), resources at the plane, agent.conf edited" \
	cts '. /root/configure.sh'
V1=$(cat "$root/root/v1" 2>/dev/null)
check "tetherd.path starts tetherd.service once agent.conf names a plane" \
	cts 'wait_until 20 is_active tetherd'
check "the agent applies version ${V1:-?} and the plane records its ACK" \
	cts "wait_until 20 agent_at $V1 && wait_until 10 acked $V1"
check "nginx routes / to backend-a, as the plane says" \
	cts 'wait_until 10 answers backend-a'

# ---- 8. upgrade to the current packages -------------------------------------------------------------
if [ "$first" = prev ]; then
	old_pid=$(cts 'mainpid tetherd')
	tok=$(cts 'sha256sum /etc/tether/admin.token')
	since=$(cts 'date "+%Y-%m-%d %H:%M:%S"')
	check "upgrade: dpkg -i (--force-confold) from $prev_ver to $cur_ver" \
		ct sh -c 'dpkg --force-confold -i /root/pkgs/cur/*.deb'
	check_eq "upgrade: every package is at $cur_ver" "$cur_ver $cur_ver $cur_ver" \
		"$(cts 'dpkg-query -W -f="\${Version} " tether-plane tetherd tetherctl' | xargs)"
	check "upgrade keeps the edited conffile /etc/tether/agent.conf (plane, node, consumer lines)" \
		cts 'grep -qx "plane = http://127.0.0.1:7070" /etc/tether/agent.conf &&
		     grep -qx "consumer = nginx" /etc/tether/agent.conf && grep -qx "node = web-1" /etc/tether/agent.conf'
	check "upgrade keeps last-good: tetherd restarted (pid $old_pid -> another), loaded last-good, at version $V1, nginx serves backend-a" \
		cts "wait_until 20 active_again tetherd $old_pid &&
		     journalctl -u tetherd --since '$since' -o cat --no-pager | grep -q 'last-good: loaded' &&
		     wait_until 20 agent_at $V1 && answers backend-a"
	check_eq "upgrade keeps the admin token" "$tok" "$(cts 'sha256sum /etc/tether/admin.token')"
	check "upgrade keeps the plane's store (route/root still there) and the plane runs" \
		cts 'wait_until 20 tetherctl get route/root'
else
	for what in "dpkg -i from the previous packages" "conffile edit kept" "last-good kept" "admin token and store kept"; do
		skip "upgrade: $what: $prev_why"
	done
fi
check "the man pages are installed: tether-plane(8), tetherd(8), tetherctl(1), tether-resources(5)" \
	cts 'for p in man8/tether-plane.8 man8/tetherd.8 man1/tetherctl.1 man5/tether-resources.5; do
		     [ -s /usr/share/man/$p.gz ] || { echo "no /usr/share/man/$p.gz"; exit 1; }; done'
check "tetherctl explain runs from the package and agrees with its page (cluster/web's example)" \
	cts 'tetherctl explain cluster | grep -q "The body of cluster/web" &&
	     zcat /usr/share/man/man5/tether-resources.5.gz | grep -q "^\.BR cluster/web :"'
timing "install, configure, upgrade"

# ---- 9. the units: verify, exposure, sandbox -------------------------------------------------------------
check "systemd-analyze verify: tether-plane.service, tetherd.service (with the nginx drop-in), tetherd.path" \
	cts 'out=$(systemd-analyze verify --man=no tether-plane.service tetherd.service tetherd.path 2>&1); echo "$out"; [ -z "$out" ]'
check "systemd-analyze verify: tetherd.service with the haproxy drop-in" \
	cts 'out=$(with_dropin haproxy systemd-analyze verify --man=no tetherd.service 2>&1); echo "$out"; [ -z "$out" ]'
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 <= b + 0) }'; }
e_plane=$(cts 'exposure tether-plane.service')
e_nginx=$(cts 'exposure tetherd.service')
e_base=$(cts 'with_dropin none exposure tetherd.service')
e_haproxy=$(cts 'with_dropin haproxy exposure tetherd.service')
check "systemd-analyze security --offline=yes tether-plane.service: $e_plane (at most 2.0)" le "$e_plane" 2.0
# the agent's figures as docs/packaging.md gives them: a rise is a regression
check "systemd-analyze security --offline=yes tetherd.service: $e_base alone (at most 1.6), $e_nginx with the nginx drop-in (at most 2.2), $e_haproxy with the haproxy drop-in (at most 1.9)" \
	sh -c "$(declare -f le); le '$e_base' 1.6 && le '$e_nginx' 2.2 && le '$e_haproxy' 1.9"
check "the agent's sandbox holds: /etc, /usr, /var/lib read-only, /home empty, /etc/nginx/tether and /var/lib/tetherd writable, capabilities CAP_CHOWN CAP_DAC_OVERRIDE CAP_NET_BIND_SERVICE only, no new privileges, a seccomp filter" \
	cts 'p=$(mainpid tetherd)
	     ! ns $p touch /etc/tether/x 2>/dev/null && ! ns $p touch /usr/x 2>/dev/null && ! ns $p touch /var/lib/x 2>/dev/null &&
	     ns $p touch /etc/nginx/tether/.w && ns $p rm /etc/nginx/tether/.w &&
	     ns $p touch /var/lib/tetherd/.w && ns $p rm /var/lib/tetherd/.w && [ -z "$(ns $p ls -A /home)" ] &&
	     [ "$(field $p CapBnd)" = 0000000000000403 ] && [ "$(field $p NoNewPrivs)" = 1 ] && [ "$(field $p Seccomp)" = 2 ]'
check "the plane's sandbox holds: the user tether, no capabilities, a seccomp filter, its store writable, /etc/tether read-only" \
	cts 'p=$(mainpid tether-plane)
	     [ "$(field $p CapBnd)" = 0000000000000000 ] && [ "$(field $p Seccomp)" = 2 ] && [ "$(stat -c %U /proc/$p)" = tether ] &&
	     ns $p setpriv --reuid=tether --regid=tether --clear-groups sh -c "touch /var/lib/tether/.w && rm /var/lib/tether/.w" &&
	     ! ns $p touch /etc/tether/x 2>/dev/null'
# ExecReload= without procps: sh's own kill sends the SIGHUP, and each
# daemon logs its reload (plane.c: the admin token; agent.c: the
# configuration), still the same process
cat >"$root/root/reload.sh" <<'EOF'
logged() { journalctl -u "$1" --since "$since" -o cat --no-pager | grep -q "$2"; }
pp=$(mainpid tether-plane) ap=$(mainpid tetherd)
since=$(date '+%Y-%m-%d %H:%M:%S')
systemctl reload tether-plane || exit 1
systemctl reload tetherd || exit 1
wait_until 10 logged tether-plane 'SIGHUP: admin token reloaded' || { echo "the plane logged no reload"; exit 1; }
wait_until 10 logged tetherd 'SIGHUP: configuration reloaded' || { echo "the agent logged no reload"; exit 1; }
journalctl -u tether-plane -u tetherd --since "$since" -o cat --no-pager | grep -i -e sighup -e reload
[ "$(mainpid tether-plane)" = "$pp" ] && [ "$(mainpid tetherd)" = "$ap" ] &&
	is_active tether-plane && is_active tetherd
EOF
check "systemctl reload tether-plane and tetherd (ExecReload= by sh's kill, no procps): each logs its SIGHUP reload and runs on (same main pid)" \
	cts '. /root/reload.sh'
timing units

# ---- 10. traffic follows the plane ------------------------------------------------------------------------
V2=$(cts "put_version route/root '{\"listener\":\"main\",\"host\":\"*\",\"path\":\"/\",\"cluster\":\"b\"}'")
check "a change through tetherctl (route/root -> cluster b, version $V2) reaches nginx: / answers backend-b" \
	cts "wait_until 15 answers backend-b && wait_until 10 agent_at $V2 && wait_until 10 acked $V2"

# a change tether accepts and nginx -t refuses: a TLS listener whose
# certificate does not load. The plane parses a secret's certificate and
# matches its key, so it is a real pair nginx's OpenSSL refuses: a 1024-bit
# RSA key ("ee key too small" at Debian's security level 2)
openssl req -x509 -newkey rsa:1024 -nodes -keyout "$root/root/weak.key" -out "$root/root/weak.crt" -days 3650 \
	-subj /CN=weak.test >/dev/null 2>&1 || bail "openssl cannot make the weak test certificate"
cat >"$root/root/bad.sh" <<'EOF'
jq -n --rawfile c /root/weak.crt --rawfile k /root/weak.key '{upserts: [
 {name: "secret/bad", body: {cert: $c, key: $k}},
 {name: "listener/badtls", body: {address: "127.0.0.1", port: 8443, tls: {secret: "bad"}}},
 {name: "route/badtls", body: {listener: "badtls", host: "*", path: "/", cluster: "a"}}]}' >/root/bad.json
EOF
cts '. /root/bad.sh' || bail "cannot write /root/bad.json"
V3=$(cts 'tetherctl apply /root/bad.json | version_of')
check "a change nginx refuses (version $V3: a certificate nginx -t cannot load, its key too small) is NACKed: tetherctl nodes --json shows it" \
	cts "wait_until 20 nacked $V3"
check "status.json says degraded, at version $V2, with nginx's refusal" \
	cts "wait_until 10 agent_at $V2 degraded && st .last_error | grep -q nginx"
check "nginx keeps serving the old routing (backend-b) and nothing listens on the refused port" \
	cts 'answers backend-b && ! curl -sk --max-time 2 https://127.0.0.1:8443/ >/dev/null'
V4=$(cts 'echo "{\"removes\":[\"route/badtls\",\"listener/badtls\",\"secret/bad\"]}" | tetherctl apply - | version_of')
check "removing the refused change (version $V4) brings the agent back to synced" \
	cts "wait_until 20 agent_at $V4 && answers backend-b"
timing traffic

# ---- 11. restarts and the watchdog ---------------------------------------------------------------------------
check "plane stopped, tetherd restarted: the agent boots from last-good (version $V4), says offline, nginx serves backend-b" \
	cts "systemctl stop tether-plane && systemctl restart tetherd && is_active tetherd &&
	     journalctl -u tetherd -o cat -n 20 --no-pager | grep -q 'last-good: loaded' &&
	     wait_until 15 agent_at $V4 offline && answers backend-b"
check "the plane back: the agent syncs again at version $V4" \
	cts "systemctl start tether-plane && wait_until 30 agent_at $V4 && wait_until 10 acked $V4"
check "systemctl kill -s KILL tetherd: systemd restarts it (another main pid, active, NRestarts up), nginx serves on" \
	cts 'p=$(mainpid tetherd); r=$(restarts tetherd); systemctl kill -s KILL tetherd &&
	     wait_until 20 active_again tetherd $p && [ "$(restarts tetherd)" -gt "$r" ] && answers backend-b'
cat >"$root/root/watchdog.sh" <<'EOF'
d=/etc/systemd/system/tetherd.service.d
printf '[Service]\n# tests/system/boot.sh: a short watchdog for the stall test\nWatchdogSec=3s\n' >$d/zz-test-watchdog.conf
systemctl daemon-reload && systemctl restart tetherd || exit 1
p=$(mainpid tetherd)
since=$(date '+%Y-%m-%d %H:%M:%S')
kill -STOP "$p"
wait_until 30 active_again tetherd "$p"
rc=$?
journalctl -u tetherd --since "$since" -o cat --no-pager | grep -i watchdog
rm -f $d/zz-test-watchdog.conf
systemctl daemon-reload
[ $rc = 0 ] && journalctl -u tetherd --since "$since" -o cat --no-pager | grep -q 'Watchdog timeout'
EOF
check "a stalled event loop (kill -STOP, WatchdogSec=3s in a drop-in): systemd logs a watchdog timeout and restarts the agent" \
	cts '. /root/watchdog.sh'
check "after the watchdog's restart the agent is synced at version $V4 and nginx serves backend-b" \
	cts "systemctl restart tetherd && wait_until 20 agent_at $V4 && answers backend-b"
# one thread of the plane stops turning (ptrace from the host: the
# others go on): the plane stops feeding the watchdog and says which
# thread, and systemd restarts it
cat >"$root/root/plane-watchdog.sh" <<'EOF'
d=/etc/systemd/system/tether-plane.service.d
mkdir -p $d
printf '[Service]\n# tests/system/boot.sh: a short watchdog for the wedged-thread test\nWatchdogSec=3s\n' \
	>$d/zz-test-watchdog.conf
systemctl daemon-reload && systemctl restart tether-plane && is_active tether-plane && mainpid tether-plane
EOF
# A traced thread that dies stays a zombie until its tracer reaps it, and
# the process's leader with it: systemd would not hear of the plane's death
# (SIGABRT from its watchdog) while wedge-thread.py runs. So the thread's
# state is followed from here: once it is a zombie (killed while still
# ptrace-stopped) the tool is ended, as a stuck thread has no tracer.
thread_state() { awk '{ print $3 }' "/proc/$1/task/$2/stat" 2>/dev/null || echo gone; }
plane_wedge() {
	local cpid hpid="" tid="" ns wedge rc=1 since d t st last="" end
	cpid=$(cts '. /root/plane-watchdog.sh' | tail -n 1)
	[ -n "$cpid" ] || return 1
	ns=$(readlink /proc/"$CT_PID"/ns/pid)
	# the plane's pid here: the one in the container's pid namespace whose pid there is cpid
	for d in /proc/[0-9]*; do
		[ "$(readlink "$d/ns/pid" 2>/dev/null)" = "$ns" ] || continue
		[ "$(awk '$1 == "NSpid:" { print $NF }' "$d/status" 2>/dev/null)" = "$cpid" ] && hpid=${d#/proc/} && break
	done
	[ -n "$hpid" ] || { echo "no host pid for the plane's $cpid"; return 1; }
	for t in /proc/"$hpid"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = tp-http-0 ] && tid=${t##*/}
	done
	[ -n "$tid" ] || { echo "no thread tp-http-0 in $hpid"; return 1; }
	since=$(ct date '+%Y-%m-%d %H:%M:%S')
	t=$(date +%s)
	python3 "$top/tests/tools/wedge-thread.py" "$tid" >"$sys/wedge.out" 2>&1 &
	wedge=$!
	for _ in $(seq 1 50); do
		grep -q WEDGED "$sys/wedge.out" 2>/dev/null && break
		kill -0 "$wedge" 2>/dev/null || break
		sleep 0.2
	done
	if ! grep -q WEDGED "$sys/wedge.out" 2>/dev/null; then
		echo "cannot stop thread $tid (tp-http-0 of host pid $hpid): $(cat "$sys/wedge.out")"
		kill -TERM "$wedge" 2>/dev/null
		wait "$wedge" 2>/dev/null
		return 1
	fi
	echo "tp-http-0 (host tid $tid, plane pid $cpid in the container) stopped by ptrace"
	# the plane's bound is max(WatchdogSec, 30 s), then systemd's 3 s, then RestartSec=2s
	end=$((t + 90))
	while [ "$(date +%s)" -lt "$end" ]; do
		st=$(thread_state "$hpid" "$tid")
		if [ "$st" != "$last" ]; then
			echo "$(($(date +%s) - t)) s: thread $tid (tp-http-0) state $st"
			last=$st
		fi
		if [ "$st" = Z ] && kill -0 "$wedge" 2>/dev/null; then
			echo "$(($(date +%s) - t)) s: the plane died with tp-http-0 stopped; ending wedge-thread.py (its zombie's tracer)"
			kill -TERM "$wedge" 2>/dev/null
			wait "$wedge" 2>/dev/null
		fi
		if cts "active_again tether-plane $cpid"; then
			rc=0
			break
		fi
		sleep 0.5
	done
	echo "restarted after $(($(date +%s) - t)) s (rc $rc); the old thread: $(thread_state "$hpid" "$tid")"
	kill -TERM "$wedge" 2>/dev/null
	wait "$wedge" 2>/dev/null
	cat "$sys/wedge.out"
	cts "journalctl -u tether-plane --since '$since' -o cat --no-pager | grep -i -e watchdog -e 'main process'"
	[ $rc = 0 ] && cts "journalctl -u tether-plane --since '$since' -o cat --no-pager |
		grep -q \"watchdog: thread http-0: .* since it last turned; systemd's watchdog is no longer fed\" &&
		journalctl -u tether-plane --since '$since' -o cat --no-pager | grep -q 'Watchdog timeout'"
}
check "a plane thread that stops turning (tp-http-0, ptrace'd from the host; WatchdogSec=3s in a drop-in): the plane names it in the journal and systemd restarts it" \
	plane_wedge
# (the drop-in's directory goes too: purge must find nothing of tether's)
check "after the plane's restart the agent is synced at version $V4 and nginx serves backend-b" \
	cts "rm -f /etc/systemd/system/tether-plane.service.d/zz-test-watchdog.conf &&
	     rmdir /etc/systemd/system/tether-plane.service.d && systemctl daemon-reload &&
	     systemctl restart tether-plane && wait_until 30 agent_at $V4 && answers backend-b"
timing "restarts and watchdog"

# ---- 12. the haproxy consumer ----------------------------------------------------------------------------------------
# The same agent switched to haproxy, as an operator would: nginx gives up
# the tether listener (its two backends stay), the haproxy drop-in takes
# the nginx one's place, agent.conf names the haproxy consumer, tetherd is
# restarted (the consumer changes only on restart) and renders last-good
# for haproxy, then haproxy (Debian's unit, master-worker) is started
# with the agent's generation after its own configuration.
cat >"$root/root/haproxy.sh" <<'EOF'
set -e
rm /etc/nginx/conf.d/tether.conf
nginx -t -q
systemctl reload nginx
wait_until 10 sh -c '! curl -s --max-time 1 -o /dev/null http://127.0.0.1:8080/'
d=/etc/systemd/system/tetherd.service.d
rm $d/nginx.conf
ln -s /usr/share/tether/systemd/tetherd.service.d/haproxy.conf $d/haproxy.conf
sed -i -e 's|^consumer = nginx$|consumer = haproxy|' -e 's|^output_dir = /etc/nginx/tether$|output_dir = /etc/haproxy/tether|' \
	-e 's|^pidfile = /run/nginx.pid$|pidfile = /run/haproxy.pid|' /etc/tether/agent.conf
echo 'base_config = /etc/haproxy/haproxy.cfg' >>/etc/tether/agent.conf
grep -qx 'consumer = haproxy' /etc/tether/agent.conf
grep -qx 'output_dir = /etc/haproxy/tether' /etc/tether/agent.conf
grep -qx 'pidfile = /run/haproxy.pid' /etc/tether/agent.conf
systemctl daemon-reload
systemctl restart tetherd
test -f /etc/haproxy/tether/current/tether.cfg
cp /etc/default/haproxy /root/haproxy.default
echo 'EXTRAOPTS="-S /run/haproxy-master.sock -f /etc/haproxy/tether/current/"' >>/etc/default/haproxy
systemctl restart haproxy
EOF
check "haproxy runs, started by its own unit (haproxy.service's main pid is /run/haproxy.pid's)" \
	cts 'is_active haproxy && [ "$(mainpid haproxy)" = "$(cat /run/haproxy.pid)" ]'
check "switching the agent to haproxy: nginx gives up the listener, the haproxy drop-in (linked) replaces nginx's, agent.conf names the haproxy consumer, tetherd restarted renders /etc/haproxy/tether, haproxy restarted with it" \
	cts '. /root/haproxy.sh'
check "the agent (haproxy consumer) booted from last-good: synced at version $V4, acked; haproxy routes / to backend-b" \
	cts "wait_until 20 agent_at $V4 && wait_until 10 acked $V4 && wait_until 10 answers backend-b &&
	     [ \"\$(mainpid haproxy)\" = \"\$(cat /run/haproxy.pid)\" ] &&
	     journalctl -u tetherd -o cat -n 30 --no-pager | grep -q 'last-good: loaded'"
hap_pid=$(cts 'mainpid haproxy')
V5=$(cts "put_version route/root '{\"listener\":\"main\",\"host\":\"*\",\"path\":\"/\",\"cluster\":\"a\"}'")
check "a change through tetherctl (route/root -> cluster a, version $V5) reaches haproxy: / answers backend-a, the agent ACKs it, haproxy's master reloaded (USR2), not restarted" \
	cts "wait_until 15 answers backend-a && wait_until 10 agent_at $V5 && wait_until 10 acked $V5 &&
	     [ \"\$(mainpid haproxy)\" = '$hap_pid' ] && [ \"\$(cat /run/haproxy.pid)\" = '$hap_pid' ] &&
	     readlink /etc/haproxy/tether/current | grep -q '^gen-'"
check "systemd-analyze verify: tetherd.service with the haproxy drop-in linked prints nothing" \
	cts 'out=$(systemd-analyze verify --man=no tetherd.service 2>&1); echo "$out"; [ -z "$out" ]'
e_live=$(cts 'exposure tetherd.service')
check "systemd-analyze security --offline=yes tetherd.service with the haproxy drop-in linked: $e_live (at most 1.9)" \
	le "$e_live" 1.9
check "the agent's sandbox with the haproxy drop-in: /etc, /etc/haproxy, /etc/nginx/tether, /usr, /var/lib read-only, /etc/haproxy/tether and /var/lib/tetherd writable, capabilities CAP_DAC_READ_SEARCH CAP_NET_BIND_SERVICE only, no new privileges, a seccomp filter" \
	cts 'p=$(mainpid tetherd)
	     ! ns $p touch /etc/tether/x 2>/dev/null && ! ns $p touch /etc/haproxy/x 2>/dev/null &&
	     ! ns $p touch /etc/nginx/tether/x 2>/dev/null && ! ns $p touch /usr/x 2>/dev/null &&
	     ! ns $p touch /var/lib/x 2>/dev/null &&
	     ns $p touch /etc/haproxy/tether/.w && ns $p rm /etc/haproxy/tether/.w &&
	     ns $p touch /var/lib/tetherd/.w && ns $p rm /var/lib/tetherd/.w &&
	     [ "$(field $p CapBnd)" = 0000000000000404 ] && [ "$(field $p NoNewPrivs)" = 1 ] && [ "$(field $p Seccomp)" = 2 ]'
timing haproxy

# ---- 13. remove and purge ------------------------------------------------------------------------------------------
check "dpkg --remove: services stopped, units and binaries gone, state, conffiles, token and user kept" \
	cts 'dpkg --remove tetherd tether-plane tetherctl >/dev/null &&
	     ! is_active tetherd && ! is_active tether-plane &&
	     [ ! -e /lib/systemd/system/tetherd.service ] && [ ! -e /usr/sbin/tetherd ] && [ ! -e /usr/bin/tetherctl ] &&
	     [ -d /var/lib/tether ] && ls /var/lib/tetherd | grep -q lastgood &&
	     [ -f /etc/tether/agent.conf ] && [ -f /etc/tether/plane.conf ] && [ -f /etc/tether/admin.token ] &&
	     getent passwd tether >/dev/null'
# the operator takes back what they made (the node token, nginx's include,
# the drop-ins, haproxy's EXTRAOPTS, with haproxy restarted on its own
# configuration); purge removes the rest
cat >"$root/root/purge.sh" <<'EOF'
rm -f /etc/tether/node.token /etc/nginx/conf.d/tether.conf /etc/systemd/system/tetherd.service.d/nginx.conf \
	/etc/systemd/system/tetherd.service.d/haproxy.conf
rmdir /etc/systemd/system/tetherd.service.d
if [ -f /root/haproxy.default ]; then
	cp /root/haproxy.default /etc/default/haproxy && systemctl restart haproxy || exit 1
fi
dpkg --purge tetherd tether-plane tetherctl >/dev/null || exit 1
left=""
for p in /etc/tether /var/lib/tether /var/lib/tetherd /etc/nginx/tether /etc/haproxy/tether /usr/lib/sysusers.d/tether-plane.conf \
	/lib/systemd/system/tether-plane.service /lib/systemd/system/tetherd.service /lib/systemd/system/tetherd.path \
	/usr/share/tether /usr/share/doc/tetherd; do
	[ -e "$p" ] && left="$left $p"
done
left="$left $(find /etc/systemd /var/lib/systemd -name '*tether*' 2>/dev/null | xargs)"
getent passwd tether >/dev/null && left="$left user:tether"
getent group tether >/dev/null && left="$left group:tether"
dpkg -l 'tether*' 2>/dev/null | grep -q '^[a-z][a-z] ' && left="$left $(dpkg -l 'tether*' | awk '/^[a-z][a-z] /{print $1":"$2}')"
systemctl list-units --all --no-legend 'tether*' | grep -q . && left="$left $(systemctl list-units --all --no-legend 'tether*' | awk '{print $1}')"
left=$(echo $left)
echo "left behind: ${left:-nothing}"
[ -z "$left" ]
EOF
check "dpkg --purge leaves nothing behind (/etc/tether, /var/lib/tether, /var/lib/tetherd, /etc/nginx/tether, /etc/haproxy/tether, the user, the units)" \
	cts '. /root/purge.sh'
# (not systemctl reload haproxy: Debian's unit reloads with /bin/kill, procps's)
check "nginx and haproxy still run after the purge" \
	cts 'systemctl reload nginx && is_active nginx && is_active haproxy && [ "$(mainpid haproxy)" = "$(cat /run/haproxy.pid)" ]'
timing "remove and purge"

# ---- 13b. the README's package blocks, from its own text -----------------------------------------------
# "Install from packages" as written (scripts/doc-blocks extracts the
# blocks; t0018 leaves them to this test): the plane's host, then the node
# with nginx, in /root, the packages of ./out/ being the ones built above.
# The one line that cannot run as written is `editor /etc/tether/agent.conf`:
# its stand-in sets the keys its comment names (plane: the plane's address
# the README gives, 127.0.0.1:7070; token_file: where the block installed
# the token). Then the agent must start (tetherd.path) and ACK; purge.sh
# takes it all back for the RPMs.
readme_block() { # FIRST-LINE-PATTERN: the README block starting so, adapted
	(cd "$top" && scripts/doc-blocks README) |
		awk -v p="$1" '/^@@block / { on = 0; first = 1; next } first { on = ($0 ~ p); first = 0 } on { print }' |
		sed -e 's|\./out/|/root/pkgs/cur/|g'
}
plane_block=$(readme_block '^apt install .*tether-plane_')
node_block=$(readme_block '^apt install .*tetherd_')
if [ -z "$plane_block" ] || [ -z "$node_block" ]; then
	not_ok "the README has its package blocks (the plane's host, each node with nginx)"
else
	keys=$(grep -o '^editor /etc/tether/agent.conf *#.*' <<<"$node_block" | sed 's/^[^#]*#//'
		sed -n '/^editor /,$p' <<<"$node_block" | sed -n '2,$p' | sed 's/^ *#//')
	{
		echo '#!/bin/sh'
		echo '# the stand-in for editor(1): the keys the README names, in [agent]'
		echo 'f=$1'
		echo 'set_key() { sed -i "/^;* *$1 *=/d" "$f"; echo "$1 = $2" >>"$f"; }'
		echo 'set_key plane http://127.0.0.1:7070'
		echo 'set_key token_file /etc/tether/node.token'
		tr ',' '\n' <<<"$keys" | sed -n 's/^ *\([a-z_]*\) *= *\([^ ]*\) *$/set_key \1 \2/p'
	} >"$root/usr/local/bin/editor"
	chmod 755 "$root/usr/local/bin/editor"
	printf 'set -ex\ncd /root\n%s\n' "$plane_block" >"$root/root/readme-plane.sh"
	printf 'set -ex\ncd /root\n%s\n' "$node_block" >"$root/root/readme-node.sh"
	# each block by its own bash -e (a failing line fails it), apt's
	# question answered as a person does (y)
	check "README: the plane's host block runs as written (apt install, the admin token, tetherctl ls, a node token)" \
		cts 'yes y | PATH=/usr/local/bin:$PATH bash /root/readme-plane.sh && wait_until 20 is_active tether-plane && test -s /root/web-1.token'
	check "README: the node block runs as written (apt install, the token, the nginx drop-in, the include, agent.conf edited)" \
		cts 'yes y | PATH=/usr/local/bin:$PATH bash /root/readme-node.sh && grep -qx "consumer = nginx" /etc/tether/agent.conf && nginx -t -q && systemctl reload nginx'
	check "README: then tetherd.path starts the agent, which ACKs a change" \
		cts 'wait_until 20 is_active tetherd &&
		     v=$(put_version cluster/readme "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":9001}]}") &&
		     [ -n "$v" ] && wait_until 20 acked "$v"'
	if cts '. /root/purge.sh' >"$sys/readme-purge.out" 2>&1; then
		ok "README: dpkg --purge after it leaves nothing behind"
	else
		not_ok "README: dpkg --purge after it leaves nothing behind"
		diag "$(cat "$sys/readme-purge.out")"
		# whatever a failed block left, gone, so the RPMs start on a clean system
		cts 'dpkg --purge tetherd tether-plane tetherctl >/dev/null 2>&1
		     rm -rf /etc/tether /var/lib/tether /var/lib/tetherd /etc/nginx/tether /etc/nginx/conf.d/tether.conf \
		         /etc/systemd/system/tetherd.service.d
		     userdel tether 2>/dev/null; groupdel tether 2>/dev/null; systemctl daemon-reload; systemctl reload nginx' >>"$log" 2>&1
	fi
fi
timing "the README's package blocks"

# ---- 14. the RPMs, in the same container -----------------------------------------------------------------------------------
# Debian's rpm installs them (--nodeps: the libraries they link come from
# dpkg, which rpm's database does not know; --force-debian: else Debian's
# rpm complains about being used on Debian). Their %pre and %post run with
# Debian's tools (getent, groupadd, useradd, od, systemctl). rpm's systemd
# macros do not start or reload anything (on Fedora, systemd's file
# triggers reload it): the operator runs daemon-reload and starts the
# units, and the same checks as for the .debs follow. Then rpm -e, and
# what the spec keeps (docs/packaging.md, "Remove and purge").
if ! ls "$pkgs"/*.rpm >/dev/null 2>&1; then
	skip "the RPMs in the container: scripts/package built none"
else
	rpm_ver=$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$(ls "$pkgs"/tetherd-*.rpm)" 2>/dev/null)
	check "rpm -i --nodeps installs tether-plane, tetherd and tetherctl ($rpm_ver) after the purge, and says nothing (no warning from rpm or a scriptlet)" \
		cts 'out=$(rpm -i --nodeps --force-debian /root/pkgs/rpm/*.rpm 2>&1); rc=$?; echo "$out"
		     [ $rc = 0 ] && [ -z "$out" ] && rpm -q tether-plane tetherd tetherctl'
	check "%pre made the user and group tether (useradd -r; home /var/lib/tether, shell /sbin/nologin, which Debian has); /var/lib/tether is tether's, 0700" \
		cts 'getent passwd tether && getent group tether && [ "$(stat -c "%U %a" /var/lib/tether)" = "tether 700" ] &&
		     [ "$(getent passwd tether | cut -d: -f6)" = /var/lib/tether ] && [ -x "$(getent passwd tether | cut -d: -f7)" ]'
	check "%post generated /etc/tether/admin.token: 64 hex digits, root:tether 0640" \
		cts 'grep -Eqx "[0-9a-f]{64}" /etc/tether/admin.token && [ "$(stat -c "%U:%G %a" /etc/tether/admin.token)" = "root:tether 640" ]'
	check "%post's systemctl preset enabled tether-plane.service, tetherd.service and tetherd.path (Debian presets nothing off)" \
		cts 'for u in tether-plane.service tetherd.service tetherd.path; do
		         echo "$u: $(systemctl is-enabled $u)"; [ "$(systemctl is-enabled $u)" = enabled ] || exit 1
		     done'
	since_rpm=$(cts 'date "+%Y-%m-%d %H:%M:%S"')
	# rpm-agent.sh SINCE: skipped once since then, and not again past RestartSec=
	cat >"$root/root/rpm-agent.sh" <<'EOF'
skipped() { [ "$(systemctl show -p Result --value tetherd)" = exec-condition ]; }
skips() { journalctl -u tetherd --since "$1" -o cat --no-pager | grep -c "Skipped due to 'exec-condition'"; }
wait_until 10 skipped || { echo "result: $(systemctl show -p Result --value tetherd)"; exit 1; }
sleep 6
echo "tetherd: $(systemctl is-active tetherd), result $(systemctl show -p Result --value tetherd)," \
	"$(restarts tetherd) restarts, skipped $(skips "$1") time(s); tetherd.path: $(systemctl is-active tetherd.path)"
skipped && [ "$(systemctl is-active tetherd)" = inactive ] && [ "$(restarts tetherd)" = 0 ] &&
	is_active tetherd.path && [ "$(skips "$1")" = 1 ]
EOF
	check "systemctl daemon-reload, then start the RPM's units (tether-plane.service, tetherd.path, tetherd.service from /usr/lib/systemd/system)" \
		cts 'for u in tether-plane.service tetherd.service tetherd.path; do
		         rpm -qf /usr/lib/systemd/system/$u >/dev/null || { echo "rpm does not own /usr/lib/systemd/system/$u"; exit 1; }
		     done
		     systemctl daemon-reload && systemctl start tether-plane.service tetherd.path tetherd.service'
	check "the RPM's tether-plane.service is active (READY=1 came), as the user tether, with a STATUS= line" \
		cts 'wait_until 20 is_active tether-plane &&
		     [ "$(stat -c %U /proc/"$(mainpid tether-plane)")" = tether ] &&
		     systemctl show -p StatusText --value tether-plane | grep -q .'
	check "the RPM's plane answers /healthz, and the RPM's tetherctl with the admin token (TETHER_TOKEN_FILE)" \
		cts 'healthz() { curl -fsS --max-time 2 http://127.0.0.1:7070/healthz | jq -e ".status == \"ok\""; }
		     wait_until 10 healthz && wait_until 10 tetherctl ls &&
		     [ "$(curl -s -o /dev/null -w "%{http_code}" --max-time 2 http://127.0.0.1:7070/v1/resources)" = 401 ]'
	check "unconfigured, the RPM's tetherd.service is skipped by ExecCondition (inactive, result exec-condition) and does not loop (no restarts, past RestartSec=5s), tetherd.path waits" \
		cts ". /root/rpm-agent.sh '$since_rpm'"
	cat >"$root/root/rpm-erase.sh" <<'EOF'
# an operator's edit of a %config(noreplace) file: rpm -e keeps it as .rpmsave
echo '; edited (tests/system/boot.sh)' >>/etc/tether/plane.conf
out=$(rpm -e --force-debian tetherd tether-plane tetherctl 2>&1) || { echo "$out"; exit 1; }
echo "$out"
bad=""
# rpm says only that it kept the edit (%preun and %postun run quietly)
[ "$out" = "warning: /etc/tether/plane.conf saved as /etc/tether/plane.conf.rpmsave" ] || bad="$bad rpm-said-more"
for p in tether-plane tetherd tetherctl; do rpm -q $p >/dev/null 2>&1 && bad="$bad rpm:$p"; done
for u in tether-plane tetherd tetherd.path; do is_active $u && bad="$bad active:$u"; done
# removed: the programs, the units, the sysusers file, the drop-ins, the unedited agent.conf
for p in /usr/sbin/tether-plane /usr/sbin/tetherd /usr/bin/tetherctl /usr/lib/systemd/system/tether-plane.service \
	/usr/lib/systemd/system/tetherd.service /usr/lib/systemd/system/tetherd.path /usr/lib/sysusers.d/tether-plane.conf \
	/usr/share/tether /etc/tether/agent.conf /etc/tether/plane.conf; do
	[ -e "$p" ] && bad="$bad left:$p"
done
# disabled (%preun): no enablement link
links=$(find /etc/systemd -name '*tether*' | xargs)
[ -z "$links" ] || bad="$bad links:$links"
# kept: the edited conffile, the admin token, the store, the user
grep -q '^; edited (tests/system/boot.sh)$' /etc/tether/plane.conf.rpmsave || bad="$bad no:plane.conf.rpmsave"
[ -f /etc/tether/admin.token ] || bad="$bad no:admin.token"
[ -f /var/lib/tether/tether.db ] || bad="$bad no:/var/lib/tether/tether.db"
getent passwd tether >/dev/null || bad="$bad no:user:tether"
echo "after rpm -e: /etc/tether: $(ls -A /etc/tether | xargs); /var/lib/tether: $(ls -A /var/lib/tether | xargs);" \
	"/var/lib/tetherd: $(ls -A /var/lib/tetherd 2>&1 | xargs)"
echo "wrong: ${bad:-nothing}"
[ -z "$bad" ]
EOF
	check "rpm -e: the services stopped and disabled, programs, units, drop-ins and the unedited agent.conf gone; the edited plane.conf kept as .rpmsave, the admin token, the store and the user kept" \
		cts '. /root/rpm-erase.sh'
fi
timing rpm

echo "1..$T_N"
diag "total: $(($(date +%s) - t_start)) s"
[ "$T_FAILED" -eq 0 ]
