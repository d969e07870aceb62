#!/bin/bash
# iofs-run end to end: -n 4 per-rank and merged files, the environment the
# ranks get, exit statuses (codes and signals) in info and as iofs-run's
# status, a final line without newline, binary output with NULs (sha256),
# several MiB through a reader attached from the start, a second forwarder
# refused for a running (nspace, rank), reuse of a completed job's name.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

PORT=$((30000 + $$ % 20000))
# TCP needs MUNGE by default; this suite has no munged (tests/security does)
start_daemon --listen "tcp:127.0.0.1:$PORT" -o auth=none

# --- loopback TCP is accepted without the allow-remote option -------------
"$IOFS_RUN" --connect "tcp:127.0.0.1:$PORT" --nspace tcp1 -- sh -c 'printf "over tcp"'
assert_eq "loopback TCP status" 0 $?
assert_eq "loopback TCP output" "over tcp" "$(timeout 5 cat "$MNT/tcp1/0/stdout")"
grep -q "conn .* (tcp 127.0.0.1:" "$T/iofs.log" || fail "daemon did not log the TCP peer"
# the command line in info (COMMAND), as a shell reads it back
assert_eq "tcp1 command" "sh -c 'printf \"over tcp\"'" "$(info_get "$MNT/tcp1/info" command)"

# --- the command line, quoted where needed, in the job's and the ranks' info
"$IOFS_RUN" --nspace cmdline -n 2 -- printf '%s\n' "a b" "it's" || fail "cmdline job"
want="printf '%s\\n' 'a b' 'it'\\''s'"
for f in info 0/info 1/info; do
	assert_eq "cmdline $f command" "$want" "$(info_get "$MNT/cmdline/$f" command)"
done
assert_eq "cmdline output" "a b it's" "$(timeout 5 cat "$MNT/cmdline/0/stdout" | xargs -d '\n')"

# --- -n 4: hello from every rank, exit codes, no trailing newline ---------
"$IOFS_RUN" --nspace hello -n 4 -- sh -c \
	'echo "hello from $IOFS_RANK of $IOFS_SIZE in $IOFS_NSPACE"; echo "err $IOFS_RANK" >&2; printf "tail$IOFS_RANK"; exit $((IOFS_RANK * 3))' \
	>"$T/run.out" 2>"$T/run.err"
rc=$?
assert_eq "iofs-run printed nothing locally" "" "$(cat "$T/run.out" "$T/run.err")"
# the first non-zero status in exit order: one of 3, 6, 9
case $rc in 3 | 6 | 9) ;; *) fail "iofs-run status $rc, expected 3, 6 or 9" ;; esac
for r in 0 1 2 3; do
	assert_eq "rank $r stdout" "$(printf 'hello from %s of 4 in hello\ntail%s' $r $r)" \
		"$(timeout 5 cat "$MNT/hello/$r/stdout")"
	assert_eq "rank $r stdout bytes" $((27 + 5)) "$(timeout 5 cat "$MNT/hello/$r/stdout" | wc -c)"
	assert_eq "rank $r stderr" "err $r" "$(timeout 5 cat "$MNT/hello/$r/stderr")"
	assert_eq "rank $r state" exited "$(rank_state hello $r)"
	assert_eq "rank $r exit_status" $((r * 3)) "$(info_get "$MNT/hello/$r/info" exit_status)"
	pid=$(info_get "$MNT/hello/$r/info" pid)
	[ "$pid" -gt 1 ] || fail "rank $r pid '$pid'"
done
assert_eq "job state" exited "$(job_state hello)"
assert_eq "job ranks" 4 "$(info_get "$MNT/hello/info" ranks)"
assert_eq "job size" 4 "$(info_get "$MNT/hello/info" job_size)"
timeout 5 cat "$MNT/hello/stdout" >"$T/merged"
for r in 0 1 2 3; do
	grep -qx "\[hello,$r\]<stdout>: hello from $r of 4 in hello" "$T/merged" ||
		fail "merged view lacks rank $r's line: $(cat "$T/merged")"
	grep -q "\[hello,$r\]<stdout>: tail$r" "$T/merged" ||
		fail "merged view lacks rank $r's unterminated line"
