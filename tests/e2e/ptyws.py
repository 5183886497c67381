# SPDX-License-Identifier: Apache-2.0
"""A small WebSocket client (RFC 6455, python3 stdlib only) for the shim's
/pty route, as a manager or a browser terminal would use it: TLS (the
shim's per-pod certificate; test namespaces only, so not verified here:
the pinned curl calls of the same tests check the pin), the
X-Sidecar-Auth-Token header on the handshake, binary frames both ways,
our resize text message. Used by tests/e2e/test-pty.sh and
tests/contract/t-pty.py."""
import base64
import hashlib
import json
import os
import re
import socket
import ssl
import struct
import time
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Closed(Exception):
    def __init__(self, code, reason):
        super().__init__(f"closed {code} {reason!r}")
        self.code = code
        self.reason = reason


class WS:
    def __init__(self, url, token=None, path="/pty", header="X-Sidecar-Auth-Token", extra_headers=(), timeout=10):
        u = urllib.parse.urlsplit(url)
        raw = socket.create_connection((u.hostname, u.port or (443 if u.scheme == "https" else 80)), timeout=timeout)
        if u.scheme == "https":
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            raw = ctx.wrap_socket(raw, server_hostname=u.hostname)
        self.sock = raw
        self.buf = b""
        self.out = b""          # terminal bytes received so far
        self.close_code = None
        self.close_reason = None
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {u.hostname}:{u.port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if token is not None:
            lines.append(f"{header}: {token}")
        lines += list(extra_headers)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        while b"\r\n\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                break
            self.buf += d
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        hl = head.decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/1\.1 (\d+)", hl[0] if hl else "")
        self.status = int(m.group(1)) if m else 0
        self.headers = {}
        for line in hl[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.body = b""
        if self.status == 101:
            want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
            self.accept_ok = self.headers.get("sec-websocket-accept") == want
        else:
            self.accept_ok = False
            n = int(self.headers.get("content-length", "0") or 0)
            while len(self.buf) < n:
                d = self.sock.recv(65536)
                if not d:
                    break
                self.buf += d
            self.body = self.buf[:n]

    def send(self, payload, op=0x2, fin=True):
        if isinstance(payload, str):
            payload = payload.encode()
        mask = os.urandom(4)
        n = len(payload)
        h = bytes([(0x80 if fin else 0) | op])
        if n < 126:
            h += bytes([0x80 | n])
        elif n < 65536:
            h += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            h += bytes([0x80 | 127]) + struct.pack(">Q", n)
        body = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        self.sock.sendall(h + mask + body)

    def text(self, s):
        self.send(s, op=0x1)

    def resize(self, rows, cols):
        self.text(json.dumps({"type": "resize", "rows": rows, "cols": cols}))

    def _frame(self, timeout):
        """One server frame (op, payload), or None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 2:
                b0, b1 = self.buf[0], self.buf[1]
                n, hl = b1 & 0x7F, 2
                if n == 126 and len(self.buf) >= 4:
                    n, hl = struct.unpack(">H", self.buf[2:4])[0], 4
                elif n == 127 and len(self.buf) >= 10:
                    n, hl = struct.unpack(">Q", self.buf[2:10])[0], 10
                if (b1 & 0x7F) < 126 or hl > 2:
                    if b1 & 0x80:
                        raise ValueError("a server frame was masked")
                    if len(self.buf) >= hl + n:
                        p = self.buf[hl:hl + n]
                        self.buf = self.buf[hl + n:]
                        return b0 & 0x0F, p
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                return None
            except (ssl.SSLError, OSError):
                d = b""
            if not d:
                raise Closed(self.close_code if self.close_code is not None else 1006, "connection dropped")
            self.buf += d

    def pump(self, timeout):
        """Read frames for up to timeout s (stops early at a close). Raises Closed."""
        f = self._frame(timeout)
        if f is None:
            return False
        op, p = f
        if op == 0x2 or op == 0x1:
            self.out += p
        elif op == 0x8:
            self.close_code = struct.unpack(">H", p[:2])[0] if len(p) >= 2 else 1005
            self.close_reason = p[2:].decode("utf-8", "replace")
            raise Closed(self.close_code, self.close_reason)
        return True

    def until(self, pattern, timeout=10):
        """Wait until the output (since the mark) matches pattern (bytes regex); the match or None."""
        deadline = time.monotonic() + timeout
        start = getattr(self, "mark", 0)
        while True:
            m = re.search(pattern, self.out[start:])
            if m:
                self.mark = start + m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.pump(left)

    def wait_close(self, timeout=10):
        """The close code the server sent within timeout (None: none)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.pump(deadline - time.monotonic())
        except Closed as c:
            return c.code
        return None

    def drop(self):
        """Hang up without a close frame."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
