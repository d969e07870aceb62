#!/bin/bash
# One logger, two sinks (issue 11 defect 5, issue 16 item 3).  A daemon in
# the background writes to syslog, so its net warnings (a malformed frame,
# a peer's name with control characters) reach the system log instead of
# /dev/null; -o debug adds debug lines, the default has none; a failure
# before the daemon is up still reaches the terminal.
#
# Without touching this machine's /dev/log: each daemon runs in a private
# mount namespace (unshare -m) whose /dev is a tmpfs with the device nodes
# it needs bound in, and /dev/log bound to a datagram socket a small python
# listener serves (what journald/rsyslog do on /dev/log).  The mount lives
# in that namespace only; the daemons' sockets are ordinary files in $T.
. "$IOFS_SOURCE_DIR/tests/lib.sh"

command -v unshare >/dev/null || { log "SKIP: no unshare"; exit 77; }
unshare -m true 2>/dev/null || { log "SKIP: cannot create mount namespaces"; exit 77; }

# --- the syslog listener --------------------------------------------------
python3 - "$T/devlog" "$T/syslog.txt" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], 'ab', buffering=0) as f:
    while True:
        d = s.recv(65536)
        if any(b < 0x20 or b == 0x7f for b in d):  # a forged line or escape
            f.write(b'CONTROL-BYTES ' + repr(d).encode() + b'\n')
        else:
            f.write(d + b'\n')
PY
track $!
wait_for 10 test -S "$T/devlog" || fail "syslog listener did not start"

# ns_iofs NAME [iofs options...]: iofs in the background (no -f) in its own
# mount namespace, mounting $T/NAME.mnt; its terminal output goes to
# $T/NAME.term; returns the status of the parent (0 once mounted and
# listening, 1 if the start failed).
ns_iofs() {
	local name=$1
	shift
	mkdir -p "$T/$name.mnt" "$T/realdev"
	unshare -m --propagation private bash -c '
		set -e
		T=$1 name=$2 iofs=$3
		shift 3
		mount --bind /dev "$T/realdev"
		mount -t tmpfs -o mode=0755 iofs-test-dev /dev
		for n in null zero full random urandom tty fuse; do
			[ -e "$T/realdev/$n" ] || continue
			touch "/dev/$n"
			mount --bind "$T/realdev/$n" "/dev/$n"
		done
		touch /dev/log
		mount --bind "$T/devlog" /dev/log
		umount "$T/realdev"
		exec "$iofs" "$@" "$T/$name.mnt"
	' bg "$T" "$name" "$IOFS" "$@" >"$T/$name.term" 2>&1
}
# bg_daemon NAME [iofs options...]: ns_iofs listening on unix:$T/NAME.sock;
# sets BG_PID from the "iofs[PID]" tag of its syslog line (tracked).
bg_daemon() {
	local name=$1
	shift
	ns_iofs "$name" --listen "unix:$T/$name.sock" "$@" ||
		fail "$name: background daemon failed to start: $(cat "$T/$name.term")"
	wait_for 10 grep -q "net: listening on unix:$T/$name.sock" "$T/syslog.txt" ||
		fail "$name: no 'listening' line in syslog: $(cat "$T/syslog.txt")"
	BG_PID=$(sed -n "s|.*iofs\[\([0-9]*\)\]: net: listening on unix:$T/$name.sock.*|\1|p" "$T/syslog.txt")
	[ -n "$BG_PID" ] && kill -0 "$BG_PID" || fail "$name: no daemon pid in syslog"
	track "$BG_PID"
}
# lines NAME: the syslog lines of daemon NAME (by its pid)
lines() { grep "iofs\[$2\]: " "$T/syslog.txt"; }
# bad_frame SOCK: a frame of unknown type, as the first frame
bad_frame() {
	python3 - "$1" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(struct.pack('<IB', 2, 99) + b'x')
while s.recv(4096):
    pass
PY
}

bg_daemon plain
PLAIN=$BG_PID
bg_daemon dbg -o debug
DBG=$BG_PID
assert_eq "nothing on the terminal of a daemon that went to the background" "" \
	"$(cat "$T/plain.term" "$T/dbg.term")"

