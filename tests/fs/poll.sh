#!/bin/bash
# O_NONBLOCK reads (EAGAIN at the live end, 0 at a completed end) and poll()
# (not readable at the live end, woken when data arrives, readable at EOF).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

start_daemon
run_job p 1 sh -c "$(gate data); echo data; $(gate end)"
timeout 30 python3 - "$MNT/p/0/stdout" "$T" <<'PY' || fail "python checks failed"
import errno, os, select, sys, time
path, T = sys.argv[1], sys.argv[2]
def touch(n): open(os.path.join(T, n), "w").close()
# O_NONBLOCK read at the live end of an empty stream: EAGAIN
fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
try:
    os.read(fd, 100)
    sys.exit("read at the live end did not fail")
except BlockingIOError:
    pass
p = select.poll()
p.register(fd, select.POLLIN)
r = p.poll(300)
if r:
    sys.exit("poll says readable at the live end: %r" % r)
touch("data")
t0 = time.time()
r = p.poll(5000)
dt = time.time() - t0
if not r or not r[0][1] & select.POLLIN:
    sys.exit("poll not woken by new data")
print("poll woke after %.3f s" % dt, file=sys.stderr)
got = os.read(fd, 100)
if got != b"data\n":
    sys.exit("read %r" % got)
try:
    os.read(fd, 100)
    sys.exit("second read did not fail")
except BlockingIOError:
    pass
# a blocking fd on the same stream: parked read answered by completion
fd2 = os.open(path, os.O_RDONLY)
os.lseek(fd2, 5, os.SEEK_SET)
touch("end")
t0 = time.time()
if os.read(fd2, 100) != b"":
    sys.exit("blocking read at completion is not EOF")
r = p.poll(5000)
if not r:
    sys.exit("poll not readable at EOF")
if os.read(fd, 100) != b"":
    sys.exit("O_NONBLOCK read at a completed end is not 0")
PY
stop_daemon
log "ok"
