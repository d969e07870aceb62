#!/bin/bash
# Case 1 (PRRTE's XON/XOFF change): 1 MiB of random bytes written with `cat file > stdin`
# into a rank that reads 2 KiB every 3 ms.  Expect XOFF > 0, XOFF == XON,
# every byte delivered once (sha256 + count), and the writer slowed to the
# reader's pace rather than buffered.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
SIZE=${FLOW_STDIN_BYTES:-1048576}
"$PRODUCE" -n "$SIZE" -s 11 >"$T/in"
start_daemon

"$IOFS_RUN" --nspace fc1 --rank 0 -- "$PACE" -c 2K -d 3 -o "$T/got" -T "$T/pace.t" &
RUN=$!
track $RUN
wait_for 10 test -e "$MNT/fc1/0/stdin" || fail "rank 0 stdin did not appear"

t0=$(date +%s.%N)
timeout 120 cat "$T/in" >"$MNT/fc1/0/stdin" || fail "writer failed (rc $?)"
t1=$(date +%s.%N)
wait_exit 60 $RUN || fail "rank did not exit after EOF"
wait $RUN || fail "iofs-run exit status $?"

got=$(stat -c %s "$T/got")
assert_eq "bytes delivered" "$SIZE" "$got"
assert_eq "sha256" "$(sha "$T/in")" "$(sha "$T/got")"
INFO="$MNT/fc1/0/info"
assert_eq "path (lib.sh RUN_PATH)" "$RUN_PATH" "$(info_get "$INFO" path)"
xoff=$(info_get "$INFO" stdin_xoff)
xon=$(info_get "$INFO" stdin_xon)
bytes=$(info_get "$INFO" stdin_bytes)
[ "${xoff:-0}" -gt 0 ] || fail "flow control never engaged (stdin_xoff=$xoff): the case proved nothing"
assert_eq "stdin XOFF == XON" "$xoff" "$xon"
assert_eq "info stdin_bytes" "$SIZE" "$bytes"
reader_s=$(awk '{print $2}' "$T/pace.t")
[ -n "$reader_s" ] || fail "no timing from the reading rank"
writer_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
# Unthrottled, cat would finish in milliseconds.  Throttled, it ends when
# the reader has consumed all but what the pipe + forwarder queue + socket
# hold; require at least 30% of the reader's own time.
awk -v w="$writer_s" -v r="$reader_s" 'BEGIN { exit !(w >= 0.3 * r) }' ||
	fail "writer took ${writer_s}s vs reader ${reader_s}s: it was buffered, not slowed"
figures stdin-throughput bytes=$got sha256_match=yes xoff=$xoff xon=$xon \
	writer_s=$writer_s reader_s=$reader_s peak_rss_kb=$(proc_status $DAEMON_PID VmHWM)
stop_daemon
