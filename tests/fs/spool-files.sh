#!/bin/bash
# The spool keeps every job's history, so a daemon that lives for months
# must not keep a descriptor per rank file (it did: 2 per rank of every job
# ever run, until RLIMIT_NOFILE, and then new jobs' files, new forwarders
# and a restart's restore failed).  The daemon runs with a hard limit of
# 256 (prlimit), so it keeps at most 64 rank files open (a quarter); 8 jobs of 40 ranks write stdout and
# stderr (640 rank files): the daemon stays under its limit, every file of
# every job reads back exactly (the closed ones are reopened), the merged
# views too; after a restart (same limit) all 8 jobs are back, whole, and
# a new job still runs.  Both paths (the hand-over holds 3 pipes per
# running rank besides).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

JOBS=8
RANKS=40
LIMIT=256
SP="$T/spool"
gone_or_zombie() { [ ! -e /proc/"$1" ] || [ "$(awk '{ print $3 }' /proc/"$1"/stat 2>/dev/null)" = Z ]; }
daemon_fds() { find /proc/"$DAEMON_PID"/fd -mindepth 1 2>/dev/null | wc -l; }
# the daemon under a hard limit of its own (it raises its soft limit to
# the hard one at start; a restart's restore runs under it too)
printf '#!/bin/sh\nexec prlimit --nofile=%s:%s -- "%s" "$@"\n' $LIMIT $LIMIT "$IOFS" >"$T/iofs-limited"
chmod +x "$T/iofs-limited"
IOFS=$T/iofs-limited
start_limited() {
	start_daemon -o spool="$SP"
	assert_eq "daemon's limit" "$LIMIT" "$(prlimit --pid "$DAEMON_PID" --nofile -o SOFT --noheadings | tr -d ' ')"
}
# every_file_reads_back: each rank's two lines, each job's merged view
every_file_reads_back() {
	local j r out err
	for j in $(seq $JOBS); do
		for r in $(seq 0 $((RANKS - 1))); do
			out=$(timeout 10 cat "$MNT/f$j/$r/stdout") || fail "$1: f$j/$r/stdout unreadable: $(tail -n 3 "$T/iofs.log")"
			err=$(timeout 10 cat "$MNT/f$j/$r/stderr") || fail "$1: f$j/$r/stderr unreadable"
			[ "$out" = "out $j $r" ] && [ "$err" = "err $j $r" ] ||
				fail "$1: f$j/$r holds '$out' / '$err'"
		done
		assert_eq "$1: f$j merged stdout lines" $RANKS "$(timeout 10 grep -c "^\[f$j,[0-9]*\]<stdout>: out $j [0-9]*$" "$MNT/f$j/stdout")"
	done
}

start_limited
for j in $(seq $JOBS); do
	run_job "f$j" $RANKS sh -c "echo out $j \$IOFS_RANK; echo err $j \$IOFS_RANK >&2"
	wait_for 30 exited "$MNT/f$j/info" || fail "job f$j did not end: $(cat "$T/run-f$j.err")"
	# its forwarder ends after its ranks (the status is taken here, in
	# this shell: a $(...) subshell cannot wait for a child still running)
	wait_for 30 gone_or_zombie "$JOB_PID" || fail "job f$j: the forwarder did not end"
	rc=0
	wait "$JOB_PID" || rc=$?
	[ "$rc" = 0 ] || fail "job f$j: forwarder status $rc: $(tail -n 5 "$T/run-f$j.err")"
	n=$(daemon_fds)
	[ "$n" -lt $LIMIT ] || fail "after job f$j the daemon holds $n descriptors (limit $LIMIT)"
done
log "after $JOBS jobs of $RANKS ranks: the daemon holds $(daemon_fds) descriptors"
every_file_reads_back "first life"
n=$(daemon_fds)
[ "$n" -le $((64 + 10 * JOBS + 20)) ] || fail "after reading everything the daemon holds $n descriptors"
! grep -q "Too many open files" "$T/iofs.log" || fail "EMFILE: $(grep "Too many" "$T/iofs.log" | head -n 3)"

stop_daemon
start_limited
wait_for 10 test -d "$MNT/f$JOBS/$((RANKS - 1))" || fail "not every job restored: $(ls "$MNT")"
assert_eq "jobs restored" $JOBS "$(ls "$MNT" | grep -c '^f')"
every_file_reads_back "restarted"
run_job g $RANKS sh -c 'echo g $IOFS_RANK'
wait_for 30 exited "$MNT/g/info" || fail "a new job after the restart did not end"
assert_eq "new job: rank 39" "g 39" "$(cat "$MNT/g/39/stdout")"
n=$(daemon_fds)
[ "$n" -lt $LIMIT ] || fail "the restarted daemon holds $n descriptors"
! grep -q "Too many open files" "$T/iofs.log" || fail "EMFILE after the restart"
log "restarted: $(daemon_fds) descriptors for $((JOBS + 1)) jobs"
