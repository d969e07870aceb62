#!/bin/bash
# Case 7: 20 short jobs in a row on one daemon, each with stdin and stdout
# traffic: no leaked fds (count back to its baseline), RSS bounded, counters
# paired for every job, every byte exact.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
JOBS=${FLOW_JOBS:-20}
start_daemon
run_job() { # $1 = index
	local i=$1 ns=pj$1
	"$PRODUCE" -n 1M -s $((100 + i)) >"$T/in"
	# the rank echoes stdin to stdout slowly enough to engage stdin XOFF
	"$IOFS_RUN" --nspace $ns --rank 0 -- "$PACE" -c 4K -d 1 &
	local run=$!
	track $run
	wait_for 10 test -e "$MNT/$ns/0/stdin" || fail "job $i did not appear"
	cat "$MNT/$ns/0/stdout" >"$T/out" &
	local rd=$!
	track $rd
	timeout 60 cat "$T/in" >"$MNT/$ns/0/stdin" || fail "job $i: writer failed"
	wait_exit 60 $run || fail "job $i: rank did not exit"
	wait $run || fail "job $i: iofs-run status $?"
	wait_exit 30 $rd || fail "job $i: reader did not end at completion"
	wait $rd || fail "job $i: reader failed"
	assert_eq "job $i sha256" "$(sha "$T/in")" "$(sha "$T/out")"
	local k a b
	for k in stdin stdout stderr; do
		a=$(info_get "$MNT/$ns/info" ${k}_xoff)
		b=$(info_get "$MNT/$ns/info" ${k}_xon)
		assert_eq "job $i $k XOFF == XON" "$a" "$b"
	done
	XOFF_TOTAL=$((XOFF_TOTAL + $(info_get "$MNT/$ns/info" stdin_xoff)))
	rm -r "$MNT/$ns" || fail "job $i: rm -r of the completed job failed"
	[ ! -e "$MNT/$ns" ] || fail "job $i: directory still there after rm -r"
}
XOFF_TOTAL=0
run_job 0
tree_empty() { [ "$(ls "$MNT" | wc -l)" -eq 0 ]; } # re-run by wait_for
wait_for 5 tree_empty || fail "tree not empty after job 0"
fd0=$(fd_count $DAEMON_PID)
rss0=$(proc_status $DAEMON_PID VmRSS)
for i in $(seq 1 $((JOBS - 1))); do
	run_job $i
done
fd1=$(fd_count $DAEMON_PID)
rss1=$(proc_status $DAEMON_PID VmRSS)
assert_eq "daemon fd count back to baseline" "$fd0" "$fd1"
[ $XOFF_TOTAL -gt 0 ] || fail "no job ever engaged stdin flow control"
if is_asan "$IOFS"; then
	log "ASan build: RSS bound not asserted; ${rss0} -> ${rss1} kB"
else
	[ $((rss1 - rss0)) -lt 8192 ] || fail "daemon RSS grew ${rss0} -> ${rss1} kB over $JOBS jobs"
fi
figures persistent jobs=$JOBS fds=$fd0/$fd1 rss_kb=$rss0/$rss1 stdin_xoff_total=$XOFF_TOTAL
stop_daemon
