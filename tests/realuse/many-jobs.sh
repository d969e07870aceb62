#!/bin/bash
# Many short jobs in a row, as a parameter sweep or a test harness runs
# them: 60 jobs, each with its own name, some reading stdin through the
# mount, each with exact output; the daemon's descriptors and the mount's
# listing stay consistent (no leak per job).
# Models flux-core's job-shell input test 'multiple jobs, each want stdin'
# (flux submit --cc=1-4) and Slurm's test1.x series of back-to-back sruns.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$IOFS_RUN" --nspace warmup -- true
FD0=$(fd_count "$DAEMON_PID")
T0=$SECONDS
for i in $(seq 1 60); do
	if [ $((i % 5)) = 0 ]; then
		"$IOFS_RUN" --nspace "sweep.$i" -- sh -c 'read -r x; echo "job '$i' read $x"' &
		JOB=$!
		wait_for 10 test -e "$MNT/sweep.$i/0/stdin" || fail "sweep.$i did not appear"
		echo "input-$i" >"$MNT/sweep.$i/0/stdin" || fail "write sweep.$i stdin"
		wait_for 10 finished $JOB || fail "sweep.$i did not end"
		assert_eq "sweep.$i status" 0 "$(rc_of $JOB)"
		assert_eq "sweep.$i output" "job $i read input-$i" "$(timeout 5 cat "$MNT/sweep.$i/0/stdout")"
	else
		"$IOFS_RUN" --nspace "sweep.$i" -n 2 -- sh -c 'echo "job '$i' rank $IOFS_RANK"; exit '$((i % 3)) 
		assert_eq "sweep.$i status" $((i % 3)) $?
		for r in 0 1; do
			assert_eq "sweep.$i/$r output" "job $i rank $r" "$(timeout 5 cat "$MNT/sweep.$i/$r/stdout")"
		done
	fi
	assert_eq "sweep.$i state" exited "$(job_state "sweep.$i")"
done
assert_eq "jobs listed" 61 "$(ls "$MNT" | wc -l)"
# completed jobs stay until removed; removing them frees everything
for i in $(seq 1 60); do rm -r "$MNT/sweep.$i" || fail "rm -r sweep.$i"; done
assert_eq "jobs after rm -r" warmup "$(ls "$MNT")"
fds_le() { [ "$(fd_count "$DAEMON_PID")" -le "$1" ]; }
wait_for 10 fds_le "$FD0" ||
	fail "daemon fds $FD0 before, $(fd_count "$DAEMON_PID") after 60 jobs"
log "OK: 60 jobs in $((SECONDS - T0)) s"
