#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A fake boxkite backend for /tool-call (the reference manager's
/api/v1/internal/tool-call), run by tests/contract/api.sh inside a sandbox
pod's own network namespace. Every request is appended to <dir>/requests
as one JSON line {path, content_type, body}; what it answers is read per
request from <dir>/mode:
  ok         200 {"result": "from-backend", "got": <the request body>}
  error500   500 "backend exploded"
  notjson    200 "this is not json"
With --tls (HTTPS): <dir>/server.{crt,key} (for localhost, from the test's
CA); in mode "wronghost" the certificate for evil.example (same CA), in
mode "selfsigned" a self-signed certificate for localhost."""
import argparse
import http.server
import json
import os
import ssl

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--dir", required=True)
ap.add_argument("--tls", action="store_true")
a = ap.parse_args()


def mode():
    try:
        return open(os.path.join(a.dir, "mode")).read().strip()
    except OSError:
        return "ok"


class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        try:
            got = json.loads(body)
        except ValueError:
            got = body.decode("latin-1")
        with open(os.path.join(a.dir, "requests"), "a") as f:
            f.write(json.dumps({"path": self.path, "content_type": self.headers.get("Content-Type"), "body": got}) + "\n")
        m = mode()
        if m == "error500":
            code, out, ctype = 500, b"backend exploded", "text/plain"
        elif m == "notjson":
            code, out, ctype = 200, b"this is not json", "text/plain"
        else:
            code, out, ctype = 200, json.dumps({"result": "from-backend", "got": got}).encode(), "application/json"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), H)
if a.tls:
    def ctx(name):
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        c.load_cert_chain(os.path.join(a.dir, name + ".crt"), os.path.join(a.dir, name + ".key"))
        return c
    good, wrong, selfsigned = ctx("server"), ctx("evil"), ctx("selfsigned")

    def pick(sock, server_name, _ctx):
        m = mode()
        sock.context = wrong if m == "wronghost" else selfsigned if m == "selfsigned" else good

    good.sni_callback = pick
    srv.socket = good.wrap_socket(srv.socket, server_side=True)
open(os.path.join(a.dir, "ready"), "w").close()
srv.serve_forever()
