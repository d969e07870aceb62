#!/bin/bash
# `tail -f` and `tail -F` on one live rank: each line within 2 s (GNU
# tail polls FUSE once a second: /work/shared/notes/fuse-facts.md), the
# lines exactly those written, once each.
# Models flux-core t/t2500-job-attach.t ('attach: shows output from job'
# on a running job) and Slurm's basic sattach test (testsuite/expect/test16.*:
# attach to a running step, --label, --output-filter).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

for mode in -f -F; do
	ns="one$mode"
	"$IOFS_RUN" --nspace "$ns" -- sh -c "$(stamped 15 0.2)" >"$T/run.out" 2>&1 &
	JOB=$!
	track $JOB
	wait_for 10 size_ge "$MNT/$ns/0/stdout" 1 || fail "$ns printed nothing"
	$DRIVE follow 2.0 15 30 tail $mode "$MNT/$ns/0/stdout" >"$T/tail.out" 2>"$T/tail.err" ||
		fail "tail $mode: $(cat "$T/tail.err")"
	wait_for 20 finished $JOB || fail "iofs-run did not end"
	timeout 5 cat "$MNT/$ns/0/stdout" >"$T/got"
	assert_eq "$ns lines" 15 "$(wc -l <"$T/got")"
	expect_bytes "tail $mode output" "$T/got" "$T/tail.out"
	flow_paired "$ns" 0
	log "tail $mode: $(cat "$T/tail.err")"
done
log "OK"
