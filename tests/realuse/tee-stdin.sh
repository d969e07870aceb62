#!/bin/bash
# stdin fan-out with `tee`: `tee MNT/job/*/stdin < file` feeds 4 ranks the
# same 1 MiB (each prints its sha256 and byte count); then the job stdin
# file broadcasts to a job where rank 0 has already exited and the others
# read: no error for the live ranks, every byte counted.
# Models Slurm's test9.1 (stdin broadcast stress) and flux-core's job-shell
# input test 'no fatal exception after stdin sent to exited task'.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$PRODUCE" -n 1M -s 5 >"$T/in"
"$IOFS_RUN" --nspace fan -n 4 -- sh -c 'sha256sum | cut -d" " -f1' &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/fan/3/stdin" || fail "ranks did not appear"
tee "$MNT"/fan/*/stdin <"$T/in" >/dev/null || fail "tee status $?"
wait_for 30 finished $JOB || fail "ranks did not end after tee closed stdin"
assert_eq "iofs-run status" 0 "$(rc_of $JOB)"
sha "$T/in" >"$T/exp"
for r in 0 1 2 3; do
	expect_rank fan $r "$T/exp"
	assert_eq "rank $r stdin_bytes" $((1 << 20)) "$(info_get "$MNT/fan/$r/info" stdin_bytes)"
	flow_paired fan $r
done

"$IOFS_RUN" --nspace exited0 -n 3 -- sh -c '[ $IOFS_RANK = 0 ] && exit 0; wc -c' &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/exited0/2/stdin" || fail "ranks did not appear"
wait_for 10 state_is exited0 0 exited || fail "rank 0 did not exit"
echo "to everyone" >"$MNT/exited0/stdin" || fail "job stdin write with an exited rank: status $?"
wait_for 20 finished $JOB || fail "ranks did not end"
for r in 1 2; do
	assert_eq "rank $r got" 12 "$(timeout 5 cat "$MNT/exited0/$r/stdout")"
	flow_paired exited0 $r
done
log "OK"
