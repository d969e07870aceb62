#!/bin/bash
# kill -9 of the daemon while a rank writes as fast as it can (both paths,
# tests/net/meson.build net_both_paths): 20 times in the middle of 1 GiB
# (dd of a file the page cache holds, so the daemon is the bottleneck),
# 1 MiB or more after each resume, each time restarted on the same spool
# and socket.  Also 1 GiB under ASan: with the stage and grown pipes the
# ASan daemon took 256 MiB in 2 kills (about 80 MB from one resume to the
# next kill).
# The daemon is busy all the time here, so a kill lands between a pipe's
# read and its store as often as not (resume-restart's paced rank leaves
# it idle most of the time): on the hand-over path the store takes the
# bytes out of the pipe itself (splice(2) after tee(2)), so each byte is in
# the spool or still in the pipe and the stream in the mount at the end is
# exactly what the rank wrote (sha256, count), as on the socket path where
# the forwarder replays what was not acknowledged.  XOFF/XON paired, the
# forwarder counts nothing lost.
# All the while a process calls fdatasync(2) on every stage file every
# 0.5 ms: writeback cleans the stage's pages and write-protects them (as
# the kernel's flusher does now and then), so the hand-over's pipe reads
# into the stage fault, and a kill lands in those faults too
# (docs/design.md "The stage", the residual case).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
export IOFS_RECONNECT_TIMEOUT=120
SP="$T/spool"
KILLS=20
MIB=1024
STEP=$((1 << 20)) # a kill once the rank file grew this much since the last resume

spool_size() {
	local f
	f=$(find "$SP" -name 0.stdout -print -quit 2>/dev/null)
	[ -n "$f" ] && stat -c %s "$f" || echo 0
}
# the spool file's size, not the mount: a FUSE request right before the
# kill would find the daemon between two reads, never inside one
grown_or_done() { [ "$(spool_size)" -ge "$1" ] || state_is kf 0 exited; }
# the forwarder logs each resume at once (the mount's info may lag behind
# a busy daemon by tens of MB under ASan)
resumed_or_done() { [ "$(grep -c "resumed job 'kf'" "$T/kf.err")" -ge "$1" ] || state_is kf 0 exited; }

"$PRODUCE" -n ${MIB}M -s 17 >"$T/blob"
start_daemon -o spool="$SP" -o resume_window=120 -o spool_max_job=4G
"$IOFS_RUN" -v --nspace kf -- dd if="$T/blob" bs=64K status=none \
	>"$T/kf.out" 2>"$T/kf.err" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/kf/0/stdout" || fail "job did not appear"
assert_eq "path" "$RUN_PATH" "$(info_get "$MNT/kf/0/info" path)"
python3 - "$SP" <<'PY' &
import glob, os, sys, time
end = time.time() + 600
while time.time() < end:
    for f in glob.glob(sys.argv[1] + "/*/*.stage"):
        try:
            fd = os.open(f, os.O_RDONLY)
            os.fdatasync(fd)
            os.close(fd)
        except OSError:
            pass
    time.sleep(0.0005)
PY
track $!
kills=0
for i in $(seq $KILLS); do
	want=$(($(spool_size) + STEP))
	wait_for 60 grown_or_done $want || fail "kill $i: $want bytes did not arrive: $(cat "$T/kf.err")"
	state_is kf 0 exited && break
	kill_daemon
	start_daemon -o spool="$SP" -o resume_window=120 -o spool_max_job=4G
	wait_for 10 test -d "$MNT/kf/0" || fail "kill $i: job not restored"
	kills=$i
	wait_for 60 resumed_or_done $i || fail "kill $i: not resumed: $(cat "$MNT/kf/0/info"; cat "$T/kf.err")"
	log "kill -9 #$i at >= $want bytes"
done
# under ASan the daemon is slow and the rank may end after 10-14 kills
[ "$kills" -ge $((KILLS / 4)) ] || fail "the rank ended after $kills kills: too fast to test"
log "$kills kills"

wait_for 120 finished $JOB || fail "forwarder did not end"
assert_eq "forwarder status" 0 "$(rc_of $JOB)"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/kf.out")"
wait_for 10 state_is kf 0 exited || fail "rank not exited: $(cat "$MNT/kf/0/info")"
assert_eq "stdout_bytes" $((MIB << 20)) "$(info_get "$MNT/kf/0/info" stdout_bytes)"
got=$(timeout 60 cat "$MNT/kf/0/stdout" | tee >(sha256sum | cut -d' ' -f1 >"$T/got.sha") | wc -c)
assert_eq "bytes in the mount" $((MIB << 20)) "$got"
wait_for 10 test -s "$T/got.sha" || fail "no checksum"
assert_eq "sha256 in the mount" "$(sha "$T/blob")" "$(cat "$T/got.sha")"
assert_eq "stdout XOFF/XON paired" "$(info_get "$MNT/kf/0/info" stdout_xoff)" "$(info_get "$MNT/kf/0/info" stdout_xon)"
# every kill but the last found the job running, so it resumed; the last
# may have come as the forwarder was ending (its EXIT acknowledged): then
# there was nothing to resume
n=$(grep -c "resumed job 'kf'" "$T/kf.err")
[ "$n" -eq "$kills" ] || [ "$n" -eq $((kills - 1)) ] ||
	fail "$n resumes logged by the forwarder for $kills kills"
grep -q "0 lost" "$T/kf.err" || fail "forwarder counted lost bytes: $(tail -n 3 "$T/kf.err")"
log "$(tail -n 2 "$T/kf.err")"
