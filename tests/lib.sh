# Shared helpers for iofs integration tests (bash).  Source it:
#   . "$IOFS_SOURCE_DIR/tests/lib.sh"
# Every test gets its own temp dir ($T), a mountpoint ($MNT), a socket
# address ($ADDR), and a cleanup trap that kills every process it started
# (by pid) and unmounts.  Waits are bounded polls, never bare sleeps.
set -uo pipefail

: "${IOFS_BUILD_DIR:?run under meson test}"
: "${IOFS_SOURCE_DIR:?run under meson test}"
. "$IOFS_SOURCE_DIR/tests/common.sh"
# IOFS_BIN_DIR: run against an installed build (scripts/flowcheck --prefix)
IOFS="${IOFS_BIN_DIR:-$IOFS_BUILD_DIR/fs}/iofs"
IOFS_RUN="${IOFS_BIN_DIR:-$IOFS_BUILD_DIR/net}/iofs-run"
PRODUCE="$IOFS_BUILD_DIR/tests/tools/iofs-produce"
PACE="$IOFS_BUILD_DIR/tests/tools/iofs-pace"
T=$(mktemp -d "/tmp/iofs-test.$(basename "$0" .sh).XXXXXX")
MNT="$T/mnt"
SOCK="$T/iofs.sock"
ADDR="unix:$SOCK"
export IOFS_ADDR="$ADDR"
# The default spool of every daemon a test starts (as root; one run as
# nobody cannot create it and runs without): DIR/<mountpoint>, removed
# with $T, never the machine's /var/spool/iofs.
export IOFS_SPOOL_DIR="$T/spool.d"
# Forwarders fall back at once when their link breaks (protocol 2/3, as
# the tests written before resume expect); the resume tests set their own.
export IOFS_RECONNECT_TIMEOUT="${IOFS_RECONNECT_TIMEOUT:-0}"
# The forwarder's path on this host: "handover" (iofs-run's default: the
# daemon takes the ranks' pipes) or "socket" (IOFS_NO_HANDOVER=1 or
# IOFS_HANDOVER=0: the bytes go through iofs-run; meson runs the flow and
# fault cases once per path, as NAME on the socket and NAME-handover).
if [ "${IOFS_NO_HANDOVER:-0}" != 0 ] || [ "${IOFS_HANDOVER:-1}" = 0 ]; then
	RUN_PATH=socket
else
	RUN_PATH=handover
fi
mkdir -p "$MNT"
DAEMON_PID=
TEST_NAME=$(basename "$0")

log() { echo "[$TEST_NAME] $*" >&2; }
fail() {
	log "FAIL: $*"
	exit 1
}

cleanup() {
	local rc=$?
	kill_pids
	[ -z "$DAEMON_PID" ] || end_daemon "$DAEMON_PID"
	unmount "$MNT"
	if [ $rc -ne 0 ] && [ -f "$T/iofs.log" ]; then
		log "daemon log (last 40 lines):"
		tail -n 40 "$T/iofs.log" >&2
	fi
	rm -rf "$T" 2>/dev/null
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_daemon [iofs options...]: foreground daemon on $MNT listening on $ADDR
start_daemon() {
	# resume_window=0 unless the test says otherwise: a broken link
	# loses the ranks at once, as the tests written before resume expect
	"$IOFS" -f --listen "$ADDR" -o resume_window=0 "$@" "$MNT" >"$T/iofs.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 is_mounted "$MNT" || fail "daemon did not mount $MNT"
	wait_for 10 test -S "$SOCK" || fail "daemon did not listen on $SOCK"
	# "listening on ..." and "mounted" are logged after the kernel's INIT is
	# answered, so after the mount shows: tests that grep the log wait here
	case " $* " in
	*loglevel=warning* | *loglevel=error* | *loglevel=crit*) ;;
	*) wait_for 10 grep -q "^iofs: mounted " "$T/iofs.log" ||
		fail "daemon did not log 'mounted': $(cat "$T/iofs.log")" ;;
	esac
}

