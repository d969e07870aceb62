#!/bin/bash
# stdin through PMIx_IOF_push: to one rank (MNT/ns/<rank>/stdin) and to all
# ranks (MNT/ns/stdin), byte-exact, with EOF when the last writer closes.
#
# 1. A FUSE write is answered from its push's own callback.  The host
#    acknowledges a push once it has written it into the rank's pipe; rank 1
#    does not read until its gate opens, so a writer into it blocks once the
#    pipe is full, and what it was told it wrote (its wchar) equals what the
#    server acknowledged (stdin_bytes), with one write held (stdin_unacked).
# 2. Many writers: 20 concurrent writers into rank 2 (not reading).  The
#    kernel serialises writes to one FUSE file, so still one push is in
#    flight and the writers together were told exactly what the server
#    acknowledged; then every 64 KiB write arrives once, whole, in each
#    writer's order.
# 3. The job's stdin reaches the ranks that still take stdin (0 and 3), as
#    pushes to PMIX_RANK_WILDCARD.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/pmix/common.sh"

NW=20
CH=65536
cat >"$T/rank.sh" <<RANK
case "\$PMIX_RANK" in
1) $(gate go1) ;;
2) $(gate go2) ;;
esac
exec cat
RANK
head -c $((3 * 1024 * 1024)) /dev/urandom >"$T/a"
head -c $((200 * 1024 + 7)) /dev/urandom >"$T/b"
for i in $(seq 1 $NW); do
	head -c $((8 * CH)) /dev/urandom >"$T/w.$i"
done

start_host
start_pmix_daemon
host_cmd "job ns2:4:sh $T/rank.sh"
wait_for 20 test -e "$MNT/ns2/3/stdin" || fail "job ns2 did not appear"
for r in 0 1 2 3; do
	start_reader "$MNT/ns2/$r/stdout" "$T/got.$r"
done

# in_write PID: PID is inside write(2) (x86-64 and arm64 numbers)
in_write() {
	local nr
	nr=$(cut -d' ' -f1 "/proc/$1/syscall" 2>/dev/null)
	[ "$nr" = 1 ] || [ "$nr" = 64 ]
}
wchar() { awk '$1 == "wchar:" { print $2 }' "/proc/$1/io"; }
got_size() { [ "$(stat -c %s "$T/got.$1")" = "$2" ]; }

# --- 1. one writer, answered from the callbacks ---------------------------
dd if="$T/a" of="$MNT/ns2/1/stdin" bs=$CH status=none &
W=$!
track $W
held_back() {
	in_write $W && info_at_least ns2 1 stdin_unacked 1 &&
		info_at_least ns2 1 stdin_bytes $CH
}
wait_for 30 held_back ||
	fail "writer into a rank that does not read not held back (stdin_bytes $(info_get "$MNT/ns2/1/info" stdin_bytes), unacked $(info_get "$MNT/ns2/1/info" stdin_unacked))"
acked=$(info_get "$MNT/ns2/1/info" stdin_bytes)
unacked=$(info_get "$MNT/ns2/1/info" stdin_unacked)
wrote=$(wchar $W)
assert_eq "writer's completed bytes == server-acknowledged bytes" "$acked" "$wrote"
assert_eq "one write held in PMIx" $CH "$unacked"
touch "$T/go1"
wait_for 60 finished $W || fail "write to rank 1 did not complete"
wait $W || fail "write to rank 1 failed"
# rank 1 got EOF (its last writer closed): its cat ends
wait_for 30 got_size 1 "$(stat -c %s "$T/a")" ||
	fail "rank 1 stdout has $(stat -c %s "$T/got.1") bytes, want $(stat -c %s "$T/a")"
assert_eq "rank 1 got a" "$(sha "$T/a")" "$(sha "$T/got.1")"

# --- 2. many writers: still one push in flight per stdin file -----------
WP=()
for i in $(seq 1 $NW); do
	# notrunc: an O_TRUNC open waits for the inode lock a parked write
	# holds (docs/filesystem.md)
	dd if="$T/w.$i" of="$MNT/ns2/2/stdin" bs=$CH conv=notrunc status=none &
	WP+=($!)
	track $!
