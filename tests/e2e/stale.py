# Sockets handed from one exec to another (issue 13, "sockets outlive the
# exec that made them"). Runs inside an exec, in one of three roles:
#
#   hold TAG SPEC...    listen on /tmp/bk-stale-TAG.sock, take the sockets
#                       another exec sends (SCM_RIGHTS), wait for
#                       /tmp/bk-stale-TAG.go (the test makes it once the
#                       sender's exec has ended), then use socket i for
#                       SPEC i. SPEC: NAME,tcp|udp,ADDR,PORT (connect / sendto
#                       on the received socket) or NAME,new-tcp|new-udp,ADDR,PORT
#                       (a fresh socket of the holder's own, the control).
#                       Prints "NAME RESULT" (ok or the errno name).
#   send TAG KIND...    make one socket per KIND (tcp, udp, tcp6, udp6) and
#                       send them all to the holder, then end.
#   sendwait TAG KIND...  send, make /tmp/bk-stale-TAG.sent, then stay
#                       (until the exec is killed).
#   leave TAG KIND...   the same, from a process that leaves the exec's
#                       process tree (fork, setsid, fork) and keeps beating
#                       into /tmp/bk-stale-TAG.beat; the exec's own process
#                       then sleeps past its timeout.
import array, errno, os, socket, sys, time

def path(tag, ext):
    return "/tmp/bk-stale-%s.%s" % (tag, ext)

def make(kinds):
    out = []
    for k in kinds:
        fam = socket.AF_INET6 if k.endswith("6") else socket.AF_INET
        typ = socket.SOCK_STREAM if k.startswith("tcp") else socket.SOCK_DGRAM
        out.append(socket.socket(fam, typ))
    return out

def send(tag, socks):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for _ in range(2000):
        try:
            c.connect(path(tag, "sock"))
            break
        except OSError:
            time.sleep(0.05)
    fds = array.array("i", [s.fileno() for s in socks])
    c.sendmsg([b"%d" % len(socks)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    c.close()

def use(kind, fd, addr, port):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    typ = socket.SOCK_STREAM if kind.endswith("tcp") else socket.SOCK_DGRAM
    s = socket.socket(fam, typ) if kind.startswith("new-") else socket.socket(fileno=fd)
    s.settimeout(2)
    try:
        if typ == socket.SOCK_STREAM:
            s.connect((addr, port))
        else:
            s.sendto(b"stale?", (addr, port))
        return "ok"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

def hold(tag, specs):
    for ext in ("sock", "go", "sent"):
        try:
            os.unlink(path(tag, ext))
        except FileNotFoundError:
            pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path(tag, "sock"))
    os.chmod(path(tag, "sock"), 0o777)
    srv.listen(1)
    c, _ = srv.accept()
    fds = []
    _, anc, _, _ = c.recvmsg(64, socket.CMSG_SPACE(16 * 4))
    for lvl, typ, data in anc:
        if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds += list(array.array("i", data[: len(data) - len(data) % 4]))
    print("received", len(fds), flush=True)
    while not os.path.exists(path(tag, "go")):  # (the exec's timeout bounds it)
        time.sleep(0.05)
    i = 0
    for spec in specs:
        name, kind, addr, port = spec.split(",")
        fd = -1
        if not kind.startswith("new-"):
            fd = fds[i] if i < len(fds) else -1
            i += 1
        print(name, use(kind, fd, addr, int(port)) if kind.startswith("new-") or fd >= 0 else "nofd", flush=True)

def leave(tag, kinds):
    socks = make(kinds)
    if os.fork() == 0:
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
        send(tag, socks)
        while True:
            with open(path(tag, "beat"), "w") as f:
                f.write("%.3f" % time.time())
            time.sleep(0.1)
    time.sleep(600)

role, tag, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
if role == "hold":
    hold(tag, rest)
elif role == "send":
    send(tag, make(rest))
    print("sent", len(rest))
elif role == "sendwait":
    socks = make(rest)
    send(tag, socks)
    open(path(tag, "sent"), "w").close()
    print("sent", len(rest), flush=True)
    time.sleep(600)
elif role == "leave":
    leave(tag, rest)
