#!/bin/bash
# Lines far longer than any I/O buffer from two ranks at once: lines of
# 4097, 65537, 200 000 and 500 000 bytes and 2 000 lptest-style 79-byte
# lines each.  The per-rank files are exact; `wc -L`, `grep -c` through the
# mount agree; the merged view (read from the start) rebuilds each rank's
# bytes exactly (a long line interrupted by the other rank continues under
# a "+ " tag: docs/design.md "Partial lines").
# Models Slurm's test1.56 (lines longer than slurmstepd's 4 KiB buffer) and
# flux-core's job-shell tests (lptest 79 10000).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

cat >"$T/gen.py" <<'EOF2'
import sys
r = int(sys.argv[1])
out = sys.stdout
for n in (4097, 65537, 200000, 500000):
    out.write(chr(ord("A") + r) * n + "\n")
for i in range(2000):
    out.write("".join(chr(33 + (i + j) % 94) for j in range(79)) + "\n")
EOF2
for r in 0 1; do python3 "$T/gen.py" $r >"$T/exp.$r"; done
[ "$(stat -c %s "$T/exp.0")" -lt $((1 << 20)) ] || fail "per-rank output must fit the 1 MiB window"
"$IOFS_RUN" --nspace long -n 2 -- sh -c "$(gate go); python3 $T/gen.py \$IOFS_RANK" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/long/1/stdout" || fail "ranks did not appear"
start_reader "$MNT/long/stdout" "$T/merged"
MERGED=$READER_PID
touch "$T/go"
wait_for 60 finished $JOB || fail "iofs-run did not end"
assert_eq "iofs-run status" 0 "$(rc_of $JOB)"
wait_for 30 finished $MERGED || fail "merged reader did not end"
for r in 0 1; do
	timeout 10 cat "$MNT/long/$r/stdout" >"$T/got.$r"
	expect_bytes "rank $r" "$T/exp.$r" "$T/got.$r"
	assert_eq "rank $r wc -L" 500000 "$(timeout 10 wc -L <"$MNT/long/$r/stdout")"
	assert_eq "rank $r grep -c" 2004 "$(timeout 10 grep -c '' "$MNT/long/$r/stdout")"
	flow_paired long $r
done
cont=$($DRIVE rebuild long "$T/merged" "$T/rebuilt") || fail "merged view not rebuildable"
for r in 0 1; do expect_bytes "rank $r rebuilt from the merged view" "$T/exp.$r" "$T/rebuilt.$r"; done
assert_eq "merged_dropped_bytes" 0 "$(info_get "$MNT/long/info" merged_dropped_bytes)"
log "OK ($cont continuation lines in the merged view)"
