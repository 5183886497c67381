#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# make bench (scripts/bench.sh), issue 18: a streamed /exec against the plain
# one, through the shim over HTTPS (pinned key, one keep-alive connection
# each), alternated so both see the same machine:
#   plain   the round trip of POST /exec {"command": "echo x"}
#   ttfb    POST /exec {"command": "echo x", "stream": true}: from the
#           request's last byte to the arrival of the stdout event
#   chunk   a command writing a line every 20 ms, each stamped with
#           CLOCK_REALTIME when written: arrival here minus that stamp
# Prints one JSON object. Usage: bench-stream.py URL PIN TOKEN_FILE [N]
import base64
import hashlib
import json
import socket
import ssl
import sys
import time
from urllib.parse import urlsplit

url, pin, token = sys.argv[1], sys.argv[2], open(sys.argv[3]).read().strip()
N = int(sys.argv[4]) if len(sys.argv) > 4 else 200
u = urlsplit(url)
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE


class Conn:
    def __init__(self):
        raw = socket.create_connection((u.hostname, u.port or 443))
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s = ctx.wrap_socket(raw)
        der = self.s.getpeercert(binary_form=True)
        # the pin is sha256//base64 of the SPKI: checked on the certificate's key
        from subprocess import run
        spki = run(["openssl", "x509", "-inform", "DER", "-pubkey", "-noout"], input=der, capture_output=True).stdout
        spki_der = run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=spki, capture_output=True).stdout
        want = pin.removeprefix("sha256//")
        if base64.b64encode(hashlib.sha256(spki_der).digest()).decode() != want:
            sys.exit("the shim's key does not match the pin")
        self.buf = b""

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        l, _, self.buf = self.buf.partition(b"\r\n")
        return l

    def _n(self, n):
        while len(self.buf) < n:
            self._fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def post(self, body):
        b = json.dumps(body).encode()
        self.s.sendall(b"POST /exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"X-Sidecar-Auth-Token: " + token.encode() + b"\r\nContent-Length: " +
                       str(len(b)).encode() + b"\r\n\r\n" + b)
        status = int(self._line().split()[1])
        hdr = {}
        while True:
            l = self._line()
            if not l:
                break
            k, _, v = l.decode().partition(":")
            hdr[k.strip().lower()] = v.strip()
        return status, hdr

    def body(self, hdr):
        return self._n(int(hdr["content-length"]))

    def chunks(self):
        """yields (arrival time, line) of a chunked NDJSON body"""
        pending = b""
        while True:
            n = int(self._line().split(b";")[0], 16)
            if n == 0:
                self._line()
                return
            pending += self._n(n)
            self._line()
            t = time.time()
            while b"\n" in pending:
                l, _, pending = pending.partition(b"\n")
                yield t, l


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else 0


plain_c, stream_c = Conn(), Conn()
plain, ttfb, chunk, errors = [], [], [], 0
for i in range(N + 10):
    t0 = time.perf_counter()
    st, h = plain_c.post({"command": "echo x"})
    plain_c.body(h)
    t1 = time.perf_counter()
    if st != 200:
        errors += 1
    t2 = time.perf_counter()
    st, h = stream_c.post({"command": "echo x", "stream": True})
    first = None
    for _, l in stream_c.chunks():
        if first is None and b'"stdout"' in l:
            first = time.perf_counter()
    if st != 200 or first is None:
        errors += 1
    if i >= 10:  # warm-up
        plain.append((t1 - t0) * 1e6)
        ttfb.append(((first or time.perf_counter()) - t2) * 1e6)
cmd = "for i in $(seq 1 25); do date +%s.%N; sleep 0.02; done"
for _ in range(4):
    st, h = stream_c.post({"command": cmd, "stream": True})
    for t, l in stream_c.chunks():
        ev = json.loads(l)
        if ev.get("type") == "stdout":
            for w in ev.get("data", "").split():
                chunk.append((t - float(w)) * 1e6)
print(json.dumps({"n": len(plain), "plain_p50_us": pct(plain, 50), "plain_p99_us": pct(plain, 99),
                  "ttfb_p50_us": pct(ttfb, 50), "ttfb_p99_us": pct(ttfb, 99),
                  "chunk_n": len(chunk), "chunk_p50_us": pct(chunk, 50), "chunk_p99_us": pct(chunk, 99),
                  "errors": errors}))
