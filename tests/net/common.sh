# Helpers for the net suite, on top of tests/lib.sh.  Source after it.
[ -x "$IOFS" ] || fail "no daemon at $IOFS"
[ -x "$IOFS_RUN" ] || fail "no forwarder at $IOFS_RUN"

# gate NAME: rank-side shell snippet waiting for "touch $T/NAME" (<= 30 s)
gate() { echo "i=0; while [ ! -e $T/$1 ] && [ \$i -lt 1500 ]; do sleep 0.02; i=\$((i+1)); done"; }
finished() { ! kill -0 "$1" 2>/dev/null; }
file_has() { grep -q -- "$2" "$1" 2>/dev/null; }
rank_state() { info_get "$MNT/$1/$2/info" state; }
job_state() { info_get "$MNT/$1/info" state; }
job_done() { [ -f "$MNT/$1/info" ] && [ "$(job_state "$1")" != running ]; }
# rc_of PID: exit status of a FINISHED background child (wait_for finished
# first: \$(...) runs in a subshell, which can only reap finished jobs)
rc_of() {
	local rc=0
	wait "$1" || rc=$?
	echo $rc
}
# daemon_alive: the daemon runs and its mount answers
daemon_alive() { kill -0 "$DAEMON_PID" 2>/dev/null && ls "$MNT" >/dev/null; }
# size_is FILE N: st_size of FILE is N (for wait_for)
size_is() { [ "$(stat -c %s "$1" 2>/dev/null)" = "$2" ]; }
# state_is NSPACE RANK STATE (for wait_for)
state_is() { [ "$(rank_state "$1" "$2")" = "$3" ]; }
