#!/bin/bash
# `cat` of a live rank follows it until the rank ends, then ends itself
# (within 2 s), with the exact bytes; a `cat` of another rank that exits
# early ends early.  Several MiB with a reader attached from the start:
# nothing lost, XOFF == XON.
# Models flux-core t/t2500-job-attach.t ('attach: job ran successfully':
# attach returns when the job ends) and Slurm's test1.44 (a slow reader).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$IOFS_RUN" --nspace follow -n 2 -- sh -c \
	"$(gate go); if [ \$IOFS_RANK = 0 ]; then $PRODUCE -n 5M -s 9 -b 7000; sleep 1; echo done; else echo early; fi" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/follow/1/stdout" || fail "ranks did not appear"
start_pacer "$MNT/follow/0/stdout" "$T/got.0" -c 131072 -d 5
C0=$PACER_PID
start_reader "$MNT/follow/1/stdout" "$T/got.1"
C1=$READER_PID
touch "$T/go"
wait_for 10 finished $C1 || fail "cat of the early rank did not end with it"
wait_for 60 finished $JOB || fail "iofs-run did not end"
END=$SECONDS
wait_for 5 finished $C0 || fail "reader of rank 0 did not end within 5 s of the rank"
[ $((SECONDS - END)) -le 2 ] || fail "reader ended $((SECONDS - END)) s after the rank"
{ "$PRODUCE" -n 5M -s 9 -b 7000; echo done; } >"$T/exp.0"
expect_bytes "rank 0 through the paced reader" "$T/exp.0" "$T/got.0"
assert_eq "rank 1" early "$(cat "$T/got.1")"
assert_eq "dropped" 0 "$(info_get "$MNT/follow/0/info" dropped_bytes)"
flow_paired follow 0
log "OK: stdout_xoff=$(info_get "$MNT/follow/0/info" stdout_xoff)"
