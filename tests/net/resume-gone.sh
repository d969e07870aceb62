#!/bin/bash
# A forwarder on this host that exits without its EXITs (kill -9; its
# ranks keep running, orphaned) cannot resume: the daemon, watching its
# process (SO_PEERCRED pid and start time), makes its running ranks lost
# within about a second instead of after the resume window (300 s), so a
# reader of the job sees its end.  On the hand-over path the daemon holds
# the rank's pipes: it reads them to their end first (the rank shown
# running until then), as without resume.  (A forwarder on TCP, or whose process
# the daemon cannot see, is given the whole window: resume-link.sh.)
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
# Both paths (tests/net/meson.build net_both_paths): a handed-over link
# resumes too (docs/protocol.md, "Pipe hand-over").
export IOFS_RECONNECT_TIMEOUT=300
start_daemon -o resume_window=300,nospool

# killed: lost at once (the zombie, not yet reaped, counts as gone)
"$IOFS_RUN" --nspace gone -- sh -c 'echo first; exec sleep 120' >"$T/g.out" 2>&1 &
G=$!
track $G
wait_for 10 grep -q first "$MNT/gone/0/stdout" 2>/dev/null || fail "job did not start"
RANK_PID=$(info_get "$MNT/gone/0/info" pid)
track "$RANK_PID"
timeout 30 cat "$MNT/gone/0/stdout" >"$T/g.read" &
CAT=$!
track $CAT
kill -KILL $G
if [ "$RUN_PATH" = handover ]; then
	# the daemon holds the rank's pipes: it reads them to their end, the
	# rank shown running until then (docs/protocol.md, "Pipe hand-over")
	wait_for 5 grep -q "forwarder gone; reading its ranks' pipes" "$T/iofs.log" ||
		fail "daemon not draining: $(tail -n 5 "$T/iofs.log")"
	assert_eq "rank while draining" running "$(rank_state gone 0)"
	kill -KILL "$RANK_PID"
fi
wait_for 5 state_is gone 0 lost || fail "ranks of a dead forwarder not lost within 5 s: $(cat "$MNT/gone/0/info")"
wait_for 5 finished $CAT || fail "the reader did not see the end"
assert_eq "reader got the output" first "$(cat "$T/g.read")"
grep -q "its forwarder (pid $G) has exited, no resume can come" "$T/iofs.log" ||
	fail "not logged: $(grep gone "$T/iofs.log")"
kill -KILL "$RANK_PID" 2>/dev/null

stop_daemon
log "ok"
