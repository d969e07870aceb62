#!/bin/bash
# MUNGE on TCP (issue 12): a TCP HELLO must carry a MUNGE credential bound
# to its job name, rank range and a nonce.  Refused, each with a clear
# message: no credential (protocol 2 or 3), a forged one, one minted with
# another key, an expired one, a replayed one, one bound to another job or
# other ranks, another user's credential for a job of a different owner,
# and iofs-run without a munged (it falls back and says why).  Accepted:
# iofs-run as nobody over loopback TCP, its job owned by nobody.  A hung
# munged does not stall the daemon: Unix-socket jobs and the mount keep
# working, the TCP HELLO is refused after the decode timeout.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/fs/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/common.sh"
. "$IOFS_SOURCE_DIR/tests/security/munge-common.sh"

start_munged m
start_munged other
PORT=$((22000 + $$ % 20000))
TADDR="tcp:127.0.0.1:$PORT"
start_daemon --listen "$TADDR" -o "munge_socket=$MSOCK_m"
chmod 777 "$SOCK"
grep -q "listening on $TADDR.*MUNGE credentials required" "$T/iofs.log" ||
	fail "TCP listener does not say it requires MUNGE: $(cat "$T/iofs.log")"

# hello NSPACE BASE COUNT CREDFILE [VERSION]: the daemon's answer
hello() { "${HELLO_CRED[@]}" "$TADDR" "$@" </dev/null; }
expect() { # expect WHAT PATTERN ANSWER
	case $3 in *$2*) log "$1: $3" ;; *) fail "$1: expected '$2', got '$3'" ;; esac
}

# --- no credential --------------------------------------------------------
expect "no credential (v3)" "ERROR 35 no MUNGE credential" "$(hello none 0 1 -)"
expect "no credential (v2)" "ERROR 35 no MUNGE credential" "$(hello none 0 1 - 2)"
# --- forged: MUNGE armour around garbage; and a flipped byte ---------------
printf 'MUNGE:%s:' "$(head -c 120 /dev/urandom | base64 -w0)" >"$T/forged"
expect "forged credential" "ERROR 35 MUNGE: invalid credential" "$(hello forged 0 1 "$T/forged")"
mint "$MSOCK_m" flip 0 1 "$T/flip"
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read().strip()); b[40]^=1; open(sys.argv[1],"wb").write(b)' "$T/flip"
expect "altered credential" "ERROR 35 MUNGE: invalid credential" "$(hello flip 0 1 "$T/flip")"
# --- another MUNGE key (another cluster) -----------------------------------
mint "$MSOCK_other" otherkey 0 1 "$T/otherkey"
expect "credential of another key" "ERROR 35 MUNGE: invalid credential" "$(hello otherkey 0 1 "$T/otherkey")"
# --- bound to another job, to other ranks ---------------------------------
# (one credential each: a second use would be refused as a replay first)
mint "$MSOCK_m" bound1 0 1 "$T/bound"
expect "credential of another job" "ERROR 35 MUNGE: credential of uid 0 is not bound" "$(hello bound2 0 1 "$T/bound")"
mint "$MSOCK_m" bound1 0 1 "$T/bound"
expect "credential of other ranks" "ERROR 35 MUNGE: credential of uid 0 is not bound" "$(hello bound1 0 4 "$T/bound")"
# --- replay: a valid HELLO's credential sent again --------------------------
mint "$MSOCK_m" rp 0 1 "$T/rp"
t0=$(date +%s%N)
expect "valid credential" WELCOME "$(hello rp 0 1 "$T/rp")"
t1=$(date +%s%N)
expect "replayed credential" "ERROR 35 MUNGE: credential replayed" "$(hello rp 0 1 "$T/rp")"
# --- expired: a 1 s time-to-live, used 3 s later (expiry is time itself) ---
mint "$MSOCK_m" old 0 1 "$T/old" --ttl=1
sleep 3
expect "expired credential" "ERROR 35 MUNGE: credential expired" "$(hello old 0 1 "$T/old")"

# --- another user's credential for a job of a different owner --------------
run_job rootjob 1 sh -c "echo root output; $(gate rootend)"
printf 'iofs-hello 1\nnspace=rootjob\nranks=1+1\nnonce=%032x\n' $RANDOM |
	as_nobody munge -S "$MSOCK_m" >"$T/nbcred" || fail "nobody cannot mint"
