#!/bin/bash
# The hand-over's descriptor budget (docs/security.md, "Descriptors"):
# iofs-run hands its ranks' pipes to the daemon by default, which then
# holds three descriptors per rank for the rank's life.  nobody tries to
# take every descriptor of the daemon (and so starve every other user's
# jobs, accepts and spool files) with jobs of many ranks.  The daemon runs
# with RLIMIT_NOFILE 400 (prlimit): 200 hand-over descriptors for all users,
# and -o max_pipes_uid=60 (20 ranks) per user.
# 1. nobody's job A (16 ranks, 48 descriptors) is handed over; root's job R
#    (24 ranks) too, root being exempt from max_pipes_uid;
# 2. nobody's job B (8 ranks: 48 + 24 > 60) takes the socket path instead:
#    logged ("not handed over"), its output exact, the daemon's pipe
#    descriptors unchanged;
# 3. daemon-wide: root's job G (30 ranks: 120 + 90 > 200) takes the socket
#    path too;
# 4. the budget comes back: once A has ended, nobody's job C (16 ranks) is
#    handed over again.
# Fails if a job over a budget is handed over (the daemon's descriptors grow
# past it) or if a job within it is not.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

LIMIT=400
printf '#!/bin/sh\nexec prlimit --nofile=%s:%s -- "%s" "$@"\n' $LIMIT $LIMIT "$IOFS" >"$T/iofs-limited"
chmod 755 "$T/iofs-limited"
IOFS=$T/iofs-limited
start_daemon -o max_pipes_uid=60
chmod 666 "$SOCK"
daemon_pipes() { find /proc/"$DAEMON_PID"/fd -lname 'pipe:*' 2>/dev/null | wc -l; }
pipes0=$(daemon_pipes)

# job NAME RANKS WHO: start a job whose ranks each print 20,000 bytes
# (iofs-produce, seed = rank), then block on a shared flock of
# $T/NAME.lock, which the test holds exclusively until end_job (bounded:
# 120 s).  Not a polled gate: 78 ranks polling at once forked thousands of
# sleeps a second and starved this 2-core VM (load 75); JOB_PID
declare -A GATE_FD
job() {
	local name=$1 n=$2 who=() fd
	[ "$3" = nobody ] && who=("${NOBODY_BG[@]}")
	exec {fd}>"$T/$name.lock"
	chmod 644 "$T/$name.lock"
	flock -x "$fd"
	GATE_FD[$name]=$fd
	"${who[@]}" "$IOFS_RUN" --connect "$ADDR" --nspace "$name" -n "$n" -- sh -c \
		"\"\$0\" -n 20000 -s \$IOFS_RANK; flock -w 120 -s $T/$name.lock true" "$PRODUCE" \
		>"$T/$name.out" 2>&1 &
	JOB_PID=$!
	track $JOB_PID
	local last=$((n - 1))
	wait_for 20 size_is "$MNT/$name/$last/stdout" 20000 || fail "job $name did not start"
	wait_for 20 size_is "$MNT/$name/0/stdout" 20000 || fail "job $name rank 0 did not print"
}
# path_all NAME RANKS WANT: every rank of NAME shows path WANT
path_all() {
	local r
	for ((r = 0; r < $2; r++)); do
		assert_eq "job $1 rank $r path" "$3" "$(info_get "$MNT/$1/$r/info" path)"
	done
}
# end_job NAME RANKS PID: open the gate; the job ends with status 0 and every
# rank's stdout is exact
end_job() {
	local r
	flock -u "${GATE_FD[$1]}"
	wait_for 30 finished "$3" || fail "job $1 did not end"
	assert_eq "job $1 status" 0 "$(rc_of "$3")"
	[ ! -s "$T/$1.out" ] || fail "job $1 printed on its terminal: $(head -c 300 "$T/$1.out")"
	for ((r = 0; r < $2; r++)); do
		"$PRODUCE" -n 20000 -s $r >"$T/want"
		timeout 10 cat "$MNT/$1/$r/stdout" >"$T/got" || fail "job $1 rank $r: read"
		assert_eq "job $1 rank $r sha256" "$(sha "$T/want")" "$(sha "$T/got")"
	done
}

# 1.
job A 16 nobody
A=$JOB_PID
path_all A 16 handover
job R 24 root
R=$JOB_PID
path_all R 24 handover
assert_eq "pipes held for A and R" $((pipes0 + 3 * 40)) "$(daemon_pipes)"

# declined NAME RANKS WHO LOG: the job gets the socket path, the daemon logs
# LOG, and the pipes it holds stay those of A and R
declined() {
	job "$1" "$2" "$3"
	path_all "$1" "$2" socket
	wait_for 10 daemon_log_has "$4" ||
		fail "job $1: no log line '$4': $(grep -i pipes "$T/iofs.log")"
	assert_eq "pipes held after $1" $((pipes0 + 3 * 40)) "$(daemon_pipes)"
}
# 2.
declined B 8 nobody "uid $NOBODY_UID not handed over (the socket path): limit max_pipes_uid=60 reached (48 in use)"
B=$JOB_PID
# 3.
declined G 30 root "uid 0 not handed over (the socket path): limit RLIMIT_NOFILE/2 (hand-over descriptors, all users)=200 reached (120 in use)"
G=$JOB_PID

# 4.
end_job A 16 $A
wait_for 10 bash -c "[ \$(find /proc/$DAEMON_PID/fd -lname 'pipe:*' | wc -l) = $((pipes0 + 3 * 24)) ]" ||
	fail "A's pipes still held: $(daemon_pipes)"
job C 16 nobody
C=$JOB_PID
path_all C 16 handover
for j in "B 8 $B" "G 30 $G" "R 24 $R" "C 16 $C"; do
	# shellcheck disable=SC2086
	end_job $j
done
wait_for 10 bash -c "[ \$(find /proc/$DAEMON_PID/fd -lname 'pipe:*' | wc -l) = $pipes0 ]" ||
	fail "pipes left in the daemon: $(daemon_pipes) > $pipes0"
daemon_alive || fail "daemon died"
stop_daemon
log ok
