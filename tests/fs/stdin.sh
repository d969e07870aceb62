#!/bin/bash
# stdin files: one write, several writes through a held fd (FIFO EOF rule),
# EPIPE after exit, reading stdin (EOF), cp -r and tar of a job,
# wrong-direction opens, tee to several ranks, broadcast,
# and back-pressure: a slow rank makes the writer take proportionally long,
# and every byte arrives once (sha256), XOFF/XON counted and paired.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

start_daemon
run_job in 2 sh -c "cat > $T/in.\$IOFS_RANK"

echo hello >"$MNT/in/0/stdin" || fail "write to rank 0 stdin"
wait_for 10 exited "$MNT/in/0/info" ||
	fail "rank 0 did not get EOF when its only writer closed"
assert_eq "rank 0 stdin" hello "$(cat "$T/in.0")"
assert_eq "stdin_bytes" 6 "$(info_get "$MNT/in/0/info" stdin_bytes)"

# writing to an exited rank: EPIPE
if echo again 2>"$T/err" >"$MNT/in/0/stdin"; then fail "write to an exited rank succeeded"; fi
grep -q "Broken pipe" "$T/err" || fail "exited rank: $(cat "$T/err")"

# several steps through one fd: no EOF in between
exec 3>"$MNT/in/1/stdin"
echo a >&3
wait_for 5 test -s "$T/in.1" || fail "first write did not arrive"
echo b >&3
sleep 0.3
assert_eq "rank 1 alive with the fd open" running "$(info_get "$MNT/in/1/info" state)"
exec 3>&-
wait_for 10 exited "$MNT/in/1/info" || fail "rank 1 did not get EOF"
assert_eq "rank 1 stdin" "$(printf 'a\nb')" "$(cat "$T/in.1")"

# reading a stdin file gives end of file at once (so cp -r, tar, rsync and
# grep -r of a job work) and is not a writer: it neither delays nor
# causes the rank's EOF; O_RDWR and writing stdout/info: EACCES
run_job rd 1 sh -c "cat > $T/rd.0"
exec 4<"$MNT/rd/0/stdin" || fail "open of stdin for reading failed"
assert_eq "read of stdin" "" "$(timeout 5 cat <&4)"
assert_eq "no EOF from a reader of stdin" running "$(info_get "$MNT/rd/0/info" state)"
echo last >"$MNT/rd/0/stdin" || fail "write with a reader of stdin open"
wait_for 10 exited "$MNT/rd/0/info" || fail "a reader of stdin held the EOF back"
exec 4<&-
assert_eq "rank stdin with a reader open" last "$(cat "$T/rd.0")"
assert_eq "stdin mode" "-rw-r-----" "$(stat -c %A "$MNT/rd/0/stdin")"
if python3 -c "import os,sys; os.open(sys.argv[1], os.O_RDWR)" "$MNT/rd/0/stdin" 2>"$T/err"; then fail "O_RDWR open of stdin succeeded"; fi
grep -q "Permission denied" "$T/err" || fail "O_RDWR stdin: $(cat "$T/err")"
# cp -r of the completed job: exit 0, exact bytes, empty stdin files
timeout 20 cp -r "$MNT/in" "$T/copy" 2>"$T/err" || fail "cp -r of a completed job: $(cat "$T/err")"
assert_eq "cp -r stdout" "$(sha "$MNT/in/1/stdout")" "$(sha "$T/copy/1/stdout")"
assert_eq "cp -r stdin" 0 "$(stat -c %s "$T/copy/1/stdin")"
timeout 20 tar -C "$MNT" -cf "$T/in.tar" in 2>"$T/err" || fail "tar of a completed job: $(cat "$T/err")"
if echo x 2>"$T/err" >"$MNT/in/1/stdout"; then fail "write of stdout succeeded"; fi
grep -q "Permission denied" "$T/err" || fail "write stdout: $(cat "$T/err")"
if echo x 2>"$T/err" >"$MNT/in/info"; then fail "write of info succeeded"; fi

# tee to several ranks, then the broadcast file to the rest
"$PRODUCE" -n 300K -s 7 >"$T/tee.in"
run_job tee 3 sh -c "cat > $T/tee.\$IOFS_RANK"
timeout 30 tee "$MNT/tee/0/stdin" "$MNT/tee/1/stdin" <"$T/tee.in" >/dev/null || fail "tee failed"
for r in 0 1; do
	wait_for 10 exited "$MNT/tee/$r/info" || fail "tee rank $r no EOF"
	assert_eq "tee rank $r" "$(sha "$T/tee.in")" "$(sha "$T/tee.$r")"
done
echo "to all" >"$MNT/tee/stdin" || fail "broadcast write"
wait_for 10 exited "$MNT/tee/info" || fail "broadcast EOF"
assert_eq "broadcast rank 2" "to all" "$(cat "$T/tee.2")"

# dd with 1 MiB records (O_TRUNC open, 1 MiB FUSE writes)
"$PRODUCE" -n 3M -s 11 >"$T/dd.in"
run_job dd 1 sh -c "cat > $T/dd.0"
timeout 30 dd if="$T/dd.in" of="$MNT/dd/0/stdin" bs=1M status=none || fail "dd into stdin failed"
wait_for 10 exited "$MNT/dd/0/info" || fail "dd rank no EOF"
assert_eq "dd into stdin" "$(sha "$T/dd.in")" "$(sha "$T/dd.0")"

# broadcast to live ranks, from two writers in order
run_job bc 2 sh -c "cat > $T/bc.\$IOFS_RANK"
exec 4>"$MNT/bc/stdin"
echo one >&4
echo two >"$MNT/bc/1/stdin" # rank 1 keeps the job writer: no EOF yet
echo three >&4
exec 4>&-
wait_for 10 exited "$MNT/bc/info" || fail "bc EOF"
assert_eq "bc rank 0" "$(printf 'one\nthree')" "$(cat "$T/bc.0")"
assert_eq "bc rank 1" "$(printf 'one\ntwo\nthree')" "$(cat "$T/bc.1")"

# back-pressure: a rank reading 768 KiB/s, 6 MiB written with cat
"$PRODUCE" -n 6M -s 3 >"$T/big"
run_job bp 1 "$PACE" -r 786432 -o "$T/bp.out"
t0=$(date +%s%N)
timeout 60 cat "$T/big" >"$MNT/bp/0/stdin" || fail "cat into stdin failed"
t1=$(date +%s%N)
wait_for 30 exited "$MNT/bp/0/info" || fail "bp rank did not end"
ms=$(((t1 - t0) / 1000000))
log "6 MiB into a 768 KiB/s rank: writer took $ms ms"
# 6 MiB at 768 KiB/s = 8 s; buffering on the way (pipe, forwarder, socket,
# router) may absorb ~3.5 MiB of that
[ $ms -ge 2500 ] || fail "writer was not slowed down ($ms ms)"
assert_eq "bp bytes" "$(stat -c %s "$T/big")" "$(stat -c %s "$T/bp.out")"
assert_eq "bp sha256" "$(sha "$T/big")" "$(sha "$T/bp.out")"
xoff=$(info_get "$MNT/bp/0/info" stdin_xoff)
xon=$(info_get "$MNT/bp/0/info" stdin_xon)
log "stdin_xoff=$xoff stdin_xon=$xon"
[ "$xoff" -ge 1 ] || fail "stdin flow control never engaged"
assert_eq "stdin xoff/xon pairs" "$xoff" "$xon"
stop_daemon
log "ok"
