#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Drivers for the realuse suite: what a user's tools do with the mount.

  drive.py follow MAXLAT N TIMEOUT CMD...
      Run CMD (tail -f ...), read its output lines; lines holding
      "t=EPOCH" (stamped by the rank when it wrote them) give a latency.
      Stop after N stamped lines, print every line read to stdout and
      "latency p50 max" to stderr.  Exit 1 if a latency exceeds MAXLAT s
      or TIMEOUT s pass first.
  drive.py expect STDOUT STDIN TIMEOUT [EXPECT SEND]...
      An expect-style driver: open the rank's STDOUT file FIRST, then its
      STDIN file (as pexpect/a debugger front end/a test harness do), then
      for each pair wait until the output read so far ends with EXPECT and
      write SEND ("\\n" is a newline).  Each open, wait and write has
      TIMEOUT s.  Prints the per-round latencies to stderr.
  drive.py less FILE TIMEOUT TEXT...
      Run `less +F FILE` under a pseudo-terminal; wait until every TEXT
      was drawn, then Ctrl-C (stop following) and q.  Exit 1 on timeout.
      With DRIVE_MARK=PATH, creates PATH once the first TEXT was drawn.
  drive.py rebuild NSPACE MERGED OUT
      Rebuild each rank's stream from a merged view's tagged lines (a line
      continued under a "+ " tag after another rank's piece joins its
      start: docs/design.md "Partial lines") into OUT.RANK; print how many
      continuations there were.  Exit 1 on an untagged line.
  drive.py pty TIMEOUT INPUT CMD...
      Run CMD under a pseudo-terminal (an interactive login, e.g. salloc's
      interactive step), type INPUT ("\\n" is a newline), print what the
      terminal showed; exit with CMD's status, 124 after TIMEOUT s.
  drive.py poll TIMEOUT N FILE...
      poll() the open FILEs for input and read what arrives until N lines
      in all; print "FILE: line" per line, and "USER SYS" CPU seconds used
      to stderr.
