#!/bin/bash
# A user's own daemon beside the system one.  iofs-run tries the system
# socket (/run/iofs/iofs.sock) before any per-user address, so nothing
# planted in /tmp can take a job (docs/security.md).  A user who starts
# a daemon of their own would then see no job arrive.  The daemon says what
# to export, the way ssh-agent does; with that export the user's jobs
# reach it, and the system daemon gets none of them.  Found using the
# product: nobody's `iofs-run` went to root's /iof, silently.  And a user's
# daemon whose unmount fusermount3 refuses says so and exits 1 (found in
# the compat root, which had no /etc/mtab: the daemon exited 0 and left a
# dead mount).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

# nobody needs /dev/fuse (0666 is the fuse3 default; containers may have
# 0600) and its own copy of the daemon (the build tree may be private)
FUSE_MODE=$(stat -c %a /dev/fuse)
SYS_SOCK=/run/iofs/iofs.sock
SYS_PID=
NB_PID=
restore() {
	local rc=$?
	chmod "$FUSE_MODE" /dev/fuse
	[ -z "$NB_PID" ] || { kill "$NB_PID" 2>/dev/null; wait "$NB_PID" 2>/dev/null; }
	[ -z "$SYS_PID" ] || { kill "$SYS_PID" 2>/dev/null; wait "$SYS_PID" 2>/dev/null; }
	for m in "$T/nmnt" "$T/smnt"; do
		! is_mounted "$m" || fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
	done
	(exit $rc)
	cleanup
}
trap restore EXIT
chmod 0666 /dev/fuse
cp "$IOFS" "$T/nbin/iofs"
chmod 755 "$T/nbin/iofs"
mkdir -p "$T/nmnt" "$T/smnt" "$T/xdg"
chown nobody "$T/nmnt" "$T/xdg"
chmod 700 "$T/xdg"
NB_SOCK="$T/xdg/iofs.sock"

# the system daemon: the machine's own if one runs, else one of ours on
# its address (the suite runs alone: no other test sees it meanwhile)
mkdir -p "$(dirname "$SYS_SOCK")"
if [ -S "$SYS_SOCK" ]; then
	log "note: a system daemon already listens on $SYS_SOCK; the test uses it"
	SYS_MNT=
else
	"$IOFS" -f --listen "unix:$SYS_SOCK" -o nospool "$T/smnt" >"$T/sys.log" 2>&1 &
	SYS_PID=$!
	wait_for 10 test -S "$SYS_SOCK" || fail "the system daemon did not listen: $(cat "$T/sys.log")"
	wait_for 10 is_mounted "$T/smnt" || fail "the system daemon did not mount"
	SYS_MNT="$T/smnt"
fi

# nobody_daemon LOG [ADDR]: nobody's daemon on $T/nmnt, its default
# address ($XDG_RUNTIME_DIR/iofs.sock; with ADDR in its $IOFS_ADDR, named
# with --listen), foreground, its stderr into LOG
nobody_daemon() {
	local addr=${2:-}
	rm -f "$NB_SOCK"
	(cd / && exec env -u IOFS_ADDR ${addr:+IOFS_ADDR=$addr} XDG_RUNTIME_DIR="$T/xdg" IOFS_SPOOL_DIR= \
		"${NOBODY_BG[@]}" "$T/nbin/iofs" -f -o nospool ${addr:+--listen "unix:$NB_SOCK"} "$T/nmnt") >"$1" 2>&1 &
	NB_PID=$!
	wait_for 10 grep -q "mounted $T/nmnt" "$1" || fail "nobody's daemon did not start: $(cat "$1")"
}
# nobody_stop LOG: SIGTERM, as a user stops it; the daemon unmounts
nobody_stop() {
	local rc=0
	kill "$NB_PID"
	wait "$NB_PID" 2>/dev/null || rc=$?
	NB_PID=
	! is_mounted "$T/nmnt" ||
		fail "nobody's mount stayed (exit status $rc): $(cat "$1"; grep " $T/nmnt " /proc/self/mountinfo)"
}
# nobody_run NAME [ADDR [XDG]]: as nobody, a one-rank job printing NAME,
# with IOFS_ADDR=ADDR and XDG_RUNTIME_DIR=XDG if given (else neither set)
nobody_run() {
	local addr=${2:-} xdg=${3:-}
	(cd / && env -u IOFS_ADDR -u XDG_RUNTIME_DIR ${addr:+IOFS_ADDR=$addr} ${xdg:+XDG_RUNTIME_DIR=$xdg} \
		"${NOBODY_BG[@]}" "$IOFS_RUN" --nspace "$1" -n 1 -- echo "$1") >"$T/$1.out" 2>"$T/$1.err" ||
		fail "iofs-run $1: $(cat "$T/$1.err")"
}
# nobody_cat FILE: FILE as nobody reads it (bounded)
nobody_cat() { as_nobody timeout 5 cat "$1"; }

