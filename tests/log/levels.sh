#!/bin/bash
# The verbosity knobs, in the foreground.  iofs-run: warnings only by
# default (its stderr is the job's terminal), -v adds information, -vv
# debugging, each line "iofs-run: ...".  iofs -f: info by default ("iofs:
# net: ..."), no debug lines; -o loglevel=warning drops the info lines,
# -o debug adds a line per frame.
. "$IOFS_SOURCE_DIR/tests/lib.sh"

start_daemon
"$IOFS_RUN" --nspace l0 -- echo hi 2>"$T/v0.err" >/dev/null || fail "l0 failed"
"$IOFS_RUN" -v --nspace l1 -- echo hi 2>"$T/v1.err" >/dev/null || fail "l1 failed"
"$IOFS_RUN" -vv --nspace l2 -- echo hi 2>"$T/v2.err" >/dev/null || fail "l2 failed"
assert_eq "iofs-run default: silent" "" "$(cat "$T/v0.err")"
grep -qx "iofs-run: connected to $ADDR: job 'l1' ranks 0..0" "$T/v1.err" ||
	fail "-v: no 'connected' line: $(cat "$T/v1.err")"
! grep -q "received" "$T/v1.err" || fail "-v printed debug lines"
grep -q "^iofs-run: received ACK rank 0" "$T/v2.err" || fail "-vv: no frame line: $(cat "$T/v2.err")"
assert_eq "l2 output" hi "$(timeout 5 cat "$MNT/l2/0/stdout")"

grep -q "^iofs: net: conn [0-9]* (unix pid .*): job 'l0'" "$T/iofs.log" || fail "iofs -f: no info line"
! grep -q "net: conn [0-9]*: accepted" "$T/iofs.log" || fail "iofs -f: debug lines by default"
stop_daemon

start_daemon -o loglevel=warning
"$IOFS_RUN" --nspace w -- true || fail "w failed"
! grep -q "job 'w'" "$T/iofs.log" || fail "-o loglevel=warning: info lines: $(cat "$T/iofs.log")"
stop_daemon

start_daemon -o debug
"$IOFS_RUN" --nspace d -- true || fail "d failed"
grep -q "^iofs: net: conn [0-9]*: accepted" "$T/iofs.log" || fail "-o debug: no 'accepted' line"
grep -q "^iofs: net: conn [0-9]*: RANK_START rank 0" "$T/iofs.log" || fail "-o debug: no frame line"
stop_daemon
log "ok"
