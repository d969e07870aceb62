#!/bin/bash
# stdin through iofs-run: per-rank <rank>/stdin and broadcast <nspace>/stdin
# round trips (sha256), STDIN_EOF when the writer closes, XOFF(stdin) from a
# slow rank with XOFF == XON and nothing lost, and a rank that exits with
# its stdin backed up: the XOFF is released, the rest discarded and counted,
# the writer is not left hanging.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

start_daemon
head -c 2000000 /dev/urandom >"$T/a"
head -c 1500000 /dev/urandom >"$T/b"
head -c 4194304 /dev/urandom >"$T/c"
printf 'no newline at the end\0' >>"$T/b"

# --- per-rank round trip -------------------------------------------------
"$IOFS_RUN" --nspace in -n 2 -- sh -c 'sha256sum | cut -c1-64' &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/in/1/stdin" || fail "job in did not appear"
timeout 30 cp "$T/a" "$MNT/in/0/stdin" || fail "write to in/0/stdin failed"
timeout 30 dd if="$T/b" of="$MNT/in/1/stdin" bs=64k status=none || fail "dd to in/1/stdin failed"
wait_for 30 finished $JOB || fail "ranks did not see EOF on stdin"
assert_eq "iofs-run status" 0 "$(rc_of $JOB)"
assert_eq "rank 0 got its stdin" "$(sha "$T/a")" "$(timeout 5 cat "$MNT/in/0/stdout")"
assert_eq "rank 1 got its stdin" "$(sha "$T/b")" "$(timeout 5 cat "$MNT/in/1/stdout")"
assert_eq "stdin_bytes" "$(stat -c %s "$T/a")" "$(info_get "$MNT/in/0/info" stdin_bytes)"

# --- broadcast -----------------------------------------------------------
"$IOFS_RUN" --nspace bc -n 3 -- sh -c 'sha256sum | cut -c1-64' &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/bc/2/stdin" || fail "job bc did not appear"
timeout 30 cp "$T/a" "$MNT/bc/stdin" || fail "broadcast write failed"
wait_for 30 finished $JOB || fail "broadcast ranks did not see EOF"
assert_eq "broadcast status" 0 "$(rc_of $JOB)"
for r in 0 1 2; do
	assert_eq "broadcast rank $r" "$(sha "$T/a")" "$(timeout 5 cat "$MNT/bc/$r/stdout")"
done

# --- a slow rank: XOFF(stdin), then XON, nothing lost ----------------------
"$IOFS_RUN" --verbose --nspace slow -- sh -c "$(gate go); sha256sum | cut -c1-64" 2>"$T/slow.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/slow/0/stdin" || fail "job slow did not appear"
timeout 60 cp "$T/c" "$MNT/slow/0/stdin" &
CP=$!
track $CP
wait_for 10 info_at_least slow 0 stdin_xoff 1 ||
	fail "no XOFF(stdin) while the rank did not read: $(cat "$MNT/slow/0/info" "$T/slow.err")"
kill -0 $CP || fail "the writer finished while the rank read nothing"
touch "$T/go"
wait_for 60 finished $CP || fail "writer did not finish after the rank started reading"
assert_eq "writer status" 0 "$(rc_of $CP)"
wait_for 30 finished $JOB || fail "slow rank did not end"
assert_eq "slow rank sha" "$(sha "$T/c")" "$(timeout 5 cat "$MNT/slow/0/stdout")"
xo=$(info_get "$MNT/slow/0/info" stdin_xoff)
xn=$(info_get "$MNT/slow/0/info" stdin_xon)
assert_eq "stdin XOFF == XON" "$xo" "$xn"
assert_eq "stdin_bytes" 4194304 "$(info_get "$MNT/slow/0/info" stdin_bytes)"
log "slow rank: 4 MiB stdin, XOFF $xo XON $xn"

