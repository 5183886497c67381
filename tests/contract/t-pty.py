#!/usr/bin/env python3
# The reference sidecar's terminal routes (sidecar/sidecar_pty.py and the
# Pty* models of sidecar/main.py at cac4559), over pinned HTTPS with auth:
#   POST /pty-exec {command, input_bytes (base64), timeout_seconds}
#     -> 200 {output, exit_code, timed_out}; 400 {detail} for an empty or
#     unparsable command or bad base64; 401 without the token
#   WS /pty: the terminal's output as binary frames, input from binary or
#     text frames, closed (1000) once the shell ends; the token checked
#     before any upgrade (401). Ours on top: the resize text message.
# (tests/contract/api.sh starts the agent with pty.exec_enabled: the
# reference's BOXKITE_AGENT_PTY_ENABLED; off, it is a 404 there and here:
# tests/e2e/test-pty.sh.)
import base64
import os
import sys
from manager import *

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../e2e"))
from ptyws import WS, Closed  # noqa: E402

# ---- POST /pty-exec, as pty_tools.py's manager.pty_exec sends it -------------------------
r = request("POST", "/pty-exec", {"command": "tty", "input_bytes": "", "timeout_seconds": 30})
b = r.json() if r.status_code == 200 else {}
check("/pty-exec: 200 with exactly output, exit_code, timed_out", r.status_code == 200 and
      sorted(b) == ["exit_code", "output", "timed_out"], f"{r.status_code} {r.text[:300]}")
check("/pty-exec: output str, exit_code int, timed_out bool",
      isinstance(b.get("output"), str) and isinstance(b.get("exit_code"), int) and b.get("timed_out") is False, b)
check("/pty-exec: a real terminal (tty names a pts)", b.get("output", "").startswith("/dev/pts/"), b)
r = request("POST", "/pty-exec", {"command": "cat", "input_bytes": base64.b64encode(b"typed input\n\x04").decode(),
                                  "timeout_seconds": 10})
check("/pty-exec: input_bytes are written to the terminal", r.status_code == 200 and
      r.json()["output"].count("typed input") >= 1 and r.json()["exit_code"] == 0, r.text[:300])
r = request("POST", "/pty-exec", {"command": "sleep 20", "timeout_seconds": 1})
b = r.json() if r.status_code == 200 else {}
check("/pty-exec: a command past timeout_seconds: 200, timed_out true, exit_code null",
      r.status_code == 200 and b.get("timed_out") is True and b.get("exit_code") is None, r.text[:300])
r = request("POST", "/pty-exec", {"command": "sh -c 'exit 3'"})
check("/pty-exec: the command's exit code", r.status_code == 200 and r.json().get("exit_code") == 3, r.text[:300])
for body, want in (({"command": ""}, "command is required"), ({"command": "  "}, "command is required"),
                   ({"command": "echo 'x"}, "Could not parse command: No closing quotation"),
                   ({"command": "cat", "input_bytes": "not base64!"}, "input_bytes must be valid base64")):
    r = request("POST", "/pty-exec", body)
    check(f"/pty-exec {body}: 400 {want!r}", r.status_code == 400 and r.json().get("detail") == want,
          f"{r.status_code} {r.text[:200]}")
r = request("POST", "/pty-exec", {"command": "tty"}, token=None)
check("/pty-exec without the token: 401", r.status_code == 401, r.status_code)
r = request("POST", "/pty-exec", {"command": "tty"}, token="wrong")
check("/pty-exec with a wrong token: 401", r.status_code == 401, r.status_code)

# ---- WS /pty ---------------------------------------------------------------------------
check("/pty without the token: 401, no upgrade", WS(URL, None).status == 401)
check("/pty with a wrong token: 401, no upgrade", WS(URL, "wrong").status == 401)
ws = WS(URL, TOKEN)
check("/pty: 101 and a valid Sec-WebSocket-Accept", ws.status == 101 and ws.accept_ok, ws.status)
kinds = set()
try:
    ws.send(b"stty -echo; echo BYTES_$((20+1))\n")          # the reference test's send_bytes
    ok1 = ws.until(rb"BYTES_21", 15) is not None
    ws.text("echo TEXT_$((20+2))\n")                        # a text frame is input too
    ok2 = ws.until(rb"TEXT_22", 10) is not None
    ws.resize(33, 77)
    ws.text("stty size\n")
    ok3 = ws.until(rb"33 77", 10) is not None
    check("/pty: binary frames are input, output comes back", ok1)
    check("/pty: text frames are input", ok2)
    check("/pty: our resize message {type: resize, rows, cols}", ok3)
    ws.text("exit\n")
    code = ws.wait_close(10)
    check("/pty: the shell's exit closes the socket (1000)", code == 1000, code)
except Closed as c:
    check("/pty: the session ran to its exit", False, f"closed early {c.code} {c.reason}")
done()
