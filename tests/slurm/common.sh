# Helpers for the slurm suite, on top of tests/lib.sh and tests/net/common.sh.
# slurm_start brings up a private one-node cluster (tests/launchers/
# slurm-cluster) in $T/slurm; it is stopped (by pid) before the daemon at
# exit.  Skips (77) when Slurm is not installed.
. "$IOFS_SOURCE_DIR/tests/net/common.sh"
SLURM_CLUSTER="$IOFS_SOURCE_DIR/tests/launchers/slurm-cluster"
SLURM_DIR="$T/slurm"
# the users' tools driver (tests/realuse/drive.py: follow, expect, less,
# rebuild, poll)
DRIVE="python3 $IOFS_SOURCE_DIR/tests/realuse/drive.py"

slurm_stop() {
	[ -f "$SLURM_DIR/slurm.conf" ] && "$SLURM_CLUSTER" stop "$SLURM_DIR"
	return 0
}

slurm_start() {
	command -v slurmctld >/dev/null && command -v munged >/dev/null || {
		log "SKIP: slurm-wlm/munge not installed (scripts/setup)"
		exit 77
	}
	# stop the cluster first: its steps hold forwarders of the daemon
	trap 'rc=$?; slurm_stop; (exit $rc); cleanup' EXIT
	"$SLURM_CLUSTER" start "$SLURM_DIR" || fail "cluster did not start"
	export SLURM_CONF="$SLURM_DIR/slurm.conf"
	# the forwarders in steps find the daemon through the inherited env
	export IOFS_ADDR
}

# jobs_in_mount: the job directories, one per line, sorted
jobs_in_mount() { ls -1 "$MNT" | sort; }

# slurm_idle: no job left in the cluster's queue
slurm_idle() { [ -z "$(squeue -h -o %i 2>/dev/null)" ]; }

# expect_bytes WHAT EXPECTED_FILE ACTUAL_FILE: same size and sha256
expect_bytes() {
	assert_eq "$1 bytes" "$(stat -c %s "$2")" "$(stat -c %s "$3")"
	assert_eq "$1 sha256" "$(sha "$2")" "$(sha "$3")"
}

# expect_rank NSPACE RANK EXPECTED_FILE: exact bytes of the rank's stdout
expect_rank() { expect_bytes "$1/$2 stdout" "$3" "$MNT/$1/$2/stdout"; }

# now_bytes FILE: what the live file holds now (st_size bytes; cat
# would follow the rank until it ends)
now_bytes() { head -c "$(stat -c %s "$1")" "$1"; }
# start_pacer FILE OUT PACE_ARGS...: a slow reader (iofs-pace) of FILE into
# OUT in the background (PACER_PID, tracked), attached on return
start_pacer() {
	local f=$1 out=$2
	shift 2
	"$PACE" "$@" -i "$f" -o "$out" &
	PACER_PID=$!
	track $PACER_PID
	await_reader $PACER_PID "$f"
}
# flow_paired NSPACE RANK: every XOFF of the rank's streams was released
flow_paired() {
	local f="$MNT/$1/$2/info" k
	for k in stdout stderr stdin; do
		assert_eq "$1/$2 ${k}_xoff == ${k}_xon" \
			"$(info_get "$f" ${k}_xoff)" "$(info_get "$f" ${k}_xon)"
	done
}

# new_jobs BEFORE: the job directories not in the list BEFORE
new_jobs() { comm -13 <(echo "$1") <(jobs_in_mount); }
has_new_job() { [ -n "$(new_jobs "$1")" ]; }
# srun_bg OUT SRUN_ARGS...: start srun in the background (pid in SRUN,
# output in OUT); NS is the one job it adds to the mount (<= 30 s)
srun_bg() {
	local before out=$1
	shift
	before=$(jobs_in_mount)
	timeout 120 srun "$@" >"$out" 2>&1 &
	SRUN=$!
	track $SRUN
	wait_for 30 has_new_job "$before" ||
		fail "srun $* added no job to the mount: $(cat "$out")"
	NS=$(new_jobs "$before" | head -n 1)
}
# srun_done SECONDS: the srun started by srun_bg ended with status 0
srun_done() {
	wait_for "$1" finished $SRUN || fail "srun (pid $SRUN) did not end in $1 s"
	local rc
	rc=$(rc_of $SRUN)
	[ "$rc" = 0 ] || fail "srun status $rc"
}
# ranks_up NS N: ranks 0..N-1 of job NS are in the mount (for wait_for)
ranks_up() {
	local r
	for ((r = 0; r < $2; r++)); do [ -e "$MNT/$1/$r/stdin" ] || return 1; done
}
