#!/bin/bash
# The loop's poll before sleeping (fs/loop.h) costs CPU only while someone
# talks to a rank.  A driver does 3000 exact request/answer round trips
# with an echoing rank (iofs-bench-rtt checks every line), then the rank
# stays alive and silent for a second: the daemon must sleep (at most
# 0.1 s of CPU in that second; a loop still polling uses all of it).  Then
# a rank prints a line every 2 ms for 2 s to a `tail -f` with no stdin
# written: output alone never polls, so the daemon's CPU stays a small
# part of the wall time; the same with -o poll_us=0 must not differ much.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
RTT="$IOFS_BUILD_DIR/tests/bench/iofs-bench-rtt"
ECHO="$IOFS_BUILD_DIR/tests/bench/iofs-bench-echo"
ticks() { awk '{ print $14 + $15 }' /proc/"$1"/stat; }
hz=$(getconf CLK_TCK)
start_daemon

# the rank echoes its stdin and then, at EOF, stays alive until told
mkfifo "$T/go"
"$IOFS_RUN" --nspace talk -- sh -c "'$ECHO'; read x <'$T/go'" >"$T/run.out" 2>&1 &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/talk/0/stdin" || fail "rank did not appear"
timeout 60 "$RTT" -n 3000 -N talk -w "$MNT/talk/0/stdin" -r "$MNT/talk/0/stdout" >"$T/rtt.out" 2>&1 ||
	fail "round trips: $(cat "$T/rtt.out")"
log "$(cat "$T/rtt.out")"
c0=$(ticks "$DAEMON_PID")
wait_for 5 sleep 1 # exactly one second, bounded
c1=$(ticks "$DAEMON_PID")
log "daemon CPU in the quiet second after the talk: $((c1 - c0)) ticks of $hz"
[ $((c1 - c0)) -le $((hz / 10)) ] || fail "the daemon kept polling after the talk: $((c1 - c0)) ticks in 1 s"
echo go >"$T/go"
wait_exit 10 $JOB || fail "talk job did not end"
wait $JOB || fail "talk job status $?"
flow_paired talk 0

# output alone, followed by tail -f: no stdin write, no polling
"$IOFS_RUN" --nspace drip -- sh -c 'i=0; while [ $i -lt 1000 ]; do echo "drip $i"; i=$((i+1)); sleep 0.002; done' \
	>"$T/drip.out" 2>&1 &
DRIP=$!
track $DRIP
wait_for 10 test -e "$MNT/drip/0/stdout" || fail "drip rank did not appear"
tail -n +1 -f "$MNT/drip/0/stdout" >"$T/drip.tail" 2>&1 &
TAIL=$!
track $TAIL
c0=$(ticks "$DAEMON_PID")
s0=$(date +%s%N)
wait_exit 60 $DRIP || fail "drip job did not end"
c1=$(ticks "$DAEMON_PID")
s1=$(date +%s%N)
wall_ticks=$(((s1 - s0) * hz / 1000000000))
log "daemon CPU while a rank drips to tail -f: $((c1 - c0)) ticks in $wall_ticks"
[ $((c1 - c0)) -lt $((wall_ticks / 4)) ] || fail "output alone made the daemon busy: $((c1 - c0)) of $wall_ticks ticks"
wait_for 10 grep -q "^drip 999$" "$T/drip.tail" || fail "tail -f missed lines: $(tail -n 2 "$T/drip.tail")"
assert_eq "lines tail -f saw" 1000 "$(grep -c '^drip ' "$T/drip.tail")"
kill $TAIL
log "OK"
