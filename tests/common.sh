# Process, mount and polling helpers shared by tests/lib.sh (the integration
# suites) and scripts/bench.  Source it; it defines functions and PIDS only,
# sets no trap and creates nothing.
#   WAIT_POLL  seconds between wait_for's polls (default 0.02)

PIDS=()

# track PID: kill it at cleanup (kill_pids)
track() { PIDS+=("$1"); }

# is_mounted DIR: DIR is a mount point
is_mounted() { grep -q " $(realpath "$1") " /proc/self/mountinfo 2>/dev/null; }

# kill_pids: SIGTERM every tracked pid, then SIGKILL what is left after
# 1 s each, reap them, forget them
kill_pids() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.02; done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	PIDS=()
}

# end_daemon PID: SIGTERM, SIGKILL after 5 s, reap (no checks)
end_daemon() {
	kill -0 "$1" 2>/dev/null || return 0
	kill -TERM "$1" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# unmount DIR: if it is a mount point, unmount it (lazily if busy)
unmount() {
	is_mounted "$1" || return 0
	fusermount3 -u "$1" 2>/dev/null || umount -l "$1" 2>/dev/null
}

# wait_for SECONDS CMD...: poll CMD every $WAIT_POLL s until it succeeds;
# 1 on timeout
wait_for() {
	local secs=$1
	shift
	local deadline=$((SECONDS + secs))
	until "$@"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep "${WAIT_POLL:-0.02}"
	done
	return 0
}

# fd_open PID PATH: true if process PID has PATH open
fd_open() {
	local f
	for f in /proc/"$1"/fd/*; do
		[ "$(readlink "$f" 2>/dev/null)" = "$2" ] && return 0
	done
	return 1
}

# size_ge FILE BYTES: FILE exists and holds at least BYTES
size_ge() { [ -e "$1" ] && [ "$(stat -c %s "$1")" -ge "$2" ]; }

# proc_status PID KEY: a /proc/PID/status value in kB (VmRSS, VmHWM, ...)
proc_status() { awk -v k="$2:" '$1 == k { print $2 }' /proc/"$1"/status; }
