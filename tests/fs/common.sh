# Helpers for the fs suite, on top of tests/lib.sh.  Source after it.
PRODUCE="$IOFS_BUILD_DIR/tests/tools/iofs-produce"
PACE="$IOFS_BUILD_DIR/tests/tools/iofs-pace"
[ -x "$IOFS" ] || fail "no daemon at $IOFS"
[ -x "$IOFS_RUN" ] || fail "no forwarder at $IOFS_RUN"

# run_job NSPACE COUNT CMD...: start a job through iofs-run in the
# background; sets JOB_PID (tracked).
run_job() {
	local ns=$1 n=$2
	shift 2
	"$IOFS_RUN" --connect "$ADDR" --nspace "$ns" -n "$n" -- "$@" \
		>"$T/run-$ns.out" 2>"$T/run-$ns.err" &
	JOB_PID=$!
	track "$JOB_PID"
	wait_for 10 test -d "$MNT/$ns/$((n - 1))" || fail "job $ns did not appear"
}

# gate NAME [STEP POLLS]: a rank-side wait for "touch $T/NAME", polling
# every STEP seconds at most POLLS times (default 0.02 and 1500: 30 s)
gate() { echo "i=0; while [ ! -e $T/$1 ] && [ \$i -lt ${3:-1500} ]; do sleep ${2:-0.02}; i=\$((i+1)); done"; }

# finished PID: true once PID has exited
finished() { ! kill -0 "$1" 2>/dev/null; }

# job_state NSPACE: the job's state from its info file
job_state() { info_get "$MNT/$1/info" state; }
job_done() { [ "$(job_state "$1")" != running ]; }

# file_has FILE PATTERN
file_has() { grep -q -- "$2" "$1" 2>/dev/null; }

# rc_of PID: wait for PID (bounded by the test's own waits) and echo status
rc_of() {
	local rc=0
	wait "$1" || rc=$?
	echo "$rc"
}

# Predicates for wait_for (which re-runs its command; a "$(...)" in its
# arguments would be evaluated only once).
# exited INFOFILE: the rank/job is no longer running
exited() { [ "$(info_get "$1" state)" = exited ]; }
# size_is FILE N
size_is() { [ "$(stat -c %s "$1" 2>/dev/null)" = "$2" ]; }
