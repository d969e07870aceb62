#!/bin/bash
# Case 6: two readers at different speeds on one stream.  Each sees every
# byte once; the slow one holds the producer back (the documented policy:
# every blocking reader is a consumer), the fast one is never corrupted.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
SIZE=$((16 << 20))
start_daemon
gated_producer tr 16M 71 "$T/want"
RUN=$GATED_PID
"$PACE" -i "$MNT/tr/0/stdout" -c 64K -r 4M -o "$T/slow" -t 2>"$T/slow.t" &
SLOWR=$!
track $SLOWR
"$PACE" -i "$MNT/tr/0/stdout" -c 1M -d 0 -o "$T/fast" -t 2>"$T/fast.t" &
FASTR=$!
track $FASTR
wait_for 10 fd_open $SLOWR "$MNT/tr/0/stdout" || fail "slow reader did not open"
wait_for 10 fd_open $FASTR "$MNT/tr/0/stdout" || fail "fast reader did not open"
open_gate tr
wait_exit 60 $FASTR || fail "fast reader did not finish"
wait $FASTR || fail "fast reader failed"
wait_exit 60 $SLOWR || fail "slow reader did not finish"
wait $SLOWR || fail "slow reader failed"
wait_exit 30 $RUN
wait $RUN || fail "iofs-run status $?"
want=$(sha "$T/want")
assert_eq "fast reader sha256" "$want" "$(sha "$T/fast")"
assert_eq "slow reader sha256" "$want" "$(sha "$T/slow")"
INFO="$MNT/tr/0/info"
xoff=$(info_get "$INFO" stdout_xoff)
xon=$(info_get "$INFO" stdout_xon)
[ "${xoff:-0}" -gt 0 ] || fail "the slow reader never held the producer back"
assert_eq "XOFF == XON" "$xoff" "$xon"
fast_s=$(awk '{print $2}' "$T/fast.t")
slow_s=$(awk '{print $2}' "$T/slow.t")
[ -n "$fast_s" ] && [ -n "$slow_s" ] || fail "no timing from the readers"
# The fast reader can run ahead of the slow one by about the window only.
awk -v f="$fast_s" -v s="$slow_s" 'BEGIN { exit !(f >= 0.5 * s) }' ||
	fail "fast reader done in ${fast_s}s, slow in ${slow_s}s: the producer was not held back"
figures two-readers xoff=$xoff xon=$xon fast_s=$fast_s slow_s=$slow_s
stop_daemon
