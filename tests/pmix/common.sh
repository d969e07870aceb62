# Helpers for the pmix suite, on top of tests/lib.sh.  Source after it.
# Each test runs its own PMIx server host (pmix-host) with its own PMIx
# tmpdir, and attaches iofs to it with --pmix.
HOST="$IOFS_BUILD_DIR/tests/pmix/pmix-host"
PTOOL="$IOFS_BUILD_DIR/tests/pmix/pmix-tool"
[ -x "$HOST" ] || fail "no PMIx test host at $HOST"
[ -x "$IOFS" ] || fail "no daemon at $IOFS"
PMIX_TMP="$T/pmix"
CTL="$T/ctl"
URI_FILE="$T/uri"
HOST_PID=
mkdir -p "$PMIX_TMP"
# ASan builds: libpmix's own leaks are suppressed (see lsan.supp)
export LSAN_OPTIONS="suppressions=$IOFS_SOURCE_DIR/tests/pmix/lsan.supp:print_suppressions=0"

# fail with the host's log too
fail() {
	log "FAIL: $*"
	if [ -f "$T/host.log" ]; then
		log "pmix-host log (last 20 lines):"
		tail -n 20 "$T/host.log" >&2
	fi
	exit 1
}

# start_host [pmix-host options...]: the PMIx server, control FIFO at $CTL
start_host() {
	rm -f "$URI_FILE"
	"$HOST" --tmpdir "$PMIX_TMP" --uri-file "$URI_FILE" --control "$CTL" \
		"$@" >"$T/host.log" 2>&1 &
	HOST_PID=$!
	track "$HOST_PID"
	wait_for 10 test -s "$URI_FILE" || fail "pmix-host did not start"
	wait_for 10 test -p "$CTL" || fail "pmix-host made no control FIFO"
}

# host_cmd LINE: send one control line ("job NSPACE:NP:CMD", "quit")
host_cmd() { echo "$1" >"$CTL"; }

uri() { cat "$URI_FILE"; }

# start_pmix_daemon [SERVER]: iofs --pmix SERVER (default: the host's URI);
# TMPDIR is the host's so pid:/system discovery finds its rendezvous files
start_pmix_daemon() {
	local server=${1:-$(uri)}
	TMPDIR="$PMIX_TMP" start_daemon --pmix "$server"
}

finished() { ! kill -0 "$1" 2>/dev/null; }
rank_state() { info_get "$MNT/$1/$2/info" state; }
job_state() { info_get "$MNT/$1/info" state; }
job_done() { [ -f "$MNT/$1/info" ] && [ "$(job_state "$1")" != running ]; }
job_is() { [ "$(job_state "$1")" = "$2" ]; }
state_is() { [ "$(rank_state "$1" "$2")" = "$3" ]; }
daemon_alive() { kill -0 "$DAEMON_PID" 2>/dev/null && ls "$MNT" >/dev/null; }
host_logged() { grep -q -- "$1" "$T/host.log"; }
# gate NAME: rank-side shell snippet waiting for "touch $T/NAME" (<= 30 s)
gate() { echo "i=0; while [ ! -e $T/$1 ] && [ \$i -lt 1500 ]; do sleep 0.02; i=\$((i+1)); done"; }
