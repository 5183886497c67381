# Runs inside an exec: one line per probe "NAME RESULT MS" where RESULT is
# ok, timeout or the errno name. Probes: NAME,tcp|udp|junk|icmp|raw,ADDR,PORT
# (udp to port 53 sends a well-formed DNS query for example.com A; junk
# sends 48 random bytes and waits for an answer like udp)
import errno, os, socket, struct, sys, time
DNSQ = struct.pack("!HHHHHH", 0x6b6b, 0x0100, 1, 0, 0, 0) + b"\x07example\x03com\0\0\1\0\1"
def fam(a): return socket.AF_INET6 if ":" in a else socket.AF_INET
def tcp(a, p):
    s = socket.socket(fam(a), socket.SOCK_STREAM); s.settimeout(2)
    s.connect((a, p)); s.close()  # connected is enough (a TLS server says nothing first)
def udp(a, p):
    s = socket.socket(fam(a), socket.SOCK_DGRAM); s.settimeout(1)
    s.sendto(DNSQ if p == 53 else b"ping", (a, p)); s.recvfrom(512); s.close()
def junk(a, p):
    s = socket.socket(fam(a), socket.SOCK_DGRAM); s.settimeout(1)
    s.sendto(os.urandom(48), (a, p)); s.recvfrom(512); s.close()
def icmp(a, p):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP); s.settimeout(1)
    s.sendto(struct.pack("!BBHHH", 8, 0, 0, 0, 1) + b"boxkite!", (a, 0)); s.recvfrom(64); s.close()
def raw(a, p):
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()
for spec in sys.argv[1:]:
    name, kind, addr, port = spec.split(",")
    t0 = time.monotonic()
    try:
        {"tcp": tcp, "udp": udp, "junk": junk, "icmp": icmp, "raw": raw}[kind](addr, int(port)); r = "ok"
    except socket.timeout:
        r = "timeout"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    print(name, r, "%.1f" % ((time.monotonic() - t0) * 1000), flush=True)
