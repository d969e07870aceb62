# Helpers for the realuse suite (issue 11), on top of tests/lib.sh and
# tests/slurm/common.sh (net's helpers, the Slurm cluster, expect_rank,
# flow_paired).  Each case runs real tools on a real mount, as a user
# would, and says in its header which peer project's test it models.
. "$IOFS_SOURCE_DIR/tests/slurm/common.sh"
DRIVE="python3 $IOFS_SOURCE_DIR/tests/realuse/drive.py"

# long_ok: the long soak runs (normal build); not under ASan, nor with
# IOFS_REALUSE_LONG=0
long_ok() {
	[ "${IOFS_REALUSE_LONG:-1}" != 0 ] && ! is_asan "$IOFS"
}

# now_bytes FILE: what the live file holds now (st_size bytes; cat
# would follow the rank until it ends)
now_bytes() { head -c "$(stat -c %s "$1")" "$1"; }
# has_line FILE LINE: FILE (a plain file) holds LINE (for wait_for)
has_line() { grep -qxF -- "$2" "$1" 2>/dev/null; }
# lines_ge FILE N: FILE has at least N lines (for wait_for)
lines_ge() { [ -e "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }

# expect_bytes WHAT EXPECTED_FILE ACTUAL_FILE: same size and sha256
expect_bytes() {
	assert_eq "$1 bytes" "$(stat -c %s "$2")" "$(stat -c %s "$3")"
	assert_eq "$1 sha256" "$(sha "$2")" "$(sha "$3")"
}

# stamped N GAP: shell snippet printing N lines "line I t=EPOCH" GAP s apart
stamped() {
	echo "i=0; while [ \$i -lt $1 ]; do echo \"line \$i t=\$(date +%s.%N)\"; i=\$((i+1)); if [ \$i -lt $1 ]; then sleep $2; fi; done"
}