# 1. the daemon says what to export
nobody_daemon "$T/nb1.log"
wait_for 10 grep -q "iofs-run connects to the system daemon (unix:$SYS_SOCK) first: for your jobs to come here, export IOFS_ADDR=unix:$NB_SOCK\$" "$T/nb1.log" ||
	fail "nobody's daemon did not say what to export: $(cat "$T/nb1.log")"

# 2. without the export the job goes to the system daemon (the documented
#    order), with it to nobody's own
nobody_run nb-default
[ ! -e "$T/nmnt/nb-default" ] || fail "the job went to nobody's daemon without the export"
if [ -n "$SYS_MNT" ]; then
	assert_eq "the default job, on the system daemon" nb-default "$(timeout 5 cat "$SYS_MNT/nb-default/0/stdout")"
fi
nobody_run nb-here "unix:$NB_SOCK"
assert_eq "the exported job, in nobody's mount" nb-here "$(nobody_cat "$T/nmnt/nb-here/0/stdout")"
[ -z "$SYS_MNT" ] || [ ! -e "$SYS_MNT/nb-here" ] || fail "the exported job reached the system daemon"
nobody_stop "$T/nb1.log"

# 2b. an $IOFS_ADDR that names another socket below /run is what
#     iofs-run uses, not the system daemon: no line calls it that
nobody_daemon "$T/nb1b.log" "unix:/run/iofs-test-elsewhere.sock"
nobody_run nb-sync "unix:$NB_SOCK" # the note, if any, is written by now
assert_eq "the job, on the named address" nb-sync "$(nobody_cat "$T/nmnt/nb-sync/0/stdout")"
! grep -q "system daemon" "$T/nb1b.log" || fail "an \$IOFS_ADDR called the system daemon: $(cat "$T/nb1b.log")"
nobody_stop "$T/nb1b.log"

# 3. no system daemon: nothing to say (iofs-run finds this one by itself)
if [ -n "$SYS_PID" ]; then
	kill "$SYS_PID"
	wait "$SYS_PID" 2>/dev/null
	SYS_PID=
	wait_for 10 bash -c "! test -S $SYS_SOCK" || fail "the system socket stayed"
	nobody_daemon "$T/nb2.log"
	nobody_run nb-alone "" "$T/xdg"
	assert_eq "the job, found by default" nb-alone "$(nobody_cat "$T/nmnt/nb-alone/0/stdout")"
	! grep -q "export IOFS_ADDR" "$T/nb2.log" || fail "a note with no system daemon: $(cat "$T/nb2.log")"
	nobody_stop "$T/nb2.log"
fi
# 4. an unmount fusermount3 refuses is said, with what to do, and the
#    daemon exits 1, not 0 as if all were well.  Here the refusal is what
#    a root without /etc/mtab gives (a bare container; the compat root had
#    none): in a private mount namespace, /etc is a copy without it.
cp -a /etc "$T/etc"
rm -f "$T/etc/mtab"
unshare --mount --propagation private bash -c '
	set -u
	T=$1; shift
	mount --bind "$T/etc" /etc || exit 10
	[ ! -e /etc/mtab ] || exit 11
	(cd / && exec env -u IOFS_ADDR XDG_RUNTIME_DIR="$T/xdg" "$@" -f -o nospool "$T/nmnt") >"$T/nb3.log" 2>&1 &
	pid=$!
	for i in $(seq 100); do grep -q "mounted $T/nmnt" "$T/nb3.log" && break; sleep 0.1; done
	grep -q "mounted $T/nmnt" "$T/nb3.log" || { kill $pid; exit 12; }
	kill $pid
	rc=0
	wait $pid || rc=$?
	grep -q " $T/nmnt " /proc/self/mountinfo && still=1 || still=0
	umount -l "$T/nmnt" 2>/dev/null
	echo "$rc $still" >"$T/nb3.rc"' \
	user-daemon "$T" "${NOBODY_BG[@]}" "$T/nbin/iofs" || fail "the namespace case failed (status $?): $(cat "$T/nb3.log" 2>/dev/null)"
read -r rc still <"$T/nb3.rc"
assert_eq "fusermount3 refused the unmount (the case's premise)" 1 "$still"
grep -q "could not unmount $T/nmnt (the message above says why): it stays as a dead mount; remove it with 'fusermount3 -u $T/nmnt'" "$T/nb3.log" ||
	fail "the refused unmount was not said: $(cat "$T/nb3.log")"
assert_eq "the daemon's exit status after a refused unmount" 1 "$rc"
log "ok"
