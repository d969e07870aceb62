# Wire frames for tests that speak the protocol by hand (docs/protocol.md):
#   sys.path.insert(0, os.environ["IOFS_SOURCE_DIR"] + "/tests")
#   from frames import *
import struct

MAGIC, VER = 0x53464f49, 2


def frame(t, body):
    return struct.pack('<IB', len(body) + 1, t) + body


def hello(ns=b'junk', base=0, count=2, host=b'h', uid=1, gid=0, pid=0,
          flags=0, job_size=0):
    return frame(1, struct.pack('<IHHIIIIIIII', MAGIC, VER, flags, base,
                                count, job_size, pid, uid, gid, 0, 0) +
                 bytes([len(ns)]) + ns + bytes([len(host)]) + host)


def rank_start(rank, pid=1):
    return frame(4, struct.pack('<II', rank, pid))


def data(rank, ch, payload):
    return frame(5, struct.pack('<IB', rank, ch) + payload)


def read_frame(sock):
    """(type, body) of the next frame, or None at EOF."""
    head = b''
    while len(head) < 5:
        b = sock.recv(5 - len(head))
        if not b:
            return None
        head += b
    n, t = struct.unpack('<IB', head)
    body = b''
    while len(body) < n - 1:
        b = sock.recv(n - 1 - len(body))
        if not b:
            return None
        body += b
    return t, body