# A forwarder on a host whose name carries a newline and an escape
# sequence (its own UTS namespace): the daemon refuses the HELLO (no wire
# string with control bytes is taken, docs/security.md) and logs why, in
# one line; the logger's own escaping is tested in test-log.c.
EVIL=$'evil\n<28>iofs[1]: forged\e[31m'
for d in plain dbg; do
	unshare -u python3 -c 'import os, socket, sys
socket.sethostname(sys.argv[1]); os.execv(sys.argv[2], sys.argv[2:])' "$EVIL" \
		"$IOFS_RUN" --connect "unix:$T/$d.sock" --nspace "job$d" -- echo hi ||
		fail "$d: forwarder failed"
	bad_frame "$T/$d.sock" || fail "$d: bad frame thrower failed"
	"$IOFS_RUN" --connect "unix:$T/$d.sock" --nspace "ok$d" -- echo hi ||
		fail "$d: plain forwarder failed"
done
for pid in $PLAIN $DBG; do
	wait_for 10 grep -q "iofs\[$pid\]: net: conn .*closing: unknown frame type" "$T/syslog.txt" ||
		fail "the malformed frame's warning did not reach syslog: $(lines x $pid)"
done
# <28> = LOG_DAEMON | LOG_WARNING
lines plain $PLAIN | grep -q "^<28>.*closing: unknown frame type" ||
	fail "the warning has not the daemon facility and warning level: $(lines plain $PLAIN)"
lines plain $PLAIN | grep -q "^<28>.*closing: .*control character in the host name" ||
	fail "the refused host name is not logged as a warning: $(lines plain $PLAIN)"
! grep -q "CONTROL-BYTES" "$T/syslog.txt" || fail "control bytes reached syslog: $(grep CONTROL-BYTES "$T/syslog.txt")"
! grep -q "forged" "$T/syslog.txt" || fail "a forged line reached syslog"

# info lines of the start went to syslog only
lines plain $PLAIN | grep -q "^<30>.*: mounted $T/plain.mnt" || fail "no 'mounted' info line in syslog"

# -o debug adds debug lines (<31> = LOG_DAEMON | LOG_DEBUG); the default none.
lines dbg $DBG | grep -q "^<31>.*net: conn [0-9]*: accepted" || fail "-o debug: no debug line: $(lines dbg $DBG)"
lines dbg $DBG | grep -q "^<31>.*net: conn [0-9]*: HELLO rank" || fail "-o debug: no frame line"
ndbg=$(lines plain $PLAIN | grep -c "^<31>")
assert_eq "debug lines of a default daemon" 0 "$ndbg"
log "syslog: $(lines plain $PLAIN | wc -l) lines from the default daemon, $(lines dbg $DBG | grep -c '^<31>') debug lines with -o debug"

# SIGTERM: the daemon says so in syslog and ends.
for pid in $PLAIN $DBG; do
	kill -TERM "$pid"
	wait_for 20 bash -c "! kill -0 $pid 2>/dev/null" || fail "daemon $pid did not end on SIGTERM"
	grep -q "iofs\[$pid\]: Terminated: unmounting" "$T/syslog.txt" || fail "no 'unmounting' line of $pid"
done

# --- before the daemon is up, the terminal --------------------------------
rc=0
"$IOFS" -o loglevel=loud "$MNT" 2>"$T/bad.err" || rc=$?
assert_eq "bad -o loglevel status" 2 "$rc"
grep -q "bad -o loglevel=loud" "$T/bad.err" || fail "bad -o loglevel: $(cat "$T/bad.err")"
rc=0
ns_iofs early --listen "unix:$T/no/such/dir.sock" || rc=$?
assert_eq "background daemon that cannot listen: status" 1 "$rc"
grep -q "^iofs: cannot listen on unix:$T/no/such/dir.sock" "$T/early.term" ||
	fail "the start-up error did not reach the terminal: $(cat "$T/early.term")"
assert_eq "only the error on the terminal" 1 "$(wc -l <"$T/early.term")"
wait_for 10 grep -q "iofs\[[0-9]*\]: cannot listen on unix:$T/no/such/dir.sock" "$T/syslog.txt" ||
	fail "the start-up error did not reach syslog too"
log "ok"
