#!/bin/bash
# Command-line errors: clear message, non-zero exit, nothing mounted.
. "$IOFS_SOURCE_DIR/tests/lib.sh"

# expect_err STATUS PATTERN CMD...: CMD fails with STATUS, stderr ~ PATTERN
expect_err() {
	local want=$1 pat=$2 rc=0
	shift 2
	timeout -k 2 10 "$@" >"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq "$want" ] || fail "'$*': exit $rc, expected $want ($(cat "$T/err"))"
	grep -qi -- "$pat" "$T/err" || fail "'$*': message lacks '$pat': $(cat "$T/err")"
	[ -n "$DAEMON_PID" ] || ! is_mounted "$MNT" || fail "'$*' left a mount"
}

expect_err 2 "missing MOUNTPOINT" "$IOFS"
expect_err 2 "exactly one MOUNTPOINT" "$IOFS" "$MNT" "$T"
expect_err 2 "usage" "$IOFS" --no-such-option "$MNT"
expect_err 2 "linger" "$IOFS" -o linger=soon "$MNT"
expect_err 2 "window" "$IOFS" -o window=12 "$MNT"
# byte counts take units as the spool's caps do, and say so when refused
expect_err 2 "window=3K: give a byte count of at least 4K.*powers of 1024" "$IOFS" -o window=3K "$MNT"
expect_err 2 "window=64Q" "$IOFS" -o window=64Q "$MNT"
expect_err 2 "max_read=8G: give a byte count from 4K" "$IOFS" -o max_read=8G "$MNT"
expect_err 2 "max_buf_conn=1K: give a number from 65536.*64M" "$IOFS" -o max_buf_conn=1K "$MNT"
expect_err 2 "max_ranks_job=1K: give a number from 1 to" "$IOFS" -o max_ranks_job=1K "$MNT"
expect_err 2 "poll_us.*0 (off) to 1000" "$IOFS" -o poll_us=5000 "$MNT"
expect_err 1 "does not exist.*mkdir -p" "$IOFS" -f "$T/nope"
touch "$T/file"
expect_err 1 "not a directory" "$IOFS" -f "$T/file"
# an unknown -o is a bad option (iofs(8): exit status 2), in the
# background mode too (its exit status comes from the daemon)
expect_err 2 "bad FUSE mount option" "$IOFS" -f -o no_such_fuse_opt "$MNT"
expect_err 2 "bad FUSE mount option" "$IOFS" -o no_such_fuse_opt "$MNT"
# a bad listen address is a usage error, said before anything starts
expect_err 2 "--listen: bad address 'bogus:addr'" "$IOFS" -f --listen "bogus:addr" "$MNT"
# an unknown option: said as iofs, the synopsis, where the rest is
expect_err 2 "^iofs: unrecognized option '--bogus'" "$IOFS" --bogus "$MNT"
grep -q "iofs --help' lists every option" "$T/err" || fail "--bogus: no pointer to --help: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -le 5 ] || fail "--bogus: the whole help again ($(wc -l <"$T/err") lines)"
expect_err 2 "option '--listen' needs a value" "$IOFS" --listen

# help and version
"$IOFS" --help | grep -q "usage: iofs" || fail "--help"
"$IOFS" --version | grep -q "^iofs [0-9]" || fail "--version"
# the help names every -o option iofs itself understands and the default
# address of a non-root user
for w in linger= window= max_read= poll_us= allow_remote /tmp/iofs-UID.sock; do
	"$IOFS" --help | grep -q -- "$w" || fail "--help lacks $w"
done

# a user who may not open /dev/fuse (mode 0600, as in some containers) is
# told so, not "see the message above"
NOGROUP=$(id -gn nobody)
if ! setpriv --reuid=nobody --regid="$NOGROUP" --clear-groups test -r /dev/fuse -a -w /dev/fuse; then
	mkdir "$T/nmnt"
	chown nobody "$T/nmnt"
	chmod 755 "$T"
	# the build tree may sit below a directory nobody cannot enter (a CI
	# clone in a 0700 temp dir): run a copy of the binary from $T
	cp "$IOFS" "$T/iofs-copy"
	chmod 755 "$T/iofs-copy"
	expect_err 1 "/dev/fuse.*not.*nobody.*0666" \
		setpriv --reuid=nobody --regid="$NOGROUP" --clear-groups \
		env XDG_RUNTIME_DIR= "$T/iofs-copy" -f --listen "unix:$T/nmnt.sock" "$T/nmnt"
	! is_mounted "$T/nmnt" || fail "nobody's failed mount stayed"
fi

# --pmix with no server, the mountpoint under the PMIx tmpdir (/tmp): PMIx
# searches that tree for rendezvous files, so a live mount there must not
# be waiting for its own daemon (it hung, unkillable but by SIGKILL); the
# search itself can take 20 s on a busy machine with a big /tmp (CI clones)
rc=0
# The target is a process of our own that is certainly no PMIx server (pid 1
# depended on the machine: a PMIx-aware init, or a slow one, made it vary).
sleep 300 &
notpmix=$!
# (libpmix's own leaks suppressed in ASan builds, as in tests/pmix)
TMPDIR=/tmp LSAN_OPTIONS="suppressions=$IOFS_SOURCE_DIR/tests/pmix/lsan.supp:print_suppressions=0" \
	timeout -s KILL 50 "$IOFS" -f --listen "unix:$T/px.sock" --pmix "pid:$notpmix" "$MNT" \
	>"$T/out" 2>"$T/err" || rc=$?
