#!/bin/bash
# A second run of the same --nspace while a reader still has the first
# job's file open and its output unread (issue 11: "a second run of the
# same name must never silently destroy a job that still has readers or
# unread output").  The reader of the first job gets every byte of it to
# its end, and the first job's output stays reachable in the mount; the
# second run's output is exact wherever the rule puts it.
# The rule (docs/filesystem.md, "Job names"): the first job keeps its name
# while an open file still reads it; the second run is 'dup~1' and
# iofs-run says so.
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
start_pacer "$MNT/dup/0/stdout" "$T/first.got" -c 4096 -d 20
READER=$PACER_PID
touch "$T/go1"
wait_for 20 finished $FIRST || fail "first job did not end"
kill -0 $READER 2>/dev/null || fail "reader already done: the case needs unread output"

# the second run of the same name, while the first job is read
"$IOFS_RUN" --nspace dup -- sh -c 'echo second run' >"$T/second.out" 2>&1
log "second run: status $?, said: $(cat "$T/second.out")"
wait_for 60 finished $READER || fail "reader of the first job did not end"
expect_bytes "first job through its open reader" "$T/first.exp" "$T/first.got"
# the first job's output is still in the mount, under some name
found=
for d in "$MNT"/*/; do
	f="$d/0/stdout"
	[ -e "$f" ] && [ "$(stat -c %s "$f")" = 307200 ] &&
		[ "$(timeout 5 head -c 64 "$f" | od -An -tx1)" = "$(head -c 64 "$T/first.exp" | od -An -tx1)" ] &&
		found=$d
done
[ -n "$found" ] || fail "the first job was destroyed by the second run: $(ls "$MNT")"
log "first job still at $found"
[ "$found" = "$MNT/dup/" ] || fail "the first job moved: found at $found"
# the second run is dup~1, and iofs-run said so
assert_eq "second run's output" "second run" "$(cat "$MNT/dup~1/0/stdout" 2>&1)"
grep -q "this run is 'dup~1'" "$T/second.out" || fail "iofs-run did not say its name: $(cat "$T/second.out")"
assert_eq "dup~1 requested" "dup" "$(info_get "$MNT/dup~1/info" requested)"
log "OK"
