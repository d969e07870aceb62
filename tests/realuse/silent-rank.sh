#!/bin/bash
# A rank silent for 31 s stays attached (issue 11 defect 1: the daemon used
# to drop a connection after 10 s without traffic -- "no HELLO in time" --
# and the rank's later output landed on iofs-run's own terminal).  Two
# ranks print, compute silently for 31 s, print again, while `tail -f`
# follows both files the whole time.
# Models flux-core t/t2500-job-attach.t (run_attach: attach to a job that
# runs silently for 30 s and stays attached) and the issue's own reproducer.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$IOFS_RUN" --nspace quiet -n 2 -- sh -c \
	'echo "a $IOFS_RANK t=$(date +%s.%N)"; sleep 31; echo "b $IOFS_RANK t=$(date +%s.%N)"' \
	>"$T/run.out" 2>"$T/run.err" &
JOB=$!
track $JOB
wait_for 10 size_ge "$MNT/quiet/1/stdout" 1 || fail "rank 1 printed nothing"
wait_for 10 size_ge "$MNT/quiet/0/stdout" 1 || fail "rank 0 printed nothing"
# both ranks' lines, each within 2 s of being written
$DRIVE follow 2.0 4 60 tail -f -s 0.2 "$MNT/quiet/0/stdout" "$MNT/quiet/1/stdout" \
	>"$T/tail.out" 2>"$T/tail.err" || fail "tail -f over the silence: $(cat "$T/tail.err")"
wait_for 20 finished $JOB || fail "iofs-run did not end"
assert_eq "iofs-run status" 0 "$(rc_of $JOB)"
assert_eq "nothing on iofs-run's own terminal" "" "$(cat "$T/run.out" "$T/run.err")"
for r in 0 1; do
	assert_eq "rank $r state" exited "$(rank_state quiet $r)"
	assert_eq "rank $r lines" "a $r b $r" "$(timeout 5 cat "$MNT/quiet/$r/stdout" | cut -d' ' -f1,2 | tr '\n' ' ' | sed 's/ $//')"
	grep -q "^b $r t=" "$T/tail.out" || fail "tail -f never showed rank $r's last line"
	flow_paired quiet $r
done
! grep -q "dropped" "$T/iofs.log" || fail "daemon dropped a connection: $(grep dropped "$T/iofs.log")"
log "OK ($(cat "$T/tail.err"))"
