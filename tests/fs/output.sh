#!/bin/bash
# --output-dir: every stream also lands in DIR/<nspace>/<rank>/{stdout,stderr}
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"

start_daemon --output-dir "$T/out"
"$PRODUCE" -n 500K -s 9 >"$T/expect"
run_job o 2 sh -c "if [ \$IOFS_RANK = 0 ]; then $PRODUCE -n 500K -s 9; else echo one; echo two >&2; fi"
wait_for 10 exited "$MNT/o/info" || fail "job did not end"
wait_for 5 size_is "$T/out/o/0/stdout" 512000 || fail "output file size $(stat -c %s "$T/out/o/0/stdout")"
assert_eq "rank 0 file" "$(sha "$T/expect")" "$(sha "$T/out/o/0/stdout")"
assert_eq "rank 0 via mount" "$(sha "$T/expect")" "$(timeout 5 cat "$MNT/o/0/stdout" | sha256sum | cut -d' ' -f1)"
assert_eq "rank 1 stdout" one "$(cat "$T/out/o/1/stdout")"
assert_eq "rank 1 stderr" two "$(cat "$T/out/o/1/stderr")"
stop_daemon
log "ok"
