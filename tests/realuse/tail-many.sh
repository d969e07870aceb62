#!/bin/bash
# `tail -f MNT/job/*/stdout` over 3 ranks where rank 1 never writes stdout
# (the usual MPI program: rank 0 talks).  Issue 11 defect 2: open() of the
# silent rank's empty live file was parked, so tail printed not one line.
# Every line of ranks 0 and 2 must show within 2 s.
# Models Open MPI's test/simple programs (hello_output: only some ranks
# print) and PRRTE's examples run with --output tag under a follower.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$IOFS_RUN" --nspace many -n 3 -- sh -c \
	"if [ \$IOFS_RANK = 1 ]; then echo 'rank 1 talks on stderr only' >&2; sleep 8; else $(stamped 20 0.3); fi" \
	>"$T/run.out" 2>&1 &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/many/2/stdout" || fail "rank 2 did not appear"
$DRIVE follow 2.0 40 30 tail -f -s 0.2 "$MNT/many/0/stdout" "$MNT/many/1/stdout" "$MNT/many/2/stdout" \
	>"$T/tail.out" 2>"$T/tail.err" || fail "tail -f with a silent rank: $(cat "$T/tail.err")"
wait_for 30 finished $JOB || fail "iofs-run did not end"
assert_eq "iofs-run status" 0 "$(rc_of $JOB)"
for r in 0 2; do
	timeout 5 cat "$MNT/many/$r/stdout" >"$T/got.$r"
	assert_eq "rank $r lines" 20 "$(wc -l <"$T/got.$r")"
	flow_paired many $r
done
assert_eq "rank 1 stdout" 0 "$(stat -c %s "$MNT/many/1/stdout")"
grep '^line' "$T/tail.out" | sort >"$T/tail.sorted"
cat "$T/got.0" "$T/got.2" | sort >"$T/got.sorted"
expect_bytes "tail -f output" "$T/got.sorted" "$T/tail.sorted"
log "OK: $(cat "$T/tail.err")"
