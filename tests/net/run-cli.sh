#!/bin/bash
# iofs-run's command line (the option table in net/run.c): every bad value
# is refused with a clear message and exit status 2 before anything starts;
# --help (exit 0) lists every option, each of which iofs-run(1) documents;
# --version names the protocol.
. "$IOFS_SOURCE_DIR/tests/lib.sh"

# expect_err PATTERN ARGS...: iofs-run ARGS exits 2, stderr ~ PATTERN, and
# the command never ran (it would create $T/ran)
expect_err() {
	local pat=$1 rc=0
	shift
	timeout -k 2 10 "$IOFS_RUN" "$@" -- touch "$T/ran" >"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq 2 ] || fail "iofs-run $*: exit $rc, expected 2 ($(cat "$T/err"))"
	grep -q -- "$pat" "$T/err" || fail "iofs-run $*: message lacks '$pat': $(cat "$T/err")"
	[ ! -e "$T/ran" ] || fail "iofs-run $*: the command ran"
	[ ! -s "$T/out" ] || fail "iofs-run $*: wrote to stdout: $(cat "$T/out")"
}

expect_err "invalid --rank 'x': give a number from 0 to 4294967294" --rank x
expect_err "invalid --rank '-1'" --rank -1
expect_err "invalid --size '1x'" --size 1x
expect_err "invalid -n '0'" -n 0
expect_err "invalid -n '65537'" -n 65537
expect_err "invalid --nspace 'a/b'" --nspace a/b
expect_err "ranks 4294967294+2 overflow" --rank 4294967294 -n 2
expect_err "ranks 5..5 are outside --size 2 (ranks 0..1)" --rank 5 --size 2
expect_err "ranks 0..2 are outside --size 2" -n 3 --size 2
expect_err "usage: iofs-run" --no-such-option
rc=0
timeout -k 2 10 "$IOFS_RUN" --nspace ok >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "no COMMAND given" "$T/err" || fail "no COMMAND: exit $rc, $(cat "$T/err")"

# --help: exit 0, on stdout, every option of the table with its help text,
# and every long option it lists is in the man page
rc=0
"$IOFS_RUN" --help >"$T/help" 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "--help: exit $rc"
[ ! -s "$T/err" ] || fail "--help wrote to stderr: $(cat "$T/err")"
grep -q "^usage: iofs-run" "$T/help" || fail "--help lacks the usage line"
n=0
for o in $(grep -o -- '--[a-z][a-z-]*' "$T/help" | sort -u); do
	grep -q -- "${o//-/\\\\-}" "$IOFS_SOURCE_DIR/docs/man/iofs-run.1" ||
		fail "--help lists $o, iofs-run(1) does not document it"
	n=$((n + 1))
done
for o in --connect --nspace --rank --np --size --tag-output --rank-output \
	--timestamp-output --xml --raw --strict --munge-socket --verbose \
	--help --version; do
	grep -q -- "^ *\(-[a-zA-Z], \)\?$o\b.* [a-z]" "$T/help" || fail "--help lacks a line for $o"
done
# short forms still work: -h like --help, -n/-r/-s/-N/-c take values
"$IOFS_RUN" -h | cmp -s - "$T/help" || fail "-h differs from --help"
"$IOFS_RUN" --version | grep -q "^iofs-run [0-9].* (protocol [0-9]*)$" || fail "--version"
"$IOFS_RUN" -V | grep -q "^iofs-run [0-9].* (protocol [0-9]*)$" || fail "-V"

# the short options reach their setters: a run with them falls back (no
# daemon at that address) and the rank sees what was given
out=$("$IOFS_RUN" -c "unix:$T/none.sock" -N shortjob -r 3 -s 9 -- \
	sh -c 'echo "$IOFS_NSPACE $IOFS_RANK $IOFS_SIZE"' 2>"$T/err")
assert_eq "short options" "shortjob 3 9" "$out"
grep -q "cannot connect to unix:$T/none.sock" "$T/err" || fail "no fallback warning: $(cat "$T/err")"
figures run-cli "help_options=$n"
log "ok: $n options in --help, all documented"