done
assert_eq "merged lines" 8 "$(wc -l <"$T/merged")"
timeout 5 grep -qx '\[hello,2\]<stderr>: err 2' "$MNT/hello/stderr" || fail "merged stderr"

# --- a signal: 128+N from iofs-run, in info too --------------------------
"$IOFS_RUN" --nspace sig -- sh -c 'echo bye; kill -KILL $$'
assert_eq "status for SIGKILL" 137 $?
assert_eq "info exit_status" 137 "$(info_get "$MNT/sig/0/info" exit_status)"
assert_eq "output before the signal" bye "$(timeout 5 cat "$MNT/sig/0/stdout")"

# --- rank/size/nspace from a launcher's environment ----------------------
# (a Slurm step is JOBID.STEPID: tests/slurm/names.sh has every launcher)
SLURM_PROCID=5 SLURM_NTASKS=8 SLURM_JOB_ID=4711 SLURM_STEP_ID=2 "$IOFS_RUN" -- sh -c 'echo $IOFS_NSPACE $IOFS_RANK $IOFS_SIZE'
assert_eq "slurm env" "4711.2 5 8" "$(timeout 5 cat "$MNT/4711.2/5/stdout")"
assert_eq "slurm job_size" 8 "$(info_get "$MNT/4711.2/info" job_size)"

# --- binary with NULs, several MiB, reader attached from the start -------
head -c 3000000 /dev/urandom >"$T/blob"
printf '\0\0\0end-without-newline' >>"$T/blob"
"$IOFS_RUN" --nspace bin -- sh -c "$(gate go); cat $T/blob" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/bin/0/stdout" || fail "job bin did not appear"
start_reader "$MNT/bin/0/stdout" "$T/blob.out"
CAT=$READER_PID
touch "$T/go"
wait_for 60 finished $CAT || fail "cat of the binary stream did not end"
assert_eq "cat status" 0 "$(rc_of $CAT)"
wait_for 20 finished $JOB || fail "iofs-run bin did not end"
assert_eq "iofs-run status" 0 "$(rc_of $JOB)"
assert_eq "binary bytes" "$(stat -c %s "$T/blob")" "$(stat -c %s "$T/blob.out")"
assert_eq "binary sha256" "$(sha "$T/blob")" "$(sha "$T/blob.out")"
assert_eq "stdout_bytes" "$(stat -c %s "$T/blob")" "$(info_get "$MNT/bin/0/info" stdout_bytes)"
assert_eq "dropped_bytes" 0 "$(info_get "$MNT/bin/0/info" dropped_bytes)"
xo=$(info_get "$MNT/bin/0/info" stdout_xoff)
xn=$(info_get "$MNT/bin/0/info" stdout_xon)
assert_eq "stdout XOFF/XON pair" "$xo" "$xn"
log "3 MB binary: sha ok, stdout XOFF $xo XON $xn"

# --- a reader that holds a descriptor without reading: XOFF reaches the
# forwarder, the rank is held back; a second reader (cat) gets every byte
head -c 8388608 /dev/urandom >"$T/big"
"$IOFS_RUN" --nspace held -- sh -c "echo start; $(gate held-go); cat $T/big; echo ok >&2" &
JOB=$!
track $JOB
wait_for 10 size_is "$MNT/held/0/stdout" 6 || fail "job held did not start"
cat "$MNT/held/0/stdout" >"$T/big.out" &
CAT=$!
track $CAT
sh -c 'exec 3<"$1"; read -r x <&3; exec sleep 60' sh "$MNT/held/0/stdout" &
HOLDER=$!
track $HOLDER
await_reader $HOLDER "$MNT/held/0/stdout"
touch "$T/held-go"
wait_for 20 info_at_least held 0 stdout_xoff 1 || fail "no XOFF toward a non-reading reader's producer"
sleep 0.5
b1=$(info_get "$MNT/held/0/info" stdout_bytes)
sleep 0.5
b2=$(info_get "$MNT/held/0/info" stdout_bytes)
assert_eq "producer held back while XOFFed" "$b1" "$b2"
[ "$b2" -lt 8388608 ] || fail "everything arrived although a reader did not read"
kill $HOLDER
wait_for 60 finished $CAT || fail "reader did not finish once the holder closed"
wait_for 20 finished $JOB || fail "held job did not end"
assert_eq "held job status" 0 "$(rc_of $JOB)"
printf 'start\n' | cat - "$T/big" >"$T/big.expect"
assert_eq "held sha256" "$(sha "$T/big.expect")" "$(sha "$T/big.out")"
xo=$(info_get "$MNT/held/0/info" stdout_xoff)
xn=$(info_get "$MNT/held/0/info" stdout_xon)
assert_eq "stdout XOFF == XON" "$xo" "$xn"
assert_eq "nothing dropped" 0 "$(info_get "$MNT/held/0/info" dropped_bytes)"
log "non-reading reader: producer held at $b2 bytes, XOFF $xo XON $xn, 8 MiB sha ok"

