#!/bin/bash
# Resume after a daemon restart without a spool (docs/protocol.md,
# "Resume"): the restarted daemon knows nothing of the job and recreates
# it from the resume; the bytes the old daemon had acknowledged are gone
# with its memory, and the forwarder counts them exactly (socket path; on
# the hand-over path nobody saw them, so they are not counted); everything
# the rank wrote after that reaches the new mount (nothing on the terminal).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
# Both paths (tests/net/meson.build net_both_paths): a handed-over link
# resumes too (docs/protocol.md, "Pipe hand-over").
export IOFS_RECONNECT_TIMEOUT=60
start_daemon -o resume_window=60 -o nospool
head -c $((8 << 20)) /dev/urandom >"$T/blob"
"$IOFS_RUN" -v --nspace ns -- sh -c "echo ready; $(gate go); cat $T/blob; $(gate two); echo tail-line" >"$T/o" 2>"$T/e" &
J=$!
track $J
wait_for 10 grep -q ready "$MNT/ns/0/stdout" 2>/dev/null || fail "job did not start"
touch "$T/go"
wait_for 30 info_at_least ns 0 stdout_bytes $(((8 << 20) + 6)) || fail "the blob did not arrive"
kill_daemon
start_daemon -o resume_window=60 -o nospool
touch "$T/two"
wait_for 30 test -e "$MNT/ns/0/stdout" || fail "job not recreated: $(cat "$T/e")"
wait_for 30 finished $J || fail "forwarder did not end"
assert_eq "forwarder status" 0 "$(rc_of $J)"
assert_eq "nothing on the terminal" 0 "$(stat -c %s "$T/o")"
assert_eq "the new daemon's stream" tail-line "$(timeout 5 cat "$MNT/ns/0/stdout")"
if [ "$RUN_PATH" = socket ]; then
	grep -q "8388614 acknowledged bytes are gone from the daemon" "$T/e" || fail "lost bytes not counted: $(cat "$T/e")"
	grep -q "8388614 lost" "$T/e" || fail "no summary: $(cat "$T/e")"
else
	# Hand-over: the forwarder never saw the bytes the old daemon read
	# from the pipes, and the new one knows nothing of them: that loss is
	# not counted (docs/protocol.md, "Pipe hand-over"); what the rank wrote
	# after the restart is exact (above), and nothing is counted as lost.
	grep -q "0 lost" "$T/e" || fail "no summary: $(cat "$T/e")"
fi
assert_eq "path" "$RUN_PATH" "$(info_get "$MNT/ns/0/info" path)"
assert_eq "state" exited "$(rank_state ns 0)"
assert_eq "reconnects" 1 "$(info_get "$MNT/ns/0/info" reconnects)"
