#!/bin/bash
# Open MPI's mpirun starts the forwarders, ranks compute silently for 12 s
# between two lines (issue 11 defect 1, its second reproducer: "mpirun -n 2
# iofs-run ... sleep 12"); each rank's output stays in the mount, nothing
# on mpirun's terminal, the job is named by Open MPI's own job id.
# Models Open MPI's test/simple programs (hello, then a compute phase).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
command -v mpirun >/dev/null || { log "SKIP: no mpirun"; exit 77; }
start_daemon

timeout 60 mpirun --allow-run-as-root --oversubscribe -n 2 -x IOFS_ADDR \
	"$IOFS_RUN" -- sh -c 'echo "$PMIX_NAMESPACE" >"$0/pmixns.$IOFS_RANK"; echo "begin $IOFS_RANK"; sleep 12; echo "end $IOFS_RANK of $IOFS_NSPACE"' "$T" \
	>"$T/mpirun.out" 2>"$T/mpirun.err"
assert_eq "mpirun status" 0 $?
assert_eq "nothing on mpirun's terminal" "" "$(cat "$T/mpirun.out")"
ns=$(ls "$MNT")
# Open MPI 4 (ORTE): the jobid number; Open MPI 5 (PRRTE): prterun-HOST-N@1
assert_eq "job named by Open MPI's PMIx namespace" "$(cat "$T/pmixns.0")" "$ns"
assert_eq "both ranks in one namespace" "$(cat "$T/pmixns.0")" "$(cat "$T/pmixns.1")"
for r in 0 1; do
	printf 'begin %s\nend %s of %s\n' $r $r "$ns" >"$T/exp.$r"
	expect_rank "$ns" $r "$T/exp.$r"
	assert_eq "rank $r state" exited "$(rank_state "$ns" $r)"
	flow_paired "$ns" $r
done
log "OK"
