#!/bin/bash
# stdin through PMIx_IOF_push: to one rank (MNT/ns/1/stdin) and to all ranks
# (MNT/ns/stdin), byte-exact, with EOF when the writer closes.  Rank 1 does
# not read until the gate opens, so the server holds the pushes back: the
# in-flight bytes pass 1 MiB and iofs raises that rank's stdin XOFF (and
# releases it: paired).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/pmix/common.sh"

cat >"$T/rank.sh" <<RANK
if [ "\$PMIX_RANK" = 1 ]; then $(gate go); fi
exec cat
RANK
head -c $((3 * 1024 * 1024)) /dev/urandom >"$T/a"
head -c $((200 * 1024 + 7)) /dev/urandom >"$T/b"

start_host
start_pmix_daemon
host_cmd "job ns2:4:sh $T/rank.sh"
wait_for 20 test -e "$MNT/ns2/3/stdin" || fail "job ns2 did not appear"
for r in 0 1 2 3; do
	start_reader "$MNT/ns2/$r/stdout" "$T/got.$r"
done

cat "$T/a" >"$MNT/ns2/1/stdin" &
W=$!
track $W
wait_for 30 info_at_least ns2 1 stdin_xoff 1 ||
	fail "no stdin XOFF while rank 1 does not read ($(info_get "$MNT/ns2/1/info" stdin_bytes) bytes in)"
touch "$T/go"
wait_for 60 finished $W || fail "write to rank 1 did not complete"
wait $W || fail "write to rank 1 failed"
# rank 1 got EOF (its last writer closed): its cat ends
got_all() { [ "$(stat -c %s "$T/got.1")" = "$(stat -c %s "$T/a")" ]; }
wait_for 30 got_all || fail "rank 1 stdout has $(stat -c %s "$T/got.1") bytes, want $(stat -c %s "$T/a")"

cat "$T/b" >"$MNT/ns2/stdin" || fail "write to the job's stdin failed"
wait_for 30 job_done ns2 || fail "ranks did not end after stdin EOF"
for r in 0 1 2 3; do
	wait_for 10 state_is ns2 $r exited || fail "rank $r not exited"
done

assert_eq "rank 1 got a" "$(sha "$T/a")" "$(sha "$T/got.1")"
for r in 0 2 3; do
	assert_eq "rank $r got b" "$(sha "$T/b")" "$(sha "$T/got.$r")"
done
x=$(info_get "$MNT/ns2/1/info" stdin_xoff)
y=$(info_get "$MNT/ns2/1/info" stdin_xon)
assert_eq "rank 1 stdin xoff/xon paired" "$x" "$y"
assert_eq "rank 1 stdin_bytes" "$(stat -c %s "$T/a")" "$(info_get "$MNT/ns2/1/info" stdin_bytes)"
stop_daemon
log "ok: 3 MiB to rank 1 (stdin xoff=$x xon=$y), $(stat -c %s "$T/b") bytes to ranks 0,2,3"
