#!/usr/bin/env python3
# Body limits: the reference's 10 MiB file content is accepted; a 413 is
# readable by a client that sends its body without Expect: 100-continue.
from manager import *

content = "x" * (10 * 1024 * 1024)
r = file_create("/workspace/ten-mib.txt", content)
check("/file-create with 10 MiB of content: not 413", r.status_code not in (0, 413), r.status_code)
big = b'{"path":"/workspace/big","content":"' + b"y" * (40 * 1024 * 1024) + b'"}'
r = request("POST", "/file-create", raw=big)
check("over the limit, no Expect: the client reads a 413 (no reset)", r.status_code == 413, r.status_code)

# The manager's httpx pool (default limits) opens up to 100 connections to
# one pod, and treats a connection closed at accept as a transport failure
# (it recovers, i.e. recreates, the session): 100 connections held open
# together from one address must all be served.
import socket
import ssl
import threading
from urllib.parse import urlsplit

u = urlsplit(URL)
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
N = 100
held, codes, lock = [], [], threading.Lock()
barrier = threading.Barrier(N + 1)


def one():
    code = 0
    try:
        s = ctx.wrap_socket(socket.create_connection((u.hostname, u.port), timeout=30))
        s.sendall(b"GET /health HTTP/1.1\r\nHost: sidecar\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(4096)
            if not d:
                break
            head += d
        code = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
        with lock:
            held.append(s)
    except (OSError, ValueError):
        pass
    with lock:
        codes.append(code)
    try:
        barrier.wait(timeout=60)
    except threading.BrokenBarrierError:
        pass


ts = [threading.Thread(target=one) for _ in range(N)]
for t in ts:
    t.start()
try:
    barrier.wait(timeout=60)
except threading.BrokenBarrierError:
    pass
served = sum(1 for c in codes if c == 200)
for s in held:
    s.close()
for t in ts:
    t.join()
check(f"{N} connections held together from one address: all served ({served} answered 200)", served == N,
      f"{served} of {N}")
done()
