#!/usr/bin/env python3
# ptywatch.py TIMEOUT STEPS -- CMD...: run CMD on a pseudo-terminal (as a
# user's terminal would: less draws its screen, stdio is line buffered) and
# check what it shows.  STEPS is a comma-separated list of GATE=TEXT: touch
# the file GATE (or nothing for "-"), then wait at most TIMEOUT seconds for
# TEXT to appear in the terminal output.  Prints "latency_ms TEXT N" per
# step; exit 1 (with the output seen) when a TEXT never came.  The command
# is killed at the end (it may be following forever, like less +F).
import os
import pty
import select
import signal
import sys
import time


def main():
    timeout = float(sys.argv[1])
    steps = [s.split("=", 1) for s in sys.argv[2].split(",")]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.setdefault("TERM", "xterm")
        os.environ["LESS"] = ""
        os.execvp(cmd[0], cmd)
    seen = b""
    rc = 0
    try:
        for gate, text in steps:
            if gate != "-":
                open(gate, "w").close()
            t0 = time.monotonic()
            want = text.encode()
            while want not in seen:
                left = t0 + timeout - time.monotonic()
                if left <= 0:
                    print(f"'{text}' not shown within {timeout} s; output:"
                          f" {seen[-2000:]!r}", file=sys.stderr)
                    return 1
                r, _, _ = select.select([fd], [], [], left)
                if r:
                    try:
                        data = os.read(fd, 65536)
                    except OSError:
                        data = b""
                    if not data:
                        print(f"'{text}': {cmd[0]} ended; output: "
                              f"{seen[-2000:]!r}", file=sys.stderr)
                        return 1
                    seen += data
            ms = int((time.monotonic() - t0) * 1000)
            print(f"latency_ms {text} {ms}")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return rc


sys.exit(main())
