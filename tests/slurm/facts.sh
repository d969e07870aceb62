#!/bin/bash
# Slurm's own I/O regression tests, carried over to srun steps whose stdio
# goes through the mount (the facts, not their code; see
# /work/shared/notes/what-users-hit.md):
#   test1.44   a slow reader loses nothing (srun lost stdout under one)
#   test1.56   lines longer than slurmstepd's 4 KiB buffer arrive exact
#   test1.70   binary through stdin and stdout, byte for byte
#   test1.115  a task that never reads its stdin does not hang srun (bug 3166)
#   test9.1    stdin broadcast to many tasks (stress)
#   test_116_34  a prompt without newline under --unbuffered is seen at once
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/slurm/common.sh"
start_daemon
slurm_start

# --- test1.44: slow reader, 6 MiB, nothing lost, XOFF == XON --------------
srun_bg "$T/s44.out" -n 1 "$IOFS_RUN" -- sh -c "$(gate go44); exec $PRODUCE -n 6M -s 44"
wait_for 10 ranks_up "$NS" 1 || fail "test1.44 rank not up"
start_pacer "$MNT/$NS/0/stdout" "$T/s44.got" -c 65536 -d 8
touch "$T/go44"
srun_done 90
wait_for 60 finished $PACER_PID || fail "slow reader did not reach the end"
"$PRODUCE" -n 6M -s 44 >"$T/s44.exp"
assert_eq "test1.44 bytes" "$(stat -c %s "$T/s44.exp")" "$(stat -c %s "$T/s44.got")"
assert_eq "test1.44 sha256" "$(sha "$T/s44.exp")" "$(sha "$T/s44.got")"
assert_eq "test1.44 dropped" 0 "$(info_get "$MNT/$NS/0/info" dropped_bytes)"
xoff=$(info_get "$MNT/$NS/0/info" stdout_xoff)
[ "$xoff" -gt 0 ] || log "note: the slow reader never caused an XOFF"
flow_paired "$NS" 0
log "[${SECONDS}s] test1.44: 6 MiB through a slow reader, stdout_xoff=$xoff"

# --- test1.56: lines of 10 000, 70 000 and 5 000 bytes, whole -------------
cat >"$T/long.py" <<'EOF2'
import os, sys
r = int(os.environ["IOFS_RANK"])
for n in (10000, 70000, 5000):
    sys.stdout.write(chr(ord("a") + r) * n + "\n")
    sys.stdout.flush()
sys.stdout.write("short %d\n" % r)
EOF2
timeout 60 srun -O -n 2 "$IOFS_RUN" -- python3 "$T/long.py" >"$T/s56.out" 2>&1 ||
	fail "test1.56 srun: $(cat "$T/s56.out")"
NS=$(jobs_in_mount | while read -r j; do [ -e "$MNT/$j/1" ] && [ "$(head -c 1 "$MNT/$j/1/stdout")" = b ] && echo "$j"; done | head -n 1)
[ -n "$NS" ] || fail "test1.56 job not found: $(jobs_in_mount)"
for r in 0 1; do
	python3 -c 'import sys; c = chr(97 + int(sys.argv[1]))
for n in (10000, 70000, 5000): print(c * n)
print("short " + sys.argv[1])' $r >"$T/s56.exp.$r"
	expect_rank "$NS" $r "$T/s56.exp.$r"
done
# the merged view, both ranks at once: a long line another rank's piece
# interrupts continues under a "+ " tag; each rank's bytes rebuild exactly
timeout 10 cat "$MNT/$NS/stdout" >"$T/s56.merged"
cont=$($DRIVE rebuild "$NS" "$T/s56.merged" "$T/s56.rebuilt") || fail "test1.56: merged view not rebuildable"
for r in 0 1; do expect_bytes "test1.56 rank $r from the merged view" "$T/s56.exp.$r" "$T/s56.rebuilt.$r"; done
log "[${SECONDS}s] test1.56: long lines exact per rank and in the merged view ($cont continuations)"

