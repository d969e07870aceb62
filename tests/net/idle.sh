#!/bin/bash
# Idle is normal (issue 11, defect 1): a rank that prints nothing for 32 s,
# over a Unix socket and over loopback TCP, and two mpirun ranks silent for
# 12 s stay attached.  Their later output lands in MNT/<job>/<rank>/stdout
# byte-exact, nothing reaches iofs-run's own terminal, every rank ends
# 'exited' (a rank once lost stays lost), and the daemon logs no drop.
# All three jobs run at the same time: the suite pays the silence once.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

SILENCE=32
PORT=$((21000 + $$ % 20000))
# TCP needs MUNGE by default; this suite has no munged (tests/security does)
start_daemon --listen "tcp:127.0.0.1:$PORT" -o auth=none

quiet_rank='echo a; sleep "$0"; echo b'
"$IOFS_RUN" --nspace qu -- sh -c "$quiet_rank" $SILENCE >"$T/qu.out" 2>"$T/qu.err" &
QU=$!
track $QU
"$IOFS_RUN" --connect "tcp:127.0.0.1:$PORT" --nspace qt -- sh -c "$quiet_rank" $SILENCE \
	>"$T/qt.out" 2>"$T/qt.err" &
QT=$!
track $QT
MPI=
if command -v mpirun >/dev/null; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	export OMPI_MCA_btl=self,vader OMPI_MCA_plm=isolated OMPI_MCA_rmaps_base_oversubscribe=1
	timeout 120 mpirun --oversubscribe -n 2 "$IOFS_RUN" --nspace qm -- \
		sh -c 'echo begin; sleep 12; echo end' >"$T/qm.out" 2>&1 &
	MPI=$!
	track $MPI
else
	log "no mpirun: the mpirun case is skipped"
fi

# A greeting trickled one byte every 2 s: the HELLO deadline counts from
# the connect, it is not a read timeout that each byte re-arms.
python3 - "$SOCK" >"$T/trickle.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
t0 = time.monotonic()
try:
    for b in b'\x40\x00\x00\x00\x01' + b'\x00' * 60:
        s.send(bytes([b]))
        time.sleep(2)
except OSError:
    pass
s.settimeout(10)
try:
    while s.recv(4096):
        pass
except OSError:
    pass
print('closed after %.0f s' % (time.monotonic() - t0))
PY
TRICKLE=$!
track $TRICKLE

wait_for 20 size_is "$MNT/qu/0/stdout" 2 || fail "qu: first line did not arrive"
wait_for 20 size_is "$MNT/qt/0/stdout" 2 || fail "qt: first line did not arrive"
start=$SECONDS
elapsed_ge() { [ $((SECONDS - start)) -ge "$1" ]; }
# Past the old 10 s greeting timeout, mid-silence: still attached.
wait_for 30 elapsed_ge 15
for ns in qu qt; do
	assert_eq "$ns rank 0 mid-silence" running "$(rank_state $ns 0)"
done

wait_for $((SILENCE + 60)) finished $QU || fail "qu: forwarder did not end"
wait_for 30 finished $QT || fail "qt: forwarder did not end"
for ns in qu qt; do
	pid=$([ $ns = qu ] && echo $QU || echo $QT)
	assert_eq "$ns status" 0 "$(rc_of $pid)"
	assert_eq "$ns: nothing on iofs-run's terminal" "" "$(cat "$T/$ns.out" "$T/$ns.err")"
	assert_eq "$ns stdout" "$(printf 'a\nb')" "$(timeout 5 cat "$MNT/$ns/0/stdout")"
	assert_eq "$ns stdout bytes" 4 "$(info_get "$MNT/$ns/0/info" stdout_bytes)"
	assert_eq "$ns rank state" exited "$(rank_state $ns 0)"
	assert_eq "$ns job state" exited "$(job_state $ns)"
	assert_eq "$ns exit_status" 0 "$(info_get "$MNT/$ns/0/info" exit_status)"
done
log "a rank silent ${SILENCE}s over unix and over tcp stayed attached"
wait_for 30 finished $TRICKLE || fail "a trickled greeting was never cut off"
grep -q "no HELLO in time" "$T/iofs.log" || fail "no 'no HELLO in time' for the trickled greeting"
after=$(sed -n 's/^closed after \([0-9]*\) s$/\1/p' "$T/trickle.out")
[ -n "$after" ] && [ "$after" -le 25 ] || fail "trickled greeting: $(cat "$T/trickle.out")"
log "a greeting trickled byte by byte was cut off after $after s"

if [ -n "$MPI" ]; then
	wait_for 90 finished $MPI || fail "mpirun did not end"
	assert_eq "mpirun status" 0 "$(rc_of $MPI)"
	assert_eq "mpirun printed nothing itself" "" "$(cat "$T/qm.out")"
	for r in 0 1; do
		assert_eq "qm rank $r stdout" "$(printf 'begin\nend')" "$(timeout 5 cat "$MNT/qm/$r/stdout")"
		assert_eq "qm rank $r state" exited "$(rank_state qm $r)"
	done
	log "mpirun -n 2, ranks silent 12 s: both 'end' lines in the mount"
fi

! grep -v "no HELLO in time" "$T/iofs.log" | grep -E "dropped|lost|closing" ||
	fail "the daemon dropped a connection"
daemon_alive || fail "daemon died"
stop_daemon
log "ok"
