#!/bin/bash
# Case 2 (PRRTE's XON/XOFF change): a rank stops reading stdin and exits while its sink is
# backed up.  Every XOFF is released (counters pair), the blocked writer is
# answered (EPIPE), and two further jobs on the same daemon each take their
# full 256 KiB of stdin byte-identically.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
"$PRODUCE" -n 4M -s 21 >"$T/big"
start_daemon

# reads 64 KiB slowly, then stops reading for 1.5 s, then exits
"$IOFS_RUN" --nspace td --rank 0 -- "$PACE" -c 4K -d 2 -x 64K -w 1500 -o "$T/td.got" &
RUN=$!
track $RUN
wait_for 10 test -e "$MNT/td/0/stdin" || fail "stdin did not appear"
timeout 60 cat "$T/big" >"$MNT/td/0/stdin" 2>"$T/cat.err" &
CAT=$!
track $CAT
wait_exit 30 $RUN || fail "rank did not exit"
wait $RUN
wait_exit 10 $CAT || fail "blocked writer was not answered after the rank exited"
wait $CAT
cat_rc=$?
[ $cat_rc -ne 0 ] || fail "writer of 4 MiB into a rank that read 64 KiB succeeded"
grep -q "Broken pipe" "$T/cat.err" || fail "writer error was not EPIPE: $(cat "$T/cat.err")"
INFO="$MNT/td/0/info"
xoff=$(info_get "$INFO" stdin_xoff)
xon=$(info_get "$INFO" stdin_xon)
[ "${xoff:-0}" -gt 0 ] || fail "flow control never engaged (stdin_xoff=$xoff)"
assert_eq "stdin XOFF == XON after teardown" "$xoff" "$xon"
assert_eq "rank state" exited "$(info_get "$INFO" state)"
assert_eq "rank read" 65536 "$(stat -c %s "$T/td.got")"
cmp -s "$T/td.got" <(head -c 65536 "$T/big") || fail "the 64 KiB the rank read are not the first 64 KiB written"

# 1 MiB writes (dd bs=1M) into a rank that never reads: the daemon's stdin
# credit bounds what is accepted to one write in flight plus the credit;
# without it the forwarder's eager socket reads let all 64 MiB through.
"$IOFS_RUN" --nspace nr --rank 0 -- sleep 600 &
NR=$!
track $NR
wait_for 10 test -e "$MNT/nr/0/stdin" || fail "nr: stdin did not appear"
dd if=/dev/zero of="$MNT/nr/0/stdin" bs=1M count=64 status=none 2>/dev/null &
DD=$!
track $DD
wait_for 10 info_at_least nr 0 stdin_xoff 1 ||
	fail "nr: the writer never parked"
# settle: the count must stop moving while the rank does not read
prev=-1
for _ in $(seq 20); do
	cur=$(info_get "$MNT/nr/0/info" stdin_bytes)
	[ "$cur" = "$prev" ] && break
	prev=$cur
	sleep 0.2
done
[ "$cur" = "$prev" ] || fail "nr: stdin kept being accepted ($cur bytes) for a rank that never reads"
[ "$cur" -le $((2 << 20)) ] || fail "nr: $cur bytes accepted for a rank that never reads (bound: 2 MiB)"
nr_rss=$(proc_status $NR VmRSS)
[ "$nr_rss" -lt $((16 * 1024)) ] || fail "nr: iofs-run grew to ${nr_rss} kB holding stdin"
kill $DD
wait $DD 2>/dev/null
kill $NR
wait_exit 10 $NR || fail "nr: iofs-run did not end on SIGTERM"
wait $NR 2>/dev/null
x1=$(info_get "$MNT/nr/0/info" stdin_xoff)
x2=$(info_get "$MNT/nr/0/info" stdin_xon)
assert_eq "nr: stdin XOFF == XON after the rank ended" "$x1" "$x2"

for j in 1 2; do
	"$PRODUCE" -n 256K -s $((30 + j)) >"$T/in$j"
	"$IOFS_RUN" --nspace after$j --rank 0 -- "$PACE" -c 8K -d 1 -o "$T/got$j" &
	R=$!
	track $R
	wait_for 10 test -e "$MNT/after$j/0/stdin" || fail "job after$j did not appear"
	timeout 60 cat "$T/in$j" >"$MNT/after$j/0/stdin" || fail "job after$j: writer failed"
	wait_exit 30 $R || fail "job after$j: rank did not exit"
	wait $R || fail "job after$j: iofs-run status $?"
	assert_eq "job after$j sha256" "$(sha "$T/in$j")" "$(sha "$T/got$j")"
	x1=$(info_get "$MNT/after$j/0/info" stdin_xoff)
	x2=$(info_get "$MNT/after$j/0/info" stdin_xon)
	assert_eq "job after$j XOFF == XON" "$x1" "$x2"
done
figures stdin-teardown writer_rc=$cat_rc xoff=$xoff xon=$xon after_jobs=2/2 \
	never_reading_accepted=$cur never_reading_forwarder_rss_kb=$nr_rss \
	peak_rss_kb=$(proc_status $DAEMON_PID VmHWM)
stop_daemon
