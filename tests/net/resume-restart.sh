#!/bin/bash
# Resume across daemon restarts (docs/protocol.md, "Resume"): two ranks
# of one forwarder write 64 MiB and 16 MiB at a steady pace; the daemon (-o
# spool) is stopped and restarted on the same spool and socket 5 times in
# the middle of it: killed with SIGKILL (1st, 3rd, 5th), or shut down with
# SIGTERM while a reader follows rank 0 (2nd, 4th: the daemon then serves
# the reader's release for a moment, and must read nothing more meanwhile;
# before, it read on, failed to deliver to its stopped router and sent the
# forwarder a final ERROR, so the job fell back to its terminal).  Each restarted daemon restores the job with its rank still
# running ("reconnecting"), the forwarder reconnects and resumes: the
# stream in the mount at the end is exactly the 64 MiB (sha256, count),
# nothing printed on the forwarder's terminal, XOFF/XON paired, on both
# paths: on the hand-over the store takes each read out of the pipe itself
# (splice), so a kill -9 leaves each byte in the spool or in the pipe
# (resume-kill-fast.sh kills a busy daemon 20 times).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
# Both paths (tests/net/meson.build net_both_paths): a handed-over link
# resumes too, passing the pipes again (docs/protocol.md, "Pipe hand-over").
export IOFS_RECONNECT_TIMEOUT=120
SP="$T/spool"
KILLS=5
SIZE=$((64 << 20))

start_daemon -o spool="$SP" -o resume_window=120
head -c $SIZE /dev/urandom >"$T/blob0"
head -c $((SIZE / 4)) /dev/urandom >"$T/blob1"
"$IOFS_RUN" -v -n 2 --nspace rs -- sh -c "exec $PACE -r \$((4000000 >> (IOFS_RANK * 2))) -c 65536 -i $T/blob\$IOFS_RANK" \
	>"$T/rs.out" 2>"$T/rs.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/rs/0/stdout" || fail "job did not appear"
for i in $(seq $KILLS); do
	want=$((i * 8 << 20))
	wait_for 60 info_at_least rs 0 stdout_bytes $want || fail "kill $i: $want bytes did not arrive: $(cat "$T/rs.err")"
	if [ $((i % 2)) = 1 ]; then
		how="kill -9"
		kill_daemon
	else
		how="SIGTERM with a reader"
		start_reader "$MNT/rs/0/stdout" "$T/follow.$i"
		wait_for 10 size_ge "$T/follow.$i" 1 || fail "kill $i: the reader got nothing"
		stop_daemon
		wait_for 10 finished "$READER_PID" || fail "kill $i: the reader outlived the daemon"
	fi
	finished $JOB || true
	start_daemon -o spool="$SP" -o resume_window=120
	wait_for 10 test -d "$MNT/rs/0" || fail "kill $i: job not restored"
	for r in 0 1; do
		wait_for 60 state_is_link rs $r connected || fail "kill $i: rank $r not resumed: $(cat "$MNT/rs/$r/info"; cat "$T/rs.err")"
	done
	assert_eq "kill $i: rank 0 path" "$RUN_PATH" "$(info_get "$MNT/rs/0/info" path)"
	log "$how #$i at >= $want bytes: resumed at $(info_get "$MNT/rs/0/info" stdout_bytes)"
done
wait_for 120 finished $JOB || fail "forwarder did not end"
assert_eq "forwarder status" 0 "$(rc_of $JOB)"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/rs.out")"
for r in 0 1; do
	wait_for 10 state_is rs $r exited || fail "rank $r not exited: $(cat "$MNT/rs/$r/info")"
	want=$(stat -c %s "$T/blob$r")
	got=$(timeout 30 cat "$MNT/rs/$r/stdout" | wc -c)
	assert_eq "rank $r: bytes in the mount" "$want" "$got"
	assert_eq "rank $r: sha256 in the mount" "$(sha "$T/blob$r")" "$(timeout 30 cat "$MNT/rs/$r/stdout" | sha256sum | cut -d' ' -f1)"
	assert_eq "rank $r: stdout XOFF/XON paired" "$(info_get "$MNT/rs/$r/info" stdout_xoff)" "$(info_get "$MNT/rs/$r/info" stdout_xon)"
done
n=$(grep -c "resumed job 'rs'" "$T/rs.err")
assert_eq "resumes logged by the forwarder" $KILLS "$n"
grep -q "0 lost" "$T/rs.err" || fail "forwarder counted lost bytes: $(tail -n 3 "$T/rs.err")"
log "$(tail -n 2 "$T/rs.err")"
