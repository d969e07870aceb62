#!/bin/bash
# Resume with stdin in flight (docs/protocol.md, "Resume"): a writer
# streams 8 MiB into a rank's stdin in the mount (paced, 1 MB/s); the TCP
# link between the forwarder's and the daemon's network namespaces goes
# down for 20 s in the middle.  The writer's write() is only slowed (it
# never fails), and the rank reads every byte exactly once (sha256 and
# count of what it read, against what was written).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
export IOFS_RECONNECT_TIMEOUT=120

netns_pair
start_netns_daemon -o resume_window=120

SIZE=$((8 << 20))
head -c $SIZE /dev/urandom >"$T/blob"
nsenter --net="/run/netns/$NSF" "$IOFS_RUN" -v --connect "tcp:$IPD:$PORT" --nspace in -- sh -c \
	"echo ready; cat >$T/rank.in" >"$T/in.out" 2>"$T/in.err" &
JOB=$!
track $JOB
wait_for 10 grep -q ready "$MNT/in/0/stdout" 2>/dev/null || fail "job did not start"
"$PACE" -r 1000000 -c 65536 -i "$T/blob" -o "$MNT/in/0/stdin" 2>"$T/writer.err" &
W=$!
track $W
wait_for 30 info_at_least in 0 stdin_bytes $((2 << 20)) || fail "stdin does not flow: $(cat "$MNT/in/0/info")"
ip -n "$NSF" link set "vf$$" down
log "link down at $(info_get "$MNT/in/0/info" stdin_bytes) stdin bytes"
wait_for 40 grep -q "reconnecting" "$T/in.err" || fail "forwarder did not notice the dead link: $(cat "$T/in.err")"
wait_for 40 state_is_link in 0 reconnecting || fail "daemon does not show the rank reconnecting"
sleep 20 # the outage (the test's input)
finished $W && fail "the writer ended while the link was down: $(cat "$T/writer.err")"
ip -n "$NSF" link set "vf$$" up
wait_for 10 link_up || fail "link does not come back"
log "link up again"
stdin_all_read in $W $JOB "$T/blob" "$T/rank.in"
info_at_least in 0 reconnects 1 || fail "no reconnect counted"
log "$(grep -o 'resumed job.*' "$T/in.err"); daemon: $(grep -o 'stdin bytes sent again' "$T/iofs.log" | head -n 1)"
