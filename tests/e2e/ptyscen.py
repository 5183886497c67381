#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Scenarios of tests/e2e/test-pty.sh against the shim's /pty WebSocket;
each prints one JSON object of what it saw (the shell's own answers, read
from the kernel inside the exec), the bash test checks it.
  ptyscen.py main URL TOKEN    auth, tty, own devpts, resize, Ctrl-C, netns,
                               TIOCSTI, cgroup, seccomp, exit closes
  ptyscen.py hold URL TOKEN N  open N terminals (each runs `sleep 1000`),
                               print the close codes seen within 3 s, then
                               keep them open until stdin closes
  ptyscen.py idle URL TOKEN    open one, stay idle: when and how it closes
  ptyscen.py drop URL TOKEN    start `sleep 1000`, print, hang up (no close)"""
import json
import sys
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from ptyws import WS, Closed  # noqa: E402


def sh(ws, cmd, marker, timeout=10):
    """Run cmd in the shell; the text between the marker's two halves."""
    ws.text(f"echo {marker}S_$((6*7)); {cmd}; echo {marker}E_$((6*7))\n")
    m = ws.until(rb"(?s)" + marker.encode() + rb"S_42\r?\n(.*?)" + marker.encode() + rb"E_42", timeout)
    return m.group(1).decode("utf-8", "replace") if m else None


def main(url, token):
    r = {}
    r["status_noauth"] = WS(url, None).status
    r["status_badauth"] = WS(url, "not-the-token").status
    ws = WS(url, token, path="/pty?rows=30&cols=100")
    r["status"] = ws.status
    r["accept_ok"] = ws.accept_ok
    if ws.status != 101:
        print(json.dumps(r))
        return
    try:
        ws.text("stty -echo; PS1=''; echo READY_$((1+1))\n")
        r["ready"] = ws.until(rb"READY_2", 15) is not None
        r["tty"] = (sh(ws, "tty", "TTYEND") or "").strip()
        r["pts"] = (sh(ws, 'stat -c "%d %u" "$(tty)" /dev/pts/ptmx | tr "\\n" " "; ls /dev/pts | tr "\\n" " "',
                       "PTSEND") or "").strip()
        r["mounts"] = (sh(ws, "awk '$5 == \"/dev/pts\" {print $9, $10}' /proc/self/mountinfo | tr '\\n' ';'",
                          "MNTEND") or "").strip()
        r["size0"] = (sh(ws, "stty size", "SZ0") or "").strip()
        ws.resize(40, 120)
        r["size1"] = (sh(ws, "stty size", "SZ1") or "").strip()
        # a resize is also SIGWINCH to the foreground job
        ws.text("trap 'echo GOT_WINCH_$((3*3))' WINCH; sleep 2 & wait\n")
        time.sleep(0.3)
        ws.resize(50, 132)
        r["winch"] = ws.until(rb"GOT_WINCH_9", 5) is not None
        ws.text("trap - WINCH\n")
        r["net"] = (sh(ws, "awk -F: 'NR > 2 {gsub(/ /, \"\", $1); printf \"%s \", $1}' /proc/self/net/dev",
                       "NETEND") or "").strip()
        r["cgroup"] = (sh(ws, "cat /proc/self/cgroup | tr '\\n' ' '", "CGEND") or "").strip()
        r["status_fields"] = (sh(ws, "grep -E '^(Seccomp|NoNewPrivs|Uid):' /proc/self/status | tr '\\t\\n' '  '",
                                 "STEND") or "").strip()
        r["tiocsti"] = (sh(ws, "python3 -c 'import fcntl, termios, errno\n"
                               "try:\n fcntl.ioctl(0, termios.TIOCSTI, b\"x\"); print(\"TIOCSTI allowed\")\n"
                               "except OSError as e: print(\"TIOCSTI\", errno.errorcode[e.errno])'",
                           "STIEND") or "").strip()
        # Ctrl-C: the foreground job dies, the prompt is back at once
        ws.text("sleep 30; echo NOT_INTERRUPTED\n")
        time.sleep(0.5)
        t0 = time.monotonic()
        ws.send(b"\x03")
        ws.text("echo BACK_$((2+3))\n")
        r["ctrlc_back"] = ws.until(rb"BACK_5", 10) is not None
        r["ctrlc_s"] = round(time.monotonic() - t0, 3)
        r["ctrlc_interrupted"] = b"NOT_INTERRUPTED" not in ws.out
        # a binary frame is input too (the reference's send_bytes)
        ws.send(b"echo BIN_$((4+4))\n")
        r["binary_input"] = ws.until(rb"BIN_8", 5) is not None
        t0 = time.monotonic()
        ws.text("exit 7\n")
        r["exit_close"] = ws.wait_close(10)
        r["exit_close_s"] = round(time.monotonic() - t0, 3)
    except Closed as c:
        r["closed_early"] = [c.code, c.reason]
        r["tail"] = ws.out[-300:].decode("utf-8", "replace")
    print(json.dumps(r))


def hold(url, token, n):
    socks, codes = [], []
    for _ in range(n):
        ws = WS(url, token)
        if ws.status == 101:
            ws.text("sleep 1000\n")
        socks.append(ws)
    for ws in socks:
        if ws.status != 101:
            codes.append(ws.status)
            continue
        try:
            ws.pump(3 if ws is socks[-1] else 0.2)
            codes.append(None)
        except Closed as c:
            codes.append([c.code, c.reason])
    print(json.dumps({"codes": codes}), flush=True)
    sys.stdin.read()
    closes = []
    for ws in socks:
        if ws.status != 101:
            closes.append(ws.status)
        elif ws.close_code is not None:
            closes.append(ws.close_code)
        else:
            try:
                closes.append(ws.wait_close(5))
            except Exception as e:  # noqa: BLE001
                closes.append(str(e))
    print(json.dumps({"after": closes}), flush=True)


def idle(url, token):
    ws = WS(url, token)
    t0 = time.monotonic()
    code = ws.wait_close(30)
    print(json.dumps({"status": ws.status, "close": code, "after_s": round(time.monotonic() - t0, 2)}))


def drop(url, token):
    ws = WS(url, token)
    ws.text("stty -echo; echo STARTED_$((5*5)); sleep 1000\n")
    ok = ws.until(rb"STARTED_25", 15) is not None
    print(json.dumps({"status": ws.status, "started": ok}), flush=True)
    sys.stdin.read()
    ws.drop()


if __name__ == "__main__":
    mode, url, token = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "main":
        main(url, token)
    elif mode == "hold":
        hold(url, token, int(sys.argv[4]))
    elif mode == "idle":
        idle(url, token)
    elif mode == "drop":
        drop(url, token)
