#!/bin/bash
# The spool's path (docs/security.md): the daemon keeps every job's output
# there and a restart trusts what it finds, so every directory on the way
# must belong to root or the daemon's user and be writable by others only
# if sticky (/tmp, /var/tmp).  User nobody owns a directory on the way, or
# one on the way is world-writable without the sticky bit: an explicit
# -o spool= there is refused at start with the reason, the default spool
# (a user daemon's is below the world-writable /var/tmp, where another
# user can create /var/tmp/iofs-UID first) falls back to no spool with a
# warning; nothing is created in the other user's directory either way.
# Below a root-owned sticky world-writable directory it is accepted.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

# refused SPOOLDIR REASON: -o spool=SPOOLDIR does not start, says REASON
refused() {
	local rc=0
	timeout 10 "$IOFS" -f --listen "unix:$T/x.sock" -o spool="$1" "$MNT" >"$T/bad.out" 2>&1 || rc=$?
	[ $rc -ne 0 ] || fail "-o spool=$1 was accepted"
	[ $rc -ne 124 ] || fail "-o spool=$1: the daemon ran (killed by timeout)"
	file_has "$T/bad.out" "$2" || fail "-o spool=$1: no reason given: $(cat "$T/bad.out")"
	! is_mounted "$MNT" || fail "-o spool=$1: mounted anyway"
}

# 1. a directory of nobody's on the way (nobody pre-created it)
mkdir -m 0755 "$T/nb"
chown nobody "$T/nb"
refused "$T/nb/spool" "$T/nb belongs to uid $NOBODY_UID"
[ -z "$(ls -A "$T/nb")" ] || fail "created in nobody's directory: $(ls -A "$T/nb")"
# nobody's symlink on the way leads to nobody's directory: the same
ln -s "$T/nb" "$T/nblink"
refused "$T/nblink/spool" "belongs to uid $NOBODY_UID"

# 2. the default spool below nobody's directory: no spool, a warning
IOFS_SPOOL_DIR="$T/nb/base" start_daemon
wait_for 10 file_has "$T/iofs.log" "running without a spool" || fail "no warning: $(cat "$T/iofs.log")"
run_job d 1 echo still works
wait_for 10 job_done d || fail "job did not end"
assert_eq "output without a spool" "still works" "$(timeout 5 cat "$MNT/d/0/stdout")"
assert_eq "spool_bytes" 0 "$(info_get "$MNT/d/info" spool_bytes)"
[ -z "$(ls -A "$T/nb")" ] || fail "the default spool created something in nobody's directory: $(ls -A "$T/nb")"
stop_daemon

# 3. world-writable, not sticky, on the way
mkdir -m 0777 "$T/ww" && chmod 0777 "$T/ww"
refused "$T/ww/spool" "$T/ww (mode 0777) is writable by other users and not sticky"

# 4. below a root-owned sticky directory (like /var/tmp): accepted
mkdir "$T/sticky" && chmod 1777 "$T/sticky"
start_daemon -o spool="$T/sticky/iofs-0/spool"
run_job s 1 echo spooled
wait_for 10 job_done s || fail "job did not end"
[ "$(info_get "$MNT/s/info" spool_bytes)" -gt 0 ] || fail "nothing spooled: $(cat "$MNT/s/info")"
assert_eq "new directories are the daemon's, 0700" "0 700" "$(stat -c '%u %a' "$T/sticky/iofs-0")"
stop_daemon
log "ok"
