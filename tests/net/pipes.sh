#!/bin/bash
# The pipe hand-over (docs/protocol.md, "Pipe hand-over"), run on both
# paths (net-pipes on the socket path, net-pipes-handover):
# (a) the path taken: info "path:", and the daemon itself holds the ranks'
#     pipes (/proc/PID/fd) only after a hand-over;
# (b) output written right before exit: 4 ranks write stdout and stderr and
#     exit 7 at once; when iofs-run returns every byte is there (sha256,
#     counts), the ranks are "exited" with status 7;
# (c) Ctrl-C (SIGINT) of iofs-run: passed to the ranks, which end; status
#     130, streams complete, readers get EOF, nothing left running;
# (d) hand-over only: kill -9 of the forwarder, then the rank writes 8 MiB:
#     the daemon reads the pipe to its end, every byte arrives (sha256),
#     then the rank is "lost" (its exit status is unknown);
# (e) hand-over only: which path iofs-run takes (iofs-run(1)): the
#     hand-over by default on a Unix socket; the socket path with
#     --no-handover, IOFS_HANDOVER=0 or IOFS_NO_HANDOVER=1; the command line
#     wins over both. (TCP never hands over: net-netns.)
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

start_daemon
daemon_pipes() { find /proc/"$DAEMON_PID"/fd -lname 'pipe:*' 2>/dev/null | wc -l; }

# (a)
pipes0=$(daemon_pipes)
"$IOFS_RUN" --nspace pa -n 2 -- sh -c "echo up; $(gate pa-go)" >/dev/null 2>&1 &
PA=$!
track $PA
wait_for 10 size_is "$MNT/pa/1/stdout" 3 || fail "(a) job pa did not start"
assert_eq "(a) path" "$RUN_PATH" "$(info_get "$MNT/pa/0/info" path)"
assert_eq "(a) link" connected "$(info_get "$MNT/pa/0/info" link)"
pipes1=$(daemon_pipes)
if [ "$RUN_PATH" = handover ]; then
	# three pipes per rank: stdin's write end, stdout's and stderr's read ends
	assert_eq "(a) pipes the daemon holds" $((pipes0 + 6)) "$pipes1"
else
	assert_eq "(a) pipes the daemon holds" "$pipes0" "$pipes1"
fi
touch "$T/pa-go"
wait_for 10 finished $PA || fail "(a) job pa did not end"
assert_eq "(a) status" 0 "$(rc_of $PA)"
wait_for 10 bash -c "[ \$(find /proc/$DAEMON_PID/fd -lname 'pipe:*' | wc -l) = $pipes0 ]" ||
	fail "(a) the daemon kept pipes of an ended job: $(daemon_pipes) > $pipes0"

# (b) output right before exit, 4 ranks, stdout and stderr
for r in 0 1 2 3; do
	"$PRODUCE" -n 3000000 -s $((10 + r)) >"$T/want.out.$r"
	"$PRODUCE" -n 500000 -s $((20 + r)) >"$T/want.err.$r"
done
"$IOFS_RUN" --nspace eo -n 4 -- sh -c \
	'"$0" -n 3000000 -s $((10 + IOFS_RANK)); "$0" -n 500000 -s $((20 + IOFS_RANK)) >&2; exit 7' \
	"$PRODUCE" >"$T/eo.out" 2>"$T/eo.err"
rc=$?
assert_eq "(b) iofs-run status" 7 "$rc"
[ ! -s "$T/eo.out" ] || fail "(b) output fell back to the terminal"
for r in 0 1 2 3; do
	assert_eq "(b) rank $r state" exited "$(rank_state eo $r)"
	assert_eq "(b) rank $r exit_status" 7 "$(info_get "$MNT/eo/$r/info" exit_status)"
	assert_eq "(b) rank $r stdout_bytes" 3000000 "$(info_get "$MNT/eo/$r/info" stdout_bytes)"
	assert_eq "(b) rank $r stderr_bytes" 500000 "$(info_get "$MNT/eo/$r/info" stderr_bytes)"
	timeout 10 cat "$MNT/eo/$r/stdout" >"$T/got.out.$r" || fail "(b) read rank $r stdout"
	timeout 10 cat "$MNT/eo/$r/stderr" >"$T/got.err.$r" || fail "(b) read rank $r stderr"
	assert_eq "(b) rank $r stdout sha256" "$(sha "$T/want.out.$r")" "$(sha "$T/got.out.$r")"
	assert_eq "(b) rank $r stderr sha256" "$(sha "$T/want.err.$r")" "$(sha "$T/got.err.$r")"
done

