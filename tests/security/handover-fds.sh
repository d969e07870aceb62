#!/bin/bash
# The pipe hand-over takes descriptors from any local user's forwarder
# (docs/protocol.md, "Pipe hand-over"; docs/security.md).  Attacks, as
# nobody, with a hand-crafted client:
# 1. a RANK_START whose "stdout pipe" is a file on the iofs mount itself
#    (nobody's own job's info file): the daemon, reading it on its own loop,
#    would wait for its own FUSE answer and freeze for every user.  Every
#    descriptor must be a pipe of the right direction, checked before use:
#    refused with a logged reason, the daemon answering all along (before
#    the check the daemon hung for good in read(), then in close():
#    "D" state, unkillable, until the connection was aborted); and a read
#    end passed as a rank's stdin is refused too.
# 2. a flood of descriptors without RANK_STARTs: refused once they exceed
#    three per announced rank; the daemon's open fds do not grow.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

start_daemon
chmod 666 "$SOCK"
"${NOBODY_BG[@]}" "$IOFS_RUN" --connect "$ADDR" --nspace own -- sh -c "echo mine; $(gate own)" \
	>"$T/own.out" 2>&1 &
track $!
wait_for 10 file_has "$MNT/own/0/stdout" mine || fail "nobody's job did not start"

cat >"$T/fds.py" <<'PY'
import os, socket, sys
sys.path.insert(0, os.path.dirname(sys.argv[0]))
import proto
addr, mnt, what = sys.argv[1], sys.argv[2], sys.argv[3]
s = proto.connect(addr)
F_HANDOVER = 4
s.sendall(proto.hello(b'evil', 0, 1, flags=F_HANDOVER))
print(proto.answer(s), flush=True)
r, w = os.pipe()
if what == 'fuse':
    fds = [w, os.open(mnt + '/own/0/info', os.O_RDONLY), r]
    socket.send_fds(s, [proto.rank_start(0)], fds)
elif what == 'dir':  # pipes, but a read end as the rank's stdin
    socket.send_fds(s, [proto.rank_start(0)], [r, r, r])
else:  # flood: 3 per announced rank is all a connection may hold; the
    # descriptors ride on the bytes of a RANK_START, one byte at a time
    for b in proto.rank_start(0):
        try:
            socket.send_fds(s, [bytes([b])], [r, w, r, w])
        except OSError:
            break
t, body = proto.recv_frame(s)
print(proto.answer_of(t, body), flush=True)
PY
chmod 644 "$T/fds.py"

fd_count() { ls "/proc/$DAEMON_PID/fd" | wc -l; }
# 1. a FUSE file as a pipe
as_nobody timeout 20 /usr/bin/python3 "$T/fds.py" "$ADDR" "$MNT" fuse >"$T/fuse.res" 2>"$T/fuse.err" &
CL=$!
track $CL
t0=$EPOCHREALTIME
for i in 1 2 3 4 5 6 7 8 9 10; do
	timeout 5 ls "$MNT" >/dev/null || fail "the daemon froze (ls of the mount timed out, try $i)"
	sleep 0.1
done
wait_for 10 finished $CL || fail "the client was not answered"
log "fuse: $(tr '\n' ' ' <"$T/fuse.res")"
grep -q "^ERROR" "$T/fuse.res" || fail "not refused: $(cat "$T/fuse.res" "$T/fuse.err")"
daemon_log_has "is not a pipe" || fail "the refusal's reason is not logged: $(tail -5 "$T/iofs.log")"
[ ! -e "$MNT/evil/0" ] || state=$(info_get "$MNT/evil/0/info" state)
[ "${state:-}" != running ] || fail "evil's rank 0 runs with the daemon's reads on a FUSE file"

# 1b. pipes the wrong way round
as_nobody timeout 20 /usr/bin/python3 "$T/fds.py" "$ADDR" "$MNT" dir >"$T/dir.res" 2>"$T/dir.err" ||
	fail "dir client: $(cat "$T/dir.err")"
log "dir: $(tr '\n' ' ' <"$T/dir.res")"
grep -q "^ERROR" "$T/dir.res" || fail "a read end as stdin was not refused: $(cat "$T/dir.res")"
daemon_log_has "its stdin pipe is not open for writing" || fail "the direction's reason is not logged"

# 2. a flood of descriptors
n0=$(fd_count)
as_nobody timeout 20 /usr/bin/python3 "$T/fds.py" "$ADDR" "$MNT" flood >"$T/flood.res" 2>"$T/flood.err" ||
	fail "flood client: $(cat "$T/flood.err")"
log "flood: $(tr '\n' ' ' <"$T/flood.res")"
grep -q "^ERROR" "$T/flood.res" || fail "the flood was not refused: $(cat "$T/flood.res")"
daemon_log_has "more descriptors than" || fail "the flood's reason is not logged"
wait_for 10 eval '[ "$(fd_count)" -le $((n0 + 2)) ]' || fail "daemon fds $n0 -> $(fd_count)"

# the daemon serves everyone: nobody's own job and a new root job run on
touch "$T/own"
"$IOFS_RUN" --connect "$ADDR" --nspace after -- echo fine >/dev/null 2>&1 || fail "root's job failed"
wait_for 10 exited "$MNT/after/0/info" || fail "root's job did not end"
assert_eq "root's job" fine "$(timeout 5 cat "$MNT/after/0/stdout")"
wait_for 10 exited "$MNT/own/0/info" || fail "nobody's job did not end"
stop_daemon
log "ok"
