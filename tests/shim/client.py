#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Wire-level client for tests/shim/run.sh: what curl cannot do.

  slow  --port P [--tls] --stage connect|headers|body
        open a connection, stop at the given stage (TCP only / half the
        request headers / headers plus half the body) and wait for the shim
        to close it. Prints "closed <seconds> <bytes received>".
  plain --port P
        send a plaintext HTTP request to a TLS port; prints the first bytes
        received (repr) and exits 0 only if none of them is an HTTP answer.
  raw   --port P [--tls] --path PATH [--header-hex HEX] [--header-file F] [--body STR]
        send one POST with exactly the given header bytes (hex, so NUL, CR
        and tabs survive the shell; a file for a 1 MB header, which curl
        refuses to send); prints the status code or "none".
"""
import argparse
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


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("slow")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--stage", choices=["connect", "headers", "body"], required=True)
    p.add_argument("--token", default="x")
    p.add_argument("--limit", type=float, default=30)
    p = sub.add_parser("plain")
    p.add_argument("--port", type=int, required=True)
    p = sub.add_parser("raw")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--path", default="/exec")
    p.add_argument("--header-hex", default="")
    p.add_argument("--header-file", help="one more header line, read from a file (for huge headers)")
    p.add_argument("--body", default="{}")
    a = ap.parse_args()
    return {"slow": cmd_slow, "plain": cmd_plain, "raw": cmd_raw}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
