#!/bin/bash
# The stage (fs/spool_stage.h, docs/design.md "The stage"): a rank file
# past 4 MiB is written with O_DIRECT through io_uring, its newest bytes
# kept in `<rank>.stdout.stage` until they are on disk.
# 1. While a rank that printed 40 MB waits, its file has a stage, and the
#    rank file's pages are not in the page cache (fincore); a reader of
#    the mount gets every byte; once the rank ends the stage is gone and
#    the rank file exact (and still after SIGTERM).
# 2. kill -9 with the rank's last bytes only in the stage: the file on
#    disk is short of them, the next daemon writes them back before it
#    shows the job: exact, the stage gone.
# 3. -o spool_nostage: no stage, the same bytes.
# 4. A busy handed-over pipe grows to 256 KiB (net/conn_pipe.c
#    pipe_grow()): a rank writes 8 MiB in 1 MiB writes, then prints its
#    stdout pipe's size (F_GETPIPE_SZ) on stderr: 262144 on the hand-over,
#    the kernel's 65536 on the socket path (the forwarder reads it); the
#    8 MiB arrive exact either way.
# Run on both paths (tests/fs/meson.build fs_both_paths): the hand-over
# reads the pipe into the stage (its intent recorded first), the socket
# path copies what it acknowledges into it.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

grep -q '^#define IOFS_HAVE_URING 1' "$IOFS_BUILD_DIR/iofs_config.h" ||
	{ log "SKIP: this build has no liburing: nothing is staged"; exit 77; }
[ "$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo 0)" = 0 ] ||
	{ log "SKIP: io_uring is disabled on this kernel"; exit 77; }
command -v fincore >/dev/null || fail "no fincore (util-linux)"
SP="$T/spool"
OPTS=spool="$SP",spool_max_job=none,spool_max=none

