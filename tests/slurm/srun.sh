#!/bin/bash
# srun on a real one-node Slurm cluster (issue 11): `srun -O -n 3 iofs-run`
# gives one job named JOBID.0 with exact bytes per rank (text and binary)
# and every line in the merged view; stdin written into one rank of a
# running srun step through the mount reaches that rank only; srun
# --mpi=pmix (namespace slurm.pmix.JOBID.0) is the same step name.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/slurm/common.sh"
start_daemon
slurm_start

# --- srun -O -n 3: per-rank exact bytes, merged view, job name ------------
timeout 60 srun -O -n 3 "$IOFS_RUN" -- sh -c \
	'i=0; while [ $i -lt 300 ]; do echo "rank $IOFS_RANK line $i"; i=$((i+1)); done
	 echo "$SLURM_JOB_ID.$SLURM_STEP_ID" >&2
	 '"$PRODUCE"' -n 200K -s $((IOFS_RANK + 7)) -b 3000' \
	>"$T/srun.out" 2>"$T/srun.err"
assert_eq "srun status" 0 $?
assert_eq "srun printed nothing itself" "" "$(cat "$T/srun.out" "$T/srun.err")"
ns=$(jobs_in_mount)
[[ $ns =~ ^[0-9]+\.0$ ]] || fail "job not named JOBID.0: '$ns'"
wait_for 10 job_done "$ns" || fail "job $ns not done"
assert_eq "job ranks" 3 "$(info_get "$MNT/$ns/info" ranks)"
assert_eq "job_size" 3 "$(info_get "$MNT/$ns/info" job_size)"
for r in 0 1 2; do
	{ seq 0 299 | sed "s/^/rank $r line /"; "$PRODUCE" -n 200K -s $((r + 7)) -b 3000; } >"$T/exp.$r"
	expect_rank "$ns" $r "$T/exp.$r"
	assert_eq "rank $r stderr (the step's name)" "$ns" "$(timeout 5 cat "$MNT/$ns/$r/stderr")"
	assert_eq "rank $r state" exited "$(rank_state "$ns" $r)"
	assert_eq "rank $r exit_status" 0 "$(info_get "$MNT/$ns/$r/info" exit_status)"
	flow_paired "$ns" $r
done
# the merged view: every text line once, tagged by its rank
timeout 10 cat "$MNT/$ns/stdout" | grep -a "line [0-9]*$" | sort >"$T/merged"
for r in 0 1 2; do seq 0 299 | sed "s/^/[$ns,$r]<stdout>: rank $r line /"; done | sort >"$T/merged.exp"
assert_eq "merged view text lines" "$(sha "$T/merged.exp")" "$(sha "$T/merged")"

# --- stdin into one rank of a running step --------------------------------
timeout 60 srun -O -n 2 "$IOFS_RUN" -- sh -c \
	'if [ "$IOFS_RANK" = 1 ]; then read -r l; echo "got <$l>"; sha256sum | cut -d" " -f1; else echo "rank 0 never reads"; fi' \
	</dev/null >"$T/srun2.out" 2>&1 &
SRUN=$!
track $SRUN
stdin_ready() { ls -d "$MNT"/*.0 | grep -vx "$MNT/$ns" | head -n 1 | grep -q . && [ -e "$(ls -d "$MNT"/*.0 | grep -vx "$MNT/$ns")/1/stdin" ]; }
wait_for 30 stdin_ready || fail "second step's rank 1 did not appear: $(ls "$MNT")"
ns2=$(basename "$(ls -d "$MNT"/*.0 | grep -vx "$MNT/$ns")")
head -c 100000 /dev/urandom >"$T/blob"
{ echo "hello rank 1"; cat "$T/blob"; } >"$MNT/$ns2/1/stdin" || fail "write to $ns2/1/stdin"
wait_for 30 finished $SRUN || fail "srun with stdin did not end"
assert_eq "srun status" 0 "$(rc_of $SRUN)"
assert_eq "srun printed nothing itself" "" "$(cat "$T/srun2.out")"
printf 'got <hello rank 1>\n%s\n' "$(sha "$T/blob")" >"$T/exp.in"
expect_rank "$ns2" 1 "$T/exp.in"
assert_eq "rank 0 output" "rank 0 never reads" "$(timeout 5 cat "$MNT/$ns2/0/stdout")"
assert_eq "rank 1 stdin_bytes" $((13 + 100000)) "$(info_get "$MNT/$ns2/1/info" stdin_bytes)"
flow_paired "$ns2" 1

# --- srun --mpi=pmix: Slurm's PMIx namespace is the step, named JOBID.0 ---
srun_bg "$T/srun3.out" --mpi=pmix -O -n 2 "$IOFS_RUN" -- sh -c 'echo "$IOFS_NSPACE $PMIX_NAMESPACE $PMIX_RANK"'
srun_done 60
[[ $NS =~ ^([0-9]+)\.0$ ]] || fail "srun --mpi=pmix job not named JOBID.0: '$NS'"
for r in 0 1; do
	assert_eq "pmix step rank $r" "$NS slurm.pmix.$NS $r" "$(timeout 5 cat "$MNT/$NS/$r/stdout")"
done
log "OK"
