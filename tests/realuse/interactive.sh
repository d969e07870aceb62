#!/bin/bash
# An interactive request/answer driver that opens the rank's stdout FIRST
# and its stdin second, as pexpect, a debugger front end or a test harness
# do (issue 11 defect 3: open(stdout) of a rank that has not printed yet
# was parked until its first byte, which could only come after the
# driver's first write: a deadlock).  Two ranks: `cat` (echoes) and a
# shell calculator loop; 20 rounds each, every round bounded.
# Models Slurm's test16.4 (sattach with stdin and output), flux-core's
# job-shell input test 'attach twice, one with data', and expect(1).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$IOFS_RUN" --nspace talk -n 2 -- sh -c \
	'if [ $IOFS_RANK = 0 ]; then exec cat; fi
	 while read -r a b; do echo "= $((a * b))"; done; echo bye' >"$T/run.out" 2>&1 &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/talk/1/stdin" || fail "ranks did not appear"

# rank 0 (cat): nothing printed before our first write
pairs=("" "ping 0\n")
for i in $(seq 1 19); do pairs+=("ping $((i - 1))\n" "ping $i\n"); done
pairs+=("ping 19\n" "")
$DRIVE expect "$MNT/talk/0/stdout" "$MNT/talk/0/stdin" 10 "${pairs[@]}" 2>"$T/d0.err" ||
	fail "driver on cat: $(cat "$T/d0.err")"
# rank 1 (calculator)
pairs=("" "1 1\n")
for i in $(seq 2 20); do pairs+=("= $(((i - 1) * (i - 1)))\n" "$i $i\n"); done
pairs+=("= 400\n" "")
$DRIVE expect "$MNT/talk/1/stdout" "$MNT/talk/1/stdin" 10 "${pairs[@]}" 2>"$T/d1.err" ||
	fail "driver on the calculator: $(cat "$T/d1.err")"
# the driver closed stdin: both ranks end
wait_for 20 finished $JOB || fail "ranks did not end after the driver closed stdin"
assert_eq "iofs-run status" 0 "$(rc_of $JOB)"
for i in $(seq 0 19); do echo "ping $i"; done >"$T/exp.0"
{ for i in $(seq 1 20); do echo "= $((i * i))"; done; echo bye; } >"$T/exp.1"
for r in 0 1; do
	timeout 5 cat "$MNT/talk/$r/stdout" >"$T/got.$r"
	expect_bytes "rank $r transcript" "$T/exp.$r" "$T/got.$r"
	assert_eq "rank $r stdin_bytes" "$(stat -c %s "$T/exp.0")" "$(info_get "$MNT/talk/0/info" stdin_bytes)"
	flow_paired talk $r
done
log "OK: cat $(cat "$T/d0.err"); calculator $(cat "$T/d1.err")"
