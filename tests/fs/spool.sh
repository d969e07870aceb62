#!/bin/bash
# -o spool=DIR: every stream keeps its whole history on disk.  A late
# reader of a merged view or of a rank that printed far more than the
# window gets every byte; a rank with no reader costs the daemon no memory
# growth; a blocking reader still holds its producer back at the window.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

# through a rank with no reader: the issue's 1 GiB in the normal build,
# 100M under ASan (its shadow memory makes RSS meaningless there anyway)
if is_asan "$IOFS"; then BIG=${IOFS_SPOOL_BIG:-100M}; else BIG=${IOFS_SPOOL_BIG:-1G}; fi
SP="$T/spool"
# an unsafe spool directory is refused at start, with the reason
mkdir -m 0777 "$T/open" && chmod 0777 "$T/open"
timeout 10 "$IOFS" -f --listen "unix:$T/x.sock" -o spool="$T/open" "$MNT" >"$T/bad.out" 2>&1 &&
	fail "a world-writable spool was accepted"
file_has "$T/bad.out" "spool $T/open: mode 0777 is writable by other users" ||
	fail "no reason given: $(cat "$T/bad.out")"
! is_mounted "$MNT" || fail "mounted anyway"
start_daemon -o spool="$SP",spool_max_job=none,spool_max=none
[ "$(stat -c %a "$SP")" = 700 ] || fail "spool mode $(stat -c %a "$SP")"

# 1. 7 ranks x 500,000 bytes of lines, nobody reading; then a late cat of
#    the merged view gets all 3,500,000 bytes, each rank's exactly.
run_job m 7 sh -c "exec $PRODUCE -l -n 500000 -s \$IOFS_RANK"
wait_for 60 exited "$MNT/m/info" || fail "job m did not end"
timeout 30 cat "$MNT/m/stdout" >"$T/merged" || fail "late cat of m/stdout failed"
assert_eq "merged size vs stat" "$(stat -c %s "$MNT/m/stdout")" "$(stat -c %s "$T/merged")"
for r in 0 1 2 3 4 5 6; do
	"$PRODUCE" -l -n 500000 -s $r >"$T/want.$r"
	assert_eq "rank $r file" "$(sha "$T/want.$r")" \
		"$(timeout 10 cat "$MNT/m/$r/stdout" | sha256sum | cut -d' ' -f1)"
done
# every rank's bytes exactly, with the lines the 100 ms partial-line flush
# cut under load ("+" continuations; CI hit one, 2026-12-05)
python3 "$IOFS_SOURCE_DIR/tests/fs/merged_ranks.py" "$T/merged" m 7 "$T/want." >"$T/m.check" ||
	fail "the merged view is not each rank's bytes: $(cat "$T/m.check")"
body=$(sed 's/^\[m,[0-6]\]<stdout>[:+] //' "$T/merged" | wc -c)
cuts=$(grep -c '^\[m,[0-6]\]<stdout>+ ' "$T/merged")
# each rank's last partial line, and each cut line, is ended with "\n"
[ "$body" -ge 3500000 ] && [ "$body" -le $((3500007 + cuts)) ] || fail "merged body $body bytes ($cuts cut lines)"
assert_eq "merged dropped" 0 "$(info_get "$MNT/m/info" merged_dropped_bytes)"
assert_eq "dropped" 0 "$(info_get "$MNT/m/info" dropped_bytes)"
log "late reader of the merged view: $(stat -c %s "$T/merged") bytes, every rank's exact"

# 2. $BIG through a rank with no reader: the daemon's memory stays flat;
#    then a late cat gets exactly those bytes (far more than the window).
hwm0=$(proc_status "$DAEMON_PID" VmHWM)
run_job big 1 "$PRODUCE" -n "$BIG" -s 7
wait_for 300 exited "$MNT/big/info" || fail "job big did not end"
hwm1=$(proc_status "$DAEMON_PID" VmHWM)
size=$(stat -c %s "$MNT/big/0/stdout")
want=$("$PRODUCE" -n "$BIG" -s 7 | sha256sum | cut -d' ' -f1)
got=$(timeout 120 cat "$MNT/big/0/stdout" | sha256sum | cut -d' ' -f1)
assert_eq "late cat of $BIG" "$want" "$got"
assert_eq "late cat of the merged view's size" "$(stat -c %s "$MNT/big/stdout")" \
	"$(timeout 120 cat "$MNT/big/stdout" | wc -c)"
