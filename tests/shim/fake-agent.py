#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for boxkite-agent, for testing boxkite-shim on its own.

Speaks the framing of agent/lib/proto.h on an AF_UNIX SOCK_SEQPACKET socket:
each record is a 16-byte little-endian header (u32 magic 0x314b5442,
u16 version 1, u16 flags with bit0 = MORE, u32 payload length, u32 reserved
0) followed by at most 64 KiB of payload; a message is a JSON object split
over records.

It answers every request and keeps, in --state DIR:
  count      number of non-ping requests received (rejected requests must
             never change it)
  pings      number of ping requests
  last.json  the last non-ping request, as received
  ready      written once the socket is listening

Test hooks, read from args["fake"] (the real agent has no such thing):
  sleep: seconds to wait before answering
  status: HTTP status to answer with
  big: answer with a stdout of that many bytes (multi-record response)
  malformed: "notjson" | "nobody" | "badstatus" | "badframe" | "close"
"""
import argparse
import base64
import json
import os
import signal
import socket
import struct
import sys
import threading
import time

MAGIC = 0x314B5442
VERSION = 1
MORE = 0x1
HDR = struct.Struct("<IHHII")
CHUNK_MAX = 64 * 1024
REQ_MAX = 33 * 1024 * 1024  # lib/proto.h BK_REQ_MAX

lock = threading.Lock()


class ProtoError(Exception):
    pass


def recv_msg(conn):
    buf = bytearray()
    first = True
    while True:
        rec, _, flags, _ = conn.recvmsg(HDR.size + CHUNK_MAX + 1)
        if not rec:
            if first:
                return None
            raise ProtoError("eof inside a message")
        first = False
        if flags & socket.MSG_TRUNC:
            raise ProtoError("truncated record")
        if len(rec) < HDR.size:
            raise ProtoError("short header")
        magic, ver, fl, ln, res = HDR.unpack_from(rec)
        if magic != MAGIC or ver != VERSION or res != 0 or fl & ~MORE:
            raise ProtoError("bad header")
        if ln > CHUNK_MAX or ln != len(rec) - HDR.size:
            raise ProtoError("bad length")
        buf += rec[HDR.size:]
        if len(buf) > REQ_MAX:
            raise ProtoError("message too large")
        if not fl & MORE:
            return bytes(buf)


def send_msg(conn, payload):
    off = 0
    while True:
        chunk = payload[off:off + CHUNK_MAX]
        more = off + len(chunk) < len(payload)
        conn.sendmsg([HDR.pack(MAGIC, VERSION, MORE if more else 0, len(chunk), 0), chunk])
        off += len(chunk)
        if not more:
            return


def bump(path):
    with lock:
        try:
            with open(path) as f:
                n = int(f.read().strip() or 0)
        except FileNotFoundError:
            n = 0
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{n + 1}\n")
        os.replace(tmp, path)


def answer(req, state):
    op = req.get("op")
    args = req.get("args")
    if op == "ping":
        bump(os.path.join(state, "pings"))
        return {"status": 200, "body": {"pong": True}}, None
    bump(os.path.join(state, "count"))
    with lock:
        with open(os.path.join(state, "last.json"), "w") as f:
            json.dump(req, f)
    fake = args.get("fake", {}) if isinstance(args, dict) else {}
    if not isinstance(fake, dict):
        fake = {}
    if fake.get("sleep"):
        time.sleep(float(fake["sleep"]))
    mal = fake.get("malformed")
    if mal:
        return None, mal
    if op == "metrics":
        return {"status": 200, "content_type": "text/plain; version=0.0.4",
                "body": {"text": "# TYPE boxkite_execs_total counter\nboxkite_execs_total 7\n"}}, None
    if op == "isolation":
        return {"status": 200, "body": {"netns": "fresh", "interfaces": ["lo"]}}, None
    body = {"op": op, "args": args}
    if fake.get("big"):
        body["stdout"] = "x" * int(fake["big"])
    return {"status": int(fake.get("status", 200)), "body": body}, None


def pty(conn, args, state):
    """op "pty" (agent/api/op_pty.c's conversation): rows 13 is refused
    (429, as over pty.max_per_pod); input comes back as output prefixed
    "echo:", a resize as "size R C"; input "exit" ends it (exit 0); the
    shim hanging up is recorded in state/pty-gone."""
    with lock:
        with open(os.path.join(state, "pty.json"), "w") as f:
            json.dump(args, f)
    if args.get("rows") == 13:
        send_msg(conn, json.dumps({"status": 429, "body": {"detail": "this sandbox already has 4 terminals open "
                                                           "(pty.max_per_pod)", "code": "too_many_terminals"}}).encode())
        return
    out = lambda b: send_msg(conn, json.dumps({"status": 200, "more": True, "body": {
        "type": "output", "data_base64": base64.b64encode(b).decode()}}).encode())
    send_msg(conn, json.dumps({"status": 200, "more": True, "body": {"type": "start", "exec_id": "fake"}}).encode())
    while True:
        try:
            msg = recv_msg(conn)
        except (ProtoError, OSError):
            msg = None
        if msg is None:
            bump(os.path.join(state, "pty-gone"))
            return
        m = json.loads(msg)
        if m.get("type") == "resize":
            out(f"size {m['rows']} {m['cols']}".encode())
        elif m.get("type") == "input":
            data = base64.b64decode(m["data_base64"])
            if data == b"exit":
                send_msg(conn, json.dumps({"status": 200, "body": {"type": "exit", "exit_code": 0}}).encode())
                return
            out(b"echo:" + data)


def serve(conn, state):
    with conn:
        while True:
            try:
                msg = recv_msg(conn)
            except (ProtoError, OSError) as e:
                print(f"fake-agent: dropping connection: {e}", file=sys.stderr)
                return
            if msg is None:
                return
            try:
                req = json.loads(msg)
                if not isinstance(req, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                print(f"fake-agent: bad request json: {e}", file=sys.stderr)
                return
            if req.get("op") == "pty":
                pty(conn, req.get("args") or {}, state)
                return
            resp, mal = answer(req, state)
            try:
                if mal == "close":
                    return
                if mal == "notjson":
                    send_msg(conn, b"this is not json")
                elif mal == "nobody":
                    send_msg(conn, b'{"status":200}')
                elif mal == "badstatus":
                    send_msg(conn, b'{"status":"200","body":{}}')
                elif mal == "badframe":
                    conn.sendmsg([HDR.pack(0xDEADBEEF, VERSION, 0, 2, 0), b"{}"])
                elif mal:
                    send_msg(conn, b"{}")
                else:
                    send_msg(conn, json.dumps(resp).encode())
            except OSError as e:
                print(f"fake-agent: send failed: {e}", file=sys.stderr)
                return


def main():
    sys.setrecursionlimit(20000)  # deeply nested test bodies
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--state", required=True)
    a = ap.parse_args()
    os.makedirs(a.state, exist_ok=True)
    try:
        os.unlink(a.socket)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(a.socket)
    srv.listen(64)
    # Tells the test the socket is live (the socket file alone may be a
    # stale one left by a killed predecessor).
    with open(os.path.join(a.state, "ready"), "w") as f:
        f.write(f"{os.getpid()}\n")

    def stop(*_):
        try:
            os.unlink(a.socket)
        except OSError:
            pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, a.state), daemon=True).start()


if __name__ == "__main__":
    main()
