#!/bin/bash
# stdin written while a rank restored from the spool waits for its
# forwarder (docs/filesystem.md, "stdin"): the daemon (-o spool) is killed
# while the forwarder is stopped (SIGSTOP), and restarted; the job is back
# as "reconnecting" and a writer sends 1 MiB into the rank's stdin in the
# mount.  The write must wait, not fail (before, it failed at once with
# EPIPE: the restored rank had no sink); after SIGCONT the forwarder
# resumes and the rank reads every byte once, then EOF (sha256, count).
# A second job whose forwarder never comes back: its writer waits too,
# and fails with EPIPE when the resume window ends (the bytes counted as
# discarded).  A third job whose two ranks had printed nothing yet is
# restored too, both ranks waiting (before, its spool directory was made
# at its first byte: it was absent until its forwarder came back), and
# ends well once its forwarder resumes.  Both paths (tests/net/meson.build net_both_paths).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
export IOFS_RECONNECT_TIMEOUT=120
SP="$T/spool"
SIZE=$((1 << 20))
WINDOW=20

start_daemon -o spool="$SP" -o resume_window=$WINDOW
head -c $SIZE /dev/urandom >"$T/blob"
"$IOFS_RUN" -v --nspace ri -- sh -c "echo ready; exec cat >$T/rank.in" \
	>"$T/ri.out" 2>"$T/ri.err" &
JOB=$!
track $JOB
"$IOFS_RUN" -v --nspace rl -- sh -c "echo ready; exec cat >/dev/null" \
	>"$T/rl.out" 2>"$T/rl.err" &
GONE=$!
track $GONE
for ns in ri rl; do
	wait_for 10 grep -q ready "$MNT/$ns/0/stdout" 2>/dev/null || fail "job $ns did not start"
done
"$IOFS_RUN" -v -n 2 --nspace rz -- sh -c "$(gate rz.go); echo late \$IOFS_RANK" \
	>"$T/rz.out" 2>"$T/rz.err" &
QUIET=$!
track $QUIET
# spool_state NSPACE: the state the spool records for the job
spool_state() {
	local d
	for d in "$SP"/*/; do
		[ "$(cat "$d/nspace" 2>/dev/null)" = "$1" ] && cat "$d/state" 2>/dev/null
	done
}
wait_for 10 bash -c "$(declare -f spool_state); SP='$SP'; spool_state rz | grep -q '^rank: 1 running'" ||
	fail "the silent job's ranks are not in the spool: $(spool_state rz)"
RL_RANK=$(info_get "$MNT/rl/0/info" pid)
[ -n "$RL_RANK" ] && kill -0 "$RL_RANK" || fail "no pid for rl's rank: $(cat "$MNT/rl/0/info")"
track "$RL_RANK"

kill -STOP $JOB $QUIET
kill -KILL $GONE "$RL_RANK" # rl's forwarder and rank: never back
kill_daemon
start_daemon -o spool="$SP" -o resume_window=$WINDOW
for ns in ri rl rz; do
	wait_for 10 state_is_link $ns 0 reconnecting || fail "$ns not restored waiting: $(cat "$MNT/$ns/0/info" 2>&1)"
done

cat "$T/blob" >"$MNT/ri/0/stdin" 2>"$T/w.err" &
W=$!
track $W
printf 'lost\n' >"$MNT/rl/0/stdin" 2>"$T/wl.err" &
WL=$!
track $WL
# the writers are inside write(): failing used to take milliseconds
wait_for 3 finished $W && fail "the writer ended while the forwarder was away (rc $(rc_of $W)): $(cat "$T/w.err")"
finished $WL && fail "rl's writer ended at once: $(cat "$T/wl.err")"
state_is_link ri 0 reconnecting || fail "ri resumed while its forwarder was stopped"
state_is_link rz 1 reconnecting || fail "the silent job's rank 1 is not waiting: $(cat "$MNT/rz/1/info" 2>&1)"

kill -CONT $QUIET
wait_for 30 state_is_link rz 0 connected || fail "rz did not resume: $(cat "$T/rz.err")"
touch "$T/rz.go"
wait_for 30 finished $QUIET || fail "rz did not end: $(cat "$MNT/rz/info")"
assert_eq "rz status" 0 "$(rc_of $QUIET)"
for r in 0 1; do
	assert_eq "rz rank $r output" "late $r" "$(cat "$MNT/rz/$r/stdout")"
done
assert_eq "rz: nothing printed locally" 0 "$(stat -c %s "$T/rz.out")"

kill -CONT $JOB
stdin_all_read ri $W $JOB "$T/blob" "$T/rank.in"
assert_eq "ri rank 0 path" "$RUN_PATH" "$(info_get "$MNT/ri/0/info" path)"
assert_eq "nothing printed locally" 0 "$(stat -c %s "$T/ri.out")"

wait_for $((WINDOW + 20)) finished $WL || fail "rl's writer still waits after the resume window"
rc=$(rc_of $WL)
[ "$rc" != 0 ] || fail "rl's writer succeeded though its rank was lost"
grep -q 'Broken pipe' "$T/wl.err" || fail "rl's writer: not EPIPE: $(cat "$T/wl.err")"
assert_eq "rl state" lost "$(rank_state rl 0)"
assert_eq "rl stdin_discarded" 5 "$(info_get "$MNT/rl/0/info" stdin_discarded)"
log "ri: $SIZE bytes written during the window reached the rank; rl: $(cat "$T/wl.err")"