"""
import os
import pty
import re
import resource
import select
import signal
import subprocess
import sys
import time


class Timeout(Exception):
    pass


def alarm(secs):
    def on_alarm(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, secs)


def follow(maxlat, n, timeout, cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    deadline = time.time() + timeout
    lats, out, buf = [], [], b""
    try:
        while len(lats) < n:
            left = deadline - time.time()
            if left <= 0:
                raise Timeout()
            r, _, _ = select.select([p.stdout], [], [], left)
            if not r:
                continue
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            now = time.time()
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                out.append(line)
                for word in line.split():
                    if word.startswith(b"t="):
                        lats.append(now - float(word[2:]))
    except Timeout:
        sys.stderr.write("follow: timeout after %d stamped lines\n" % len(lats))
    finally:
        p.terminate()
        p.wait()
    for line in out:
        sys.stdout.buffer.write(line + b"\n")
    sys.stdout.flush()
    if not lats:
        sys.stderr.write("latency none\n")
        return 1
    s = sorted(lats)
    sys.stderr.write("latency p50 %.3f max %.3f lines %d\n"
                     % (s[len(s) // 2], s[-1], len(s)))
    return 0 if len(lats) >= n and s[-1] <= maxlat else 1


def expect(out_path, in_path, timeout, pairs):
    def unesc(s):
        return s.replace("\\n", "\n").encode()
    t0 = time.time()
    alarm(timeout)
    try:
        ofd = os.open(out_path, os.O_RDONLY)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        ifd = os.open(in_path, os.O_WRONLY)
    except Timeout:
        sys.stderr.write("expect: open of %s then %s blocked %.1f s\n"
                         % (out_path, in_path, time.time() - t0))
        return 1
    except OSError as e:
        sys.stderr.write("expect: open: %s\n" % e)
        return 1
    got = b""
    lats = []
    for i in range(0, len(pairs), 2):
        want, send = unesc(pairs[i]), unesc(pairs[i + 1])
        t = time.time()
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            while not got.endswith(want):
                chunk = os.read(ofd, 65536)
                if not chunk:
                    sys.stderr.write("expect: EOF waiting for %r, have %r\n"
                                     % (want, got[-80:]))
                    return 1
                got += chunk
            lats.append(time.time() - t)
            if send:
                os.write(ifd, send)
        except Timeout:
            sys.stderr.write("expect: timeout waiting for %r, have %r\n"
                             % (want, got[-80:]))
            return 1
        except OSError as e:
            sys.stderr.write("expect: %s after %.1f s, round %d, have %r\n"
                             % (e, time.time() - t0, i // 2, got[-80:]))
            return 1
    signal.setitimer(signal.ITIMER_REAL, 0)
    os.close(ifd)
    os.close(ofd)
    s = sorted(lats)
    sys.stderr.write("rounds %d p50 %.3f max %.3f\n"
                     % (len(s), s[len(s) // 2], s[-1]))
    return 0


def pty_read(fd):
    """What the terminal shows within 0.2 s (b"" once the child is gone)."""
    r, _, _ = select.select([fd], [], [], 0.2)
    if not r:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:
        time.sleep(0.2)  # EIO: the child closed the terminal; don't spin
        return b""


def pty_wait(pid, fd, secs, kill=True):
    """Drain the terminal until the child exits: (exit code, output);
    (None, output) after SECS s (the child is then killed, with KILL)."""
    deadline = time.time() + secs
    out = b""
    while time.time() < deadline:
        out += pty_read(fd)
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(st), out
    if kill:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return None, out


def less(path, timeout, texts):
    pid, fd = pty.fork()
    if pid == 0:
        env = dict(os.environ, TERM="xterm", LESS="", LESSHISTFILE="-")
        os.execvpe("less", ["less", "+F", path], env)
    deadline = time.time() + timeout
    screen = b""
    want = [t.encode() for t in texts]
    ok = False
    while time.time() < deadline:
        screen += pty_read(fd)
        mark = os.environ.get("DRIVE_MARK")
        if mark and want and want[0] in screen and not os.path.exists(mark):
            open(mark, "w").close()
        if all(w in screen for w in want):
            ok = True
            break
    # Ctrl-C ends following; q quits (sent again until less reads it)
    os.write(fd, b"\x03")
    for i in range(20):
        os.write(fd, b"q")
        status, _ = pty_wait(pid, fd, 0.5, kill=(i == 19))
        if status is not None:
            break
    if status is None:
        sys.stderr.write("less: did not quit on Ctrl-C q\n")
        return 1
    if not ok:
        missing = [w for w in want if w not in screen]
        sys.stderr.write("less: never drew %r\n" % missing)
        return 1
    return 0


def poll_files(timeout, n, paths):
    fds = {}
    for p in paths:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        fds[fd] = [p, b""]
    pl = select.poll()
    for fd in fds:
        pl.register(fd, select.POLLIN)
    deadline = time.time() + timeout
    lines = []
    while len(lines) < n and time.time() < deadline and fds:
        for fd, ev in pl.poll(200):
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                pl.unregister(fd)
                del fds[fd]
                continue
            ent = fds[fd]
            ent[1] += chunk
            while b"\n" in ent[1]:
                line, ent[1] = ent[1].split(b"\n", 1)
                lines.append(ent[0].encode() + b": " + line)
    for line in lines:
        sys.stdout.buffer.write(line + b"\n")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    sys.stderr.write("%.2f %.2f\n" % (ru.ru_utime, ru.ru_stime))
    return 0 if len(lines) >= n else 1


def rebuild(nspace, merged, out):
    tag = re.compile(rb"^\[" + re.escape(nspace.encode()) +
                     rb",(\d+)\]<std(?:out|err)>([:+]) ")
    streams, cont = {}, 0
    for line in open(merged, "rb"):
        m = tag.match(line)
        if not m:
            sys.stderr.write("untagged line in the merged view: %r\n"
                             % line[:60])
            return 1
        r, text = int(m.group(1)), line[m.end():]
        s = streams.setdefault(r, bytearray())
        if m.group(2) == b"+":
            cont += 1
            del s[-1:]  # the newline that ended the open line was the view's
        s += text
    for r, s in streams.items():
        with open("%s.%d" % (out, r), "wb") as f:
            f.write(s)
    print(cont)
    return 0


def run_pty(timeout, text, cmd):
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    os.write(fd, text.replace("\\n", "\n").encode())
    status, out = pty_wait(pid, fd, timeout)
    sys.stdout.buffer.write(out)
    return 124 if status is None else status


def main(argv):
    cmd = argv[1]
    if cmd == "follow":
        return follow(float(argv[2]), int(argv[3]), float(argv[4]), argv[5:])
    if cmd == "expect":
        return expect(argv[2], argv[3], float(argv[4]), argv[5:])
    if cmd == "less":
        return less(argv[2], float(argv[3]), argv[4:])
    if cmd == "pty":
        return run_pty(float(argv[2]), argv[3], argv[4:])
    if cmd == "rebuild":
        return rebuild(argv[2], argv[3], argv[4])
    if cmd == "poll":
        return poll_files(float(argv[2]), int(argv[3]), argv[4:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
