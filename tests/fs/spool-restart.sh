#!/bin/bash
# -o spool=DIR across daemon lives: a restarted daemon shows the jobs of
# its previous life, as they ended, with every byte; after kill -9 in the
# middle of a stream (repeated), the job comes back lost with exactly the
# bytes the daemon had taken: a prefix of what the rank wrote, nothing torn
# or duplicated.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

SP="$T/spool"
KILLS=${IOFS_SPOOL_KILLS:-5}
start_daemon -o spool="$SP"

# 1. A finished job survives a clean stop.
run_job a 3 sh -c "$PRODUCE -l -n 300K -s \$IOFS_RANK; [ \$IOFS_RANK != 2 ] || exit 3"
wait_for 30 exited "$MNT/a/info" || fail "job a did not end"
# ... with its stdin count, its times, command line, size, pid and host
# (info: started, ended, command, job_size, pid, host)
t0=$(date +%s)
run_job st 1 wc -c
head -c 12345 /dev/zero >"$MNT/st/0/stdin"
wait_for 30 exited "$MNT/st/info" || fail "job st did not end"
assert_eq "st: what the rank read" 12345 "$(timeout 10 cat "$MNT/st/0/stdout")"
hist() { grep -E '^(started|ended|stdin_bytes|command|job_size|pid|host):' "$MNT/st/info" "$MNT/st/0/info"; }
hist0=$(hist)
# ... its size, and its rank's pid and host (before: job_size 0, pid -1
# and no host after a restart)
assert_eq "st: job_size" 1 "$(info_get "$MNT/st/info" job_size)"
[ "$(info_get "$MNT/st/0/info" pid)" -gt 0 ] || fail "st: no pid: $(hist)"
assert_eq "st: host" "$(hostname)" "$(info_get "$MNT/st/0/info" host)"
assert_eq "st: stdin_bytes" 12345 "$(info_get "$MNT/st/info" stdin_bytes)"
assert_eq "st: command" "wc -c" "$(info_get "$MNT/st/info" command)"
for k in started ended; do
	v=$(date -d "$(info_get "$MNT/st/0/info" $k)" +%s) || fail "st: $k is not a time: $(hist)"
	[ "$v" -ge "$t0" ] && [ "$v" -le "$(date +%s)" ] || fail "st: $k $v not in [$t0, now]"
done
# ... and its files' times: what ls -l, ls -t and find -newer show is
# when it printed, not when the daemon came back (before: every restored
# file and directory had the restart's time)
stamps() { stat -c '%n %Y' "$MNT/st" "$MNT/st/0" "$MNT/st/"{stdout,stderr,stdin} "$MNT/st/0/"{stdout,stderr,stdin,info}; }
stamps0=$(stamps)
tstop=$(date +%s)
stop_daemon
# the restart in a later second than every file's last change
after() { [ "$(date +%s)" -gt "$1" ]; }
wait_for 3 after "$tstop" || fail "the clock did not move"
start_daemon -o spool="$SP"
wait_for 10 test -d "$MNT/a/2" || fail "job a not restored"
assert_eq "st: stdin_bytes and times after the restart" "$hist0" "$(hist)"
while read -r f m; do
	[ "$m" -ge "$t0" ] && [ "$m" -le "$tstop" ] ||
		fail "st: $f's mtime $m after the restart is not its earlier life's (in [$t0, $tstop]): before $(grep -F "$f " <<<"$stamps0")"
done < <(stamps)
# ... and after a second one (the first restart's completion rewrote `state`)
stop_daemon
start_daemon -o spool="$SP"
wait_for 10 test -d "$MNT/st/0" || fail "job st not restored twice"
assert_eq "st: stdin_bytes and times after a second restart" "$hist0" "$(hist)"
assert_eq "state" exited "$(job_state a)"
assert_eq "exit status" 3 "$(info_get "$MNT/a/info" exit_status)"
for r in 0 1 2; do
	assert_eq "rank $r" "$(sha <("$PRODUCE" -l -n 300K -s $r))" \
		"$(timeout 10 cat "$MNT/a/$r/stdout" | sha256sum | cut -d' ' -f1)"
	assert_eq "rank $r in the merged view" \
		"$("$PRODUCE" -l -n 300K -s $r | awk 1 | sha256sum | cut -d' ' -f1)" \
		"$(timeout 10 grep -a "^\[a,$r\]<stdout>: " "$MNT/a/stdout" | sed "s/^\[a,$r\]<stdout>: //" | sha256sum | cut -d' ' -f1)"
done
log "clean restart: job a exited 3, every byte"

# 1b. 16 ranks interleaving lines: the merged view (an index into the rank
#     files, fs/spool_mview.c) read late, then after a restart: the same
#     size and bytes (sha256), each rank's lines in it what the rank
#     printed, and on disk no second copy of them.
run_job mv 16 sh -c "exec $PRODUCE -l -n 200K -s \$((IOFS_RANK + 40))"
wait_for 60 exited "$MNT/mv/info" || fail "job mv did not end"
size0=$(stat -c %s "$MNT/mv/stdout")
timeout 30 cat "$MNT/mv/stdout" >"$T/mv.before" || fail "late cat of mv/stdout"
assert_eq "mv: merged size vs bytes read" "$size0" "$(stat -c %s "$T/mv.before")"
stop_daemon
start_daemon -o spool="$SP"
wait_for 10 test -d "$MNT/mv/15" || fail "job mv not restored"
assert_eq "mv: merged size after the restart" "$size0" "$(stat -c %s "$MNT/mv/stdout")"
timeout 30 cat "$MNT/mv/stdout" >"$T/mv.after" || fail "cat of mv/stdout after the restart"
assert_eq "mv: merged view after the restart (sha256)" "$(sha "$T/mv.before")" "$(sha "$T/mv.after")"
for r in $(seq 0 15); do "$PRODUCE" -l -n 200K -s $((r + 40)) >"$T/mvw.$r"; done
python3 "$IOFS_SOURCE_DIR/tests/fs/merged_ranks.py" "$T/mv.after" mv 16 "$T/mvw." >"$T/mv.check" ||
	fail "mv: the merged view after the restart is not what the ranks printed: $(grep -v ok "$T/mv.check" | head -5)"
