#!/bin/bash
# Case 4: a rank writes 64 MiB as fast as it can while the reader of
# MNT/<nspace>/0/stdout reads at ~1 MiB/s for a while, then at full speed.
# Expect XOFF > 0, XOFF == XON, every byte in order (sha256), the producer
# held back while the reader lagged, and the daemon's RSS bounded (window +
# a constant), not growing with the 64 MiB.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
SIZE=$((64 << 20))
SLOW=$((4 << 20))
start_daemon
rss0=$(proc_status $DAEMON_PID VmRSS)

# The rank prints a first line, then waits for one byte of stdin (sent once
# the reader holds the file open) before producing: no byte can be
# discarded before the reader is attached.
gated_producer sr 64M 51 "$T/want"
RUN=$GATED_PID
"$PACE" -i "$MNT/sr/0/stdout" -c 64K -r 1M -f $SLOW -o "$T/got" -t 2>"$T/pace.t" &
READER=$!
track $READER
wait_for 10 fd_open $READER "$MNT/sr/0/stdout" || fail "reader did not open the stream"
open_gate sr

# While the reader is slow (4 MiB at 1 MiB/s), the producer must be held
# back: sample once the reader has taken 2 MiB.
wait_for 20 size_ge "$T/got" $((2 << 20)) || fail "reader made no progress"
held=$(info_get "$MNT/sr/0/info" stdout_bytes)
mid_xoff=$(info_get "$MNT/sr/0/info" stdout_xoff)
[ "$held" -lt $((24 << 20)) ] || fail "producer not held back: $held bytes produced when the 1 MiB/s reader had 2 MiB"
[ "${mid_xoff:-0}" -gt 0 ] || fail "no XOFF while the reader lagged"

wait_exit 120 $READER || fail "reader did not finish"
wait $READER || fail "reader failed"
wait_exit 30 $RUN || fail "rank did not finish"
wait $RUN || fail "iofs-run status $?"
assert_eq "bytes read" "$(stat -c %s "$T/want")" "$(stat -c %s "$T/got")"
assert_eq "sha256" "$(sha "$T/want")" "$(sha "$T/got")"
INFO="$MNT/sr/0/info"
assert_eq "path (lib.sh RUN_PATH)" "$RUN_PATH" "$(info_get "$INFO" path)"
xoff=$(info_get "$INFO" stdout_xoff)
xon=$(info_get "$INFO" stdout_xon)
assert_eq "stdout XOFF == XON" "$xoff" "$xon"
assert_eq "dropped bytes" 0 "$(info_get "$INFO" dropped_bytes)"
hwm=$(proc_status $DAEMON_PID VmHWM)
growth_kb=$((hwm - rss0))
if is_asan "$IOFS"; then
	log "ASan build: RSS bound not asserted (shadow memory, quarantine); growth ${growth_kb} kB"
else
	# window (1 MiB) + in-flight slack; far below the 64 MiB produced
	[ $growth_kb -lt $((16 * 1024)) ] || fail "daemon RSS grew by ${growth_kb} kB for a 64 MiB stream"
fi
figures stdout-slow-reader bytes=$(stat -c %s "$T/got") sha256_match=yes xoff=$xoff xon=$xon \
	produced_at_2MiB_read=$held reader_s=$(awk '{print $2}' "$T/pace.t") rss_growth_kb=$growth_kb peak_rss_kb=$hwm
stop_daemon
