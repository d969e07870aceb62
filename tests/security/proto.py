# Minimal iofs wire-protocol client for the security suite (docs/protocol.md).
import socket, struct, time

MAGIC = 0x53464f49
T_HELLO, T_WELCOME, T_ERROR, T_RANK_START, T_DATA, T_COMPLETE, T_EXIT = 1, 2, 3, 4, 5, 6, 7
T_STDIN, T_STDIN_EOF, T_XOFF, T_XON, T_ACK, T_STDIN_ACK = 8, 9, 10, 11, 12, 13
T_HELD, T_RESUME = 14, 15
F_NAME, F_RESUME = 1, 2  # HELLO flags (F_RESUME: version 4)


def frame(t, body):
    return struct.pack('<IB', len(body) + 1, t) + body


def hello(ns, base=0, count=1, job_size=0, host=b'h', version=2, uid=0, gid=0, cred=None,
          flags=0):
    body = struct.pack('<IHHIIIIIIII', MAGIC, version, flags, base, count, job_size, 1,
                       uid, gid, 0, 0) + bytes([len(ns)]) + ns + bytes([len(host)]) + host
    if version >= 3:
        cred = cred or b''
        body += struct.pack('<H', len(cred)) + cred
    return frame(T_HELLO, body)


def rank_start(rank, pid=1):
    return frame(T_RANK_START, struct.pack('<II', rank, pid))


def data(rank, ch, payload):
    return frame(T_DATA, struct.pack('<IB', rank, ch) + payload)


def exit_(rank, code=0):
    return frame(T_EXIT, struct.pack('<IBI', rank, 0, code))


def connect(addr, timeout=10):
    if addr.startswith('unix:'):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(addr[5:])
    else:
        host, port = addr[4:].rsplit(':', 1)
        s = socket.create_connection((host.strip('[]'), int(port)), timeout=timeout)
    return s


def recv_frame(s):
    """(type, body) of the next frame, or (None, b'') at EOF."""
    head = b''
    while len(head) < 5:
        chunk = s.recv(5 - len(head))
        if not chunk:
            return None, b''
        head += chunk
    n, t = struct.unpack('<IB', head)
    body = b''
    while len(body) < n - 1:
        chunk = s.recv(n - 1 - len(body))
        if not chunk:
            return None, b''
        body += chunk
    return t, body


def answer(s):
    """'WELCOME', 'ERROR <code> <msg>' or 'EOF': the daemon's reply to a HELLO."""
    return answer_of(*recv_frame(s))


def answer_of(t, body):
    if t == T_WELCOME:
        return 'WELCOME'
    if t == T_ERROR:
        code, = struct.unpack('<I', body[:4])
        return 'ERROR %d %s' % (code, body[4:].decode(errors='replace'))
    return 'EOF' if t is None else 'frame %d' % t