d=$(dirname "$(grep -lx mv "$SP"/*/nspace)")
idx=$(($(stat -c %s "$d/stdout.idx") + $(stat -c %s "$d/stdout.lit")))
[ ! -e "$d/stdout" ] && [ "$idx" -lt $((size0 / 100)) ] ||
	fail "mv: the merged view takes $idx bytes on disk for $size0"
log "restart, 16 ranks: merged view $size0 bytes the same (sha256), every rank's lines; index $idx bytes"

# 2. kill -9 mid-stream, $KILLS times: the job comes back lost, its bytes a
#    prefix of the rank's stream.
for i in $(seq "$KILLS"); do
	run_job k$i 1 "$PRODUCE" -n 256M -b 4K -s $i
	wait_for 30 size_ge "$MNT/k$i/0/stdout" $((i << 20)) || fail "k$i: no output"
	kill_daemon
	kill -TERM "$JOB_PID" 2>/dev/null
	wait_exit 10 "$JOB_PID" || fail "k$i: forwarder did not stop"
	start_daemon -o spool="$SP"
	wait_for 10 test -d "$MNT/k$i/0" || fail "k$i not restored"
	assert_eq "k$i state" lost "$(job_state k$i)"
	n=$(stat -c %s "$MNT/k$i/0/stdout")
	[ "$n" -ge $((i << 20)) ] || fail "k$i: only $n bytes restored"
	assert_eq "k$i: $n bytes, a prefix" "$("$PRODUCE" -n 256M -b 4K -s $i | head -c "$n" | sha256sum | cut -d' ' -f1)" \
		"$(timeout 30 cat "$MNT/k$i/0/stdout" | sha256sum | cut -d' ' -f1)"
	assert_eq "k$i: bytes read" "$n" "$(timeout 30 cat "$MNT/k$i/0/stdout" | wc -c)"
	# the merged view: whole records, each naming bytes the rank's file has
	timeout 30 cat "$MNT/k$i/stdout" >"$T/k.merged" || fail "k$i: cat of the merged view"
	assert_eq "k$i: merged size vs bytes read" "$(stat -c %s "$MNT/k$i/stdout")" "$(stat -c %s "$T/k.merged")"
	timeout 30 cat "$MNT/k$i/0/stdout" >"$T/k.want0"
	python3 "$IOFS_SOURCE_DIR/tests/fs/merged_ranks.py" "$T/k.merged" k$i 1 "$T/k.want" >"$T/k.check" ||
		fail "k$i: the merged view does not hold exactly the rank's bytes: $(cat "$T/k.check")"
	log "kill -9 #$i: k$i restored lost, $n bytes exact, merged view $(stat -c %s "$T/k.merged") bytes consistent"
done
# every earlier life's jobs are there
for i in $(seq "$KILLS"); do test -d "$MNT/k$i" || fail "k$i gone after later restarts"; done
assert_eq "job a after the kills" exited "$(job_state a)"

# 2b. A job running across a restart: what it printed before is the
#     adopted history, what it prints after is in the ring too; tail -n
#     and every pread across the seam read whole (found by hand: `tail -n
#     3` printed about 20 lines).
stop_daemon
start_daemon -o spool="$SP" -o resume_window=60
IOFS_RECONNECT_TIMEOUT=60 run_job tr 1 sh -c "seq 1 1000; $(gate tr.go); seq 1001 2000"
wait_for 20 size_is "$MNT/tr/0/stdout" "$(seq 1 1000 | wc -c)" || fail "tr: no output"
stop_daemon
start_daemon -o spool="$SP" -o resume_window=60
wait_for 10 test -d "$MNT/tr/0" || fail "tr not restored"
touch "$T/tr.go"
wait_for 30 exited "$MNT/tr/info" || fail "job tr did not end after the restart: $(grep -E "^(state|reconnects|ranks_reconnecting):" "$MNT/tr/info" | tr "\n" " "); $(tail -n 3 "$T/run-tr.err")"
assert_eq "tr: tail -n 3" "$(seq 1998 2000)" "$(timeout 10 tail -n 3 "$MNT/tr/0/stdout")"
assert_eq "tr: tail -n 1500" "$(seq 501 2000 | sha256sum)" "$(timeout 10 tail -n 1500 "$MNT/tr/0/stdout" | sha256sum)"
assert_eq "tr: cat" "$(seq 1 2000 | sha256sum)" "$(timeout 10 cat "$MNT/tr/0/stdout" | sha256sum)"
log "restart under a running job: tail -n 3 and 1500 of what it printed before and after, whole"

# 3. rmdir of a restored job deletes its spool files.
n=$(ls "$SP" | wc -l)
rm -r "$MNT/a" || fail "rm -r a"
wait_for 10 bash -c "[ \$(ls '$SP' | wc -l) -lt $n ]" || fail "spool of a left behind"
stop_daemon
log "ok"
