#!/bin/bash
# Several steps in one allocation on a real one-node Slurm cluster (issue 11
# defect 4: the second step used to replace the first, both were named
# SLURM_JOB_ID).  salloc with two srun steps gives JOBID.0 and JOBID.1, each
# with its own exact output; an sbatch script with two steps plus a line
# from the batch script itself gives JOBID.0, JOBID.1 and JOBID.batch,
# waited for with a bounded poll on squeue; salloc's interactive step (a
# login shell under a pty) gives JOBID.interactive.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/slurm/common.sh"
start_daemon
slurm_start

# the body of a step: N lines naming rank and step, then binary bytes
cat >"$T/step.sh" <<EOF2
#!/bin/sh
i=0
while [ \$i -lt \$1 ]; do echo "step \$SLURM_STEP_ID rank \$IOFS_RANK line \$i"; i=\$((i+1)); done
exec "$PRODUCE" -n \$2 -s \$((SLURM_STEP_ID * 10 + IOFS_RANK + 1)) -b 1000
EOF2
chmod +x "$T/step.sh"
# expect STEP RANK LINES BYTES: the bytes that rank of that step prints
expect() {
	{ seq 0 $(($3 - 1)) | sed "s/^/step $1 rank $2 line /"
	  "$PRODUCE" -n $4 -s $(($1 * 10 + $2 + 1)) -b 1000; } >"$T/exp.$1.$2"
}
# check_step NSPACE STEP RANKS LINES BYTES
check_step() {
	wait_for 10 job_done "$1" || fail "job $1 not done: $(cat "$MNT/$1/info" 2>&1)"
	assert_eq "$1 ranks" $3 "$(info_get "$MNT/$1/info" ranks)"
	assert_eq "$1 state" exited "$(job_state "$1")"
	local r
	for ((r = 0; r < $3; r++)); do
		expect $2 $r $4 $5
		expect_rank "$1" $r "$T/exp.$2.$r"
		flow_paired "$1" $r
	done
}

# --- salloc: two srun steps, one after the other --------------------------
timeout 90 salloc -O -n 3 sh -c "
	echo \"JOBID=\$SLURM_JOB_ID\"
	srun -n 3 '$IOFS_RUN' -- '$T/step.sh' 100 50K || exit 10
	srun -n 2 '$IOFS_RUN' -- '$T/step.sh' 30 70K || exit 11" \
	>"$T/salloc.out" 2>"$T/salloc.err"
rc=$?
[ $rc -eq 0 ] || fail "salloc status $rc: $(cat "$T/salloc.err")"
J=$(sed -n 's/^JOBID=//p' "$T/salloc.out")
[[ $J =~ ^[0-9]+$ ]] || fail "no job id from salloc: $(cat "$T/salloc.out")"
assert_eq "jobs in the mount after salloc" "$(printf '%s.0\n%s.1' $J $J)" "$(jobs_in_mount)"
check_step "$J.0" 0 3 100 50K
check_step "$J.1" 1 2 30 70K

# --- sbatch: the batch script itself and two steps ------------------------
cat >"$T/batch.sh" <<EOF2
#!/bin/sh
#SBATCH -n 2
#SBATCH -O
"$IOFS_RUN" -- sh -c 'echo "batch script of \$SLURM_JOB_ID"'
srun -n 2 "$IOFS_RUN" -- "$T/step.sh" 40 20K
srun -n 1 "$IOFS_RUN" -- "$T/step.sh" 10 5K
"$IOFS_RUN" -- sh -c 'echo "second run in the batch script"'
EOF2
B=$(sbatch --parsable -o "$T/batch.out" "$T/batch.sh") || fail "sbatch failed"
[[ $B =~ ^[0-9]+$ ]] || fail "sbatch id '$B'"
wait_for 90 slurm_idle || fail "batch job $B still queued: $(squeue)"
# the second iofs-run of the batch script is JOBID.batch too: it keeps the
# first (a launcher's name is never replaced) and says where it went
assert_eq "batch job's own output file" \
	"iofs-run: job name '$B.batch' is taken (another job, or an earlier run of this launch); this run is '$B.batch~1'" \
	"$(cat "$T/batch.out")"
assert_eq "jobs in the mount after sbatch" \
	"$(printf '%s.0\n%s.1\n%s.0\n%s.1\n%s.batch\n%s.batch~1' $J $J $B $B $B $B | sort)" "$(jobs_in_mount)"
assert_eq "the batch script's line" "batch script of $B" "$(timeout 5 cat "$MNT/$B.batch/0/stdout")"
assert_eq "the batch script's second run" "second run in the batch script" "$(timeout 5 cat "$MNT/$B.batch~1/0/stdout")"
assert_eq "the second run's requested name" "$B.batch" "$(info_get "$MNT/$B.batch~1/info" requested)"
assert_eq "batch job_size" 1 "$(info_get "$MNT/$B.batch/info" job_size)"
check_step "$B.0" 0 2 40 20K
check_step "$B.1" 1 1 10 5K

# --- salloc's interactive step (LaunchParameters=use_interactive_step):
# the login shell is step 4294967290, sacct's JOBID.interactive -----------
echo "LaunchParameters=use_interactive_step" >>"$SLURM_CONF"
scontrol reconfigure || fail "scontrol reconfigure"
login_step() { [ "$(scontrol show config | sed -n 's/^LaunchParameters *= *//p')" = use_interactive_step ]; }
wait_for 20 login_step || fail "use_interactive_step not in effect"
before=$(jobs_in_mount)
# the step runs $SHELL (srun --pty $SHELL): a user's login always sets it, a CI
# runner may not ("srun: fatal: No command given to execute"), so name one
SHELL=/bin/sh $DRIVE pty 60 "'$IOFS_RUN' -- sh -c 'echo in \$IOFS_NSPACE'\nexit\n" salloc -n 1 -O >"$T/login.out" 2>&1 ||
	fail "interactive salloc: status $?: $(cat "$T/login.out")"
I=$(new_jobs "$before")
[[ $I =~ ^[0-9]+\.interactive$ ]] || fail "interactive step not named JOBID.interactive: '$I' ($(cat "$T/login.out"))"
assert_eq "interactive step output" "in $I" "$(timeout 5 cat "$MNT/$I/0/stdout")"
log "OK"
