#!/bin/bash
# The daemon dies while a 1024-rank hand-over forwarder is still starting
# its ranks (docs/protocol.md, "Resume of a hand-over"): it is stopped
# (SIGSTOP) once 64 ranks run, so the RANK_STARTs fill the socket and the
# forwarder waits in the middle of its start loop, then killed (-9) and
# restarted on the same spool and socket.  The forwarder reconnects; the
# ranks it started while the link was down keep their pipes unread for the
# next daemon, and the resume hands every rank over.  Before, those ranks'
# pipes were read by the forwarder itself and never passed: the restarted
# daemon never saw them start and the job hung short of 1024 ranks.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
export IOFS_RECONNECT_TIMEOUT=60
N=1024
with_nofile 8192
SP=$T/spool
start_daemon -o spool="$SP" -o resume_window=60
# even ranks end at once, odd ones read stdin to its end
"$T/iofs-run" -v -n $N --nspace spawn -- sh -c 'echo "rank $IOFS_RANK"; [ $((IOFS_RANK % 2)) = 0 ] || exec cat' \
	>"$T/spawn.out" 2>"$T/spawn.err" &
JOB=$!
track $JOB
nkids() { pgrep -c -P $JOB; }
kids() { [ "$(nkids)" -ge "$1" ]; }
wait_for 20 kids 64 || fail "the forwarder did not start its ranks: $(cat "$T/spawn.err")"
kill -STOP "$DAEMON_PID"
# the forwarder fills the socket and waits in its start loop: its count of
# children stops growing short of N
stalled() {
	local a b
	a=$(nkids)
	sleep 0.3
	b=$(nkids)
	[ "$a" = "$b" ]
}
wait_for 20 stalled || fail "the forwarder's start loop did not stall on the stopped daemon"
before=$(nkids)
[ "$before" -lt $N ] || fail "all $N ranks started before the daemon stopped: the case is not reached"
kill_daemon
wait_for 30 grep -q "reconnecting" "$T/spawn.err" || fail "the forwarder did not reconnect: $(cat "$T/spawn.err")"
start_daemon -o spool="$SP" -o resume_window=60
all_ranks() { [ "$(info_get "$MNT/spawn/info" ranks)" = $N ]; }
wait_for 60 all_ranks ||
	fail "not every rank started on the restarted daemon: $(grep "^ranks" "$MNT/spawn/info"); the forwarder has $(nkids) children, $before before the kill; last rank: $(cat "$MNT/spawn/$((N - 1))/info"); $(cat "$T/spawn.err")"
for r in 1 $((N - 1)); do
	wait_for 30 state_is_link spawn $r connected || fail "rank $r not resumed: $(cat "$MNT/spawn/$r/info")"
done
: >"$MNT/spawn/stdin" # a writer that closes: EOF to every rank
wait_for 60 finished $JOB || fail "the job did not end: $(grep -E '^(state|ranks)' "$MNT/spawn/info"); $(cat "$T/spawn.err")"
assert_eq "forwarder status" 0 "$(rc_of $JOB)"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/spawn.out")"
assert_eq "job state" exited "$(job_state spawn)"
# every rank's line, once, in its own file and in the merged view
timeout 30 cat "$MNT/spawn/stdout" | grep -o '<stdout>: rank [0-9]*' | sort >"$T/merged"
seq 0 $((N - 1)) | sed 's/^/<stdout>: rank /' | sort >"$T/want"
missing=$(comm -23 "$T/want" "$T/merged" | sed 's/.* //' | sort -n | tr '\n' ' ')
[ -z "$missing" ] || fail "ranks missing from the merged view: $missing(killed at $before); rank files: $(for r in $missing; do printf '%s=%s/%s ' $r "$(timeout 5 cat "$MNT/spawn/$r/stdout")" "$(info_get "$MNT/spawn/$r/info" stdout_bytes)"; done)"
assert_eq "lines in the merged view" $N "$(wc -l <"$T/merged")"
assert_eq "distinct lines in the merged view" $N "$(sort -u "$T/merged" | wc -l)"
for r in 0 $((before - 1)) $before $((N - 1)); do
	assert_eq "rank $r's file" "rank $r" "$(timeout 5 cat "$MNT/spawn/$r/stdout")"
	assert_eq "rank $r path" handover "$(info_get "$MNT/spawn/$r/info" path)"
done
grep -q "lost" "$T/spawn.err" && grep -Eq "[1-9][0-9]* lost" "$T/spawn.err" && fail "the forwarder counted lost bytes: $(cat "$T/spawn.err")"
daemon_alive || fail "the daemon died"
stop_daemon
log "killed at $before of $N ranks started; all $N resumed and handed over"
