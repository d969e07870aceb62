#!/bin/bash
# issue 12 item 1: --output-dir must never write through a link another
# user planted, and a job's files belong to the job's owner.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

SECRET="$T/rootfile"
WANT=$(root_file "$SECRET")

# 1. an output directory other users can write (like /tmp): nobody plants
#    OUTDIR/victim/0/stdout -> a root file before root's job runs
mkdir -m 1777 "$T/pub"
as_nobody mkdir -p "$T/pub/victim/0" || fail "nobody cannot prepare the plant"
as_nobody ln -s "$SECRET" "$T/pub/victim/0/stdout" || fail "nobody cannot plant"
"$IOFS" -f --listen "$ADDR" --output-dir "$T/pub" "$MNT" >"$T/iofs.log" 2>&1 &
DAEMON_PID=$!
wait_for 10 bash -c "grep -q ' $(realpath "$MNT") ' /proc/self/mountinfo || ! kill -0 $DAEMON_PID" ||
	fail "daemon neither mounted nor exited"
if is_mounted "$MNT"; then
	run_job victim 1 sh -c 'echo attacker-controlled output'
	wait_for 10 exited "$MNT/victim/info"
	stop_daemon
	assert_eq "root file (1777 output dir)" "$WANT" "$(sha "$SECRET")"
	fail "daemon accepted an output directory writable by other users"
fi
rc=$(rc_of $DAEMON_PID)
DAEMON_PID=
[ "$rc" -ne 0 ] || fail "daemon exited 0 on an unsafe --output-dir"
grep -q "writable by other users" "$T/iofs.log" || fail "no clear refusal: $(cat "$T/iofs.log")"
assert_eq "root file (1777 output dir)" "$WANT" "$(sha "$SECRET")"

# 2. a safe output directory: a user's job files are the user's own,
#    owner-only modes (0750 dirs, 0640 files)
mkdir -m 755 "$T/out"
start_daemon --output-dir "$T/out"
"${NOBODY_BG[@]}" "$IOFS_RUN" --connect "$ADDR" --nspace nj -n 1 -- \
	sh -c "echo mine; $(gate nj1); echo later >&2; $(gate nj2)" >"$T/nj.out" 2>"$T/nj.err" &
NJ=$!
track $NJ
wait_for 10 size_ge "$T/out/nj/0/stdout" 5 || fail "nobody's output file did not appear: $(cat "$T/nj.err")"
assert_eq "job dir owner/mode" "nobody $NOGROUP 750" "$(stat -c '%U %G %a' "$T/out/nj")"
assert_eq "rank dir owner/mode" "nobody $NOGROUP 750" "$(stat -c '%U %G %a' "$T/out/nj/0")"
assert_eq "file owner/mode" "nobody $NOGROUP 640" "$(stat -c '%U %G %a' "$T/out/nj/0/stdout")"

# 3. the owner plants a link in its own directory: not followed
as_nobody ln -s "$SECRET" "$T/out/nj/0/stderr" || fail "nobody cannot plant in its own dir"
touch "$T/nj1"
wait_for 10 daemon_log_has "nj/0: stderr is a symbolic link" || fail "refusal not logged: $(cat "$T/iofs.log")"
assert_eq "root file (link in the owner's dir)" "$WANT" "$(sha "$SECRET")"
assert_eq "the mount still has the line" later "$(timeout 5 head -n 1 "$MNT/nj/0/stderr")"
touch "$T/nj2"
wait_for 10 finished $NJ || fail "nobody's job did not end"
stop_daemon

# 4. after a restart root's job takes the name: nobody's directory (with a
#    planted link) is refused, root's job still runs in the mount
as_nobody rm -f "$T/out/nj/0/stderr"
as_nobody ln -sf "$SECRET" "$T/out/nj/0/stdout" || fail "nobody cannot re-plant"
# a fresh daemon: with its spool it would restore nobody's job nj, whose
# name root may not take over
start_daemon --output-dir "$T/out" -o nospool
run_job nj 1 sh -c 'echo root-output'
wait_for 10 exited "$MNT/nj/info" || fail "root's job did not end"
wait_for 10 daemon_log_has "directory nj belongs to uid $NOBODY_UID, the job to uid 0" ||
	fail "refusal not logged: $(cat "$T/iofs.log")"
assert_eq "root file (nobody's dir)" "$WANT" "$(sha "$SECRET")"
assert_eq "root's job in the mount" root-output "$(timeout 5 cat "$MNT/nj/0/stdout")"
stop_daemon
log "ok"
