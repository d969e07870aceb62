# Helpers for the realuse suite (issue 11), on top of tests/lib.sh and
# tests/slurm/common.sh (net's helpers, the Slurm cluster, expect_rank,
# flow_paired).  Each case runs real tools on a real mount, as a user
# would, and says in its header which peer project's test it models.
. "$IOFS_SOURCE_DIR/tests/slurm/common.sh"

# long_ok: the long soak runs (normal build); not under ASan, nor with
# IOFS_REALUSE_LONG=0
long_ok() {
	[ "${IOFS_REALUSE_LONG:-1}" != 0 ] && ! is_asan "$IOFS"
}

# stamped N GAP: shell snippet printing N lines "line I t=EPOCH" GAP s apart
stamped() {
	echo "i=0; while [ \$i -lt $1 ]; do echo \"line \$i t=\$(date +%s.%N)\"; i=\$((i+1)); if [ \$i -lt $1 ]; then sleep $2; fi; done"
}
