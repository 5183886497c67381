#!/usr/bin/env python3
# The reference sidecar's background processes (sidecar_processes.py and
# the Process* models of sidecar/main.py at cac4559), as its manager and
# process tools call them (src/boxkite/tools/process_tools.py), over pinned
# HTTPS with auth: one group of checks per route, each against the
# reference's shapes, status codes and error sentences.
import base64
import datetime
import json
import os
import subprocess
import tempfile
import time
from manager import *

SCALE = int(os.environ.get("BK_TIME_SCALE", "1"))
PUB = os.environ.get("BK_RECEIPT_PUB", "")
START_KEYS = {"process_id", "status", "started_at"}
OUTPUT_KEYS = {"status", "stdout_chunk", "next_offset", "truncated", "exit_code"}
INFO_KEYS = {"process_id", "command", "description", "status", "started_at", "exit_code", "expose_port"}


def start(command, max_runtime=30, **kw):
    return request("POST", "/process/start", {"command": command, "max_runtime_seconds": max_runtime, **kw})


def output(pid, since=None):
    q = "" if since is None else f"?since_offset={since}"
    return request("GET", f"/process/{pid}/output{q}")


def wait_output(pid, pred, secs=10):
    """Poll /output until pred(body) holds; the last body."""
    end = time.time() + secs * SCALE
    b = {}
    while time.time() < end:
        r = output(pid)
        b = r.json() if r.status_code == 200 else {}
        if pred(b):
            return b
        time.sleep(0.1)
    return b


def iso(s):
    try:
        datetime.datetime.fromisoformat(s)
        return True
    except (TypeError, ValueError):
        return False


configure("sess-proc")

# ---- auth: 401 on every route without the token ------------------------------------------
for m, p in (("POST", "/process/start"), ("GET", "/process/proc_x/output"), ("POST", "/process/proc_x/input"),
             ("POST", "/process/proc_x/stop"), ("GET", "/process"), ("POST", "/process/kill-all")):
    r = request(m, p, {} if m == "POST" else None, token=None)
    check(f"{m} {p} without the token: 401", r.status_code == 401, f"{r.status_code} {r.text[:200]}")
    r = request(m, p, {} if m == "POST" else None, token="wrong")
    check(f"{m} {p} with a wrong token: 401", r.status_code == 401, f"{r.status_code} {r.text[:200]}")

# ---- POST /process/start -------------------------------------------------------------------
r = start("cat", description="echo stdin")
b = r.json() if r.status_code == 201 else {}
check("start: 201 {process_id, status, started_at}", r.status_code == 201 and START_KEYS <= set(b), r.text[:300])
check("start: process_id proc_<32 hex>, status running, started_at ISO 8601",
      b.get("process_id", "").startswith("proc_") and len(b.get("process_id", "")) == 37 and
      b.get("status") == "running" and iso(b.get("started_at")), b)
cat = b.get("process_id", "proc_none")
r = request("POST", "/process/start", {"command": "true"})
check("start without max_runtime_seconds: 422 (the reference's model requires it)",
      r.status_code == 422 and isinstance(r.json().get("detail"), list), r.text[:300])
r = request("POST", "/process/start", {"max_runtime_seconds": 5})
check("start without command: 422", r.status_code == 422, r.text[:300])
for bad in (0, -1, 10 ** 7):
    r = start("true", max_runtime=bad)
    check(f"start max_runtime_seconds={bad}: 400 'max_runtime_seconds must be between 1 and N'",
          r.status_code == 400 and r.json().get("detail", "").startswith("max_runtime_seconds must be between 1 and "),
          r.text[:300])
r = start("true", expose_port=8080)
check("start with expose_port: 400 (boxkite never drops a process's own netns)", r.status_code == 400, r.text[:300])
r = request("GET", "/process/start")
check("GET /process/start: 405", r.status_code == 405, f"{r.status_code}")

# ---- POST /process/{id}/input and GET /process/{id}/output (next_offset paging) ------------
r = request("POST", f"/process/{cat}/input", {"data": "hello\n"})
check("input: 200 {bytes_written: 6}", r.status_code == 200 and r.json() == {"bytes_written": 6}, r.text[:300])
b = wait_output(cat, lambda b: "hello" in b.get("stdout_chunk", ""))
check("output: 200 {status, stdout_chunk, next_offset, truncated, exit_code}", OUTPUT_KEYS <= set(b), b)
check("output: cat echoed what was written (offset 6, running, no exit code)",
      b.get("stdout_chunk") == "hello\n" and b.get("next_offset") == 6 and b.get("truncated") is False and
      b.get("status") == "running" and b.get("exit_code") is None, b)
