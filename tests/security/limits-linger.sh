#!/bin/bash
# Issue 12 item 7, abandoned jobs: a 65,536-rank job whose forwarder
# vanished used to stay forever (37 MB).  -o linger_lost (default 3600 s)
# removes a job left in state "lost" after that long, while a job that
# ended normally stays until removed (linger defaults to never).  Here
# linger_lost=2: the abandoned job goes, the exited one stays.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

start_daemon -o linger_lost=2
chmod 777 "$SOCK"
cat >"$T/abandon.py" <<'PY'
import os, sys
sys.path.insert(0, os.environ['IOFS_SOURCE_DIR'] + '/tests/security')
import proto
s = proto.connect('unix:' + sys.argv[1])
n = 65536
s.sendall(proto.hello(b'abandoned', 0, n) + b''.join(proto.rank_start(r) for r in range(n)) +
          proto.data(n - 1, 2, b'last rank here\n'))
assert proto.answer(s) == 'WELCOME'
# wait until the daemon has the last rank's line, then vanish
path = sys.argv[2]
import time
deadline = time.time() + 60
while time.time() < deadline:
    try:  # (a read at the live end would wait: look at the size)
        if os.stat(path).st_size == 15:
            break
    except OSError:
        pass
    time.sleep(0.05)
os._exit(0)
PY
chmod 644 "$T/abandon.py"
as_nobody env IOFS_SOURCE_DIR="$IOFS_SOURCE_DIR" /usr/bin/python3 "$T/abandon.py" "$SOCK" \
	"$MNT/abandoned/65535/stdout" || fail "abandoning client failed"
# (a function: wait_for re-runs it; "$(...)" as its argument was read once)
abandoned_lost() { [ "$(job_state abandoned 2>/dev/null)" = lost ]; }
wait_for 30 abandoned_lost || fail "the abandoned job is not lost: $(job_state abandoned)"
rss_before=$(proc_status $DAEMON_PID VmRSS)
"$IOFS_RUN" --nspace kept -- echo kept
wait_for 30 test ! -e "$MNT/abandoned" || fail "the abandoned job is still there after linger_lost=2"
log "abandoned 65,536-rank job removed; daemon VmRSS $((rss_before / 1024)) -> $(($(proc_status $DAEMON_PID VmRSS) / 1024)) MiB"
sleep 3 # longer than linger_lost: the exited job must still be there
assert_eq "an exited job stays" kept "$(cat "$MNT/kept/0/stdout")"
stop_daemon
log "ok"