# --- a forwarder that stops reading its socket: the daemon holds stdin
# back (its own output watermark), its memory stays bounded, nothing lost.
# The socket path only: after a hand-over stdin does not pass the forwarder.
"$IOFS_RUN" --no-handover --nspace frozen -- sh -c 'sha256sum | cut -c1-64' &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/frozen/0/stdin" || fail "job frozen did not appear"
kill -STOP $JOB
rss0=$(awk '/VmRSS/ {print $2}' /proc/$DAEMON_PID/status)
timeout 60 cp "$T/c" "$MNT/frozen/0/stdin" &
CP=$!
track $CP
wait_for 10 info_at_least frozen 0 stdin_xoff 1 || fail "no stdin hold-back toward a frozen forwarder"
sleep 0.3
kill -0 $CP || fail "4 MiB of stdin were buffered for a frozen forwarder"
rss1=$(awk '/VmRSS/ {print $2}' /proc/$DAEMON_PID/status)
[ $((rss1 - rss0)) -lt 8192 ] || fail "daemon grew by $((rss1 - rss0)) KiB for a frozen forwarder"
pushed=$(info_get "$MNT/frozen/0/info" stdin_bytes)
kill -CONT $JOB
wait_for 60 finished $CP || fail "writer did not finish after the forwarder resumed"
wait_for 30 finished $JOB || fail "frozen job did not end"
assert_eq "frozen job status" 0 "$(rc_of $JOB)"
assert_eq "frozen rank sha" "$(sha "$T/c")" "$(timeout 5 cat "$MNT/frozen/0/stdout")"
assert_eq "frozen XOFF == XON" "$(info_get "$MNT/frozen/0/info" stdin_xoff)" "$(info_get "$MNT/frozen/0/info" stdin_xon)"
log "frozen forwarder: $pushed bytes accepted while frozen, daemon RSS +$((rss1 - rss0)) KiB"

# --- a rank that exits with its stdin backed up ---------------------------
"$IOFS_RUN" --verbose --nspace quit -- sh -c "$(gate quit); exit 3" 2>"$T/quit.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/quit/0/stdin" || fail "job quit did not appear"
timeout 60 cp "$T/c" "$MNT/quit/0/stdin" 2>"$T/cp.err" &
CP=$!
track $CP
wait_for 10 info_at_least quit 0 stdin_xoff 1 ||
	fail "no XOFF(stdin) for the rank that does not read"
touch "$T/quit"
wait_for 30 finished $JOB || fail "rank quit did not end"
assert_eq "quit status" 3 "$(rc_of $JOB)"
wait_for 30 finished $CP || fail "the stdin writer hangs after its rank exited"
[ "$(rc_of $CP)" -ne 0 ] || fail "writing more stdin than a dead rank read succeeded"
assert_eq "quit state" exited "$(rank_state quit 0)"
xo=$(info_get "$MNT/quit/0/info" stdin_xoff)
xn=$(info_get "$MNT/quit/0/info" stdin_xon)
assert_eq "teardown: stdin XOFF == XON" "$xo" "$xn"
# who held the rest says how much it dropped: iofs-run, or the daemon that
# took the rank's stdin pipe
said="$T/quit.err"
[ "$RUN_PATH" = socket ] || said="$T/iofs.log"
file_has "$said" "discarded [0-9]* bytes of stdin" ||
	fail "the discarded stdin was not counted: $(cat "$said")"
log "teardown: XOFF $xo XON $xn, $(grep -o 'discarded [0-9]* bytes' "$said")"

# --no-stdin (a batch script's program that reads stdin, nobody to feed
# it): the rank reads EOF at once instead of waiting for a writer of its
# stdin file, whose writes are refused (EPIPE) on the hand-over; on the
# socket path iofs-run holds the pipe and discards them (as for any rank
# that closed its stdin)
"$IOFS_RUN" -v --no-stdin --nspace nostdin -- sh -c "cat; echo \"after cat: \$?\"; $(gate nostdin.go)" \
	>"$T/nostdin.out" 2>&1 &
NS=$!
track $NS
wait_for 10 file_has "$MNT/nostdin/0/stdout" "after cat: 0" ||
	fail "--no-stdin: cat did not end at once: $(cat "$T/nostdin.out")"
if [ "$RUN_PATH" = handover ]; then
	echo refused >"$MNT/nostdin/0/stdin" 2>"$T/nostdin.w" && fail "--no-stdin: a write to the stdin file succeeded"
	grep -q 'Broken pipe' "$T/nostdin.w" || fail "--no-stdin: not EPIPE: $(cat "$T/nostdin.w")"
else
	echo discarded >"$MNT/nostdin/0/stdin"
fi
touch "$T/nostdin.go"
wait_for 10 finished $NS || fail "--no-stdin job did not end"
[ "$RUN_PATH" = handover ] || file_has "$T/nostdin.out" "discarded 10 bytes of stdin" ||
	fail "--no-stdin: the stdin written was not discarded: $(cat "$T/nostdin.out")"
assert_eq "--no-stdin status" 0 "$(rc_of $NS)"

daemon_alive || fail "daemon died"
stop_daemon
log "ok"
