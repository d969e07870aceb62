#!/bin/bash
# The SERVER forms of --pmix (attachment file, pid:PID, system, URI) and bad
# input: a clear error, a non-zero exit, no mount left behind.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/pmix/common.sh"

bad() { # bad SERVER EXPECTED-MESSAGE
	local rc=0
	TMPDIR="$PMIX_TMP" timeout 30 "$IOFS" -f --listen "$ADDR" --pmix "$1" "$MNT" >"$T/bad.log" 2>&1 || rc=$?
	[ $rc -ne 0 ] || fail "--pmix '$1' was accepted"
	[ $rc -ne 124 ] || fail "--pmix '$1' hung"
	grep -q -- "$2" "$T/bad.log" || fail "--pmix '$1': no '$2' in: $(cat "$T/bad.log")"
	! is_mounted "$MNT" || fail "--pmix '$1' left a mount"
}
# the ranks still run: read the first line, do not wait for EOF
first_line_is() { [ "$(timeout 5 head -n 1 "$1" 2>/dev/null)" = "$2" ]; }

bad "pid:abc" "bad pid"
bad "pid:0" "bad pid"
bad "" "empty SERVER"
bad "$T/no-such-file" "not a URI"
bad "pmix-host.0;tcp4://127.0.0.1:1" "cannot attach"

# libpmix 4.2.2 replays output it cached before a pull to the first tool
# only: each form gets a job started after it attached
start_host --attach-file "$T/attach" --system
wait_for 10 test -s "$T/attach" || fail "no attachment file"
i=0
for form in "$T/attach" "pid:$HOST_PID" system "$(uri)" "file:$T/attach"; do
	i=$((i + 1))
	start_pmix_daemon "$form"
	host_cmd "job f$i:2:echo attached \$PMIX_RANK; exec sleep 600"
	wait_for 20 first_line_is "$MNT/f$i/1/stdout" "attached 1" ||
		fail "--pmix $form: job f$i not seen"
	stop_daemon
	log "ok: --pmix $form"
done
