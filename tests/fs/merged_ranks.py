#!/usr/bin/env python3
# merged_ranks.py VIEW NSPACE NRANKS WANT_PREFIX [prefix]: rebuild each
# rank's bytes from a tagged merged view ("[ns,r]<stdout>: " at a line
# start, "+ " for a line another rank's piece cut: the "\n" before it was
# the view's, not the rank's; a rank's last line the view ended with "\n")
# and compare them with WANT_PREFIX<r>: equal (or, with "prefix", a prefix
# of it).  Prints the sha256 of each and exits 1 on a difference.
# With "xml" (after or instead of "prefix"): an XML view, every line one
# whole element '<stdout nspace="NS" rank="R"[ cont="1"]>TEXT</stdout>',
# TEXT escaped, cont exactly where the rank's line goes on.
# With "suffix": a view a cap cut (it may start inside a line: its first
# line is skipped), and each rank's bytes in it, not empty, end WANT<r>.
import hashlib
import re
import sys

view, ns, n, want_prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
prefix = "prefix" in sys.argv[5:]
suffix = "suffix" in sys.argv[5:]
xml = "xml" in sys.argv[5:]
tag = re.compile(rb"^\[" + re.escape(ns.encode()) + rb",(\d+)\]<stdout>([:+]) ")
elem = re.compile(rb'^<stdout nspace="' + re.escape(ns.encode()) +
                  rb'" rank="(\d+)"( cont="1")?>([^<]*)</stdout>\n$')
ents = {b"amp": b"&", b"lt": b"<", b"gt": b">", b"quot": b'"'}


def unescape(t):
    return re.sub(rb"&(#(\d+)|amp|lt|gt|quot);",
                  lambda m: bytes([int(m.group(2))]) if m.group(2) else ents[m.group(1)], t)


got = {r: bytearray() for r in range(n)}
bad = 0
parts = open(view, "rb").read().split(b"\n")
lines = [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
if suffix:
    lines = lines[1:]
for line in lines:
    if xml:
        m = elem.match(line)
        if not m:
            print("not a whole element: %r" % line[:80])
            bad = 1
            continue
        r = int(m.group(1))
        if bool(m.group(2)) != (len(got[r]) > 0 and not got[r].endswith(b"\n")):
            print("rank %d: cont=%s after %r" % (r, bool(m.group(2)), bytes(got[r][-20:])))
            bad = 1
        got[r] += unescape(m.group(3))
        continue
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
    if not xml and g.endswith(b"\n") and not want.endswith(b"\n") and \
            (g[:-1] == want[: len(g) - 1] or (suffix and want.endswith(g[:-1]))):
        g = g[:-1]
    ok = g == want or (prefix and want.startswith(g)) or \
        (suffix and len(g) > 0 and want.endswith(g))
    print("rank %d: %s %d bytes, want %s %d bytes: %s" % (
        r, hashlib.sha256(g).hexdigest()[:16], len(g),
        hashlib.sha256(want).hexdigest()[:16], len(want), "ok" if ok else "DIFFERENT"))
    bad |= not ok
sys.exit(bad)