# --- signals are forwarded to the ranks ------------------------------------
"$IOFS_RUN" --nspace sigfwd -n 2 -- sh -c 'trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 0.05; done' &
JOB=$!
track $JOB
wait_for 10 size_is "$MNT/sigfwd/1/stdout" 6 || fail "sigfwd ranks not ready"
wait_for 10 size_is "$MNT/sigfwd/0/stdout" 6 || fail "sigfwd ranks not ready"
kill -TERM $JOB
wait_for 10 finished $JOB || fail "iofs-run did not end after SIGTERM"
assert_eq "status after forwarded SIGTERM" 7 "$(rc_of $JOB)"
for r in 0 1; do
	assert_eq "rank $r saw SIGTERM" "$(printf 'ready\ngot TERM')" "$(timeout 5 cat "$MNT/sigfwd/$r/stdout")"
done

# --- a second run for a running (nspace, rank) gets a distinct name -----
"$IOFS_RUN" --nspace dup -n 2 -- sh -c "echo first \$IOFS_RANK; $(gate dup-end)" &
FIRST=$!
track $FIRST
wait_for 10 test -e "$MNT/dup/1/info" || fail "job dup did not appear"
"$IOFS_RUN" --nspace dup --rank 1 -- echo second >"$T/dup.out" 2>"$T/dup.err"
assert_eq "second run's status" 0 $?
file_has "$T/dup.err" "this run is 'dup~1'" || fail "iofs-run did not print its name: $(cat "$T/dup.err")"
assert_eq "told once" 1 "$(grep -c iofs-run "$T/dup.err")"
assert_eq "second run's output in its own job" second "$(timeout 5 cat "$MNT/dup~1/1/stdout")"
assert_eq "info shows the requested name" dup "$(info_get "$MNT/dup~1/info" requested)"
grep -q "job 'dup' already has a rank 1.*this run is 'dup~1'" "$T/iofs.log" || fail "daemon did not log why"
assert_eq "first job untouched" running "$(rank_state dup 1)"
touch "$T/dup-end"
wait_for 20 finished $FIRST || fail "first dup job did not end"
assert_eq "first job status" 0 "$(rc_of $FIRST)"
assert_eq "first job rank 1" "first 1" "$(timeout 5 cat "$MNT/dup/1/stdout")"

# --- a completed job's name may be reused: the new run replaces it ---------
"$IOFS_RUN" --nspace dup -- echo again
assert_eq "reuse status" 0 $?
assert_eq "reused job output" again "$(timeout 5 cat "$MNT/dup/0/stdout")"
assert_eq "reused job has only the new rank" 1 "$(info_get "$MNT/dup/info" ranks)"

# --- unreachable daemon: falls back with one warning, or fatal with --strict
"$IOFS_RUN" --connect "unix:$T/none.sock" -- sh -c 'echo local; echo local-err >&2; exit 4' \
	>"$T/fb.out" 2>"$T/fb.err"
assert_eq "fallback status" 4 $?
assert_eq "fallback stdout" local "$(cat "$T/fb.out")"
assert_eq "fallback stderr" 2 "$(wc -l <"$T/fb.err")"
file_has "$T/fb.err" "cannot connect" || fail "no warning: $(cat "$T/fb.err")"
"$IOFS_RUN" --strict --connect "unix:$T/none.sock" -- echo x >"$T/fb2.out" 2>&1
assert_eq "--strict unreachable" 1 $?

daemon_alive || fail "daemon died"
stop_daemon
log "ok"
