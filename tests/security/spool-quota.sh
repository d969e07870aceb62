#!/bin/bash
# Another user must not take a job's history by filling the spool
# (docs/security.md, "The spool is shared"): nobody pins its own running
# jobs' bytes with readers that never read (three jobs, about 3 MiB, XOFFed
# by those readers) and then floods a fourth job of 4 MiB.  Before the
# per-user cap that pushed the spool over its total cap (5M here), and the
# total cap took the only complete job's bytes: the victim's (user daemon,
# 1.5 MiB), whatever its owner held.  Now nobody's jobs stop at nobody's
# cap (spool_max_user=2M): the flood is held back (XOFF, logged with the
# option's name), the victim's job stays whole, and once nobody's readers
# go the flood ends with its newest bytes exact and XOFF = XON.
# Fails if the attack succeeds: the victim loses bytes.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"
VICTIM_BG=(setpriv --reuid=daemon --regid=daemon --clear-groups --)
SP=$T/spool
start_daemon -o spool="$SP",spool_max=5M,spool_max_user=2M,spool_max_job=none
chmod 666 "$SOCK"
daemon_log_has "per user 2097152 (not uid 0)" || fail "the caps are not logged: $(head -5 "$T/iofs.log")"

# wait_gate NAME: a rank-side wait for "touch $T/NAME" (bounded: 120 s)
wait_gate() { echo "i=0; while [ ! -e $T/$1 ] && [ \$i -lt 6000 ]; do sleep 0.02; i=\$((i+1)); done"; }
# job WHO NAME SIZE SEED: WHO's (nobody or the victim) job NAME, which
# writes SIZE bytes (iofs-produce -s SEED) after "touch $T/NAME.go" and
# ends after "touch $T/NAME.end"; its forwarder's pid in JOB
job() {
	local who=("${NOBODY_BG[@]}")
	[ "$1" = victim ] && who=("${VICTIM_BG[@]}")
	"${who[@]}" "$IOFS_RUN" --connect "$ADDR" --nspace "$2" -- \
		sh -c "$(wait_gate "$2.go"); \"\$0\" -n $3 -s $4; $(wait_gate "$2.end")" "$PRODUCE" \
		>"$T/$2.out" 2>&1 &
	JOB=$!
	track $JOB
	wait_for 10 test -e "$MNT/$2/0/stdout" || fail "$2: job did not appear: $(cat "$T/$2.out")"
}
# idle_reader FILE: nobody opens FILE at byte 0 and never reads; pid IDLE
idle_reader() {
	"${NOBODY_BG[@]}" /usr/bin/python3 -c 'import os,sys,time; fd=os.open(sys.argv[1], os.O_RDONLY); time.sleep(600)' \
		"$1" 2>>"$T/idle.err" &
	IDLE=$!
	track $IDLE
	wait_for 10 bash -c "ls -l /proc/$IDLE/fd 2>/dev/null | grep -q '$1'" || fail "the idle reader did not open $1: $(cat "$T/idle.err")"
}
ended() { [ "$(job_state "$1")" = exited ]; }
held() { [ "$(info_get "$MNT/$1/0/info" stdout_xoff)" -ge 1 ]; }

# --- the victim: user daemon's finished job of 1.5 MiB --------------------
VN=$((1536 << 10))
job victim v $VN 1
V=$JOB
touch "$T/v.go" "$T/v.end"
wait_for 30 finished $V || fail "the victim's job did not end: $(cat "$T/v.out")"
wait_for 10 ended v || fail "v: state $(job_state v)"
"$PRODUCE" -n $VN -s 1 >"$T/v.want"
victim_whole() {
	assert_eq "v dropped_bytes ($1)" 0 "$(info_get "$MNT/v/0/info" dropped_bytes)"
	assert_eq "v evicted_bytes ($1)" 0 "$(info_get "$MNT/v/0/info" evicted_bytes)"
	"${VICTIM_BG[@]}" timeout 30 cat "$MNT/v/0/stdout" >"$T/v.got" || fail "the victim could not read its job"
	assert_eq "the victim's job read back ($1)" "$(sha "$T/v.want")" "$(sha "$T/v.got")"
}
victim_whole before

# --- the attack: three jobs held by nobody's own idle readers, then a flood
READERS=()
for p in p1 p2 p3; do
	job nobody $p $VN 2
	eval "${p}_JOB=$JOB"
	idle_reader "$MNT/$p/0/stdout"
	READERS+=("$IDLE")
	touch "$T/$p.go"
	wait_for 30 held $p || fail "$p was not held back: $(grep -E '^stdout_(bytes|xoff)' "$MNT/$p/0/info")"
done
job nobody f $((4 << 20)) 9
F=$JOB
touch "$T/f.go"
wait_for 30 daemon_log_has "f/0/stdout: spool write: its owner's jobs hold the per-user cap (spool_max_user)" ||
	fail "nobody's flood was not held at its cap: f stdout_bytes $(info_get "$MNT/f/0/info" stdout_bytes), spool_bytes $(info_get "$MNT/f/0/info" spool_bytes); $(tail -5 "$T/iofs.log")"
held f || fail "f: no XOFF counted"
# the job's users (not only the daemon's log) learn why
grep -qx "note: output was held back at its owner's per-user spool cap (spool_max_user): readers of the owner's jobs kept that much unread" "$MNT/f/info" ||
	fail "f: no note in its info: $(grep note "$MNT/f/info")"
finished $F && fail "nobody's flood ended while held back"
victim_whole "during the attack"

# --- nobody's readers go: its jobs go on and end ---------------------------
kill "${READERS[@]}"
for p in p1 p2 p3 f; do touch "$T/$p.end"; done
wait_for 60 finished $F || fail "the flood did not end once its owner's readers went: $(grep -E '^stdout_(bytes|xoff|xon)' "$MNT/f/0/info"); spool: $(cd "$SP" && find . -type f -size +0 -printf '%p %s/%b*512\n' | sort | tr '\n' ' ')"
for p in p1 p2 p3; do
	eval "pid=\$${p}_JOB"
	wait_for 30 finished "$pid" || fail "$p did not end"
done
wait_for 10 ended f || fail "f: state $(job_state f)"
assert_eq "f stdout_bytes" $((4 << 20)) "$(info_get "$MNT/f/0/info" stdout_bytes)"
assert_eq "f xoff = xon" "$(info_get "$MNT/f/0/info" stdout_xoff)" "$(info_get "$MNT/f/0/info" stdout_xon)"
# what nobody's cap left of the flood is its newest bytes, exact
got=$(as_nobody timeout 30 cat "$MNT/f/0/stdout" | wc -c)
dropped=$(info_get "$MNT/f/0/info" dropped_bytes)
assert_eq "f: dropped $dropped + read $got" $((4 << 20)) $((dropped + got))
assert_eq "f: the newest $got bytes" \
	"$("$PRODUCE" -n $((4 << 20)) -s 9 | tail -c "$got" | sha256sum | cut -d' ' -f1)" \
	"$(as_nobody timeout 30 cat "$MNT/f/0/stdout" | sha256sum | cut -d' ' -f1)"
victim_whole after
daemon_alive || fail "the daemon died"
used=$(du -sk "$SP" | cut -f1)
stop_daemon
log "nobody held at its 2M cap (flood of 4M: $dropped bytes of its own history evicted); the victim's 1.5 MiB job whole; spool $used kB"
