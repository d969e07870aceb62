#!/bin/bash
# Job directories stay after completion until rmdir / rm -r (EBUSY while
# running), a re-run under the same name replaces a completed job, and
# -o linger=SECONDS removes completed jobs by itself.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

start_daemon
run_job r 2 sh -c "echo run1 \$IOFS_RANK; $(gate end); echo more \$IOFS_RANK"
if rmdir "$MNT/r" 2>"$T/err"; then fail "rmdir of a running job succeeded"; fi
grep -q "busy" "$T/err" || fail "rmdir running: $(cat "$T/err")"
# rm -r of a running job: one message per rank directory (rm does not try
# the job's then; not one per file: a 1024-rank job made 5,124 lines), and
# a tail -f across it keeps following
tail -f "$MNT/r/0/stdout" >"$T/follow" 2>&1 &
TF=$!
track $TF
wait_for 5 file_has "$T/follow" "run1 0" || fail "tail -f did not start: $(cat "$T/follow")"
if rm -rf "$MNT/r" 2>"$T/err"; then fail "rm -rf of a running job succeeded"; fi
assert_eq "rm -rf's messages" "rm: cannot remove '$MNT/r/0': Device or resource busy
rm: cannot remove '$MNT/r/1': Device or resource busy" "$(sort "$T/err")"
test -e "$MNT/r/0/stdout" || fail "a running job lost files"
assert_eq "files after the refused rm" 12 "$(find "$MNT/r" -type f | wc -l)"
assert_eq "rank 1 after the refused rm" "run1 1" "$(timeout 5 head -n 1 "$MNT/r/1/stdout")"
touch "$T/end"
wait_for 10 file_has "$T/follow" "more 0" || fail "tail -f stopped following after the refused rm: $(cat "$T/follow")"
kill $TF
wait_for 10 exited "$MNT/r/info" || fail "job did not end"
ino1=$(stat -c %i "$MNT/r/0/stdout")
sleep 1.2 # past any entry cache
assert_eq "completed job still readable" "run1 0 more 0" "$(timeout 5 cat "$MNT/r/0/stdout" | xargs)"
assert_eq "stable inode number" "$ino1" "$(stat -c %i "$MNT/r/0/stdout")"
assert_eq "find sees every file" 12 "$(find "$MNT/r" -type f | wc -l)"

# a re-run under the same name replaces the completed job
rm -f "$T/end"
run_job r 1 sh -c "echo run2; $(gate end)"
# stat only until the re-run is there: an open file of the old job while
# the re-run's forwarder says hello would make the re-run 'r~1' (a name
# in use is not taken over, iofs-run(1) JOB NAMES), as grep's polling did
# now and then under load
new_ino() { [ "$(stat -c %i "$MNT/r/0/stdout" 2>/dev/null || echo "$ino1")" != "$ino1" ]; }
wait_for 10 new_ino || fail "re-run not visible (or it reused the inode number): $(cat "$T/run-r.err")"
wait_for 5 file_has "$MNT/r/0/stdout" run2 || fail "re-run's output not visible"
test ! -e "$MNT/r/1" || fail "re-run kept the old rank 1"
touch "$T/end"
wait_for 10 exited "$MNT/r/info" || fail "re-run did not end"

# a reader holding a file open across removal keeps reading
exec 5<"$MNT/r/0/stdout"
rm -r "$MNT/r" || fail "rm -r of a completed job failed"
test ! -e "$MNT/r" || fail "job still there after rm -r"
assert_eq "ls after rm -r" "" "$(ls -A "$MNT")"
assert_eq "reader after removal" run2 "$(cat <&5)"
exec 5<&-

# a job that never reaches its size (ranks 1 and 2 of 3 never start): while
# rank 0 runs rm -r is refused; once it ended rm -r removes the job and a
# cat of the merged view, waiting for the missing ranks, gets EOF
"$IOFS_RUN" --connect "$ADDR" --nspace short --rank 0 --size 3 -- sh -c "echo only; $(gate short-end)" \
	>"$T/short.out" 2>&1 &
SP=$!
track $SP
wait_for 10 file_has "$MNT/short/0/stdout" only || fail "short job did not appear"
timeout 20 cat "$MNT/short/stdout" >"$T/short.cat" &
C=$!
track $C
if rm -r "$MNT/short" 2>/dev/null; then fail "rm -r of a running rank's job succeeded"; fi
test -d "$MNT/short/0" || fail "refused rm -r changed the job"
touch "$T/short-end"
wait_for 10 finished $SP || fail "short job's iofs-run did not end"
assert_eq "job of 1 of 3 ranks" running "$(info_get "$MNT/short/info" state)"
rm -r "$MNT/short" 2>"$T/err" || fail "rm -r of a job short of its size: $(cat "$T/err")"
test ! -e "$MNT/short" || fail "short job still there after rm -r"
wait_for 5 finished $C || fail "merged reader not ended by the removal"
assert_eq "merged reader status" 0 "$(rc_of $C)"
assert_eq "merged reader" "[short,0]<stdout>: only" "$(cat "$T/short.cat")"
stop_daemon

# linger
start_daemon -o linger=1
run_job l 1 echo bye
wait_for 10 exited "$MNT/l/info" || fail "linger job did not end"
wait_for 10 eval '! test -e "$MNT/l"' || fail "linger=1 did not remove the job"
stop_daemon
log "ok"
