#!/bin/bash
# A program that poll()s several rank files at once (a multiplexing front
# end, like `flux job attach` over many tasks): lines from 3 ranks arriving
# at different times are all read, none twice, without busy-waiting.
# Models flux-core t/t2500-job-attach.t (one attach multiplexing every
# task's output) and Open MPI's test/simple/hello_output.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$IOFS_RUN" --nspace mux -n 3 -- sh -c \
	'echo "hello $IOFS_RANK"; '"$(gate go)"'; i=0; while [ $i -lt 5 ]; do sleep 0.$((IOFS_RANK + 1)); echo "rank $IOFS_RANK tick $i"; i=$((i+1)); done' &
JOB=$!
track $JOB
wait_for 10 size_ge "$MNT/mux/2/stdout" 1 || fail "ranks did not print"
wait_for 10 size_ge "$MNT/mux/0/stdout" 1 || fail "rank 0 did not print"
wait_for 10 size_ge "$MNT/mux/1/stdout" 1 || fail "rank 1 did not print"
touch "$T/go"
$DRIVE poll 30 18 "$MNT"/mux/{0,1,2}/stdout >"$T/got" 2>"$T/cpu" ||
	fail "poll reader: $(cat "$T/got")"
wait_for 20 finished $JOB || fail "iofs-run did not end"
for r in 0 1 2; do
	{ echo "hello $r"; for i in 0 1 2 3 4; do echo "rank $r tick $i"; done; } >"$T/exp.$r"
	sed -n "s|^$MNT/mux/$r/stdout: ||p" "$T/got" >"$T/got.$r"
	expect_bytes "rank $r via poll" "$T/exp.$r" "$T/got.$r"
done
read -r u s <"$T/cpu"
log "OK (poll reader CPU: user $u s, sys $s s)"
python3 -c "import sys; sys.exit(0 if float('$u') + float('$s') < 0.5 else 1)" ||
	fail "the poll reader spun: user $u s + sys $s s of CPU"