# Refused, or (with the job-name collision rule) run under another name;
# either way nothing of nobody's reaches root's job.
ans=$(RANK_START=1 hello rootjob 1 1 "$T/nbcred")
case $ans in
"ERROR 32 job 'rootjob' belongs to uid 0: uid $NOBODY_UID"*) log "nobody's credential for root's job: $ans" ;;
WELCOME) log "nobody's credential for root's job: run under another name: $(ls "$MNT" | grep rootjob | tr '\n' ' ')" ;;
*) fail "nobody's credential for root's job: $ans" ;;
esac
"$IOFS_RUN" --nspace barrier -- true # frames sent before this were handled
[ ! -e "$MNT/rootjob/1" ] || fail "nobody's rank joined root's job"
touch "$T/rootend"
wait_for 10 job_done rootjob || fail "root's job did not end"
assert_eq "root's job output" "root output" "$(cat "$MNT/rootjob/0/stdout")"
if grep -q injected "$MNT/rootjob/stdout"; then fail "nobody's output in root's job"; fi

# --- iofs-run as nobody over TCP: accepted, owned by nobody ----------------
as_nobody "$IOFS_RUN" --strict --munge-socket "$MSOCK_m" --connect "$TADDR" --nspace nbtcp -- \
	sh -c 'echo from nobody over tcp' >"$T/nbtcp.out" 2>"$T/nbtcp.err" ||
	fail "nobody's TCP job failed: $(cat "$T/nbtcp.err")"
assert_eq "nobody's TCP job output" "from nobody over tcp" "$(as_nobody timeout 5 cat "$MNT/nbtcp/0/stdout")"
assert_eq "owner from the credential" "nobody $NOGROUP" "$(stat -c '%U %G' "$MNT/nbtcp/0/stdout")"
grep -q "job 'nbtcp' .* uid $NOBODY_UID (MUNGE)" "$T/iofs.log" || fail "daemon did not log the MUNGE uid"
# MUNGE_SOCKET in the environment works too
MUNGE_SOCKET="$MSOCK_m" "$IOFS_RUN" --strict --connect "$TADDR" --nspace envsock -- true ||
	fail "iofs-run with \$MUNGE_SOCKET was refused"

# --- iofs-run without a munged: refused, falls back, says why -------------
"$IOFS_RUN" --munge-socket "$T/no-such-socket" --connect "$TADDR" --nspace nomunge -- echo local \
	>"$T/nomunge.out" 2>"$T/nomunge.err"
assert_eq "rank output stays local" local "$(cat "$T/nomunge.out")"
grep -q "no MUNGE credential" "$T/nomunge.err" || fail "no reason given: $(cat "$T/nomunge.err")"
grep -q "no credential sent: MUNGE" "$T/nomunge.err" || fail "local MUNGE failure not shown: $(cat "$T/nomunge.err")"
[ ! -e "$MNT/nomunge" ] || fail "job without a credential appeared"

# --- a hung munged stalls nobody ---------------------------------------------
mint "$MSOCK_m" hung 0 1 "$T/hung"
kill -STOP "$MPID_m"
"${HELLO_CRED[@]}" "$TADDR" hung 0 1 "$T/hung" </dev/null >"$T/hung.ans" 2>&1 &
HUNG=$!
track $HUNG
s0=$(date +%s%N)
"$IOFS_RUN" --strict --nspace during -- echo unix works >"$T/during.out" 2>&1 ||
	fail "Unix-socket job failed while munged hangs: $(cat "$T/during.out")"
assert_eq "Unix job while munged hangs" "unix works" "$(timeout 5 cat "$MNT/during/0/stdout")"
s1=$(date +%s%N)
log "a Unix-socket job while munged is stopped: $(((s1 - s0) / 1000000)) ms"
[ $(((s1 - s0) / 1000000)) -lt 3000 ] || fail "the daemon stalled while munged hangs"
wait_for 30 finished $HUNG || fail "the TCP HELLO got no answer while munged hangs"
kill -CONT "$MPID_m"
expect "hung munged" "ERROR 35 MUNGE" "$(cat "$T/hung.ans")"
kill -0 "$DAEMON_PID" || fail "daemon died"
ls "$MNT" >/dev/null || fail "mount does not answer: $(ls "$MNT" 2>&1)"
figures munge-auth valid_hello_ms=$(((t1 - t0) / 1000000))
stop_daemon
log "ok"
