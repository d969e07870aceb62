#!/bin/bash
# Two users on one Slurm cluster and one root daemon (docs/security.md):
# nobody's `srun -O -n 2 iofs-run` step is nobody's job in the mount; a
# third user (daemon) cannot list, read, feed or remove it, while running
# or after; the owner follows it with tail -f and feeds each rank through
# its stdin file; the bytes are exact.  Then the third user squats the
# name of nobody's next step (JOBID.0, predictable: Slurm's job ids count
# up) before it starts: nobody's step must run whole under another name
# (JOBID.0~1), told on srun's stderr, and the squatter's job must hold
# nothing of nobody's.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/slurm/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"
id daemon >/dev/null 2>&1 || fail "no user daemon"
as_third() { setpriv --reuid=daemon --regid=daemon --clear-groups -- "$@"; }
start_daemon
slurm_start
# the cluster's directory is root's (0700): the users reach slurm.conf and
# munged's socket through it, not its key (0400)
chmod 711 "$SLURM_DIR"
# and their steps start in $T (0755): the build directory may be below a
# private one (CI clones into one), where slurmstepd cannot chdir

# --- nobody's step: ownership, refusals, the owner's tools -----------------
before=$(jobs_in_mount)
"${NOBODY_BG[@]}" timeout 120 srun --chdir="$T" -O -n 2 "$IOFS_RUN" -- sh -c \
	'echo "secret of rank $IOFS_RANK"; read -r l; echo "got <$l>"; echo "job $SLURM_JOB_ID"' \
	</dev/null >"$T/s1.out" 2>"$T/s1.err" &
SRUN=$!
track $SRUN
wait_for 30 has_new_job "$before" || fail "nobody's srun added no job: $(cat "$T/s1.err")"
NS=$(new_jobs "$before" | head -n 1)
[[ $NS =~ ^([0-9]+)\.0$ ]] || fail "nobody's step not named JOBID.0: '$NS'"
JOB=${BASH_REMATCH[1]}
wait_for 20 ranks_up "$NS" 2 || fail "ranks of $NS did not come up"
assert_eq "owner of $NS" nobody "$(stat -c %U "$MNT/$NS")"
assert_eq "mode of $NS" 750 "$(stat -c %a "$MNT/$NS")"
# the owner follows both ranks while they run
"${NOBODY_BG[@]}" timeout 60 tail -q -f -s 0.2 "$MNT/$NS/0/stdout" "$MNT/$NS/1/stdout" >"$T/tail" 2>"$T/tail.err" &
TAIL=$!
track $TAIL
wait_for 10 sh -c "[ \$(grep -c secret '$T/tail') -eq 2 ]" ||
	fail "the owner's tail -f did not show both ranks: $(cat "$T/tail" "$T/tail.err")"
# the third user, while the step runs
third_denied() { # WHAT CMD...: CMD as daemon fails: EACCES (EPERM for rm in
	# the mount's sticky top directory)
	local what=$1
	shift
	if as_third "$@" >"$T/third.out" 2>&1; then
		fail "the third user could $what: $(head -c 300 "$T/third.out")"
	fi
	grep -Eq "Permission denied|Operation not permitted" "$T/third.out" ||
		fail "the third user's $what: not refused: $(head -c 300 "$T/third.out")"
}
third_denied "list the job" ls "$MNT/$NS"
third_denied "read rank 0" timeout 5 cat "$MNT/$NS/0/stdout"
third_denied "read the merged view" timeout 5 cat "$MNT/$NS/stdout"
third_denied "feed rank 0" sh -c "echo forged >'$MNT/$NS/0/stdin'"
third_denied "feed every rank" sh -c "echo forged >'$MNT/$NS/stdin'"
third_denied "remove the job" rm -rf "$MNT/$NS"
[ -d "$MNT/$NS/0" ] || fail "nobody's job is gone after the third user's rm"
# the owner feeds each rank; the step ends
for r in 0 1; do
	as_nobody sh -c "echo 'line for $r' >'$MNT/$NS/$r/stdin'" || fail "the owner could not feed rank $r"
done
srun_done 60
assert_eq "srun printed nothing itself" "" "$(cat "$T/s1.out" "$T/s1.err")"
for r in 0 1; do
	printf 'secret of rank %s\ngot <line for %s>\njob %s\n' $r $r "$JOB" >"$T/exp.$r"
	as_nobody cat "$MNT/$NS/$r/stdout" >"$T/got.$r" || fail "the owner could not read rank $r"
	expect_bytes "rank $r" "$T/exp.$r" "$T/got.$r"
	assert_eq "rank $r stdin_bytes" $((11)) "$(info_get "$MNT/$NS/$r/info" stdin_bytes)"
	flow_paired "$NS" $r
done
# tail -f follows until stopped: it must have shown every line, once
wait_for 10 sh -c "[ \$(grep -c . '$T/tail') -ge 6 ]" || fail "the owner's tail -f missed lines: $(cat "$T/tail")"
kill $TAIL
assert_eq "tail -f saw every line once" "$(sort "$T/exp.0" "$T/exp.1" | sha -)" "$(sort "$T/tail" | sha -)"
# ... and after it ended
third_denied "read a finished rank" timeout 5 cat "$MNT/$NS/1/stdout"

# --- the third user squats nobody's next step name --------------------------
# (no other job can take the id in between: this cluster is the test's own)
NEXT="$((JOB + 1)).0"
as_third "$IOFS_RUN" --connect "$ADDR" --nspace "$NEXT" --rank 0 --size 2 -- sh -c "echo squat; $(gate squat)" \
	>"$T/sq.out" 2>"$T/sq.err" &
SQ=$!
track $SQ
wait_for 10 test -e "$MNT/$NEXT/0/info" || fail "the squatter's job did not appear: $(cat "$T/sq.err")"
assert_eq "owner of the squatted name" daemon "$(stat -c %U "$MNT/$NEXT")"
"${NOBODY_BG[@]}" timeout 120 srun --chdir="$T" -O -n 2 "$IOFS_RUN" -- sh -c 'echo "mine $IOFS_RANK $SLURM_JOB_ID"' \
	</dev/null >"$T/s2.out" 2>"$T/s2.err" &
SRUN=$!
track $SRUN
srun_done 60
grep -q "this run is '$NEXT~1'" "$T/s2.err" ||
	fail "nobody was not told the step's name: $(cat "$T/s2.err")"
for r in 0 1; do
	assert_eq "nobody's rank $r under $NEXT~1" "mine $r $((JOB + 1))" "$(as_nobody timeout 5 cat "$MNT/$NEXT~1/$r/stdout")"
done
assert_eq "owner of $NEXT~1" nobody "$(stat -c %U "$MNT/$NEXT~1")"
[ ! -e "$MNT/$NEXT/1" ] || fail "a rank of nobody's step joined the squatter's job"
daemon_log_has "uid $NOBODY_UID may not join job '$NEXT' of uid 1" ||
	fail "the refusal is not logged with both uids"
touch "$T/squat"
wait_for 10 finished $SQ || fail "the squatter's job did not end"
log "OK"
