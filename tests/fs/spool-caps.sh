#!/bin/bash
# Spool retention caps on a real mount, three daemon lives on one spool:
# -o spool_max_stream keeps a stream's newest bytes, -o spool_max_job
# takes from the job's largest streams first (a small stream keeps every
# byte), -o spool_max evicts the oldest complete job first.  For every
# stream: dropped_bytes + what a late cat gets == its size, exactly, and
# what it gets is the stream's tail, byte for byte; the spool's disk use
# stays under the caps (holes punched, file sizes kept).  And the default
# spool: on, at $IOFS_SPOOL_DIR/<mountpoint>, off with -o nospool.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

SP="$T/spool"
W=65536 # a small window, so what the caps evict is not in memory either

# check_tail NS RANK CHANNEL SIZE SEED: the stream's dropped_bytes plus a
# late cat's bytes == SIZE, and the cat is the tail of the rank's output
check_tail() {
	local ns=$1 r=$2 ch=$3 size=$4 seed=$5 got dropped
	got=$(timeout 30 cat "$MNT/$ns/$r/$ch" | wc -c)
	dropped=$(info_get "$MNT/$ns/$r/info" dropped_bytes)
	assert_eq "$ns/$r/$ch: dropped $dropped + read $got" "$size" $((dropped + got))
	# what a cap took from its start, read or not (dropped: unread only)
	[ "$(info_get "$MNT/$ns/$r/info" evicted_bytes)" -ge "$dropped" ] ||
		fail "$ns/$r: evicted_bytes $(info_get "$MNT/$ns/$r/info" evicted_bytes) < dropped $dropped"
	assert_eq "$ns/$r/$ch: the newest $got bytes" \
		"$("$PRODUCE" -n "$size" -s "$seed" | tail -c "$got" | sha256sum | cut -d' ' -f1)" \
		"$(timeout 30 cat "$MNT/$ns/$r/$ch" | sha256sum | cut -d' ' -f1)"
	echo "$dropped"
}

# merged_exact NS: merged_dropped_bytes + a late cat of the merged stdout
# == its size
merged_exact() {
	local size got md
	size=$(stat -c %s "$MNT/$1/stdout")
	got=$(timeout 30 cat "$MNT/$1/stdout" | wc -c)
	md=$(info_get "$MNT/$1/info" merged_dropped_bytes)
	assert_eq "$1 merged: dropped $md + read $got" "$size" $((md + got))
}

