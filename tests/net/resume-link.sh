#!/bin/bash
# Resume over a broken TCP link (docs/protocol.md, "Resume"): a forwarder
# in one network namespace streams 64 MiB to a daemon in another; the
# veth link goes down for 20 s in the middle (both ends notice: TCP user
# timeout / keepalive), then comes back.  The forwarder reconnects and
# resumes: a reader that follows the stream (cat of a running rank's
# stdout, like tail -f) gets every byte exactly once (sha256 and count),
# the forwarder prints nothing on its own terminal, the rank's XOFF/XON
# pair, and info shows the reconnect.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
export IOFS_RECONNECT_TIMEOUT=120

netns_pair

start_netns_daemon -o resume_window=120

HALF=$((32 << 20))
head -c $((2 * HALF)) /dev/urandom >"$T/blob"
head -c $HALF "$T/blob" >"$T/blob1"
tail -c +$((HALF + 1)) "$T/blob" >"$T/blob2"
# first half, wait for the gate (the link is down by then), second half
nsenter --net="/run/netns/$NSF" "$IOFS_RUN" -v --connect "tcp:$IPD:$PORT" --nspace cut -- sh -c \
	"$(gate go); cat $T/blob1; $(gate half); cat $T/blob2" >"$T/cut.out" 2>"$T/cut.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/cut/0/stdout" || fail "job did not appear"
start_reader "$MNT/cut/0/stdout" "$T/got"
READER=$READER_PID
touch "$T/go" # the reader is attached: nothing may be discarded
wait_for 60 info_at_least cut 0 stdout_bytes $HALF || fail "first half did not arrive"

ip -n "$NSF" link set "vf$$" down
log "link down at $(info_get "$MNT/cut/0/info" stdout_bytes) bytes"
touch "$T/half" # the rank writes the second half into a dead link
wait_for 40 grep -q "reconnecting" "$T/cut.err" || fail "forwarder did not notice the dead link: $(cat "$T/cut.err")"
wait_for 40 state_is_link cut 0 reconnecting || fail "daemon does not show the rank reconnecting: $(cat "$MNT/cut/0/info")"
assert_eq "rank still running while the link is down" running "$(rank_state cut 0)"
# keep the link down for 20 s in all (the outage is the test's input)
sleep 20
ip -n "$NSF" link set "vf$$" up
wait_for 10 link_up || fail "link does not come back"
log "link up again"

wait_for 120 finished $READER || fail "reader did not finish: $(cat "$MNT/cut/0/info")"
wait_for 30 finished $JOB || fail "forwarder did not end"
assert_eq "forwarder status" 0 "$(rc_of $JOB)"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/cut.out")"
assert_eq "bytes through the mount" $((2 * HALF)) "$(stat -c %s "$T/got")"
assert_eq "sha256 through the mount" "$(sha "$T/blob")" "$(sha "$T/got")"
assert_eq "rank exited" exited "$(rank_state cut 0)"
info_at_least cut 0 reconnects 1 || fail "no reconnect counted: $(cat "$MNT/cut/0/info")"
assert_eq "an ended rank has no link" none "$(info_get "$MNT/cut/0/info" link)"
assert_eq "stdout XOFF/XON paired" "$(info_get "$MNT/cut/0/info" stdout_xoff)" "$(info_get "$MNT/cut/0/info" stdout_xon)"
grep -q "resumed job 'cut'" "$T/cut.err" || fail "forwarder did not log the resume: $(cat "$T/cut.err")"
grep -q "ranks 0..0 resumed" "$T/iofs.log" || fail "daemon did not log the resume"
# the forwarder kept at most its replay buffer (4 MiB) plus one pipe read
# (128 KiB) while the link was down: the rank was blocked, not buffered
again=$(sed -n "s/.*resumed job 'cut'.*: \([0-9]*\) bytes sent again.*/\1/p" "$T/cut.err")
[ -n "$again" ] && [ "$again" -le $(((4 << 20) + (128 << 10))) ] || fail "replay queue not bounded: $again bytes sent again"
assert_eq "bytes_replayed in info (the forwarder's count)" "$again" "$(info_get "$MNT/cut/0/info" bytes_replayed)"
xr=$(sed -n 's/.*XOFF received \([0-9]*\), XON received \([0-9]*\).*/\1 \2/p' "$T/cut.err")
[ -z "$xr" ] || assert_eq "forwarder XOFF/XON paired" "$(echo "$xr" | cut -d' ' -f1)" "$(echo "$xr" | cut -d' ' -f2)"
log "resumed: $(grep -o 'resumed job.*' "$T/cut.err")"
daemon_alive || fail "daemon died"
