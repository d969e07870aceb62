# Helpers for the net suite, on top of tests/lib.sh.  Source after it.
[ -x "$IOFS" ] || fail "no daemon at $IOFS"
[ -x "$IOFS_RUN" ] || fail "no forwarder at $IOFS_RUN"

# gate NAME: rank-side shell snippet waiting for "touch $T/NAME" (<= 30 s)
gate() { echo "i=0; while [ ! -e $T/$1 ] && [ \$i -lt 1500 ]; do sleep 0.02; i=\$((i+1)); done"; }
finished() { ! kill -0 "$1" 2>/dev/null; }
file_has() { grep -q -- "$2" "$1" 2>/dev/null; }
rank_state() { info_get "$MNT/$1/$2/info" state; }
job_state() { info_get "$MNT/$1/info" state; }
job_done() { [ -f "$MNT/$1/info" ] && [ "$(job_state "$1")" != running ]; }
# rc_of PID: exit status of a FINISHED background child (wait_for finished
# first: \$(...) runs in a subshell, which can only reap finished jobs)
rc_of() {
	local rc=0
	wait "$1" || rc=$?
	echo $rc
}
# stdin_all_read NSPACE WRITER JOB BLOB GOT: the writer of rank 0's stdin
# and the job end well, and the rank read BLOB exactly once into GOT
# (count, sha256, stdin_bytes, stdin XOFF/XON paired)
stdin_all_read() {
	local ns=$1 w=$2 job=$3 blob=$4 got=$5 size info="$MNT/$1/0/info"
	size=$(stat -c %s "$blob")
	wait_for 60 finished "$w" || fail "$ns: the writer did not finish: $(cat "$info")"
	assert_eq "$ns: writer status (write() never failed)" 0 "$(rc_of "$w")"
	wait_for 60 finished "$job" || fail "$ns: job did not end (stdin EOF?): $(cat "$info")"
	assert_eq "$ns: job status" 0 "$(rc_of "$job")"
	assert_eq "$ns: bytes the rank read" "$size" "$(stat -c %s "$got")"
	assert_eq "$ns: sha256 of what the rank read" "$(sha "$blob")" "$(sha "$got")"
	assert_eq "$ns: stdin_bytes" "$size" "$(info_get "$info" stdin_bytes)"
	assert_eq "$ns: stdin XOFF/XON paired" "$(info_get "$info" stdin_xoff)" "$(info_get "$info" stdin_xon)"
}
# daemon_alive: the daemon runs and its mount answers
daemon_alive() { kill -0 "$DAEMON_PID" 2>/dev/null && ls "$MNT" >/dev/null; }
# size_is FILE N: st_size of FILE is N (for wait_for)
size_is() { [ "$(stat -c %s "$1" 2>/dev/null)" = "$2" ]; }
# state_is NSPACE RANK STATE (for wait_for)
state_is() { [ "$(rank_state "$1" "$2")" = "$3" ]; }

# netns_pair: two network namespaces joined by a veth pair (10.231.N.1 and
# .2 exist only inside them): NSD for a daemon (IPD), NSF for forwarders
# (IPF), PORT free in both; in_f CMD runs CMD in NSF; link_up says whether
# the link is up; both are deleted at exit (MNT2 unmounted).  Exits 77
# (skip) when namespaces cannot be made.
netns_pair() {
	command -v ip >/dev/null && command -v nsenter >/dev/null || { log "SKIP: no ip/nsenter"; exit 77; }
	NSD=iofsD$$
	NSF=iofsF$$
	NET=10.231.$(($$ % 250 + 1))
	IPD=$NET.1
	IPF=$NET.2
	PORT=$((20000 + $$ % 20000))
	netns_cleanup() {
		ip netns del "$NSD" 2>/dev/null
		ip netns del "$NSF" 2>/dev/null
		if [ -n "${MNT2:-}" ] && is_mounted "$MNT2"; then fusermount3 -u "$MNT2" 2>/dev/null || umount -l "$MNT2"; fi
	}
	trap 'rc=$?; netns_cleanup; (exit $rc); cleanup' EXIT
	ip netns add "$NSD" || { log "SKIP: cannot create network namespaces"; exit 77; }
	ip netns add "$NSF" || fail "ip netns add $NSF"
	ip link add "vd$$" type veth peer name "vf$$" || fail "veth"
	ip link set "vd$$" netns "$NSD"
	ip link set "vf$$" netns "$NSF"
	ip -n "$NSD" addr add "$IPD/24" dev "vd$$"
	ip -n "$NSF" addr add "$IPF/24" dev "vf$$"
	for ns in "$NSD" "$NSF"; do ip -n "$ns" link set lo up; done
	ip -n "$NSD" link set "vd$$" up
	ip -n "$NSF" link set "vf$$" up
	# (background processes call nsenter directly, so $! is the process itself)
	in_f() { nsenter --net="/run/netns/$NSF" "$@"; }
	link_up() { ip -n "$NSF" -o link show "vf$$" | grep -q LOWER_UP && ip -n "$NSD" -o link show "vd$$" | grep -q LOWER_UP; }
	wait_for 10 link_up || fail "veth link does not come up"
}
# state_is_link NSPACE RANK LINK: the rank's info says link: LINK (resume)
state_is_link() { [ "$(info_get "$MNT/$1/$2/info" link)" = "$3" ]; }

# start_netns_daemon [-o OPTS]: the daemon in the daemon's namespace (after
# netns_pair), on $ADDR and tcp:$IPD:$PORT, auth=none, remote peers
# allowed, extra options appended; waits for the mount and the TCP listener
start_netns_daemon() {
	nsenter --net="/run/netns/$NSD" "$IOFS" -f --listen "$ADDR" --listen "tcp:$IPD:$PORT" \
		-o allow_remote,auth=none "$@" "$MNT" >"$T/iofs.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 is_mounted "$MNT" || fail "daemon did not mount"
	wait_for 10 grep -q "listening on tcp:$IPD:$PORT" "$T/iofs.log" || fail "daemon does not listen on TCP"
}

# with_nofile LIMIT: the daemon ($IOFS from here) and "$T/iofs-run" run
# with RLIMIT_NOFILE LIMIT (a hand-over takes 3 descriptors per rank on
# both sides)
with_nofile() {
	local b
	for b in iofs iofs-run; do
		printf '#!/bin/sh\nexec prlimit --nofile=%s:%s -- "%s" "$@"\n' "$1" "$1" \
			"$([ $b = iofs ] && echo "$IOFS" || echo "$IOFS_RUN")" >"$T/$b"
		chmod 755 "$T/$b"
	done
	IOFS=$T/iofs
}
