#!/bin/bash
# A 2-minute job with sparse output, followed with `tail -f` from start to
# end (issue 11: every test job used to live a few seconds).  Two ranks
# print a stamped line every 10 s for 120 s; tail -f must show each within
# 2.5 s (tail polls every 1 s on FUSE) and the files end with the exact
# bytes.  Normal build only: skipped under ASan and with IOFS_REALUSE_LONG=0.
# Models the flux-core LONGTEST cases (t/t2500-job-attach.t run_attach on a
# long job) and Slurm's sattach tests (test16.x) on a running step.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
long_ok || { log "SKIP: the soak runs in the normal build only"; exit 77; }
start_daemon

"$IOFS_RUN" --nspace soak -n 2 -- sh -c "$(stamped 13 10)" >"$T/run.out" 2>&1 &
JOB=$!
track $JOB
T0=$SECONDS
wait_for 10 size_ge "$MNT/soak/0/stdout" 1 || fail "rank 0 printed nothing"
wait_for 10 size_ge "$MNT/soak/1/stdout" 1 || fail "rank 1 printed nothing"
$DRIVE follow 2.5 26 170 tail -f "$MNT/soak/0/stdout" "$MNT/soak/1/stdout" \
	>"$T/tail.out" 2>"$T/tail.err" || fail "tail -f over 2 minutes: $(cat "$T/tail.err")"
wait_for 30 finished $JOB || fail "iofs-run did not end"
[ $((SECONDS - T0)) -ge 118 ] || fail "the job lasted only $((SECONDS - T0)) s"
assert_eq "iofs-run status" 0 "$(rc_of $JOB)"
assert_eq "nothing on iofs-run's own terminal" "" "$(cat "$T/run.out")"
for r in 0 1; do
	timeout 5 cat "$MNT/soak/$r/stdout" >"$T/got.$r"
	assert_eq "rank $r lines" 13 "$(wc -l <"$T/got.$r")"
	assert_eq "rank $r line numbers" "$(seq 0 12 | tr '\n' ' ')" "$(cut -d' ' -f2 "$T/got.$r" | tr '\n' ' ')"
	assert_eq "rank $r state" exited "$(rank_state soak $r)"
	flow_paired soak $r
done
# every line tail showed is one the ranks wrote, each exactly once
grep '^line' "$T/tail.out" | sort >"$T/tail.sorted"
cat "$T/got.0" "$T/got.1" | sort >"$T/got.sorted"
expect_bytes "tail -f output" "$T/got.sorted" "$T/tail.sorted"
log "OK: $((SECONDS - T0)) s, $(cat "$T/tail.err")"