# stop_daemon: SIGTERM, expect exit 0 and no mount left
stop_daemon() {
	kill -TERM "$DAEMON_PID" || fail "daemon already gone"
	local rc=0
	wait "$DAEMON_PID" || rc=$?
	DAEMON_PID=
	[ $rc -eq 0 ] || fail "daemon exit status $rc after SIGTERM"
	! is_mounted "$MNT" || fail "mount left behind after SIGTERM"
}

# kill_daemon: SIGKILL (a crash), reaped, its dead mount removed
kill_daemon() {
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
}

# info_get FILE KEY: value of "KEY: value" line
info_get() { sed -n "s/^$2: //p" "$1" | head -n 1; }

# info_at_least NSPACE RANK KEY N: the rank's info KEY is >= N (for wait_for)
info_at_least() {
	local v
	v=$(info_get "$MNT/$1/$2/info" "$3")
	[ -n "$v" ] && [ "$v" -ge "$4" ]
}

# sha FILE: sha256 hex of FILE
sha() { sha256sum "$1" | cut -d' ' -f1; }

assert_eq() { # assert_eq WHAT EXPECTED ACTUAL
	[ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
}

# fd_count PID: number of open fds
fd_count() { ls /proc/"$1"/fd | wc -l; }

# is_asan BINARY: built with AddressSanitizer (RSS figures mean little there)
# (grep -c, not -q: -q exits at the first match, nm/ldd die of SIGPIPE,
# and under pipefail the pipeline then says "no")
is_asan() {
	[ "$(nm -D "$1" 2>/dev/null | grep -c __asan_init)" -gt 0 ] ||
		[ "$(ldd "$1" 2>/dev/null | grep -c libasan)" -gt 0 ]
}

# figures NAME k=v...: one machine-readable line for scripts/flowcheck
figures() {
	local name=$1
	shift
	echo "FIGURES $name $*"
}

# wait_exit SECONDS PID: wait for PID to end; prints nothing; 1 on timeout
wait_exit() { wait_for "$1" bash -c "! kill -0 $2 2>/dev/null"; }

# reader_open PID FILE: process PID has FILE open, or waits inside a FUSE
# request
reader_open() {
	local f
	grep -q request_wait_answer "/proc/$1/wchan" 2>/dev/null && return 0
	for f in /proc/"$1"/fd/*; do
		[ "$(readlink "$f" 2>/dev/null)" = "$2" ] && return 0
	done
	return 1
}
# await_reader PID FILE: return once the daemon has handled PID's open of
# FILE (its router reader is attached): it answers FUSE requests in order,
# so once a later readdir is answered that open has been handled
await_reader() {
	wait_for 10 reader_open "$1" "$2" || fail "reader of $2 did not open it"
	ls "$(dirname "$2")" >/dev/null || fail "readdir barrier failed"
}
# start_reader FILE OUT: cat FILE >OUT in the background (READER_PID,
# tracked), its router reader attached on return
start_reader() {
	cat "$1" >"$2" &
	READER_PID=$!
	track "$READER_PID"
	await_reader "$READER_PID" "$1"
}

# gated_producer NS SIZE SEED WANT: start rank 0 of job NS printing "start",
# then waiting for one byte on its stdin (the gate) before producing SIZE
# bytes of seed SEED.  Writes the expected stream to WANT, waits for the
# first line, and sets GATED_PID (the forwarder, tracked).  Open the readers,
# then open_gate NS: no byte can be discarded before a reader is attached.
gated_producer() {
	local ns=$1 size=$2 seed=$3 want=$4
	"$IOFS_RUN" --nspace "$ns" --rank 0 -- sh -c \
		'echo start; head -c 1 >/dev/null; exec "$0" -n "$1" -s "$2"' \
		"$PRODUCE" "$size" "$seed" &
	GATED_PID=$!
	track $GATED_PID
	{ echo start; "$PRODUCE" -n "$size" -s "$seed"; } >"$want"
	wait_for 10 test -s "$MNT/$ns/0/stdout" || fail "$ns: first line did not arrive"
}
open_gate() { printf g >"$MNT/$1/0/stdin" || fail "$1: could not open the gate"; }
