#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The shim's /pty WebSocket against the fake agent's "pty" conversation
(tests/shim/fake-agent.py): prints TAP lines. Usage: ws.py URL TOKEN LABEL
[IDLE_S]: IDLE_S, the shim's connection timeout: the socket must outlive it."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../e2e"))
from ptyws import WS, Closed  # noqa: E402

url, token, label = sys.argv[1], sys.argv[2], sys.argv[3]
idle = float(sys.argv[4]) if len(sys.argv) > 4 else 0
fails = 0


def check(name, cond, detail=""):
    global fails
    if cond:
        print(f"ok - /pty ({label}): {name}")
    else:
        fails += 1
        print(f"not ok - /pty ({label}): {name}: {detail}")


w = WS(url, None)
check("no token: 401 auth_missing, no upgrade", w.status == 401 and b"auth_missing" in w.body, (w.status, w.body))
w = WS(url, "wrong")
check("wrong token: 401 auth_invalid", w.status == 401 and b"auth_invalid" in w.body, (w.status, w.body))
ws = WS(url, token, path="/pty?rows=30&cols=100")
check("101 with the right Sec-WebSocket-Accept", ws.status == 101 and ws.accept_ok, ws.status)
try:
    ws.send(b"hello\x00\xff")
    check("a binary frame reaches the agent as input, output comes back binary",
          ws.until(rb"echo:hello\x00\xff", 5) is not None, ws.out)
    ws.text("h\u00e9")
    check("a text frame is input too", ws.until("echo:h\u00e9".encode(), 5) is not None, ws.out)
    ws.resize(40, 120)
    check("the resize message becomes the agent's resize", ws.until(rb"size 40 120", 5) is not None, ws.out)
    ws.text('{"type":"resize","rows":40,"cols":120,"x":1}')
    check("any other JSON text is input", ws.until(rb'echo:\{"type"', 5) is not None, ws.out)
    ws.send(b"ab", fin=False)
    ws.send(b"cd", op=0x0)
    check("a fragmented message arrives whole", ws.until(rb"echo:abcd", 5) is not None, ws.out)
    ws.send(b"h\xc3", op=0x1, fin=False)
    ws.send(b"\xa9!", op=0x0)
    check("a text message whose UTF-8 character spans two fragments is input",
          ws.until("echo:h\u00e9!".encode(), 5) is not None, ws.out)
    ws.send(b"ping!", op=0x9)
    f = ws._frame(5)
    check("ping gets pong with its payload", f == (0xA, b"ping!"), f)
    if idle:
        time.sleep(idle + 1.5)
        ws.send(b"still")
        check(f"an idle terminal outlives the shim's connection timeout ({idle:g} s)",
              ws.until(rb"echo:still", 5) is not None, ws.out)
    ws.send(b"exit")
    code = ws.wait_close(5)
    check("the agent's exit event: close 1000", code == 1000, code)
except Closed as c:
    check("the session ran to its end", False, f"closed {c.code} {c.reason}")
ws = WS(url, token, path="/pty?rows=13")
code = ws.wait_close(5)
check("an agent refusal (429) closes 1013 with its sentence",
      code == 1013 and "pty.max_per_pod" in (ws.close_reason or ""), (code, ws.close_reason))
ws = WS(url, token)
# an unmasked client frame is a protocol error: close 1002
ws.sock.sendall(bytes([0x82, 0x02]) + b"hi")
code = ws.wait_close(5)
check("an unmasked client frame: close 1002", code == 1002, code)
# RFC 6455 8.1: a text frame that is not UTF-8 fails the connection: 1007
for what, bad in (("a lone 0xff", b"ab\xff"), ("an overlong '/'", b"\xc0\xaf"),
                  ("a surrogate (U+D800)", b"\xed\xa0\x80"), ("a sequence cut short", b"x\xe2\x82")):
    ws = WS(url, token)
    ws.send(b"before")
    got = ws.until(rb"echo:before", 5) is not None
    ws.send(bad, op=0x1)
    try:
        code = ws.wait_close(5)
    except Closed as c:
        code = c.code
    echoed = b"echo:" + bad in ws.out
    check(f"a text frame with {what}: close 1007, not relayed", got and code == 1007 and not echoed,
          (got, code, ws.close_reason, echoed))
sys.exit(1 if fails else 0)
