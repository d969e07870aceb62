#!/bin/bash
# The README's demo (scripts/demo) as a user runs it on a machine where a
# daemon at /iof had kept a job in the default spool: the demo ends 0 and
# says so, shows and reads only its own jobs (a spool of its own; its
# Slurm steps by their job id), and the old job is still there, byte for
# byte, when a daemon mounts /iof again.  Before f908d02 it listed and
# cat'ed every old job (181,698 lines on a used machine) and its closing
# rm -r deleted them.  The demo uses this build's binaries
# (IOFS_DEMO_BUILD_DIR).  Skips (77) without Slurm (the compat root).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
command -v slurmctld >/dev/null && command -v munged >/dev/null || {
	log "SKIP: slurm-wlm/munge not installed (scripts/setup)"
	exit 77
}

# /iof as the demo picks it: when it is free (absent, or an empty
# directory that is no mount point); else the demo mounts a directory of
# its own and there is no history of /iof to keep
HIST=
if ! is_mounted /iof && { [ ! -e /iof ] || { [ -d /iof ] && [ -z "$(ls -A /iof)" ]; }; }; then
	HIST=1
	[ -d /iof ] || { mkdir /iof && MADE=1; }
	MNT=/iof # cleanup unmounts it if a check fails while it is mounted
	start_daemon
	"$IOFS_RUN" --nspace keepme -n 1 -- "$PRODUCE" -n 100000 -s 7 >"$T/run.out" 2>&1 ||
		fail "keepme: $(cat "$T/run.out")"
	wait_for 10 grep -qx 'state: exited' /iof/keepme/info || fail "keepme did not end"
	want=$(timeout 10 cat /iof/keepme/0/stdout | sha256sum)
	assert_eq "keepme's bytes" "$("$PRODUCE" -n 100000 -s 7 | sha256sum)" "$want"
	stop_daemon
else
	log "/iof is in use: the demo mounts a directory of its own, no history to check"
fi

IOFS_DEMO_BUILD_DIR=$IOFS_BUILD_DIR timeout 240 "$IOFS_SOURCE_DIR/scripts/demo" \
	>"$T/demo.out" 2>&1 || fail "demo exit $?: $(tail -n 30 "$T/demo.out")"
grep -q '^demo: done' "$T/demo.out" || fail "demo did not say done: $(tail -n 20 "$T/demo.out")"
lines=$(wc -l <"$T/demo.out")
[ "$lines" -lt 300 ] || fail "demo printed $lines lines: $(grep '^\$' "$T/demo.out")"
! grep -q keepme "$T/demo.out" || fail "the demo showed the old job: $(grep keepme "$T/demo.out")"
# its 4-rank job, each rank's answer to stdin, and its two Slurm steps
for r in 0 1 2 3; do
	grep -q "^\[demo,$r\]<stdout>: rank $r: got " "$T/demo.out" ||
		fail "rank $r's stdin answer missing: $(grep "^\[demo,$r\]" "$T/demo.out")"
done
grep -Eq '^step 0, rank 1 of job [0-9]+\.0$' "$T/demo.out" || fail "Slurm step 0 missing: $(sed -n '/### Slurm/,$p' "$T/demo.out")"
grep -qx 'step 1: post-processing' "$T/demo.out" || fail "Slurm step 1 missing: $(sed -n '/### Slurm/,$p' "$T/demo.out")"
log "demo: exit 0, $lines lines, its own jobs and Slurm steps only"

if [ -n "$HIST" ]; then
	start_daemon
	wait_for 10 test -f /iof/keepme/0/stdout || fail "keepme gone after the demo: $(ls /iof)"
	assert_eq "keepme's bytes after the demo" "$want" "$(timeout 10 cat /iof/keepme/0/stdout | sha256sum)"
	stop_daemon
	[ -z "${MADE:-}" ] || rmdir /iof
	log "the job kept at /iof is still there, byte for byte"
fi