r = request("POST", f"/process/{cat}/input", {"data": "wörld\n"})
check("input: bytes_written counts UTF-8 bytes", r.status_code == 200 and r.json().get("bytes_written") == 7, r.text)
wait_output(cat, lambda b: b.get("next_offset") == 13)
r = output(cat, 6)
b = r.json() if r.status_code == 200 else {}
check("output since_offset=6: only the new bytes, next_offset 13",
      b.get("stdout_chunk") == "wörld\n" and b.get("next_offset") == 13, r.text[:300])
r = output(cat, 13)
check("output since_offset=next_offset: nothing new", r.status_code == 200 and r.json().get("stdout_chunk") == "",
      r.text[:300])
r = output(cat, "abc")
check("output since_offset=abc: 422 (query int)", r.status_code == 422 and isinstance(r.json().get("detail"), list),
      r.text[:300])
r = request("POST", f"/process/{cat}/input", {})
check("input without data: 422", r.status_code == 422, r.text[:300])
r = request("POST", f"/process/{cat}/output", {})
check("POST /process/{id}/output: 405", r.status_code == 405, f"{r.status_code}")

# ---- unknown ids: 404 "Process X not found" ---------------------------------------------------
for m, p in (("GET", "output"), ("POST", "input"), ("POST", "stop")):
    r = request(m, f"/process/proc_nosuch/{p}", {"data": "x"} if p == "input" else None)
    check(f"{p} of an unknown id: 404 'Process proc_nosuch not found'",
          r.status_code == 404 and r.json().get("detail") == "Process proc_nosuch not found", r.text[:300])
r = request("GET", "/process/proc_x/bogus")
check("an unknown /process path: 404", r.status_code == 404, f"{r.status_code}")

# ---- POST /process/{id}/stop -------------------------------------------------------------------
r = request("POST", f"/process/{cat}/stop")
b = r.json() if r.status_code == 200 else {}
check("stop: 200 {status: stopped, exit_code: -15} (ended by the stop's SIGTERM: Python's returncode)",
      set(b) >= {"status", "exit_code"} and b.get("status") == "stopped" and b.get("exit_code") == -15,
      r.text[:300])
r = request("POST", f"/process/{cat}/input", {"data": "late\n"})
check("input to a stopped process: 409 'Process X is not running'",
      r.status_code == 409 and r.json().get("detail") == f"Process {cat} is not running", r.text[:300])
b = output(cat).json()
check("output of the stopped process: still readable, status stopped",
      b.get("status") == "stopped" and b.get("stdout_chunk") == "hello\nwörld\n", b)

# ---- a process that exits by itself; max_runtime_seconds -------------------------------------
r = start("echo done; exit 3")
ex = r.json().get("process_id", "proc_none") if r.status_code == 201 else "proc_none"
b = wait_output(ex, lambda b: b.get("status") != "running")
check("a process that exits: status exited, its exit code, its output",
      b.get("status") == "exited" and b.get("exit_code") == 3 and b.get("stdout_chunk") == "done\n", b)
# ours: once ended, its exec's receipt (isolation read back, denied, signed)
isol = b.get("isolation") or {}
check("an ended process's output carries its exec's isolation receipt (fresh netns, lo only, 8 BPF programs)",
      isol.get("netns") == "fresh" and isol.get("interfaces") == ["lo"] and len(isol.get("bpf", [])) == 8 and
      isol.get("seccomp", {}).get("mode") == 2 and b.get("exec_id") and isinstance(b.get("denied"), list),
      str(b)[:300])
if PUB and isinstance(b.get("receipt"), dict):
    rc = b["receipt"]
    with tempfile.TemporaryDirectory() as d:
        open(f"{d}/doc", "w").write(rc["document"])
        open(f"{d}/sig", "wb").write(base64.b64decode(rc["signature"]))
        p = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", PUB, "-rawin", "-in", f"{d}/doc",
                            "-sigfile", f"{d}/sig"], capture_output=True, text=True)
    doc = json.loads(rc["document"])
    check("... and its signed receipt verifies with stock openssl (exit_code 3, its exec_id)",
          "Signature Verified Successfully" in p.stdout and doc.get("exit_code") == 3 and
          doc.get("exec_id") == b.get("exec_id"), p.stdout + p.stderr)
    t0, t1 = doc.get("started_at", ""), doc.get("ended_at", "")
    check(f"... its started_at is the exec's start, this year, not after its end ({t0} .. {t1})",
          t0[:4] == t1[:4] == time.strftime("%Y", time.gmtime()) and t0 <= t1, f"{t0} {t1}")
