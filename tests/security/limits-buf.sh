#!/bin/bash
# max_buf_uid: a user's output waiting in the daemon is bounded over all
# their connections.  With the bound at its minimum (64 KiB), four of
# nobody's forwarders stream 8 MB each at once: the daemon pauses reading
# them when the user's total is over the bound (logged with the uid and the
# limit) and resumes when it drains -- nothing is lost or stuck (sha256),
# and root's stream beside them is exact too.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

start_daemon -o max_buf_uid=65536
chmod 777 "$SOCK"
PIDS_NB=()
for i in 1 2 3 4; do
	"${NOBODY_BG[@]}" "$IOFS_RUN" --strict --nspace "nb$i" -- sh -c \
		"head -c 1 >/dev/null; exec $PRODUCE -n 8000000 -s $i" >"$T/nb$i.err" 2>&1 &
	PIDS_NB+=($!)
	track $!
done
gated_producer rootbuf 8000000 9 "$T/want.root"
for i in 1 2 3 4; do
	wait_for 10 test -e "$MNT/nb$i/0/stdout" || fail "nobody's job nb$i did not appear"
	"$PRODUCE" -n 8000000 -s $i >"$T/want.$i"
	"${NOBODY_BG[@]}" cat "$MNT/nb$i/0/stdout" >"$T/got.$i" &
	track $!
	eval "R$i=$!"
	await_reader $! "$MNT/nb$i/0/stdout"
done
start_reader "$MNT/rootbuf/0/stdout" "$T/got.root"
ROOTR=$READER_PID
for i in 1 2 3 4; do printf g | as_nobody tee "$MNT/nb$i/0/stdin" >/dev/null; done
open_gate rootbuf
for i in 1 2 3 4; do
	eval "r=\$R$i"
	wait_for 120 finished "$r" || fail "nobody's stream $i stuck"
	assert_eq "nobody's stream $i sha256" "$(sha "$T/want.$i")" "$(sha "$T/got.$i")"
done
wait_for 60 finished $ROOTR || fail "root's stream stuck"
assert_eq "root's stream sha256" "$(sha "$T/want.root")" "$(sha "$T/got.root")"
grep -q "uid $NOBODY_UID paused: limit max_buf_uid=65536" "$T/iofs.log" ||
	fail "max_buf_uid never paused nobody's connections"
log "max_buf_uid pauses: $(grep -o 'max_buf_uid=65536 reached.*' "$T/iofs.log" | tail -n 1)"
stop_daemon
log "ok"
