#!/bin/bash
# stdout and stderr written alternately and unbuffered by 3 ranks (progress
# on stderr, results on stdout, as most programs do) stay apart: each
# rank's two files are exact, the merged stdout and stderr views carry the
# right lines under <stdout>/<stderr> tags, `2>&1`-style order is kept per
# stream.
# Models Open MPI's test/simple/hello_output.c (every rank writes to stdout
# and stderr) and flux-core's job-shell output tests (stdout and stderr of
# each task kept separate, --label-io).
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/realuse/common.sh"
start_daemon

cat >"$T/prog.py" <<'EOF2'
import os, sys
r = int(os.environ.get("IOFS_RANK", sys.argv[1] if len(sys.argv) > 1 else "0"))
for i in range(300):
    os.write(1, b"result %d %d\n" % (r, i))
    os.write(2, b"progress %d %d%%\n" % (r, i * 100 // 299))
EOF2
"$IOFS_RUN" --nspace split -n 3 -- python3 "$T/prog.py" >"$T/run.out" 2>&1 || fail "iofs-run status $?"
assert_eq "nothing on the terminal" "" "$(cat "$T/run.out")"
for r in 0 1 2; do
	IOFS_RANK=$r python3 "$T/prog.py" >"$T/out.$r" 2>"$T/err.$r"
	expect_rank split $r "$T/out.$r"
	expect_bytes "split/$r stderr" "$T/err.$r" "$MNT/split/$r/stderr"
	flow_paired split $r
done
timeout 5 cat "$MNT/split/stdout" | sort >"$T/m.out"
timeout 5 cat "$MNT/split/stderr" | sort >"$T/m.err"
for r in 0 1 2; do sed "s/^/[split,$r]<stdout>: /" "$T/out.$r"; done | sort >"$T/m.out.exp"
for r in 0 1 2; do sed "s/^/[split,$r]<stderr>: /" "$T/err.$r"; done | sort >"$T/m.err.exp"
expect_bytes "merged stdout (sorted)" "$T/m.out.exp" "$T/m.out"
expect_bytes "merged stderr (sorted)" "$T/m.err.exp" "$T/m.err"
# per rank, the merged view keeps each stream's order
for r in 0 1 2; do
	assert_eq "rank $r order in the merged stdout" "$(sha "$T/out.$r")" \
		"$(timeout 5 cat "$MNT/split/stdout" | sed -n "s/^\[split,$r\]<stdout>: //p" | sha256sum | cut -d' ' -f1)"
done
log "OK"