# disk_kb NS: kB the spool's files of job NS take (holes excluded)
disk_kb() {
	local d
	d=$(grep -lx "$1" "$SP"/*/nspace | head -n 1) || fail "no spool dir of $1"
	du -sk "$(dirname "$d")" | cut -f1
}

# 1. -o spool_max_stream=256K: 2 MiB through a rank, nobody reading
start_daemon -o spool="$SP",window=$W,spool_max_stream=256K,spool_max_job=none,spool_max=none
run_job s 1 "$PRODUCE" -n 2M -s 1
wait_for 60 exited "$MNT/s/info" || fail "job s did not end"
sb=$(info_get "$MNT/s/0/info" spool_bytes)
[ "$sb" -le $((256 << 10)) ] && [ "$sb" -ge $((224 << 10)) ] || fail "s: spool_bytes $sb not in [7/8 cap, cap]"
d=$(check_tail s 0 stdout $((2 << 20)) 1)
[ "$d" -gt 0 ] || fail "s: nothing dropped"
merged_exact s
f=$(dirname "$(grep -lx s "$SP"/*/nspace)")/0.stdout
assert_eq "s: file size kept" $((2 << 20)) "$(stat -c %s "$f")"
[ $(($(stat -c %b "$f") * 512)) -le $(((256 + 8) << 10)) ] || fail "s: $(stat -c %b "$f") blocks on disk"
log "stream cap 256K: $sb bytes kept of 2 MiB, dropped $d, tail exact, $(disk_kb s) kB on disk"

stop_daemon

# 1b. kill -9 under a job cap, two ranks printing lines: the cap evicts
#     the ranks' oldest bytes (not the view's: it takes from the ranks, the
#     view follows) and punches the merged view's records of them out of
#     its index, which keeps what they held in stdout.cov.  The restart
#     completes the view from the rank files (its last batch was not
#     stored): each rank's bytes in it are the rank file's tail, to its
#     last byte, once (before: the view's index could not tell and the
#     view lacked its last batch).
KC="spool=$SP,window=$W,spool_max_job=512K,spool_max_stream=none,spool_max=none"
start_daemon -o "$KC"
run_job kc 2 sh -c "exec $PRODUCE -l -n 1G -s \$IOFS_RANK"
for r in 0 1; do
	wait_for 30 size_ge "$MNT/kc/$r/stdout" $((8 << 20)) || fail "kc/$r: no output"
done
kill_daemon
kill -TERM "$JOB_PID" 2>/dev/null
wait_exit 10 "$JOB_PID" || fail "kc: forwarder did not stop"
kcdir=$(dirname "$(grep -lx kc "$SP"/*/nspace | head -n 1)") || fail "no spool dir of kc"
test -s "$kcdir/stdout.cov" || fail "kc: the view's index was not punched (no stdout.cov): $(ls "$kcdir")"
start_daemon -o "$KC"
wait_for 10 test -d "$MNT/kc/1" || fail "kc not restored"
for r in 0 1; do timeout 30 cat "$MNT/kc/$r/stdout" >"$T/kc.want$r"; done
timeout 30 cat "$MNT/kc/stdout" >"$T/kc.merged" || fail "kc: cat of the merged view"
python3 "$IOFS_SOURCE_DIR/tests/fs/merged_ranks.py" "$T/kc.merged" kc 2 "$T/kc.want" suffix >"$T/kc.check" ||
	fail "kc: the completed view does not end with each rank's bytes: $(cat "$T/kc.check")"
log "kill -9 under the job cap: the view ($(stat -c %s "$T/kc.merged") bytes) ends with each rank's bytes, once: $(tr '\n' ' ' <"$T/kc.check")"
stop_daemon

# 1c. The same, twice, the job living on between the kills: the forwarder
#     resumes on the restarted daemon, whose view was completed from
#     stdout.cov and now takes more punches: the cov it writes must build
#     on the one it loaded (the ranks' covers only grow).  After the second
#     kill -9 the view is completed again, each rank's bytes its file's
#     tail, once (the job ended on the third daemon, its forwarder having
#     held the end); and a clean restart after that feeds nothing again.
kd_life() {
	start_daemon -o "$KC" -o resume_window=60
	wait_for 10 test -d "$MNT/kd/1" || fail "kd not restored"
}
kd_linked() { [ "$(info_get "$MNT/kd/$1/info" link)" = connected ]; }
kd_cov() { od -An -tu8 -j8 "$kddir/stdout.cov" | tr -s ' \n' ' '; }
start_daemon -o "$KC" -o resume_window=60
# 1 MiB of lines every 50 ms or so: still running after the second kill
IOFS_RECONNECT_TIMEOUT=60 run_job kd 2 sh -c "while :; do $PRODUCE -l -n 1M -s \$IOFS_RANK || exit; sleep 0.05; done"
for r in 0 1; do
	wait_for 30 size_ge "$MNT/kd/$r/stdout" $((8 << 20)) || fail "kd/$r: no output"
done
kill_daemon
kddir=$(dirname "$(grep -lx kd "$SP"/*/nspace | head -n 1)") || fail "no spool dir of kd"
test -s "$kddir/stdout.cov" || fail "kd: no stdout.cov after the first kill"
cov1=$(kd_cov)
kd_life
for r in 0 1; do
	at=$(stat -c %s "$MNT/kd/$r/stdout")
	wait_for 60 kd_linked "$r" || fail "kd/$r not resumed: $(cat "$MNT/kd/$r/info")"
	wait_for 30 size_ge "$MNT/kd/$r/stdout" $((at + (8 << 20))) || fail "kd/$r: no output after the resume"
done
kill_daemon
cov2=$(kd_cov)
[ "$cov2" != "$cov1" ] || fail "kd: stdout.cov not rewritten in the second life ($cov1)"
# (rank, cover) pairs: each rank's cover grew (od prints rank+pad as one word)
python3 - "$cov1" "$cov2" <<'EOF' || fail "kd: a cover went back: $cov1 -> $cov2"
import sys
a, b = ([int(x) for x in s.split()] for s in sys.argv[1:3])
ca, cb = dict(zip(a[0::2], a[1::2])), dict(zip(b[0::2], b[1::2]))
sys.exit(0 if len(cb) == 2 and all(cb[k] > v for k, v in ca.items()) else 1)
EOF
# the job is told to end while the daemon is down: its forwarder holds
# the end until the third life takes it back
kill -TERM "$JOB_PID"
kd_life
wait_exit 60 "$JOB_PID" || fail "kd: forwarder did not end"
wait_for 10 job_done kd || fail "kd not done: $(cat "$MNT/kd/info")"
for r in 0 1; do timeout 30 cat "$MNT/kd/$r/stdout" >"$T/kd.want$r"; done
timeout 30 cat "$MNT/kd/stdout" >"$T/kd.merged" || fail "kd: cat of the merged view"
python3 "$IOFS_SOURCE_DIR/tests/fs/merged_ranks.py" "$T/kd.merged" kd 2 "$T/kd.want" suffix >"$T/kd.check" ||
	fail "kd: after two kills the view does not end with each rank's bytes: $(cat "$T/kd.check")"
md=$(info_get "$MNT/kd/info" merged_dropped_bytes)
stop_daemon
kd_life
timeout 30 cat "$MNT/kd/stdout" >"$T/kd.again"
cmp -s "$T/kd.again" "$T/kd.merged" ||
	fail "kd: a clean restart changed the view: $(wc -c <"$T/kd.merged") -> $(wc -c <"$T/kd.again") bytes, $(cmp "$T/kd.merged" "$T/kd.again" 2>&1); merged_dropped_bytes $md -> $(info_get "$MNT/kd/info" merged_dropped_bytes); $(tail -c 300 "$T/kd.merged" | od -c | tail -3) / $(tail -c 300 "$T/kd.again" | od -c | tail -3)"
grep -q "put in the merged view again" "$T/iofs.log" && fail "kd: a clean restart fed bytes again"
log "two kill -9 under the job cap, resumed between: covers $cov1 -> $cov2; the view ($(stat -c %s "$T/kd.merged") bytes) ends with each rank's bytes, once"
stop_daemon

# 1d. less +G of a stream and a view whose start a cap evicted shows their
#     last lines: a reader the skew rule moved past the evicted start (less
#     reads its first page from 0) reads absolute offsets again once it
#     seeks (less's G).  Before, the skew stayed and the end read as
#     nothing: an empty screen (seen by hand on a Slurm job's view).
start_daemon -o spool="$SP",window=$W,spool_max_job=512K,spool_max_stream=none,spool_max=none
run_job ld 1 seq 1 400000
wait_for 60 exited "$MNT/ld/info" || fail "job ld did not end"
[ "$(info_get "$MNT/ld/0/info" dropped_bytes)" -gt 0 ] || fail "ld: nothing evicted"
PTYWATCH="$IOFS_SOURCE_DIR/tests/fs/ptywatch.py"
python3 "$PTYWATCH" 10 "-=400000" -- less +G "$MNT/ld/0/stdout" >"$T/ld.pty" ||
	fail "less +G of ld/0/stdout did not show its last line: $(tail -c 300 "$T/ld.pty" | od -c | tail -5)"
python3 "$PTYWATCH" 10 "-=<stdout>: 400000" -- less +G "$MNT/ld/stdout" >"$T/ld.pty" ||
	fail "less +G of ld/stdout did not show its last line: $(tail -c 300 "$T/ld.pty" | od -c | tail -5)"
assert_eq "ld: tail -n 1" 400000 "$(tail -n 1 "$MNT/ld/0/stdout")"
log "less +G of a capped rank file and view: the last line shown"
# 1e. Backward readers of the same files (tac, tail -n N above the kept
#     lines): the evicted start reads as zeros, as a punched hole does,
#     and every kept byte comes once, where st_size puts it.  Before, each
#     block read in the evicted part returned the kept bytes again: tac
#     printed 384,323 lines of 65,811, tail -n 100000 missed 941 of them.
for f in "$MNT/ld/0/stdout" "$MNT/ld/stdout"; do
	timeout 30 cat "$f" >"$T/ld.cat" || fail "cat $f"
	timeout 30 tac "$f" >"$T/ld.tac" || fail "tac $f failed"
	timeout 30 tail -n 1000000 "$f" >"$T/ld.tail" || fail "tail -n of $f failed"
	size=$(stat -c %s "$f")
	kept=$(stat -c %s "$T/ld.cat")
	[ "$kept" -lt "$size" ] || fail "$f: nothing evicted ($kept of $size)"
	assert_eq "$f: tac's zeros" $((size - kept)) "$(tr -cd '\0' <"$T/ld.tac" | wc -c)"
	assert_eq "$f: tac without its zeros" "$(tac "$T/ld.cat" | sha256sum)" \
		"$(tr -d '\0' <"$T/ld.tac" | sha256sum)"
	assert_eq "$f: tail -n 1000000's zeros" $((size - kept)) "$(tr -cd '\0' <"$T/ld.tail" | wc -c)"
	assert_eq "$f: tail -n 1000000 without its zeros" "$(sha256sum <"$T/ld.cat")" \
		"$(tr -d '\0' <"$T/ld.tail" | sha256sum)"
done
log "tac and tail -n of a capped rank file and view: each kept byte once, the evicted start as zeros"
stop_daemon

# 2. -o spool_max_job=512K: rank 0 prints 2 MiB, rank 1 a little on
#    stderr; the job keeps at most 512K, rank 1 every byte.
start_daemon -o spool="$SP",window=$W,spool_max_job=512K,spool_max=none
run_job j 2 sh -c "if [ \$IOFS_RANK = 0 ]; then exec $PRODUCE -n 2M -s 2; else $PRODUCE -n 3000 -s 3 >&2; fi"
wait_for 60 exited "$MNT/j/info" || fail "job j did not end"
sb=$(info_get "$MNT/j/info" spool_bytes)
[ "$sb" -le $((512 << 10)) ] || fail "j: spool_bytes $sb > 512K"
d0=$(check_tail j 0 stdout $((2 << 20)) 2)
d1=$(check_tail j 1 stderr 3000 3)
assert_eq "j: rank 1 dropped" 0 "$d1"
[ "$d0" -gt 0 ] || fail "j: rank 0 lost nothing"
merged_exact j
[ "$(disk_kb j)" -le $((512 + 32)) ] || fail "j: $(disk_kb j) kB on disk"
log "job cap 512K: $sb bytes kept, rank 0 dropped $d0, rank 1 every byte"
# 2b. The same cap, a job run with --xml: its merged view is stored as it
#     is (a second, escaped copy of the rank's bytes, which evicting the
#     rank's file does not reach); the cap takes from it too, the largest
#     stream first.  Before, nothing capped it: the view's files grew with
#     the output whatever the caps (1.8 MB kept of a 1 MB job under a
#     128 KiB cap, router-spool-caps literal_view_job_and_total_cap).
"$IOFS_RUN" --connect "$ADDR" --nspace jx -n 1 --xml -- "$PRODUCE" -n 2M -s 4 \
	>"$T/run-jx.out" 2>&1 &
track $!
wait_for 60 exited "$MNT/jx/info" || fail "job jx did not end: $(cat "$T/run-jx.out")"
sb=$(info_get "$MNT/jx/info" spool_bytes)
[ "$sb" -le $((512 << 10)) ] || fail "jx: spool_bytes $sb > 512K"
[ "$(disk_kb jx)" -le $((512 + 32)) ] || fail "jx: $(disk_kb jx) kB on disk"
dx=$(check_tail jx 0 stdout $((2 << 20)) 4)
merged_exact jx
mdx=$(info_get "$MNT/jx/info" merged_dropped_bytes)
[ "$mdx" -gt 0 ] || fail "jx: the XML view lost nothing under the cap"
# what is left is the view's tail, XML (a late reader's first element
# may be cut: the cap cuts whole blocks, as for a rank's stream)
tail -c 4096 "$MNT/jx/stdout" | grep -aq '</stdout>$' ||
	fail "jx: not an XML view: $(tail -c 100 "$MNT/jx/stdout" | od -c | tail -4)"
log "job cap 512K, --xml: $sb bytes kept ($(disk_kb jx) kB on disk), rank dropped $dx, view dropped $mdx"
# the earlier life's capped job came back as it was
assert_eq "s restored: dropped" "$d" "$(info_get "$MNT/s/0/info" dropped_bytes)"
stop_daemon

# 3. -o spool_max=4M: s and j (complete in earlier lives, ~0.75 MB) and
#    two complete jobs (1.2 MB each; a merged view counts what its index
#    files take, a few kB) fit; a third (1.8 MB) pushes the spool over:
#    the oldest complete jobs go first (s, j, then o1), until it is 1/8
#    under the cap; o2 and o3 keep every byte.
start_daemon -o spool="$SP",window=$W,spool_max=4M,spool_max_job=none
for ns in o1 o2; do
	run_job $ns 1 "$PRODUCE" -n 1200K -s 4
	wait_for 60 exited "$MNT/$ns/info" || fail "job $ns did not end"
done
o1=$(info_get "$MNT/o1/info" spool_bytes)
[ "$(info_get "$MNT/o1/info" dropped_bytes)" = 0 ] || fail "o1 lost bytes before the cap was reached"
run_job o3 1 "$PRODUCE" -n 1800K -s 5
wait_for 60 exited "$MNT/o3/info" || fail "job o3 did not end"
for ns in s j o1; do
	[ "$(info_get "$MNT/$ns/info" spool_bytes)" -lt 16384 ] || fail "$ns kept $(info_get "$MNT/$ns/info" spool_bytes) bytes"
done
d=$(check_tail o1 0 stdout $((1200 << 10)) 4)
assert_eq "o1: all but the window dropped" $(((1200 << 10) - W)) "$d"
merged_exact o1
for ns in o2 o3; do
	assert_eq "$ns dropped" 0 "$(info_get "$MNT/$ns/info" dropped_bytes)"
	assert_eq "$ns merged dropped" 0 "$(info_get "$MNT/$ns/info" merged_dropped_bytes)"
done
check_tail o3 0 stdout $((1800 << 10)) 5 >/dev/null
total=$(du -sk "$SP" | cut -f1)
[ "$total" -le $((4096 + 64)) ] || fail "spool takes $total kB > 4 MiB"
log "total cap 4M: s, j and o1 evicted (o1 keeps its window), o2 ($o1 bytes) and o3 whole; spool $total kB"
stop_daemon

# 3b. Short lines under a job cap the rank fits in: the merged view is 9.5
#     times the rank's bytes (the tags) but an index on disk; it counts
#     that, nothing of it is cut, and it reads back whole, from its first
#     line (found by hand: `yes | head -c 300M` under the default 1 GiB job
#     cap lost 2.3 GB of the view, which began mid-line).
start_daemon -o spool="$SP",window=$W,spool_max_job=8M,spool_max=none
run_job y 1 sh -c "yes | head -c 6M"
wait_for 60 exited "$MNT/y/info" || fail "job y did not end"
assert_eq "y dropped" 0 "$(info_get "$MNT/y/info" dropped_bytes)"
assert_eq "y merged dropped" 0 "$(info_get "$MNT/y/info" merged_dropped_bytes)"
sb=$(info_get "$MNT/y/info" spool_bytes)
[ "$sb" -ge $((6 << 20)) ] && [ "$sb" -le $((7 << 20)) ] || fail "y: spool_bytes $sb, not about the rank's 6 MiB"
timeout 60 cat "$MNT/y/stdout" >"$T/y.merged" || fail "cat of y/stdout"
assert_eq "y merged lines" $((3 << 20)) "$(wc -l <"$T/y.merged")"
assert_eq "y merged: every line whole and tagged" 0 "$(grep -vcx '\[y,0\]<stdout>: y' "$T/y.merged")"
[ "$(disk_kb y)" -le $((6144 + 512)) ] || fail "y: $(disk_kb y) kB on disk"
log "short lines: the merged view ($(stat -c %s "$T/y.merged") bytes) whole under an 8M job cap; spool_bytes $sb, $(disk_kb y) kB on disk"
rm -f "$T/y.merged"
stop_daemon

# 4. The default spool: on, under $IOFS_SPOOL_DIR, keyed by the mount;
#    -o nospool: none.
start_daemon
run_job dflt 1 "$PRODUCE" -n 100K -s 6
wait_for 30 exited "$MNT/dflt/info" || fail "job dflt did not end"
key=$(echo "${MNT#/}" | sed 's|-|%2D|g; s|/|-|g') # '-' escaped: '/' is '-'
grep -qx dflt "$IOFS_SPOOL_DIR/$key"/*/nspace || fail "no default spool at $IOFS_SPOOL_DIR/$key: $(ls -R "$IOFS_SPOOL_DIR" | head)"
[ "$(info_get "$MNT/dflt/info" spool_bytes)" -gt 0 ] || fail "dflt: nothing in the spool"
# a second daemon on the same spool is refused, with the reason
mkdir "$T/mnt2"
timeout 10 "$IOFS" -f --listen "unix:$T/x.sock" -o spool="$IOFS_SPOOL_DIR/$key" "$T/mnt2" >"$T/two.out" 2>&1 &&
	fail "a second daemon on the spool was accepted"
file_has "$T/two.out" "in use by another iofs daemon" || fail "no reason: $(cat "$T/two.out")"
stop_daemon
start_daemon -o nospool
[ ! -e "$MNT/dflt" ] || fail "-o nospool restored jobs"
run_job none 1 "$PRODUCE" -n 100K -s 7
wait_for 30 exited "$MNT/none/info" || fail "job none did not end"
assert_eq "nospool: spool_bytes" 0 "$(info_get "$MNT/none/info" spool_bytes)"
stop_daemon
# bad sizes are refused
timeout 10 "$IOFS" -f -o spool_max=12Q "$T/mnt2" >"$T/bad.out" 2>&1 && fail "spool_max=12Q accepted"
file_has "$T/bad.out" "bad -o spool_max=12Q" || fail "no reason: $(cat "$T/bad.out")"
log "ok"
