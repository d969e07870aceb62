#!/bin/bash
# SIGTERM to iofs-run reaches everything a rank started (iofs-run(1),
# SIGNALS): each rank leads a process group of its own and the signal goes
# to the group, as mpirun and srun's slurmstepd do.  Before, only the rank
# itself got it: a background `sleep` of a rank's shell outlived it, kept
# the rank's stdout open, and iofs-run with it.  Both paths.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
start_daemon
"$IOFS_RUN" --nspace sig -n 2 -- sh -c "sleep 300 & echo \$! >$T/bg.\$IOFS_RANK; echo up; wait" \
	>"$T/sig.out" 2>&1 &
JOB=$!
track $JOB
for r in 0 1; do
	wait_for 10 test -s "$T/bg.$r" || fail "rank $r did not start its sleep: $(cat "$T/sig.out")"
	track "$(cat "$T/bg.$r")"
done
wait_for 10 file_has "$MNT/sig/1/stdout" up || fail "rank 1 did not print"
kill -TERM $JOB
wait_for 10 finished $JOB || fail "iofs-run did not end on SIGTERM: $(ps -o pid,pgid,args --ppid $JOB)"
for r in 0 1; do
	bg=$(cat "$T/bg.$r")
	wait_for 5 finished "$bg" || fail "rank $r's background sleep outlived SIGTERM"
	assert_eq "rank $r state" exited "$(rank_state sig $r)"
	assert_eq "rank $r exit_status (SIGTERM)" 143 "$(info_get "$MNT/sig/$r/info" exit_status)"
done
assert_eq "iofs-run's status" 143 "$(rc_of $JOB)"
