#!/bin/bash
# Flow-control status through PMIx: a reader far slower than the producer.
# libpmix gives a tool no way to stop the producer, so the router XOFFs
# (counted, paired with XON, logged once) and retains the bytes beyond the
# 1 MiB window for the blocking reader: nothing dropped, bytes exact.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/pmix/common.sh"
[ -x "$PACE" ] || fail "no paced reader at $PACE"

SIZE=$((8 * 1024 * 1024))
head -c $SIZE /dev/urandom >"$T/data"
cat >"$T/rank.sh" <<RANK
$(gate go)
exec cat $T/data
RANK

start_host
start_pmix_daemon
host_cmd "job slow:1:sh $T/rank.sh"
wait_for 20 test -e "$MNT/slow/0/stdout" || fail "job slow did not appear"
# 2 MB/s: 4 s for what the rank writes in a fraction of that
"$PACE" -r 2000000 -c 65536 -i "$MNT/slow/0/stdout" -o "$T/got" &
R=$!
track $R
wait_for 10 reader_open $R "$MNT/slow/0/stdout" || fail "paced reader did not open"
ls "$MNT/slow" >/dev/null
touch "$T/go"
wait_for 30 state_is slow 0 exited || fail "rank did not exit"
at_exit=$(stat -c %s "$T/got")
wait_for 60 finished $R || fail "paced reader did not finish"
wait $R || fail "paced reader failed"

assert_eq "bytes" $SIZE "$(stat -c %s "$T/got")"
assert_eq "sha" "$(sha "$T/data")" "$(sha "$T/got")"
assert_eq "dropped_bytes" 0 "$(info_get "$MNT/slow/0/info" dropped_bytes)"
x=$(info_get "$MNT/slow/0/info" stdout_xoff)
y=$(info_get "$MNT/slow/0/info" stdout_xon)
[ "$x" -ge 1 ] || fail "no stdout XOFF although the reader lagged"
assert_eq "xoff/xon paired" "$x" "$y"
grep -q "no output flow control" "$T/iofs.log" || fail "no flow-control notice in the log"
assert_eq "notices" 1 "$(grep -c "no output flow control" "$T/iofs.log")"
stop_daemon
log "ok: $SIZE bytes exact through a 2 MB/s reader; rank exited with $at_exit read (PMIx did not wait); xoff=$x xon=$y"
