#!/bin/bash
# Ownership and modes enforced by the kernel (allow_other +
# default_permissions): a job's files belong to its owner (the forwarder's
# credentials); other users get EACCES; owners remove their own jobs only.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

id nobody >/dev/null 2>&1 || fail "no user nobody"
NOGROUP=$(id -gn nobody)
as_nobody() { setpriv --reuid=nobody --regid="$NOGROUP" --clear-groups -- "$@"; }
as_other() { setpriv --reuid=daemon --regid=daemon --clear-groups -- "$@"; }
chmod 755 "$T"
start_daemon
chmod 777 "$SOCK" 2>/dev/null

# a root job: nobody sees the name, nothing inside
run_job rootjob 1 sh -c "echo secret; $(gate end)"
as_nobody ls "$MNT" | grep -qx rootjob || fail "nobody cannot list the root"
if as_nobody cat "$MNT/rootjob/0/stdout" 2>"$T/err"; then fail "nobody read root's stdout"; fi
grep -q "Permission denied" "$T/err" || fail "nobody read: $(cat "$T/err")"
if as_nobody sh -c "echo x > $MNT/rootjob/0/stdin" 2>"$T/err"; then fail "nobody wrote root's stdin"; fi
grep -q "Permission denied" "$T/err" || fail "nobody write: $(cat "$T/err")"
if as_nobody rmdir "$MNT/rootjob" 2>/dev/null; then fail "nobody removed root's job"; fi

# a job run by nobody belongs to nobody
as_nobody "$IOFS_RUN" --connect "$ADDR" --nspace nj -n 1 -- sh -c "echo mine; cat > /dev/null; $(gate njend)" \
	>"$T/nj.out" 2>"$T/nj.err" &
track $!
wait_for 10 test -d "$MNT/nj/0" || fail "nobody's job did not appear: $(cat "$T/nj.err")"
assert_eq "owner" "nobody $NOGROUP" "$(stat -c '%U %G' "$MNT/nj/0/stdout")"
assert_eq "stdout mode" 440 "$(stat -c %a "$MNT/nj/0/stdout")"
assert_eq "stdin mode" 640 "$(stat -c %a "$MNT/nj/0/stdin")"
assert_eq "dir mode" 750 "$(stat -c %a "$MNT/nj")"
assert_eq "owner reads" mine "$(as_nobody timeout 5 head -n 1 "$MNT/nj/0/stdout")"
as_nobody sh -c "echo in > $MNT/nj/0/stdin" || fail "owner cannot write its stdin"
as_nobody timeout 5 cat "$MNT/nj/0/stdin" >"$T/nstdin" || fail "owner cannot read (EOF) its stdin"
assert_eq "owner reads its stdin: EOF" 0 "$(stat -c %s "$T/nstdin")"
if as_other cat "$MNT/nj/0/stdin" 2>/dev/null; then fail "another user opened nobody's stdin"; fi
if as_other cat "$MNT/nj/0/stdout" 2>"$T/err"; then fail "another user read nobody's stdout"; fi
grep -q "Permission denied" "$T/err" || fail "other read: $(cat "$T/err")"
if as_other rmdir "$MNT/nj" 2>/dev/null; then fail "another user removed nobody's job"; fi
# owner cannot remove a running job
if as_nobody rmdir "$MNT/nj" 2>"$T/err"; then fail "rmdir of a running job succeeded"; fi
grep -q "busy" "$T/err" || fail "rmdir running: $(cat "$T/err")"
touch "$T/njend"
wait_for 10 exited "$MNT/nj/info" || fail "nobody's job did not end"
as_nobody rm -r "$MNT/nj" || fail "owner cannot rm -r its completed job"
test ! -e "$MNT/nj" || fail "job still there after rm -r"
touch "$T/end"
stop_daemon
log "ok"
