#!/bin/bash
# Following live ranks the way users do (issue 11 defects 2 and 3): no open()
# waits for a first byte.  tail -f / tail -F over every rank while one never
# writes shows each line within ~2 s; tail -f -n +1 and less +F under a pty
# show a line that comes later; an interactive driver opens stdout BEFORE
# stdin and gets 20 answers; cat of an empty live rank follows it to its
# exact end; only a descriptor that asked for its end reads 0 at the live
# end; a reader that opens and never reads still XOFFs the producer.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

PTYWATCH="$IOFS_SOURCE_DIR/tests/fs/ptywatch.py"
LIMIT_MS=2500 # tail polls once a second; the rest is slack for a loaded host
now_ms() { echo $(($(date +%s%N) / 1000000)); }

start_daemon

# three_ranks NS: ranks 0 and 2 print "line R K" after gate NS-R-K (K=1..3);
# rank 1 never writes stdout; everyone ends at gate NS-end
three_ranks() {
	run_job "$1" 3 sh -c "if [ \$IOFS_RANK != 1 ]; then for k in 1 2 3; do \
		$(gate "$1-\$IOFS_RANK-\$k"); echo \"line \$IOFS_RANK \$k\"; done; fi; \
		$(gate "$1-end")"
}

# follows WHAT NS OUT: open each gate in turn, each line must reach OUT
# within LIMIT_MS; prints the worst latency
follows() {
	local what=$1 ns=$2 out=$3 k r t0 lat max=0
	for k in 1 2 3; do
		for r in 0 2; do
			t0=$(now_ms)
			touch "$T/$ns-$r-$k"
			wait_for 10 file_has "$out" "line $r $k" ||
				fail "$what: 'line $r $k' never shown (rank 1 is silent): $(cat "$out")"
			lat=$(($(now_ms) - t0))
			[ $lat -le $LIMIT_MS ] || fail "$what: 'line $r $k' took $lat ms"
			[ $lat -le $max ] || max=$lat
		done
	done
	figures "follow-${what// /}" max_latency_ms=$max
	log "$what: every line within $max ms"
}

