#!/bin/bash
# `less +F` under a pseudo-terminal on a live rank: lines written after
# less started are drawn; Ctrl-C stops following and q quits (nothing hangs
# in the mount).  Then `less` on the merged view of the finished job.
# Models Slurm's sattach tests (test16.x: a viewer attached to a running
# step) with the pager users actually use.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
command -v less >/dev/null || { log "SKIP: no less"; exit 77; }
start_daemon

"$IOFS_RUN" --nspace pager -- sh -c \
	'echo "first line"; i=0; while [ ! -e '"$T"'/stop ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done; echo "written after less started"; echo "and the last one"' \
	>"$T/run.out" 2>&1 &
JOB=$!
track $JOB
wait_for 10 size_ge "$MNT/pager/0/stdout" 1 || fail "rank printed nothing"
# the rank writes the rest once less has drawn the first line
DRIVE_MARK="$T/stop" $DRIVE less "$MNT/pager/0/stdout" 20 "first line" "written after less started" "and the last one" \
	2>"$T/less.err" || fail "less +F: $(cat "$T/less.err")"
wait_for 20 finished $JOB || fail "iofs-run did not end"
$DRIVE less "$MNT/pager/stdout" 10 "[pager,0]<stdout>: and the last one" 2>"$T/less.err" ||
	fail "less on the merged view: $(cat "$T/less.err")"
flow_paired pager 0
log "OK"
