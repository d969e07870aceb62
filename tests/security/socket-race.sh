#!/bin/bash
# issue 12 item 2: the daemon never chmods its socket path (a user who can
# rename entries in the socket's directory swapped it for a link to a root
# file between bind() and chmod()), refuses a directory other users can
# rename in, and as root never listens in $XDG_RUNTIME_DIR.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

SECRET="$T/rootfile"
WANT=$(root_file "$SECRET")
STARTS=${STARTS:-100}

# racer DIR: as nobody, rename DIR/iofs.sock away and put a link to the
# root file in its place, in a loop (until killed)
racer() {
	"${NOBODY_BG[@]}" "$IOFS_BUILD_DIR/tests/security/iofs-racer" "$1/iofs.sock" "$1/spare" "$SECRET" &
	RACER=$!
	track $RACER
}

# start_stop DIR: one daemon start on DIR/iofs.sock; echoes "up" or "refused"
start_stop() {
	"$IOFS" -f --listen "unix:$1/iofs.sock" "$MNT" >"$T/iofs.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 bash -c "grep -q ' $(realpath "$MNT") ' /proc/self/mountinfo || ! kill -0 $DAEMON_PID" ||
		fail "daemon neither mounted nor exited"
	if is_mounted "$MNT"; then
		stop_daemon
		echo up
	else
		wait $DAEMON_PID
		DAEMON_PID=
		echo refused
	fi
}

# 1. a directory nobody can rename in (0777, no sticky bit)
mkdir -m 777 "$T/open"
racer "$T/open"
up=0
for i in $(seq "$STARTS"); do
	[ "$(start_stop "$T/open")" = up ] && up=$((up + 1))
	[ "$(stat -c %a "$SECRET")" = 600 ] ||
		fail "start $i: root's 0600 file is now $(stat -c %a "$SECRET") (chmod followed a planted link)"
done
kill $RACER
grep -q "writable by other users without the sticky bit" "$T/iofs.log" ||
	fail "no clear refusal: $(cat "$T/iofs.log")"
assert_eq "starts in a 0777 directory" 0 "$up"
assert_eq "root file content" "$WANT" "$(sha "$SECRET")"

# 2. a sticky directory (like /tmp): the daemon starts, the socket is 0666
#    by the umask, the racer cannot move root's socket, the file stays 0600
mkdir -m 1777 "$T/sticky"
racer "$T/sticky"
for i in $(seq 5); do
	"$IOFS" -f --listen "unix:$T/sticky/iofs.sock" "$MNT" >"$T/iofs.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 test -S "$T/sticky/iofs.sock" || fail "no socket in the sticky dir: $(cat "$T/iofs.log")"
	wait_for 10 is_mounted "$MNT" || fail "daemon did not mount"
	assert_eq "socket mode" 666 "$(stat -c %a "$T/sticky/iofs.sock")"
	stop_daemon
	assert_eq "root file mode (sticky dir, start $i)" 600 "$(stat -c %a "$SECRET")"
done
kill $RACER

# 3. root's default address ignores $XDG_RUNTIME_DIR (another user's)
mkdir -m 700 "$T/xdg"
chown nobody "$T/xdg"
env -u IOFS_ADDR XDG_RUNTIME_DIR="$T/xdg" "$IOFS" -f "$MNT" >"$T/iofs.log" 2>&1 &
DAEMON_PID=$!
wait_for 10 bash -c "grep -q ' $(realpath "$MNT") ' /proc/self/mountinfo || ! kill -0 $DAEMON_PID" ||
	fail "daemon neither mounted nor exited"
# ("listening" is logged after the kernel's INIT, so after the mount shows)
wait_for 10 grep -q "/run/iofs/iofs.sock" "$T/iofs.log" || fail "root's default address is not /run/iofs/iofs.sock: $(cat "$T/iofs.log")"
[ -z "$(ls -A "$T/xdg")" ] || fail "root's daemon listened in another user's XDG_RUNTIME_DIR: $(ls -A "$T/xdg")"
if is_mounted "$MNT"; then stop_daemon; fi
figures security-socket-race starts="$STARTS" up_in_0777="$up"
log "ok"
