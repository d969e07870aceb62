#!/bin/bash
# Random, truncated and malformed frames thrown at a live daemon's socket
# while a real job runs: each bad connection is closed with a logged reason,
# the job's output arrives byte-exact, the daemon carries on.
. "$IOFS_SOURCE_DIR/tests/lib.sh"
. "$IOFS_SOURCE_DIR/tests/net/common.sh"

start_daemon
head -c 5000000 /dev/urandom >"$T/blob"

# The real job: waits for the gate, then 5 MB of binary on stdout and a
# line on stderr; a reader is attached from the start.
"$IOFS_RUN" --nspace real -n 2 -- sh -c "$(gate go); if [ \$IOFS_RANK = 0 ]; then cat $T/blob; fi; echo done \$IOFS_RANK >&2" &
JOB=$!
track $JOB
wait_for 10 test -e "$MNT/real/1/info" || fail "job real did not appear"
"$IOFS_RUN" --nspace hold -- sh -c "echo holding; $(gate release); echo released" &
HOLD=$!
track $HOLD
wait_for 10 test -e "$MNT/hold/0/info" || fail "job hold did not appear"
timeout 120 cat "$MNT/real/0/stdout" >"$T/out" &
CAT=$!
track $CAT

cat >"$T/throw.py" <<'PY'
import random, socket, struct, sys, time
path, rounds = sys.argv[1], int(sys.argv[2])
rng = random.Random(20261201)
MAGIC, VER = 0x53464f49, 2

def frame(t, body):
    return struct.pack('<IB', len(body) + 1, t) + body

def hello(ns=b'junk', base=0, count=2):
    return frame(1, struct.pack('<IHHIIIIIIII', MAGIC, VER, 0, base, count,
                                0, 1, 0, 0, 0, 0) + bytes([len(ns)]) + ns +
                 b'\x01h')

def data(rank, ch, payload):
    return frame(5, struct.pack('<IB', rank, ch) + payload)

def send(chunks, linger=0.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    try:
        for c in chunks:
            s.sendall(c)
        time.sleep(linger)
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):
            pass
    except OSError:
        pass
    s.close()

good = hello(b'ok', 0, 1) + frame(4, struct.pack('<II', 0, 1))
cases = [
    [b''],                                              # connect, close
    [hello()[:7]],                                      # truncated HELLO
    [hello()[:-1]],                                     # one byte short
    [struct.pack('<IB', 0x7fffffff, 5)],                # oversized
    [struct.pack('<IB', 0, 5)],                         # length 0
    [frame(99, b'x')],                                  # unknown type
    [data(0, 2, b'before hello')],                      # before HELLO
    [hello(b'.')],                                      # bad nspace
    [hello(b'a/b')],                                    # bad nspace
    [hello(b'hold', 0, 1)],                             # running rank: renamed
    [hello()[:5] + b'\0\0\0\0' + hello()[9:]],          # bad magic
    [hello() + hello()],                                # second HELLO
    [hello() + data(7, 2, b'x')],                       # rank out of range
    [hello() + data(0, 2, b'x')],                       # no RANK_START
    [hello() + frame(4, struct.pack('<II', 0, 1)) + data(0, 0x10, b'x')],
    [hello() + frame(4, struct.pack('<II', 0, 1)) + data(0, 2, b'')],
    [hello() + frame(2, b'\1\0\0\0\0\0\1\0')],          # WELCOME to daemon
    [good + data(0, 2, b'half a frame')[:9]],           # truncated DATA
    [good + frame(7, struct.pack('<IBI', 0, 0, 300))],  # bad exit code
    [good + frame(16, b'\0\0ls\nstate: exited')],       # COMMAND forging a line
    [good + frame(16, b'\0\0ls') + frame(16, b'\0\0rm')],  # second COMMAND
]
n = 0
for c in cases:
    send(c)
    n += 1
for i in range(rounds):
    kind = rng.randrange(4)
    if kind == 0:
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    elif kind == 1:
        base = hello(b'r%d' % i) + frame(4, struct.pack('<II', 1, 2)) + \
            data(1, 2, b'payload %d\n' % i)
        blob = base[:rng.randrange(1, len(base))]
    else:
        base = bytearray(hello(b'm%d' % i) + frame(4, struct.pack('<II', 0, 3)) +
                         data(0, 4, b'mutated %d\n' % i) +
                         frame(6, struct.pack('<IB', 0, 2)) +
                         frame(7, struct.pack('<IBI', 0, 0, 0)))
        for _ in range(rng.randrange(1, 4)):
            base[rng.randrange(len(base))] = rng.randrange(256)
        blob = bytes(base)
    send([blob])
    n += 1
print(n)
PY
# a silent client: connects, sends nothing, holds the socket
python3 -c 'import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(30)' "$SOCK" &
SILENT=$!
track $SILENT
timeout 100 python3 "$T/throw.py" "$SOCK" 300 >"$T/thrown" 2>"$T/throw.err" &
THROW=$!
track $THROW
sleep 0.3
touch "$T/go" # the real job streams while the garbage flies
wait_for 100 finished $THROW || fail "the thrower did not finish"
assert_eq "thrower status" 0 "$(rc_of $THROW)"
wait_for 100 finished $CAT || fail "reader of the real job did not end"
wait_for 30 finished $JOB || fail "real job did not end"
assert_eq "real job status" 0 "$(rc_of $JOB)"
assert_eq "real job bytes" 5000000 "$(stat -c %s "$T/out")"
assert_eq "real job sha256" "$(sha "$T/blob")" "$(sha "$T/out")"
assert_eq "real job stderr" "done 1" "$(timeout 5 cat "$MNT/real/1/stderr")"
assert_eq "real job state" exited "$(rank_state real 0)"

assert_eq "hold job untouched" running "$(rank_state hold 0)"
grep -q "job 'hold' already has a rank 0.*this run is 'hold~1'" "$T/iofs.log" ||
	fail "a HELLO for a running rank was not given a distinct name"
touch "$T/release"
wait_for 10 finished $HOLD || fail "job hold did not end"
assert_eq "hold job status" 0 "$(rc_of $HOLD)"
assert_eq "hold job output" "$(printf 'holding\nreleased')" "$(timeout 5 cat "$MNT/hold/0/stdout")"

closed=$(grep -c "closing:" "$T/iofs.log")
log "$(cat "$T/thrown") connections thrown, $closed closed with a reason"
[ "$closed" -ge 19 ] || fail "only $closed connections closed with a reason"
for why in "frame too large" "unknown frame type" "before HELLO" "invalid namespace" \
	"bad magic" "second HELLO" "outside" "no RANK_START" "invalid channel" \
	"not valid in this direction" "bad frame length" "field out of range" \
	"COMMAND: control character in the command line" "second COMMAND"; do
	grep -q "closing:.*$why" "$T/iofs.log" || fail "no logged reason '$why': $(grep -E "real|closing" "$T/iofs.log" | head -30)"
done
wait_for 20 grep -q "no HELLO in time" "$T/iofs.log" || fail "a silent connection was not dropped"
daemon_alive || fail "daemon died"
"$IOFS_RUN" --nspace after -- echo still-serving
assert_eq "daemon serves after the garbage" still-serving "$(timeout 5 cat "$MNT/after/0/stdout")"
stop_daemon
log "ok"