# tail -f, tail -F, and tail -f counting from the end (the documented way
# to see everything so far and follow every rank) over all ranks, rank 1
# silent
i=0
for opts in "-f" "-F" "-f -n 100000"; do
	i=$((i + 1))
	ns=t$i
	three_ranks $ns
	# shellcheck disable=SC2086 # the options' words
	tail $opts "$MNT/$ns"/*/stdout >"$T/$ns.out" 2>"$T/$ns.err" &
	TP=$!
	track $TP
	follows "tail $opts" $ns "$T/$ns.out"
	grep -q "==> $MNT/$ns/1/stdout <==" "$T/$ns.out" || fail "tail $opts: no header for the silent rank"
	touch "$T/$ns-end"
	wait_for 10 job_done $ns || fail "job $ns did not end"
	kill $TP
done

# tail -f -n +1 and less +F under a pty, on a rank empty at open: the line
# that comes later is shown (a parked read at the live end; see
# docs/filesystem.md for tail -n +N over several files)
i=0
for cmd in "tail -f -n +1" "less +F"; do
	i=$((i + 1))
	run_job pty$i 1 sh -c "$(gate pty$i-1); echo first line; $(gate pty$i-2); echo later line; $(gate pty$i-end)"
	# shellcheck disable=SC2086 # the command's words
	timeout 60 python3 "$PTYWATCH" 10 "$T/pty$i-1=first line,$T/pty$i-2=later line" \
		-- $cmd "$MNT/pty$i/0/stdout" >"$T/pty.lat" 2>"$T/pty.err" ||
		fail "$cmd: $(cat "$T/pty.err")"
	lat=$(awk '/later line/ { print $NF }' "$T/pty.lat")
	[ "$lat" -le $LIMIT_MS ] || fail "$cmd: the later line took $lat ms"
	log "$cmd: the later line shown after $lat ms"
	touch "$T/pty$i-end"
done

# interactive driver: stdout opened FIRST, then stdin; 20 request/answers
run_job drv 1 sh -c 'while read -r l; do echo "ans $l"; done; echo bye'
timeout 60 python3 - "$MNT/drv/0/stdout" "$MNT/drv/0/stdin" >"$T/drv.out" 2>&1 <<'PY' || fail "driver: $(cat "$T/drv.out")"
import os, select, sys, time
out = os.open(sys.argv[1], os.O_RDONLY)  # before the rank has said anything
inp = open(sys.argv[2], "w")
buf = b""

def line(deadline):
    global buf
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            sys.exit(f"no answer in time; have {buf!r}")
        if select.select([out], [], [], left)[0]:
            data = os.read(out, 4096)
            if not data:
                sys.exit(f"EOF; have {buf!r}")
            buf += data
    l, buf = buf.split(b"\n", 1)
    return l.decode()

for k in range(20):
    inp.write(f"req {k}\n")
    inp.flush()
    got = line(time.monotonic() + 10)
    if got != f"ans req {k}":
        sys.exit(f"request {k}: answer {got!r}")
inp.close()  # last writer gone: the rank reads EOF and says bye
if line(time.monotonic() + 10) != "bye":
    sys.exit("no bye")
while os.read(out, 4096):
    pass
print("20 answers")
PY
wait_for 10 job_done drv || fail "driver's rank did not end"

# cat of a rank that is empty and live at open: follows, ends exactly at
# the rank's end
run_job cat 1 sh -c "$(gate cat-go); exec \"$PRODUCE\" -n 300000 -s 11"
"$PRODUCE" -n 300000 -s 11 >"$T/cat.want"
cat "$MNT/cat/0/stdout" >"$T/cat.got" &
CAT=$!
track $CAT
# blocked in a read at the live end (it must not have read EOF)
wait_for 10 grep -q request_wait_answer /proc/$CAT/wchan || fail "cat is not waiting at the live end"
touch "$T/cat-go"
wait_for 20 finished $CAT || fail "cat did not end with the rank"
assert_eq "cat status" 0 "$(rc_of $CAT)"
assert_eq "cat bytes" 300000 "$(stat -c %s "$T/cat.got")"
assert_eq "cat content" "$(sha "$T/cat.want")" "$(sha "$T/cat.got")"
wait_for 10 exited "$MNT/cat/0/info" || fail "cat rank did not end"

# the rule itself, per descriptor: SEEK_END or SEEK_DATA makes reads at the
# live end return 0 (O_NONBLOCK too); SEEK_SET/SEEK_CUR and fstat do not
run_job fm 1 sh -c "$(gate fm-end)"
timeout 30 python3 - "$MNT/fm/0/stdout" >"$T/fm.out" 2>&1 <<'PY' || fail "file-mode rule: $(cat "$T/fm.out")"
import errno, fcntl, os, select, sys
path = sys.argv[1]
def parked(fd):  # a blocking read would wait: poll says not readable
    return not select.select([fd], [], [], 0.3)[0]
plain = os.open(path, os.O_RDONLY)
os.fstat(plain); os.lseek(plain, 0, os.SEEK_SET); os.lseek(plain, 0, os.SEEK_CUR)
assert parked(plain), "a plain descriptor is readable at the live end"
for whence in (os.SEEK_END, os.SEEK_DATA):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.lseek(fd, 0, whence)
    except OSError as e:  # SEEK_DATA at the end of data: ENXIO
        assert e.errno == errno.ENXIO, e
    assert os.read(fd, 100) == b"", f"whence {whence}: not EOF"
    fcntl.fcntl(fd, fcntl.F_SETFL, os.O_NONBLOCK)
    assert os.read(fd, 100) == b"", f"whence {whence}: O_NONBLOCK not EOF"
    os.close(fd)
fcntl.fcntl(plain, fcntl.F_SETFL, os.O_NONBLOCK)
try:
    os.read(plain, 100)
    sys.exit("O_NONBLOCK read at the live end did not fail")
except BlockingIOError:
    pass
print("ok")
PY
touch "$T/fm-end"

# a reader that opens (the rank still empty) and never reads holds the
# producer back; closing it releases it; XOFF == XON at the end
run_job x 1 sh -c "$(gate x-go); exec \"$PRODUCE\" -n 4000000 -s 5"
exec 5<"$MNT/x/0/stdout" # must not wait for the first byte
touch "$T/x-go"
wait_for 20 info_at_least x 0 stdout_xoff 1 || fail "an idle reader did not XOFF the producer"
b=$(info_get "$MNT/x/0/info" stdout_bytes)
[ "$b" -lt 4000000 ] || fail "the producer was not held back ($b bytes)"
assert_eq "still running" running "$(info_get "$MNT/x/0/info" state)"
exec 5<&-
wait_for 20 exited "$MNT/x/0/info" || fail "the producer did not finish after the reader closed"
I=$MNT/x/0/info
assert_eq "stdout_bytes" 4000000 "$(info_get "$I" stdout_bytes)"
assert_eq "xoff == xon" "$(info_get "$I" stdout_xoff)" "$(info_get "$I" stdout_xon)"

for ns in t1 t2 t3; do wait_for 10 job_done $ns || fail "$ns still running"; done
stop_daemon
log "ok"
