#!/bin/bash
# Case 8: faults.  (a) kill -9 of a forwarder mid-stream: its rank is lost,
# its streams complete (hand-over: once the daemon read its pipes to their
# end, i.e. when the rank itself ends), readers get EOF, the daemon carries on.  (b) garbage
# and truncated frames on the daemon's socket while a real job runs: the
# job's output is still exact.  (c) Ctrl-C of a parked reader and of a parked
# writer.  (d) SIGTERM of the daemon with parked readers and writers: all
# answered (the reader of the running rank with ENOTCONN, not a false
# end of file), clean unmount, exit 0.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
start_daemon

# (a)
"$IOFS_RUN" --nspace k9 --rank 0 -- sh -c 'echo one; exec sleep 600' &
K9=$!
track $K9
wait_for 10 test -s "$MNT/k9/0/stdout" || fail "(a) no output"
cat "$MNT/k9/0/stdout" >"$T/k9.out" &
RD=$!
track $RD
wait_for 10 fd_open $RD "$MNT/k9/0/stdout" || fail "(a) reader did not open"
K9_RANK=$(info_get "$MNT/k9/0/info" pid)
track "$K9_RANK" # the rank outlives its killed forwarder: end it by pid
kill -9 $K9
wait $K9 2>/dev/null || true
if [ "$RUN_PATH" = handover ]; then
	# the daemon holds the rank's pipes: it reads them to their end, so
	# the rank's streams end when the rank (still running) does
	grep -q '^path: handover' "$MNT/k9/0/info" || fail "(a) not handed over"
	wait_for 10 grep -q "forwarder gone; reading its ranks' pipes" \
		"$T/iofs.log" || fail "(a) daemon not draining"
	kill "$K9_RANK"
fi
wait_exit 10 $RD || fail "(a) reader not given EOF after its forwarder died"
wait $RD || fail "(a) reader failed"
assert_eq "(a) data" one "$(cat "$T/k9.out")"
wait_for 10 bash -c "grep -q '^state: lost' '$MNT/k9/0/info'" || fail "(a) rank not lost"

# (b) a real job of 8 MiB read live while 40 connections throw garbage
gated_producer gb 8M 81 "$T/gb.want"
GB=$GATED_PID
cat "$MNT/gb/0/stdout" >"$T/gb.got" &
GBR=$!
track $GBR
wait_for 10 fd_open $GBR "$MNT/gb/0/stdout" || fail "(b) reader did not open"
python3 - "$SOCK" >"$T/garbage.log" 2>&1 <<'PY' &
import os, random, socket, struct, sys
random.seed(7)
for i in range(40):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    kind = i % 4
    if kind == 0:
        data = os.urandom(random.randint(1, 4096))
    elif kind == 1:  # a huge length prefix
        data = struct.pack('<I', 0xFFFFFFF0) + os.urandom(16)
    elif kind == 2:  # a truncated frame
        data = struct.pack('<I', 1000) + os.urandom(10)
    else:
        data = b''
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        s.recv(4096)
    except OSError:
        pass
    s.close()
print("thrown")
PY
PY_PID=$!
open_gate gb
wait_exit 60 $PY_PID || fail "(b) garbage thrower hung"
wait $PY_PID || fail "(b) garbage thrower failed: $(cat "$T/garbage.log")"
wait_exit 60 $GB || fail "(b) job did not finish"
wait $GB || fail "(b) iofs-run status $?"
wait_exit 30 $GBR || fail "(b) reader did not finish"
wait $GBR || fail "(b) reader failed"
assert_eq "(b) sha256" "$(sha "$T/gb.want")" "$(sha "$T/gb.got")"
kill -0 $DAEMON_PID || fail "(b) daemon died"

# (c) Ctrl-C of a parked reader and a parked writer
"$IOFS_RUN" --nspace cc --rank 0 -- sh -c 'echo x; exec sleep 600' &
CC=$!
track $CC
wait_for 10 test -s "$MNT/cc/0/stdout" || fail "(c) no output"
env --default-signal=INT cat "$MNT/cc/0/stdout" >/dev/null &
R=$!
wait_for 10 fd_open $R "$MNT/cc/0/stdout" || fail "(c) reader did not open"
env --default-signal=INT dd if=/dev/zero of="$MNT/cc/0/stdin" bs=1M count=64 status=none &
W=$!
wait_for 10 fd_open $W "$MNT/cc/0/stdin" || fail "(c) writer did not open"
wait_for 10 info_at_least cc 0 stdin_xoff 1 ||
	fail "(c) writer never parked behind an XOFF"
kill -INT $R $W
wait_exit 3 $R || fail "(c) Ctrl-C did not end the parked reader"
wait_exit 3 $W || fail "(c) Ctrl-C did not end the parked writer"

# (d) SIGTERM with a parked reader and a parked writer (a fresh rank: the
# writer of (c) closing gave cc's rank its EOF, FIFO rule)
"$IOFS_RUN" --nspace st --rank 0 -- sh -c 'echo x; exec sleep 600' &
ST=$!
track $ST
wait_for 10 test -s "$MNT/st/0/stdout" || fail "(d) no output"
cat "$MNT/st/0/stdout" >/dev/null 2>"$T/r2.err" &
R2=$!
track $R2
dd if=/dev/zero of="$MNT/st/0/stdin" bs=1M count=64 status=none 2>/dev/null &
W2=$!
track $W2
wait_for 10 fd_open $R2 "$MNT/st/0/stdout" || fail "(d) reader did not open"
wait_for 10 fd_open $W2 "$MNT/st/0/stdin" || fail "(d) writer did not open"
wait_for 10 info_at_least st 0 stdin_xoff 1 ||
	fail "(d) writer never parked behind an XOFF"
stop_daemon
wait_exit 5 $R2 || fail "(d) parked reader not answered at SIGTERM"
rc=0
wait $R2 || rc=$?
[ $rc -ne 0 ] || fail "(d) the reader of a running rank took SIGTERM for its end (EOF)"
grep -q "Transport endpoint is not connected" "$T/r2.err" || fail "(d) reader: $(cat "$T/r2.err")"
wait_exit 5 $W2 || fail "(d) parked writer not answered at SIGTERM"
figures faults lost=ok garbage_conns=40 ctrl_c=ok sigterm=ok