# (c) Ctrl-C of iofs-run
"$IOFS_RUN" --nspace cc -n 2 -- sh -c 'while :; do echo tick; sleep 0.05; done' \
	>/dev/null 2>&1 &
CC=$!
track $CC
wait_for 10 size_ge "$MNT/cc/1/stdout" 10 || fail "(c) job cc did not start"
for r in 0 1; do track "$(info_get "$MNT/cc/$r/info" pid)"; done
start_reader "$MNT/cc/0/stdout" "$T/cc0"
CAT=$READER_PID
kill -INT $CC
wait_for 10 finished $CC || fail "(c) iofs-run did not end on SIGINT"
assert_eq "(c) iofs-run status" 130 "$(rc_of $CC)"
wait_for 10 finished $CAT || fail "(c) reader not given EOF"
for r in 0 1; do
	assert_eq "(c) rank $r state" exited "$(rank_state cc $r)"
	assert_eq "(c) rank $r exit_status" 130 "$(info_get "$MNT/cc/$r/info" exit_status)"
	pid=$(info_get "$MNT/cc/$r/info" pid)
	! kill -0 "$pid" 2>/dev/null || fail "(c) rank $r still running"
done
assert_eq "(c) reader got the whole stream" \
	"$(info_get "$MNT/cc/0/info" stdout_bytes)" "$(stat -c %s "$T/cc0")"

# (d) the forwarder dies, the daemon drains
if [ "$RUN_PATH" = handover ]; then
	"$PRODUCE" -n 8388608 -s 33 >"$T/want.d"
	"$IOFS_RUN" --nspace dr -- sh -c "$(gate dr-go); exec \"\$0\" -n 8388608 -s 33" \
		"$PRODUCE" >/dev/null 2>&1 &
	DR=$!
	track $DR
	wait_for 10 test -e "$MNT/dr/0/info" || fail "(d) job dr did not start"
	dr_pid=$(info_get "$MNT/dr/0/info" pid)
	track "$dr_pid"
	start_reader "$MNT/dr/0/stdout" "$T/got.d"
	CAT=$READER_PID
	kill -9 $DR
	wait_for 10 finished $DR || fail "(d) forwarder did not die"
	wait_for 10 grep -q "forwarder gone; reading its ranks' pipes" "$T/iofs.log" ||
		fail "(d) daemon not draining"
	touch "$T/dr-go" # the rank writes everything after its forwarder died
	wait_for 30 finished $CAT || fail "(d) reader not given EOF after the drain"
	assert_eq "(d) bytes" 8388608 "$(stat -c %s "$T/got.d")"
	assert_eq "(d) sha256" "$(sha "$T/want.d")" "$(sha "$T/got.d")"
	wait_for 10 state_is dr 0 lost || fail "(d) rank not lost: $(rank_state dr 0)"
	wait_for 10 finished "$dr_pid" || fail "(d) rank did not end"
fi

# (e) the path chosen
# path_is WANT NAME [VAR=VALUE...] -- [OPTIONS...]: a one-rank job NAME run
# with exactly that environment (no other IOFS_*HANDOVER) shows WANT
path_is() {
	local want=$1 name=$2 vars=() opts=() pid got
	shift 2
	while [ "$1" != -- ]; do vars+=("$1"); shift; done
	shift
	opts=("$@")
	env -u IOFS_HANDOVER -u IOFS_NO_HANDOVER "${vars[@]}" "$IOFS_RUN" \
		"${opts[@]}" --nspace "$name" -- sh -c "echo up; $(gate "$name-go")" \
		>/dev/null 2>&1 &
	pid=$!
	track $pid
	wait_for 10 size_is "$MNT/$name/0/stdout" 3 || fail "(e) $name did not start"
	got=$(info_get "$MNT/$name/0/info" path)
	touch "$T/$name-go"
	wait_for 10 finished $pid || fail "(e) $name did not end"
	assert_eq "(e) $name status" 0 "$(rc_of $pid)"
	assert_eq "(e) $name: ${vars[*]} ${opts[*]}: path" "$want" "$got"
}
if [ "$RUN_PATH" = handover ]; then
	path_is handover e1 --
	path_is socket e2 -- --no-handover
	path_is socket e3 IOFS_HANDOVER=0 --
	path_is handover e4 IOFS_HANDOVER=1 --
	path_is socket e5 IOFS_NO_HANDOVER=1 --
	path_is socket e6 IOFS_HANDOVER=1 IOFS_NO_HANDOVER=1 --
	path_is handover e7 IOFS_NO_HANDOVER=1 -- --handover
	path_is socket e8 IOFS_HANDOVER=1 -- --no-handover
fi

daemon_alive || fail "daemon died"
stop_daemon
log "ok ($RUN_PATH)"