done
all_blocked() {
	local p
	for p in "${WP[@]}"; do in_write "$p" || return 1; done
}
many_held() { all_blocked && info_at_least ns2 2 stdin_unacked 1 && info_at_least ns2 2 stdin_bytes $CH; }
wait_for 30 many_held ||
	fail "$NW writers into a rank that does not read not held back (unacked $(info_get "$MNT/ns2/2/info" stdin_unacked))"
acked2=$(info_get "$MNT/ns2/2/info" stdin_bytes)
unacked2=$(info_get "$MNT/ns2/2/info" stdin_unacked)
wrote=0
for p in "${WP[@]}"; do wrote=$((wrote + $(wchar "$p"))); done
assert_eq "$NW writers' completed bytes == server-acknowledged bytes" "$acked2" "$wrote"
assert_eq "one write of $NW held in PMIx" $CH "$unacked2"
touch "$T/go2"
for p in "${WP[@]}"; do
	wait_for 60 finished "$p" || fail "writer $p into rank 2 did not complete"
	wait "$p" || fail "writer $p into rank 2 failed"
done
wait_for 30 got_size 2 $((NW * 8 * CH)) ||
	fail "rank 2 stdout has $(stat -c %s "$T/got.2") bytes, want $((NW * 8 * CH))"
python3 - "$CH" "$T/got.2" "$T"/w.* <<'EOF' || fail "rank 2 stdin is not every write once, whole, in order"
import hashlib, sys
ch = int(sys.argv[1])
def pieces(b):
    return [hashlib.sha256(b[i:i + ch]).digest() for i in range(0, len(b), ch)]
where = {}
for w, f in enumerate(sys.argv[3:]):
    for k, h in enumerate(pieces(open(f, "rb").read())):
        where[h] = (w, k)
nxt = {}
for h in pieces(open(sys.argv[2], "rb").read()):
    w, k = where.pop(h, (None, None))
    if w is None or nxt.get(w, 0) != k:
        sys.exit("unknown, duplicated or reordered write")
    nxt[w] = k + 1
if where:
    sys.exit("%d writes missing" % len(where))
EOF

# --- 3. the job's stdin: ranks 1 and 2 had EOF, 0 and 3 take it ---------
cat "$T/b" >"$MNT/ns2/stdin" || fail "write to the job's stdin failed"
wait_for 30 job_done ns2 || fail "ranks did not end after stdin EOF"
for r in 0 1 2 3; do
	wait_for 10 state_is ns2 $r exited || fail "rank $r not exited"
done
for r in 0 3; do
	assert_eq "rank $r got b" "$(sha "$T/b")" "$(sha "$T/got.$r")"
done
# ... as pushes to PMIX_RANK_WILDCARD (the host logs each push's target)
wild=$(awk '$1 == "push" && $2 == "ns2:*" && $4 != "eof" { s += $3 } END { print s + 0 }' "$T/host.log")
assert_eq "job stdin bytes pushed to ns2:*" "$(stat -c %s "$T/b")" "$wild"
per=$(awk '$1 == "push" && ($2 == "ns2:0" || $2 == "ns2:3") && $3 > 0 { n++ } END { print n + 0 }' "$T/host.log")
assert_eq "data pushes to ranks 0 and 3 one by one" 0 "$per"

for r in 1 2; do
	x=$(info_get "$MNT/ns2/$r/info" stdin_xoff)
	y=$(info_get "$MNT/ns2/$r/info" stdin_xon)
	assert_eq "rank $r stdin xoff/xon paired" "$x" "$y"
	assert_eq "rank $r stdin_unacked" 0 "$(info_get "$MNT/ns2/$r/info" stdin_unacked)"
done
assert_eq "no stdin XOFF (libpmix 4.2.2 has none to give)" 0 "$(info_get "$MNT/ns2/info" stdin_xoff)"
assert_eq "rank 1 stdin_bytes" "$(stat -c %s "$T/a")" "$(info_get "$MNT/ns2/1/info" stdin_bytes)"
assert_eq "rank 2 stdin_bytes" $((NW * 8 * CH)) "$(info_get "$MNT/ns2/2/info" stdin_bytes)"
stop_daemon
log "ok: a writer into a rank that does not read held at $acked acked + $unacked pending; $NW writers: $acked2 + $unacked2; then $((NW * 8 * CH)) bytes exact in 64 KiB writes; $(stat -c %s "$T/b") bytes to ranks 0,3 in pushes to ns2:*"
