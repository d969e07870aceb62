#!/bin/bash
# The merged view across daemon restarts (docs/design.md, "Crash
# consistency"): 4 ranks print a line and then a partial line every 50 ms
# (the merged view is full of lines other ranks cut, "+" continuations and
# a line left open at its end); the daemon (-o spool) is killed with
# SIGKILL three times and stopped with SIGTERM once in the middle of it,
# restarted on the same spool and socket each time, and the forwarder
# resumes.  At the end the merged view holds each rank's bytes exactly,
# once (tests/fs/merged_ranks.py against the rank files), and again after
# one more restart.  Before, a killed daemon's view lacked its last batch
# (up to 100 ms) and the lines it held, and a restarted one appended to a
# view that ended in another rank's open line without ending it and tagged
# the cut lines' continuations ": " (each seen by hand).
# MERGED_XML=1 (resume-merged-xml.sh): the same with iofs-run --xml, whose
# view holds the ranks' bytes escaped, as literal bytes; before, a killed
# daemon's XML view was not completed at all.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
FMT=() CHECK=() CONT='<stdout>+ '
if [ -n "${MERGED_XML:-}" ]; then
	FMT=(--xml) CHECK=(xml) CONT='cont="1"'
fi
export IOFS_RECONNECT_TIMEOUT=120
SP="$T/spool"
N=4
LINES=160
start_daemon -o spool="$SP" -o resume_window=120
"$IOFS_RUN" -n $N --nspace mv "${FMT[@]}" -- sh -c "i=0; while [ \$i -lt $LINES ]; do echo \"r\$IOFS_RANK line \$i\"; printf \"part-\$IOFS_RANK-\$i \"; i=\$((i + 1)); sleep 0.05; done; echo end" \
	>"$T/mv.out" 2>"$T/mv.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/mv/0/stdout" || fail "job did not appear"
restart() { # $1: how (KILL or TERM)
	if [ "$1" = KILL ]; then
		kill_daemon
	else
		stop_daemon
	fi
	start_daemon -o spool="$SP" -o resume_window=120
	wait_for 10 test -d "$MNT/mv/0" || fail "job not restored"
}
i=0
for how in KILL TERM KILL KILL; do
	i=$((i + 1))
	want=$((i * LINES * 25 / 6)) # bytes of rank 0 (about 26 per step)
	wait_for 60 info_at_least mv 0 stdout_bytes $want || fail "restart $i: $want bytes did not arrive: $(cat "$T/mv.err")"
	restart $how
	for r in $(seq 0 $((N - 1))); do
		wait_for 60 state_is_link mv "$r" connected || fail "restart $i: rank $r not resumed: $(cat "$MNT/mv/$r/info")"
	done
	log "$how #$i at >= $want bytes of rank 0: $(grep -c 'put in the merged view again' "$T/iofs.log") refeed(s) logged"
done
wait_for 60 finished $JOB || fail "forwarder did not end: $(cat "$T/mv.err")"
assert_eq "forwarder status" 0 "$(rc_of $JOB)"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/mv.out")"
wait_for 10 job_done mv || fail "job not done: $(cat "$MNT/mv/info")"
for r in $(seq 0 $((N - 1))); do
	timeout 10 cat "$MNT/mv/$r/stdout" >"$T/want$r"
	assert_eq "rank $r's last line" "part-$r-$((LINES - 1)) end" "$(tail -n 1 "$T/want$r")"
	assert_eq "rank $r's lines" $((LINES + 1)) "$(wc -l <"$T/want$r")"
done
check_view() { # $1: when
	timeout 10 cat "$MNT/mv/stdout" >"$T/view"
	python3 "$IOFS_SOURCE_DIR/tests/fs/merged_ranks.py" "$T/view" mv $N "$T/want" "${CHECK[@]}" >"$T/check" ||
		fail "$1: the merged view does not hold each rank's bytes exactly: $(cat "$T/check"); $(grep -n -v '^\[mv,[0-9]*\]<stdout>[:+] \|^<stdout nspace="mv" rank="[0-9]*"' "$T/view" | head -3)"
}
check_view "at the end"
restart TERM
check_view "after one more restart"
grep -q "put in the merged view again" "$T/iofs.log" && fail "a clean restart fed bytes again: $(grep 'put in the merged view again' "$T/iofs.log")"
log "4 restarts: the merged view exact ($(wc -c <"$T/view") bytes, $(grep -c "$CONT" "$T/view") continuations)"
