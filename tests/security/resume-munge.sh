#!/bin/bash
# Resume over TCP with MUNGE (docs/protocol.md "Resume", docs/security.md):
# user nobody runs a job over loopback TCP, its uid proven by a MUNGE
# credential; the daemon (-o spool) is killed with SIGKILL and restarted on
# the same spool and port twice mid-stream.  Each resume HELLO carries a
# fresh credential (a replayed one would be refused) and is accepted as
# nobody's: the job stays nobody's, its stream in the mount is exact
# (sha256, count), nothing printed on the forwarder's terminal, XOFF/XON
# paired.  (A resume by another uid is refused: security/resume-uid.sh.)
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/munge-common.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

start_munged m
chmod 755 "$T/m"
PORT=$((22000 + $$ % 20000))
TADDR="tcp:127.0.0.1:$PORT"
SP="$T/spool"
SIZE=$((24 << 20))
daemon() {
	start_daemon --listen "$TADDR" -o "munge_socket=$MSOCK_m" -o spool="$SP" -o resume_window=60
	chmod 777 "$SOCK"
}
daemon
head -c $SIZE /dev/urandom >"$T/blob"
chmod 644 "$T/blob"
IOFS_RECONNECT_TIMEOUT=60 "${NOBODY_BG[@]}" "$IOFS_RUN" -v --munge-socket "$MSOCK_m" --connect "$TADDR" --nspace nbr -- \
	"$PACE" -r 3000000 -c 65536 -i "$T/blob" >"$T/nb.out" 2>"$T/nb.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/nbr/0/stdout" || fail "nobody's TCP job did not appear: $(cat "$T/nb.err")"
assert_eq "owner" "nobody" "$(stat -c %U "$MNT/nbr/0/stdout")"
for i in 1 2; do
	want=$((i * 6 << 20))
	wait_for 60 info_at_least nbr 0 stdout_bytes $want || fail "kill $i: $want bytes did not arrive: $(cat "$T/nb.err")"
	kill_daemon
	daemon
	wait_for 10 test -d "$MNT/nbr/0" || fail "kill $i: job not restored"
	wait_for 60 state_is_link nbr 0 connected || fail "kill $i: not resumed: $(cat "$MNT/nbr/0/info"; cat "$T/nb.err")"
	wait_for 5 daemon_log_has "uid $NOBODY_UID (MUNGE)" || fail "kill $i: the resume was not MUNGE-authenticated: $(cat "$T/iofs.log")"
	log "kill -9 #$i at >= $want bytes: resumed over TCP+MUNGE at $(info_get "$MNT/nbr/0/info" stdout_bytes)"
done
wait_for 60 finished $JOB || fail "forwarder did not end"
assert_eq "forwarder status" 0 "$(rc_of $JOB)"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/nb.out")"
wait_for 10 state_is nbr 0 exited || fail "rank not exited: $(cat "$MNT/nbr/0/info")"
assert_eq "owner after the resumes" "nobody" "$(stat -c %U "$MNT/nbr/0/stdout")"
assert_eq "bytes in the mount" $SIZE "$(timeout 30 cat "$MNT/nbr/0/stdout" | wc -c)"
assert_eq "sha256 in the mount" "$(sha "$T/blob")" "$(timeout 30 cat "$MNT/nbr/0/stdout" | sha256sum | cut -d' ' -f1)"
assert_eq "XOFF/XON paired" "$(info_get "$MNT/nbr/0/info" stdout_xoff)" "$(info_get "$MNT/nbr/0/info" stdout_xon)"
assert_eq "resumes logged by the forwarder" 2 "$(grep -c "resumed job 'nbr'" "$T/nb.err")"
grep -q "0 lost" "$T/nb.err" || fail "forwarder counted lost bytes: $(tail -n 3 "$T/nb.err")"
stop_daemon
log "ok"