else:
    check("... and its signed receipt", False, f"PUB={PUB!r} receipt={str(b.get('receipt'))[:200]}")
r = request("POST", f"/process/{ex}/input", {"data": "x"})
check("input to an exited process: 409", r.status_code == 409, r.text[:300])
r = request("POST", f"/process/{ex}/stop")
check("stop of an exited process: 200 with its status and exit code",
      r.status_code == 200 and r.json() == {"status": "exited", "exit_code": 3}, r.text[:300])
r = start("sleep 600", max_runtime=1)
mr = r.json().get("process_id", "proc_none") if r.status_code == 201 else "proc_none"
b = wait_output(mr, lambda b: b.get("status") != "running", secs=6)
check("max_runtime_seconds=1: killed (status killed, exit_code -9: its SIGKILL) within seconds",
      b.get("status") == "killed" and b.get("exit_code") == -9, b)

# ---- output cap: oldest dropped, truncated, dropped bytes reported ----------------------------
r = start("head -c 300000 /dev/zero | tr '\\0' a")
fl = r.json().get("process_id", "proc_none") if r.status_code == 201 else "proc_none"
b = wait_output(fl, lambda b: b.get("status") != "running")
check("over the cap (256 KiB): next_offset counts every byte, the chunk the last 262144, truncated",
      b.get("next_offset") == 300000 and len(b.get("stdout_chunk", "")) == 262144 and b.get("truncated") is True,
      {k: (v if k != "stdout_chunk" else len(v)) for k, v in b.items()})
check("dropped bytes reported", b.get("dropped_bytes") == 300000 - 262144, b.get("dropped_bytes"))
r = output(fl, 299990)
check("since_offset within the kept bytes: not truncated",
      r.status_code == 200 and r.json().get("stdout_chunk") == "a" * 10 and r.json().get("truncated") is False,
      r.text[:200])

# ---- GET /process ---------------------------------------------------------------------------
r = request("GET", "/process")
b = r.json() if r.status_code == 200 else {}
procs = b.get("processes", [])
ids = [p.get("process_id") for p in procs]
check("list: 200 {processes: [...]} with every field of ProcessInfo",
      procs and all(INFO_KEYS <= set(p) for p in procs), r.text[:400])
check("list: the processes started, oldest first", ids[:2] == [cat, ex] and mr in ids and fl in ids, ids)
c = next((p for p in procs if p.get("process_id") == cat), {})
check("list: command, description, status, expose_port null",
      c.get("command") == "cat" and c.get("description") == "echo stdin" and c.get("status") == "stopped" and
      c.get("exit_code") == -15 and
      c.get("expose_port") is None and iso(c.get("started_at")), c)

# ---- 429 at the pod's maximum (4, the reference's default) ---------------------------------
sleepers = []
for i in range(4):
    r = start("sleep 600", max_runtime=60)
    if r.status_code == 201:
        sleepers.append(r.json()["process_id"])
check("4 processes run at once", len(sleepers) == 4, sleepers)
r = start("sleep 600", max_runtime=60)
check("the 5th: 429 'Session already has 4 background process(es) running (max 4)...'",
      r.status_code == 429 and r.json().get("detail", "").startswith(
          "Session already has 4 background process(es) running (max 4)"), r.text[:300])

# ---- POST /process/kill-all ---------------------------------------------------------------
r = request("POST", "/process/kill-all")
check("kill-all: 200 {killed: 4} (those still running)", r.status_code == 200 and r.json() == {"killed": 4},
      r.text[:300])
r = request("GET", "/process")
check("kill-all: the registry is empty", r.status_code == 200 and r.json() == {"processes": []}, r.text[:300])
r = output(sleepers[0] if sleepers else "proc_none")
check("kill-all: their output is gone (404)", r.status_code == 404, r.text[:200])
r = request("POST", "/process/kill-all")
check("kill-all again: {killed: 0}", r.status_code == 200 and r.json() == {"killed": 0}, r.text[:300])

# ---- /configure: a new session forgets (and kills) the previous one's ------------------------
r = start("sleep 600", max_runtime=60)
old = r.json().get("process_id", "proc_none") if r.status_code == 201 else "proc_none"
configure("sess-proc-2")
r = output(old)
check("after /configure of a new session: the old process is unknown (404)", r.status_code == 404, r.text[:200])
r = request("GET", "/process")
check("after /configure: no process listed", r.status_code == 200 and r.json() == {"processes": []}, r.text[:200])
done()
