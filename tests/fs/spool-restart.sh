#!/bin/bash
# -o spool=DIR across daemon lives: a restarted daemon shows the jobs of
# its previous life, as they ended, with every byte; after kill -9 in the
# middle of a stream (repeated), the job comes back lost with exactly the
# bytes the daemon had taken: a prefix of what the rank wrote, nothing torn
# or duplicated.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

SP="$T/spool"
KILLS=${IOFS_SPOOL_KILLS:-5}
start_daemon -o spool="$SP"

# 1. A finished job survives a clean stop.
run_job a 3 sh -c "$PRODUCE -l -n 300K -s \$IOFS_RANK; [ \$IOFS_RANK != 2 ] || exit 3"
wait_for 30 exited "$MNT/a/info" || fail "job a did not end"
stop_daemon
start_daemon -o spool="$SP"
wait_for 10 test -d "$MNT/a/2" || fail "job a not restored"
assert_eq "state" exited "$(job_state a)"
assert_eq "exit status" 3 "$(info_get "$MNT/a/info" exit_status)"
for r in 0 1 2; do
	assert_eq "rank $r" "$(sha <("$PRODUCE" -l -n 300K -s $r))" \
		"$(timeout 10 cat "$MNT/a/$r/stdout" | sha256sum | cut -d' ' -f1)"
	assert_eq "rank $r in the merged view" \
		"$("$PRODUCE" -l -n 300K -s $r | awk 1 | sha256sum | cut -d' ' -f1)" \
		"$(timeout 10 grep -a "^\[a,$r\]<stdout>: " "$MNT/a/stdout" | sed "s/^\[a,$r\]<stdout>: //" | sha256sum | cut -d' ' -f1)"
done
log "clean restart: job a exited 3, every byte"

# 2. kill -9 mid-stream, $KILLS times: the job comes back lost, its bytes a
#    prefix of the rank's stream.
for i in $(seq "$KILLS"); do
	run_job k$i 1 "$PRODUCE" -n 256M -b 4K -s $i
	wait_for 30 size_ge "$MNT/k$i/0/stdout" $((i << 20)) || fail "k$i: no output"
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	kill -TERM "$JOB_PID" 2>/dev/null
	wait_exit 10 "$JOB_PID" || fail "k$i: forwarder did not stop"
	start_daemon -o spool="$SP"
	wait_for 10 test -d "$MNT/k$i/0" || fail "k$i not restored"
	assert_eq "k$i state" lost "$(job_state k$i)"
	n=$(stat -c %s "$MNT/k$i/0/stdout")
	[ "$n" -ge $((i << 20)) ] || fail "k$i: only $n bytes restored"
	assert_eq "k$i: $n bytes, a prefix" "$("$PRODUCE" -n 256M -b 4K -s $i | head -c "$n" | sha256sum | cut -d' ' -f1)" \
		"$(timeout 30 cat "$MNT/k$i/0/stdout" | sha256sum | cut -d' ' -f1)"
	assert_eq "k$i: bytes read" "$n" "$(timeout 30 cat "$MNT/k$i/0/stdout" | wc -c)"
	log "kill -9 #$i: k$i restored lost, $n bytes exact"
done
# every earlier life's jobs are there
for i in $(seq "$KILLS"); do test -d "$MNT/k$i" || fail "k$i gone after later restarts"; done
assert_eq "job a after the kills" exited "$(job_state a)"

# 3. rmdir of a restored job deletes its spool files.
n=$(ls "$SP" | wc -l)
rm -r "$MNT/a" || fail "rm -r a"
wait_for 10 bash -c "[ \$(ls '$SP' | wc -l) -lt $n ]" || fail "spool of a left behind"
stop_daemon
log "ok"
