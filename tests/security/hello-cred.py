# hello-cred.py ADDR NSPACE BASE COUNT CREDFILE [VERSION]: send one HELLO
# carrying the credential in CREDFILE ("-" = none) and print the daemon's
# answer: WELCOME, "ERROR <code> <message>" or EOF.  With WELCOME, keeps the
# connection until stdin closes (so the ranks stay claimed).
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proto
addr, ns, base, count, credfile = sys.argv[1:6]
version = int(sys.argv[6]) if len(sys.argv) > 6 else 3
cred = b'' if credfile == '-' else open(credfile, 'rb').read().strip()
s = proto.connect(addr, timeout=30)
s.sendall(proto.hello(ns.encode(), int(base), int(count), version=version,
                      uid=0, gid=0, cred=cred))
a = proto.answer(s)
print(a, flush=True)
if a == 'WELCOME':
    if os.environ.get('RANK_START'):  # start the first rank, with output
        s.sendall(proto.rank_start(int(base)) +
                  proto.data(int(base), 2, b'injected\n') + proto.exit_(int(base)))
    sys.stdin.read()
s.close()
