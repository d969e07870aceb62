#!/usr/bin/env python3
# spool_lives.py DIR BUILD SEED LIVES: daemon lives on one spool, each
# under caps drawn at random (per stream, per job, in all: an admin who
# changes them between restarts), each starting 1-3 jobs of 1-3 ranks
# printing lines (3 KB to 12 MB a rank; some in two parts a second apart,
# so they run across the end of the life; some with --xml; some print on
# stderr too; some over the socket path, --no-handover; some run by the
# user nobody, under a per-user cap drawn like the others: DIR must be
# 0755 for nobody to reach the copies of iofs-run and iofs-produce made
# there), each life
# ended by kill -9 or SIGTERM while they run; the forwarders resume on the
# next daemon.  After every start every job's files are read (a running
# job's are skipped):
# - no read fails;
# - per rank and channel: what is read is the tail of what the rank
#   printed there, and dropped_bytes + bytes read == st_size (a rank that
#   exited: == what it printed);
# - the merged views: merged_dropped_bytes + bytes read of both ==
#   their st_sizes; a tagged stdout view that dropped nothing holds each
#   rank's bytes exactly once.
# "== st_size" is checked only where nothing can evict while it reads
# (the last two lives, after every job ended): elsewhere a cap may evict
# as the running jobs append, and bytes a reader had read when they went
# are not counted as dropped (dropped_bytes counts unread bytes, docs/
# filesystem.md), so there: bytes read <= st_size - dropped.
# Written after spool-caps.sh 1c found that a clean restart of a job
# cap's view whose index's start was punched made every read of it fail
# (0c7a950; test-spool-index.c index_capped_clean_restarts is that case's
# own test), to try many more such histories than a hand-written case can.
# Prints one line per life; exits 1 with the reason on the first failure
# (the spool is copied to DIR/spool.fail).  Every process it starts is
# ended by pid and its mount unmounted on every exit path.
import os
import pwd
import random
import shutil
import signal
import subprocess
import sys
import time

D, B, seed, lives = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
IOFS, RUN = B + "/fs/iofs", B + "/net/iofs-run"
PROD = B + "/tests/tools/iofs-produce"
NBIN = D + "/nbin"  # what nobody runs (a build may be below a 0700 dir)
NOBODY = ["setpriv", "--reuid=nobody", "--regid=%d" % pwd.getpwnam("nobody").pw_gid,
          "--clear-groups", "--"]
MNT, SP, SOCK = D + "/mnt", D + "/spool.%d" % seed, D + "/lives.sock"
rnd = random.Random(seed)
jobs = {}  # name -> (ranks, [(bytes, seed offset, channel)...], seed base, xml)
procs = []
daemon = None
checked = {"rank": 0, "view": 0, "whole": 0}
env = dict(os.environ, IOFS_RECONNECT_TIMEOUT="60", IOFS_ADDR="unix:" + SOCK)
_refs = {}


def produce(size, s):
    if (size, s) not in _refs:
        _refs[(size, s)] = subprocess.run(
            [PROD, "-l", "-n", str(size), "-s", str(s)],
            capture_output=True, check=True).stdout
    return _refs[(size, s)]


def ref(ns, r, ch="stdout"):
    _, parts, sb, _ = jobs[ns]
    return b"".join(produce(sz, sb + r + off) for sz, off, c in parts if c == ch)


def unmerge(v, ns, r):
    """Rank r's bytes from a tagged view: ': ' starts one of its lines,
    '+ ' goes on with a line the view cut (its '\\n' was the view's)."""
    out = bytearray()
    pre = ("[%s,%d]<stdout>" % (ns, r)).encode()
    lines = v.split(b"\n")
    if v.endswith(b"\n"):
        lines = lines[:-1]
    for line in lines:
        if not line.startswith(pre):
            continue
        kind, body = line[len(pre):len(pre) + 2], line[len(pre) + 2:]
        if kind == b"+ " and out.endswith(b"\n"):
            del out[-1]
        out += body + b"\n"
    return bytes(out)


def info(path):
    d = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition(": ")
                d.setdefault(k, v)
    except OSError as e:
        d["error"] = str(e)
    return d


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        return e


def cleanup():
    global daemon
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if daemon:
        daemon.kill()
        daemon.wait()
        daemon = None
    subprocess.run(["fusermount3", "-u", MNT], capture_output=True)


def fail(msg):
    print("FAIL (seed %d): %s" % (seed, msg), flush=True)
    if os.path.isdir(SP):
        shutil.copytree(SP, D + "/spool.fail", dirs_exist_ok=True)
    cleanup()
    sys.exit(1)


def start(opts):
    global daemon
    with open(D + "/lives.log", "a") as log:
        daemon = subprocess.Popen(
            [IOFS, "-f", "--listen", "unix:" + SOCK, "-o",
             "resume_window=60," + opts, MNT], stdout=log, stderr=log)
    for _ in range(200):
        if os.path.ismount(MNT) and os.path.exists(SOCK):
            return
        if daemon.poll() is not None:
            break
        time.sleep(0.05)
    fail("the daemon did not mount (%s)" % opts)


def stop(kill):
    global daemon
    daemon.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    try:
        rc = daemon.wait(30)
    except subprocess.TimeoutExpired:
        fail("the daemon did not end after %s" % ("SIGKILL" if kill else "SIGTERM"))
    daemon = None
    if not kill and rc != 0:
        fail("the daemon's exit status after SIGTERM: %d" % rc)
    subprocess.run(["fusermount3", "-u", MNT], capture_output=True)


