#!/bin/bash
# Resume across daemon restarts while the rank is silent, on both paths
# (tests/net/meson.build net_both_paths; docs/protocol.md, "Resume" and
# "Pipe hand-over"): the rank writes 4 MiB, waits (silent) through a
# graceful restart (SIGTERM) on the spool, writes 4 MiB more, waits through
# a kill -9 and restart, writes the last 4 MiB.  Nothing was in flight at
# either outage, so the stream in the mount is exact on both paths (sha256,
# count), nothing is printed on the forwarder's terminal, XOFF/XON pair,
# and the rank's path is the one asked for.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
export IOFS_RECONNECT_TIMEOUT=60
SP="$T/spool"
start_daemon -o spool="$SP" -o resume_window=60
for p in a b c; do head -c $((4 << 20)) /dev/urandom >"$T/$p"; done
cat "$T/a" "$T/b" "$T/c" >"$T/all"
"$IOFS_RUN" -v --nspace q -- sh -c "cat $T/a; $(gate one); cat $T/b; $(gate two); cat $T/c" \
	>"$T/q.out" 2>"$T/q.err" &
J=$!
track $J
restart() { # restart SIGNAL WANT: the daemon down with SIGNAL once WANT bytes are in
	wait_for 30 info_at_least q 0 stdout_bytes "$2" || fail "$1: $2 bytes did not arrive: $(cat "$T/q.err")"
	assert_eq "$1: path" "$RUN_PATH" "$(info_get "$MNT/q/0/info" path)"
	kill "-$1" "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	start_daemon -o spool="$SP" -o resume_window=60
	wait_for 10 test -d "$MNT/q/0" || fail "$1: job not restored"
	wait_for 30 state_is_link q 0 connected || fail "$1: not resumed: $(cat "$MNT/q/0/info"; cat "$T/q.err")"
	wait_for 10 grep -q "path: $RUN_PATH" "$MNT/q/0/info" || fail "$1: path after the resume: $(cat "$MNT/q/0/info")"
	assert_eq "$1: bytes kept" "$2" "$(info_get "$MNT/q/0/info" stdout_bytes)"
}
restart TERM $((4 << 20))
touch "$T/one"
restart KILL $((8 << 20))
touch "$T/two"
wait_for 60 finished $J || fail "forwarder did not end"
assert_eq "forwarder status" 0 "$(rc_of $J)"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/q.out")"
wait_for 10 state_is q 0 exited || fail "rank not exited: $(cat "$MNT/q/0/info")"
assert_eq "bytes in the mount" "$(stat -c %s "$T/all")" "$(timeout 30 cat "$MNT/q/0/stdout" | wc -c)"
assert_eq "sha256 in the mount" "$(sha "$T/all")" "$(timeout 30 cat "$MNT/q/0/stdout" | sha256sum | cut -d' ' -f1)"
assert_eq "stdout XOFF/XON paired" "$(info_get "$MNT/q/0/info" stdout_xoff)" "$(info_get "$MNT/q/0/info" stdout_xon)"
assert_eq "resumes logged" 2 "$(grep -c "resumed job 'q'" "$T/q.err")"
grep -q "0 lost" "$T/q.err" || fail "lost bytes counted: $(tail -n 3 "$T/q.err")"
stop_daemon
log "ok: $(tail -n 1 "$T/q.err")"
