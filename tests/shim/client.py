#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Wire-level client for tests/shim/run.sh: what curl cannot do.

  slow  --port P [--tls] --stage connect|headers|body
        open a connection, stop at the given stage (TCP only / half the
        request headers / headers plus half the body) and wait for the shim
        to close it. Prints "closed <seconds> <bytes received>".
  trickle --port P [--tls] [--interval S]
        send request headers one byte at a time, never idle long enough for
        an inactivity timeout; prints "closed <s>" when the shim hangs up.
  plain --port P
        send a plaintext HTTP request to a TLS port; prints the first bytes
        received (repr) and exits 0 only if none of them is an HTTP answer.
  raw   --port P [--tls] --path PATH [--header-hex HEX] [--header-file F] [--body STR]
        send one POST with exactly the given header bytes (hex, so NUL, CR
        and tabs survive the shell; a file for a 1 MB header, which curl
        refuses to send); prints the status code or "none".
  wire  --port P [--tls] --request-hex HEX
        send exactly these request bytes (a whole request, framing
        included); prints the status codes of every answer received before
        the shim closes, space separated ("none" if there was none).
  hold  --port P --source ADDR --count N [--hold S]
        open N connections from the local address ADDR and leave them
        half-open: the even ones stop after TCP connect, the odd ones after
        the TLS handshake plus half the request headers. Prints
        "held H refused R" once they are set up (a connection the shim
        closed within 0.5 s is refused), then, when every held one is
        closed or --hold seconds passed, "closed C max_s M" (how many held
        ones the shim closed and when the last one was).
  load  --port P [--tls] --token T [--threads N] [--requests M]
        N keep-alive clients, M requests each; every 200 must echo its own
        request. Prints "ok=.. busy=.. bad=..", exits 1 on any bad answer.
