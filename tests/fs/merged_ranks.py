#!/usr/bin/env python3
# merged_ranks.py VIEW NSPACE NRANKS WANT_PREFIX [prefix]: rebuild each
# rank's bytes from a tagged merged view ("[ns,r]<stdout>: " at a line
# start, "+ " for a line another rank's piece cut: the "\n" before it was
# the view's, not the rank's; a rank's last line the view ended with "\n")
# and compare them with WANT_PREFIX<r>: equal (or, with "prefix", a prefix
# of it).  Prints the sha256 of each and exits 1 on a difference.
import hashlib
import re
import sys

view, ns, n, want_prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
prefix = len(sys.argv) > 5 and sys.argv[5] == "prefix"
tag = re.compile(rb"^\[" + re.escape(ns.encode()) + rb",(\d+)\]<stdout>([:+]) ")
got = {r: bytearray() for r in range(n)}
bad = 0
parts = open(view, "rb").read().split(b"\n")
lines = [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
for line in lines:
    m = tag.match(line)
    if not m:
        print("untagged line: %r" % line[:80])
        bad = 1
        continue
    r = int(m.group(1))
    if m.group(2) == b"+" and got[r].endswith(b"\n"):
        del got[r][-1]
    got[r] += line[m.end():]
for r in range(n):
    want = open(want_prefix + str(r), "rb").read()
    g = bytes(got[r])
    if g.endswith(b"\n") and not want.endswith(b"\n") and g[:-1] == want[: len(g) - 1]:
        g = g[:-1]
    ok = g == want or (prefix and want.startswith(g))
    print("rank %d: %s %d bytes, want %s %d bytes: %s" % (
        r, hashlib.sha256(g).hexdigest()[:16], len(g),
        hashlib.sha256(want).hexdigest()[:16], len(want), "ok" if ok else "DIFFERENT"))
    bad |= not ok
sys.exit(bad)
