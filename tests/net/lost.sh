#!/bin/bash
# kill -9 of a forwarder: its ranks become 'lost', their streams complete
# (a reader gets EOF after every byte that arrived), and the daemon and a
# job of another forwarder running at the same time are untouched.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

start_daemon

"$IOFS_RUN" --nspace victim -n 2 -- sh -c "echo started \$IOFS_RANK; printf partial\$IOFS_RANK; $(gate never)" &
VICTIM=$!
track $VICTIM
"$IOFS_RUN" --nspace other -- sh -c "echo before; $(gate go); echo after" &
OTHER=$!
track $OTHER
wait_for 10 test -e "$MNT/victim/1/info" || fail "job victim did not appear"
wait_for 10 test -e "$MNT/other/0/info" || fail "job other did not appear"
wait_for 10 size_is "$MNT/victim/1/stdout" 18 || fail "victim output did not arrive"
# the ranks' own processes (they outlive their forwarder): cleaned up by pid
for r in 0 1; do track "$(info_get "$MNT/victim/$r/info" pid)"; done

start_reader "$MNT/victim/0/stdout" "$T/victim0"
CAT=$READER_PID
start_reader "$MNT/victim/stdout" "$T/victim-merged"
CATM=$READER_PID
kill -0 $CAT || fail "reader ended while the rank was running"

kill -KILL $VICTIM
if [ "$RUN_PATH" = handover ]; then
	# the daemon holds the ranks' pipes and reads them to their end: the
	# ranks are still running (and shown so) until they end themselves
	wait_for 10 grep -q "forwarder gone; reading its ranks' pipes" \
		"$T/iofs.log" || fail "daemon not draining the pipes"
	assert_eq "rank 0 while draining" running "$(rank_state victim 0)"
	kill -0 $CAT || fail "reader ended while the rank's pipe was open"
	for r in 0 1; do kill "$(info_get "$MNT/victim/$r/info" pid)"; done
fi
for r in 0 1; do
	wait_for 10 state_is victim $r lost || fail "rank $r not lost: $(rank_state victim $r)"
done
wait_for 10 finished $CAT || fail "reader of a lost rank did not get EOF"
assert_eq "reader status" 0 "$(rc_of $CAT)"
assert_eq "lost rank's bytes" "$(printf 'started 0\npartial0')" "$(cat "$T/victim0")"
wait_for 10 finished $CATM || fail "reader of the lost job's merged view did not get EOF"
grep -q "\[victim,1\]<stdout>: partial1" "$T/victim-merged" || fail "merged view lost the partial line"
assert_eq "lost job state" running-no "$( [ "$(job_state victim)" = running ] && echo running-yes || echo running-no)"
grep -q "job victim.*lost" "$T/iofs.log" || fail "daemon did not log the lost ranks"

# the other job and the daemon carry on
daemon_alive || fail "daemon died"
assert_eq "other job still running" running "$(rank_state other 0)"
touch "$T/go"
wait_for 10 finished $OTHER || fail "other job did not end"
assert_eq "other job status" 0 "$(rc_of $OTHER)"
assert_eq "other job output" "$(printf 'before\nafter')" "$(timeout 5 cat "$MNT/other/0/stdout")"
assert_eq "other job state" exited "$(rank_state other 0)"
# a lost job's name may be reused
"$IOFS_RUN" --nspace victim -- echo reborn
assert_eq "reuse after lost" reborn "$(timeout 5 cat "$MNT/victim/0/stdout")"
daemon_alive || fail "daemon died"

# --- the daemon goes away under running forwarders ------------------------
"$IOFS_RUN" --nspace soft -- sh -c "echo one; $(gate soft-go); echo two" >"$T/soft.out" 2>"$T/soft.err" &
SOFT=$!
track $SOFT
"$IOFS_RUN" --strict --nspace hard -- sh -c "echo one; exec sleep 30" >"$T/hard.out" 2>"$T/hard.err" &
HARD=$!
track $HARD
wait_for 10 size_is "$MNT/soft/0/stdout" 4 || fail "job soft did not start"
wait_for 10 size_is "$MNT/hard/0/stdout" 4 || fail "job hard did not start"
hard_pid=$(info_get "$MNT/hard/0/info" pid)
track "$hard_pid"
stop_daemon
touch "$T/soft-go"
wait_for 10 finished $SOFT || fail "forwarder did not survive the daemon's exit"
assert_eq "soft status" 0 "$(rc_of $SOFT)"
assert_eq "soft falls back" two "$(cat "$T/soft.out")"
assert_eq "soft warned once" 1 "$(grep -c iofs-run "$T/soft.err")"
wait_for 10 finished $HARD || fail "--strict forwarder did not end when the daemon went away"
assert_eq "--strict status" 1 "$(rc_of $HARD)"
wait_for 10 finished "$hard_pid" || fail "--strict forwarder left its rank running"
log "ok"
