#!/bin/bash
# Case 5: the only reader of a backed-up stream is killed (kill -9).  The
# XOFF is released, the rank finishes, and a reader that opens afterwards
# can still read the retained window (a suffix of what was written).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
start_daemon -o nospool # the window rules alone (a spool keeps everything)
gated_producer rg 32M 61 "$T/want"
RUN=$GATED_PID
# a reader that reads 64 KiB and then holds the file open without reading
"$PACE" -i "$MNT/rg/0/stdout" -c 64K -x 64K -w 60000 -o /dev/null &
READER=$!
track $READER
wait_for 10 fd_open $READER "$MNT/rg/0/stdout" || fail "reader did not open"
open_gate rg
wait_for 20 info_at_least rg 0 stdout_xoff 1 ||
	fail "the stalled reader never caused an XOFF"
assert_eq "rank still running while held" running "$(info_get "$MNT/rg/0/info" state)"
kill -9 $READER
wait $READER 2>/dev/null
wait_exit 60 $RUN || fail "rank did not finish after its only reader was killed"
wait $RUN || fail "iofs-run status $?"
INFO="$MNT/rg/0/info"
xoff=$(info_get "$INFO" stdout_xoff)
xon=$(info_get "$INFO" stdout_xon)
assert_eq "stdout XOFF == XON" "$xoff" "$xon"
assert_eq "state" exited "$(info_get "$INFO" state)"
total=$(stat -c %s "$T/want")
assert_eq "st_size" "$total" "$(stat -c %s "$MNT/rg/0/stdout")"
timeout 20 cat "$MNT/rg/0/stdout" >"$T/late" || fail "late reader failed"
n=$(stat -c %s "$T/late")
[ "$n" -gt 0 ] || fail "late reader got nothing"
[ "$n" -ge $((1 << 20)) ] || fail "late reader got $n bytes, less than the 1 MiB window"
cmp -s "$T/late" <(tail -c "$n" "$T/want") || fail "late reader's $n bytes are not the stream's last $n bytes"
dropped=$(info_get "$INFO" dropped_bytes)
# the killed reader consumed exactly 64 KiB (read, so not "dropped")
assert_eq "read + dropped + retained == produced" "$total" "$((65536 + dropped + n))"
figures stdout-reader-gone xoff=$xoff xon=$xon retained=$n dropped=$dropped
stop_daemon
