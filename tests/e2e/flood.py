#!/usr/bin/python3
# A peer that opens many connections to the agent socket and never sends a
# frame. Usage: flood.py SOCKET N READY_FILE HOLD_S
# Prints "connected C refused R" once every connect returned (R: answered
# at once with 429), touches READY_FILE, then waits up to HOLD_S seconds
# for the agent to close every connection and prints
# "closed K open O after S".
import select
import socket
import sys
import time

path, n, ready, hold = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
socks, failed = [], 0
t0 = time.time()
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    try:
        s.connect(path)
        socks.append(s)
    except OSError:
        failed += 1
        s.close()
time.sleep(0.3)
refused = 0
for s in socks:
    s.setblocking(False)
    try:
        if b"too_many_connections" in s.recv(65536):
            refused += 1
    except OSError:
        pass
print("connected %d refused %d failed %d" % (len(socks), refused, failed), flush=True)
open(ready, "w").write("ready\n")
left = {s.fileno(): s for s in socks}
p = select.poll()
for fd in left:
    p.register(fd, select.POLLIN | select.POLLHUP)
while left and time.time() < t0 + hold:
    for fd, ev in p.poll(200):
        try:
            d = left[fd].recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            d = b""
        if not d:
            p.unregister(fd)
            del left[fd]
print("closed %d open %d after %.1f" % (len(socks) - len(left), len(left), time.time() - t0), flush=True)
