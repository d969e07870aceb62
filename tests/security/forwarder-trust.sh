#!/bin/bash
# issue 12 item 3: iofs-run checks who listens on a Unix socket before it
# sends anything (root or itself); a socket another user planted gets
# nothing, the job still runs with its output on iofs-run's own stdout.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

mkdir -m 1777 "$T/pub"
# fake_daemon PATH COUNT: as nobody, listen on PATH, count every byte any
# client sends into COUNT (never answers)
fake_daemon() {
	rm -f "$1"
	"${NOBODY_BG[@]}" /usr/bin/python3 -c '
import os, selectors, socket, sys
path, count = sys.argv[1], sys.argv[2]
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
os.chmod(path, 0o666)
srv.listen(16)
total = 0
with open(count, "w") as f:
    f.write("0\n")
sel = selectors.DefaultSelector()
sel.register(srv, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj is srv:
            c, _ = srv.accept()
            sel.register(c, selectors.EVENT_READ)
            continue
        data = key.fileobj.recv(65536)
        if not data:
            sel.unregister(key.fileobj)
            continue
        total += len(data)
        with open(count, "w") as f:
            f.write("%d\n" % total)' "$1" "$2" &
	track $!
	wait_for 10 test -S "$1" -a -s "$2" || fail "fake daemon did not start"
}

# 1. root told to use a socket nobody planted
fake_daemon "$T/pub/iofs.sock" "$T/pub/count1"
env -u IOFS_ADDR "$IOFS_RUN" --connect "unix:$T/pub/iofs.sock" --nspace trust -n 1 -- \
	echo root-output >"$T/r1.out" 2>"$T/r1.err" || fail "iofs-run failed: $(cat "$T/r1.err")"
grep -q "refusing unix:$T/pub/iofs.sock: .*runs as uid $NOBODY_UID.*nothing sent" "$T/r1.err" ||
	fail "no clear refusal: $(cat "$T/r1.err")"
assert_eq "job output on iofs-run's stdout" root-output "$(cat "$T/r1.out")"
assert_eq "bytes the fake daemon got from root" 0 "$(cat "$T/pub/count1")"

# 2. another user's default per-user socket (/tmp/iofs-<uid>.sock) planted
#    by nobody; no system daemon answers, so that is where it would go
VICTIM=daemon
VUID=$(id -u $VICTIM)
VSOCK=/tmp/iofs-$VUID.sock
[ ! -e "$VSOCK" ] || fail "$VSOCK already exists: cannot run this case"
[ ! -S /run/iofs/iofs.sock ] && [ ! -S /run/iofs.sock ] || log "note: a system daemon listens; the victim goes there"
fake_daemon "$VSOCK" "$T/pub/count2"
trap 'rc=$?; rm -f "$VSOCK"; (exit $rc); cleanup' EXIT
(cd / && env -u IOFS_ADDR -u XDG_RUNTIME_DIR setpriv --reuid=$VICTIM --regid=$VICTIM --clear-groups -- \
	"$IOFS_RUN" --nspace trust2 -n 1 -- echo victim-output) >"$T/r2.out" 2>"$T/r2.err" ||
	fail "iofs-run (victim) failed: $(cat "$T/r2.err")"
if [ ! -S /run/iofs/iofs.sock ] && [ ! -S /run/iofs.sock ]; then
	grep -q "refusing unix:$VSOCK: .*runs as uid $NOBODY_UID" "$T/r2.err" ||
		fail "no clear refusal: $(cat "$T/r2.err")"
	assert_eq "job output on iofs-run's stdout" victim-output "$(cat "$T/r2.out")"
fi
assert_eq "bytes the fake daemon got from the victim" 0 "$(cat "$T/pub/count2")"

# 3. the real daemon (root) is trusted by nobody's iofs-run
start_daemon
chmod 666 "$SOCK"
as_nobody "$IOFS_RUN" --connect "$ADDR" --nspace trust3 -n 1 -- echo fine >"$T/r3.out" 2>"$T/r3.err" ||
	fail "nobody's job against the real daemon: $(cat "$T/r3.err")"
[ ! -s "$T/r3.err" ] || fail "warning against the real daemon: $(cat "$T/r3.err")"
assert_eq "output in the mount" fine "$(timeout 5 cat "$MNT/trust3/0/stdout")"
stop_daemon
log "ok"
