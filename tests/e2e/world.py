# A fake "world" for the egress tests, run inside a network namespace the
# test made: TCP (80, 443, 8080, 53) answers "hello <port>", UDP (53, 8080)
# echoes. Bound to :: (dual stack), so every address of the namespace —
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

def udp(port):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", port))
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(data, peer)

for p in (80, 443, 8080, 53):
    threading.Thread(target=tcp, args=(p,), daemon=True).start()
for p in (53, 8080):
    threading.Thread(target=udp, args=(p,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
