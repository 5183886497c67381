# DNS probes run inside a sandbox exec (test-dns): each argument is one
# probe, each prints one line "LABEL RESULT".
#   LABEL,gai,NAME,4|6           getaddrinfo (glibc's resolver): the addresses, or the error
#   LABEL,udp|tcp,ADDR,NAME,TYPE one query sent to ADDR port 53: "rcode=N from=SRC a=ADDR,..."
#   LABEL,burst,ADDR,N,SUFFIX    N queries for unique names under SUFFIX over UDP: "ok=N refused=M"
#   LABEL,connect,ADDR,PORT      a TCP connect: ok, or the errno name
#   LABEL,sleep,SECONDS          wait
import errno, random, socket, struct, sys

def q(name, qtype, qid):
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + \
        b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", qtype, 1)

def parse(m):
    rcode = m[3] & 15
    an = struct.unpack(">H", m[6:8])[0]
    i = 12
    while m[i]:
        i += m[i] + 1
    i += 5
    addrs = []
    for _ in range(an):
        if m[i] & 0xc0 == 0xc0:
            i += 2
        else:
            while m[i]:
                i += m[i] + 1
            i += 1
        t, _, _, l = struct.unpack(">HHIH", m[i:i + 10])
        i += 10
        if t == 1:
            addrs.append(socket.inet_ntop(socket.AF_INET, m[i:i + l]))
        elif t == 28:
            addrs.append(socket.inet_ntop(socket.AF_INET6, m[i:i + l]))
        i += l
    return rcode, addrs

def fam(a):
    return socket.AF_INET6 if ":" in a else socket.AF_INET

for arg in sys.argv[1:]:
    p = arg.split(",")
    label, kind = p[0], p[1]
    try:
        if kind == "gai":
            r = socket.getaddrinfo(p[2], 443, socket.AF_INET if p[3] == "4" else socket.AF_INET6, socket.SOCK_STREAM)
            out = ",".join(sorted({x[4][0] for x in r}))
        elif kind in ("udp", "tcp"):
            addr, name, qtype = p[2], p[3], int(p[4])
            qid = random.randrange(65536)
            if kind == "udp":
                s = socket.socket(fam(addr), socket.SOCK_DGRAM)
                s.settimeout(3)
                s.connect((addr, 53))
                s.send(q(name, qtype, qid))
                m, src = s.recvfrom(4096)
            else:
                s = socket.create_connection((addr, 53), timeout=3)
                m0 = q(name, qtype, qid)
                s.sendall(struct.pack(">H", len(m0)) + m0)
                h = s.recv(2)
                m = b""
                while len(m) < struct.unpack(">H", h)[0]:
                    m += s.recv(4096)
                src = s.getpeername()
            rcode, addrs = parse(m)
            out = "rcode=%d from=%s a=%s" % (rcode, src[0], ",".join(addrs))
        elif kind == "burst":
            addr, n, suffix = p[2], int(p[3]), p[4]
            s = socket.socket(fam(addr), socket.SOCK_DGRAM)
            s.settimeout(3)
            ok = refused = 0
            for i in range(n):
                s.sendto(q("x%d%d.%s" % (i, random.randrange(10**6), suffix), 1, i), (addr, 53))
                m, _ = s.recvfrom(4096)
                if m[3] & 15 == 0:
                    ok += 1
                elif m[3] & 15 == 5:
                    refused += 1
            out = "ok=%d refused=%d" % (ok, refused)
        elif kind == "connect":
            s = socket.socket(fam(p[2]), socket.SOCK_STREAM)
            s.settimeout(3)
            s.connect((p[2], int(p[3])))
            out = "ok"
        elif kind == "sleep":
            import time
            time.sleep(float(p[2]))
            out = "slept"
        else:
            out = "unknown-probe"
    except socket.gaierror as e:
        out = "gaierror:%d" % e.errno
    except socket.timeout:
        out = "timeout"
    except OSError as e:
        out = errno.errorcode.get(e.errno, str(e.errno))
    print(label, out, flush=True)
