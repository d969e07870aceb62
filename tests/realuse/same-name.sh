#!/bin/bash
# A second run of the same --nspace while a reader still has the first
# job's file open and its output unread (issue 11: "a second run of the
# same name must never silently destroy a job that still has readers or
# unread output").  The documented collision rule (docs/filesystem.md "When
# the name is taken"): the first job, ended but read by a reader short of
# its end, stays `dup`; the second run becomes `dup~1` (info `requested:
# dup`, iofs-run says so on stderr); the reader gets every byte of the
# first job.  Once nobody reads it, a third run replaces the ended `dup`.
# Models flux-core's 'attach: detached job was not canceled' and Slurm's
# job-name reuse (a name is no identity: sbatch --job-name twice keeps both).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

"$PRODUCE" -n 300K -s 1 >"$T/first.exp"
"$IOFS_RUN" --nspace dup -- sh -c "$(gate go1); $PRODUCE -n 300K -s 1" &
FIRST=$!
track $FIRST
wait_for 10 test -e "$MNT/dup/0/stdout" || fail "first job did not appear"
# a slow reader of the first job, attached before it writes
start_pacer "$MNT/dup/0/stdout" "$T/first.got" -c 4096 -d 50
READER=$PACER_PID
touch "$T/go1"
wait_for 20 finished $FIRST || fail "first job did not end"
kill -0 $READER 2>/dev/null || fail "reader already done: the case needs unread output"

# the second run of the same name, while the first job is read
"$IOFS_RUN" --nspace dup -- sh -c 'echo "second run as $IOFS_NSPACE"' >"$T/second.out" 2>"$T/second.err"
assert_eq "second run status" 0 $?
assert_eq "second run's own terminal" "" "$(cat "$T/second.out")"
grep -q "job name 'dup' is taken.*this run is 'dup~1'" "$T/second.err" ||
	fail "iofs-run did not say where the second run went: $(cat "$T/second.err")"
assert_eq "second run's output" "second run as dup~1" "$(timeout 5 cat "$MNT/dup~1/0/stdout")"
assert_eq "second run requested" dup "$(info_get "$MNT/dup~1/info" requested)"
kill -0 $READER 2>/dev/null || fail "reader already done: the case needs unread output"
wait_for 60 finished $READER || fail "reader of the first job did not end"
expect_bytes "first job through its open reader" "$T/first.exp" "$T/first.got"
expect_bytes "first job still at dup" "$T/first.exp" "$MNT/dup/0/stdout"
flow_paired dup 0

# nobody reads the ended first job any more: the next run replaces it
"$IOFS_RUN" --nspace dup -- echo third run >"$T/third.out" 2>&1
assert_eq "third run status" 0 $?
assert_eq "third run replaced dup" "third run" "$(timeout 5 cat "$MNT/dup/0/stdout")"
assert_eq "jobs" "$(printf 'dup\ndup~1')" "$(ls -1 "$MNT" | sort)"
log "OK"
