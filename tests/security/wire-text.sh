#!/bin/bash
# issue 12 item 9: control characters in a wire string (the HELLO host)
# must not forge lines in info files or the log.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

start_daemon
chmod 666 "$SOCK"
cat >"$T/forge.py" <<'PY'
import os, sys
sys.path.insert(0, os.environ["IOFS_SOURCE_DIR"] + "/tests/security")
from proto import connect, hello, rank_start, data, answer
s = connect("unix:" + sys.argv[1])
s.sendall(hello(b"forged", 0, 1, host=b"h\nforged: yes\nexit_status: 0\x1b[2J") +
          rank_start(0) + data(0, 2, b"x\n"))
print("reply", answer(s))
PY
as_nobody timeout 20 /usr/bin/python3 "$T/forge.py" "$SOCK" >"$T/reply" 2>&1
if [ -e "$MNT/forged/0/info" ]; then
	if grep -q "^forged: yes" "$MNT/forged/0/info"; then
		fail "a host name forged a line in info: $(cat "$MNT/forged/0/info")"
	fi
	fail "a HELLO with control characters in the host was accepted"
fi
grep -q "^reply ERROR .*control character in the host name" "$T/reply" ||
	fail "no clear refusal to the forwarder: $(cat "$T/reply")"
wait_for 10 daemon_log_has "control character in the host name" || fail "refusal not logged"
if grep -q "^forged: yes" "$T/iofs.log" || grep -q $'\x1b' "$T/iofs.log"; then
	fail "a host name forged a log line: $(cat -v "$T/iofs.log")"
fi

# a normal job still runs, with its host name in info
run_job fine 1 sh -c 'echo ok'
wait_for 10 exited "$MNT/fine/info" || fail "job did not end"
assert_eq "host" "$(hostname)" "$(info_get "$MNT/fine/0/info" host)"
stop_daemon
log "ok"
