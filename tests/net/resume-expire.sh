#!/bin/bash
# The resume window runs out (docs/protocol.md, "Resume"): the TCP link
# between a forwarder and the daemon goes down; the daemon (-o
# resume_window=2) declares the rank lost when its window ends, the link
# comes back, the forwarder's resume is declined with what the daemon
# holds (HELD, then ERROR 37), and the forwarder hands over exactly there:
# the bytes in the mount followed by the bytes on its terminal are the
# rank's output, byte for byte (no gap, no overlap).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
export IOFS_RECONNECT_TIMEOUT=120

netns_pair
start_netns_daemon -o resume_window=2

# phase 1: 3 MiB then lines; the link goes down; phase 2 after the gate
"$PRODUCE" -n 3M -s 1 >"$T/p1"
"$PRODUCE" -n 2M -s 2 >"$T/p2"
cat "$T/p1" "$T/p2" >"$T/want"
nsenter --net="/run/netns/$NSF" "$IOFS_RUN" -v --connect "tcp:$IPD:$PORT" --nspace ex -- sh -c \
	"$(gate go); cat $T/p1; $(gate two); cat $T/p2" >"$T/ex.out" 2>"$T/ex.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/ex/0/stdout" || fail "job did not appear"
start_reader "$MNT/ex/0/stdout" "$T/got"
READER=$READER_PID
touch "$T/go"
wait_for 30 info_at_least ex 0 stdout_bytes $((3 << 20)) || fail "phase 1 did not arrive"
ip -n "$NSF" link set "vf$$" down
touch "$T/two" # phase 2 into a dead link: kept by the forwarder
wait_for 40 grep -q "reconnecting" "$T/ex.err" || fail "forwarder did not notice the dead link"
wait_for 60 state_is ex 0 lost || fail "daemon did not declare the rank lost: $(cat "$MNT/ex/0/info")"
grep -q "no resume within 2 s" "$T/iofs.log" || fail "daemon did not log the end of the window"
ip -n "$NSF" link set "vf$$" up
wait_for 10 link_up || fail "link does not come back"
wait_for 60 finished $JOB || fail "forwarder did not end: $(cat "$T/ex.err")"
assert_eq "forwarder status" 0 "$(rc_of $JOB)"
wait_for 10 finished $READER || fail "reader did not end"
grep -q "hand-over: the daemon keeps what it holds" "$T/ex.err" || fail "no exact hand-over: $(cat "$T/ex.err")"
m=$(stat -c %s "$T/got")
l=$(stat -c %s "$T/ex.out")
log "hand-over: $m bytes in the mount, $l on the terminal"
assert_eq "mount + terminal bytes == produced" "$(stat -c %s "$T/want")" $((m + l))
assert_eq "mount then terminal == the rank's output" "$(sha "$T/want")" "$(cat "$T/got" "$T/ex.out" | sha256sum | cut -d' ' -f1)"
grep -q "note: ranks 0..0 came back after the resume window" "$MNT/ex/info" || fail "no note in the job's info: $(cat "$MNT/ex/info")"
assert_eq "stdout XOFF/XON paired" "$(info_get "$MNT/ex/0/info" stdout_xoff)" "$(info_get "$MNT/ex/0/info" stdout_xon)"
