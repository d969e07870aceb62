# Helpers for the security (red-team) suite, on top of tests/lib.sh and
# tests/fs/common.sh.  Every attack runs as the unprivileged user nobody;
# each test fails when the attack succeeds and passes when it is refused
# with a clear message (docs/security.md).
id nobody >/dev/null 2>&1 || fail "no user nobody"
NOGROUP=$(id -gn nobody)
NOBODY_UID=$(id -u nobody)
as_nobody() { setpriv --reuid=nobody --regid="$NOGROUP" --clear-groups -- "$@"; }
chmod 755 "$T"
# nobody cannot reach a build or a source tree below a private directory
# (CI clones into one): the programs and python helpers nobody runs are
# copied into $T, which is 0755.
mkdir "$T/nbin"
cp "$IOFS_RUN" "$PRODUCE" "$PACE" "$T/nbin/"
cp "$IOFS_SOURCE_DIR"/tests/security/*.py "$T/"
chmod 755 "$T/nbin" "$T/nbin/"*
chmod 644 "$T/"*.py
IOFS_RUN="$T/nbin/iofs-run"
PRODUCE="$T/nbin/iofs-produce"
PACE="$T/nbin/iofs-pace"

# root_file PATH: a root-owned 0600 file with known content; echoes its sha
root_file() {
	printf 'root secret %s\n' "$RANDOM" >"$1"
	chmod 600 "$1"
	sha "$1"
}

# daemon_log_has PATTERN: the daemon's log says so
daemon_log_has() { grep -q -- "$1" "$T/iofs.log" 2>/dev/null; }
# NOBODY_BG=(...) prefix for a background command whose $! must be the
# program itself (a function in the background would be a subshell)
NOBODY_BG=(setpriv --reuid=nobody --regid="$NOGROUP" --clear-groups --)
