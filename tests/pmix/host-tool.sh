#!/bin/bash
# pmix-host checked without iofs, by the standalone test tool pmix-tool:
# per-rank output byte-exact (source proc as the host passed it), stdin
# pushed to every rank (non-blocking push + EOF), PROC_TERMINATED and
# JOB_END seen by an explicitly registered handler.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/pmix/common.sh"

cat >"$T/rank.sh" <<'RANK'
seq -f "rank $PMIX_RANK %g" 1 500
printf "tail $PMIX_RANK" >&2
cat
exit $((PMIX_RANK + 3))
RANK
printf 'stdin line 1\nstdin line 2 no newline' >"$T/in"
mkdir -p "$T/out"

start_host --hold
"$PTOOL" --server "$(uri)" --outdir "$T/out" --push "nsT:*:$T/in" \
	--exit-after-end 1 >"$T/tool.log" 2>&1 &
TOOL=$!
track $TOOL
wait_for 10 grep -q '^connected' "$T/tool.log" || fail "tool did not connect: $(cat "$T/tool.log")"
host_cmd "job nsT:3:sh $T/rank.sh"
wait_for 30 finished $TOOL || fail "tool did not see JOB_END: $(cat "$T/tool.log")"
wait $TOOL || fail "tool failed: $(cat "$T/tool.log")"
for r in 0 1 2; do
	{ seq -f "rank $r %g" 1 500; cat "$T/in"; } >"$T/exp.$r"
	assert_eq "rank $r stdout" "$(sha "$T/exp.$r")" "$(sha "$T/out/nsT.$r.stdout")"
	assert_eq "rank $r stderr" "tail $r" "$(cat "$T/out/nsT.$r.stderr")"
	grep -q "^complete nsT $r stdout" "$T/tool.log" || fail "no COMPLETE for rank $r stdout"
	grep -q "^event PROC_TERMINATED nsT $r $((r + 3))" "$T/tool.log" || fail "no PROC_TERMINATED for rank $r"
done
assert_eq "output files" 6 "$(ls "$T/out" | wc -l)"
grep -q "^end nsT 3" "$T/tool.log" || fail "no JOB_END with status 3"
assert_eq "push callbacks" 2 "$(grep -c '^pushed SUCCESS' "$T/tool.log")"
log "ok: host + standalone tool"
