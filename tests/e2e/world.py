# A fake "world" for the egress tests, run inside a network namespace the
# test made: TCP (80, 443, 8080, 53) answers "hello <port>", UDP 8080
# echoes; UDP 53 answers a DNS query (any name: A 192.0.2.77) and echoes
# anything else (so a test sees what reached the resolver). Bound to :: (dual stack), so every address of the namespace —
# the fake internet, metadata server, API server, other pod, resolvers —
# answers. It never listens anywhere else.
import socket, threading, sys

def tcp(port):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", port)); s.listen(64)
    while True:
        c, _ = s.accept()
        try:
            c.sendall(b"hello %d\n" % port)
        finally:
            c.close()

def dns_answer(q):
    # a query: QR=0, QDCOUNT=1; the question ends at the root label
    if len(q) < 17 or q[2] & 0x80 or q[4:6] != b"\0\1":
        return None
    i = 12
    while i < len(q) and q[i]:
        i += q[i] + 1
    if i + 5 > len(q):
        return None
    question = q[12:i + 5]
    qtype = question[-4:-2]
    an = b"\xc0\x0c\0\1\0\1\0\0\0\x3c\0\4" + bytes([192, 0, 2, 77]) if qtype == b"\0\1" else b""
    return q[:2] + b"\x81\x80\0\1" + (b"\0\1" if an else b"\0\0") + b"\0\0\0\0" + question + an

def udp(port):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
    s.bind(("::", port))
    while True:
        data, anc, _, peer = s.recvmsg(2048, socket.CMSG_SPACE(20))
        # answer from the address asked (a connected client, glibc's
        # resolver, takes an answer only from there)
        src = [(socket.IPPROTO_IPV6, socket.IPV6_PKTINFO, d[:16] + b"\0" * 4)
               for lvl, typ, d in anc if lvl == socket.IPPROTO_IPV6 and typ == socket.IPV6_PKTINFO]
        s.sendmsg([(dns_answer(data) if port == 53 else None) or data], src, 0, peer)

for p in (80, 443, 8080, 53):
    threading.Thread(target=tcp, args=(p,), daemon=True).start()
for p in (53, 8080):
    threading.Thread(target=udp, args=(p,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