"""
import argparse
import http.client
import json
import socket
import ssl
import sys
import time


def connect(port, use_tls):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    if use_tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the tests pin with curl; here only the wire matters
        s = ctx.wrap_socket(s)
    return s


def read_until_close(s, limit):
    data = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        except (ssl.SSLError, OSError):
            return data, True
        if not d:
            return data, True
        data += d
    return data, False


def cmd_slow(a):
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", a.port), timeout=30)
    if a.stage != "connect":
        if a.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            s = ctx.wrap_socket(s)
        head = b"POST /exec HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
        if a.stage == "headers":
            s.sendall(head)
        else:
            s.sendall(head + b"X-Sidecar-Auth-Token: " + a.token.encode() + b"\r\n\r\n" + b'{"command":')
    t0 = time.monotonic()
    data, closed = read_until_close(s, a.limit)
    el = time.monotonic() - t0
    print(f"{'closed' if closed else 'open'} {el:.1f} {len(data)}")
    return 0


def cmd_trickle(a):
    """Request headers one byte every --interval seconds: never idle long
    enough for an inactivity timeout. With --after-request, on a keep-alive
    connection after one whole request and its answer (the clock starts at
    the answer). Prints "closed <s>" or "open <s>"."""
    s = connect(a.port, a.tls)
    if a.after_request:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        r = http.client.HTTPResponse(s)  # the keep-alive answer, read whole
        r.begin()
        r.read()
    req = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 200
    t0 = time.monotonic()
    for b in req:
        if time.monotonic() - t0 > a.limit:
            break
        try:
            s.send(bytes([b]))
            s.settimeout(a.interval)
            try:
                if s.recv(1) == b"":
                    raise ConnectionResetError("eof")
            except socket.timeout:
                pass
        except (OSError, ssl.SSLError):
            print(f"closed {time.monotonic() - t0:.1f}")
            return 0
    print(f"open {time.monotonic() - t0:.1f}")
    return 0


def cmd_plain(a):
    s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data, _ = read_until_close(s, 5)
    print(repr(data[:40]))
    return 1 if b"HTTP/" in data else 0


def cmd_raw(a):
    s = connect(a.port, a.tls)
    body = a.body.encode()
    hdr = bytes.fromhex(a.header_hex) if a.header_hex else b""
    if a.header_file:
        with open(a.header_file, "rb") as f:
            hdr += f.read().rstrip(b"\n") + b"\r\n"
    req = (f"POST {a.path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body)}\r\n".encode()
           + hdr + b"\r\n" + body)
    try:
        s.sendall(req)
    except OSError:
        pass  # the server may answer and close before reading everything
    data, _ = read_until_close(s, 10)
    line = data.split(b"\r\n", 1)[0].split()
    print(line[1].decode() if len(line) > 1 and line[0].startswith(b"HTTP/") else "none")
    return 0


def cmd_wire(a):
    s = connect(a.port, a.tls)
    try:
        s.sendall(bytes.fromhex(a.request_hex))
    except OSError:
        pass
    data, _ = read_until_close(s, 10)
    codes = []
    for part in data.split(b"HTTP/1.")[1:]:
        f = part.split(b"\r\n", 1)[0].split()
        if len(f) > 1 and f[1].isdigit():
            codes.append(f[1].decode())
    print(" ".join(codes) if codes else "none")
    return 0


def cmd_hold(a):
    import select
    conns = []
    for i in range(a.count):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((a.source, 0))
            s.settimeout(5)
            s.connect(("127.0.0.1", a.port))
            if i % 2:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                s = ctx.wrap_socket(s)
                s.sendall(b"POST /exec HTTP/1.1\r\nHost: x\r\nContent-Le")
            conns.append(s)
        except (OSError, ssl.SSLError):
            conns.append(None)  # refused during the handshake
    time.sleep(0.5)
    t0 = time.monotonic()
    held = []
    for s in conns:
        if s is None:
            continue
        r, _, _ = select.select([s], [], [], 0)
        if r:
            try:
                s.setblocking(False)
                d = s.recv(1)
            except (BlockingIOError, ssl.SSLWantReadError):
                d = b"x"
            except (OSError, ssl.SSLError):
                d = b""
            if d == b"":
                continue
        held.append(s)
    print(f"held {len(held)} refused {a.count - len(held)}", flush=True)
    closed, last = 0, 0.0
    open_ = list(held)
    for s in open_:
        s.setblocking(False)
    while open_ and time.monotonic() - t0 < a.hold:
        r, _, _ = select.select(open_, [], [], 0.1)
        for s in r:
            try:
                d = s.recv(4096)
            except (BlockingIOError, ssl.SSLWantReadError):
                continue
            except (OSError, ssl.SSLError):
                d = b""
            if d == b"":
                closed += 1
                last = time.monotonic() - t0 + 0.5
                open_.remove(s)
    print(f"closed {closed} max_s {last:.1f}", flush=True)
    return 0


def cmd_load(a):
    """Many keep-alive clients at once; every answer must be the echo of
    its own request (no cross-talk between agent connections)."""
    import threading
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    stats = {"ok": 0, "busy": 0, "bad": [], "conns": 0}
    lock = threading.Lock()

    def worker(w):
        conn = None
        for i in range(a.requests):
            if conn is None:
                conn = (http.client.HTTPSConnection("127.0.0.1", a.port, context=ctx, timeout=90) if a.tls
                        else http.client.HTTPConnection("127.0.0.1", a.port, timeout=90))
                with lock:
                    stats["conns"] += 1
            tag = f"{w}-{i}"
            req = {"tag": tag, "pad": "p" * (i * 997 % 20000)}
            if a.sleep:
                req["fake"] = {"sleep": a.sleep}
            body = json.dumps(req)
            try:
                conn.request("POST", "/exec", body, {"X-Sidecar-Auth-Token": a.token})
                r = conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except Exception as e:  # noqa: BLE001
                with lock:
                    stats["bad"].append(f"{tag}: {e!r}")
                conn = None
                continue
            with lock:
                if r.status == 200 and json.loads(data)["args"] == json.loads(body):
                    stats["ok"] += 1
                elif r.status == 429:
                    stats["busy"] += 1
                else:
                    stats["bad"].append(f"{tag}: {r.status} {data[:80]!r}")

    ts = [threading.Thread(target=worker, args=(w,)) for w in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(f"ok={stats['ok']} busy={stats['busy']} bad={len(stats['bad'])} conns={stats['conns']} {'; '.join(stats['bad'][:3])}")
    return 0 if not stats["bad"] else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("slow")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--stage", choices=["connect", "headers", "body"], required=True)
    p.add_argument("--token", default="x")
    p.add_argument("--limit", type=float, default=30)
    p = sub.add_parser("trickle")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--interval", type=float, default=0.5)
    p.add_argument("--limit", type=float, default=20)
    p.add_argument("--after-request", action="store_true")
    p = sub.add_parser("plain")
    p.add_argument("--port", type=int, required=True)
    p = sub.add_parser("raw")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--path", default="/exec")
    p.add_argument("--header-hex", default="")
    p.add_argument("--header-file", help="one more header line, read from a file (for huge headers)")
    p.add_argument("--body", default="{}")
    p = sub.add_parser("wire")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--request-hex", required=True)
    p = sub.add_parser("hold")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--source", default="127.0.0.2")
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--hold", type=float, default=15)
    p = sub.add_parser("load")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--token", required=True)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--requests", type=int, default=20)
    p.add_argument("--sleep", type=float, default=0, help="the fake agent waits this long per request")
    a = ap.parse_args()
    return {"slow": cmd_slow, "trickle": cmd_trickle, "plain": cmd_plain, "raw": cmd_raw,
            "wire": cmd_wire, "hold": cmd_hold, "load": cmd_load}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
