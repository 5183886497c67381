# Runs inside an exec: one line per probe "NAME RESULT MS" where RESULT is
# ok, timeout or the errno name. Probes: NAME,tcp|udp|icmp|raw,ADDR,PORT
import errno, socket, struct, sys, time
def fam(a): return socket.AF_INET6 if ":" in a else socket.AF_INET
def tcp(a, p):
    s = socket.socket(fam(a), socket.SOCK_STREAM); s.settimeout(2)
    s.connect((a, p)); s.close()  # connected is enough (a TLS server says nothing first)
def udp(a, p):
    s = socket.socket(fam(a), socket.SOCK_DGRAM); s.settimeout(1)
    s.sendto(b"ping", (a, p)); s.recvfrom(64); s.close()
def icmp(a, p):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP); s.settimeout(1)
    s.sendto(struct.pack("!BBHHH", 8, 0, 0, 0, 1) + b"boxkite!", (a, 0)); s.recvfrom(64); s.close()
def raw(a, p):
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()
for spec in sys.argv[1:]:
    name, kind, addr, port = spec.split(",")
    t0 = time.monotonic()
    try:
        {"tcp": tcp, "udp": udp, "icmp": icmp, "raw": raw}[kind](addr, int(port)); r = "ok"
    except socket.timeout:
        r = "timeout"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    print(name, r, "%.1f" % ((time.monotonic() - t0) * 1000), flush=True)
