#!/bin/bash
# Interrupts: Ctrl-C (SIGINT) ends a cat parked at the start of an empty stream, a
# cat parked in read, and a parked writer, promptly; the writer's write()
# count stays exact.  SIGTERM to the daemon answers parked requests (reads
# ENOTCONN for a stream that had not ended, writes what was consumed),
# exits 0 and leaves no mount.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

start_daemon
# rank 0 prints nothing until "hi" gate; rank 1 prints a line at once.
run_job sig 2 sh -c "[ \$IOFS_RANK = 1 ] && echo hi; $(gate open); cat > $T/sig.\$IOFS_RANK"

# interrupt_ends PID WHAT: SIGINT ends PID within 2 s with status 130
interrupt_ends() {
	sleep 0.3
	kill -0 "$1" || fail "$2 ended before the interrupt"
	kill -INT "$1"
	wait_for 2 finished "$1" || fail "$2 ignored SIGINT (stuck in the kernel?)"
	local rc
	rc=$(rc_of "$1")
	[ "$rc" -eq 130 ] || fail "$2: status $rc after SIGINT"
}

env --default-signal=INT cat "$MNT/sig/0/stdout" >/dev/null &
interrupt_ends $! "cat parked on an empty stream"
env --default-signal=INT cat "$MNT/sig/1/stdout" >"$T/cat1" &
P=$!
wait_for 5 file_has "$T/cat1" hi || fail "cat did not read the first line"
interrupt_ends $P "cat parked in read"

# writer: rank 0 does not read stdin yet, so writes park once the stdin
# credit (256 KiB in flight) is used: possibly inside the first 1 MiB write()
WRITER="$IOFS_BUILD_DIR/tests/fs/fs-writer"
"$WRITER" "$MNT/sig/0/stdin" "$T/written" >/dev/null &
W=$!
track $W
wait_for 10 info_at_least sig 0 stdin_xoff 1 || fail "writer never parked behind an XOFF"
# stalls COUNTFILE: the writer's count stops growing (it is parked)
stalls() {
	local prev=-1 cur
	for _ in $(seq 20); do
		cur=$(cat "$1" 2>/dev/null || echo 0)
		[ "$cur" = "$prev" ] && return 0
		prev=$cur
		sleep 0.3
	done
	return 1
}
stalls "$T/written" || fail "writer never blocked (wrote $(cat "$T/written"))"
kill -INT $W
wait_for 2 finished $W || fail "parked writer ignored SIGINT"
written=$(cat "$T/written")
log "writer stopped after $written bytes"
touch "$T/open"
wait_for 20 exited "$MNT/sig/0/info" || fail "rank 0 did not end"
assert_eq "bytes the rank got == write() total" "$written" "$(stat -c %s "$T/sig.0")"

# Ctrl-C of a writer into the job's stdin that one rank took and the other
# (not reading) has not: the write counts as consumed and the slow rank
# still gets those bytes, from the daemon's own copy (the writer's buffer is
# gone) -- both ranks get exactly the write() total, all 'x'.
run_job bc 2 sh -c "[ \$IOFS_RANK = 1 ] && { $(gate bc-open); }; cat > $T/bc.\$IOFS_RANK"
"$WRITER" "$MNT/bc/stdin" "$T/bcwritten" >/dev/null &
W=$!
track $W
wait_for 10 info_at_least bc 1 stdin_xoff 1 || fail "broadcast writer never parked behind rank 1"
stalls "$T/bcwritten" || fail "broadcast writer never blocked (wrote $(cat "$T/bcwritten"))"
kill -INT $W
wait_for 2 finished $W || fail "parked broadcast writer ignored SIGINT"
written=$(cat "$T/bcwritten")
touch "$T/bc-open"
wait_for 20 exited "$MNT/bc/0/info" || fail "bc rank 0 did not end"
wait_for 20 exited "$MNT/bc/1/info" || fail "bc rank 1 did not end"
head -c "$written" /dev/zero | tr '\0' x >"$T/bc.want"
for r in 0 1; do
	assert_eq "bc rank $r got the write() total" "$written" "$(stat -c %s "$T/bc.$r")"
	assert_eq "bc rank $r bytes" "$(sha "$T/bc.want")" "$(sha "$T/bc.$r")"
done
log "broadcast writer stopped after $written bytes; both ranks exact"

# SIGTERM with a parked reader and a parked writer
run_job term 1 sh -c "echo hi; $(gate never)"
cat "$MNT/term/0/stdout" >"$T/term.out" 2>"$T/term.err" &
C=$!
track $C
wait_for 5 file_has "$T/term.out" hi || fail "term cat"
"$WRITER" "$MNT/term/0/stdin" "$T/twritten" >/dev/null &
W=$!
track $W
wait_for 10 info_at_least term 0 stdin_xoff 1 || fail "term writer never parked"
sleep 0.5
kill -0 $C || fail "reader ended early"
stop_daemon
wait_for 5 finished $C || fail "parked reader not answered at SIGTERM"
# not end of file: the job still runs (its forwarder resumes with the
# next daemon), and a reader must not take a cut-off stream for a whole
# one (cat 'succeeded' with half the output)
assert_eq "reader status at SIGTERM (cut off, an error)" 1 "$(rc_of $C)"
grep -q "Transport endpoint is not connected" "$T/term.err" || fail "reader at SIGTERM: $(cat "$T/term.err")"
assert_eq "what the reader had" hi "$(cat "$T/term.out")"
wait_for 5 finished $W || fail "parked writer not answered at SIGTERM"

# umount with a reader open: plain unmount is refused (busy), nothing
# changes; lazy unmount detaches at once, the reader still gets the rest
# and EOF, and the daemon exits 0 when it closes
start_daemon
run_job um 1 sh -c "echo one; $(gate um-go); echo two"
cat "$MNT/um/0/stdout" >"$T/um.out" &
C=$!
track $C
wait_for 5 file_has "$T/um.out" one || fail "um cat"
if fusermount3 -u "$MNT" 2>"$T/err"; then fail "unmount with a reader open succeeded"; fi
grep -q "busy" "$T/err" || fail "busy unmount: $(cat "$T/err")"
is_mounted "$MNT" || fail "refused unmount lost the mount"
kill -0 "$DAEMON_PID" || fail "refused unmount ended the daemon"
fusermount3 -uz "$MNT" || fail "lazy unmount failed"
! is_mounted "$MNT" || fail "lazy unmount left the mount"
touch "$T/um-go"
wait_for 10 finished $C || fail "reader did not end after a lazy unmount"
assert_eq "reader after lazy unmount" "$(printf 'one\ntwo')" "$(cat "$T/um.out")"
assert_eq "reader status" 0 "$(rc_of $C)"
wait_for 10 finished "$DAEMON_PID" || fail "daemon did not exit after a lazy unmount"
assert_eq "daemon status after a lazy unmount" 0 "$(rc_of "$DAEMON_PID")"
DAEMON_PID=
log "ok"