# rank_file NS: the spool's file of rank 0's stdout of job NS
rank_file() {
	local d
	d=$(grep -lx "$1" "$SP"/*/nspace 2>/dev/null | head -n 1) || return 1
	echo "$(dirname "$d")/0.stdout"
}
# cached_kb FILE: kB of FILE in the page cache
cached_kb() { fincore --bytes --noheadings --output RES "$1" | awk '{ print int($1 / 1024) }'; }
mount_has() { size_is "$MNT/$1/0/stdout" "$2"; }

# 1. A staged rank, live.
N=40000001
start_daemon -o "$OPTS"
run_job big 1 sh -c "$PRODUCE -n $N -s 3; $(gate g1)"
wait_for 60 mount_has big $N || fail "big: $(stat -c %s "$MNT/big/0/stdout") of $N bytes"
F=$(rank_file big) || fail "no spool directory of job big"
[ -f "$F.stage" ] || fail "a rank of $N bytes has no stage: $(ls "$(dirname "$F")")"
! grep -q "io_uring\|O_DIRECT" "$T/iofs.log" || fail "the daemon says: $(grep "io_uring\|O_DIRECT" "$T/iofs.log")"
# the first 4 MiB went through the page cache and are dropped behind; the
# rest never entered it (nothing has read the file yet)
wait_for 20 bash -c "[ \$(fincore --bytes --noheadings --output RES '$F' | awk '{ print int(\$1 / 1024) }') -le 1024 ]" ||
	fail "the staged rank file keeps $(cached_kb "$F") kB in the page cache"
log "staged: rank file $(stat -c %s "$F") bytes on disk of $N, $(cached_kb "$F") kB cached, stage $(du -k "$F.stage" | cut -f1) kB"
WANT=$("$PRODUCE" -n $N -s 3 | sha256sum | cut -d' ' -f1)
assert_eq "big through the mount" "$WANT" "$(timeout 60 head -c $N "$MNT/big/0/stdout" | sha256sum | cut -d' ' -f1)"
touch "$T/g1"
wait_for 30 exited "$MNT/big/info" || fail "job big did not end"
# the stream's end closes the stage: the finished job's file is whole
wait_for 10 test ! -e "$F.stage" || fail "the stage outlived its rank's end"
assert_eq "big's rank file once the rank ended" "$WANT" "$(sha "$F")"
stop_daemon
assert_eq "big's rank file after SIGTERM" "$WANT" "$(sha "$F")"
[ ! -e "$F.stage" ] || fail "the stage outlived a clean stop"

# 2. kill -9 while the rank's last bytes are in the stage only.
N2=20000003
start_daemon -o "$OPTS"
run_job k 1 sh -c "$PRODUCE -n $N2 -s 5; $(gate g2)"
wait_for 60 mount_has k $N2 || fail "k: $(stat -c %s "$MNT/k/0/stdout") of $N2 bytes"
F2=$(rank_file k) || fail "no spool directory of job k"
kill_daemon
[ -f "$F2.stage" ] || fail "no stage left by the killed daemon"
on_disk=$(stat -c %s "$F2")
[ "$on_disk" -lt $N2 ] || fail "the rank file already had all $N2 bytes: the stage was not tested"
touch "$T/g2"
wait_exit 30 "$JOB_PID" || fail "job k's forwarder did not end"
start_daemon -o "$OPTS"
wait_for 10 test -d "$MNT/k" || fail "job k not restored: $(tail -n 3 "$T/iofs.log")"
assert_eq "k restored: size" $N2 "$(stat -c %s "$MNT/k/0/stdout")"
W2=$("$PRODUCE" -n $N2 -s 5 | sha256sum | cut -d' ' -f1)
assert_eq "k restored: bytes" "$W2" "$(timeout 60 cat "$MNT/k/0/stdout" | sha256sum | cut -d' ' -f1)"
assert_eq "k's rank file" "$W2" "$(sha "$F2")"
[ ! -e "$F2.stage" ] || fail "the stage was left after it was written back"
log "kill -9: $on_disk of $N2 bytes were in the rank file, the rest in the stage; restored exact"
stop_daemon

# 3. -o spool_nostage
start_daemon -o "$OPTS",spool_nostage
run_job n 1 sh -c "$PRODUCE -n $N2 -s 6; $(gate g3)"
wait_for 60 mount_has n $N2 || fail "n: $(stat -c %s "$MNT/n/0/stdout") of $N2 bytes"
F3=$(rank_file n) || fail "no spool directory of job n"
[ ! -e "$F3.stage" ] || fail "spool_nostage: a stage was made"
touch "$T/g3"
wait_for 30 exited "$MNT/n/info" || fail "job n did not end"
assert_eq "n through the mount" "$("$PRODUCE" -n $N2 -s 6 | sha256sum | cut -d' ' -f1)" \
	"$(timeout 60 cat "$MNT/n/0/stdout" | sha256sum | cut -d' ' -f1)"
stop_daemon

# 4. pipe growth
start_daemon -o "$OPTS"
run_job p 1 python3 -c '
import fcntl, os
b = bytes(range(256)) * 4096
for _ in range(8):
    v = memoryview(b)
    while v:
        v = v[os.write(1, v):]
os.write(2, b"pipe %d\n" % fcntl.fcntl(1, 1032))
'
wait_for 60 exited "$MNT/p/info" || fail "job p did not end: $(cat "$T/run-p.err")"
if [ "$RUN_PATH" = handover ]; then want=262144; else want=65536; fi
assert_eq "p: the rank's stdout pipe ($RUN_PATH)" "pipe $want" "$(timeout 10 cat "$MNT/p/0/stderr")"
assert_eq "p: its 8 MiB" "$(python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4096 * 8)' | sha256sum | cut -d' ' -f1)" \
	"$(timeout 30 cat "$MNT/p/0/stdout" | sha256sum | cut -d' ' -f1)"
log "a busy pipe on the $RUN_PATH path: $want bytes"
stop_daemon
log ok
