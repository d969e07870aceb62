#!/bin/bash
# Several steps in one allocation, followed live: an salloc runs three srun
# steps (a 3-rank compute step that talks slowly, a 1-rank step reading
# stdin, a 2-rank post-processing step); `tail -f` follows step 0 while it
# runs, step 1 gets its input through the mount, and every step stays in
# the mount as JOBID.STEPID with exact output (issue 11 defect 4).
# Models the Slurm testsuite's allocation and batch cases that run several
# srun steps in one salloc/sbatch, each its own step (sacct JOBID.0, .1, ...),
# on the real one-node cluster.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon
slurm_start

timeout 120 salloc -O -n 3 sh -c "
	echo JOBID=\$SLURM_JOB_ID
	srun -n 3 '$IOFS_RUN' -- sh -c '$(stamped 10 0.3)' || exit 10
	srun -n 1 '$IOFS_RUN' -- sh -c 'while read -r l; do echo \"step 1 got \$l\"; done' || exit 11
	srun -n 2 '$IOFS_RUN' -- sh -c 'echo \"post \$IOFS_RANK of \$IOFS_NSPACE\"' || exit 12" \
	>"$T/salloc.out" 2>"$T/salloc.err" &
SALLOC=$!
track $SALLOC
wait_for 30 grep -q '^JOBID=' "$T/salloc.out" || fail "salloc did not start: $(cat "$T/salloc.err")"
J=$(sed -n 's/^JOBID=//p' "$T/salloc.out")
wait_for 30 test -e "$MNT/$J.0/2/stdout" || fail "step 0 did not appear: $(ls "$MNT")"
wait_for 10 size_ge "$MNT/$J.0/0/stdout" 1 || fail "step 0 rank 0 printed nothing"
$DRIVE follow 2.0 9 30 tail -f -s 0.2 "$MNT/$J.0/0/stdout" >"$T/tail.out" 2>"$T/tail.err" ||
	fail "tail -f on step 0: $(cat "$T/tail.err")"
wait_for 30 test -e "$MNT/$J.1/0/stdin" ||
	fail "step 1 did not appear: $(ls "$MNT"); $(squeue -s; cat "$T/salloc.err")"
printf 'alpha\nbeta\n' >"$MNT/$J.1/0/stdin" || fail "write step 1 stdin"
wait_for 60 finished $SALLOC || fail "salloc did not end"
assert_eq "salloc status" 0 "$(rc_of $SALLOC)"
assert_eq "jobs" "$(printf '%s.0\n%s.1\n%s.2' $J $J $J)" "$(jobs_in_mount)"
for r in 0 1 2; do
	timeout 5 cat "$MNT/$J.0/$r/stdout" >"$T/s0.$r"
	assert_eq "step 0 rank $r lines" 10 "$(wc -l <"$T/s0.$r")"
	flow_paired "$J.0" $r
done
grep '^line' "$T/tail.out" | head -n 9 >"$T/tail.9"
head -n 9 "$T/s0.0" >"$T/s0.9"
expect_bytes "tail -f of step 0" "$T/s0.9" "$T/tail.9"
printf 'step 1 got alpha\nstep 1 got beta\n' >"$T/s1.exp"
expect_rank "$J.1" 0 "$T/s1.exp"
for r in 0 1; do
	assert_eq "step 2 rank $r" "post $r of $J.2" "$(timeout 5 cat "$MNT/$J.2/$r/stdout")"
done
log "OK"
