# A fake upstream resolver for the DNS-proxy tests (test-dns), run inside a
# network namespace the test made, on UDP port 53 of argv[2] and TCP port 53
# of every address there. It answers from the table below (any other name: A 198.51.100.99,
# so a name that should never have been forwarded would resolve), TXT for
# anything, and logs every question it gets as "NAME TYPE" to argv[1]: what
# reached the upstream (over TCP also a line "tcp NAME TYPE"). A name in
# TRUNC is answered over UDP with TC set and no records (too big for UDP):
# only a resolver that asks again over TCP gets its address.
import socket, struct, sys, threading

LOG = open(sys.argv[1], "a", buffering=1)
TTL = {"short.pythonhosted.org": 2}
A = {"pypi.org": "203.0.113.10", "cdn.pythonhosted.org": "203.0.113.11", "exfil.example.com": "203.0.113.12",
     "meta.pythonhosted.org": "169.254.169.254", "short.pythonhosted.org": "203.0.113.13",
     "other.pythonhosted.org": "203.0.113.14", "docs.example.org": "203.0.113.14"}
AAAA = {"pypi.org": "2001:db8::10"}
TRUNC = {"big.pythonhosted.org"}
A["big.pythonhosted.org"] = "203.0.113.15"
CNAME = {"files.pythonhosted.org": "cdn.pythonhosted.org", "evil.pythonhosted.org": "exfil.example.com"}

def name_at(m, i):
    labels = []
    while m[i]:
        labels.append(m[i + 1:i + 1 + m[i]].decode())
        i += m[i] + 1
    return ".".join(labels), i + 1

def wire(n):
    return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".")) + b"\0"

def rr(owner, typ, data, ttl=60):
    return wire(owner) + struct.pack(">HHIH", typ, 1, ttl, len(data)) + data

def answer(q, tcp=False):
    if len(q) < 17 or q[2] & 0x80:
        return None
    name, i = name_at(q, 12)
    qtype = struct.unpack(">H", q[i:i + 2])[0]
    question = q[12:i + 4]
    LOG.write("%s %d\n" % (name.lower(), qtype))
    if tcp:
        LOG.write("tcp %s %d\n" % (name.lower(), qtype))
    n, recs = name.lower(), []
    if n in TRUNC and not tcp:
        return q[:2] + b"\x83\x80" + struct.pack(">HHHH", 1, 0, 0, 0) + question
    if qtype == 16:
        recs.append(rr(n, 16, b"\x05hello"))
    else:
        while n in CNAME:
            recs.append(rr(n, 5, wire(CNAME[n])))
            n = CNAME[n]
        if qtype == 1:
            recs.append(rr(n, 1, socket.inet_pton(socket.AF_INET, A.get(n, "198.51.100.99")), TTL.get(n, 60)))
        elif qtype == 28 and n in AAAA:
            recs.append(rr(n, 28, socket.inet_pton(socket.AF_INET6, AAAA[n])))
    return q[:2] + b"\x81\x80" + struct.pack(">HHHH", 1, len(recs), 0, 0) + question + b"".join(recs)

def udp():
    # bound to the resolver's address: answers come from the address asked
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((sys.argv[2], 53))
    while True:
        data, peer = s.recvfrom(4096)
        a = answer(data)
        if a:
            s.sendto(a, peer)

def tcp_conn(c):
    try:
        while True:
            h = c.recv(2)
            if len(h) < 2:
                return
            q = c.recv(struct.unpack(">H", h)[0])
            a = answer(q, tcp=True)
            if a:
                c.sendall(struct.pack(">H", len(a)) + a)
    finally:
        c.close()

def tcp():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", 53)); s.listen(16)
    while True:
        c, _ = s.accept()
        threading.Thread(target=tcp_conn, args=(c,), daemon=True).start()

threading.Thread(target=udp, daemon=True).start()
threading.Thread(target=tcp, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
