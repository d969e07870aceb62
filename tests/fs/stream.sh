#!/bin/bash
# Stream reads with real programs: cat streams and ends at completion,
# tail -f (also on a stream empty at open), head -c, grep -m, dd, st_size and
# mtime, the merged view, info counters.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

start_daemon
run_job s 2 sh -c "echo first \$IOFS_RANK; $(gate go); echo second \$IOFS_RANK; \
	$(gate end); echo last \$IOFS_RANK; echo err \$IOFS_RANK >&2"

F=$MNT/s/0/stdout
wait_for 10 size_is "$F" 8 || fail "st_size of '$F' is not 8"
m1=$(stat -c %Y.%y "$F")

# cat: streams what is there, then waits at the live end
env --default-signal=INT cat "$F" >"$T/cat.out" &
CAT=$!
track $CAT
wait_for 5 file_has "$T/cat.out" "first 0" || fail "cat did not print the first line"
# tail -f (1 s poll by default; -s 0.1 to keep the test short)
tail -f -s 0.1 "$F" >"$T/tail.out" &
TAIL=$!
track $TAIL
wait_for 5 file_has "$T/tail.out" "first 0" || fail "tail -f missed the first line"

# a reader on a stream that is EMPTY at open: stderr has no byte yet
tail -f -s 0.1 "$MNT/s/0/stderr" >"$T/tail-err.out" &
TAILE=$!
track $TAILE

sleep 0.2 # let readers settle at the live end (they must stay there)
kill -0 $CAT || fail "cat ended before the stream completed"
touch "$T/go"
wait_for 5 file_has "$T/tail.out" "second 0" || fail "tail -f did not see a new line"
wait_for 5 file_has "$T/cat.out" "second 0" || fail "cat did not see a new line"
kill -0 $CAT || fail "cat ended before the stream completed"
m2=$(stat -c %Y.%y "$F")
[ "$m1" != "$m2" ] || fail "mtime did not move on append ($m1)"
assert_eq "size after append" 17 "$(stat -c %s "$F")"

touch "$T/end"
wait_for 10 finished $CAT || fail "cat did not end when the rank exited"
assert_eq "cat status" 0 "$(rc_of $CAT)"
printf 'first 0\nsecond 0\nlast 0\n' >"$T/expect0"
assert_eq "cat content" "$(sha "$T/expect0")" "$(sha "$T/cat.out")"
wait_for 5 file_has "$T/tail-err.out" "err 0" || fail "tail -f on an empty-at-open stream saw nothing"
wait_for 5 file_has "$T/tail.out" "last 0" || fail "tail -f missed the last line"
wait_for 10 finished "$JOB_PID" || fail "iofs-run did not end"

# completed stream: whole-file tools
assert_eq "head -c" "first" "$(timeout 5 head -c 5 "$F")"
assert_eq "grep -m" "second 0" "$(timeout 5 grep -m 1 second "$F")"
assert_eq "wc -c" 24 "$(timeout 5 wc -c <"$F")"
timeout 5 dd if="$F" of="$T/dd.out" bs=1M status=none || fail "dd failed"
assert_eq "dd content" "$(sha "$T/expect0")" "$(sha "$T/dd.out")"
timeout 5 dd if="$F" of="$T/dd2.out" bs=1 skip=8 count=6 status=none || fail "dd skip failed"
assert_eq "dd skip" "second" "$(cat "$T/dd2.out")"
assert_eq "rank 1" "$(printf 'first 1\nsecond 1\nlast 1')" "$(timeout 5 cat "$MNT/s/1/stdout")"
assert_eq "stderr" "err 1" "$(timeout 5 cat "$MNT/s/1/stderr")"

# merged view: whole lines, tagged, 6 of them
timeout 5 cat "$MNT/s/stdout" >"$T/merged"
assert_eq "merged lines" 6 "$(wc -l <"$T/merged")"
grep -qx '\[s,1\]<stdout>: second 1' "$T/merged" || fail "merged view lacks a tagged line: $(cat "$T/merged")"
assert_eq "merged stderr" 2 "$(timeout 5 cat "$MNT/s/stderr" | grep -c '<stderr>: err')"

# head on a LIVE stream ends at once too
run_job live 1 sh -c "echo 0123456789; $(gate live-end)"
wait_for 5 size_is "$MNT/live/0/stdout" 11 || fail "live stream size"
assert_eq "head -c on live" "01234" "$(timeout 5 head -c 5 "$MNT/live/0/stdout")"
assert_eq "grep -m on live" "0123456789" "$(timeout 5 grep -m 1 0123 "$MNT/live/0/stdout")"
touch "$T/live-end"

