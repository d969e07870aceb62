#!/bin/bash
# A resume (protocol 4, docs/protocol.md "Resume") is accepted only from
# the job's owner: user nobody sends a resume HELLO for root's running job,
# first while root's forwarder is connected, then while its ranks wait for
# a resume (the daemon restarted on its spool, root's forwarder stopped).  Both are refused with ERROR 37 and a
# log line naming both uids; nobody learns nothing (no HELD frame), and
# root's job is untouched: still running, its stream intact.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
# Both paths (tests/security/meson.build): a handed-over link resumes too.
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

start_daemon -o resume_window=60
IOFS_RECONNECT_TIMEOUT=60 "$IOFS_RUN" --nspace victim -- sh -c "echo secret-line; exec sleep 60" >"$T/v.out" 2>&1 &
V=$!
track $V
wait_for 10 grep -q secret-line "$MNT/victim/0/stdout" 2>/dev/null || fail "victim job did not start"
RANK_PID=$(info_get "$MNT/victim/0/info" pid)
track "$RANK_PID"

# resume_as_nobody: nobody's resume HELLO for victim rank 0 (protocol 4)
resume_as_nobody() {
	as_nobody /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$T')
import proto
s = proto.connect('$ADDR')
s.sendall(proto.hello(b'victim', version=4, flags=proto.F_NAME | proto.F_RESUME))
t, body = proto.recv_frame(s)
print('HELD' if t == proto.T_HELD else proto.answer_of(t, body))
"
}

# 1. root's forwarder is still connected
out=$(resume_as_nobody)
case "$out" in "ERROR 37 "*"belongs to another user"*) ;; *) fail "live job: nobody's resume not refused: $out" ;; esac
wait_for 5 daemon_log_has "resume of job 'victim' by uid $NOBODY_UID refused" || fail "refusal not logged"
assert_eq "victim still connected" connected "$(info_get "$MNT/victim/0/info" link)"

n1=$(grep -c "resume of job 'victim' by uid $NOBODY_UID refused: the job belongs to uid 0" "$T/iofs.log")
assert_eq "the first refusal logged with both uids" 1 "$n1"

# 2. root's rank waits for a resume: the daemon restarted on its spool
# while root's forwarder is stopped (alive, so it may still resume: a
# forwarder that exited makes its ranks lost at once, net/resume-gone.sh)
kill -STOP $V
kill_daemon
start_daemon -o resume_window=60
wait_for 10 state_is_link victim 0 reconnecting || fail "victim rank not waiting: $(cat "$MNT/victim/0/info")"
out=$(resume_as_nobody)
case "$out" in "ERROR 37 "*) ;; *) fail "waiting job: nobody's resume not refused: $out" ;; esac
wait_for 5 daemon_log_has "resume of job 'victim' by uid $NOBODY_UID refused: the job belongs to uid 0" ||
	fail "the second refusal not logged with both uids: $(cat "$T/iofs.log")"
assert_eq "victim still running" running "$(rank_state victim 0)"
assert_eq "victim still waiting" reconnecting "$(info_get "$MNT/victim/0/info" link)"
assert_eq "victim's stream intact" secret-line "$(timeout 5 head -n 1 "$MNT/victim/0/stdout")"
# root's own forwarder, continued, takes its job back
kill -CONT $V
wait_for 30 state_is_link victim 0 connected || fail "root's forwarder did not resume: $(cat "$MNT/victim/0/info")"
kill -KILL "$RANK_PID" 2>/dev/null
wait_for 10 finished $V || fail "root's forwarder did not end"
assert_eq "root's forwarder printed nothing locally" "" "$(grep -v '^iofs-run:' "$T/v.out")"
log "ok: both resumes by nobody refused"
