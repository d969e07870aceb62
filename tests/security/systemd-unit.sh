#!/bin/bash
# contrib/systemd/iofs.service: valid for systemd (systemd-analyze verify,
# with ExecStart pointed at this build), and consistent with the forwarders'
# search order: it listens on the socket iofs-run looks for first.
. "$IOFS_SOURCE_DIR/tests/lib.sh"

UNIT="$IOFS_SOURCE_DIR/contrib/systemd/iofs.service"
command -v systemd-analyze >/dev/null || { log "SKIP: no systemd-analyze"; exit 77; }
grep -q '^ExecStart=/usr/local/sbin/iofs -f --listen unix:/run/iofs/iofs.sock /iof$' "$UNIT" ||
	fail "the unit does not listen on unix:/run/iofs/iofs.sock"
grep -q '^RuntimeDirectory=iofs$' "$UNIT" || fail "no RuntimeDirectory=iofs"
grep -q '/run/iofs/iofs.sock' <(strings "$IOFS_RUN") || fail "iofs-run does not look for /run/iofs/iofs.sock"
sed "s|/usr/local/sbin/iofs|$IOFS|" "$UNIT" >"$T/iofs.service"
systemd-analyze verify --man=no "$T/iofs.service" >"$T/verify" 2>&1 ||
	fail "systemd-analyze verify: $(cat "$T/verify")"
[ ! -s "$T/verify" ] || fail "systemd-analyze verify warns: $(cat "$T/verify")"
log "ok"
