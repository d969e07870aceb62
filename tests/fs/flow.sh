#!/bin/bash
# Readers and the window: a slow reader holds the producer back (XOFF/XON
# counted and paired, every byte once, sha256); with no reader attached the
# oldest bytes are discarded (counted) and a late reader gets the retained
# suffix: no error, no garbage, no repeat (the skew rule).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

start_daemon -o window=262144,nospool # the window rules alone (a spool keeps everything)
"$PRODUCE" -n 4M -s 5 >"$T/expect"

# slow reader: 2 MiB/s through the mount, opened before the first byte
run_job slow 1 sh -c "$(gate go); $PRODUCE -n 4M -s 5"
"$PACE" -r 2097152 -i "$MNT/slow/0/stdout" -o "$T/slow.out" &
P=$!
track $P
await_reader $P "$MNT/slow/0/stdout"
touch "$T/go"
wait_for 30 finished $P || fail "slow reader did not finish"
wait_for 10 exited "$MNT/slow/info" || fail "slow job did not end"
assert_eq "slow reader bytes" 4194304 "$(stat -c %s "$T/slow.out")"
assert_eq "slow reader sha256" "$(sha "$T/expect")" "$(sha "$T/slow.out")"
I=$MNT/slow/0/info
xoff=$(info_get "$I" stdout_xoff)
xon=$(info_get "$I" stdout_xon)
log "slow reader: stdout_xoff=$xoff stdout_xon=$xon dropped=$(info_get "$I" dropped_bytes)"
[ "$xoff" -ge 1 ] || fail "the producer was never held back"
assert_eq "xoff == xon" "$xoff" "$xon"
assert_eq "nothing dropped with a reader" 0 "$(info_get "$I" dropped_bytes)"

# no reader: discarded beyond the window, the late reader gets a suffix
run_job nor 1 "$PRODUCE" -n 4M -s 5
wait_for 20 exited "$MNT/nor/info" || fail "readerless job did not end"
I=$MNT/nor/0/info
dropped=$(info_get "$I" dropped_bytes)
log "no reader: dropped_bytes=$dropped"
[ "$dropped" -gt 0 ] || fail "nothing was discarded without a reader"
assert_eq "st_size counts every byte" 4194304 "$(stat -c %s "$MNT/nor/0/stdout")"
timeout 10 cat "$MNT/nor/0/stdout" >"$T/late.out" || fail "late cat failed"
assert_eq "late reader length" $((4194304 - dropped)) "$(stat -c %s "$T/late.out")"
assert_eq "late reader gets the newest bytes" "$(tail -c $((4194304 - dropped)) "$T/expect" | sha256sum | cut -d' ' -f1)" "$(sha "$T/late.out")"
# a read at a discarded offset returns retained bytes, not an error
timeout 10 dd if="$MNT/nor/0/stdout" of="$T/dd.out" bs=4096 skip=1 count=1 status=none || fail "dd at a discarded offset failed"
assert_eq "dd at a discarded offset" 4096 "$(stat -c %s "$T/dd.out")"
# the merged view loses bytes too without a reader: the job info says how
# many (merged_dropped_bytes), and a late cat of it gets exactly the rest
J=$MNT/nor/info
mdropped=$(info_get "$J" merged_dropped_bytes)
log "no reader: merged_dropped_bytes=$mdropped"
[ -n "$mdropped" ] || fail "job info lacks merged_dropped_bytes"
[ "$mdropped" -gt 0 ] || fail "merged view loss not counted"
msize=$(stat -c %s "$MNT/nor/stdout")
timeout 10 cat "$MNT/nor/stdout" >"$T/mlate.out" || fail "late cat of the merged view failed"
assert_eq "late merged reader length" $((msize - mdropped)) "$(stat -c %s "$T/mlate.out")"
[ -z "$(info_get "$MNT/nor/0/info" merged_dropped_bytes)" ] || fail "rank info has merged_dropped_bytes"
stop_daemon
log "ok"