kill "$notpmix" 2>/dev/null
wait "$notpmix" 2>/dev/null
[ $rc -ne 137 ] || fail "--pmix pid:N with the mount under /tmp hung (killed after 50 s)"
if ! grep -q "built without PMIx" "$T/err"; then
	[ $rc -eq 1 ] || fail "--pmix pid:N: exit $rc, expected 1 ($(cat "$T/err"))"
	grep -q "cannot attach" "$T/err" || fail "--pmix pid:N: $(cat "$T/err")"
fi
! is_mounted "$MNT" || fail "--pmix failure left a mount"

# a socket or an --output-dir inside the mountpoint would be served by the
# daemon to itself (it hung): refused up front, nothing mounted
expect_err 1 "inside the mountpoint" "$IOFS" -f --listen "unix:$MNT/s.sock" "$MNT"
expect_err 1 "inside the mountpoint" env IOFS_ADDR="unix:$MNT/sub/s.sock" "$IOFS" -f "$MNT"
expect_err 1 "inside the mountpoint" "$IOFS" -f --listen "unix:$T/ok.sock" --output-dir "$MNT/out" "$MNT"
expect_err 1 "inside the mountpoint" "$IOFS" -f --listen "unix:$T/ok.sock" --output-dir "$MNT" "$MNT"
ln -s "$MNT" "$T/mlink"
expect_err 1 "inside the mountpoint" "$IOFS" -f --listen "unix:$T/ok.sock" --output-dir "$T/mlink/x/y" "$MNT"
[ ! -e "$MNT/out" ] || fail "a refused --output-dir was created"

# a relative unix: socket path is where the user started iofs, not in /
# (the daemon leaves its working directory): the background mode, and a
# forwarder started from the same directory finds it
mkdir "$T/rel"
rc=0
(cd "$T/rel" && exec timeout 10 "$IOFS" --listen unix:rel.sock "$MNT") >"$T/out" 2>"$T/err" || rc=$?
[ $rc -eq 0 ] || fail "relative --listen: exit $rc: $(cat "$T/err")"
# the background start is silent (log-syslog checks it with a syslog),
# but says so when there is no syslog to take its messages
if [ ! -w /dev/log ]; then
	grep -q "no syslog here (/dev/log" "$T/err" || fail "no word that its messages are lost: $(cat "$T/err")"
	assert_eq "the background start's words" 1 "$(wc -l <"$T/err")"
else
	[ ! -s "$T/err" ] || fail "the background start said: $(cat "$T/err")"
fi
test -S "$T/rel/rel.sock" || fail "relative --listen: no socket in the starting directory (/rel.sock: $(test -S /rel.sock && echo yes || echo no))"
(cd "$T/rel" && timeout 20 "$IOFS_RUN" --connect unix:rel.sock --strict --nspace relj -- echo hi) >"$T/out" 2>&1 ||
	fail "a forwarder in the same directory: $(cat "$T/out")"
wait_for 10 test -e "$MNT/relj/0/stdout" || fail "job relj did not appear"
assert_eq "relj output" hi "$(timeout 10 cat "$MNT/relj/0/stdout")"
fusermount3 -u "$MNT" || fail "unmount of the relative-socket daemon"
wait_for 10 bash -c "! test -S '$T/rel/rel.sock'" || true
! is_mounted "$MNT" || fail "still mounted"

# already mounted
start_daemon
expect_err 1 "already a mount point.*fusermount3 -u" "$IOFS" -f --listen "unix:$T/other.sock" "$MNT"
assert_eq "mounts at $MNT" 1 "$(grep -c " $MNT " /proc/self/mountinfo)"
is_mounted "$MNT" || fail "the first daemon lost its mount"
# another mountpoint on the first daemon's socket: refused, and it leaves
# no default spool directory behind (foreground and background)
mkdir "$T/mnt2"
spools() { ls -A "$IOFS_SPOOL_DIR" | tr '\n' ' '; }
before=$(spools)
expect_err 1 "address in use.*another iofs is listening" "$IOFS" -f --listen "$ADDR" "$T/mnt2"
expect_err 1 "address in use.*another iofs is listening" "$IOFS" --listen "$ADDR" "$T/mnt2"
! is_mounted "$T/mnt2" || fail "a refused start left its mount"
assert_eq "spool directories after refused starts" "$before" "$(spools)"
stop_daemon

# no /dev/fuse (in a private mount namespace with an empty /dev)
if unshare -m true 2>/dev/null; then
	rc=0
	unshare -m sh -c "mount -t tmpfs none /dev && exec '$IOFS' -f '$MNT'" \
		>"$T/out" 2>"$T/err" || rc=$?
	[ $rc -eq 1 ] || fail "no /dev/fuse: exit $rc"
	grep -q "/dev/fuse.*modprobe fuse" "$T/err" || fail "no /dev/fuse message: $(cat "$T/err")"
fi
log "ok"
