# hammer.py SOCK MNT DIR: as an unprivileged user, hit every per-user limit
# of the daemon at once and hold it until DIR/release exists.  Writes
# DIR/report (one "name value" per line) and touches DIR/ready once every
# limit is being held.  Phases (docs/security.md, tests/security/limits-hammer.sh):
#   ranks  HELLOs announcing many ranks, kept open; then a flood of them
#   jobs   one-rank jobs until max_jobs_uid refuses
#   stdin  writers of 1 MiB into a rank that never reads (DIR/sink: its job)
#   conns  idle connections until max_conns_uid refuses
import os, socket, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proto

sock, mnt, d = sys.argv[1], sys.argv[2], sys.argv[3]
addr = 'unix:' + sock
report = {}
held = []


def hello(ns, base, count):
    s = proto.connect(addr)
    s.sendall(proto.hello(ns, base, count))
    a = proto.answer(s)
    if a == 'WELCOME':
        held.append(s)
    else:
        s.close()
    return a


def limit_of(answer):
    for w in answer.split():
        if w.startswith('max_'):
            return w.split('=')[0]
    return answer[:60]


# ranks (the test sets max_ranks_hello=32768, _job=49152, _uid=98455:
# the sink's 150 + 3 x 32768 + 1 left for the jobs phase)
for name, ns, base, count in [('ranks_hello', b'r0', 0, 40000),
                              ('first', b'bigjob', 0, 32768),
                              ('ranks_job', b'bigjob', 32768, 32768),
                              ('second', b'r2', 0, 32768),
                              ('third', b'r3', 0, 32768),
                              ('ranks_uid', b'r4', 0, 2)]:
    report['hello_' + name] = limit_of(hello(ns, base, count))

# flood: 160 more HELLOs of 32768 ranks (5.2 M ranks, ~280 MB of rank
# slots in the daemon if nothing stops them), kept open when accepted
report['flood_accepted'] = sum(hello(b'f%d' % i, 0, 32768) == 'WELCOME'
                               for i in range(160))

# jobs: until refused
n = 0
while n < 5000:
    s = proto.connect(addr)
    s.sendall(proto.hello(b'j%d' % n) + proto.rank_start(0) + proto.exit_(0))
    a = proto.answer(s)
    s.shutdown(socket.SHUT_WR)
    while proto.recv_frame(s)[0] is not None:
        pass
    s.close()
    if a != 'WELCOME':
        report['jobs_refused'] = limit_of(a)
        break
    n += 1
report['jobs_made'] = n

# stdin: one writer per rank of the sink job, whose ranks never read.  The
# kernel serialises writes to one file, so one parked write per rank; the
# first 1 MiB of each goes on to the forwarder (the stdin credit), the
# second waits in the daemon, or is refused (max_stdin_uid).
sink, nranks = open(os.path.join(d, 'sink')).read().split()
refused = []
lock = threading.Lock()


def writer(rank):
    path = os.path.join(mnt, sink, str(rank), 'stdin')
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        with lock:
            refused.append('open ' + e.strerror)
        return
    try:
        os.write(fd, b'x' * (1 << 20))
        os.write(fd, b'y' * (1 << 20))
    except OSError as e:
        with lock:
            refused.append(e.strerror)
    # a parked write returns only at release (the rank ends)


WRITERS = int(nranks)
threads = [threading.Thread(target=writer, args=(r,), daemon=True)
           for r in range(WRITERS)]
for t in threads:
    t.start()
# until the refusals stop coming (5 s without one: a loaded machine starts
# 150 writers slowly; 2 s saw 32 refusals there, 65-80 on an idle one),
# 60 s at most
deadline = time.time() + 60
last, since = -1, time.time()
while time.time() < deadline and time.time() - since < 5:
    with lock:
        if len(refused) != last:
            last, since = len(refused), time.time()
    time.sleep(0.05)
report['stdin_writers'] = WRITERS
report['stdin_refused'] = len(refused)
report['stdin_refusal'] = (refused[0] if refused else 'none').replace(' ', '_')

# conns: idle connections, 50 at a time, until one is refused (its ERROR
# arrives at once; a held one hears nothing)
import select
conns = 0
refused_conn = ''
while conns < 3000 and not refused_conn:
    batch = []
    for i in range(50):
        try:
            batch.append(proto.connect(addr, timeout=5))
        except OSError as e:
            refused_conn = 'connect_' + e.strerror.replace(' ', '_')
            break
    time.sleep(0.2)
    poller = select.poll()  # (select() stops at fd 1024)
    for s in batch:
        poller.register(s, select.POLLIN)
    ready_fds = {fd for fd, _ in poller.poll(200)} if batch else set()
    readable = {s for s in batch if s.fileno() in ready_fds}
    for s in batch:
        if s in readable and not refused_conn:
            refused_conn = limit_of(proto.answer(s))
        if s in readable:
            s.close()
        else:
            held.append(s)
            conns += 1
report['conns_held'] = conns
report['conns_refused'] = refused_conn

with open(os.path.join(d, 'report'), 'w') as f:
    for k, v in report.items():
        f.write('%s %s\n' % (k, v))
open(os.path.join(d, 'ready'), 'w').close()
# hold: keep knocking (idle connections are dropped after the daemon's
# 10 s HELLO timeout; the refused ones cost it an accept each)
deadline = time.time() + 120
knocks = 0
while not os.path.exists(os.path.join(d, 'release')) and time.time() < deadline:
    try:
        s = proto.connect(addr, timeout=5)
        held.append(s)
        knocks += 1
    except OSError:
        pass
    time.sleep(0.005)
for s in held:
    s.close()
with open(os.path.join(d, 'report'), 'a') as f:
    f.write('knocks %d\n' % knocks)
