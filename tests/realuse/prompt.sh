#!/bin/bash
# A prompt without newline ("Name? ") is readable at once from the rank's
# file, before the user answers; the merged view shows the completed line.
# Models Slurm's test_116_34 (srun --unbuffered shows a prompt without
# newline), open-mpi/ompi #12594 (partial lines never shown), with an
# expect-style driver and with `tail -c +1 -f`.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$IOFS_RUN" --nspace ask -- sh -c \
	'printf "Name? "; read -r n; printf "Hello, %s!\n" "$n"; printf "Age? "; read -r a; printf "%s is %s\n" "$n" "$a"; printf "Continue [y/N] "; read -r c; echo "answer $c"' \
	>"$T/run.out" 2>&1 &
JOB=$!
track $JOB
wait_for 10 size_ge "$MNT/ask/0/stdout" 6 || fail "no prompt"
assert_eq "prompt bytes now" "Name? " "$(now_bytes "$MNT/ask/0/stdout")"
# tail shows the unterminated prompt too (unbuffered, as on a terminal)
stdbuf -o0 tail -c +1 -f "$MNT/ask/0/stdout" >"$T/tail.out" 2>/dev/null &
TAIL=$!
track $TAIL
tail_shows() { [ "$(cat "$T/tail.out"; echo x)" = "$1x" ]; }
wait_for 10 tail_shows "Name? " || fail "tail -c +1 -f shows '$(cat "$T/tail.out")', not the prompt"
$DRIVE expect "$MNT/ask/0/stdout" "$MNT/ask/0/stdin" 10 \
	"Name? " "Ann\n" "Hello, Ann!\nAge? " "33\n" "Ann is 33\nContinue [y/N] " "y\n" "answer y\n" "" \
	2>"$T/drive.err" || fail "driver: $(cat "$T/drive.err")"
wait_for 20 finished $JOB || fail "iofs-run did not end"
printf 'Name? Hello, Ann!\nAge? Ann is 33\nContinue [y/N] answer y\n' >"$T/exp"
wait_for 10 cmp -s "$T/exp" "$T/tail.out" || fail "tail -f of the dialogue: '$(cat "$T/tail.out")'"
kill $TAIL
timeout 5 cat "$MNT/ask/0/stdout" >"$T/got"
expect_bytes "transcript" "$T/exp" "$T/got"
timeout 5 cat "$MNT/ask/stdout" >"$T/merged"
grep -qxF "[ask,0]<stdout>: Name? Hello, Ann!" "$T/merged" || fail "merged view: $(cat "$T/merged")"
assert_eq "merged lines" 3 "$(wc -l <"$T/merged")"
flow_paired ask 0
log "OK: $(cat "$T/drive.err")"
