#!/bin/bash
# -o spool=DIR on a full filesystem (a 1 MiB tmpfs): the producer is held
# back (XOFF), not lost; when space returns (remount bigger) it resumes and
# a late reader gets every byte.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

SFS="$T/sfs"
mkdir -p "$SFS"
mount -t tmpfs -o size=1m,mode=0700 iofs-test-spool "$SFS" || fail "cannot mount a tmpfs (needs root)"
trap 'rc=$?; umount -l "$SFS" 2>/dev/null; (exit $rc); cleanup' EXIT
start_daemon -o spool="$SFS",spool_max=none # ENOSPC, not the cap

"$PRODUCE" -l -n 4M -s 11 >"$T/want"
run_job e 1 "$PRODUCE" -l -n 4M -s 11
wait_for 30 file_has "$T/iofs.log" "holding its producer back" || fail "no hold logged"
wait_for 10 info_at_least e 0 stdout_xoff 1 || fail "no XOFF on a full spool"
# held: the job cannot finish while the spool is full
n1=$(info_get "$MNT/e/0/info" stdout_bytes)
[ "$n1" -lt $((4 << 20)) ] || fail "producer not held: $n1 bytes in"
[ "$(job_state e)" = running ] || fail "job ended on a full spool"
log "full spool: producer held at $n1 bytes ($(df --output=used -k "$SFS" | tail -1) kB used)"
mount -o remount,size=64m "$SFS" || fail "remount"
wait_for 60 exited "$MNT/e/info" || fail "job did not resume and end"
wait_for 10 file_has "$T/iofs.log" "spool write resumed" || fail "no resume logged"
assert_eq "late cat of the rank" "$(sha "$T/want")" \
	"$(timeout 20 cat "$MNT/e/0/stdout" | sha256sum | cut -d' ' -f1)"
timeout 20 cat "$MNT/e/stdout" | sed 's/^\[e,0\]<stdout>: //' >"$T/merged"
assert_eq "late cat of the merged view" "$(awk 1 "$T/want" | sha256sum | cut -d' ' -f1)" "$(sha "$T/merged")"
assert_eq "dropped" 0 "$(info_get "$MNT/e/info" dropped_bytes)"
assert_eq "merged dropped" 0 "$(info_get "$MNT/e/info" merged_dropped_bytes)"
assert_eq "XOFF == XON" "$(info_get "$MNT/e/0/info" stdout_xoff)" "$(info_get "$MNT/e/0/info" stdout_xon)"
log "resumed: $(info_get "$MNT/e/0/info" stdout_xoff) XOFF, every byte"
stop_daemon
log "ok"
