#!/bin/bash
# -o spool=DIR on a full filesystem (a 1 MiB tmpfs): the producer is held
# back (XOFF), not lost; when space returns (remount bigger) it resumes and
# a late reader gets every byte.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

SFS="$T/sfs"
mkdir -p "$SFS"
mount -t tmpfs -o size=1m,mode=0700 iofs-test-spool "$SFS" || fail "cannot mount a tmpfs (needs root)"
SFS2="$T/sfs2"
trap 'rc=$?; umount -l "$SFS" 2>/dev/null; umount -l "$SFS2" 2>/dev/null; (exit $rc); cleanup' EXIT
start_daemon -o spool="$SFS",spool_max=none # ENOSPC, not the cap

"$PRODUCE" -l -n 4M -s 11 >"$T/want"
run_job e 1 "$PRODUCE" -l -n 4M -s 11
wait_for 30 file_has "$T/iofs.log" "holding its producer back" || fail "no hold logged"
wait_for 10 info_at_least e 0 stdout_xoff 1 || fail "no XOFF on a full spool"
# held: the job cannot finish while the spool is full
n1=$(info_get "$MNT/e/0/info" stdout_bytes)
[ "$n1" -lt $((4 << 20)) ] || fail "producer not held: $n1 bytes in"
[ "$(job_state e)" = running ] || fail "job ended on a full spool"
grep -qx "note: output was held back: the spool: No space left on device" "$MNT/e/info" ||
	fail "e: the job's users are not told why: $(grep note "$MNT/e/info")"
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

# A full spool first takes the history of the oldest complete job (a
# 1 MiB tmpfs: c1 fills more than half of it, c2 needs as much again;
# the merged views take no second copy of the ranks' bytes):
# c2 is not held back and keeps every byte, c1 keeps its window.
mkdir -p "$SFS2"
mount -t tmpfs -o size=1m,mode=0700 iofs-test-spool2 "$SFS2" || fail "cannot mount a second tmpfs"
W=65536
# (spool_keep_cache: no drop-behind; tmpfs has none anyway, the option
# must parse and change nothing here)
start_daemon -o spool="$SFS2",spool_max=none,window=$W,spool_keep_cache
run_job c1 1 "$PRODUCE" -n 600K -s 12
wait_for 30 exited "$MNT/c1/info" || fail "job c1 did not end"
run_job c2 1 "$PRODUCE" -n 600K -s 13
wait_for 30 exited "$MNT/c2/info" || fail "job c2 did not end (held on a full spool?)"
file_has "$T/iofs.log" "spool full: job c1 gave up" || fail "no eviction logged"
assert_eq "c2 not held" 0 "$(info_get "$MNT/c2/0/info" stdout_xoff)"
assert_eq "c2 dropped" 0 "$(info_get "$MNT/c2/info" dropped_bytes)"
assert_eq "c2 every byte" "$(sha <("$PRODUCE" -n 600K -s 13))" \
	"$(timeout 20 cat "$MNT/c2/0/stdout" | sha256sum | cut -d' ' -f1)"
assert_eq "c1 keeps its window" $(((600 << 10) - W)) "$(info_get "$MNT/c1/info" dropped_bytes)"
assert_eq "c1's window" "$(sha <("$PRODUCE" -n 600K -s 12 | tail -c $W))" \
	"$(timeout 20 cat "$MNT/c1/0/stdout" | sha256sum | cut -d' ' -f1)"
log "full spool: c1's history evicted to make room, c2 never held, every byte"
stop_daemon
log "ok"
