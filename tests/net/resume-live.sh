#!/bin/bash
# Resume of a Unix-socket link broken while the daemon lives, on both paths
# (net-resume-live on the socket path, net-resume-live-handover): the
# forwarder's socket is shut down under it (gdb calls shutdown(2) in
# iofs-run) 5 times while its rank streams 48 MiB. Each time both ends see
# the link end; the daemon detaches the ranks for resume_window, the
# forwarder reconnects and resumes. Checks: a reader following the stream
# gets every byte once (sha256, count); the forwarder prints nothing on
# its own terminal (no fallback); the rank stays on its path (a hand-over
# link is handed over again: the daemon, which still reads the pipes,
# keeps one copy of each, so it holds exactly three pipes for the rank);
# info counts the reconnects; XOFF and XON pair.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
command -v gdb >/dev/null || fail "gdb is needed (scripts/setup installs it)"
export IOFS_RECONNECT_TIMEOUT=60
BREAKS=5

start_daemon -o resume_window=60
daemon_pipes() { find /proc/"$DAEMON_PID"/fd -lname 'pipe:*' 2>/dev/null | wc -l; }
pipes0=$(daemon_pipes)

PART=$((8 << 20))
head -c $((6 * PART)) /dev/urandom >"$T/blob"
# the rank prints a part, waits for gate i, prints the next part, ...
script=""
for ((i = 0; i < 6; i++)); do
	script+="tail -c +$((i * PART + 1)) $T/blob | head -c $PART; "
	[ $i -lt $BREAKS ] && script+="$(gate "g$i"); "
done
"$IOFS_RUN" -v --nspace live -- sh -c "$script" >"$T/live.out" 2>"$T/live.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/live/0/stdout" || fail "job did not appear"
track "$(info_get "$MNT/live/0/info" pid)"
start_reader "$MNT/live/0/stdout" "$T/got"
READER=$READER_PID

# break_link: shut down every Unix socket iofs-run holds (its link)
break_link() {
	local fds=() fd
	for fd in /proc/"$JOB"/fd/*; do
		case $(readlink "$fd") in socket:*) fds+=("${fd##*/}") ;; esac
	done
	[ ${#fds[@]} -gt 0 ] || fail "iofs-run has no socket"
	local cmds=()
	for fd in "${fds[@]}"; do cmds+=(-ex "call (int)shutdown($fd, 2)"); done
	timeout 60 gdb -q -p "$JOB" -batch -nx "${cmds[@]}" >>"$T/gdb.log" 2>&1 ||
		fail "gdb: $(tail -5 "$T/gdb.log")"
}

for ((i = 0; i < BREAKS; i++)); do
	want=$(((i + 1) * PART))
	wait_for 60 size_is "$T/got" $want || fail "break $i: reader has $(stat -c %s "$T/got") of $want"
	break_link
	wait_for 30 grep -q "resumed (resume $((i + 1)), by conn" "$T/iofs.log" ||
		fail "break $i: no resume in the daemon's log: $(tail -5 "$T/iofs.log")"
	assert_eq "break $i: path" "$RUN_PATH" "$(info_get "$MNT/live/0/info" path)"
	if [ "$RUN_PATH" = handover ]; then
		wait_for 10 bash -c "[ \$(find /proc/$DAEMON_PID/fd -lname 'pipe:*' | wc -l) = $((pipes0 + 3)) ]" ||
			fail "break $i: the daemon holds $(daemon_pipes) pipes, want $((pipes0 + 3))"
	fi
	touch "$T/g$i"
done
wait_for 60 finished $JOB || fail "the job did not end"
assert_eq "iofs-run status" 0 "$(rc_of $JOB)"
wait_for 20 finished $READER || fail "the reader got no EOF"
assert_eq "bytes" $((6 * PART)) "$(stat -c %s "$T/got")"
assert_eq "sha256" "$(sha "$T/blob")" "$(sha "$T/got")"
[ ! -s "$T/live.out" ] || fail "the forwarder printed on its terminal (fallback): $(head -c 200 "$T/live.out")"
! grep -q "output continues on\|giving up" "$T/live.err" ||
	fail "the forwarder fell back: $(cat "$T/live.err")"
assert_eq "reconnects (info)" $BREAKS "$(info_get "$MNT/live/0/info" reconnects)"
xoff=$(info_get "$MNT/live/0/info" stdout_xoff)
xon=$(info_get "$MNT/live/0/info" stdout_xon)
[ -n "$xoff" ] && [ "$xoff" = "$xon" ] || fail "XOFF $xoff != XON $xon"
daemon_alive || fail "daemon died"
stop_daemon
log "ok ($RUN_PATH): $BREAKS breaks, XOFF/XON $xoff/$xon"
