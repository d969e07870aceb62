#!/bin/bash
# Across hosts: forwarders in a network namespace connect over TCP to a
# daemon in another one (a veth pair; 10.231.N.1 and .2 exist only inside
# the two namespaces this test creates).  Remote TCP is refused without the
# allow-remote option; with it a job's output arrives byte-exact; a link
# taken down mid-stream makes the forwarder fall back to its own stdout
# (nothing lost: daemon's bytes + local bytes cover every line) and the
# daemon survives, marks the rank lost, and serves the next job; both ends
# log the reason (a timeout: keepalive / TCP user timeout).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

netns_pair # NSD (daemon) and NSF (forwarder) joined by a veth pair

# --- remote TCP refused without allow_remote ------------------------------
MNT2=$T/mnt2
mkdir -p "$MNT2"
nsenter --net="/run/netns/$NSD" "$IOFS" -f --listen "tcp:$IPD:$((PORT + 1))" "$MNT2" >"$T/iofs2.log" 2>&1 &
D2=$!
track $D2
wait_for 10 is_mounted "$MNT2" || fail "second daemon did not mount"
wait_for 10 grep -q "listening on tcp" "$T/iofs2.log" || fail "second daemon does not listen"
in_f "$IOFS_RUN" --connect "tcp:$IPD:$((PORT + 1))" --nspace r0 -- echo local-only >"$T/r0.out" 2>"$T/r0.err"
assert_eq "refused remote still runs the rank" local-only "$(cat "$T/r0.out")"
wait_for 5 grep -q "refused TCP connection from $IPF" "$T/iofs2.log" || fail "no refusal logged: $(cat "$T/iofs2.log")"
[ ! -e "$MNT2/r0" ] || fail "refused forwarder's job appeared"
kill -TERM $D2
wait_for 10 finished $D2 || fail "second daemon did not stop"

# --- the daemon in its namespace, allow_remote ----------------------------
start_netns_daemon

head -c 2000000 /dev/urandom >"$T/blob"
nsenter --net="/run/netns/$NSF" "$IOFS_RUN" --connect "tcp:$IPD:$PORT" --nspace remote -n 2 -- sh -c \
	"$(gate go); if [ \$IOFS_RANK = 1 ]; then cat $T/blob; else echo hello over tcp; fi" >"$T/remote.out" 2>&1 &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/remote/1/stdout" || fail "remote job did not appear"
start_reader "$MNT/remote/1/stdout" "$T/blob.out"
CAT=$READER_PID
touch "$T/go"
wait_for 60 finished $CAT || fail "reader of the remote job did not end"
wait_for 30 finished $JOB || fail "remote job did not end"
assert_eq "remote status" 0 "$(rc_of $JOB)"
assert_eq "remote forwarder printed nothing locally" "" "$(cat "$T/remote.out")"
assert_eq "remote binary sha256" "$(sha "$T/blob")" "$(sha "$T/blob.out")"
assert_eq "remote rank 0" "hello over tcp" "$(timeout 5 cat "$MNT/remote/0/stdout")"
grep -q "tcp $IPF:" "$T/iofs.log" || fail "daemon did not see the remote peer address"

# --- link down mid-stream -------------------------------------------------
nsenter --net="/run/netns/$NSF" "$IOFS_RUN" --connect "tcp:$IPD:$PORT" --nspace cut -- sh -c \
	"i=0; while [ ! -e $T/stop ] && [ \$i -lt 4000 ]; do echo line \$i; i=\$((i+1)); sleep 0.01; done; echo last" \
	>"$T/cut.out" 2>"$T/cut.err" &
CUT=$!
track $CUT
wait_for 10 test -e "$MNT/cut/0/stdout" || fail "job cut did not appear"
wait_for 10 grep -q "line 50" "$MNT/cut/0/stdout" || fail "no output from job cut"
ip -n "$NSF" link set "vf$$" down
log "link down after $(wc -l <"$MNT/cut/0/stdout") lines reached the daemon"
wait_for 40 grep -q "iofs-run:" "$T/cut.err" || fail "forwarder did not notice the dead link"
log "forwarder: $(cat "$T/cut.err")"
wait_for 10 grep -q "^line" "$T/cut.out" || fail "forwarder does not fall back to its stdout"
touch "$T/stop"
wait_for 20 finished $CUT || fail "forwarder did not end after its rank"
assert_eq "forwarder status after fallback" 0 "$(rc_of $CUT)"
[ "$(grep -c "iofs-run:" "$T/cut.err")" = 1 ] || fail "not one warning: $(cat "$T/cut.err")"
# nothing lost: every line is at the daemon or on the local stdout
wait_for 60 state_is cut 0 lost || fail "daemon did not mark the cut rank lost: $(rank_state cut 0)"
# each end names the reason: the forwarder's data went unacknowledged, the
# daemon's keepalive probes unanswered (both ETIMEDOUT, docs/protocol.md)
grep -Eq "connection timed out|peer unreachable|ended by the kernel" "$T/cut.err" || fail "the forwarder's warning has no reason: $(cat "$T/cut.err")"
grep -Eq "job cut\): (connection timed out|peer unreachable).*; its running ranks are lost" "$T/iofs.log" ||
	fail "the daemon did not log why it dropped the cut link: $(grep 'job cut' "$T/iofs.log")"
timeout 5 cat "$MNT/cut/0/stdout" >"$T/cut.daemon" || fail "cut stream did not complete"
last=$(grep -o '^line [0-9]*' "$T/cut.out" | tail -n 1 | cut -d' ' -f2)
cat "$T/cut.daemon" "$T/cut.out" | grep '^line ' | sort -u -t' ' -k2,2n >"$T/union"
seq 0 "$last" | sed 's/^/line /' >"$T/expect"
cmp -s "$T/union" "$T/expect" || fail "lines lost across the fallback: $(diff "$T/expect" "$T/union" | head -5)"
grep -qx last "$T/cut.out" || fail "the final line did not reach the local stdout"
dups=$(cat "$T/cut.daemon" "$T/cut.out" | grep -c '^line ')
log "link down: $((last + 1)) lines, $(grep -c '^line' "$T/cut.daemon") at the daemon, $(grep -c '^line' "$T/cut.out") local, $((dups - last - 1)) shown twice"

# the daemon survives and serves the next remote job once the link is back
daemon_alive || fail "daemon died"
ip -n "$NSF" link set "vf$$" up
wait_for 10 link_up || fail "link did not come back"
# A forwarder started the moment the link is back may find the neighbour
# entry still failed (ARP) and fall back to its own stdout, as it should;
# that attempt must say so (a connect error), and the next one must reach
# the daemon.  Any other outcome fails at once, with what iofs-run said.
again=0
next_remote_job() {
	again=$((again + 1))
	in_f "$IOFS_RUN" --connect "tcp:$IPD:$PORT" --nspace "again$again" -- echo back \
		>"$T/again.out" 2>"$T/again.err"
	if [ -s "$T/again.err" ]; then
		grep -Eq "unreachable|timed out|refused|connect" "$T/again.err" ||
			fail "next remote job $again: unexpected warning: $(cat "$T/again.err")"
		log "next remote job $again fell back: $(cat "$T/again.err")"
		return 1
	fi
	[ -s "$T/again.out" ] && fail "next remote job $again printed locally without a warning"
	assert_eq "next remote job $again" back "$(timeout 5 cat "$MNT/again$again/0/stdout")"
}
wait_for 20 next_remote_job || fail "no remote job reached the daemon after the link came back ($again attempts)"
stop_daemon
log "ok"
