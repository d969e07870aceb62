#!/bin/bash
# issue 12 items 4 and 5, issue 11 defect 4: a job belongs to its owner.
# Another uid can neither join a running job nor replace an ended one (it
# gets a distinct name, "<name>~N"); a squatted name costs the real job its
# name, never its output; a same-user re-run never replaces a job whose
# output is still being read.  docs/filesystem.md, "Job names".
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"

mkdir -m 755 "$T/out"
start_daemon --output-dir "$T/out"
chmod 666 "$SOCK"
nobody_run() { as_nobody "$IOFS_RUN" --connect "$ADDR" "$@"; }
refused() { info_get "$MNT/$1/info" owner_refused; }

# 1. joining: root's job has rank 1 free; nobody registers rank 1 of it
"$IOFS_RUN" --connect "$ADDR" --nspace rj --rank 0 --size 2 -- sh -c "echo root0; $(gate rj)" \
	>"$T/rj.out" 2>"$T/rj.err" &
RJ=$!
track $RJ
wait_for 10 test -e "$MNT/rj/0/info" || fail "root's job rj did not appear"
nobody_run --nspace rj --rank 1 --size 2 -- echo injected >"$T/n1.out" 2>"$T/n1.err" ||
	fail "nobody's run failed: $(cat "$T/n1.err")"
[ ! -e "$MNT/rj/1" ] || fail "nobody joined root's job: $(cat "$MNT/rj/1/stdout" 2>&1)"
grep -q "this run is 'rj~1'" "$T/n1.err" || fail "nobody was not told its name: $(cat "$T/n1.err")"
assert_eq "nobody's output in its own job" injected "$(as_nobody timeout 5 cat "$MNT/rj~1/1/stdout")"
assert_eq "owner of rj~1" nobody "$(stat -c %U "$MNT/rj~1")"
assert_eq "refusals counted on rj" 1 "$(refused rj)"
daemon_log_has "job 'rj' belongs to uid 0: this run is 'rj~1'" || fail "rename not logged"
daemon_log_has "uid $NOBODY_UID may not join job 'rj' of uid 0" || fail "refusal not logged with both uids"
touch "$T/rj"
wait_for 10 finished $RJ || fail "root's rj did not end"

# 2. squatting: nobody registers rank 0 of "sq" (size 2) and exits; root's
#    2-rank job "sq" must still run, whole, visibly under another name
nobody_run --nspace sq --rank 0 --size 2 -- echo squat >/dev/null 2>&1
wait_for 10 test -e "$MNT/sq/0/info" || fail "the squatter's job did not appear"
"$IOFS_RUN" --connect "$ADDR" --nspace sq -n 2 -- sh -c 'echo real $IOFS_RANK' \
	>"$T/sq.out" 2>"$T/sq.err"
assert_eq "root's job status" 0 $?
[ ! -s "$T/sq.out" ] || fail "root's output fell back to the terminal: $(cat "$T/sq.out") / $(cat "$T/sq.err")"
grep -q "this run is 'sq~1'" "$T/sq.err" || fail "root was not told its name: $(cat "$T/sq.err")"
for r in 0 1; do
	assert_eq "root's rank $r" "real $r" "$(timeout 5 cat "$MNT/sq~1/$r/stdout")"
done
assert_eq "root's job state" exited "$(info_get "$MNT/sq~1/info" state)"
assert_eq "requested name in info" sq "$(info_get "$MNT/sq~1/info" requested)"
[ ! -e "$MNT/sq/1" ] || fail "root's rank joined the squatter's job"
[ "$(refused sq)" -ge 1 ] || fail "no refusal counted on sq"

# 3. replacing: root's ended job "done1"; nobody re-runs the name
"$IOFS_RUN" --connect "$ADDR" --nspace done1 -- echo root-result >/dev/null 2>&1
wait_for 10 exited "$MNT/done1/info" || fail "root's done1 did not end"
wait_for 10 size_ge "$T/out/done1/0/stdout" 12 || fail "no output file for done1"
nobody_run --nspace done1 -- echo attacker >/dev/null 2>"$T/n3.err" || fail "nobody's run failed"
grep -q "this run is 'done1~1'" "$T/n3.err" || fail "nobody was not told its name: $(cat "$T/n3.err")"
assert_eq "root's job output" root-result "$(timeout 5 cat "$MNT/done1/0/stdout")"
assert_eq "root's job owner" root "$(stat -c %U "$MNT/done1")"
assert_eq "root's output file" root-result "$(cat "$T/out/done1/0/stdout")"
assert_eq "root's output file owner" root "$(stat -c %U "$T/out/done1/0/stdout")"
assert_eq "nobody's output file" attacker "$(cat "$T/out/done1~1/0/stdout")"
assert_eq "refusals counted on done1" 1 "$(refused done1)"

# 4. same user: an ended job with an open, unread reader is not replaced
"$IOFS_RUN" --connect "$ADDR" --nspace keep -- echo first >/dev/null 2>&1
wait_for 10 exited "$MNT/keep/info" || fail "keep did not end"
exec 3<"$MNT/keep/0/stdout"
"$IOFS_RUN" --connect "$ADDR" --nspace keep -- echo second >/dev/null 2>"$T/k.err"
grep -q "this run is 'keep~1'" "$T/k.err" || fail "re-run was not renamed: $(cat "$T/k.err")"
assert_eq "the open reader still reads the first run" first "$(cat <&3)"
exec 3<&-
assert_eq "the first run is still in the tree" first "$(timeout 5 cat "$MNT/keep/0/stdout")"
assert_eq "the second run" second "$(timeout 5 cat "$MNT/keep~1/0/stdout")"
# ... and once everything was read, a re-run replaces the first ended one
"$IOFS_RUN" --connect "$ADDR" --nspace keep -- echo third >/dev/null 2>"$T/k3.err"
[ ! -s "$T/k3.err" ] || fail "re-run of a fully read job renamed: $(cat "$T/k3.err")"
assert_eq "replaced" third "$(timeout 5 cat "$MNT/keep/0/stdout")"
stop_daemon
log "ok"