# info counters
I=$MNT/s/0/info
# st_size of an info file is the exact length of its text (counted by
# getattr without rendering it)
for f in "$I" "$MNT/s/info" "$MNT/s/1/info"; do
	assert_eq "st_size of $f" "$(timeout 5 cat "$f" | wc -c)" "$(stat -c %s "$f")"
done
assert_eq "state" exited "$(info_get "$I" state)"
assert_eq "stdout_bytes" 24 "$(info_get "$I" stdout_bytes)"
assert_eq "stderr_bytes" 6 "$(info_get "$I" stderr_bytes)"
assert_eq "exit_status" 0 "$(info_get "$I" exit_status)"
assert_eq "job ranks" 2 "$(info_get "$MNT/s/info" ranks)"
assert_eq "job stdout_bytes" 48 "$(info_get "$MNT/s/info" stdout_bytes)"
for k in pid host stdin_bytes stdout_xoff stdout_xon stderr_xoff stderr_xon stdin_xoff stdin_xon dropped_bytes; do
	[ -n "$(info_get "$I" $k)" ] || fail "info lacks $k"
done
# mmap fails cleanly (ENODEV, direct_io) and leaves the file readable
python3 - "$MNT/s/0/stdout" >"$T/mmap" 2>&1 <<'PY' || fail "mmap check: $(cat "$T/mmap")"
import errno, mmap, sys
with open(sys.argv[1], "rb") as f:
    try:
        mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        sys.exit("mmap succeeded")
    except OSError as e:
        if e.errno != errno.ENODEV:
            sys.exit("mmap: %s" % e)
    assert f.read(6) == b"first ", "read after mmap"
PY

# grep -r over a job (docs/filesystem.md, Limits): GNU grep opens what it
# finds O_NONBLOCK, so on a running job every match of what the streams
# hold so far, one EAGAIN message per live stream, exit 2 (-s: no
# messages); on the ended job every match and exit 0, nothing else.  The
# info files are left out: their command line has the word too.
run_job gr 2 sh -c "echo needle \$IOFS_RANK; $(gate gr-go)"
wait_for 10 size_is "$MNT/gr/1/stdout" 9 || fail "gr: no output"
# info while it runs: no exit status yet, linked; once ended: its status
# and no link (found confusing by hand: "exit_status: 0" while running)
assert_eq "running: exit_status" "" "$(info_get "$MNT/gr/0/info" exit_status)"
assert_eq "running: job exit_status" "" "$(info_get "$MNT/gr/info" exit_status)"
assert_eq "running: link" connected "$(info_get "$MNT/gr/0/info" link)"
for f in "$MNT/gr/0/info" "$MNT/gr/info"; do
	assert_eq "st_size of $f (running)" "$(timeout 5 cat "$f" | wc -c)" "$(stat -c %s "$f")"
done
rc=0
timeout 10 grep -r --exclude=info needle "$MNT/gr" >"$T/gr.out" 2>"$T/gr.err" || rc=$?
assert_eq "grep -r of a running job: status" 2 "$rc"
assert_eq "grep -r of a running job: matches" 4 "$(wc -l <"$T/gr.out")"
grep -q "gr/0/stdout: Resource temporarily unavailable" "$T/gr.err" || fail "grep -r: $(cat "$T/gr.err")"
rc=0
timeout 10 grep -rs --exclude=info needle "$MNT/gr" >"$T/gr.out" 2>"$T/gr.err" || rc=$?
assert_eq "grep -rs: status" 2 "$rc"
assert_eq "grep -rs: matches" 4 "$(wc -l <"$T/gr.out")"
[ ! -s "$T/gr.err" ] || fail "grep -rs said: $(cat "$T/gr.err")"
touch "$T/gr-go"
wait_for 20 exited "$MNT/gr/info" || fail "gr did not end"
rc=0
timeout 10 grep -r --exclude=info needle "$MNT/gr" >"$T/gr.out" 2>"$T/gr.err" || rc=$?
assert_eq "grep -r of the ended job: status ($(cat "$T/gr.err"))" 0 "$rc"
assert_eq "grep -r of the ended job: matches" 4 "$(wc -l <"$T/gr.out")"
assert_eq "grep -l in the info files (command:)" 3 "$(grep -rl needle --include=info "$MNT/gr" | wc -l)"
assert_eq "ended: exit_status" 0 "$(info_get "$MNT/gr/0/info" exit_status)"
assert_eq "ended: link" none "$(info_get "$MNT/gr/0/info" link)"
for f in "$MNT/gr/0/info" "$MNT/gr/info"; do
	assert_eq "st_size of $f (ended)" "$(timeout 5 cat "$f" | wc -c)" "$(stat -c %s "$f")"
done
stop_daemon
log "ok"
