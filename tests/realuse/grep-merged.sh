#!/bin/bash
# grep on the merged (tagged) view, as with `srun --label` output: `grep -m1`
# finds a line while the job still runs and ends at once; after the job,
# `grep -c` per rank tag and `sort | uniq -c` give exact counts; `grep`
# on a rank file sees untagged bytes.
# Models Slurm's srun --label cases (srun -l prefixes "N: ") and the sattach
# --label/--output-filter test (testsuite/expect/test16.*), and
# PRRTE's --output tag ("[jobid,rank]<stdout>: ").
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$IOFS_RUN" --nspace lab -n 4 -- sh -c \
	'i=0; while [ $i -lt 50 ]; do echo "rank $IOFS_RANK step $i"; i=$((i+1)); done
	 [ $IOFS_RANK = 2 ] && echo "MARKER from 2"
	 '"$(gate go)"'; echo "after $IOFS_RANK"' >"$T/run.out" 2>&1 &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/lab/3/stdout" || fail "ranks did not appear"
start_reader "$MNT/lab/stdout" "$T/merged"
timeout 10 grep -m1 MARKER "$MNT/lab/stdout" >"$T/marker" ||
	fail "grep -m1 on the live merged view: status $?"
assert_eq "grep -m1" "[lab,2]<stdout>: MARKER from 2" "$(cat "$T/marker")"
kill -0 $JOB 2>/dev/null || fail "the job ended before grep: the case needs a live job"
touch "$T/go"
wait_for 20 finished $JOB || fail "iofs-run did not end"
wait_for 10 finished $READER_PID || fail "merged reader did not end"
for r in 0 1 2 3; do
	n=51; [ $r = 2 ] && n=52 # MARKER
	assert_eq "grep -c rank $r" $n "$(grep -c "^\[lab,$r\]<stdout>: " "$T/merged")"
	assert_eq "rank $r file" 51 "$(timeout 5 grep -c "^rank $r step\|^after $r" "$MNT/lab/$r/stdout")"
done
assert_eq "uniq -c: every line once" "" "$(sort "$T/merged" | uniq -d)"
assert_eq "merged total" 205 "$(wc -l <"$T/merged")"
assert_eq "grep -c after the job" 205 "$(timeout 5 grep -c '' "$MNT/lab/stdout")"
log "OK"