def check_rank(life, ns, r, strict):
    base = "%s/%s/%d/" % (MNT, ns, r)
    ri = info(base + "info")
    if "error" in ri:
        fail("life %d: %s/%d/info: %s" % (life, ns, r, ri["error"]))
    # dropped_bytes is the rank's two channels': one of them is empty, or
    # both are checked together
    lost = 0
    for ch in ("stdout", "stderr"):
        got = read(base + ch)
        if isinstance(got, Exception):
            fail("life %d: %s/%d/%s: %s" % (life, ns, r, ch, got))
        size = os.stat(base + ch).st_size
        lost += size - len(got)
        want = ref(ns, r, ch)
        if ri.get("state") == "exited" and size != len(want):
            fail("life %d: %s/%d exited with %d bytes of %s, printed %d" %
                 (life, ns, r, size, ch, len(want)))
        if not want[:size].endswith(got):
            fail("life %d: %s/%d/%s is not the tail of what it printed" %
                 (life, ns, r, ch))
    dropped = int(ri.get("dropped_bytes", "0"))
    if (strict and dropped != lost) or lost < dropped:
        fail("life %d: %s/%d: dropped_bytes %d, %d bytes not read" %
             (life, ns, r, dropped, lost))
    checked["rank"] += 1


def check_view(life, ns, n, strict):
    base = "%s/%s/" % (MNT, ns)
    ji = info(base + "info")
    lost = 0
    for ch in ("stderr", "stdout"):
        v = read(base + ch)
        if isinstance(v, Exception):
            fail("life %d: %s/%s: %s" % (life, ns, ch, v))
        lost += os.stat(base + ch).st_size - len(v)
    md = int(ji.get("merged_dropped_bytes", "0"))
    if (strict and md != lost) or lost < md:
        fail("life %d: %s: merged_dropped_bytes %d, %d bytes of the views "
             "not read" % (life, ns, md, lost))
    checked["view"] += 1
    if md or ji.get("state") != "exited" or jobs[ns][3]:
        return
    for r in range(n):
        want = ref(ns, r)
        if want and not want.endswith(b"\n"):
            want += b"\n"  # the view ends a rank's last line
        got = unmerge(v, ns, r)
        if got != want:
            fail("life %d: %s/stdout holds %d bytes of rank %d, want %d" %
                 (life, ns, len(got), r, len(want)))
    checked["whole"] += 1


def check(life, strict=False):
    for ns, (n, _, _, _) in jobs.items():
        if not os.path.isdir(MNT + "/" + ns):
            continue  # never registered before a kill
        if info(MNT + "/" + ns + "/info").get("state") == "running":
            continue
        for r in range(n):
            check_rank(life, ns, r, strict)
        check_view(life, ns, n, strict)


def caps():
    return ",".join([
        "window=64K", "spool=" + SP,
        "spool_max_stream=" + rnd.choice(["none", "none", "64K", "256K"]),
        "spool_max_job=" + rnd.choice(["none", "128K", "512K", "2M"]),
        "spool_max=" + rnd.choice(["none", "none", "1M", "4M", "16M"]),
        "spool_max_user=" + rnd.choice(["none", "256K", "1M", "4M"]),
    ])


def main():
    jn = 0
    os.makedirs(MNT, exist_ok=True)
    os.makedirs(NBIN, exist_ok=True)
    for prog in (RUN, PROD):
        shutil.copy(prog, NBIN)
    os.chmod(NBIN, 0o755)
    shutil.rmtree(SP, ignore_errors=True)
    for life in range(1, lives + 1):
        opts = caps()
        start(opts)
        check(life)
        print("life %d (%s): %d jobs" % (life, opts, len(jobs)), flush=True)
        for _ in range(rnd.randint(1, 3)):
            jn += 1
            ns, n = "j%d" % jn, rnd.randint(1, 3)
            size = rnd.choice([3000, 100000, 700000, 3000000, 12000000])
            if rnd.random() < 0.4:  # alive across the end of the life
                parts = [(size // 2, 0, "stdout"),
                         (size - size // 2, 50, "stdout")]
            else:
                parts = [(size, 0, "stdout")]
            if rnd.random() < 0.3:
                parts.insert(1, (rnd.choice([500, 50000, 400000]), 70, "stderr"))
            xml = rnd.random() < 0.25
            relay = ["--no-handover"] if rnd.random() < 0.3 else []
            who = rnd.random() < 0.3
            prod = NBIN + "/iofs-produce" if who else PROD
            cmd = "; sleep 1; ".join(
                "%s -l -n %d -s $((%d + $IOFS_RANK))%s" %
                (prod, sz, 100 * jn + off, " >&2" if c == "stderr" else "")
                for sz, off, c in parts)
            jobs[ns] = (n, parts, 100 * jn, xml)
            with open("%s/run-%s.out" % (D, ns), "w") as out:
                procs.append(subprocess.Popen(
                    (NOBODY + [NBIN + "/iofs-run"] if who else [RUN]) +
                    ["--nspace", ns, "-n", str(n)] + relay +
                    (["--xml"] if xml else []) + ["--", "sh", "-c", cmd],
                    env=env, stdout=out, stderr=subprocess.STDOUT))
        time.sleep(rnd.choice([0.05, 0.3, 1.0, 2.0]))
        stop(kill=rnd.random() < 0.6)
    start(caps())
    for p in procs:
        try:
            if p.wait(120) != 0:
                fail("a forwarder exited %d: %s" % (p.returncode, p.args))
        except subprocess.TimeoutExpired:
            fail("a forwarder did not end: %s" % (p.args,))
    check(lives + 1, strict=True)
    stop(kill=False)
    start(caps())
    check(lives + 2, strict=True)
    stop(kill=False)
    print("seed %d: %d jobs over %d lives, %d rank files, %d views read, "
          "%d views whole" % (seed, len(jobs), lives + 2, checked["rank"],
                              checked["view"], checked["whole"]), flush=True)


try:
    main()
finally:
    cleanup()