t0=$EPOCHREALTIME
timeout 120 dd if="$MNT/big/0/stdout" of=/dev/null bs=1M status=none || fail "late dd"
late_mbs=$(awk -v n="$size" -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", n / (b - a) / 1e6 }')
hwm2=$(proc_status "$DAEMON_PID" VmHWM)
log "$size bytes through a rank: VmHWM $hwm0 -> $hwm1 kB, after the late cats $hwm2 kB; late dd bs=1M from the spool $late_mbs MB/s"
figures spool-rss bytes=$size hwm0_kb=$hwm0 hwm1_kb=$hwm1 hwm2_kb=$hwm2 late_dd_mbs=$late_mbs
if ! is_asan "$IOFS"; then
	[ $((hwm2 - hwm0)) -le 16384 ] || fail "VmHWM grew by $((hwm2 - hwm0)) kB (> 16 MiB)"
fi
[ "$(find "$SP" -name 0.stdout -size +1M | wc -l)" -ge 1 ] || fail "no spool file of the big rank"

# 3. Back-pressure stays exact: a blocking reader that does not read holds
#    its producer at the window, spool or not; reading releases it.
gated_producer bp 8M 5 "$T/want.bp"
exec 7<"$MNT/bp/0/stdout" # an open reader that reads nothing yet
open_gate bp
wait_for 30 info_at_least bp 0 stdout_xoff 1 || fail "no XOFF with a stalled reader"
held=$(info_get "$MNT/bp/0/info" stdout_bytes)
[ "$held" -lt $((4 << 20)) ] || fail "producer not held: $held bytes in"
timeout 60 cat <&7 >"$T/got.bp" || fail "reading the held stream failed"
exec 7<&-
assert_eq "held stream" "$(sha "$T/want.bp")" "$(sha "$T/got.bp")"
wait_for 10 exited "$MNT/bp/info" || fail "job bp did not end"
assert_eq "XOFF == XON" "$(info_get "$MNT/bp/0/info" stdout_xoff)" \
	"$(info_get "$MNT/bp/0/info" stdout_xon)"
log "stalled reader: producer held at $held bytes, then every byte"

# 3b. tail -n reads backwards from the end, a block at a time, and takes a
#     short read for the end of the file: a read that starts in the stored
#     history and ends in the in-memory window must be whole (found by
#     hand: `tail -n 200000` of this job printed 200896 lines from 199105).
run_job tn 1 seq 1 400000
wait_for 30 exited "$MNT/tn/info" || fail "job tn did not end"
seq 200001 400000 >"$T/tn.want"
timeout 20 tail -n 200000 "$MNT/tn/0/stdout" >"$T/tn.got" || fail "tail -n of tn/0/stdout"
assert_eq "tail -n 200000 of the rank" "$(sha "$T/tn.want")" "$(sha "$T/tn.got")"
sed 's/^/[tn,0]<stdout>: /' "$T/tn.want" >"$T/tnm.want"
timeout 20 tail -n 200000 "$MNT/tn/stdout" >"$T/tnm.got" || fail "tail -n of tn/stdout"
assert_eq "tail -n 200000 of the merged view" "$(sha "$T/tnm.want")" "$(sha "$T/tnm.got")"
python3 - "$MNT/tn/0/stdout" <<'PY' || fail "a read of tn/0/stdout came back short"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
for off in range(0, size, 65536 - 123):
    want = min(65536, size - off)
    got = len(os.pread(fd, 65536, off))
    if got != want:
        sys.exit("pread(65536, %d) gave %d of %d" % (off, got, want))
PY
log "tail -n 200000 of a 2.7 MB rank and of its merged view: the right lines; every pread whole"

# 4. Removing a job (rmdir) frees its spool files.
n=$(ls "$SP" | wc -l)
rmdir "$MNT/m" || fail "rmdir m"
wait_for 10 bash -c "[ \$(ls '$SP' | wc -l) -lt $n ]" || fail "spool of m left behind"
stop_daemon
log "ok"
