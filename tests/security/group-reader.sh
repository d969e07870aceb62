#!/bin/bash
# A reader of the owner's group must not freeze the owner's job
# (docs/security.md, "Who holds a job back"): nobody runs a job under umask
# 022, so its files are readable by its group; daemon, put in that group,
# opens the rank's stdout and the merged view and never reads.  Before, its
# open descriptors XOFFed the producer at the window (the job stopped at
# ~1 MiB until they closed).  Now only the owner's readers hold the job
# back: the job writes its 32 MiB and ends while daemon's descriptors stay
# open (stdout_xoff 0), and daemon then reads every byte from the spool
# (sha256).  The owner's own idle reader still holds it back (the control).
# Fails if the attack succeeds: the job stalls behind the group's reader.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"
as_group() { setpriv --reuid=daemon --regid="$NOGROUP" --clear-groups -- "$@"; }
GROUP_BG=(setpriv --reuid=daemon --regid="$NOGROUP" --clear-groups --)
start_daemon
chmod 666 "$SOCK"
SIZE=$((32 << 20))
"$PRODUCE" -n $SIZE -s 7 >"$T/want"

# job NAME: nobody's job, umask 022, writes SIZE bytes after the gate NAME.go
job() {
	(umask 022 && exec "${NOBODY_BG[@]}" "$IOFS_RUN" --connect "$ADDR" --nspace "$1" -- \
		sh -c "$(gate "$1.go"); exec \"\$0\" -n $SIZE -s 7" "$PRODUCE") >"$T/$1.out" 2>&1 &
	JOB=$!
	track $JOB
	wait_for 10 test -e "$MNT/$1/0/stdout" || fail "$1: job did not appear: $(cat "$T/$1.out")"
}
# idle_reader group|owner FILE: daemon (of the group) or nobody (the owner)
# opens FILE and does not read, until killed; IDLE its pid
idle_reader() {
	local file=$2 who=("${GROUP_BG[@]}")
	[ "$1" = owner ] && who=("${NOBODY_BG[@]}")
	"${who[@]}" /usr/bin/python3 -c 'import os,sys,time; fd=os.open(sys.argv[1], os.O_RDONLY); time.sleep(600)' \
		"$file" 2>>"$T/idle.err" &
	IDLE=$!
	track $IDLE
	wait_for 10 bash -c "ls -l /proc/$IDLE/fd 2>/dev/null | grep -q '$file'" || fail "the idle reader did not open $file: $(cat "$T/idle.err")"
}

# --- the attack: daemon (nobody's group) opens and never reads ---------------
job gj
assert_eq "group of gj's stdout" "$NOGROUP" "$(stat -c %G "$MNT/gj/0/stdout")"
idle_reader group "$MNT/gj/0/stdout"
R1=$IDLE
idle_reader group "$MNT/gj/stdout"
R2=$IDLE
touch "$T/gj.go"
wait_for 60 finished $JOB || fail "nobody's job stalled behind its group's idle readers: $(grep -E 'stdout_(bytes|xoff)' "$MNT/gj/0/info")"
assert_eq "gj stdout_bytes" $SIZE "$(info_get "$MNT/gj/0/info" stdout_bytes)"
assert_eq "gj stdout_xoff" 0 "$(info_get "$MNT/gj/0/info" stdout_xoff)"
kill -0 $R1 && kill -0 $R2 || fail "the idle readers are gone"
# what the group may read, it reads whole (from the spool)
as_group timeout 30 cat "$MNT/gj/0/stdout" >"$T/got" || fail "the group's reader could not read the job"
assert_eq "the group's read of gj" "$(sha "$T/want")" "$(sha "$T/got")"
kill $R1 $R2

# --- the control: the owner's own idle reader holds its job back -------------
job oj
idle_reader owner "$MNT/oj/0/stdout"
R3=$IDLE
touch "$T/oj.go"
wait_for 20 info_at_least oj 0 stdout_xoff 1 || fail "the owner's idle reader did not hold its job back"
finished $JOB && fail "the owner's job ended past its owner's idle reader"
kill $R3
wait_for 60 finished $JOB || fail "the owner's job did not go on once its reader closed"
assert_eq "oj stdout_bytes" $SIZE "$(info_get "$MNT/oj/0/info" stdout_bytes)"
assert_eq "oj stdout XOFF/XON paired" "$(info_get "$MNT/oj/0/info" stdout_xoff)" "$(info_get "$MNT/oj/0/info" stdout_xon)"
daemon_alive || fail "the daemon died"
log "a group reader did not hold nobody's job; the owner's did (XOFF $(info_get "$MNT/oj/0/info" stdout_xoff))"
