#!/bin/bash
# MUNGE across hosts (issue 12): a daemon in one network namespace with
# -o allow_remote (and MUNGE required by default), forwarders in another
# one over a veth link.  Both "hosts" share one munged and key (as a
# cluster does).  nobody's iofs-run is accepted, its job owned by nobody
# (the uid the credential vouches for, not the HELLO's hint) and its output
# byte-exact; a forwarder without a credential is refused and keeps its
# output local.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/munge-common.sh"

netns_pair
start_munged m
nsenter --net="/run/netns/$NSD" "$IOFS" -f --listen "$ADDR" --listen "tcp:$IPD:$PORT" \
	-o "allow_remote,munge_socket=$MSOCK_m" "$MNT" >"$T/iofs.log" 2>&1 &
DAEMON_PID=$!
wait_for 10 is_mounted "$MNT" || fail "daemon did not mount"
wait_for 10 grep -q "listening on tcp:$IPD:$PORT.*MUNGE credentials required" "$T/iofs.log" ||
	fail "daemon does not listen on TCP with MUNGE: $(cat "$T/iofs.log")"

head -c 1000000 /dev/urandom >"$T/blob"
chmod 644 "$T/blob"
nsenter --net="/run/netns/$NSF" "${NOBODY_BG[@]}" "$IOFS_RUN" --strict --munge-socket "$MSOCK_m" \
	--connect "tcp:$IPD:$PORT" --nspace remote -- cat "$T/blob" >"$T/remote.out" 2>&1 ||
	fail "nobody's remote job failed: $(cat "$T/remote.out")"
wait_for 10 job_done remote || fail "remote job did not complete"
assert_eq "remote output sha256" "$(sha "$T/blob")" "$(as_nobody cat "$MNT/remote/0/stdout" | sha256sum | cut -d' ' -f1)"
assert_eq "owner mapped from the credential" "nobody $NOGROUP" "$(stat -c '%U %G' "$MNT/remote/0/stdout")"
grep -q "conn .* (tcp $IPF:.*job 'remote' .* uid $NOBODY_UID (MUNGE)" "$T/iofs.log" ||
	fail "daemon did not log the remote MUNGE uid: $(grep remote "$T/iofs.log")"

# without a credential: refused, the output stays with the forwarder
nsenter --net="/run/netns/$NSF" "$IOFS_RUN" --munge-socket "$T/none" --connect "tcp:$IPD:$PORT" \
	--nspace nocred -- echo kept >"$T/nocred.out" 2>"$T/nocred.err"
assert_eq "refused forwarder keeps its output" kept "$(cat "$T/nocred.out")"
grep -q "no MUNGE credential" "$T/nocred.err" || fail "no reason: $(cat "$T/nocred.err")"
[ ! -e "$MNT/nocred" ] || fail "job without a credential appeared"
stop_daemon
log "ok"
