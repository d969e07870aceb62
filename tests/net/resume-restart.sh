#!/bin/bash
# Resume across daemon restarts (docs/protocol.md, "Resume"): a rank
# writes 64 MiB at a steady pace; the daemon (-o spool) is killed with
# SIGKILL and restarted on the same spool and socket 5 times in the middle
# of it.  Each restarted daemon restores the job with its rank still
# running ("reconnecting"), the forwarder reconnects and resumes: the
# stream in the mount at the end is exactly the 64 MiB (sha256, count),
# nothing printed on the forwarder's terminal, XOFF/XON paired.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
export IOFS_RECONNECT_TIMEOUT=120
SP="$T/spool"
KILLS=5
SIZE=$((64 << 20))

start_daemon -o spool="$SP" -o resume_window=120
head -c $SIZE /dev/urandom >"$T/blob"
"$IOFS_RUN" -v --nspace rs -- "$PACE" -r 4000000 -c 65536 -i "$T/blob" >"$T/rs.out" 2>"$T/rs.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/rs/0/stdout" || fail "job did not appear"
for i in $(seq $KILLS); do
	want=$((i * 8 << 20))
	wait_for 60 info_at_least rs 0 stdout_bytes $want || fail "kill $i: $want bytes did not arrive: $(cat "$T/rs.err")"
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	finished $JOB || true
	start_daemon -o spool="$SP" -o resume_window=120
	wait_for 10 test -d "$MNT/rs/0" || fail "kill $i: job not restored"
	wait_for 60 state_is_link rs 0 connected || fail "kill $i: not resumed: $(cat "$MNT/rs/0/info"; cat "$T/rs.err")"
	log "kill -9 #$i at >= $want bytes: resumed at $(info_get "$MNT/rs/0/info" stdout_bytes)"
done
wait_for 120 finished $JOB || fail "forwarder did not end"
assert_eq "forwarder status" 0 "$(rc_of $JOB)"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/rs.out")"
wait_for 10 state_is rs 0 exited || fail "rank not exited: $(cat "$MNT/rs/0/info")"
assert_eq "bytes in the mount" $SIZE "$(timeout 30 cat "$MNT/rs/0/stdout" | wc -c)"
assert_eq "sha256 in the mount" "$(sha "$T/blob")" "$(timeout 30 cat "$MNT/rs/0/stdout" | sha256sum | cut -d' ' -f1)"
assert_eq "stdout XOFF/XON paired" "$(info_get "$MNT/rs/0/info" stdout_xoff)" "$(info_get "$MNT/rs/0/info" stdout_xon)"
n=$(grep -c "resumed job 'rs'" "$T/rs.err")
assert_eq "resumes logged by the forwarder" $KILLS "$n"
grep -q "0 lost" "$T/rs.err" || fail "forwarder counted lost bytes: $(tail -n 3 "$T/rs.err")"
log "$(tail -n 2 "$T/rs.err")"
