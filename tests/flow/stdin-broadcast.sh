#!/bin/bash
# Case 3: MNT/<nspace>/stdin into 4 ranks reading at different rates: every
# rank gets every byte once, in order; the writer runs at the slowest rank's
# pace; XOFF == XON per rank (oscillation is expected and fine).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
SIZE=$((4 << 20))
"$PRODUCE" -n $SIZE -s 41 >"$T/in"
start_daemon

# rank r reads 4(r+1) KiB every 2 ms: rank 0 is the slowest (~2 MB/s);
# 4 MiB is well beyond what pipes, forwarder queues and sockets hold
"$IOFS_RUN" --nspace bc -n 4 -- sh -c \
	'exec "$0" -c $(( (IOFS_RANK + 1) * 4096 )) -d 2 -o "$1.$IOFS_RANK" -t 2>"$1.$IOFS_RANK.t"' \
	"$PACE" "$T/got" &
RUN=$!
track $RUN
wait_for 10 test -e "$MNT/bc/3/stdin" || fail "ranks did not appear"
t0=$(date +%s.%N)
timeout 120 cat "$T/in" >"$MNT/bc/stdin" || fail "broadcast writer failed"
t1=$(date +%s.%N)
wait_exit 60 $RUN || fail "ranks did not exit after EOF"
wait $RUN || fail "iofs-run status $?"

want=$(sha "$T/in")
tot_xoff=0
for r in 0 1 2 3; do
	assert_eq "rank $r bytes" $SIZE "$(stat -c %s "$T/got.$r")"
	assert_eq "rank $r sha256" "$want" "$(sha "$T/got.$r")"
	x1=$(info_get "$MNT/bc/$r/info" stdin_xoff)
	x2=$(info_get "$MNT/bc/$r/info" stdin_xon)
	assert_eq "rank $r XOFF == XON" "$x1" "$x2"
	tot_xoff=$((tot_xoff + x1))
done
jx1=$(info_get "$MNT/bc/info" stdin_xoff)
jx2=$(info_get "$MNT/bc/info" stdin_xon)
assert_eq "job XOFF == XON" "$jx1" "$jx2"
assert_eq "job XOFF is the sum of the ranks'" "$tot_xoff" "$jx1"
[ "$(info_get "$MNT/bc/0/info" stdin_xoff)" -gt 0 ] || fail "the slowest rank never asserted XOFF"
slow_s=$(awk '{print $2}' "$T/got.0.t")
[ -n "$slow_s" ] || fail "no timing from the slowest rank"
writer_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
awk -v w="$writer_s" -v r="$slow_s" 'BEGIN { exit !(w >= 0.3 * r) }' ||
	fail "writer took ${writer_s}s vs slowest rank ${slow_s}s: not held to the slowest pace"
figures stdin-broadcast bytes=$SIZE ranks=4 xoff=$jx1 xon=$jx2 writer_s=$writer_s slowest_s=$slow_s
stop_daemon
