#!/bin/bash
# Issue 12 item 7: per-user limits.  nobody hits every limit at once and
# holds it: HELLOs announcing many ranks (max_ranks_hello, max_ranks_job,
# max_ranks_uid; then 160 more of 32,768 ranks), one-rank jobs until
# max_jobs_uid, 150 concurrent 2 x 1 MiB
# writers into ranks that never read (max_stdin_uid: ENOBUFS), idle
# connections until max_conns_uid, then keeps knocking.  Meanwhile root's
# job streams 20 MB that must arrive exact (sha256), five small root jobs
# each complete within 3 s, and the daemon's peak RSS (VmHWM) stays under
# the documented bound of 256 MiB.  Before the limits: 600 such HELLOs took
# the daemon to 2.15 GB, 2,000 such writers to 2.05 GB.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

RSS_BOUND_KB=$((256 * 1024))
# (the sink job below holds 150 ranks of the 98455, hammer.py says how)
start_daemon -o max_ranks_hello=32768,max_ranks_job=49152,max_ranks_uid=98455
chmod 777 "$SOCK"
mkdir -m 777 "$T/hog"
cp "$IOFS_SOURCE_DIR/tests/security/hammer.py" "$IOFS_SOURCE_DIR/tests/security/proto.py" "$T/hog/"
chmod 644 "$T/hog/"*.py

# nobody's sink: 150 ranks that never read their stdin.  The socket path:
# there the stdin credit passes the first MiB of each writer to the
# forwarder and the second parks in the daemon, up to max_stdin_uid.
# After a pipe hand-over the daemon holds at most a pipe and its 64 KiB
# queue per rank and parks the rest of one write: the limit is not reached
# and the writers simply wait (docs/protocol.md, "Pipe hand-over").
"${NOBODY_BG[@]}" "$IOFS_RUN" --no-handover --nspace sink -n 150 -- sleep 120 >"$T/sink.out" 2>&1 &
track $!
wait_for 20 test -e "$MNT/sink/149/stdin" || fail "nobody's sink job did not appear"
echo "sink 150" >"$T/hog/sink"

"${NOBODY_BG[@]}" /usr/bin/python3 "$T/hog/hammer.py" "$SOCK" "$MNT" "$T/hog" >"$T/hammer.out" 2>&1 &
HAMMER=$!
track $HAMMER
wait_for 120 test -e "$T/hog/ready" || fail "the hammer did not reach every limit: $(cat "$T/hammer.out")"
log "hammer: $(tr '\n' ' ' <"$T/hog/report")"
rep() { awk -v k="$1" '$1 == k { print $2 }' "$T/hog/report"; }
assert_eq "HELLO over max_ranks_hello" max_ranks_hello "$(rep hello_ranks_hello)"
assert_eq "first big HELLO" WELCOME "$(rep hello_first)"
assert_eq "HELLO over max_ranks_job" max_ranks_job "$(rep hello_ranks_job)"
assert_eq "HELLO over max_ranks_uid" max_ranks_uid "$(rep hello_ranks_uid)"
assert_eq "HELLOs of the flood accepted" 0 "$(rep flood_accepted)"
assert_eq "jobs made before max_jobs_uid" 1023 "$(rep jobs_made)" # + the sink
assert_eq "job over max_jobs_uid" max_jobs_uid "$(rep jobs_refused)"
[ "$(rep stdin_refused)" -ge 40 ] || fail "only $(rep stdin_refused) of 150 stdin writers refused"
assert_eq "stdin refusal" "No_buffer_space_available" "$(rep stdin_refusal)"
assert_eq "connection over max_conns_uid" max_conns_uid "$(rep conns_refused)"

# root, meanwhile: 20 MB exact, and small jobs answered promptly
gated_producer rootjob 20000000 5 "$T/want"
start_reader "$MNT/rootjob/0/stdout" "$T/got"
ROOTREADER=$READER_PID
open_gate rootjob
worst=0
for i in 1 2 3 4 5; do
	t0=$(date +%s%N)
	"$IOFS_RUN" --strict --nspace "ping$i" -- echo pong >"$T/ping.out" 2>&1 || fail "root's ping $i: $(cat "$T/ping.out")"
	assert_eq "ping $i" pong "$(timeout 5 cat "$MNT/ping$i/0/stdout")"
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ $ms -gt $worst ] && worst=$ms
done
log "root's small jobs during the hammer: slowest $worst ms"
[ $worst -lt 3000 ] || fail "a root job took $worst ms while nobody hammers"
wait_for 90 finished $ROOTREADER || fail "root's 20 MB did not arrive while nobody hammers"
assert_eq "root's output sha256" "$(sha "$T/want")" "$(sha "$T/got")"

hwm=$(proc_status $DAEMON_PID VmHWM)
rss=$(proc_status $DAEMON_PID VmRSS)
log "daemon VmHWM $((hwm / 1024)) MiB, VmRSS $((rss / 1024)) MiB (bound $((RSS_BOUND_KB / 1024)) MiB)"
figures limits-hammer vmhwm_kb=$hwm vmrss_kb=$rss slowest_job_ms=$worst stdin_refused=$(rep stdin_refused)
if is_asan "$IOFS"; then
	log "ASan build: RSS bound not checked"
else
	[ "$hwm" -lt $RSS_BOUND_KB ] || fail "daemon peak RSS $hwm kB over the bound $RSS_BOUND_KB kB"
fi
for lim in max_ranks_hello max_ranks_job max_ranks_uid max_jobs_uid max_conns_uid max_stdin_uid; do
	grep -q "uid $NOBODY_UID refused: limit $lim=" "$T/iofs.log" || fail "no log line for $lim"
done
lines=$(grep -c "refused: limit" "$T/iofs.log")
log "refusal log lines: $lines"
[ "$lines" -lt 200 ] || fail "$lines refusal log lines (rate limit broken)"
touch "$T/hog/release"
wait_for 30 finished $HAMMER || fail "hammer did not exit"
daemon_alive || fail "daemon died"
stop_daemon
log "ok"
