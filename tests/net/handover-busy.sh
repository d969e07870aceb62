#!/bin/bash
# A busy daemon while a 1024-rank iofs-run hands its ranks' pipes over
# (docs/protocol.md, "Pipe hand-over"): the daemon is stopped (SIGSTOP) for
# 2 s in the middle of the RANK_STARTs, each one message with three
# descriptors, so they fill the socket.  The forwarder waits for it
# (before, it took the full socket's EAGAIN for a broken link and
# reconnected; the ranks it had not handed over yet then never started on
# the daemon and the job hung at ~150 of 1024 ranks, and the resume that
# superseded the live connection crashed the daemon).  Every rank starts,
# prints its line, and ends (at once, or when the job's stdin is closed).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
export IOFS_RECONNECT_TIMEOUT=30
N=1024
with_nofile 8192
start_daemon -o resume_window=30
# even ranks end at once (their EXITs queue up behind the full socket, ahead
# of the next RANK_START: iofs-run spun at 100 % CPU there, its bufferevent's
# frozen output never written), odd ones read stdin to its end
"$T/iofs-run" -n $N --nspace busy -- sh -c 'echo "rank $IOFS_RANK"; [ $((IOFS_RANK % 2)) = 0 ] || exec cat' \
	>"$T/busy.out" 2>"$T/busy.err" &
JOB=$!
track $JOB
kids() { [ "$(pgrep -c -P $JOB)" -ge "$1" ]; }
wait_for 20 kids 64 || fail "the forwarder did not start its ranks: $(cat "$T/busy.err")"
kill -STOP "$DAEMON_PID"
sleep 2 # the daemon is busy (the test's input): the RANK_STARTs fill the socket
kill -CONT "$DAEMON_PID"
all_ranks() { [ "$(info_get "$MNT/busy/info" ranks)" = $N ]; }
wait_for 60 all_ranks ||
	fail "not every rank started on the daemon: $(grep '^ranks' "$MNT/busy/info"); $(cat "$T/busy.err")"
: >"$MNT/busy/stdin" # a writer that closes: EOF to every rank
wait_for 60 finished $JOB || fail "the job did not end: $(grep -E '^(state|ranks)' "$MNT/busy/info")"
assert_eq "forwarder status" 0 "$(rc_of $JOB)"
assert_eq "forwarder's stderr (no reconnect)" "" "$(cat "$T/busy.err")"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/busy.out")"
assert_eq "job state" exited "$(job_state busy)"
assert_eq "lines in the merged view" $N "$(timeout 30 cat "$MNT/busy/stdout" | grep -c '<stdout>: rank ')"
assert_eq "rank 1023's line" "rank 1023" "$(cat "$MNT/busy/1023/stdout")"
assert_eq "rank 0 path" handover "$(info_get "$MNT/busy/0/info" path)"
daemon_alive || fail "the daemon died"
grep -q 'superseded' "$T/iofs.log" && fail "the link was taken for broken: $(grep superseded "$T/iofs.log")"
log "$N ranks handed over across a 2 s stop of the daemon"