# --- test1.70: binary (all 256 byte values) through stdin and stdout ------
python3 -c 'import os, sys
sys.stdout.buffer.write(bytes(range(256)) * 512 + os.urandom(300000))' >"$T/s70.in"
srun_bg "$T/s70.out" -n 1 "$IOFS_RUN" -- cat
wait_for 10 ranks_up "$NS" 1 || fail "test1.70 rank not up"
cat "$T/s70.in" >"$MNT/$NS/0/stdin" || fail "test1.70 write"
srun_done 60
expect_rank "$NS" 0 "$T/s70.in"
assert_eq "test1.70 stdin_bytes" "$(stat -c %s "$T/s70.in")" "$(info_get "$MNT/$NS/0/info" stdin_bytes)"
flow_paired "$NS" 0
log "[${SECONDS}s] test1.70: $(stat -c %s "$T/s70.in") binary bytes round trip"

# --- test1.115: tasks that never read stdin; srun's own stdin endless -----
before=$(jobs_in_mount)
yes | timeout 60 srun -O -n 2 "$IOFS_RUN" -- sh -c "$(gate go115); echo ignored stdin" >"$T/s115.out" 2>&1 &
SRUN=$!
track $SRUN
wait_for 30 has_new_job "$before" || fail "test1.115 job did not appear"
NS=$(new_jobs "$before")
wait_for 10 ranks_up "$NS" 2 || fail "test1.115 ranks not up"
head -c 4M /dev/zero >"$MNT/$NS/stdin" 2>"$T/s115.w" &
WRITER=$!
track $WRITER
touch "$T/go115"
wait_for 60 finished $SRUN || fail "test1.115: srun hangs on stdin its tasks never read"
wait_for 30 finished $WRITER || fail "test1.115: writer of the job's stdin hangs after the tasks ended"
for r in 0 1; do
	assert_eq "test1.115 rank $r" "ignored stdin" "$(timeout 5 cat "$MNT/$NS/$r/stdout")"
	flow_paired "$NS" $r
done
log "[${SECONDS}s] test1.115: srun and the stdin writer ended (writer status $(rc_of $WRITER))"

# --- test9.1: 2 MiB of stdin broadcast to 6 tasks --------------------------
srun_bg "$T/s91.out" -O -n 6 "$IOFS_RUN" -- sh -c 'sha256sum | cut -d" " -f1'
wait_for 20 ranks_up "$NS" 6 || fail "test9.1 ranks not up"
"$PRODUCE" -n 2M -s 91 >"$T/s91.in"
cat "$T/s91.in" >"$MNT/$NS/stdin" || fail "test9.1 write"
srun_done 90
sha "$T/s91.in" >"$T/s91.exp"
for r in 0 1 2 3 4 5; do
	expect_rank "$NS" $r "$T/s91.exp"
	assert_eq "test9.1 rank $r stdin_bytes" $((2 << 20)) "$(info_get "$MNT/$NS/$r/info" stdin_bytes)"
	flow_paired "$NS" $r
done
log "[${SECONDS}s] test9.1: 2 MiB to 6 tasks"

# --- test_116_34: prompts without newline, srun --unbuffered ---------------
srun_bg "$T/s116.out" -u -n 1 "$IOFS_RUN" -- sh -c \
	'printf "Name? "; read -r n; printf "Hello %s\n" "$n"; printf "Age? "; read -r a; echo "ok $a"'
content_is() { [ "$(now_bytes "$MNT/$NS/0/stdout"; echo x)" = "$1x" ]; }
wait_for 20 content_is "Name? " || fail "test_116_34: prompt not shown: '$(now_bytes "$MNT/$NS/0/stdout")'"
exec 7>"$MNT/$NS/0/stdin"
echo Ann >&7
wait_for 20 content_is "$(printf 'Name? Hello Ann\nAge? ')" ||
	fail "test_116_34: second prompt not shown: '$(now_bytes "$MNT/$NS/0/stdout")'"
echo 33 >&7
exec 7>&-
srun_done 30
printf 'Name? Hello Ann\nAge? ok 33\n' >"$T/s116.exp"
expect_rank "$NS" 0 "$T/s116.exp"
log "[${SECONDS}s] OK"
