#!/usr/bin/env bash
# t0115-plane-file-modes.sh: every file the plane keeps in --data is 0600,
# whatever the umask and the directory's mode. In a directory made 0755
# under umask 022 the lock, the database and its -wal and -shm are 0600
# after a write, and the plane warns that the directory is open (naming it,
# its mode and chmod 700). Files an older plane left 0644 (the database,
# -wal and -shm of a plane killed with -9, the lock) are tightened to 0600
# at start, each with a log line, and keep their data. A directory the
# plane makes itself is 0700 and draws no warning.
. "$(dirname "$0")/lib.sh"

# modes DIR: "NAME MODE" for every file under DIR, sorted.
modes() {
	(cd "$1" && find . -type f -printf '%P %m\n' | sort)
}

# wide DIR: the files under DIR that are not exactly 0600.
wide() {
	find "$1" -type f ! -perm 0600 -printf '%P %m\n' | sort
}

CL='{"endpoints":[{"address":"127.0.0.1","port":9001}]}'
FILES="lock tether.db tether.db-shm tether.db-wal"

umask 022

# ---- a data directory that already existed, 0755 ---------------------------------

DATA=$WORK/open.data
mkdir -m 0755 "$DATA"
check_eq "the data directory is 0755 to begin with (umask $(umask))" 755 "$(stat -c %a "$DATA")"
start_plane open --data "$DATA"
check_eq "a write is accepted" 1 "$(put cluster/web "$CL" | json .version)"
check_eq "the lock, the database, its -wal and -shm are there, each 0600" \
	"$(printf '%s 600\n' $FILES)" "$(modes "$DATA")"
check_eq "no file under the data directory is other than 0600" "" "$(wide "$DATA")"
check "the plane warns that the directory is open, naming it, its mode and chmod 700" \
	grep -qF "warn: data directory '$DATA' is mode 0755: group or others may list or write it; run chmod 700 '$DATA'" \
	"$PLANE_LOG"
check "it had nothing to tighten (it made every file itself)" bash -c "! grep -q 'now 0600' '$PLANE_LOG'"
check_eq "the plane leaves the directory's own mode to the operator" 755 "$(stat -c %a "$DATA")"

# ---- files an older plane left 0644 --------------------------------------------------

# kill -9 leaves the -wal and -shm behind, as an older plane's crash would
stop_pid "$PLANE_PID" KILL
chmod 0644 "$DATA"/*
chmod 0700 "$DATA"
check_eq "the four files are 0644 now, as an older plane made them" \
	"$(printf '%s 644\n' $FILES)" "$(modes "$DATA")"
start_plane old --data "$DATA"
for f in $FILES; do
	check "$f: tightened at start, with a log line saying so" \
		grep -qF "warn: data directory '$DATA': '$f' was mode 0644, now 0600" "$PLANE_LOG"
done
check_eq "every file under the data directory is 0600 after the start" "" "$(wide "$DATA")"
check_eq "the data survived: version 1" 1 "$(curl -sS "$PLANE_URL/healthz" | json .version)"
check_eq "the data survived: cluster/web's body" 9001 \
	"$(curl -sS "$PLANE_URL/v1/resources/cluster/web" | json '.body.endpoints[0].port')"
check_eq "a write after the tightening is accepted" 2 "$(put cluster/two "$CL" | json .version)"
check_eq "every file is still 0600 after it" "" "$(wide "$DATA")"
check "a 0700 directory draws no warning" bash -c "! grep -q 'is mode 0' '$PLANE_LOG'"
stop_pid "$PLANE_PID"
check_eq "after a clean stop the files left are 0600" "" "$(wide "$DATA")"

# ---- a data directory the plane makes --------------------------------------------------

start_plane fresh
check_eq "a write is accepted" 1 "$(put cluster/web "$CL" | json .version)"
check_eq "the plane makes its data directory 0700 (umask $(umask))" 700 "$(stat -c %a "$WORK/fresh.data")"
check_eq "its files are 0600" "" "$(wide "$WORK/fresh.data")"
check "and it draws no warning" bash -c "! grep -q 'data directory' '$PLANE_LOG'"
stop_pid "$PLANE_PID"

done_testing
