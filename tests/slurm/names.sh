#!/bin/bash
# Job names from the launcher's environment (issue 11 defect 4): iofs-run
# names a job the way the launcher that started it names that launch, so
# two srun steps of one allocation are two jobs ("JOBID.0", "JOBID.1"), the
# batch script is "JOBID.batch", and the innermost of nested launchers
# wins.  The environments are the ones measured under real srun/sbatch/
# salloc (steps.sh runs the real thing) and Open MPI 4.1; the rule is in
# docs/filesystem.md "Job names" and iofs-run(1).  No cluster needed.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
# this test may itself run inside a launcher: start from a clean slate
for v in $(compgen -e | grep -E '^(SLURM_|PMIX_|OMPI_|FLUX_|PMI_)'); do unset "$v"; done
unset ENVIRONMENT
start_daemon

# --- two steps of one allocation, one after the other: both stay ---------
for step in 0 1; do
	SLURM_JOB_ID=77 SLURM_STEP_ID=$step SLURM_STEPID=$step SLURM_PROCID=0 \
		SLURM_NTASKS=1 SLURM_STEP_NUM_TASKS=1 \
		"$IOFS_RUN" -- sh -c 'echo "step output $IOFS_NSPACE"' ||
		fail "step $step: iofs-run status $?"
done
assert_eq "jobs after two steps" "$(printf '77.0\n77.1')" "$(ls -1 "$MNT" | sort)"
for step in 0 1; do
	assert_eq "step $step output" "step output 77.$step" \
		"$(timeout 5 cat "$MNT/77.$step/0/stdout")"
	assert_eq "step $step state" exited "$(job_state 77.$step)"
done

# --- a step's size is the step's, not the allocation's --------------------
SLURM_JOB_ID=78 SLURM_STEP_ID=3 SLURM_PROCID=1 SLURM_NTASKS=4 \
	SLURM_STEP_NUM_TASKS=2 "$IOFS_RUN" -- true
assert_eq "78.3 job_size" 2 "$(info_get "$MNT/78.3/info" job_size)"
assert_eq "78.3 rank 1 there" exited "$(rank_state 78.3 1)"

# --- the batch script: JOBID.batch, one process (not sbatch -n 4's 4) -----
ENVIRONMENT=BATCH SLURM_JOB_ID=79 SLURM_PROCID=0 SLURM_NTASKS=4 \
	"$IOFS_RUN" -- echo from the batch script
assert_eq "batch output" "from the batch script" "$(timeout 5 cat "$MNT/79.batch/0/stdout")"
assert_eq "batch job_size" 1 "$(info_get "$MNT/79.batch/info" job_size)"
assert_eq "batch job state" exited "$(job_state 79.batch)"
# a second iofs-run of the same batch script: 79.batch~1, the first kept
ENVIRONMENT=BATCH SLURM_JOB_ID=79 SLURM_PROCID=0 SLURM_NTASKS=4 \
	"$IOFS_RUN" -v -- echo second run 2>"$T/batch2.err"
assert_eq "second batch run" "second run" "$(timeout 5 cat "$MNT/79.batch~1/0/stdout")"
assert_eq "first batch run kept" "from the batch script" "$(timeout 5 cat "$MNT/79.batch/0/stdout")"
grep -q "job name '79.batch' is taken.*this run is '79.batch~1'" "$T/batch2.err" ||
	fail "iofs-run did not say where the second batch run went: $(cat "$T/batch2.err")"
# --nspace is the user's name: a re-run replaces its ended job, as always
"$IOFS_RUN" --nspace mine -- echo one && "$IOFS_RUN" --nspace mine -- echo two
assert_eq "re-run of --nspace replaces" "two" "$(timeout 5 cat "$MNT/mine/0/stdout")"
[ -e "$MNT/mine~1" ] && fail "a re-run of --nspace made mine~1"

# --- the special step ids by sacct's names --------------------------------
SLURM_JOB_ID=80 SLURM_STEP_ID=4294967290 SLURM_PROCID=0 "$IOFS_RUN" -- true
[ -d "$MNT/80.interactive" ] || fail "interactive step not named 80.interactive: $(ls "$MNT")"

# --- a salloc shell is no task: the default name, its own size ------------
SLURM_JOB_ID=81 SLURM_NTASKS=4 "$IOFS_RUN" -n 2 -- sh -c 'echo $IOFS_NSPACE' >"$T/salloc.out"
ns=$(ls -1 "$MNT" | grep '^sh\.' || true)
[ -n "$ns" ] || fail "salloc shell run not named sh.PID: $(ls "$MNT")"
assert_eq "salloc-shell job_size" 2 "$(info_get "$MNT/$ns/info" job_size)"
assert_eq "salloc-shell job state" exited "$(job_state "$ns")"

# --- nested: a Flux job in a Slurm step (srun --mpi=pmix) is Flux's -------
FLUX_ID=$(printf '\xc6\x92%s' 2Jq5LrGV)
SLURM_JOB_ID=82 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 \
	PMIX_NAMESPACE=slurm.pmix.82.0 PMIX_RANK=0 \
	FLUX_JOB_ID=$FLUX_ID FLUX_TASK_RANK=1 FLUX_JOB_SIZE=2 PMI_RANK=1 \
	"$IOFS_RUN" -- sh -c 'echo $IOFS_RANK/$IOFS_SIZE'
assert_eq "flux task" "1/2" "$(timeout 5 cat "$MNT/$FLUX_ID/1/stdout")"

# --- srun --mpi=pmix alone: Slurm's PMIx namespace is the step ------------
SLURM_JOB_ID=83 SLURM_STEP_ID=1 SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=1 \
	PMIX_NAMESPACE=slurm.pmix.83.1 PMIX_RANK=0 "$IOFS_RUN" -- true
[ -d "$MNT/83.1" ] || fail "srun --mpi=pmix step not named 83.1: $(ls "$MNT")"

# --- mpirun inside an allocation: Open MPI's name, not the orted step's ---
SLURM_JOB_ID=84 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 \
	OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_MCA_ess_base_jobid=4396 \
	PMIX_NAMESPACE=4396 PMIX_RANK=1 "$IOFS_RUN" -- true
assert_eq "mpirun rank in 4396" exited "$(rank_state 4396 1)"
assert_eq "mpirun job_size" 2 "$(info_get "$MNT/4396/info" job_size)"

# --- --nspace and --rank still win over every launcher --------------------
SLURM_JOB_ID=85 SLURM_STEP_ID=0 SLURM_PROCID=3 "$IOFS_RUN" --nspace mine --rank 0 -- true
assert_eq "explicit name" exited "$(rank_state mine 0)"
[ ! -e "$MNT/85.0" ] || fail "85.0 created although --nspace was given"
log "OK"
