#!/bin/bash
# Issue 12 item 8: at the descriptor limit, accepting must back off instead
# of spinning.  The daemon runs with a low `ulimit -n`; a hog (as nobody)
# opens far more connections than it has descriptors and holds them.
# Before the fix accept_error_cb retried at once: 100% CPU and ~400,000
# "Too many open files" lines a second.  Now: a pause of 100 ms doubling to
# 1 s, one log line per pause; the daemon's CPU time stays small; once the
# hog lets go, a normal job works and its output is exact.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

id nobody >/dev/null 2>&1 || fail "no user nobody"
chmod 755 "$T"
NOFILE=48
( ulimit -n $NOFILE && exec "$IOFS" -f --listen "$ADDR" "$MNT" ) >"$T/iofs.log" 2>&1 &
DAEMON_PID=$!
wait_for 10 is_mounted "$MNT" || fail "daemon did not mount $MNT"
wait_for 10 test -S "$SOCK" || fail "daemon did not listen on $SOCK"
chmod 777 "$SOCK"
assert_eq "daemon's fd limit" $NOFILE "$(awk '/Max open files/ {print $4}' /proc/$DAEMON_PID/limits)"

# cpu_ticks PID: utime + stime of PID (clock ticks)
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' /proc/"$1"/stat; }
emfile_lines() { grep -c "Too many open files" "$T/iofs.log"; }

# The hog: 300 connections held until $T/release exists (then closes all).
cat >"$T/hog.py" <<'PY'
import os, socket, sys, time
path, n, release, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    socks.append(s)
open(ready, "w").close()
deadline = time.time() + 60
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.02)
for s in socks:
    s.close()
PY
chmod 644 "$T/hog.py"
mkdir -m 777 "$T/hog"
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- \
	/usr/bin/python3 "$T/hog.py" "$SOCK" 300 "$T/release" "$T/hog/ready" 2>"$T/hog.err" &
HOG=$!
track $HOG
wait_for 20 test -e "$T/hog/ready" || fail "hog could not connect: $(cat "$T/hog.err")"
wait_for 10 grep -q "Too many open files" "$T/iofs.log" || fail "the daemon never reached its fd limit"
# Measure over a fixed 3 s window: CPU used and log lines written.
c0=$(cpu_ticks $DAEMON_PID)
l0=$(emfile_lines)
t0=$(date +%s.%N)
sleep 3
c1=$(cpu_ticks $DAEMON_PID)
l1=$(emfile_lines)
t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
cpu_ms=$(((c1 - c0) * 1000 / hz))
wall_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }')
log "at the fd limit: ${cpu_ms} ms CPU in ${wall_ms} ms, $((l1 - l0)) log lines ($(emfile_lines) in all)"
figures limits-accept cpu_ms=$cpu_ms wall_ms=$wall_ms lines=$((l1 - l0)) total_lines=$(emfile_lines)
[ "$cpu_ms" -lt 500 ] || fail "daemon used $cpu_ms ms CPU in $wall_ms ms at its fd limit (spinning)"
[ $((l1 - l0)) -le 10 ] || fail "$((l1 - l0)) 'Too many open files' lines in 3 s (expected one per pause)"
grep -q "not accepting for 1000 ms" "$T/iofs.log" || fail "back-off did not reach 1 s: $(grep -m3 'Too many' "$T/iofs.log")"
daemon_alive || fail "daemon died at its fd limit"

# The hog lets go: its connections close, a normal job works.
touch "$T/release"
wait_for 20 finished $HOG || fail "hog did not exit"
"$PRODUCE" -n 100000 -s 7 >"$T/want"
"$IOFS_RUN" --strict --connect "$ADDR" --nspace after -n 1 -- "$PRODUCE" -n 100000 -s 7 \
	>"$T/after.out" 2>"$T/after.err" || fail "job after the hog failed: $(cat "$T/after.err")"
wait_for 20 job_done after || fail "job after the hog did not complete"
cat "$MNT/after/0/stdout" >"$T/got"
assert_eq "output after the hog" "$(sha "$T/want")" "$(sha "$T/got")"
stop_daemon
log "ok"
