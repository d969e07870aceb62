#!/bin/bash
# Issue 12 item 6: one HELLO must not freeze the daemon.  Registration used
# a linear job lookup plus a walk over every connection per announced rank:
# with 5,000 leftover jobs one HELLO announcing 65,536 ranks stalled every
# user for ~5 s.  Jobs are now hashed by name and a HELLO looks only at its
# own job's connections: the answer comes within 0.2 s (2.7 s before).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

start_daemon
cat >"$T/hello.py" <<'PY'
import os, sys, time
sys.path.insert(0, os.environ['IOFS_SOURCE_DIR'] + '/tests/security')
import proto
addr, n = sys.argv[1], int(sys.argv[2])
# n leftover jobs: one rank each, started and exited, connection closed
for i in range(n):
    s = proto.connect(addr)
    ns = b'left.%d' % i
    s.sendall(proto.hello(ns) + proto.rank_start(0) + proto.exit_(0))
    assert proto.answer(s) == 'WELCOME'
    s.shutdown(1)
    while proto.recv_frame(s)[0] is not None:
        pass
    s.close()
# the timed HELLO: 65,536 ranks of a new job, then the same range again
# (a second connection: its ranks are taken, so it gets the distinct name
# big~1 by the collision rule, which walks the same paths)
s = proto.connect(addr)
t0 = time.monotonic()
s.sendall(proto.hello(b'big', 0, 65536))
a = proto.answer(s)
t1 = time.monotonic()
s2 = proto.connect(addr)
s2.sendall(proto.hello(b'big', 0, 65536))
a2 = proto.answer(s2)
t2 = time.monotonic()
print('%s %.4f %s %.4f' % (a, t1 - t0, ''.join(a2.split(' ')[:2]), t2 - t1))
PY
/usr/bin/python3 "$T/hello.py" "$ADDR" 5000 >"$T/res" 2>"$T/err" || fail "client: $(cat "$T/err")"
read -r a1 s1 a2 s2 <"$T/res"
log "5,000 leftover jobs; HELLO with 65,536 ranks: $a1 in $s1 s; the same range again: $a2 in $s2 s"
figures limits-hello hello_s=$s1 renamed_s=$s2
assert_eq "first HELLO" WELCOME "$a1"
assert_eq "second HELLO on the same ranks (renamed big~1)" WELCOME "$a2"
grep -q "job 'big' already has a rank 0.*this run is 'big~1'" "$T/iofs.log" ||
	fail "the second HELLO was not given the name big~1"
awk -v a="$s1" -v b="$s2" 'BEGIN { exit !(a < 0.2 && b < 0.2) }' ||
	fail "HELLO answered in $s1 s / $s2 s with 5,000 leftover jobs (bound 0.2 s)"
[ "$(ls "$MNT" | grep -c '^left\.')" = 5000 ] || fail "leftover jobs: $(ls "$MNT" | grep -c '^left\.')"
stop_daemon
log "ok"
