#!/bin/bash
# A 4-rank job under the PMIx host appears in MNT/<nspace>/; per-rank
# stdout/stderr are byte-exact (sha256, final line without newline), the
# merged view holds every line of every rank exactly once, tagged; JOB_END
# and PROC_TERMINATED mark info (state exited + exit status).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/pmix/common.sh"

# ranks wait for readers (the gate); each stream is larger than the
# router's 1 MiB window, so a late reader would only see its tail
cat >"$T/rank.sh" <<RANK
$(gate go)
. $T/body.sh
RANK
cat >"$T/body.sh" <<'RANK'
r=$PMIX_RANK
seq -f "rank $r stdout line %g ................................" 1 20000
seq -f "rank $r stderr line %g" 1 3000 >&2
printf "final $r without newline"
printf "err-final $r" >&2
exit $((r + 10))
RANK
NLINES=20000
for r in 0 1 2 3; do
	PMIX_RANK=$r sh "$T/body.sh" >"$T/exp.$r.out" 2>"$T/exp.$r.err"
done

start_host --hold
start_pmix_daemon
host_cmd "job ns1:4:sh $T/rank.sh"
wait_for 20 test -e "$MNT/ns1/3/stdout" || fail "job ns1 did not appear in $MNT (got: $(ls "$MNT" 2>&1))"
READERS=()
for r in 0 1 2 3; do
	start_reader "$MNT/ns1/$r/stdout" "$T/got.$r.out"
	READERS+=("$READER_PID")
	start_reader "$MNT/ns1/$r/stderr" "$T/got.$r.err"
	READERS+=("$READER_PID")
done
start_reader "$MNT/ns1/stdout" "$T/merged.out"
READERS+=("$READER_PID")
start_reader "$MNT/ns1/stderr" "$T/merged.err"
READERS+=("$READER_PID")
touch "$T/go"
for p in "${READERS[@]}"; do
	wait_for 60 finished "$p" || fail "a reader did not reach EOF"
done
wait_for 20 job_done ns1 || fail "job ns1 did not end in $MNT (got: $(ls "$MNT" 2>&1))"
host_logged "job ns1 ended" || fail "host did not end the job"

assert_eq "rank dirs" "0 1 2 3" "$(cd "$MNT/ns1" && ls -d [0-9]* | sort -n | xargs)"
for r in 0 1 2 3; do
	assert_eq "rank $r stdout bytes" "$(stat -c %s "$T/exp.$r.out")" "$(stat -c %s "$T/got.$r.out")"
	assert_eq "rank $r stdout sha" "$(sha "$T/exp.$r.out")" "$(sha "$T/got.$r.out")"
	assert_eq "rank $r stderr sha" "$(sha "$T/exp.$r.err")" "$(sha "$T/got.$r.err")"
	assert_eq "rank $r dropped_bytes" 0 "$(info_get "$MNT/ns1/$r/info" dropped_bytes)"
	assert_eq "rank $r state" exited "$(rank_state ns1 $r)"
	assert_eq "rank $r exit_status" $((r + 10)) "$(info_get "$MNT/ns1/$r/info" exit_status)"
	assert_eq "rank $r stdout_bytes" "$(stat -c %s "$T/exp.$r.out")" "$(info_get "$MNT/ns1/$r/info" stdout_bytes)"
done
assert_eq "job state" exited "$(job_state ns1)"
st=$(info_get "$MNT/ns1/info" exit_status)
[ "$st" -ge 10 ] && [ "$st" -le 13 ] || fail "job exit_status $st, want a rank's (10-13)"
assert_eq "job ranks" 4 "$(info_get "$MNT/ns1/info" ranks)"
assert_eq "job_size" 4 "$(info_get "$MNT/ns1/info" job_size)"
# the job's command line, from the server's PMIX_APP_ARGV (as PRRTE gives it);
# the source asks for it after the job's size, one get at a time, so a job
# that ends at once may be complete a moment before it has it
has_command() { [ -n "$(info_get "$MNT/$1/info" command)" ]; }
wait_for 10 has_command ns1 || fail "ns1: no command line"
assert_eq "job command" "sh $T/rank.sh" "$(info_get "$MNT/ns1/info" command)"
assert_eq "rank 2 command" "sh $T/rank.sh" "$(info_get "$MNT/ns1/2/info" command)"

# merged views: each rank's lines, tagged, in order, exactly once; the
# unterminated last line ends with "\n" there
assert_eq "merged stdout lines" $((4 * (NLINES + 1))) "$(wc -l <"$T/merged.out")"
for r in 0 1 2 3; do
	{ cat "$T/exp.$r.out"; echo; } >"$T/exp.$r.outnl"
	{ cat "$T/exp.$r.err"; echo; } >"$T/exp.$r.errnl"
	grep -a "^\[ns1,$r\]<stdout>: " "$T/merged.out" | sed "s/^\[ns1,$r\]<stdout>: //" >"$T/m.$r.out"
	grep -a "^\[ns1,$r\]<stderr>: " "$T/merged.err" | sed "s/^\[ns1,$r\]<stderr>: //" >"$T/m.$r.err"
	assert_eq "merged stdout of rank $r" "$(sha "$T/exp.$r.outnl")" "$(sha "$T/m.$r.out")"
	assert_eq "merged stderr of rank $r" "$(sha "$T/exp.$r.errnl")" "$(sha "$T/m.$r.err")"
done
x=$(info_get "$MNT/ns1/info" stdout_xoff)
y=$(info_get "$MNT/ns1/info" stdout_xon)
assert_eq "stdout xoff/xon paired" "$x" "$y"

# a command line longer than info's line (250 words, 2.3 KB) with a tab:
# cut at a whole word, marked " [...]", the tab shown as "?" (the job
# lives 2 s: the command line is asked after the size, and a job the
# server forgets before that has none, logged)
host_cmd "job ns2:1:sleep$(printf '\t')2; echo two $(printf 'word%04d ' $(seq 1 250))"
wait_for 20 job_done ns2 || fail "job ns2 did not end in $MNT (got: $(ls "$MNT" 2>&1))"
wait_for 10 has_command ns2 || fail "ns2: no command line"
c=$(info_get "$MNT/ns2/info" command)
[[ "$c" == "sleep?2; echo two word0001 word0002 "*" [...]" ]] || fail "ns2 command: '${c:0:40}...${c: -20}'"
[ ${#c} -le 1030 ] || fail "ns2 command is ${#c} bytes"
[[ "${c% \[...\]}" =~ \ word[0-9]{4}$ ]] || fail "ns2 command not cut at a word: '${c: -30}'"
stop_daemon
log "ok: stdout xoff=$x xon=$y (PMIx cannot act on them: counted only)"
log "ok: 4 ranks, $((4 * NLINES)) lines per channel view, exact"
